// The relative opening criterion: the per-node allowance, what the walk does with it, and the
// solver's accuracy with it on distributions where the angle criterion leaves large
// per-particle errors (dense satellites in a sparse halo, a wide mass spectrum).
#include "host_pair_lists.hpp"
#include "sorted_tree.hpp"

#include <device_views.hpp>
#include <kfmm/comm/initial_conditions.hpp>
#include <kfmm/core/error.hpp>
#include <kfmm/core/format.hpp>
#include <kfmm/core/kernel_shape.hpp>
#include <kfmm/fmm/accuracy.hpp>
#include <kfmm/fmm/expansion_dispatch.hpp>
#include <kfmm/fmm/dual_tree_walk.hpp>
#include <kfmm/fmm/expansion_pass.hpp>
#include <kfmm/fmm/relative_opening.hpp>
#include <kfmm/fmm/solver.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace kfmm;

class RelativeOpeningTest : public testing::Test {
 protected:
  void SetUp() override {
    sorted = kfmm_test::sorted_tree(kfmm_test::plummer_with_a_clump(3000, 50), 24);
    geometry.power_exponent = 8;  // order 7
    compute_node_geometry(space, sorted.tree, sorted.particles.pos, sorted.particles.mass,
                          ExpansionCentre::CentreOfMass, sorted.cube, geometry);
    space.fence();
  }

  ExecutionSpace space;
  kfmm_test::SortedTree sorted;
  NodeGeometry geometry;
};

// The power radius is the (p+1)-th power mean of the particles' distances from the centre:
// exact in leaves, an upper bound (and never above the bounding radius) in inner nodes; the
// GPU shape gives the same to rounding.
TEST_F(RelativeOpeningTest, PowerRadiusIsThePowerMeanOfTheDistances) {
  auto const host = [](auto const& view) { return Kokkos::create_mirror_view_and_copy(HostSpace(), view); };
  auto const pos = host(sorted.particles.pos);
  auto const mass = host(sorted.particles.mass);
  auto const centre = host(geometry.centre);
  auto const radius = host(geometry.radius);
  auto const power = host(geometry.power_radius);
  auto const cbegin = host(sorted.tree.child_begin), cend = host(sorted.tree.child_end);
  auto const pbegin = host(sorted.tree.particle_begin), pend = host(sorted.tree.particle_end);
  NodeGeometry teams;
  teams.power_exponent = geometry.power_exponent;
  compute_node_geometry(space, sorted.tree, sorted.particles.pos, sorted.particles.mass, ExpansionCentre::CentreOfMass,
                        sorted.cube, teams, true);
  auto const team_power = host(teams.power_radius);
  int strictly_inside = 0;
  for (int node = 0; node < sorted.tree.num_nodes; ++node) {
    double m = 0, sum = 0;
    for (int i = pbegin(node); i < pend(node); ++i) {
      double d2 = 0;
      for (int k = 0; k < 3; ++k) d2 += (pos(i, k) - centre(node, k)) * (pos(i, k) - centre(node, k));
      m += mass(i);
      sum += mass(i) * std::pow(d2, 4.0);  // |x − c|^8
    }
    double const exact = std::pow(sum / m, 1.0 / 8);
    EXPECT_LE(power(node), radius(node)) << "node " << node;
    EXPECT_NEAR(team_power(node), power(node), 1e-12 * radius(node)) << "node " << node;
    if (cbegin(node) == cend(node)) {
      EXPECT_NEAR(power(node), exact, 1e-12 * radius(node)) << "leaf " << node;
    } else {
      EXPECT_GE(power(node), exact * (1 - 1e-12)) << "inner node " << node;
    }
    strictly_inside += power(node) < 0.9 * radius(node) ? 1 : 0;
  }
  // It is what makes the criterion cheaper than the bounding radius: most nodes have mass well inside.
  EXPECT_GT(strictly_inside, sorted.tree.num_nodes / 2);
}

TEST_F(RelativeOpeningTest, AllowanceIsAlphaTimesTheSmallestForceBelowEachNode) {
  int const n = sorted.n;
  ScalarView<double> magnitude("magnitude", n);
  auto magnitude_host = Kokkos::create_mirror_view(magnitude);
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0, 1);
  for (int i = 0; i < n; ++i) magnitude_host(i) = u(rng) * (i % 7 == 0 ? 1e-3 : 1.0);
  Kokkos::deep_copy(magnitude, magnitude_host);
  ScalarView<double> allowed;
  double const alpha = 2e-3;
  relative_opening_allowance(space, sorted.tree, geometry, magnitude, alpha, sorted.tree.num_nodes, allowed);
  auto const got = Kokkos::create_mirror_view_and_copy(HostSpace(), allowed);
  auto const pbegin = Kokkos::create_mirror_view_and_copy(HostSpace(), sorted.tree.particle_begin);
  auto const pend = Kokkos::create_mirror_view_and_copy(HostSpace(), sorted.tree.particle_end);
  ASSERT_GE(int(got.extent(0)), sorted.tree.num_nodes);
  for (int node = 0; node < sorted.tree.num_nodes; ++node) {
    // A node's particles are the contiguous range of all its descendants.
    double want = std::numeric_limits<double>::infinity();
    for (int i = pbegin(node); i < pend(node); ++i) want = std::min(want, alpha * magnitude_host(i));
    EXPECT_EQ(got(node), want) << "node " << node;
  }
}

int count_pairs(PairLists const& lists) { return lists.num_entries; }

TEST_F(RelativeOpeningTest, WalkAcceptsWhatTheAllowanceAllows) {
  DualTreeWalk walk;
  PairLists m2l_angle, p2p_angle, m2l, p2p;
  walk.run(space, sorted.tree, geometry, OpeningTest{0.6, 0.0}, 0, m2l_angle, p2p_angle);
  ScalarView<double> allowed("allowed", sorted.tree.num_nodes);
  // Unbounded allowance: the angle test alone decides.
  Kokkos::deep_copy(allowed, std::numeric_limits<double>::infinity());
  walk.run(space, sorted.tree, geometry, OpeningTest{0.6, 0.0, 7, allowed}, 0, m2l, p2p);
  EXPECT_EQ(count_pairs(m2l), count_pairs(m2l_angle));
  EXPECT_EQ(count_pairs(p2p), count_pairs(p2p_angle));
  // A negative allowance: nothing goes to M2L, every leaf pair is summed directly. (With 0, pairs
  // of single-particle leaves, radius 0, still go: their expansions are exact.)
  Kokkos::deep_copy(allowed, -1.0);
  walk.run(space, sorted.tree, geometry, OpeningTest{0.6, 0.0, 7, allowed}, 0, m2l, p2p);
  EXPECT_EQ(count_pairs(m2l), 0);
  EXPECT_GT(count_pairs(p2p), count_pairs(p2p_angle));
  // In between: fewer M2L pairs than the angle test alone, more than none.
  Kokkos::deep_copy(allowed, 1e-6);
  walk.run(space, sorted.tree, geometry, OpeningTest{0.6, 0.0, 7, allowed}, 0, m2l, p2p);
  EXPECT_GT(count_pairs(m2l), 0);
  EXPECT_GT(count_pairs(p2p), count_pairs(p2p_angle));
}

// The CPU shape classifies the children of a target node together, one per SIMD lane; the GPU
// shape one child at a time. Both make the same decisions, to the pair and in the same order:
// at odd and even p + 1 (1/d enters the estimate or not), with and without the spline's reach,
// with the coherence on and the allowance where some pairs pass and some do not, with M2P for
// large leaves (its lists too).
TEST_F(RelativeOpeningTest, CpuAndGpuShapedWalksGiveTheSameLists) {
  ScalarView<double> allowed("allowed", sorted.tree.num_nodes);
  for (int order : {7, 4}) {
    geometry.power_exponent = order + 1;
    compute_node_geometry(space, sorted.tree, sorted.particles.pos, sorted.particles.mass,
                          ExpansionCentre::CentreOfMass, sorted.cube, geometry);
    for (double reach : {0.0, 0.01})
      for (double allowance : {1e-4, 1e-6}) {
        Kokkos::deep_copy(allowed, allowance);
        OpeningTest test{0.9, reach, order, allowed, 0.1};
        test.m2p_theta = 0.3;
        PairLists m2l[2], p2p[2], m2p[2];
        for (int shape = 0; shape < 2; ++shape) {
          ScopedKernelShape const scope(shape ? KernelShape::Gpu : KernelShape::Cpu);
          DualTreeWalk walk;
          walk.run(space, sorted.tree, geometry, test, 0, m2l[shape], p2p[shape], m2p[shape]);
        }
        std::string const where = fmt::format("p = {}, reach {}, allowance {}", order, reach, allowance);
        EXPECT_GT(count_pairs(m2l[0]), 0) << where;
        EXPECT_GT(count_pairs(p2p[0]), 0) << where;
        EXPECT_GT(count_pairs(m2p[0]), 0) << where;
        EXPECT_TRUE(kfmm_test::to_host(m2l[0]) == kfmm_test::to_host(m2l[1])) << where;
        EXPECT_TRUE(kfmm_test::to_host(p2p[0]) == kfmm_test::to_host(p2p[1])) << where;
        EXPECT_TRUE(kfmm_test::to_host(m2p[0]) == kfmm_test::to_host(m2p[1])) << where;
      }
  }
}

// A level's count and fill passes run in chunks of consecutive groups (the candidates' scratch
// sized by a chunk): any chunk size gives the lists of one pass, entry for entry, under the
// angle test and the relative criterion (with and without the coherent lanes, with harmonic
// powers), with M2P.
TEST_F(RelativeOpeningTest, ChunkedLevelsGiveTheSameLists) {
  auto pass = make_expansion_pass(7, Precision::Double, SofteningKind::Plummer, 0.0);
  PassParticles const particles{sorted.particles.pos, sorted.particles.mass, sorted.n, sorted.n};
  pass->upward(space, sorted.tree, geometry, particles);
  geometry.multipole_power = Kokkos::View<double**, MemorySpace>("powers", sorted.tree.num_nodes, 8);
  pass->multipole_powers(space, 0, sorted.tree.num_nodes, geometry.multipole_power);
  ScalarView<double> allowed("allowed", sorted.tree.num_nodes);
  Kokkos::deep_copy(allowed, 1e-4);
  std::vector<OpeningTest> tests = {OpeningTest{0.6, 0.0}, OpeningTest{0.8, 0.0, 7, allowed, 0.1},
                                    OpeningTest{0.8, 0.0, 7, allowed, 1.0}};
  for (auto& test : tests) test.m2p_theta = 0.3;
  for (std::size_t t = 0; t < tests.size(); ++t) {
    PairLists m2l, p2p, m2p;
    DualTreeWalk whole;
    whole.run(space, sorted.tree, geometry, tests[t], 0, m2l, p2p, m2p);
    ASSERT_GT(m2p.num_entries, 0) << "test " << t << ": no M2P pair, the comparison shows less";
    DualTreeWalk chunked;  // kept across chunk sizes: its scratch shrinks and grows again
    for (long long chunk : {1LL, 37LL, 1000LL, 1LL << 20}) {
      chunked.set_candidate_chunk(chunk);
      PairLists m2l_c, p2p_c, m2p_c;
      chunked.run(space, sorted.tree, geometry, tests[t], 0, m2l_c, p2p_c, m2p_c);
      std::string const where = fmt::format("test {}, chunk {}", t, chunk);
      EXPECT_TRUE(kfmm_test::to_host(m2l) == kfmm_test::to_host(m2l_c)) << where;
      EXPECT_TRUE(kfmm_test::to_host(p2p) == kfmm_test::to_host(p2p_c)) << where;
      EXPECT_TRUE(kfmm_test::to_host(m2p) == kfmm_test::to_host(m2p_c)) << where;
    }
  }
  DualTreeWalk walk;
  EXPECT_THROW(walk.set_candidate_chunk(0), Error);
}

// The first evaluation of the relative criterion estimates |a| at a lower order q from the
// order-p multipoles: in the graded layout the first coefficients of an order-p multipole are
// the order-q multipole about the same centre, as the lower-order pass computes it itself.
TEST_F(RelativeOpeningTest, LowerOrderMultipolesAreTheFirstCoefficients) {
  if (!expansion_order_built(3)) GTEST_SKIP() << "order 3 is not compiled into this build";
  auto high = make_expansion_pass(7, Precision::Double, SofteningKind::Plummer, 0.0);
  auto low = make_expansion_pass(3, Precision::Double, SofteningKind::Plummer, 0.0);
  PassParticles const particles{sorted.particles.pos, sorted.particles.mass, sorted.n, sorted.n};
  high->upward(space, sorted.tree, geometry, particles);
  low->upward(space, sorted.tree, geometry, particles);
  int const nodes = sorted.tree.num_nodes;
  std::vector<int> all(nodes);
  for (int i = 0; i < nodes; ++i) all[i] = i;
  auto const list = test_support::device_view(all, "nodes");
  Kokkos::View<double**, MemorySpace> p7("p7", nodes, high->coefficients_per_node());
  Kokkos::View<double**, MemorySpace> p3("p3", nodes, low->coefficients_per_node());
  high->get_multipoles(space, list, nodes, p7);
  low->get_multipoles(space, list, nodes, p3);
  // And set from the wider rows, as the solver copies them: the first columns are taken.
  auto copied = make_expansion_pass(3, Precision::Double, SofteningKind::Plummer, 0.0);
  copied->set_multipoles(space, 0, nodes, p7);
  Kokkos::View<double**, MemorySpace> back("back", nodes, low->coefficients_per_node());
  copied->get_multipoles(space, list, nodes, back);
  auto const h7 = Kokkos::create_mirror_view_and_copy(HostSpace(), p7);
  auto const h3 = Kokkos::create_mirror_view_and_copy(HostSpace(), p3);
  auto const hb = Kokkos::create_mirror_view_and_copy(HostSpace(), back);
  ASSERT_EQ(low->coefficients_per_node(), 20);
  int differing = 0;
  for (int node = 0; node < nodes; ++node)
    for (int c = 0; c < 20; ++c) {
      double const scale = std::fabs(h7(node, 0)) + 1e-300;
      differing += std::fabs(h7(node, c) - h3(node, c)) > 1e-12 * scale;
      differing += hb(node, c) != h7(node, c);
    }
  EXPECT_EQ(differing, 0);
}

// The multipole powers of every node, and of a listed subset, are the same bits in both
// kernel shapes (the CPU shape computes eight nodes at once, one per SIMD lane), at a node
// count that leaves idle lanes (order 7: every build compiles it).
TEST_F(RelativeOpeningTest, CpuAndGpuShapedPowersAreTheSame) {
  for (auto precision : {Precision::Float, Precision::Double}) {
    auto pass = make_expansion_pass(7, precision, SofteningKind::Plummer, 0.0);
    PassParticles const particles{sorted.particles.pos, sorted.particles.mass, sorted.n, sorted.n};
    pass->upward(space, sorted.tree, geometry, particles);
    int const nodes = sorted.tree.num_nodes;
    ASSERT_GT(nodes % 8, 0) << "the test wants idle lanes";
    // Every third node, starting at node 1, for the listed variant.
    int const listed = (nodes - 1 + 2) / 3;
    std::vector<int> every_third(listed);
    for (int i = 0; i < listed; ++i) every_third[i] = 1 + 3 * i;
    auto const list = test_support::device_view(every_third, "list");
    Kokkos::View<double**, MemorySpace> all[2], some[2];
    for (int shape = 0; shape < 2; ++shape) {
      ScopedKernelShape const scope(shape ? KernelShape::Gpu : KernelShape::Cpu);
      all[shape] = Kokkos::View<double**, MemorySpace>("all", nodes, 8);
      some[shape] = Kokkos::View<double**, MemorySpace>("some", nodes, 8);
      Kokkos::deep_copy(some[shape], -1.0);
      pass->multipole_powers(space, 0, nodes, all[shape]);
      pass->multipole_powers_of(space, list, listed, some[shape]);
    }
    auto const host = [](auto const& view) { return Kokkos::create_mirror_view_and_copy(HostSpace(), view); };
    auto const cpu = host(all[0]), gpu = host(all[1]), cpu_some = host(some[0]), gpu_some = host(some[1]);
    int differing = 0, positive = 0;
    for (int node = 0; node < nodes; ++node)
      for (int n = 0; n <= 7; ++n) {
        differing += cpu(node, n) != gpu(node, n);
        differing += cpu_some(node, n) != gpu_some(node, n);
        // The listed nodes have their powers, the others keep what was there.
        differing += cpu_some(node, n) != (node % 3 == 1 ? cpu(node, n) : -1.0);
        positive += cpu(node, n) > 0;
      }
    EXPECT_EQ(differing, 0) << to_string(precision);
    EXPECT_GT(positive, nodes * 4) << to_string(precision);
  }
}

// With the nodes' harmonic multipole powers the walk uses the sharper estimate: every pair it
// sends to M2L satisfies it (recomputed here on the host from the lists: the largest term),
// some of them would fail the power-radius bound, and fewer leaf pairs are summed directly.
// (Coherence off: the estimate alone decides.)
TEST_F(RelativeOpeningTest, HarmonicPowersAcceptWhatTheirEstimateAllows) {
  auto pass = make_expansion_pass(7, Precision::Double, SofteningKind::Plummer, 0.0);
  PassParticles const particles{sorted.particles.pos, sorted.particles.mass, sorted.n, sorted.n};
  pass->upward(space, sorted.tree, geometry, particles);
  ScalarView<double> allowed("allowed", sorted.tree.num_nodes);
  Kokkos::deep_copy(allowed, 1e-4);
  DualTreeWalk walk;
  PairLists m2l_bound, p2p_bound, m2l, p2p;
  OpeningTest const test{0.6, 0.0, 7, allowed, 1.0};
  walk.run(space, sorted.tree, geometry, test, 0, m2l_bound, p2p_bound);
  // Powers for too few nodes are refused, naming both counts.
  geometry.multipole_power = Kokkos::View<double**, MemorySpace>("powers", sorted.tree.num_nodes - 1, 8);
  EXPECT_THROW(walk.run(space, sorted.tree, geometry, test, 0, m2l, p2p), Error);
  geometry.multipole_power = Kokkos::View<double**, MemorySpace>("powers", sorted.tree.num_nodes, 8);
  pass->multipole_powers(space, 0, sorted.tree.num_nodes, geometry.multipole_power);
  walk.run(space, sorted.tree, geometry, test, 0, m2l, p2p);
  space.fence();

  auto const host = [](auto const& view) { return Kokkos::create_mirror_view_and_copy(HostSpace(), view); };
  auto const centre = host(geometry.centre);
  auto const radius = host(geometry.radius);
  auto const mass = host(geometry.mass);
  auto const scale = host(geometry.scale);
  auto const power_radius = host(geometry.power_radius);
  auto const H = host(geometry.multipole_power);
  auto const target = host(m2l.target);
  auto const offset = host(m2l.offset);
  auto const source = host(m2l.source);
  // max_n C(8, n) T_n r_a^(8−n) / d^10 with T_n = H_n s^n (1 ≤ n ≤ 7), or the bound M s_b^n.
  auto const estimate = [&](int a, int b, bool harmonic) {
    double const d = std::hypot(centre(a, 0) - centre(b, 0), centre(a, 1) - centre(b, 1), centre(a, 2) - centre(b, 2));
    double e = 0, binomial = 1;
    for (int n = 0; n <= 8; ++n) {
      double const T = harmonic && n > 0 && n < 8 ? H(b, n) * std::pow(scale(b), n)
                                                  : mass(b) * std::pow(power_radius(b), n);
      e = std::max(e, binomial * T * std::pow(radius(a), 8 - n));
      binomial = binomial * (8 - n) / (n + 1);
    }
    return e / std::pow(d, 10);
  };
  int sharper = 0;
  for (int g = 0; g < m2l.num_groups; ++g)
    for (int e = offset(g); e < offset(g + 1); ++e) {
      int const a = target(g), b = source(e);
      EXPECT_LE(estimate(a, b, true), 1e-4 * (1 + 1e-9)) << "pair " << a << ", " << b;
      if (estimate(a, b, false) > 1e-4) ++sharper;
    }
  EXPECT_GT(sharper, 0);
  EXPECT_LT(count_pairs(p2p), count_pairs(p2p_bound));
}

// Seven compact clusters of 20 particles: a target cluster and six source
// clusters at distance 1, either all around it (on the axes: isotropic) or all on one side
// (shifted off the origin, and one distant particle, so that no cell boundary cuts a cluster).
kfmm_test::SortedTree seven_clusters(bool isotropic) {
  double const around[6][3] = {{1, 0, 0}, {-1, 0, 0}, {0, 1, 0}, {0, -1, 0}, {0, 0, 1}, {0, 0, -1}};
  // Unit vectors within 35° of +x.
  double const one_side[6][3] = {{1, 0, 0},           {0.9397, 0.3420, 0}, {0.9397, -0.3420, 0},
                                 {0.9397, 0, 0.3420}, {0.9397, 0, -0.3420}, {0.8192, 0.4056, 0.4056}};
  int const per_cluster = 20;
  Particles<HostSpace> host(7 * per_cluster + 1);
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int c = 0; c < 7; ++c) {
    double const offset[3] = {0.2, 0.21, 0.19};  // keeps each cluster inside one cell of the octree
    for (int j = 0; j < per_cluster; ++j) {
      std::size_t const i = std::size_t(c * per_cluster + j);
      double x[3];
      do {
        for (double& v : x) v = u(rng);
      } while (x[0] * x[0] + x[1] * x[1] + x[2] * x[2] > 1);
      for (int k = 0; k < 3; ++k) {
        double const at = c == 0 ? 0.0 : (isotropic ? around[c - 1][k] : one_side[c - 1][k]);
        host.pos(i, k) = at + offset[k] + 0.01 * x[k];
        host.vel(i, k) = 0;
      }
      host.mass(i) = 1.0;
      host.id(i) = i;
    }
  }
  // One distant particle moves the octree's cell boundaries off the target cluster.
  std::size_t const lone = 7 * per_cluster;
  for (int k = 0; k < 3; ++k) {
    host.pos(lone, k) = 3.0 + 0.05 * k;
    host.vel(lone, k) = 0;
  }
  host.mass(lone) = 1.0;
  host.id(lone) = lone;
  host.num = host.num_total = lone + 1;
  return kfmm_test::sorted_tree(host, 32);
}

// The walk's allowance grows where the candidate sources' errors come from all around a target
// (they cancel at it) and not where they come from one side (they add up): the target cluster's
// leaf takes the six source clusters by M2L when they surround it and sums them directly when
// they are on one side, at an allowance 3× below their error estimates.
TEST(RelativeOpeningCoherence, AllowanceGrowsOnlyWhereTheErrorsComeFromAllAround) {
  ExecutionSpace space;
  for (bool isotropic : {true, false}) {
    auto const sorted = seven_clusters(isotropic);
    NodeGeometry geometry;
    geometry.power_exponent = 8;
    compute_node_geometry(space, sorted.tree, sorted.particles.pos, sorted.particles.mass,
                          ExpansionCentre::CentreOfMass, sorted.cube, geometry);
    auto const host = [](auto const& view) { return Kokkos::create_mirror_view_and_copy(HostSpace(), view); };
    auto const pos = host(sorted.particles.pos);
    auto const cbegin = host(sorted.tree.child_begin), cend = host(sorted.tree.child_end);
    auto const pbegin = host(sorted.tree.particle_begin), pend = host(sorted.tree.particle_end);
    auto const centre = host(geometry.centre);
    auto const radius = host(geometry.radius);
    auto const mass = host(geometry.mass);
    auto const power_radius = host(geometry.power_radius);
    // The leaves: the target cluster's, and the six others (one leaf per cluster).
    int target = -1;
    std::vector<int> sources;
    for (int node = 0; node < sorted.tree.num_nodes; ++node) {
      if (cbegin(node) != cend(node) || pend(node) - pbegin(node) == 1) continue;  // not the distant particle
      ASSERT_EQ(pend(node) - pbegin(node), 20) << "a cluster split over leaves";
      bool const at_origin = std::abs(pos(pbegin(node), 0) - 0.2) < 0.1 && std::abs(pos(pbegin(node), 1) - 0.2) < 0.1 &&
                             std::abs(pos(pbegin(node), 2) - 0.2) < 0.1;
      if (at_origin)
        target = node;
      else
        sources.push_back(node);
    }
    ASSERT_GE(target, 0);
    ASSERT_EQ(sources.size(), 6u);
    // The estimate of OpeningTest without harmonic powers: max_n C(8, n) M s^n r_a^(8−n) / d^10.
    double smallest = std::numeric_limits<double>::infinity(), largest = 0;
    for (int b : sources) {
      double const d =
          std::hypot(centre(target, 0) - centre(b, 0), centre(target, 1) - centre(b, 1), centre(target, 2) - centre(b, 2));
      double e = 0, binomial = 1;
      for (int n = 0; n <= 8; ++n) {
        e = std::max(e, binomial * mass(b) * std::pow(power_radius(b), n) * std::pow(radius(target), 8 - n));
        binomial = binomial * (8 - n) / (n + 1);
      }
      smallest = std::min(smallest, e / std::pow(d, 10));
      largest = std::max(largest, e / std::pow(d, 10));
    }
    ASSERT_LT(largest, 2 * smallest);  // similar clusters at similar distances
    ScalarView<double> allowed("allowed", sorted.tree.num_nodes);
    Kokkos::deep_copy(allowed, smallest / 3);
    DualTreeWalk walk;
    // The target leaf's directly summed sources: itself, plus the clusters not taken by M2L.
    auto const direct_sources = [&](double floor) {
      PairLists m2l, p2p;
      walk.run(space, sorted.tree, geometry, OpeningTest{0.75, 0.0, 7, allowed, floor}, 0, m2l, p2p);
      auto const t = host(p2p.target);
      auto const offset = host(p2p.offset);
      int count = 0;
      for (int g = 0; g < p2p.num_groups; ++g)
        if (t(g) == target) count += offset(g + 1) - offset(g);
      return count;
    };
    EXPECT_EQ(direct_sources(1.0), 7) << (isotropic ? "isotropic" : "one-sided");
    EXPECT_EQ(direct_sources(0.1), isotropic ? 1 : 7) << (isotropic ? "isotropic" : "one-sided");
  }
}

class RelativeSolverTest : public testing::Test {
 protected:
  Context world;

  Particles<MemorySpace> make(ICKind kind, std::uint64_t n) {
    ICOptions options;
    options.kind = kind;
    options.n_total = n;
    options.seed = 3;
    return to_device(make_initial_conditions(world, options));
  }

  AccuracyReport accuracy(Particles<MemorySpace>& particles, FMMConfig const& config) {
    ForceSolver solver(world, config);
    solver.compute(particles);
    return measure_accuracy(world, particles, solver.potential(), solver.acceleration(), config, particles.num_total);
  }
};

// Where the angle criterion leaves percent-level errors on the worst particles, the relative
// criterion's tail falls with its tolerance, down to the accuracy targets (p99 ≤ 3e-3, p99.9 ≤
// 1e-2, E ≤ 3e-4) at α = 1e-5. (Named for the fmm.hard runs, which run it alone.)
TEST_F(RelativeSolverTest, TailFallsWithTheToleranceOnHardDistributions) {
  for (ICKind kind : {ICKind::Satellites, ICKind::MassSpectrum}) {
    auto particles = make(kind, 10000);
    FMMConfig config;
    config.softening_length = 1e-3;
    config.opening = OpeningCriterion::Angle;  // at its own θ, which the relative runs keep
    config.theta = default_theta(OpeningCriterion::Angle);
    AccuracyReport const angle = accuracy(particles, config);
    config.opening = OpeningCriterion::Relative;
    config.tolerance = 1e-3;
    AccuracyReport const loose = accuracy(particles, config);
    config.tolerance = 1e-5;
    AccuracyReport const tight = accuracy(particles, config);
    if (world.is_root())
      std::printf("%s p99 / p99.9 / max: angle %.3g / %.3g / %.3g, α 1e-3 %.3g / %.3g / %.3g, α 1e-5 %.3g / %.3g / %.3g\n",
                  to_string(kind).c_str(), angle.p99, angle.p999, angle.max, loose.p99, loose.p999, loose.max,
                  tight.p99, tight.p999, tight.max);
    EXPECT_LT(loose.p99, angle.p99) << to_string(kind);
    EXPECT_LT(tight.p99, loose.p99) << to_string(kind);
    EXPECT_LT(tight.max, loose.max) << to_string(kind);
    EXPECT_LE(tight.force_l2, 3e-4) << to_string(kind);
    EXPECT_LE(tight.p99, 3e-3) << to_string(kind);
    EXPECT_LE(tight.p999, 1e-2) << to_string(kind);
  }
}

// The allowance of cells cut by rank boundaries is combined over the ranks, so the lists (and
// the forces) are those of one rank holding everything.
TEST_F(RelativeSolverTest, ListsAndForcesDoNotDependOnTheRankCount) {
  ICOptions options;
  options.kind = ICKind::Satellites;
  options.n_total = 3000;
  options.seed = 3;
  FMMConfig config;
  config.precision = Precision::Double;
  config.opening = OpeningCriterion::Relative;
  Context const self(MPI_COMM_SELF);
  auto all = to_device(generate_initial_conditions(options, 0, 1, [](std::int64_t*, int) {}));
  ForceSolver single(self, config);
  single.collect_statistics(true);
  single.compute(all);
  auto const ids_single = Kokkos::create_mirror_view_and_copy(HostSpace(), all.id);
  auto const acc_single = Kokkos::create_mirror_view_and_copy(HostSpace(), single.acceleration());
  std::vector<std::size_t> where(options.n_total + 1);
  for (std::size_t i = 0; i < all.num; ++i) where[ids_single(i)] = i;

  auto mine = make(ICKind::Satellites, options.n_total);
  ForceSolver distributed(world, config);
  distributed.collect_statistics(true);
  distributed.compute(mine);
  EXPECT_EQ(distributed.stats().p2p_pairs, single.stats().p2p_pairs);
  EXPECT_EQ(distributed.stats().m2l, single.stats().m2l);
  auto const ids = Kokkos::create_mirror_view_and_copy(HostSpace(), mine.id);
  auto const acc = Kokkos::create_mirror_view_and_copy(HostSpace(), distributed.acceleration());
  // Bit for bit: the same pairs summed in the same order (the first call's near field partly
  // in its estimating evaluation, whose imported leaves must not leak into the second's).
  int differing = 0;
  for (std::size_t i = 0; i < mine.num; ++i) {
    std::size_t const j = where[ids(i)];
    for (int k = 0; k < 3; ++k) differing += acc(i, k) != acc_single(j, k);
  }
  EXPECT_EQ(differing, 0);
}

// Gives the particles other ids (a free function: nvcc takes device lambdas in public
// functions only, and a test body is private).
void shift_ids(Particles<MemorySpace>& particles, std::uint64_t by) {
  auto ids = particles.id;
  Kokkos::parallel_for(
      "shift_ids", Kokkos::RangePolicy<ExecutionSpace>(0, particles.num), KOKKOS_LAMBDA(std::size_t i) { ids(i) += by; });
}

bool estimated(ForceSolver const& solver) {
  for (auto const& [name, seconds] : solver.stats().phases)
    if (name == "estimate") return true;
  return false;
}

// |a| of the last call is kept with the particles' ids: the next call on the same particles
// (moved, re-sorted, redistributed) skips the estimating pass and gets the forces that the
// same estimate given explicitly gives; other particles, or forget_acceleration_estimate(),
// estimate afresh.
TEST_F(RelativeSolverTest, KeepsTheAccelerationEstimateForTheSameParticles) {
  FMMConfig config;
  config.opening = OpeningCriterion::Relative;
  config.tolerance = 1e-5;
  config.precision = Precision::Double;
  auto particles = make(ICKind::Satellites, 2000);
  ForceSolver solver(world, config);
  solver.collect_statistics(true);
  EXPECT_FALSE(solver.has_acceleration_estimate());
  solver.compute(particles);
  EXPECT_TRUE(estimated(solver));
  ASSERT_TRUE(solver.has_acceleration_estimate());
  ASSERT_EQ(solver.acceleration_estimate().extent(0), particles.num);
  // |a| of the call, aligned with the particles as it left them.
  {
    auto const a = Kokkos::create_mirror_view_and_copy(HostSpace(), solver.acceleration());
    auto const e = Kokkos::create_mirror_view_and_copy(HostSpace(), solver.acceleration_estimate());
    for (std::size_t i = 0; i < particles.num; ++i)
      ASSERT_EQ(e(i), std::sqrt(a(i, 0) * a(i, 0) + a(i, 1) * a(i, 1) + a(i, 2) * a(i, 2))) << i;
  }
  // Same particles, in another order on this rank: the estimate follows them by id.
  {
    auto const host = to_host(particles);
    Particles<HostSpace> copy(host.num);
    copy.num = host.num;
    copy.num_total = host.num_total;
    for (std::size_t i = 0; i < host.num; ++i) {
      std::size_t const j = host.num - 1 - i;
      for (int k = 0; k < 3; ++k) {
        copy.pos(i, k) = host.pos(j, k);
        copy.vel(i, k) = host.vel(j, k);
      }
      copy.mass(i) = host.mass(j);
      copy.id(i) = host.id(j);
    }
    auto const estimate = Kokkos::create_mirror_view_and_copy(HostSpace(), solver.acceleration_estimate());
    ScalarView<double, HostSpace> reversed_estimate("reversed", host.num);
    for (std::size_t i = 0; i < host.num; ++i) reversed_estimate(i) = estimate(host.num - 1 - i);
    auto shuffled = to_device(copy);
    ForceSolver given(world, config);
    given.collect_statistics(true);
    given.set_acceleration_estimate(shuffled, Kokkos::create_mirror_view_and_copy(MemorySpace(), reversed_estimate));
    given.compute(shuffled);
    EXPECT_FALSE(estimated(given));
    solver.compute(particles);
    EXPECT_FALSE(estimated(solver));
    EXPECT_EQ(given.stats().m2l, solver.stats().m2l);
    EXPECT_EQ(given.stats().p2p_pairs, solver.stats().p2p_pairs);
  }
  // Other particles (other ids): estimated afresh.
  auto others = make(ICKind::Satellites, 2000);
  shift_ids(others, 100000);
  solver.compute(others);
  EXPECT_TRUE(estimated(solver));
  solver.compute(others);
  EXPECT_FALSE(estimated(solver));
  solver.forget_acceleration_estimate();
  EXPECT_FALSE(solver.has_acceleration_estimate());
  solver.compute(others);
  EXPECT_TRUE(estimated(solver));
  // A count beyond the capacity is the input check's named error, also with an estimate held.
  {
    std::size_t const num = others.num;
    others.num = others.capacity() + 1;
    EXPECT_THROW(solver.compute(others), Error);
    others.num = num;
  }
  // Bad estimates are refused with the value and the particle.
  ScalarView<double> bad("bad", others.num);
  Kokkos::deep_copy(bad, 1.0);
  if (others.num > 0) Kokkos::deep_copy(Kokkos::subview(bad, 0), -2.0);
  if (others.num > 0) {
    try {
      solver.set_acceleration_estimate(others, bad);
      ADD_FAILURE() << "negative |a| accepted";
    } catch (Error const& e) {
      EXPECT_NE(std::string(e.what()).find("|a| = -2"), std::string::npos) << e.what();
    }
  }
}

TEST(RelativeOpeningConfig, BadSettingsAreNamed) {
  FMMConfig config;
  config.opening = OpeningCriterion::Relative;
  config.tolerance = 0;
  try {
    config.validate();
    ADD_FAILURE() << "tolerance 0 accepted";
  } catch (Error const& e) {
    EXPECT_NE(std::string(e.what()).find("tolerance = 0"), std::string::npos) << e.what();
  }
  config.tolerance = 1e-3;
  config.estimate_theta = 0.5;  // below θ = 0.75
  try {
    config.validate();
    ADD_FAILURE() << "estimate_theta below theta accepted";
  } catch (Error const& e) {
    EXPECT_NE(std::string(e.what()).find("estimate_theta = 0.5"), std::string::npos) << e.what();
  }
  config.estimate_theta = 1.0;
  config.estimate_order = 0;
  try {
    config.validate();
    ADD_FAILURE() << "estimate_order 0 accepted";
  } catch (Error const& e) {
    EXPECT_NE(std::string(e.what()).find("estimate_order = 0"), std::string::npos) << e.what();
  }
  config.estimate_order = 3;
  config.G = 0;
  try {
    config.validate();
    ADD_FAILURE() << "G = 0 accepted with the relative criterion";
  } catch (Error const& e) {
    EXPECT_NE(std::string(e.what()).find("G = 0"), std::string::npos) << e.what();
  }
  EXPECT_EQ(parse_opening_criterion("relative"), OpeningCriterion::Relative);
  EXPECT_EQ(to_string(OpeningCriterion::Angle), "angle");
  EXPECT_THROW(parse_opening_criterion("gadget"), Error);
}

}  // namespace
