// Accuracy, determinism and robustness of the FMM ForceSolver against direct summation, at
// any rank count (the particles are spread over all ranks of the test).
#include <kfmm/comm/initial_conditions.hpp>
#include <kfmm/core/kernel_shape.hpp>
#include <kfmm/fmm/accuracy.hpp>
#include <kfmm/fmm/direct.hpp>
#include <kfmm/fmm/expansion_dispatch.hpp>
#include <kfmm/fmm/solver.hpp>
#include <built_orders.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace {

using namespace kfmm;

struct ForceErrors {
  double force_l2 = 0;   // E = sqrt(Σ|a − a_d|² / Σ|a_d|²)
  double p99 = 0;        // 99th percentile of per-particle relative force errors
  double max = 0;
  double potential_l2 = 0;
};

class SolverTest : public testing::Test {
 protected:
  Context world;

  Particles<MemorySpace> make(ICKind kind, std::uint64_t n, std::uint64_t seed = 7) {
    ICOptions options;
    options.kind = kind;
    options.n_total = n;
    options.seed = seed;
    return to_device(make_initial_conditions(world, options));
  }

  // FMM (input order) vs direct summation over all ranks' particles.
  ForceErrors compare(Particles<MemorySpace> const& particles, FMMConfig const& config) {
    ForceSolver solver(world, config);
    ScalarView<double> pot;
    Vec3View<double> acc;
    solver.compute_in_input_order(particles, pot, acc);
    ScalarView<double> pot_d;
    Vec3View<double> acc_d;
    direct_sum_all(world, particles, config.softening, config.softening_length, config.G, pot_d, acc_d);
    auto const a = Kokkos::create_mirror_view_and_copy(HostSpace(), acc);
    auto const ad = Kokkos::create_mirror_view_and_copy(HostSpace(), acc_d);
    auto const p = Kokkos::create_mirror_view_and_copy(HostSpace(), pot);
    auto const pd = Kokkos::create_mirror_view_and_copy(HostSpace(), pot_d);
    double sums[4] = {0, 0, 0, 0};
    std::vector<double> relative;
    for (std::size_t i = 0; i < particles.num; ++i) {
      double d2 = 0, r2 = 0;
      for (int k = 0; k < 3; ++k) {
        d2 += (a(i, k) - ad(i, k)) * (a(i, k) - ad(i, k));
        r2 += ad(i, k) * ad(i, k);
      }
      sums[0] += d2;
      sums[1] += r2;
      sums[2] += (p(i) - pd(i)) * (p(i) - pd(i));
      sums[3] += pd(i) * pd(i);
      relative.push_back(std::sqrt(d2 / r2));
    }
    double global[4];
    MPI_Allreduce(sums, global, 4, MPI_DOUBLE, MPI_SUM, world.comm());
    // Percentiles over all ranks: gather the per-particle errors on every rank.
    int const local_count = static_cast<int>(relative.size());
    std::vector<int> counts(world.size()), offsets(world.size() + 1, 0);
    MPI_Allgather(&local_count, 1, MPI_INT, counts.data(), 1, MPI_INT, world.comm());
    for (int r = 0; r < world.size(); ++r) offsets[r + 1] = offsets[r] + counts[r];
    std::vector<double> all(offsets.back());
    MPI_Allgatherv(relative.data(), local_count, MPI_DOUBLE, all.data(), counts.data(), offsets.data(), MPI_DOUBLE,
                   world.comm());
    std::sort(all.begin(), all.end());
    ForceErrors e;
    e.force_l2 = std::sqrt(global[0] / global[1]);
    e.potential_l2 = std::sqrt(global[2] / global[3]);
    e.p99 = all[static_cast<std::size_t>(0.99 * (all.size() - 1))];
    e.max = all.back();
    return e;
  }
};

TEST_F(SolverTest, DefaultsMeetTheAccuracyTargetOnUniformPlummerAndClumps) {
  FMMConfig const config;
  for (ICKind kind : {ICKind::Uniform, ICKind::Plummer, ICKind::GaussianClumps}) {
    ForceErrors const e = compare(make(kind, 20000), config);
    EXPECT_LE(e.force_l2, 3e-4) << to_string(kind);
    EXPECT_LE(e.p99, 3e-3) << to_string(kind);
    EXPECT_LE(e.potential_l2, 3e-4) << to_string(kind);
  }
}

// Label `slow` (ctest -L slow): the defaults at 10× the particles of the default test, on every
// kind `kfmm ic` makes (fmm.hard checks them at 2e4), against direct summation on 4000 sampled
// targets (per rank).
TEST_F(SolverTest, SlowDefaultsMeetTheAccuracyTargetAt2e5) {
  FMMConfig const config;
  for (ICKind kind : all_ic_kinds()) {
    auto particles = make(kind, 200000);
    ForceSolver solver(world, config);
    solver.compute(particles);
    AccuracyReport const e =
        measure_accuracy(world, particles, solver.potential(), solver.acceleration(), config, 4000);
    if (world.rank() == 0)
      std::printf("%s: E = %.3g, p99 = %.3g, p99.9 = %.3g, max = %.3g, potential %.3g (%llu targets)\n",
                  to_string(kind).c_str(), e.force_l2, e.p99, e.p999, e.max, e.potential_l2,
                  static_cast<unsigned long long>(e.samples));
    EXPECT_LE(e.force_l2, 3e-4) << to_string(kind);
    EXPECT_LE(e.p99, 3e-3) << to_string(kind);
    EXPECT_LE(e.p999, 1e-2) << to_string(kind);
    EXPECT_LE(e.potential_l2, 3e-4) << to_string(kind);
  }
}

// Newton's third law: under the angle criterion every M2L pair and P2P pair is taken both ways
// with the same truncation (it accepts (A, B) exactly when it accepts (B, A)), so Σ m a vanishes
// up to round-off (not merely to the force error). The relative criterion
// (the default) decides per target from its own |a|: (A, B) may be accepted where (B, A) is
// opened, and the total force is then that of the one-sided truncation errors, each at most
// about tolerance × the target's |a|.
TEST_F(SolverTest, TotalForceVanishesToRoundOff) {
  for (Precision precision : {Precision::Double, Precision::Float}) {
    for (ICKind kind : {ICKind::Plummer, ICKind::GaussianClumps}) {
      for (OpeningCriterion opening : {OpeningCriterion::Angle, OpeningCriterion::Relative}) {
        auto const particles = make(kind, 20000);
        FMMConfig config;
        config.precision = precision;
        config.opening = opening;
        config.theta = default_theta(opening);
        ForceSolver solver(world, config);
        ScalarView<double> pot;
        Vec3View<double> acc;
        solver.compute_in_input_order(particles, pot, acc);
        auto const a = Kokkos::create_mirror_view_and_copy(HostSpace(), acc);
        auto const m = Kokkos::create_mirror_view_and_copy(HostSpace(), particles.mass);
        double sums[4] = {0, 0, 0, 0};
        for (std::size_t i = 0; i < particles.num; ++i) {
          for (int k = 0; k < 3; ++k) sums[k] += m(i) * a(i, k);
          sums[3] += m(i) * std::hypot(a(i, 0), a(i, 1), a(i, 2));
        }
        double global[4];
        MPI_Allreduce(sums, global, 4, MPI_DOUBLE, MPI_SUM, world.comm());
        double const ratio = std::hypot(global[0], global[1], global[2]) / global[3];
        if (world.rank() == 0)
          std::printf("%s %s %s: |sum m a| / sum m|a| = %.3g\n", to_string(precision).c_str(), to_string(kind).c_str(),
                      to_string(opening).c_str(), ratio);
        double const round_off = precision == Precision::Double ? 1e-13 : 1e-6;
        EXPECT_LE(ratio, opening == OpeningCriterion::Angle ? round_off : config.tolerance + round_off)
            << to_string(kind) << " " << to_string(opening);
      }
    }
  }
}

TEST_F(SolverTest, ErrorFallsWithOrderAndWithTheta) {
  auto const particles = make(ICKind::Plummer, 4000);
  FMMConfig config;
  config.precision = Precision::Double;
  config.theta = 0.6;
  double previous = 1;
  int compared = 0;
  for (int p : {1, 3, 5, 7}) {
    if (!expansion_order_built(p)) continue;  // builds with fewer KFMM_EXPANSION_ORDERS
    ++compared;
    config.order = p;
    double const e = compare(particles, config).force_l2;
    EXPECT_LT(e, previous) << "p = " << p;
    previous = e;
  }
  // A build with all orders (the default) compares four; one with fewer compares what it has.
  if (expansion_order_built(1) && expansion_order_built(7)) EXPECT_GE(compared, 2);
  config.order = 7;
  previous = 1;
  for (double theta : {0.9, 0.6, 0.4}) {
    config.theta = theta;
    double const e = compare(particles, config).force_l2;
    EXPECT_LT(e, previous) << "theta = " << theta;
    previous = e;
  }
}

// The GPU-shaped kernels (teams, tiles; requested here on the CPU) and the CPU-shaped ones
// give the same forces up to the round-off of a different summation order, in both precisions
// and both softening kernels, and the GPU shape repeats bit for bit.
TEST_F(SolverTest, GpuShapedKernelsGiveTheCpuShapedForces) {
  auto const particles = make(ICKind::GaussianClumps, 6000);
  for (Precision precision : {Precision::Float, Precision::Double}) {
    for (SofteningKind kind : {SofteningKind::Plummer, SofteningKind::Spline}) {
      FMMConfig config;
      config.precision = precision;
      config.softening = kind;
      config.softening_length = 0.01;
      std::vector<double> acc_of[2];
      for (int shape = 0; shape < 2; ++shape) {
        ScopedKernelShape const scope(shape ? KernelShape::Gpu : KernelShape::Cpu);
        ForceSolver solver(world, config);
        ScalarView<double> pot;
        Vec3View<double> acc;
        solver.compute_in_input_order(particles, pot, acc);
        auto const a = Kokkos::create_mirror_view_and_copy(HostSpace(), acc);
        for (std::size_t i = 0; i < particles.num; ++i)
          for (int k = 0; k < 3; ++k) acc_of[shape].push_back(a(i, k));
        if (shape == 1) {
          // Estimating |a| again, as the first call did: a call that reuses the last |a| sums
          // its near field in one part, not partly in the estimate (fmm/near_field_reuse.hpp).
          solver.forget_acceleration_estimate();
          solver.compute_in_input_order(particles, pot, acc);
          auto const again = Kokkos::create_mirror_view_and_copy(HostSpace(), acc);
          for (std::size_t i = 0; i < particles.num; ++i)
            for (int k = 0; k < 3; ++k) ASSERT_EQ(again(i, k), a(i, k)) << "GPU shape not repeatable at " << i;
        }
      }
      // Relative to each particle's force: float sums in another order differ by ~1e-6.
      double const tolerance = precision == Precision::Float ? 2e-5 : 1e-11;
      double worst = 0;
      for (std::size_t i = 0; i < particles.num; ++i) {
        double d2 = 0, r2 = 0;
        for (int k = 0; k < 3; ++k) {
          double const d = acc_of[1][3 * i + k] - acc_of[0][3 * i + k];
          d2 += d * d;
          r2 += acc_of[0][3 * i + k] * acc_of[0][3 * i + k];
        }
        worst = std::max(worst, std::sqrt(d2 / r2));
      }
      EXPECT_LE(worst, tolerance) << to_string(precision) << " " << to_string(kind);
    }
  }
}

TEST_F(SolverTest, HighOrderDoubleReachesOneInTenMillion) {
  if (!expansion_order_built(8)) GTEST_SKIP() << kfmm::test_support::not_built_message(8);
  FMMConfig config;
  config.order = 8;
  config.theta = 0.3;
  config.precision = Precision::Double;
  EXPECT_LE(compare(make(ICKind::Uniform, 3000), config).force_l2, 1e-7);
}

TEST_F(SolverTest, BothKernelsOverTheSofteningRange) {
  auto const particles = make(ICKind::Uniform, 4000);
  double const separation = 1.0 / std::cbrt(4000.0);
  for (SofteningKind kind : {SofteningKind::Plummer, SofteningKind::Spline}) {
    for (double eps : {1e-4, 0.3 * separation, 10 * separation}) {
      FMMConfig config;
      config.softening = kind;
      config.softening_length = eps;
      ForceErrors const e = compare(particles, config);
      EXPECT_LE(e.force_l2, 3e-4) << to_string(kind) << " eps " << eps;
      EXPECT_LE(e.potential_l2, 3e-4) << to_string(kind) << " eps " << eps;
    }
  }
}

// Particles built on rank 0 only (the solver spreads them); others contribute none.
Particles<MemorySpace> degenerate(Context const& world, int kind) {
  std::size_t const n = world.is_root() ? 3000 : 0;
  Particles<HostSpace> p(n);
  p.num = n;
  p.num_total = 3000;
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(0, 1);
  for (std::size_t i = 0; i < n; ++i) {
    double x[3] = {u(rng), u(rng), u(rng)};
    if (kind == 0 && i < 2000) x[0] = x[1] = x[2] = 0.5;        // thousands at one point
    if (kind == 1 && i % 2 == 1)
      for (int k = 0; k < 3; ++k) x[k] = p.pos(i - 1, k) + 1e-9;  // pairs 1e-9 apart
    for (int k = 0; k < 3; ++k) {
      p.pos(i, k) = x[k] + (kind == 2 ? 1e3 : 0.0);                // far from the origin
      p.vel(i, k) = 0;
    }
    p.mass(i) = 1.0 / 3000;
    p.id(i) = i + 1;
  }
  return to_device(p);
}

TEST_F(SolverTest, DegenerateInputsGiveFiniteAccurateForces) {
  // One dominant point mass puts every far-field error at its worst case, so the bound is looser
  // than for smooth distributions; in double at higher order it must still converge.
  FMMConfig config;
  config.softening_length = 1e-3;
  for (int kind : {0, 1, 2}) {
    ForceErrors const e = compare(degenerate(world, kind), config);
    EXPECT_TRUE(std::isfinite(e.force_l2) && std::isfinite(e.max)) << kind;
    EXPECT_LE(e.force_l2, 1e-2) << kind;
    EXPECT_LE(e.potential_l2, 1e-3) << kind;
  }
  if (!expansion_order_built(8)) return;  // builds with fewer KFMM_EXPANSION_ORDERS
  config.order = 8;
  config.theta = 0.4;
  config.precision = Precision::Double;
  for (int kind : {0, 1, 2}) EXPECT_LE(compare(degenerate(world, kind), config).force_l2, 1e-4) << kind;
}

TEST_F(SolverTest, RepeatedEvaluationIsBitIdenticalAndPaddingIsNaN) {
  // The same input on the same ranks gives bit-identical results.
  auto const input = make(ICKind::GaussianClumps, 10000);
  Particles<MemorySpace> p1(input.num), p2(input.num);
  p1.assign(input);
  p2.assign(input);
  ForceSolver s1(world, FMMConfig{}), s2(world, FMMConfig{});  // the relative criterion
  s1.compute(p1);
  s2.compute(p2);
  auto const a1 = Kokkos::create_mirror_view_and_copy(HostSpace(), s1.acceleration());
  auto const a2 = Kokkos::create_mirror_view_and_copy(HostSpace(), s2.acceleration());
  ASSERT_EQ(p1.num, p2.num);
  for (std::size_t i = 0; i < p1.num; ++i)
    for (int k = 0; k < 3; ++k) ASSERT_EQ(a1(i, k), a2(i, k)) << i;
  for (std::size_t i = p1.num; i < a1.extent(0); ++i) EXPECT_TRUE(std::isnan(a1(i, 0)));
  // Calling again rebalances by the measured cost; on one rank nothing moves and the result
  // repeats bit for bit, on several the split (and so the summation order) may change.
  std::vector<double> before(3 * (input.num_total + 1), 0), after(before.size(), 0);
  auto record = [&](Particles<MemorySpace> const& p, ForceSolver const& s, std::vector<double>& out) {
    auto const ids = Kokkos::create_mirror_view_and_copy(HostSpace(), p.id);
    auto const a = Kokkos::create_mirror_view_and_copy(HostSpace(), s.acceleration());
    std::vector<double> local(out.size(), 0);
    for (std::size_t i = 0; i < p.num; ++i)
      for (int k = 0; k < 3; ++k) local[3 * ids(i) + k] = a(i, k);
    MPI_Allreduce(local.data(), out.data(), static_cast<int>(out.size()), MPI_DOUBLE, MPI_SUM, world.comm());
  };
  record(p1, s1, before);
  // Under the relative criterion a second call takes |a| from the first call's result instead
  // of estimating it, so its lists differ; the same estimate gives the same result.
  s1.forget_acceleration_estimate();
  s1.compute(p1);
  record(p1, s1, after);
  for (std::size_t j = 0; j < before.size(); ++j) {
    if (world.size() == 1)
      ASSERT_EQ(before[j], after[j]) << j;
    else
      ASSERT_NEAR(before[j], after[j], 1e-4 * std::fabs(before[j]) + 1e-9) << j;
  }
}

TEST_F(SolverTest, DistributedResultEqualsSingleRankResult) {
  // Everyone computes the whole set alone (MPI_COMM_SELF) and compares with its share of the
  // distributed result, particle by particle (matched by id).
  ICOptions options;
  options.kind = ICKind::GaussianClumps;
  options.n_total = 8000;
  FMMConfig config;
  config.precision = Precision::Double;
  Context const self(MPI_COMM_SELF);
  auto all = to_device(generate_initial_conditions(options, 0, 1, [](std::int64_t*, int) {}));
  ForceSolver single(self, config);
  single.collect_statistics(true);
  single.compute(all);
  auto const ids_single = Kokkos::create_mirror_view_and_copy(HostSpace(), all.id);
  auto const acc_single = Kokkos::create_mirror_view_and_copy(HostSpace(), single.acceleration());
  std::vector<std::size_t> where(options.n_total + 1);
  for (std::size_t i = 0; i < all.num; ++i) where[ids_single(i)] = i;

  auto mine = make(ICKind::GaussianClumps, 8000, options.seed);
  ForceSolver distributed(world, config);
  distributed.collect_statistics(true);
  distributed.compute(mine);
  auto const ids = Kokkos::create_mirror_view_and_copy(HostSpace(), mine.id);
  auto const acc = Kokkos::create_mirror_view_and_copy(HostSpace(), distributed.acceleration());
  for (std::size_t i = 0; i < mine.num; ++i) {
    std::size_t const j = where[ids(i)];
    double d2 = 0, r2 = 0;
    for (int k = 0; k < 3; ++k) {
      d2 += (acc(i, k) - acc_single(j, k)) * (acc(i, k) - acc_single(j, k));
      r2 += acc_single(j, k) * acc_single(j, k);
    }
    ASSERT_LE(std::sqrt(d2 / r2), 1e-6) << "id " << ids(i);
  }
  EXPECT_EQ(distributed.stats().nodes, single.stats().nodes);
  EXPECT_EQ(distributed.stats().p2p_pairs, single.stats().p2p_pairs);
  // M2L into a shared cell runs on every rank holding part of it and is counted by exactly one.
  EXPECT_EQ(distributed.stats().m2l, single.stats().m2l);
  // The measured load imbalance (max/mean of the per-rank cost) is reported, and the next
  // evaluation, decomposed by those costs, is not worse balanced than a count split.
  double const by_count = distributed.stats().cost_imbalance;
  distributed.compute(mine);
  double const by_cost = distributed.stats().cost_imbalance;
  if (world.rank() == 0) std::printf("cost imbalance %.4f (count split), %.4f (cost split)\n", by_count, by_cost);
  if (world.size() > 1) {
    EXPECT_GT(by_count, 1.0);
    EXPECT_LE(by_cost, by_count * 1.02);
  } else {
    EXPECT_EQ(by_cost, 1.0);
  }
}

// Masses that differ by id (a factor 0.5 … 2): a mass that went to the wrong particle or lost
// bits in transit changes forces.
void vary_masses_by_id(Particles<MemorySpace>& particles) {
  auto const mass = particles.mass;
  auto const id = particles.id;
  Kokkos::parallel_for(
      "kfmm_test::vary_masses_by_id", Kokkos::RangePolicy<ExecutionSpace>(0, particles.num),
      KOKKOS_LAMBDA(std::size_t i) { mass(i) *= 0.5 + double(id(i) % 13) / 8.0; });
  Kokkos::fence();
}

// Single precision (the default) on several ranks: remote multipoles travel as floats, two to a
// double in the node rows, and remote leaf particles' masses as floats beside the requester's
// leaf (core/packed_words.hpp). Forces and potentials must keep every bit of the one-rank
// result: a row that lost or moved a bit would change them. Spline and Plummer, the relative
// criterion (its first call's estimate walk imports nodes too) and the angle criterion at a
// high order.
TEST_F(SolverTest, DistributedFloatResultIsBitIdenticalToSingleRank) {
  struct Setting {
    SofteningKind kernel;
    OpeningCriterion opening;
    int order;
  };
  for (Setting const setting : {Setting{SofteningKind::Spline, OpeningCriterion::Relative, 7},
                                Setting{SofteningKind::Plummer, OpeningCriterion::Angle, 8}}) {
    ICOptions options;
    options.kind = ICKind::GaussianClumps;
    options.n_total = 12000;
    FMMConfig config;
    config.softening = setting.kernel;
    config.opening = setting.opening;
    config.theta = default_theta(setting.opening);
    config.order = setting.order;
    config.leaf_size = 32;  // more nodes, more of them imported
    if (!expansion_order_built(config.order)) continue;  // builds with fewer KFMM_EXPANSION_ORDERS
    ASSERT_EQ(config.precision, Precision::Float);
    Context const self(MPI_COMM_SELF);
    auto all = to_device(generate_initial_conditions(options, 0, 1, [](std::int64_t*, int) {}));
    vary_masses_by_id(all);
    // Ids, accelerations and potentials of a solver's last call, on the host.
    auto const results = [](Particles<MemorySpace> const& particles, ForceSolver const& solver) {
      return std::make_tuple(Kokkos::create_mirror_view_and_copy(HostSpace(), particles.id),
                             Kokkos::create_mirror_view_and_copy(HostSpace(), solver.acceleration()),
                             Kokkos::create_mirror_view_and_copy(HostSpace(), solver.potential()));
    };
    ForceSolver single(self, config);
    single.compute(all);
    auto const [ids_single, acc_single, pot_single] = results(all, single);
    std::vector<std::size_t> where(options.n_total + 1);
    for (std::size_t i = 0; i < all.num; ++i) where[ids_single(i)] = i;

    auto mine = make(ICKind::GaussianClumps, options.n_total, options.seed);
    vary_masses_by_id(mine);
    ForceSolver distributed(world, config);
    distributed.compute(mine);
    auto const [ids, acc, pot] = results(mine, distributed);
    std::size_t differing = 0;
    for (std::size_t i = 0; i < mine.num; ++i) {
      std::size_t const j = where[ids(i)];
      bool same = pot(i) == pot_single(j);
      for (int k = 0; k < 3; ++k) same = same && acc(i, k) == acc_single(j, k);
      differing += same ? 0 : 1;
    }
    EXPECT_EQ(differing, 0u) << "kernel " << int(setting.kernel) << ", order " << setting.order << " on rank "
                             << world.rank() << " of " << world.size();
  }
}

// compute_in_input_order hands the results back in input order, so the cost weights of the
// next decomposition must follow them there (they once stayed in owner order, whose count
// differs, and were dropped: every input-order call was split by count).
TEST_F(SolverTest, InputOrderCallsKeepTheCostWeightsAligned) {
  auto const particles = make(ICKind::GaussianClumps, 20000);
  FMMConfig config;
  config.leaf_size = 16;  // fine cells, so that the rank boundaries can follow the weights
  config.domain_tolerance = 0;  // new domains from the weights at every call
  ForceSolver solver(world, config);
  solver.collect_statistics(true);
  ScalarView<double> pot;
  Vec3View<double> acc;
  solver.compute_in_input_order(particles, pot, acc);
  double const by_count = solver.stats().cost_imbalance;
  solver.compute_in_input_order(particles, pot, acc);
  double const by_cost = solver.stats().cost_imbalance;
  if (world.rank() == 0) std::printf("input order: cost imbalance %.4f (count split), %.4f (cost split)\n", by_count, by_cost);
  if (world.size() == 1) {
    EXPECT_EQ(solver.cost_weights().extent(0), 0u);
    return;
  }
  EXPECT_EQ(solver.cost_weights().extent(0), particles.num);
  EXPECT_LE(by_cost, 1.03);
  EXPECT_LT(by_cost, by_count);
}

TEST_F(SolverTest, CostWeightsFromOutsideAreChecked) {
  auto particles = make(ICKind::Uniform, 2000);
  ForceSolver solver(world, FMMConfig{});
  solver.collect_statistics(true);
  ScalarView<double> weights("weights", particles.num);
  Kokkos::deep_copy(weights, 1.0);
  EXPECT_THROW(solver.set_cost_weights(weights, particles.num + 1), Error);
  if (particles.num > 0) {
    Kokkos::deep_copy(Kokkos::subview(weights, particles.num / 2), std::nan(""));
    try {
      solver.set_cost_weights(weights, particles.num);
      ADD_FAILURE() << "a NaN weight was accepted";
    } catch (Error const& e) {
      EXPECT_NE(std::string(e.what()).find("not finite"), std::string::npos) << e.what();
    }
  }
  Kokkos::deep_copy(weights, 2.0);
  solver.set_cost_weights(weights, particles.num);
  EXPECT_EQ(solver.cost_weights().extent(0), particles.num);
  solver.compute(particles);  // decomposed by the given weights
  EXPECT_EQ(solver.stats().p2p_pairs > 0, true);
}

// Global figures cost collectives on every call: gathered only on request, and asking for
// them changes no force.
TEST_F(SolverTest, GlobalStatisticsOnlyOnRequest) {
  auto particles = make(ICKind::GaussianClumps, 3000);
  auto copy = make(ICKind::GaussianClumps, 3000);
  ForceSolver quiet(world, FMMConfig{});
  ForceSolver counting(world, FMMConfig{});
  counting.collect_statistics(true);
  quiet.compute(particles);
  counting.compute(copy);
  EXPECT_EQ(quiet.stats().p2p_pairs, 0u);
  EXPECT_EQ(quiet.stats().m2l, 0u);
  EXPECT_EQ(quiet.stats().nodes, 0u);
  EXPECT_EQ(quiet.stats().cost_imbalance, 1.0);
  EXPECT_GT(quiet.stats().seconds("walk"), 0.0);
  EXPECT_GT(counting.stats().p2p_pairs, 0u);
  EXPECT_GT(counting.stats().m2l, 0u);
  EXPECT_EQ(counting.stats().particles_max > 0, true);
  auto const a = Kokkos::create_mirror_view_and_copy(HostSpace(), quiet.acceleration());
  auto const b = Kokkos::create_mirror_view_and_copy(HostSpace(), counting.acceleration());
  std::size_t differ = 0;
  for (std::size_t i = 0; i < particles.num; ++i)
    for (int k = 0; k < 3; ++k) differ += a(i, k) != b(i, k);
  EXPECT_EQ(differ, 0u);
}

TEST_F(SolverTest, InteractionListsBeyondTheIndexLimitFailOnEveryRank) {
  // Lists index entries with int. The walk's limit, lowered on the last rank only (the
  // testing hook stands in for 2^31 entries), must make every rank throw the same error after
  // the walk, and no rank may hang in the distributed walk's collectives.
  auto particles = make(ICKind::Plummer, 4000);
  int const last = world.size() - 1;
  if (world.rank() == last) setenv("KFMM_WALK_INDEX_LIMIT", "50", 1);
  std::string message;
  try {
    ForceSolver solver(world, FMMConfig{});
    unsetenv("KFMM_WALK_INDEX_LIMIT");
    solver.compute(particles);
  } catch (Error const& e) {
    message = e.what();
  }
  unsetenv("KFMM_WALK_INDEX_LIMIT");
  EXPECT_NE(message.find("more than the 32-bit index limit 50; use more MPI ranks or a larger leaf_size"),
            std::string::npos)
      << message;
  if (world.size() > 1) EXPECT_NE(message.find("rank " + std::to_string(last) + ":"), std::string::npos) << message;
  // Afterwards the hook is gone and a new solver works.
  ForceSolver solver(world, FMMConfig{});
  solver.collect_statistics(true);
  solver.compute(particles);
  EXPECT_GT(solver.stats().p2p_pairs, 0u);
}

TEST_F(SolverTest, InvalidConfigurationsAreNamed) {
  auto expect_error = [&](FMMConfig const& c, std::string const& text) {
    try {
      ForceSolver solver(world, c);
      ADD_FAILURE() << "no error for " << text;
    } catch (Error const& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  FMMConfig c;
  c.order = 9;
  expect_error(c, "order = 9");
  // Orders left out of the build (KFMM_EXPANSION_ORDERS) are refused with the fix; built ones run.
  for (int p = min_expansion_order; p <= max_expansion_order; ++p) {
    c = FMMConfig{};
    c.order = p;
    if (expansion_order_built(p))
      EXPECT_NO_THROW(c.validate()) << p;
    else
      expect_error(c, "-DKFMM_EXPANSION_ORDERS including " + std::to_string(p));
  }
  c = FMMConfig{};
  c.theta = 0;
  expect_error(c, "theta = 0");
  c.theta = 1.5;
  expect_error(c, "theta = 1.5");
  c = FMMConfig{};
  c.leaf_size = 0;
  expect_error(c, "leaf_size = 0");
  c = FMMConfig{};
  c.softening_length = -1;
  expect_error(c, "softening length = -1");
}

}  // namespace

namespace {

using namespace kfmm;

// Particles of this rank: random points on rank 0; on every other rank all `per_rank`
// particles sit at one rank-specific point.
Particles<MemorySpace> rank_points(Context const& world, std::size_t per_rank) {
  Particles<HostSpace> p(per_rank);
  p.num = per_rank;
  p.num_total = per_rank * world.size();
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0, 1);
  for (std::size_t i = 0; i < per_rank; ++i) {
    for (int k = 0; k < 3; ++k) {
      p.pos(i, k) = world.rank() == 0 ? u(rng) : 0.25 * world.rank() + 0.1 * k;
      p.vel(i, k) = 0;
    }
    p.mass(i) = 1.0;
    p.id(i) = 1 + world.rank() * per_rank + i;
  }
  return to_device(p);
}

class DistributedSolverTest : public testing::Test {
 protected:
  Context world;
};

TEST_F(DistributedSolverTest, FewerParticlesThanRanksAndRanksAtOnePoint) {
  FMMConfig config;
  config.softening_length = 0.01;
  config.precision = Precision::Double;
  config.order = expansion_order_built(6) ? 6 : 7;
  config.theta = 0.4;
  for (std::size_t per_rank : {std::size_t(1), std::size_t(200)}) {
    // With one particle per rank and a 3-particle tree, most ranks own nothing after the
    // decomposition; with 200, every rank but 0 holds all its particles at one point.
    auto particles = rank_points(world, per_rank);
    ScalarView<double> pot, acc_direct_pot;
    Vec3View<double> acc, acc_direct;
    ForceSolver solver(world, config);
    solver.compute_in_input_order(particles, pot, acc);
    // Every rank gets cost weights for its input particles, also one that owned none of them.
    EXPECT_EQ(solver.cost_weights().extent(0), world.size() > 1 ? particles.num : 0u) << per_rank << " per rank";
    direct_sum_all(world, particles, config.softening, config.softening_length, config.G, acc_direct_pot, acc_direct);
    auto const a = Kokkos::create_mirror_view_and_copy(HostSpace(), acc);
    auto const d = Kokkos::create_mirror_view_and_copy(HostSpace(), acc_direct);
    double err = 0, norm = 0;
    for (std::size_t i = 0; i < particles.num; ++i)
      for (int k = 0; k < 3; ++k) {
        EXPECT_TRUE(std::isfinite(a(i, k)));
        err += (a(i, k) - d(i, k)) * (a(i, k) - d(i, k));
        norm += d(i, k) * d(i, k);
      }
    double global[2], local[2] = {err, norm};
    MPI_Allreduce(local, global, 2, MPI_DOUBLE, MPI_SUM, world.comm());
    EXPECT_LE(std::sqrt(global[0]), 1e-3 * std::sqrt(global[1]) + 1e-12) << per_rank << " per rank";
  }
}

TEST_F(DistributedSolverTest, IdsSurviveRedistributionAndInputOrderMatchesOwnerOrder) {
  ICOptions options;
  options.kind = ICKind::Plummer;
  options.n_total = 5003;  // not divisible by 2, 3 or 4
  auto particles = to_device(make_initial_conditions(world, options));
  auto const input = to_host(particles);
  ForceSolver solver(world, FMMConfig{});
  ScalarView<double> pot_in;
  Vec3View<double> acc_in;
  solver.compute_in_input_order(particles, pot_in, acc_in);
  Particles<MemorySpace> owned(particles.num);
  owned.assign(particles);
  // Estimating |a| again, as the first call did: with the first call's |a| instead of the
  // estimate (order 3) the relative criterion would choose slightly different pairs.
  solver.forget_acceleration_estimate();
  solver.compute(owned);
  // Global multiset of ids: every id 1..N exactly once.
  auto const ids = Kokkos::create_mirror_view_and_copy(HostSpace(), owned.id);
  std::vector<int> seen(options.n_total + 1, 0), all_seen(options.n_total + 1, 0);
  for (std::size_t i = 0; i < owned.num; ++i) ++seen[ids(i)];
  MPI_Allreduce(seen.data(), all_seen.data(), static_cast<int>(seen.size()), MPI_INT, MPI_SUM, world.comm());
  for (std::uint64_t id = 1; id <= options.n_total; ++id) ASSERT_EQ(all_seen[id], 1) << "id " << id;
  std::uint64_t local = owned.num, total = 0;
  MPI_Allreduce(&local, &total, 1, MPI_UINT64_T, MPI_SUM, world.comm());
  EXPECT_EQ(total, options.n_total);
  // The input-order results of a particle equal its owner-order results (same global tree).
  std::vector<double> by_id(3 * (options.n_total + 1), 0), all_by_id(by_id.size(), 0);
  auto const acc = Kokkos::create_mirror_view_and_copy(HostSpace(), solver.acceleration());
  for (std::size_t i = 0; i < owned.num; ++i)
    for (int k = 0; k < 3; ++k) by_id[3 * ids(i) + k] = acc(i, k);
  MPI_Allreduce(by_id.data(), all_by_id.data(), static_cast<int>(by_id.size()), MPI_DOUBLE, MPI_SUM, world.comm());
  auto const a_in = Kokkos::create_mirror_view_and_copy(HostSpace(), acc_in);
  // Only the rank split may differ between the two calls (the second balances by measured cost),
  // which changes the summation order in shared cells: agreement to float round-off.
  for (std::size_t i = 0; i < input.num; ++i) {
    double const* b = &all_by_id[3 * input.id(i)];
    double const scale = std::sqrt(b[0] * b[0] + b[1] * b[1] + b[2] * b[2]);
    for (int k = 0; k < 3; ++k) EXPECT_NEAR(a_in(i, k), b[k], 1e-4 * scale) << "id " << input.id(i);
  }
}

}  // namespace
