#include <kfmm/comm/exchange_plan.hpp>
#include <kfmm/comm/global_bounds.hpp>
#include <kfmm/core/fault_injection.hpp>
#include <kfmm/core/hilbert.hpp>
#include <kfmm/core/host_device_bytes.hpp>
#include <kfmm/core/huge_pages.hpp>
#include <kfmm/core/sort.hpp>
#include <kfmm/core/tree.hpp>
#include <kfmm/fmm/distributed_tree.hpp>
#include <kfmm/fmm/dual_tree_walk.hpp>
#include <kfmm/fmm/expansion_dispatch.hpp>
#include <kfmm/fmm/expansion_pass.hpp>
#include <kfmm/fmm/near_field_reuse.hpp>
#include <kfmm/fmm/node_geometry.hpp>
#include <kfmm/fmm/relative_opening.hpp>
#include <kfmm/fmm/solver.hpp>
#include <kfmm/fmm/target_particles.hpp>

#include <kfmm/core/format.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace kfmm {

class ForceSolver::Impl {
 public:
  /// Rows of potential, acceleration and cost going back to input order.
  using ReturnPayload = Kokkos::View<double* [5], Kokkos::LayoutLeft, MemorySpace>;
  /// Rows of input index, potential, acceleration and cost of compute_active's targets.
  using ActivePayload = Kokkos::View<double* [6], Kokkos::LayoutLeft, MemorySpace>;
  /// Rows of position, mass, active flag and |a| estimate going to the owners (compute_active).
  using RefitPayload = Kokkos::View<double* [6], Kokkos::LayoutLeft, MemorySpace>;

  Impl(Context const& context, FMMConfig const& config) : context_(context), config_(config) {
    config_.validate();
    pass_ = make_expansion_pass(config_.order, config_.precision, config_.softening, config_.softening_length);
    int const q = config_.estimate_order;
    if (relative() && q < config_.order && expansion_order_built(q))
      estimate_pass_ = make_expansion_pass(q, config_.precision, config_.softening, config_.softening_length);
  }

  void compute(Particles<MemorySpace>& particles) {
    plan_.valid = false;  // the particles move: no input order to return to
    bool const known = estimate_applies(particles);
    std::string const failed = before_evaluation(particles.num, known, [] {});
    compute_forces(particles, known, failed);
    if (relative()) remember_estimate(particles.id, acceleration_, particles.num);
  }

  // The host-side work before an evaluation (`prepare`, carrying the estimate, room for the one
  // kept after it, so that nothing after the evaluation's last collective allocates): a failure
  // is returned, for compute_forces to agree with its input check; thrown at once on one rank.
  template <class Prepare>
  std::string before_evaluation(std::size_t num, bool known, Prepare const& prepare) {
    return failure_of([&] {
      prepare();
      if (known) carry_estimate(estimate_, num);
      if (relative()) {
        grow_preserving(estimate_, num);
        grow_preserving(estimate_ids_, num);
      }
    });
  }

  // Runs `body`. On several ranks a failure is returned, for the caller to agree at the next
  // collective it makes anyway; on one rank it is thrown at once.
  template <class Body>
  std::string failure_of(Body const& body) const {
    try {
      body();
    } catch (std::exception const& e) {
      if (context_.size() == 1) throw;
      return e.what();
    }
    return {};
  }

  void start_call() {
    stats_ = ForceStats{};
    host_device_start_ = host_device_bytes();
    total_timer_.reset();
    phase_timer_.reset();
  }

  void phase(char const* name) {
    space_.fence();
    stats_.phases.emplace_back(name, phase_timer_.seconds());
    phase_timer_.reset();
  }

  void finish_call(Particles<MemorySpace> const& particles, int n) {
    if (statistics_)
      collect_counts(particles, n);
    else
      distributed_.fill_local_stats(stats_);
    stats_.host_device_bytes = host_device_bytes() - host_device_start_;
    stats_.total_seconds = total_timer_.seconds();
  }

  // compute() without the acceleration estimate's bookkeeping. `known`: carried_ holds |a| of
  // an earlier evaluation for each of `particles` (collectively agreed). `failed`: this rank
  // failed before (agreed with the input check).
  void compute_forces(Particles<MemorySpace>& particles, bool known, std::string const& failed = {}) {
    start_call();
    agree_on_error(context_, failed.empty() ? check_input(particles) : failed);

    BoundingCube const cube = global_cube(particles);
    last_cube_ = cube;
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
    auto const build = [&] {
      if (!too_many.empty()) fail("{}", too_many);
      fault_injection::point("force.sort");
      // The decomposition leaves the keys of the owned particles in keys_.
      sort_locally(particles, cube, n, known, context_.size() > 1);
      phase("sort");
      fault_injection::point("force.tree");
      build_tree(space_, keys_, n, config_.leaf_size, distributed_.forced_split(), tree_);
      save_local_tree();
    };
    evaluate_tree(particles, n, cube, known, build, {}, [&] {
      write_results(particles, n);
      if (context_.size() > 1) measure_costs(n);
    });
    finish_call(particles, n);
  }

  // The stages from the local tree on: `prepare` gives tree_ the local topology of the n
  // owner-order `particles`; node geometry, upward pass, top tree, walk, M2L, L2L + L2P and P2P
  // into phi_ and grad_ follow, then `finish`. `targets` (owner order, may be empty: all): only
  // the particles flagged there need their forces (the other local nodes become node_idle).
  template <class Prepare, class Finish>
  void evaluate_tree(Particles<MemorySpace> const& particles, int n, BoundingCube const& cube, bool known,
                     Prepare const& prepare, ScalarView<std::uint8_t> const& targets, Finish const& finish) {
    PassParticles pass_particles{particles.pos, particles.mass, n, n};
    // The local stages from the sort to this rank's packed top-tree roots can fail on one rank
    // (a full device, a tree beyond the int limits): agreed in one step before the next collective.
    auto const local_stages = [&] {
      prepare();
      geometry_.power_exponent = relative() ? config_.order + 1 : 0;
      compute_node_geometry(space_, tree_, particles.pos, particles.mass, config_.centre, cube, geometry_);
      select_targets(space_, targets, n, targets_);
      if (targets.extent(0) > 0) mark_idle_nodes();
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
    // With targets, the relative criterion's multipole powers (a cost per node like the upward
    // pass's) are computed only for the sources the walk is about to test, level by level.
    bool const lazy_powers = relative() && targets.extent(0) > 0;
    DualTreeWalk::ImportChildren import;
    // A failure of the host-side work between the top tree and the walk (growing the multipole
    // powers and the result arrays) is handed to the walk's first import, which agrees it.
    std::string setup_error;
    if (context_.size() > 1) {
      root = distributed_.assemble_top_tree(space_, context_, config_.centre, cube, tree_, geometry_, *pass_);
      import = [this, lazy_powers, &setup_error](ScalarView<int> const& sources, int count, std::string const& error) {
        int const before = tree_.num_nodes;
        bool const more = distributed_.import_children(space_, context_, sources, count, tree_, geometry_, *pass_,
                                                       error.empty() ? setup_error : error);
        if (lazy_powers)
          ensure_multipole_powers(sources, count);
        else if (relative())
          update_multipole_powers(before);
        return more;
      };
      phase("exchange");
    } else if (lazy_powers) {
      import = [this](ScalarView<int> const& sources, int count, std::string const& error) {
        if (!error.empty()) fail("{}", error);
        ensure_multipole_powers(sources, count);
        return count > 0;
      };
    }
    auto const walk_setup = [&] {
      fault_injection::point("force.walk_setup");
      if (lazy_powers) {
        reserve_multipole_powers();
        power_ready_ = ScalarView<int>("kfmm::solver::power_ready", tree_.num_nodes);
      } else if (relative()) {
        update_multipole_powers(0);
      }
      // Preserving, not discarding: L2P overwrites only the targets' rows, and an estimating
      // evaluation of an active call reads the others' (store_estimate).
      grow_preserving(phi_, std::size_t(n));
      grow_preserving(grad_, std::size_t(n));
    };
    setup_error = failure_of(walk_setup);
    // Walk, M2L, L2L + L2P and P2P into phi_ and grad_ (every target particle's values are
    // overwritten by L2P, then P2P adds), then `finish`. The local stages after the last import
    // are agreed in one step on several ranks: the caller's next collective may be anywhere.
    PassParticles sources = pass_particles;
    // How the near field is summed: all of it; kept apart as well (the estimating evaluation,
    // near_reuse_); or only the pairs the estimate did not sum, plus its kept near field.
    enum class Near { all, keep, reuse };
    auto evaluate = [&](OpeningTest const& test, bool timed, Near near, auto const& then) {
      auto step = [&](char const* name) {
        if (timed) phase(name);
      };
      walk_.run(space_, tree_, geometry_, test, root, m2l_, p2p_, m2p_, import);
      // The near field still to sum. A failure here only costs the reuse: the rest stays local.
      reused_pairs_ = 0;
      bool reusing = false;
      if (near == Near::reuse && near_reuse_.indexed()) try {
          reused_pairs_ = near_reuse_.subtract(space_, tree_, targets_, p2p_, p2p_rest_);
          reusing = true;
        } catch (std::exception const&) {
          // reused_pairs_ stays 0: the whole list is summed
        }
      PairLists const& p2p = reusing ? p2p_rest_ : p2p_;
      if (context_.size() > 1) sources = distributed_.import_leaf_particles(space_, context_, p2p, tree_, particles,
                                                                             pass_->single_precision());
      step("walk");
      ExpansionPass& pass = near == Near::keep && estimate_pass_ ? *estimate_pass_ : *pass_;
      auto const local = [&] {
        if (&pass != pass_.get()) copy_multipoles(*pass_, pass, tree_.num_nodes);
        fault_injection::point("force.m2l");
        pass.translate(space_, geometry_, m2l_);
        step("m2l");
        fault_injection::point("force.downward");
        pass.evaluate_locals(space_, tree_, geometry_, sources, targets_, phi_, grad_);
        step("downward");
        fault_injection::point("force.p2p");
        if (near == Near::keep) {
          near_reuse_.start(space_, n);
          // The near field does not depend on the order: pass_ sums it, so that the final
          // evaluation's near field finds its scratch (relative positions) already touched.
          pass_->add_near_field(space_, tree_, geometry_, p2p, sources, targets_, near_reuse_.phi(),
                                near_reuse_.grad());
          near_reuse_.add_all(space_, targets_, phi_, grad_);
          try {
            near_reuse_.index(space_, p2p, tree_.num_nodes);
          } catch (std::exception const&) {
            near_reuse_.release();  // the next evaluation sums its whole near field
          }
        } else {
          pass_->add_near_field(space_, tree_, geometry_, p2p, sources, targets_, phi_, grad_);
          if (reusing) near_reuse_.add_reused(space_, tree_, targets_, phi_, grad_);
        }
        step("p2p");
        fault_injection::point("force.m2p");
        pass.add_multipoles_at_particles(space_, tree_, geometry_, m2p_, sources, targets_, phi_, grad_);
        step("m2p");
        if (near == Near::reuse) {
          near_reuse_.release();
          p2p_rest_ = PairLists();
        }
        then();
      };
      if (context_.size() > 1)
        collectively(context_, local);
      else
        local();
    };
    double const reach = config_.softening == SofteningKind::Spline ? 2.8 * config_.softening_length : 0.0;
    OpeningTest test{config_.theta, reach, config_.order};
    // M2P under the relative criterion only: the angle criterion keeps its pairs symmetric
    // (momentum conserved to round-off) and its θ bounds r_A/d.
    if (relative()) test.m2p_theta = config_.m2p_theta;
    if (relative()) {
      // |a| of every particle: from the previous call, or else from a coarser evaluation now.
      auto const allowance = [&] {
        fault_injection::point("force.allowance");
        relative_opening_allowance(space_, tree_, geometry_, carried_, config_.tolerance / std::fabs(config_.G),
                                   tree_.num_nodes, allowed_);
      };
      // After the estimating evaluation the allowance is agreed with its local stages; from a
      // known estimate, in the Allreduce that combines the shared cells' allowances.
      std::string allowance_error;
      if (!known) {
        evaluate(OpeningTest{config_.estimate_theta, reach}, false, Near::keep, [&] {
          store_estimate(n);
          phase("estimate");
          allowance();
        });
      } else {
        allowance_error = failure_of(allowance);
      }
      distributed_.combine_shared_minimum(space_, context_, allowed_, allowance_error);
      test.allowed = allowed_;
    }
    evaluate(test, true, relative() && !known ? Near::reuse : Near::all, [&] {
      fault_injection::point("force.output");
      finish();
      phase("output");
    });
  }

  void compute_in_input_order(Particles<MemorySpace> const& particles, ScalarView<double>& potential,
                              Vec3View<double>& acceleration) {
    // Tag every particle with its input index, compute in owner order, send results back.
    plan_.valid = false;
    // The estimate belongs to the caller's particles (ids, input order), as work is.
    bool const known = estimate_applies(particles);
    Particles<MemorySpace> work;
    std::string const failed = before_evaluation(particles.num, known, [&] {
      if (particles.num >= (std::size_t(1) << 40))
        fail("compute_in_input_order supports up to 2^40 particles per rank, rank {} has {}", context_.rank(),
             particles.num);
      work = Particles<MemorySpace>(particles.num);
      work.assign(particles);
      tag_input_order(work);
    });
    compute_forces(work, known, failed);
    // The return to input order: what can fail on one rank (a full device) comes before the
    // return plan's counts travel and is agreed with them (keep_plan), not in a collective of its own.
    // The cost weights (measured on several ranks) go back too: the next call gets the particles
    // in this input order. Every rank takes part, also one that owned none of them.
    bool const weighted = context_.size() > 1;
    ScalarView<double> costs;
    ReturnPayload payload;
    std::string const return_failed = failure_of([&] {
      fault_injection::point("force.return");
      full_work_ = local_work(work.num);
      refit_work_ = {};
      potential = ScalarView<double>("kfmm::solver::potential_input_order", particles.capacity());
      acceleration = Vec3View<double>("kfmm::solver::acceleration_input_order", particles.capacity());
      payload = ReturnPayload(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::solver::return_payload"), work.num);
      if (weighted) {
        costs = ScalarView<double>("kfmm::solver::costs", particles.num);
        grow_preserving(costs_, particles.num);  // use_cost_weights' room, before the last exchange
      }
    });
    keep_plan(particles, work, return_failed);
    return_results(payload, potential_, acceleration_, weighted ? cost_weights() : ScalarView<double>(), potential,
                   acceleration, costs);
    fill_padding(potential, acceleration, particles.num);
    if (weighted) use_cost_weights(costs, particles.num);
    if (relative()) remember_estimate(particles.id, acceleration, particles.num);
  }

  // ---- Active forces (compute_active) -------------------------------------------------------

  void compute_active(Particles<MemorySpace> const& particles, ActiveFlags const& active,
                      ScalarView<double> const& potential, Vec3View<double> const& acceleration) {
    std::size_t const num = particles.num;
    collectively(context_, [&] {
      if (active.extent(0) < num || potential.extent(0) < num || acceleration.extent(0) < num)
        fail("compute_active on rank {}: {} particles but {} active flags, {} potential and {} acceleration rows; "
             "size every View to at least the particle count",
             context_.rank(), num, active.extent(0), potential.extent(0), acceleration.extent(0));
    });
    // One Allreduce: ranks whose kept plan does not fit these particles, active and all
    // particles, and the work of the last full and refitted calls.
    std::uint64_t local[7] = {plan_fits(particles) ? 0u : 1u, count_active(active, num), num,
                              full_work_.work,          full_work_.particles,     refit_work_.work,
                              refit_work_.particles};
    std::uint64_t global[7];
    MPI_Allreduce(local, global, 7, MPI_UINT64_T, MPI_SUM, context_.comm());
    if (global[1] == 0) {  // nothing to compute (the input is still checked, on every rank alike)
      agree_on_error(context_, check_input(particles));
      start_call();
      return;
    }
    // Drifted particles stretch the refitted cells, which then open more often: once the last
    // refitted call cost more per particle of its target leaves than rebuild_factor times what
    // the full call cost per particle, a new tree is cheaper than another refit.
    bool const stale = global[6] > 0 && global[4] > 0 &&
                       double(global[5]) / double(global[6]) >
                           config_.rebuild_factor * double(global[3]) / double(global[4]);
    if (global[0] > 0 || global[1] == global[2] || stale) {
      // A full evaluation, which keeps the plan the next calls refit.
      ScalarView<double> all_potential;
      Vec3View<double> all_acceleration;
      compute_in_input_order(particles, all_potential, all_acceleration);
      copy_active_rows(active, num, all_potential, all_acceleration, potential, acceleration);
      return;
    }
    refit_and_evaluate(particles, active, potential, acceleration);
  }

  // Whether the kept plan belongs to these particles (same ids in the same order) and, in the
  // relative criterion, the estimate too. Local.
  bool plan_fits(Particles<MemorySpace> const& particles) const {
    if (!plan_.valid || plan_.count != particles.num || particles.num > particles.capacity()) return false;
    if (relative() && !(have_estimate_ && estimate_count_ == particles.num &&
                        count_mismatches(particles.id, estimate_ids_, particles.num) == 0))
      return false;
    return count_mismatches(particles.id, plan_.ids, particles.num) == 0;
  }

  std::size_t count_mismatches(ScalarView<std::uint64_t> const& ids, ScalarView<std::uint64_t> const& known_ids,
                               std::size_t n) const {
    std::size_t mismatches = 0;
    Kokkos::parallel_reduce(
        "kfmm::solver::match_ids", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, n),
        KOKKOS_LAMBDA(std::size_t i, std::size_t & count) { count += ids(i) != known_ids(i) ? 1 : 0; }, mismatches);
    return mismatches;
  }

  std::uint64_t count_active(ActiveFlags const& active, std::size_t n) const {
    std::uint64_t count = 0;
    Kokkos::parallel_reduce(
        "kfmm::solver::count_active", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, n),
        KOKKOS_LAMBDA(std::size_t i, std::uint64_t & sum) { sum += active(i) ? 1 : 0; }, count);
    return count;
  }

  void copy_active_rows(ActiveFlags const& active, std::size_t n, ScalarView<double> const& from_potential,
                        Vec3View<double> const& from_acceleration, ScalarView<double> const& to_potential,
                        Vec3View<double> const& to_acceleration) {
    Kokkos::parallel_for(
        "kfmm::solver::copy_active_rows", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, n),
        KOKKOS_LAMBDA(std::size_t i) {
          if (!active(i)) return;
          to_potential(i) = from_potential(i);
          for (int d = 0; d < 3; ++d) to_acceleration(i, d) = from_acceleration(i, d);
        });
    space_.fence();
  }

  // Keeps what compute_active needs to evaluate the same particles again without a new
  // decomposition: their ids, the owner-order particles `work` (ids: input rank << 40 | input
  // index), the plan between the two orders and the cube of the keys. `failed`: this rank failed
  // before (agreed where the plan's counts are, then every rank throws). Collective.
  void keep_plan(Particles<MemorySpace> const& particles, Particles<MemorySpace> const& work, std::string failed) {
    std::size_t const owned = work.num;
    ScalarView<int> destinations;
    ScalarView<std::uint64_t> index;
    try {
      if (failed.empty()) {
        destinations = ScalarView<int>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::solver::plan_ranks"), owned);
        index = ScalarView<std::uint64_t>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::solver::plan_index"), owned);
        plan_destinations(work.id, owned, destinations, index);
        plan_.ids = ScalarView<std::uint64_t>(
            Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::solver::plan_ids"), particles.num);
      }
    } catch (std::exception const& e) {
      failed = e.what();
    }
    // Each owned particle goes back to the rank it came from in the decomposition: an answer
    // to that plan, whose counts need no consensus.
    auto const& came_from = distributed_.decomposition_partners();
    if (context_.size() > 1) {
      plan_.back = ExchangePlan<MemorySpace>::reply_to(context_, came_from, destinations, owned, failed);
      agree_on_error(context_, failed);
    } else {
      if (!failed.empty()) fail("{}", failed);
      plan_.back = ExchangePlan<MemorySpace>(context_, destinations, owned);
    }
    plan_.input_index = plan_.back.exchange(index);
    Kokkos::deep_copy(space_, plan_.ids, Kokkos::subview(particles.id, Kokkos::make_pair(std::size_t(0), particles.num)));
    plan_.count = particles.num;
    plan_.owned = work;
    plan_.cube = last_cube_;
    plan_.valid = true;
  }

  // Tags of owner-order particles (input rank << 40 | input index) → input rank and index.
  void plan_destinations(ScalarView<std::uint64_t> const& id, std::size_t owned, ScalarView<int> const& destinations,
                         ScalarView<std::uint64_t> const& index) {
    Kokkos::parallel_for(
        "kfmm::solver::plan_destinations", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, owned),
        KOKKOS_LAMBDA(std::size_t i) {
          destinations(i) = static_cast<int>(id(i) >> 40);
          index(i) = id(i) & ((std::uint64_t(1) << 40) - 1);
        });
  }

  // Marks every particle of `work` with its input rank and index (its tag).
  void tag_input_order(Particles<MemorySpace> const& work) {
    std::uint64_t const rank_bits = std::uint64_t(context_.rank()) << 40;
    auto work_id = work.id;
    Kokkos::parallel_for(
        "kfmm::solver::tag_input", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, work.num),
        KOKKOS_LAMBDA(std::size_t i) { work_id(i) = rank_bits | std::uint64_t(i); });
  }

  // Owner-order values (G-scaled results `potential`/`acceleration`, and `cost` when not empty)
  // back to their input rows along the kept plan, packed in `payload` (a row per owned
  // particle, allocated by the caller before the plan's agreement). Collective.
  void return_results(ReturnPayload const& payload, ScalarView<double> const& potential,
                      Vec3View<double> const& acceleration, ScalarView<double> const& cost,
                      ScalarView<double> const& potential_out, Vec3View<double> const& acceleration_out,
                      ScalarView<double> const& cost_out) {
    std::size_t const owned = plan_.owned.num;
    bool const with_cost = cost.extent(0) >= owned && cost_out.extent(0) > 0;
    Kokkos::parallel_for(
        "kfmm::solver::pack_results", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, owned),
        KOKKOS_LAMBDA(std::size_t i) {
          payload(i, 0) = potential(i);
          for (int k = 0; k < 3; ++k) payload(i, 1 + k) = acceleration(i, k);
          payload(i, 4) = with_cost ? cost(i) : 0.0;
        });
    auto const back = plan_.back.exchange(payload);
    auto const index = plan_.input_index;
    Kokkos::parallel_for(
        "kfmm::solver::unpack_results", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, plan_.back.num_import()),
        KOKKOS_LAMBDA(std::size_t k) {
          std::size_t const i = index(k);
          potential_out(i) = back(k, 0);
          for (int d = 0; d < 3; ++d) acceleration_out(i, d) = back(k, 1 + d);
          if (with_cost) cost_out(i) = back(k, 4);
        });
    space_.fence();
  }

  // return_results for the owner-order `targets` only, along a plan of their rows (building it
  // costs less than sending every row back along the kept plan). Collective.
  void return_active_results(ScalarView<std::uint8_t> const& targets, ScalarView<double> const& potential,
                             Vec3View<double> const& acceleration, ScalarView<double> const& cost,
                             ScalarView<double> const& potential_out, Vec3View<double> const& acceleration_out,
                             ScalarView<double> const& cost_out, std::string failed) {
    std::size_t const owned = plan_.owned.num;
    bool const with_cost = cost.extent(0) >= owned && cost_out.extent(0) > 0;
    ScalarView<int> destinations;
    ActivePayload payload;
    try {
      if (failed.empty()) {
        destinations = ScalarView<int>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::solver::active_ranks"), owned);
        payload = ActivePayload(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::solver::active_payload"), owned);
        pack_active_results(targets, potential, acceleration, with_cost ? cost : ScalarView<double>(), destinations,
                            payload);
      }
    } catch (std::exception const& e) {
      failed = e.what();
    }
    // Some of the rows the kept plan returns, to some of its ranks: its partners carry the counts
    // (and this rank's failure, agreed with them).
    auto const plan = ExchangePlan<MemorySpace>::within(context_, plan_.back, destinations, owned, failed);
    agree_on_error(context_, failed);
    auto const back = plan.exchange(payload);
    Kokkos::parallel_for(
        "kfmm::solver::unpack_active_results", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, plan.num_import()),
        KOKKOS_LAMBDA(std::size_t k) {
          std::size_t const i = static_cast<std::size_t>(back(k, 0));
          potential_out(i) = back(k, 1);
          for (int d = 0; d < 3; ++d) acceleration_out(i, d) = back(k, 2 + d);
          if (with_cost) cost_out(i) = back(k, 5);
        });
    space_.fence();
  }

  // Rows of the owner-order `targets` for return_active_results (input index, potential,
  // acceleration, cost when not empty) and their input ranks (−1: not a target).
  void pack_active_results(ScalarView<std::uint8_t> const& targets, ScalarView<double> const& potential,
                           Vec3View<double> const& acceleration, ScalarView<double> const& cost,
                           ScalarView<int> const& destinations, ActivePayload const& payload) {
    std::size_t const owned = plan_.owned.num;
    bool const with_cost = cost.extent(0) >= owned;
    auto const tag = plan_.owned.id;
    Kokkos::parallel_for(
        "kfmm::solver::pack_active_results", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, owned),
        KOKKOS_LAMBDA(std::size_t j) {
          destinations(j) = targets(j) ? static_cast<int>(tag(j) >> 40) : -1;
          payload(j, 0) = double(tag(j) & ((std::uint64_t(1) << 40) - 1));
          payload(j, 1) = potential(j);
          for (int k = 0; k < 3; ++k) payload(j, 2 + k) = acceleration(j, k);
          payload(j, 5) = with_cost ? cost(j) : 0.0;
        });
  }

  // compute_active on the kept plan: the new positions (and masses, flags and |a| estimates)
  // travel to the owner-order particles along the plan, the local tree keeps its topology and
  // gets new geometry and multipoles (a refit: node radii are measured from the particles, so
  // they enclose particles that left their cell), and only nodes with active particles are
  // walk targets. Collective.
  void refit_and_evaluate(Particles<MemorySpace> const& particles, ActiveFlags const& active,
                          ScalarView<double> const& potential, Vec3View<double> const& acceleration) {
    start_call();
    int const n = static_cast<int>(plan_.owned.num);
    ScalarView<std::uint8_t> targets = move_to_owners(particles, active);
    phase("domain");
    Particles<MemorySpace> const& owned = plan_.owned;
    auto const restore = [&] {
      fault_injection::point("force.tree");
      restore_local_tree();
    };
    ScalarView<double> owned_potential, owned_cost;
    Vec3View<double> owned_acceleration;
    evaluate_tree(owned, n, plan_.cube, true, restore, targets, [&] {
      if (context_.size() == 1) {  // the plan is a permutation: straight into the caller's rows
        scatter_results(targets, n, potential, acceleration);
        return;
      }
      owned_potential = ScalarView<double>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::solver::active_potential"), n);
      owned_acceleration =
          Vec3View<double>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::solver::active_acceleration"), n);
      scale_results(n, owned_potential, owned_acceleration);
      if (context_.size() > 1) owned_cost = measure_active_costs(n);
    });
    // The return to input order: a failure on one rank before it is agreed with the return
    // plan's counts (return_active_results).
    bool const weighted = context_.size() > 1 && weights_count_ == particles.num;
    ScalarView<double> costs;
    std::string const return_failed = failure_of([&] {
      fault_injection::point("force.return");
      refit_work_ = refitted_work();
      stats_.tree_refitted = true;
      if (weighted) costs = ScalarView<double>("kfmm::solver::active_costs", particles.num);
    });
    if (context_.size() > 1)
      return_active_results(targets, owned_potential, owned_acceleration, owned_cost, potential, acceleration, costs,
                            return_failed);
    if (weighted) accumulate_costs(costs, particles.num);
    if (relative()) update_estimate(active, acceleration, particles.num);
    phase("return");
    finish_call(owned, n);
  }

  // Checks the particles (agreed) and moves their new positions, masses and active flags (and
  // |a| estimates) into plan_.owned / carried_ along the plan; returns the owner-order flags.
  // What can fail on one rank (a full device) comes before the agreement of the check.
  // Collective.
  ScalarView<std::uint8_t> move_to_owners(Particles<MemorySpace> const& particles, ActiveFlags const& active) {
    if (context_.size() == 1) {
      agree_on_error(context_, check_input(particles));
      fault_injection::point("force.refit_positions");
      return gather_on_one_rank(particles, active);
    }
    std::string failed = check_input(particles);
    std::size_t const n = plan_.owned.num;
    RefitPayload payload;
    ScalarView<std::uint8_t> targets;
    try {
      fault_injection::point("force.refit_positions");
      payload = pack_for_owners(particles, active);
      targets = ScalarView<std::uint8_t>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::solver::targets"), n);
      if (relative())
        carried_ =
            ScalarView<double>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::solver::carried_estimate"), n);
    } catch (std::exception const& e) {
      if (failed.empty()) failed = e.what();
    }
    agree_on_error(context_, failed);
    auto const owned_rows = plan_.back.reverse(payload);
    unpack_at_owners(owned_rows, targets);
    return targets;
  }

  // The caller's rows of move_to_owners, in the kept plan's import order.
  RefitPayload pack_for_owners(Particles<MemorySpace> const& particles, ActiveFlags const& active) {
    std::size_t const imports = plan_.back.num_import();
    bool const with_estimate = relative();
    RefitPayload payload(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::solver::refit_payload"), imports);
    auto const index = plan_.input_index;
    auto const pos = particles.pos;
    auto const mass = particles.mass;
    auto const estimate = estimate_;
    Kokkos::parallel_for(
        "kfmm::solver::pack_positions", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, imports),
        KOKKOS_LAMBDA(std::size_t k) {
          std::size_t const i = index(k);
          for (int d = 0; d < 3; ++d) payload(k, d) = pos(i, d);
          payload(k, 3) = mass(i);
          payload(k, 4) = active(i) ? 1.0 : 0.0;
          payload(k, 5) = with_estimate ? estimate(i) : 0.0;
        });
    return payload;
  }

  // move_to_owners' rows, arrived at the owners, into plan_.owned, `targets` and carried_.
  void unpack_at_owners(RefitPayload const& owned_rows, ScalarView<std::uint8_t> const& targets) {
    std::size_t const n = plan_.owned.num;
    bool const with_estimate = relative();
    auto owned_pos = plan_.owned.pos;
    auto owned_mass = plan_.owned.mass;
    auto carried = carried_;
    Kokkos::parallel_for(
        "kfmm::solver::unpack_positions", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, n), KOKKOS_LAMBDA(std::size_t j) {
          for (int d = 0; d < 3; ++d) owned_pos(j, d) = owned_rows(j, d);
          owned_mass(j) = owned_rows(j, 3);
          targets(j) = owned_rows(j, 4) != 0.0 ? 1 : 0;
          if (with_estimate) carried(j) = owned_rows(j, 5);
        });
    space_.fence();
  }

  // move_to_owners on one rank, where the plan is a permutation: owner-order particle j is input
  // particle (its tag) & (2^40 − 1).
  ScalarView<std::uint8_t> gather_on_one_rank(Particles<MemorySpace> const& particles, ActiveFlags const& active) {
    std::size_t const n = plan_.owned.num;
    bool const with_estimate = relative();
    ScalarView<std::uint8_t> targets(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::solver::targets"), n);
    if (with_estimate)
      carried_ = ScalarView<double>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::solver::carried_estimate"), n);
    auto const tag = plan_.owned.id;
    auto const pos = particles.pos;
    auto const mass = particles.mass;
    auto const estimate = estimate_;
    auto owned_pos = plan_.owned.pos;
    auto owned_mass = plan_.owned.mass;
    auto carried = carried_;
    Kokkos::parallel_for(
        "kfmm::solver::gather_positions", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, n), KOKKOS_LAMBDA(std::size_t j) {
          std::size_t const i = tag(j) & ((std::uint64_t(1) << 40) - 1);
          for (int d = 0; d < 3; ++d) owned_pos(j, d) = pos(i, d);
          owned_mass(j) = mass(i);
          targets(j) = active(i) ? 1 : 0;
          if (with_estimate) carried(j) = estimate(i);
        });
    return targets;
  }

  // One rank: the G-scaled results of the target particles into their input rows.
  void scatter_results(ScalarView<std::uint8_t> const& targets, int n, ScalarView<double> const& potential,
                       Vec3View<double> const& acceleration) {
    auto const tag = plan_.owned.id;
    auto const phi = phi_;
    auto const grad = grad_;
    double const G = config_.G;
    Kokkos::parallel_for(
        "kfmm::solver::scatter_results", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, n), KOKKOS_LAMBDA(int j) {
          if (!targets(j)) return;
          std::size_t const i = tag(j) & ((std::uint64_t(1) << 40) - 1);
          potential(i) = -G * phi(j);
          for (int k = 0; k < 3; ++k) acceleration(i, k) = G * grad(j, k);
        });
  }

  // Flags node_idle on the local nodes without a target particle (targets_).
  void mark_idle_nodes() {
    auto const before = targets_.before;
    auto const pbegin = tree_.particle_begin;
    auto const pend = tree_.particle_end;
    auto flags = geometry_.flags;
    Kokkos::parallel_for(
        "kfmm::solver::mark_idle", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, tree_.num_nodes), KOKKOS_LAMBDA(int node) {
          if (before(pend(node)) == before(pbegin(node))) flags(node) |= node_idle;
        });
  }

  // The local tree's topology right after build_tree (the top tree and imports change the
  // child lists of shared cells and append nodes), for restore_local_tree.
  void save_local_tree() {
    local_tree_.num_nodes = tree_.num_nodes;
    local_tree_.level_offset = tree_.level_offset;
    auto const nodes = Kokkos::make_pair(0, tree_.num_nodes);
    for (auto [from, to] : {std::pair{&tree_.child_begin, &local_tree_.child_begin},
                            std::pair{&tree_.child_end, &local_tree_.child_end},
                            std::pair{&tree_.child_index, &local_tree_.child_index}}) {
      grow_preserving(*to, std::size_t(tree_.num_nodes));
      Kokkos::deep_copy(space_, Kokkos::subview(*to, nodes), Kokkos::subview(*from, nodes));
    }
  }

  void restore_local_tree() {
    tree_.num_nodes = local_tree_.num_nodes;
    tree_.level_offset = local_tree_.level_offset;
    auto const nodes = Kokkos::make_pair(0, tree_.num_nodes);
    for (auto [from, to] : {std::pair{&local_tree_.child_begin, &tree_.child_begin},
                            std::pair{&local_tree_.child_end, &tree_.child_end},
                            std::pair{&local_tree_.child_index, &tree_.child_index}})
      Kokkos::deep_copy(space_, Kokkos::subview(*to, nodes), Kokkos::subview(*from, nodes));
  }

  // G-scaled potential and acceleration of the first n owner-order particles from phi_, grad_.
  void scale_results(int n, ScalarView<double> const& potential, Vec3View<double> const& acceleration) {
    auto const phi = phi_;
    auto const grad = grad_;
    double const G = config_.G;
    Kokkos::parallel_for(
        "kfmm::solver::results", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, n), KOKKOS_LAMBDA(int i) {
          potential(i) = -G * phi(i);
          for (int k = 0; k < 3; ++k) acceleration(i, k) = G * grad(i, k);
        });
  }

  // The multipoles of nodes [0, count) from `from` into the lower-order `to`: the graded layout
  // makes an order-q expansion the first coefficients of an order-p one about the same centre.
  void copy_multipoles(ExpansionPass const& from, ExpansionPass& to, int count) {
    int constexpr chunk = 4096;  // nodes per copy: a bounded buffer
    grow_discarding(copy_nodes_, std::size_t(chunk), copy_nodes_.label());
    if (copy_rows_.extent(0) < std::size_t(chunk) || copy_rows_.extent(1) != std::size_t(from.coefficients_per_node()))
      copy_rows_ = Kokkos::View<double**, MemorySpace>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::solver::copy_rows"),
                                                       chunk, from.coefficients_per_node());
    auto const nodes = copy_nodes_;
    for (int first = 0; first < count; first += chunk) {
      int const c = count - first < chunk ? count - first : chunk;
      Kokkos::parallel_for(
          "kfmm::solver::copy_nodes", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, c),
          KOKKOS_LAMBDA(int i) { nodes(i) = first + i; });
      from.get_multipoles(space_, nodes, c, copy_rows_);
      to.set_multipoles(space_, first, c, copy_rows_);
    }
  }

  // Particle pairs of the last evaluation's near field, those its estimate summed included.
  std::uint64_t near_pairs() const { return pass_->p2p_pairs() + reused_pairs_; }

  // The near- and far-field work of the last evaluation on this rank, in P2P pairs (M2L
  // weighted as in the cost model), and the particles it served.
  struct TreeWork {
    std::uint64_t work = 0, particles = 0;
  };
  TreeWork local_work(std::size_t particles) const {
    double const m2l = m2l_cost_in_pairs(config_.order) * double(count_m2l());
    double const m2p = m2p_cost_in_pairs(config_.order) * double(pass_->m2p_evaluations());
    return {near_pairs() + static_cast<std::uint64_t>(m2l + m2p), particles};
  }

  // A refitted call's work in the terms of local_work of a full call, per particle of its target
  // leaves: P2P sums only the active particles of a leaf, so its pairs count as if every
  // particle of those leaves were a target (each target has its whole leaf's sources). The
  // comparison with the full call then measures how much more the refitted cells open.
  TreeWork refitted_work() const {
    std::uint64_t const leaf_particles = target_leaf_particles();
    double const m2l = m2l_cost_in_pairs(config_.order) * double(count_m2l());
    // M2P, like P2P, is paid per target particle.
    double const per_target = double(near_pairs()) +
                              m2p_cost_in_pairs(config_.order) * double(pass_->m2p_evaluations());
    double const p2p = targets_.count > 0 ? per_target * double(leaf_particles) / double(targets_.count) : 0.0;
    return {static_cast<std::uint64_t>(p2p + m2l), leaf_particles};
  }

  // Particles in the local leaves that are walk targets (not idle) of the last evaluation.
  std::uint64_t target_leaf_particles() const {
    auto const pbegin = tree_.particle_begin;
    auto const pend = tree_.particle_end;
    auto const cbegin = tree_.child_begin;
    auto const cend = tree_.child_end;
    auto const flags = geometry_.flags;
    std::uint64_t count = 0;
    Kokkos::parallel_reduce(
        "kfmm::solver::target_leaf_particles", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, tree_.num_nodes),
        KOKKOS_LAMBDA(int node, std::uint64_t& sum) {
          if (cbegin(node) != cend(node) || (flags(node) & (node_remote | node_idle))) return;
          sum += static_cast<std::uint64_t>(pend(node) - pbegin(node));
        },
        count);
    return count;
  }

  // The cost of an active evaluation per owner-order particle (as in measure_costs) for the
  // target particles, 0 for the others.
  ScalarView<double> measure_active_costs(int n) {
    ScalarView<double> particle_cost("kfmm::solver::active_particle_costs", n);
    write_target_costs(particle_cost);
    return particle_cost;
  }

  // out(i) = 1 + the cost per target of particle i's leaf (measure_leaf_costs) for every target
  // particle i (targets_) of a local leaf that was a walk target; other rows keep their values.
  void write_target_costs(ScalarView<double> const& out) {
    measure_leaf_costs();
    auto const cost = leaf_cost_;
    auto const before = targets_.before;
    auto const index = targets_.index;
    auto const pbegin = tree_.particle_begin;
    auto const pend = tree_.particle_end;
    auto const cbegin = tree_.child_begin;
    auto const cend = tree_.child_end;
    auto const flags = geometry_.flags;
    Kokkos::parallel_for(
        "kfmm::solver::particle_costs", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, tree_.num_nodes),
        KOKKOS_LAMBDA(int node) {
          if (cbegin(node) != cend(node) || (flags(node) & (node_remote | node_idle))) return;
          for (int k = before(pbegin(node)); k < before(pend(node)); ++k) out(index(k)) = 1.0 + cost(node);
        });
  }

  // Adds an active evaluation's costs (input order) to the weights of the next decomposition,
  // so that it balances the full evaluation and every active one since.
  void accumulate_costs(ScalarView<double> const& costs, std::size_t num) {
    auto weights = costs_;
    Kokkos::parallel_for(
        "kfmm::solver::accumulate_costs", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, num),
        KOKKOS_LAMBDA(std::size_t i) { weights(i) += costs(i); });
    distributed_.set_costs(costs_, num);
  }

  // The relative criterion's |a| (input order) of the active particles from their new forces.
  void update_estimate(ActiveFlags const& active, Vec3View<double> const& acceleration, std::size_t n) {
    auto magnitude = estimate_;
    Kokkos::parallel_for(
        "kfmm::solver::update_estimate", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, n), KOKKOS_LAMBDA(std::size_t i) {
          if (!active(i)) return;
          magnitude(i) = compat::math::sqrt(acceleration(i, 0) * acceleration(i, 0) +
                                            acceleration(i, 1) * acceleration(i, 1) +
                                            acceleration(i, 2) * acceleration(i, 2));
        });
  }
  bool relative() const { return config_.opening == OpeningCriterion::Relative; }

  // The multipole powers of the nodes from `first` on (their multipoles are set), keeping those
  // before it.
  void update_multipole_powers(int first) {
    reserve_multipole_powers();
    pass_->multipole_powers(space_, first, tree_.num_nodes - first, geometry_.multipole_power);
  }

  // Room for the multipole powers of every node of the tree.
  void reserve_multipole_powers() {
    std::size_t const nodes = tree_.num_nodes;
    std::size_t const degrees = config_.order + 1;
    auto& power = geometry_.multipole_power;
    if (power.extent(0) < nodes || power.extent(1) != degrees) {
      std::size_t const grown = power.extent(0) + power.extent(0) / 2 + 16;
      if (power.extent(1) != degrees) power = Kokkos::View<double**, MemorySpace>("kfmm::solver::multipole_power", 0, degrees);
      Kokkos::resize(power, nodes > grown ? nodes : grown, degrees);
    }
  }

  // The multipole powers of `sources(0 … count − 1)` and their children that power_ready_ does
  // not mark yet (the walk tests these next), then marks them.
  void ensure_multipole_powers(ScalarView<int> const& sources, int count) {
    int const nodes = tree_.num_nodes;
    reserve_multipole_powers();
    grow_preserving(power_ready_, std::size_t(nodes));  // new (imported) nodes: 0, not ready
    auto ready = power_ready_;
    auto const cbegin = tree_.child_begin;
    auto const cend = tree_.child_end;
    auto const cindex = tree_.child_index;
    auto const flags = geometry_.flags;
    Kokkos::parallel_for(
        "kfmm::solver::powers_wanted", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, count), KOKKOS_LAMBDA(int e) {
          int const s = sources(e);
          if (ready(s) == 0) ready(s) = 2;  // racing writers store the same value
          if (flags(s) & node_leaf) return;
          for (int c = cbegin(s); c < cend(s); ++c)
            if (ready(cindex(c)) == 0) ready(cindex(c)) = 2;
        });
    ScalarView<int> list(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::solver::powers_list"), nodes);
    int wanted = 0;
    Kokkos::parallel_scan(
        "kfmm::solver::powers_list", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, nodes),
        KOKKOS_LAMBDA(int node, int& at, bool final) {
          if (ready(node) != 2) return;
          if (final) {
            list(at) = node;
            ready(node) = 1;
          }
          ++at;
        },
        wanted);
    pass_->multipole_powers_of(space_, list, wanted, geometry_.multipole_power);
  }

  // Whether every rank holds an acceleration estimate for exactly these particles (same ids in
  // the same order). Collective in the relative criterion only.
  bool estimate_applies(Particles<MemorySpace> const& particles) {
    if (!relative()) return false;
    // (An inconsistent num is reported by check_input, after this.)
    int local = have_estimate_ && estimate_count_ == particles.num && particles.num <= particles.capacity() ? 1 : 0;
    if (local) local = count_mismatches(particles.id, estimate_ids_, particles.num) == 0 ? 1 : 0;
    int all = 0;
    MPI_Allreduce(&local, &all, 1, MPI_INT, MPI_MIN, context_.comm());
    return all == 1;
  }

  // carried_ = the first n values of `magnitude` (which may be estimate_ itself).
  void carry_estimate(ScalarView<double> const& magnitude, std::size_t n) {
    grow_preserving(carried_, n);
    auto const range = Kokkos::make_pair(std::size_t(0), n);
    Kokkos::deep_copy(space_, Kokkos::subview(carried_, range), Kokkos::subview(magnitude, range));
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

  std::vector<std::uint64_t> domain_splitters() const { return distributed_.splitters(); }

  void set_domain_splitters(std::vector<std::uint64_t> const& splitters) {
    std::size_t const bounds = std::size_t(context_.size()) - 1;
    std::string error;
    if (!splitters.empty() && splitters.size() != bounds)
      error = fmt::format("set_domain_splitters: {} keys on rank {} for {} ranks; give R - 1 = {} keys (or none)",
                          splitters.size(), context_.rank(), context_.size(), bounds);
    else if (auto const at = std::is_sorted_until(splitters.begin(), splitters.end()); at != splitters.end())
      error = fmt::format(
          "set_domain_splitters: key {} ({}) on rank {} is below the key before it ({}); give ascending keys",
          at - splitters.begin(), *at, context_.rank(), *(at - 1));
    agree_on_error(context_, error);
    // The same boundaries on every rank, or the ranks would send particles to different owners.
    std::vector<std::uint64_t> mine(bounds + 1, 0), low(bounds + 1), high(bounds + 1);
    mine[0] = splitters.size();
    std::copy(splitters.begin(), splitters.end(), mine.begin() + 1);
    MPI_Allreduce(mine.data(), low.data(), int(bounds + 1), MPI_UINT64_T, MPI_MIN, context_.comm());
    MPI_Allreduce(mine.data(), high.data(), int(bounds + 1), MPI_UINT64_T, MPI_MAX, context_.comm());
    if (low != high) {
      std::size_t const at = std::size_t(std::mismatch(low.begin(), low.end(), high.begin()).first - low.begin());
      fail("set_domain_splitters: the ranks give different {} (from {} to {}); give every rank the same keys",
           at == 0 ? std::string("key counts") : fmt::format("key {}", at - 1), low[at], high[at]);
    }
    distributed_.set_splitters(splitters);
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
  // What one M2P (a source's multipole at one particle) costs in P2P pairs: the kernel
  // derivatives and four contractions, each ∝ ncoeff = C(p + 3, 3); the factor fits the M2P and
  // P2P rates of perf_tests (docs/cost_model.md).
  static double m2p_cost_in_pairs(int order) {
    return 0.9 * (order + 1) * (order + 2) * (order + 3) / 6.0;
  }

  // Per-particle cost of this evaluation, in units of one P2P pair: the sources of its leaf's
  // P2P lists plus the leaf's M2L (each worth m2l_cost_in_pairs) shared by its particles (M2L
  // into inner nodes is left out). The next decomposition balances these weights; their
  // per-rank sums give the load imbalance of this evaluation.
  void measure_costs(int n) {
    grow_preserving(costs_, std::size_t(n));
    auto const particle_cost = costs_;
    write_target_costs(particle_cost);  // every particle is a target of a full evaluation
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

  // leaf_cost_ = each target leaf's cost per target particle (targets_) in P2P pairs over the
  // last evaluation's lists: its sources, and its M2L shared by its targets. (List targets are
  // local nodes: their particle ranges index targets_.before.)
  void measure_leaf_costs() {
    double const m2l_cost = m2l_cost_in_pairs(config_.order);
    double const m2p_cost = m2p_cost_in_pairs(config_.order);
    grow_preserving(leaf_cost_, std::size_t(tree_.num_nodes));
    Kokkos::deep_copy(space_, leaf_cost_, 0.0);
    auto cost = leaf_cost_;
    auto const pbegin = tree_.particle_begin;
    auto const pend = tree_.particle_end;
    auto const before = targets_.before;
    for (PairLists const* lists : {&p2p_, &m2l_, &m2p_}) {
      bool const near = lists == &p2p_;
      bool const m2p = lists == &m2p_;
      auto const target = lists->target;
      auto const offset = lists->offset;
      auto const source = lists->source;
      for (int s = 0; s < lists->num_segments(); ++s)
        Kokkos::parallel_for(
            "kfmm::solver::leaf_costs",
            Kokkos::RangePolicy<ExecutionSpace>(space_, lists->segment_begin[s], lists->segment_begin[s + 1]),
            KOKKOS_LAMBDA(int g) {
              int const a = target(g);
              double const share = m2l_cost / compat::math::max(1, before(pend(a)) - before(pbegin(a)));
              double c = 0;
              for (int e = offset(g); e < offset(g + 1); ++e)
                c += near ? double(pend(source(e)) - pbegin(source(e))) : m2p ? m2p_cost : share;
              cost(a) += c;
            });
    }
  }

  BoundingCube global_cube(Particles<MemorySpace> const& particles) {
    double glo[3], ghi[3];
    compute_bounds(space_, particles.pos, particles.num, glo, ghi);
    allreduce_bounds(context_, glo, ghi);
    if (!(glo[0] <= ghi[0])) {  // no particle anywhere
      for (int k = 0; k < 3; ++k) glo[k] = ghi[k] = 0;
    }
    return cube_from_bounds(glo, ghi);
  }

  // Sorts the particles by key (and carried_ with them when `carry`); `keys_known`: keys_
  // holds their keys in `cube` already.
  void sort_locally(Particles<MemorySpace>& particles, BoundingCube const& cube, int n, bool carry,
                    bool keys_known = false) {
    grow_preserving(keys_, std::size_t(n));
    grow_preserving(permutation_, std::size_t(n));
    if (!keys_known) compute_keys(space_, cube, particles.pos, n, keys_);
    // Sized by the capacity, not by whether this call moves anything: a later call that
    // sorts then allocates nothing.
    if (carry) {
      std::size_t const room = std::max(particles.capacity(), std::size_t(n));
      grow_preserving(carried_, room);
      grow_preserving(carried_spare_, room);
    }
    // Particles already in key order (e.g. re-evaluated at the same positions) stay as they are.
    if (!sorter_.sort(space_, keys_, permutation_, n)) return;
    sorter_.permute(space_, particles, permutation_);
    if (carry) {
      auto const sorted = carried_spare_;
      auto const values = carried_;
      auto const perm = permutation_;
      Kokkos::parallel_for(
          "kfmm::solver::permute_estimate", Kokkos::RangePolicy<ExecutionSpace>(space_, 0, n),
          KOKKOS_LAMBDA(int i) { sorted(i) = values(perm(i)); });
      std::swap(carried_, carried_spare_);
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
      // Kept for the next calls (the caller reads them through potential() / acceleration()),
      // so on huge pages from the kept Views' threshold: the first call writes them whole.
      potential_ = allocate_kept<ScalarView<double>>("kfmm::solver::potential", capacity);
      acceleration_ = allocate_kept<Vec3View<double>>("kfmm::solver::acceleration", capacity);
    }
    scale_results(n, potential_, acceleration_);
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
    grow_preserving(costs_, num);
    Kokkos::deep_copy(space_, Kokkos::subview(costs_, Kokkos::make_pair(std::size_t(0), num)),
                      Kokkos::subview(weights, Kokkos::make_pair(std::size_t(0), num)));
    weights_count_ = num;
    distributed_.set_costs(costs_, num);
  }

  void collect_counts(Particles<MemorySpace> const& particles, int n) {
    // M2L into shared cells is done on every rank holding particles in them; count it once.
    std::uint64_t const m2l_count = count_m2l();
    std::uint64_t local[5] = {near_pairs(), m2l_count, 0, 0, pass_->m2p_evaluations()};
    // Nodes and leaves owned here (imported nodes are counted by their owners).
    local[2] = distributed_.owned_nodes(space_, tree_, geometry_, context_.rank());
    local[3] = distributed_.owned_leaves(space_, tree_, geometry_);
    std::uint64_t global[5];
    MPI_Allreduce(local, global, 5, MPI_UINT64_T, MPI_SUM, context_.comm());
    stats_.p2p_pairs = global[0];
    stats_.m2l = global[1];
    stats_.nodes = global[2];
    stats_.leaves = global[3];
    stats_.m2p = global[4];
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
  std::unique_ptr<ExpansionPass> estimate_pass_;  ///< the estimate's lower order, when below config_.order
  ScalarView<int> copy_nodes_{"kfmm::solver::copy_nodes", 0};
  Kokkos::View<double**, MemorySpace> copy_rows_{"kfmm::solver::copy_rows", 0, 0};
  ScalarView<std::uint64_t> keys_{"kfmm::solver::keys", 0};
  ScalarView<std::uint32_t> permutation_{"kfmm::solver::permutation", 0};
  KeySorter<MemorySpace, std::uint32_t> sorter_;
  Tree<> tree_;
  NodeGeometry geometry_;
  DualTreeWalk walk_;
  ScalarView<double> allowed_{"kfmm::solver::allowed_m2l_error", 0};  ///< relative criterion, per node
  ScalarView<int> power_ready_{"kfmm::solver::power_ready", 0};  ///< lazy multipole powers: 1 computed
  // Relative criterion: |a| of the last call per particle, with the particles' ids, aligned
  // with them as that call left them; carried_ is |a| aligned with the particles inside a call.
  ScalarView<double> estimate_{"kfmm::solver::acceleration_estimate", 0};
  ScalarView<std::uint64_t> estimate_ids_{"kfmm::solver::estimate_ids", 0};
  std::size_t estimate_count_ = 0;
  bool have_estimate_ = false;
  bool statistics_ = false;  // gather the global figures of stats_ (collectives on every call)
  ScalarView<double> carried_{"kfmm::solver::carried_estimate", 0};
  ScalarView<double> carried_spare_{"kfmm::solver::carried_estimate", 0};  ///< sort_locally's target, swapped in
  PairLists m2l_, p2p_, m2p_;
  PairLists p2p_rest_;  ///< the P2P pairs an evaluation after an estimate still sums
  NearFieldReuse near_reuse_;  ///< the estimate's near field, for the evaluation after it
  std::uint64_t reused_pairs_ = 0;  ///< near-field pairs of the last evaluation summed by its estimate
  DistributedTree distributed_;
  TargetParticles targets_;  ///< the particles whose forces the current evaluation computes (owner order)
  ScalarView<double> leaf_cost_{"kfmm::solver::leaf_cost", 0};
  ScalarView<double> costs_{"kfmm::solver::costs", 0};
  std::size_t weights_count_ = 0;  ///< entries of costs_ that hold the weights of the next call
  TreeWork full_work_{}, refit_work_{};  ///< this rank's, of the last full and refitted calls
  ScalarView<double> phi_{"kfmm::solver::phi", 0};
  Vec3View<double> grad_{"kfmm::solver::grad", 0};
  ScalarView<double> potential_{"kfmm::solver::potential", 0};
  Vec3View<double> acceleration_{"kfmm::solver::acceleration", 0};
  ForceStats stats_;
  Kokkos::Timer total_timer_, phase_timer_;
  std::uint64_t host_device_start_ = 0;  ///< host_device_bytes() at the start of the call
  BoundingCube last_cube_{};
  // compute_active's reusable plan, kept by the last compute_in_input_order().
  struct ActivePlan {
    bool valid = false;
    std::size_t count = 0;                  ///< the caller's particles on this rank
    ScalarView<std::uint64_t> ids;          ///< their ids, in input order
    Particles<MemorySpace> owned;           ///< owner-order particles (ids: input rank << 40 | index)
    ExchangePlan<MemorySpace> back;         ///< owner order → input ranks (reverse: → owners)
    ScalarView<std::uint64_t> input_index;  ///< import row of `back` → input index
    BoundingCube cube{};                    ///< of the keys that built the tree
  } plan_;
  // The local tree as build_tree left it (see save_local_tree).
  struct LocalTree {
    int num_nodes = 0;
    std::vector<int> level_offset;
    ScalarView<int> child_begin{"kfmm::solver::local_child_begin", 0};
    ScalarView<int> child_end{"kfmm::solver::local_child_end", 0};
    ScalarView<int> child_index{"kfmm::solver::local_child_index", 0};
  } local_tree_;
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
void ForceSolver::compute_active(Particles<MemorySpace> const& particles, ActiveFlags const& active,
                                 ScalarView<double> const& potential, Vec3View<double> const& acceleration) {
  impl_->compute_active(particles, active, potential, acceleration);
}
ScalarView<double> ForceSolver::potential() const { return impl_->potential(); }
Vec3View<double> ForceSolver::acceleration() const { return impl_->acceleration(); }
ScalarView<double> ForceSolver::cost_weights() const { return impl_->cost_weights(); }
void ForceSolver::set_cost_weights(ScalarView<double> const& weights, std::size_t num) {
  impl_->set_cost_weights(weights, num);
}
std::vector<std::uint64_t> ForceSolver::domain_splitters() const { return impl_->domain_splitters(); }
void ForceSolver::set_domain_splitters(std::vector<std::uint64_t> const& splitters) {
  impl_->set_domain_splitters(splitters);
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
