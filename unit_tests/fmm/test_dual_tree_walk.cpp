// The dual-tree walk: every pair of leaves is covered exactly once (by one M2L pair of their
// ancestors, one M2P pair of the target leaf and a source's ancestor, or one P2P pair), segments
// never repeat a target, and a second walk with the same DualTreeWalk gives the same lists
// without growing any View.
#include "host_pair_lists.hpp"
#include "sorted_tree.hpp"

#include <kfmm/fmm/dual_tree_walk.hpp>
#include <kfmm/fmm/node_geometry.hpp>

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace {

using kfmm::HostSpace;

using kfmm_test::HostLists;
using kfmm_test::to_host;

class DualTreeWalkTest : public testing::Test {
 protected:
  void SetUp() override {
    sorted = kfmm_test::sorted_tree(kfmm_test::plummer_with_a_clump(4000, 100), 24);
    kfmm::compute_node_geometry(space, sorted.tree, sorted.particles.pos, sorted.particles.mass,
                                kfmm::ExpansionCentre::CentreOfMass, sorted.cube, geometry);
    space.fence();
  }

  // Leaves under every node (a leaf is under itself).
  std::vector<std::vector<int>> leaves_below() const {
    auto const cb = Kokkos::create_mirror_view_and_copy(HostSpace(), sorted.tree.child_begin);
    auto const ce = Kokkos::create_mirror_view_and_copy(HostSpace(), sorted.tree.child_end);
    auto const ci = Kokkos::create_mirror_view_and_copy(HostSpace(), sorted.tree.child_index);
    std::vector<std::vector<int>> below(sorted.tree.num_nodes);
    for (int node = sorted.tree.num_nodes - 1; node >= 0; --node) {  // children come after parents
      if (cb(node) == ce(node)) below[node].push_back(node);
      for (int c = cb(node); c < ce(node); ++c)
        below[node].insert(below[node].end(), below[ci(c)].begin(), below[ci(c)].end());
    }
    return below;
  }

  void expect_every_leaf_pair_covered_once(double m2p_theta);

  kfmm::ExecutionSpace space;
  kfmm_test::SortedTree sorted;
  kfmm::NodeGeometry geometry;
};

// m2p_theta: 0 (no M2P) or the ratio of a leaf's radius to the distance beyond which M2L turns
// into M2P (from inner sources) or P2P (from leaves).
void DualTreeWalkTest::expect_every_leaf_pair_covered_once(double m2p_theta) {
  SCOPED_TRACE(testing::Message() << "m2p_theta = " << m2p_theta);
  kfmm::DualTreeWalk walk;
  kfmm::PairLists m2l, p2p, m2p;
  kfmm::OpeningTest test{0.6, 0.0};
  test.m2p_theta = m2p_theta;
  walk.run(space, sorted.tree, geometry, test, 0, m2l, p2p, m2p);
  auto const below = leaves_below();
  std::vector<int> leaf_number(sorted.tree.num_nodes, -1);
  int leaves = 0;
  for (int node = 0; node < sorted.tree.num_nodes; ++node)
    if (below[node].size() == 1 && below[node][0] == node) leaf_number[node] = leaves++;
  ASSERT_GT(leaves, 100);
  ASSERT_GT(m2l.num_entries, 0);
  if (m2p_theta > 0) ASSERT_GT(m2p.num_entries, 0) << "no M2P pair: the test shows nothing";
  std::vector<int> covered(std::size_t(leaves) * leaves, 0);
  for (kfmm::PairLists const* lists : {&m2l, &p2p, &m2p}) {
    HostLists const h = to_host(*lists);
    ASSERT_EQ(h.segment_begin.back(), lists->num_groups);
    for (std::size_t s = 0; s + 1 < h.segment_begin.size(); ++s) {
      std::set<int> targets;
      for (int g = h.segment_begin[s]; g < h.segment_begin[s + 1]; ++g)
        EXPECT_TRUE(targets.insert(h.target[g]).second) << "target " << h.target[g] << " twice in segment " << s;
    }
    for (int g = 0; g < lists->num_groups; ++g)
      for (int e = h.offset[g]; e < h.offset[g + 1]; ++e) {
        if (lists == &p2p) {
          ASSERT_GE(leaf_number[h.target[g]], 0);
          ASSERT_GE(leaf_number[h.source[e]], 0);
        }
        if (lists == &m2p) {  // a leaf target, an inner source
          ASSERT_GE(leaf_number[h.target[g]], 0);
          ASSERT_LT(leaf_number[h.source[e]], 0);
        }
        for (int a : below[h.target[g]])
          for (int b : below[h.source[e]]) ++covered[std::size_t(leaf_number[a]) * leaves + leaf_number[b]];
      }
  }
  for (int a = 0; a < leaves; ++a)
    for (int b = 0; b < leaves; ++b)
      ASSERT_EQ(covered[std::size_t(a) * leaves + b], 1) << "leaves " << a << " and " << b;
}

TEST_F(DualTreeWalkTest, EveryLeafPairIsCoveredOnceAndTargetsAreUniquePerSegment) {
  expect_every_leaf_pair_covered_once(0.0);
  expect_every_leaf_pair_covered_once(0.3);
}

TEST_F(DualTreeWalkTest, ASecondWalkGivesTheSameListsWithoutGrowing) {
  kfmm::DualTreeWalk walk;
  kfmm::PairLists m2l, p2p;
  walk.run(space, sorted.tree, geometry, 0.6, 0.0, 0, m2l, p2p);
  HostLists const first_m2l = to_host(m2l), first_p2p = to_host(p2p);
  void const* const data[6] = {m2l.target.data(), m2l.offset.data(), m2l.source.data(),
                               p2p.target.data(), p2p.offset.data(), p2p.source.data()};
  walk.run(space, sorted.tree, geometry, 0.6, 0.0, 0, m2l, p2p);
  HostLists const second_m2l = to_host(m2l), second_p2p = to_host(p2p);
  void const* const again[6] = {m2l.target.data(), m2l.offset.data(), m2l.source.data(),
                                p2p.target.data(), p2p.offset.data(), p2p.source.data()};
  for (int k = 0; k < 6; ++k) EXPECT_EQ(data[k], again[k]) << "list View " << k << " was reallocated";
  EXPECT_EQ(first_m2l.target, second_m2l.target);
  EXPECT_EQ(first_m2l.offset, second_m2l.offset);
  EXPECT_EQ(first_m2l.source, second_m2l.source);
  EXPECT_EQ(first_m2l.segment_begin, second_m2l.segment_begin);
  EXPECT_EQ(first_p2p.target, second_p2p.target);
  EXPECT_EQ(first_p2p.offset, second_p2p.offset);
  EXPECT_EQ(first_p2p.source, second_p2p.source);
  EXPECT_EQ(first_p2p.segment_begin, second_p2p.segment_begin);
}

// No root (no particles on this rank): empty lists.
TEST_F(DualTreeWalkTest, NoRootGivesEmptyLists) {
  kfmm::DualTreeWalk walk;
  kfmm::PairLists m2l, p2p;
  walk.run(space, sorted.tree, geometry, 0.6, 0.0, -1, m2l, p2p);
  EXPECT_EQ(m2l.num_groups, 0);
  EXPECT_EQ(p2p.num_groups, 0);
  EXPECT_EQ(m2l.num_segments(), 0);
}

}  // namespace
