#include <kfmm/core/fault_injection.hpp>
#include <kfmm/core/hilbert.hpp>
#include <kfmm/core/sort.hpp>
#include <kfmm/core/tree.hpp>
#include <kfmm/fmm/distributed_tree.hpp>
#include <kfmm/fmm/dual_tree_walk.hpp>
#include <kfmm/fmm/expansion_pass.hpp>
#include <kfmm/fmm/node_geometry.hpp>
#include <kfmm/fmm/relative_opening.hpp>
#include <kfmm/fmm/solver.hpp>

#include <kfmm/core/format.hpp>

#include <cmath>
#include <cstdio>
#include <limits>

namespace kfmm {

class ForceSolver::Impl {
 public:
  Impl(Context const& context, FMMConfig const& config) : context_(context), config_(config) {
    config_.validate();
    pass_ = make_expansion_pass(config_.order, config_.precision, config_.softening, config_.softening_length);
  }

  void compute(Particles<MemorySpace>& particles) {
    bool const known = estimate_applies(particles);
    if (known) carry_estimate(estimate_, particles.num);
    compute_forces(particles, known);
    if (relative()) remember_estimate(particles.id, acceleration_, particles.num);
  }

  // compute() without the acceleration estimate's bookkeeping. `known`: carried_ holds |a| of
  // an earlier evaluation for each of `particles` (collectively agreed).
  void compute_forces(Particles<MemorySpace>& particles, bool known) {
    stats_ = ForceStats{};
    Kokkos::Timer total;
    Kokkos::Timer timer;
    auto phase = [&](char const* name) {
      space_.fence();
      stats_.phases.emplace_back(name, timer.seconds());
      timer.reset();
    };
    agree_on_error(context_, check_input(particles));

    BoundingCube const cube = global_cube(particles);
    if (context_.size() > 1) {
      distributed_.decompose(space_, context_, cube, config_.leaf_size, particles, keys_, known ? &carried_ : nullptr,
                             config_.domain_tolerance);
      stats_.domains_kept = distributed_.domains_kept();
      phase("domain");
    }
    // The decomposition may give a rank more particles than it had; that and a tree beyond
    // the int index limit fail on one rank, so they are agreed (in one step) before the next
    // collective.
    std::string const too_many =
        particles.num > max_rank_particles
            ? fmt::format("after the domain decomposition rank {} holds {} particles, more than the per-rank limit {} "
                          "(int indices of trees and pair lists); use more MPI ranks",
                          context_.rank(), particles.num, max_rank_particles)
            : std::string();
    int const n = too_many.empty() ? static_cast<int>(particles.num) : 0;
    PassParticles pass_particles{particles.pos, particles.mass, n, n};
    // The local stages from the sort to this rank's packed top-tree roots can fail on one rank
    // (a full device, a tree beyond the int limits): agreed in one step before the next collective.
    auto const local_stages = [&] {
      if (!too_many.empty()) fail("{}", too_many);
      fault_injection::point("force.sort");
      sort_locally(particles, cube, n, known);
      phase("sort");
      fault_injection::point("force.tree");
      build_tree(space_, keys_, n, config_.leaf_size, distributed_.forced_split(), tree_);
      geometry_.power_exponent = relative() ? config_.order + 1 : 0;
      compute_node_geometry(space_, tree_, particles.pos, particles.mass, config_.centre, cube, geometry_);
      phase("tree");
      fault_injection::point("force.upward");
      pass_->upward(space_, tree_, geometry_, pass_particles);
      phase("upward");
      if (context_.size() > 1) distributed_.prepare_top_tree(space_, tree_, geometry_, *pass_);
    };
    if (context_.size() > 1)
      collectively(context_, local_stages);
    else
      local_stages();

    int root = n > 0 ? 0 : -1;
    DualTreeWalk::ImportChildren import;
    if (context_.size() > 1) {
      root = distributed_.assemble_top_tree(space_, context_, config_.centre, cube, tree_, geometry_, *pass_);
      import = [this](ScalarView<int> const& sources, int count, std::string const& error) {
        int const before = tree_.num_nodes;
        bool const more =
            distributed_.import_children(space_, context_, sources, count, tree_, geometry_, *pass_, error);
        if (relative()) update_multipole_powers(before);
        return more;
      };
      phase("exchange");
    }
    if (relative()) update_multipole_powers(0);
    if (static_cast<int>(phi_.extent(0)) < n) {
      Kokkos::resize(phi_, n);
      Kokkos::resize(grad_, n);
    }
    // Walk, M2L, L2L + L2P and P2P into phi_ and grad_ (every local particle's values are
    // overwritten by L2P, then P2P adds), then `finish`. The local stages after the last import
    // are agreed in one step on several ranks: the caller's next collective may be anywhere.
    auto evaluate = [&](OpeningTest const& test, bool timed, auto const& finish) {
      auto step = [&](char const* name) {
        if (timed) phase(name);
      };
      walk_.run(space_, tree_, geometry_, test, root, m2l_, p2p_, import);
      if (context_.size() > 1)
        pass_particles = distributed_.import_leaf_particles(space_, context_, p2p_, tree_, particles);
      step("walk");
      auto const local = [&] {
        fault_injection::point("force.m2l");
        pass_->translate(space_, geometry_, m2l_);
        step("m2l");
        fault_injection::point("force.downward");
        pass_->evaluate_locals(space_, tree_, geometry_, pass_particles, phi_, grad_);
        step("downward");
        fault_injection::point("force.p2p");
        pass_->add_near_field(space_, tree_, geometry_, p2p_, pass_particles, phi_, grad_);
        step("p2p");
        finish();
      };
      if (context_.size() > 1)
        collectively(context_, local);
      else
        local();
    };
    double const reach = config_.softening == SofteningKind::Spline ? 2.8 * config_.softening_length : 0.0;
    OpeningTest test{config_.theta, reach, config_.order};
    if (relative()) {
      // |a| of every particle: from the previous call, or else from a coarser evaluation now.
      auto const allowance = [&] {
        relative_opening_allowance(space_, tree_, geometry_, carried_, config_.tolerance / std::fabs(config_.G),
                                   tree_.num_nodes, allowed_);
      };
      if (!known) {
        evaluate(OpeningTest{config_.estimate_theta, reach}, false, [&] {
          store_estimate(n);
          phase("estimate");
          allowance();
        });
      } else {
        allowance();
      }
      distributed_.combine_shared_minimum(space_, context_, allowed_);
      test.allowed = allowed_;
    }
    evaluate(test, true, [&] {
      fault_injection::point("force.output");
      write_results(particles, n);
      if (context_.size() > 1) measure_costs(n);
      phase("output");
    });
    if (statistics_)
      collect_counts(particles, n);
    else
      distributed_.fill_local_stats(stats_);
    stats_.total_seconds = total.seconds();
  }

  void compute_in_input_order(Particles<MemorySpace> const& particles, ScalarView<double>& potential,
                              Vec3View<double>& acceleration) {
    // Tag every particle with its input index, compute in owner order, send results back.
    Particles<MemorySpace> work(particles.num);
    work.assign(particles);
    auto const original_ids = Kokkos::View<std::uint64_t*, MemorySpace>("kfmm::solver::original_ids", particles.num);
    Kokkos::deep_copy(space_, original_ids, Kokkos::subview(particles.id, Kokkos::make_pair(std::size_t(0), particles.num)));
    std::uint64_t const rank_bits = std::uint64_t(context_.rank()) << 40;
    auto work_id = work.id;
    Kokkos::parallel_for(
        "kfmm::solver::tag_input", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, particles.num),
        KOKKOS_LAMBDA(std::size_t i) { work_id(i) = rank_bits | std::uint64_t(i); });
    if (particles.num >= (std::size_t(1) << 40))
      fail("compute_in_input_order supports up to 2^40 particles per rank, rank {} has {}", context_.rank(), particles.num);
    // The estimate belongs to the caller's particles (ids, input order), as work is.
    bool const known = estimate_applies(particles);
    if (known) carry_estimate(estimate_, particles.num);
    compute_forces(work, known);
    potential = ScalarView<double>("kfmm::solver::potential_input_order", particles.capacity());
    acceleration = Vec3View<double>("kfmm::solver::acceleration_input_order", particles.capacity());
    // The cost weights (measured on several ranks) go back too: the next call gets the particles
    // in this input order. Every rank takes part, also one that owned none of them.
    bool const weighted = context_.size() > 1;
    ScalarView<double> costs;
    if (weighted) costs = ScalarView<double>("kfmm::solver::costs", particles.num);
    distributed_.return_results(space_, context_, work, potential_, acceleration_, cost_weights(), potential,
                                acceleration, costs);
    fill_padding(potential, acceleration, particles.num);
    if (weighted) use_cost_weights(costs, particles.num);
    if (relative()) remember_estimate(particles.id, acceleration, particles.num);
  }

  bool relative() const { return config_.opening == OpeningCriterion::Relative; }

  // The multipole powers of the nodes from `first` on (their multipoles are set), keeping those
  // before it.
  void update_multipole_powers(int first) {
    std::size_t const nodes = tree_.num_nodes;
    std::size_t const degrees = config_.order + 1;
    auto& power = geometry_.multipole_power;
    if (power.extent(0) < nodes || power.extent(1) != degrees) {
      std::size_t const grown = power.extent(0) + power.extent(0) / 2 + 16;
      if (power.extent(1) != degrees) power = Kokkos::View<double**, MemorySpace>("kfmm::solver::multipole_power", 0, degrees);
      Kokkos::resize(power, nodes > grown ? nodes : grown, degrees);
    }
    pass_->multipole_powers(space_, first, tree_.num_nodes - first, power);
  }

  // Whether every rank holds an acceleration estimate for exactly these particles (same ids in
  // the same order). Collective in the relative criterion only.
  bool estimate_applies(Particles<MemorySpace> const& particles) {
    if (!relative()) return false;
    // (An inconsistent num is reported by check_input, after this.)
    int local = have_estimate_ && estimate_count_ == particles.num && particles.num <= particles.capacity() ? 1 : 0;
    if (local) {
      auto const ids = particles.id;
      auto const known_ids = estimate_ids_;
      std::size_t mismatches = 0;
      Kokkos::parallel_reduce(
          "kfmm::solver::match_estimate", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, particles.num),
          KOKKOS_LAMBDA(std::size_t i, std::size_t & count) { count += ids(i) != known_ids(i) ? 1 : 0; }, mismatches);
      local = mismatches == 0 ? 1 : 0;
    }
    int all = 0;
    MPI_Allreduce(&local, &all, 1, MPI_INT, MPI_MIN, context_.comm());
    return all == 1;
  }

  // carried_ = the first n values of `magnitude` (which may be estimate_ itself).
  void carry_estimate(ScalarView<double> const& magnitude, std::size_t n) {
    ScalarView<double> copy(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::solver::carried_estimate"), n);
    Kokkos::deep_copy(space_, copy, Kokkos::subview(magnitude, Kokkos::make_pair(std::size_t(0), n)));
    carried_ = copy;
  }

  // Keeps |acceleration| and the ids of the first n particles for the next call.
  void remember_estimate(ScalarView<std::uint64_t> const& ids, Vec3View<double> const& acceleration, std::size_t n) {
    grow_preserving(estimate_, n);
    grow_preserving(estimate_ids_, n);
    auto const magnitude = estimate_;
    auto const known_ids = estimate_ids_;
    Kokkos::parallel_for(
        "kfmm::solver::remember_estimate", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, n),
        KOKKOS_LAMBDA(std::size_t i) {
          magnitude(i) = compat::math::sqrt(acceleration(i, 0) * acceleration(i, 0) +
                                            acceleration(i, 1) * acceleration(i, 1) +
                                            acceleration(i, 2) * acceleration(i, 2));
          known_ids(i) = ids(i);
        });
    estimate_count_ = n;
    have_estimate_ = true;
  }

  ScalarView<double> acceleration_estimate() const {
    if (!have_estimate_) return ScalarView<double>("kfmm::solver::no_estimate", 0);
    return Kokkos::subview(estimate_, Kokkos::make_pair(std::size_t(0), estimate_count_));
  }

  void set_acceleration_estimate(Particles<MemorySpace> const& particles, ScalarView<double> const& magnitude) {
    std::size_t const num = particles.num;
    if (magnitude.extent(0) < num)
      fail("set_acceleration_estimate: {} values for {} particles on rank {}; give one |a| per particle",
           magnitude.extent(0), num, context_.rank());
    std::size_t const bad = first_negative_or_not_finite(magnitude, num);
    if (bad < num)
      fail("set_acceleration_estimate: |a| = {} (particle {} on rank {}) is not finite and >= 0",
           Kokkos::create_mirror_view_and_copy(HostSpace(), Kokkos::subview(magnitude, bad))(), bad, context_.rank());
    grow_preserving(estimate_, num);
    grow_preserving(estimate_ids_, num);
    auto const range = Kokkos::make_pair(std::size_t(0), num);
    Kokkos::deep_copy(space_, Kokkos::subview(estimate_, range), Kokkos::subview(magnitude, range));
    Kokkos::deep_copy(space_, Kokkos::subview(estimate_ids_, range), Kokkos::subview(particles.id, range));
    estimate_count_ = num;
    have_estimate_ = true;
  }

  bool has_acceleration_estimate() const { return have_estimate_; }

  void forget_acceleration_estimate() {
    have_estimate_ = false;
    estimate_count_ = 0;
  }

  ScalarView<double> cost_weights() const {
    return Kokkos::subview(costs_, Kokkos::make_pair(std::size_t(0), weights_count_));
  }

  void set_cost_weights(ScalarView<double> const& weights, std::size_t num) {
    if (weights.extent(0) < num)
      fail("set_cost_weights: {} weights for {} particles on rank {}; give one weight per particle", weights.extent(0),
           num, context_.rank());
    std::size_t const bad = first_negative_or_not_finite(weights, num);
    if (bad < num)
      fail("set_cost_weights: weight {} (particle {} on rank {}) is not finite and >= 0",
           Kokkos::create_mirror_view_and_copy(HostSpace(), Kokkos::subview(weights, bad))(), bad, context_.rank());
    use_cost_weights(weights, num);
  }

  ScalarView<double> potential() const { return potential_; }
  Vec3View<double> acceleration() const { return acceleration_; }
  ForceStats const& stats() const { return stats_; }
  void collect_statistics(bool on) { statistics_ = on; }
  FMMConfig const& config() const { return config_; }
  Context const& context() const { return context_; }

  // The steps below are public only because nvcc allows device lambdas in public member
  // functions only; ForceSolver::Impl is not part of the API.
  // The first of values[0, num) that is not finite and ≥ 0; num when there is none.
  std::size_t first_negative_or_not_finite(ScalarView<double> const& values, std::size_t num) const {
    std::size_t bad = num;
    Kokkos::parallel_reduce(
        "kfmm::solver::check_values", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, num),
        KOKKOS_LAMBDA(std::size_t i, std::size_t & first) {
          if (!(compat::math::isfinite(values(i)) && values(i) >= 0) && i < first) first = i;
        },
        Kokkos::Min<std::size_t>(bad));
    return bad;
  }

  // Problems with the input that would derail the collective steps, found before any of them.
  std::string check_input(Particles<MemorySpace> const& particles) const {
    if (particles.num > particles.capacity())
      return fmt::format("rank {}: num = {} exceeds the capacity {} of the particle Views; call reserve()/resize()",
                         context_.rank(), particles.num, particles.capacity());
    if (particles.num > max_rank_particles)
      return fmt::format("{} particles on rank {} exceed the per-rank limit {} (int indices of trees and pair lists); "
                         "use more MPI ranks",
                         particles.num, context_.rank(), max_rank_particles);
    auto const pos = particles.pos;
    auto const mass = particles.mass;
    std::size_t first_bad = particles.num;
    Kokkos::parallel_reduce(
        "kfmm::solver::check_input", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, particles.num),
        KOKKOS_LAMBDA(std::size_t i, std::size_t & bad) {
          bool const ok = compat::math::isfinite(pos(i, 0)) && compat::math::isfinite(pos(i, 1)) &&
                          compat::math::isfinite(pos(i, 2)) && compat::math::isfinite(mass(i)) && mass(i) >= 0;
          if (!ok && i < bad) bad = i;
        },
        Kokkos::Min<std::size_t>(first_bad));
    if (first_bad < particles.num) {
      auto const one = Kokkos::make_pair(first_bad, first_bad + 1);
      auto const p = Kokkos::create_mirror_view_and_copy(HostSpace(), Kokkos::subview(pos, one, Kokkos::ALL));
      auto const m = Kokkos::create_mirror_view_and_copy(HostSpace(), Kokkos::subview(mass, one));
      auto const id = Kokkos::create_mirror_view_and_copy(HostSpace(), Kokkos::subview(particles.id, one));
      return fmt::format("particle {} (id {}, rank {}) has position ({}, {}, {}) and mass {}; positions must be finite "
                         "and masses finite and ≥ 0",
                         first_bad, id(0), context_.rank(), p(0, 0), p(0, 1), p(0, 2), m(0));
    }
    return {};
  }

  // What one M2L costs in P2P pairs: its multiply–adds grow as C(p + 6, 6), and the factor
  // fits the P2P and M2L rates of perf_tests (figures in docs/cost_model.md). The weights only
  // steer the balance, which the measured imbalance reports.
  static double m2l_cost_in_pairs(int order) {
    double binomial = 1;
    for (int k = 1; k <= 6; ++k) binomial = binomial * (order + k) / k;
    return 0.23 * binomial;
  }

  // Per-particle cost of this evaluation, in units of one P2P pair: the sources of its leaf's
  // P2P lists plus the leaf's M2L (each worth m2l_cost_in_pairs) shared by its particles (M2L
  // into inner nodes is left out). The next decomposition balances these weights; their
  // per-rank sums give the load imbalance of this evaluation.
  void measure_costs(int n) {
    double const m2l_cost = m2l_cost_in_pairs(config_.order);
    if (static_cast<int>(leaf_cost_.extent(0)) < tree_.num_nodes) Kokkos::resize(leaf_cost_, tree_.num_nodes);
    if (static_cast<int>(costs_.extent(0)) < n) Kokkos::resize(costs_, n);
    Kokkos::deep_copy(space_, leaf_cost_, 0.0);
    auto cost = leaf_cost_;
    auto const pbegin = tree_.particle_begin;
    auto const pend = tree_.particle_end;
    for (PairLists const* lists : {&p2p_, &m2l_}) {
      bool const near = lists == &p2p_;
      auto const target = lists->target;
      auto const offset = lists->offset;
      auto const source = lists->source;
      for (int s = 0; s < lists->num_segments(); ++s)
        Kokkos::parallel_for(
            "kfmm::solver::leaf_costs",
            Kokkos::RangePolicy<ExecutionSpace>(space_, lists->segment_begin[s], lists->segment_begin[s + 1]),
            KOKKOS_LAMBDA(int g) {
              int const a = target(g);
              double const share = m2l_cost / compat::math::max(1, pend(a) - pbegin(a));
              double c = 0;
              for (int e = offset(g); e < offset(g + 1); ++e)
                c += near ? double(pend(source(e)) - pbegin(source(e))) : share;
              cost(a) += c;
            });
    }
    auto particle_cost = costs_;
    auto const cbegin = tree_.child_begin;
    auto const cend = tree_.child_end;
    auto const flags = geometry_.flags;
    Kokkos::parallel_for(
        "kfmm::solver::particle_costs", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, tree_.num_nodes),
        KOKKOS_LAMBDA(int node) {
          if (cbegin(node) != cend(node) || (flags(node) & node_remote)) return;
          for (int i = pbegin(node); i < pend(node); ++i) particle_cost(i) = 1.0 + cost(node);
        });
    weights_count_ = static_cast<std::size_t>(n);
    distributed_.set_costs(costs_, n);
    double local_cost = 0;
    Kokkos::parallel_reduce(
        "kfmm::solver::rank_cost", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, n),
        KOKKOS_LAMBDA(int i, double& sum) { sum += particle_cost(i); }, local_cost);
    if (!statistics_) return;
    double max_cost = 0, total_cost = 0;
    MPI_Allreduce(&local_cost, &max_cost, 1, MPI_DOUBLE, MPI_MAX, context_.comm());
    MPI_Allreduce(&local_cost, &total_cost, 1, MPI_DOUBLE, MPI_SUM, context_.comm());
    stats_.cost_imbalance = total_cost > 0 ? max_cost * context_.size() / total_cost : 1.0;
  }

  BoundingCube global_cube(Particles<MemorySpace> const& particles) {
    double lo[3], hi[3];
    compute_bounds(space_, particles.pos, particles.num, lo, hi);
    double glo[3], ghi[3];
    MPI_Allreduce(lo, glo, 3, MPI_DOUBLE, MPI_MIN, context_.comm());
    MPI_Allreduce(hi, ghi, 3, MPI_DOUBLE, MPI_MAX, context_.comm());
    if (!(glo[0] <= ghi[0])) {  // no particle anywhere
      for (int k = 0; k < 3; ++k) glo[k] = ghi[k] = 0;
    }
    return cube_from_bounds(glo, ghi);
  }

  // Sorts the particles by key (and carried_ with them when `carry`).
  void sort_locally(Particles<MemorySpace>& particles, BoundingCube const& cube, int n, bool carry) {
    if (static_cast<int>(keys_.extent(0)) < n) Kokkos::resize(keys_, n + n / 4);
    if (static_cast<int>(permutation_.extent(0)) < n) Kokkos::resize(permutation_, n + n / 4);
    compute_keys(space_, cube, particles.pos, n, keys_);
    sorter_.sort(space_, keys_, permutation_, n);
    sorter_.permute(space_, particles, permutation_);
    if (carry) {
      ScalarView<double> sorted(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::solver::carried_estimate"), n);
      auto const values = carried_;
      auto const perm = permutation_;
      Kokkos::parallel_for(
          "kfmm::solver::permute_estimate", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, n),
          KOKKOS_LAMBDA(int i) { sorted(i) = values(perm(i)); });
      carried_ = sorted;
    }
  }

  // carried_ = |a| of the first n particles, from the gradient of the estimating evaluation.
  void store_estimate(int n) {
    grow_preserving(carried_, std::size_t(n));
    auto const magnitude = carried_;
    auto const grad = grad_;
    double const G = std::fabs(config_.G);
    Kokkos::parallel_for(
        "kfmm::solver::estimate_magnitude", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, n), KOKKOS_LAMBDA(int i) {
          magnitude(i) = G * compat::math::sqrt(grad(i, 0) * grad(i, 0) + grad(i, 1) * grad(i, 1) + grad(i, 2) * grad(i, 2));
        });
  }

  void write_results(Particles<MemorySpace> const& particles, int n) {
    std::size_t const capacity = particles.capacity();
    if (potential_.extent(0) != capacity) {
      potential_ = ScalarView<double>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::solver::potential"), capacity);
      acceleration_ = Vec3View<double>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::solver::acceleration"), capacity);
    }
    auto potential = potential_;
    auto acceleration = acceleration_;
    auto const phi = phi_;
    auto const grad = grad_;
    double const G = config_.G;
    Kokkos::parallel_for(
        "kfmm::solver::results", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, n), KOKKOS_LAMBDA(int i) {
          potential(i) = -G * phi(i);
          for (int k = 0; k < 3; ++k) acceleration(i, k) = G * grad(i, k);
        });
    fill_padding(potential_, acceleration_, n);
  }

  void fill_padding(ScalarView<double> const& potential, Vec3View<double> const& acceleration, std::size_t n) {
    if (n >= potential.extent(0)) return;
    auto const range = Kokkos::make_pair(n, potential.extent(0));
    double const nan = std::numeric_limits<double>::quiet_NaN();
    Kokkos::deep_copy(space_, Kokkos::subview(potential, range), nan);
    Kokkos::deep_copy(space_, Kokkos::subview(acceleration, range, Kokkos::ALL), nan);
  }

  // Keeps a copy of `weights` (num entries) as the weights of the next decomposition.
  void use_cost_weights(ScalarView<double> const& weights, std::size_t num) {
    if (costs_.extent(0) < num) Kokkos::resize(costs_, num);
    Kokkos::deep_copy(space_, Kokkos::subview(costs_, Kokkos::make_pair(std::size_t(0), num)),
                      Kokkos::subview(weights, Kokkos::make_pair(std::size_t(0), num)));
    weights_count_ = num;
    distributed_.set_costs(costs_, num);
  }

  void collect_counts(Particles<MemorySpace> const& particles, int n) {
    // M2L into shared cells is done on every rank holding particles in them; count it once.
    std::uint64_t const m2l_count = count_m2l();
    std::uint64_t local[4] = {pass_->p2p_pairs(), m2l_count, 0, 0};
    // Nodes and leaves owned here (imported nodes are counted by their owners).
    local[2] = distributed_.owned_nodes(tree_, geometry_, context_.rank());
    local[3] = distributed_.owned_leaves(tree_, geometry_);
    std::uint64_t global[4];
    MPI_Allreduce(local, global, 4, MPI_UINT64_T, MPI_SUM, context_.comm());
    stats_.p2p_pairs = global[0];
    stats_.m2l = global[1];
    stats_.nodes = global[2];
    stats_.leaves = global[3];
    std::uint64_t const count = static_cast<std::uint64_t>(n);
    MPI_Allreduce(&count, &stats_.particles_min, 1, MPI_UINT64_T, MPI_MIN, context_.comm());
    MPI_Allreduce(&count, &stats_.particles_max, 1, MPI_UINT64_T, MPI_MAX, context_.comm());
    stats_.particles_mean = double(particles.num_total) / context_.size();
    distributed_.fill_stats(context_, stats_);
  }

  std::uint64_t count_m2l() const {
    auto const target = m2l_.target;
    auto const offset = m2l_.offset;
    auto const flags = geometry_.flags;
    std::uint64_t count = 0;
    Kokkos::parallel_reduce(
        "kfmm::solver::count_m2l", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, m2l_.num_groups),
        KOKKOS_LAMBDA(int g, std::uint64_t& sum) {
          int const f = flags(target(g));
          if (!(f & node_shared) || (f & node_counted)) sum += offset(g + 1) - offset(g);
        },
        count);
    return count;
  }

 private:
  Context context_;
  FMMConfig config_;
  ExecutionSpace space_;
  std::unique_ptr<ExpansionPass> pass_;
  ScalarView<std::uint64_t> keys_{"kfmm::solver::keys", 0};
  ScalarView<std::uint32_t> permutation_{"kfmm::solver::permutation", 0};
  KeySorter<MemorySpace, std::uint32_t> sorter_;
  Tree<> tree_;
  NodeGeometry geometry_;
  DualTreeWalk walk_;
  ScalarView<double> allowed_{"kfmm::solver::allowed_m2l_error", 0};  ///< relative criterion, per node
  // Relative criterion: |a| of the last call per particle, with the particles' ids, aligned
  // with them as that call left them; carried_ is |a| aligned with the particles inside a call.
  ScalarView<double> estimate_{"kfmm::solver::acceleration_estimate", 0};
  ScalarView<std::uint64_t> estimate_ids_{"kfmm::solver::estimate_ids", 0};
  std::size_t estimate_count_ = 0;
  bool have_estimate_ = false;
  bool statistics_ = false;  // gather the global figures of stats_ (collectives on every call)
  ScalarView<double> carried_{"kfmm::solver::carried_estimate", 0};
  PairLists m2l_, p2p_;
  DistributedTree distributed_;
  ScalarView<double> leaf_cost_{"kfmm::solver::leaf_cost", 0};
  ScalarView<double> costs_{"kfmm::solver::costs", 0};
  std::size_t weights_count_ = 0;  ///< entries of costs_ that hold the weights of the next call
  ScalarView<double> phi_{"kfmm::solver::phi", 0};
  Vec3View<double> grad_{"kfmm::solver::grad", 0};
  ScalarView<double> potential_{"kfmm::solver::potential", 0};
  Vec3View<double> acceleration_{"kfmm::solver::acceleration", 0};
  ForceStats stats_;
};

ForceSolver::ForceSolver(Context const& context, FMMConfig const& config)
    : impl_(std::make_unique<Impl>(context, config)) {}
ForceSolver::~ForceSolver() = default;
ForceSolver::ForceSolver(ForceSolver&&) noexcept = default;
ForceSolver& ForceSolver::operator=(ForceSolver&&) noexcept = default;

void ForceSolver::compute(Particles<MemorySpace>& particles) { impl_->compute(particles); }
void ForceSolver::compute_in_input_order(Particles<MemorySpace> const& particles, ScalarView<double>& potential,
                                         Vec3View<double>& acceleration) {
  impl_->compute_in_input_order(particles, potential, acceleration);
}
ScalarView<double> ForceSolver::potential() const { return impl_->potential(); }
Vec3View<double> ForceSolver::acceleration() const { return impl_->acceleration(); }
ScalarView<double> ForceSolver::cost_weights() const { return impl_->cost_weights(); }
void ForceSolver::set_cost_weights(ScalarView<double> const& weights, std::size_t num) {
  impl_->set_cost_weights(weights, num);
}
ScalarView<double> ForceSolver::acceleration_estimate() const { return impl_->acceleration_estimate(); }
bool ForceSolver::has_acceleration_estimate() const { return impl_->has_acceleration_estimate(); }
void ForceSolver::set_acceleration_estimate(Particles<MemorySpace> const& particles,
                                            ScalarView<double> const& magnitude) {
  impl_->set_acceleration_estimate(particles, magnitude);
}
void ForceSolver::forget_acceleration_estimate() { impl_->forget_acceleration_estimate(); }
ForceStats const& ForceSolver::stats() const { return impl_->stats(); }
void ForceSolver::collect_statistics(bool on) { impl_->collect_statistics(on); }
FMMConfig const& ForceSolver::config() const { return impl_->config(); }
Context const& ForceSolver::context() const { return impl_->context(); }

}  // namespace kfmm
