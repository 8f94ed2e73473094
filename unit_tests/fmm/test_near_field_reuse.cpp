// NearFieldReuse: the estimating evaluation's P2P pairs taken out of the final lists, and the
// near field of the rest plus the kept one equal to the whole near field.
#include "host_pair_lists.hpp"
#include "sorted_tree.hpp"

#include <kfmm/fmm/dual_tree_walk.hpp>
#include <kfmm/fmm/expansion_pass.hpp>
#include <kfmm/fmm/near_field_reuse.hpp>
#include <kfmm/fmm/target_particles.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

namespace {

using namespace kfmm;

class NearFieldReuseTest : public testing::Test {
 protected:
  void SetUp() override {
    sorted = kfmm_test::sorted_tree(kfmm_test::plummer_with_a_clump(4000, 50), 24);
    geometry.power_exponent = 8;  // order 7
    compute_node_geometry(space, sorted.tree, sorted.particles.pos, sorted.particles.mass,
                          ExpansionCentre::CentreOfMass, sorted.cube, geometry);
    pass = make_expansion_pass(7, Precision::Double, SofteningKind::Plummer, 0.0);
    particles = PassParticles{sorted.particles.pos, sorted.particles.mass, sorted.n, sorted.n};
    pass->upward(space, sorted.tree, geometry, particles);
    geometry.multipole_power = Kokkos::View<double**, MemorySpace>("powers", sorted.tree.num_nodes, 8);
    pass->multipole_powers(space, 0, sorted.tree.num_nodes, geometry.multipole_power);
    targets = all_targets(space, sorted.n);
    space.fence();
  }

  // The walk of the solver's estimate (angle test at θ) and of its final evaluation (relative
  // criterion at θ = 0.6 with M2P, a small allowance everywhere, coherence floor as given).
  PairLists angle_walk(double theta) {
    PairLists m2l, p2p, m2p;
    walk.run(space, sorted.tree, geometry, OpeningTest{theta, 0.0}, 0, m2l, p2p, m2p);
    return p2p;
  }
  PairLists relative_walk(double coherence_floor) {
    ScalarView<double> allowed("allowed", sorted.tree.num_nodes);
    Kokkos::deep_copy(allowed, 1e-4);
    OpeningTest test{0.6, 0.0, 7, allowed, coherence_floor};
    test.m2p_theta = 0.4;
    PairLists m2l, p2p, m2p;
    walk.run(space, sorted.tree, geometry, test, 0, m2l, p2p, m2p);
    return p2p;
  }

  // The near field of `lists` (zero before).
  std::pair<ScalarView<double>, Vec3View<double>> near_field(PairLists const& lists) {
    ScalarView<double> phi("phi", sorted.n);
    Vec3View<double> grad("grad", sorted.n);
    pass->add_near_field(space, sorted.tree, geometry, lists, particles, targets, phi, grad);
    return {phi, grad};
  }

  // Per target node, the set of its sources in `lists`.
  static std::vector<std::set<int>> pairs_of(kfmm_test::HostLists const& h, int nodes) {
    std::vector<std::set<int>> pairs(nodes);
    for (std::size_t g = 0; g < h.target.size(); ++g)
      for (int e = h.offset[g]; e < h.offset[g + 1]; ++e) pairs[h.target[g]].insert(h.source[e]);
    return pairs;
  }

  // The estimate's near field kept, the final lists' rest summed, the kept one added: checks
  // the sum against the whole near field of `full` and returns the pairs left out.
  std::uint64_t check_rest_plus_kept(PairLists const& estimate, PairLists const& full, PairLists& rest) {
    NearFieldReuse reuse;
    reuse.start(space, sorted.n);
    pass->add_near_field(space, sorted.tree, geometry, estimate, particles, targets, reuse.phi(), reuse.grad());
    reuse.index(space, estimate, sorted.tree.num_nodes);
    EXPECT_TRUE(reuse.indexed());
    std::uint64_t const dropped = reuse.subtract(space, sorted.tree, targets, full, rest);
    auto const [phi, grad] = near_field(rest);
    std::uint64_t const rest_pairs = pass->p2p_pairs();
    reuse.add_reused(space, sorted.tree, targets, phi, grad);
    auto const [whole_phi, whole_grad] = near_field(full);
    EXPECT_EQ(rest_pairs + dropped, pass->p2p_pairs());
    auto const h = [](auto const& v) { return Kokkos::create_mirror_view_and_copy(HostSpace(), v); };
    auto const p = h(phi), wp = h(whole_phi);
    auto const g = h(grad), wg = h(whole_grad);
    double worst = 0;
    for (int i = 0; i < sorted.n; ++i) {
      double d2 = 0, r2 = 0;
      for (int k = 0; k < 3; ++k) {
        d2 += (g(i, k) - wg(i, k)) * (g(i, k) - wg(i, k));
        r2 += wg(i, k) * wg(i, k);
      }
      worst = std::max(worst, std::sqrt(d2 / r2));
      worst = std::max(worst, std::fabs(p(i) - wp(i)) / std::fabs(wp(i)));
    }
    EXPECT_LE(worst, 1e-12);
    return dropped;
  }

  ExecutionSpace space;
  kfmm_test::SortedTree sorted;
  NodeGeometry geometry;
  std::unique_ptr<ExpansionPass> pass;
  PassParticles particles;
  TargetParticles targets;
  DualTreeWalk walk;
};

// At θ_e = 1 every P2P pair of the estimate is one of the final walk's (with and without the
// coherent path), so the rest is the final lists without them (same groups and segments, order
// kept), and every leaf is reused.
TEST_F(NearFieldReuseTest, TheEstimatesPairsLeaveTheFinalLists) {
  PairLists const estimate = angle_walk(1.0);
  for (double floor : {1.0, OpeningTest{}.coherence_floor}) {
    PairLists const full = relative_walk(floor);
    PairLists rest;
    std::uint64_t const dropped = check_rest_plus_kept(estimate, full, rest);
    EXPECT_GT(dropped, 0u);
    int const nodes = sorted.tree.num_nodes;
    auto const e = kfmm_test::to_host(estimate), f = kfmm_test::to_host(full), r = kfmm_test::to_host(rest);
    auto const est = pairs_of(e, nodes), fin = pairs_of(f, nodes);
    for (int a = 0; a < nodes; ++a)
      for (int b : est[a])
        ASSERT_TRUE(fin[a].count(b)) << "the estimate's pair (" << a << ", " << b << ") is not final, floor " << floor;
    EXPECT_EQ(r.target, f.target);
    EXPECT_EQ(r.segment_begin, f.segment_begin);
    ASSERT_EQ(r.source.size() + e.source.size(), f.source.size());
    for (std::size_t g = 0; g < f.target.size(); ++g) {
      std::vector<int> expected;
      for (int x = f.offset[g]; x < f.offset[g + 1]; ++x)
        if (!est[f.target[g]].count(f.source[x])) expected.push_back(f.source[x]);
      std::vector<int> const got(r.source.begin() + r.offset[g], r.source.begin() + r.offset[g + 1]);
      ASSERT_EQ(got, expected) << "group " << g << ", floor " << floor;
    }
  }
}

// Where a leaf's estimate pairs are not all final pairs (here: an estimate finer than the final
// walk), the leaf keeps all its pairs and its kept near field is not added; the sum is still the
// whole near field.
TEST_F(NearFieldReuseTest, ALeafWithPairsOutsideTheFinalListsKeepsThemAll) {
  PairLists const estimate = angle_walk(0.5);
  PairLists const full = angle_walk(1.2);
  PairLists rest;
  check_rest_plus_kept(estimate, full, rest);
  int const nodes = sorted.tree.num_nodes;
  auto const e = kfmm_test::to_host(estimate), f = kfmm_test::to_host(full), r = kfmm_test::to_host(rest);
  auto const est = pairs_of(e, nodes), fin = pairs_of(f, nodes), left = pairs_of(r, nodes);
  int whole = 0, reused = 0;
  for (int a = 0; a < nodes; ++a) {
    if (est[a].empty()) continue;
    bool const inside = std::includes(fin[a].begin(), fin[a].end(), est[a].begin(), est[a].end());
    std::set<int> expected;
    std::set_difference(fin[a].begin(), fin[a].end(), est[a].begin(), est[a].end(),
                        std::inserter(expected, expected.end()));
    EXPECT_EQ(left[a], inside ? expected : fin[a]) << "target " << a;
    (inside ? reused : whole) += 1;
  }
  EXPECT_GT(whole, 0) << "the test wants leaves that keep all their pairs";
}

}  // namespace
