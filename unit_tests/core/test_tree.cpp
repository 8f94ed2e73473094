// Tree topology from sorted keys: leaf sizes, coverage, codes, degenerate inputs.
#include <kfmm/core/hilbert.hpp>
#include <kfmm/core/sort.hpp>
#include <kfmm/core/tree.hpp>

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace {

using namespace kfmm;

class TreeTest : public testing::Test {
 protected:
  ExecutionSpace space;

  // Sorted keys of the given points.
  ScalarView<std::uint64_t> sorted_keys(std::vector<std::array<double, 3>> const& points) {
    std::size_t const n = points.size();
    Vec3View<double> pos("pos", n);
    auto host = Kokkos::create_mirror_view(pos);
    double lo[3] = {1e300, 1e300, 1e300}, hi[3] = {-1e300, -1e300, -1e300};
    for (std::size_t i = 0; i < n; ++i)
      for (int k = 0; k < 3; ++k) {
        host(i, k) = points[i][k];
        lo[k] = std::min(lo[k], points[i][k]);
        hi[k] = std::max(hi[k], points[i][k]);
      }
    Kokkos::deep_copy(pos, host);
    ScalarView<std::uint64_t> keys("keys", n);
    compute_keys(space, cube_from_bounds(lo, hi), pos, n, keys);
    ScalarView<std::uint32_t> permutation("permutation", n);
    sort_by_key(space, keys, permutation);
    return keys;
  }

  // Checks the invariants every tree must satisfy; returns the largest leaf.
  int check(Tree<> const& tree, ScalarView<std::uint64_t> const& keys, int n, int leaf_size) {
    auto const code = Kokkos::create_mirror_view_and_copy(HostSpace(), tree.code);
    auto const pb = Kokkos::create_mirror_view_and_copy(HostSpace(), tree.particle_begin);
    auto const pe = Kokkos::create_mirror_view_and_copy(HostSpace(), tree.particle_end);
    auto const cb = Kokkos::create_mirror_view_and_copy(HostSpace(), tree.child_begin);
    auto const ce = Kokkos::create_mirror_view_and_copy(HostSpace(), tree.child_end);
    auto const ci = Kokkos::create_mirror_view_and_copy(HostSpace(), tree.child_index);
    auto const k = Kokkos::create_mirror_view_and_copy(HostSpace(), keys);
    std::vector<int> covered(n, 0);
    int largest = 0;
    for (int level = 0; level < tree.num_levels(); ++level)
      for (int node = tree.level_offset[level]; node < tree.level_offset[level + 1]; ++node) {
        EXPECT_EQ(code_level(code(node)), level);
        for (int i = pb(node); i < pe(node); ++i) EXPECT_EQ(cell_code(k(i), level), code(node));
        if (cb(node) == ce(node)) {
          int const count = pe(node) - pb(node);
          largest = std::max(largest, count);
          if (level < max_tree_level) EXPECT_LE(count, leaf_size);
          for (int i = pb(node); i < pe(node); ++i) ++covered[i];
        } else {
          int sum = 0;
          for (int c = cb(node); c < ce(node); ++c) {
            EXPECT_EQ(code(ci(c)) >> 3, code(node));
            sum += pe(ci(c)) - pb(ci(c));
          }
          EXPECT_EQ(sum, pe(node) - pb(node));
          EXPECT_GT(pe(node) - pb(node), leaf_size);
        }
      }
    for (int i = 0; i < n; ++i) EXPECT_EQ(covered[i], 1) << "particle " << i;
    return largest;
  }
};

TEST_F(TreeTest, CodeLevelIsExactAtEveryLevel) {
  for (int level = 0; level <= max_tree_level; ++level) {
    std::uint64_t const key = 0x5a5a5a5a5a5a5a5aull >> 1;
    EXPECT_EQ(code_level(cell_code(key, level)), level);
    EXPECT_EQ(code_first_key(cell_code(key, level)) >> (3 * (max_tree_level - level)),
              key >> (3 * (max_tree_level - level)));
  }
}

TEST_F(TreeTest, RandomPointsGiveLeavesOfAtMostLeafSize) {
  std::mt19937_64 rng(1);
  std::normal_distribution<double> normal;
  std::vector<std::array<double, 3>> points(20000);
  for (auto& p : points) p = {normal(rng), normal(rng), 3 * normal(rng)};
  auto const keys = sorted_keys(points);
  Tree<> tree;
  build_tree(space, keys, 20000, 16, {}, tree);
  check(tree, keys, 20000, 16);
  EXPECT_GT(tree.num_levels(), 3);
}

TEST_F(TreeTest, CoincidentParticlesMakeOneOversizedLeafAtTheDeepestLevel) {
  std::vector<std::array<double, 3>> points(3000, {0.5, 0.5, 0.5});
  for (int i = 0; i < 500; ++i) points[i] = {i * 1e-3, 0.0, 1.0};
  auto const keys = sorted_keys(points);
  Tree<> tree;
  build_tree(space, keys, 3000, 32, {}, tree);
  EXPECT_EQ(check(tree, keys, 3000, 32), 2500);
  EXPECT_EQ(tree.num_levels(), max_tree_level + 1);
}

TEST_F(TreeTest, ForcedCellsAreSplitAndAnEmptyTreeHasNoNodes) {
  std::vector<std::array<double, 3>> points(10);
  for (int i = 0; i < 10; ++i) points[i] = {0.1 * i, 0.01 * i, 0.0};
  auto const keys = sorted_keys(points);
  ScalarView<std::uint64_t> forced("forced", 1);
  Kokkos::deep_copy(forced, std::uint64_t(1));  // the root
  Tree<> tree;
  build_tree(space, keys, 10, 32, forced, tree);
  EXPECT_GT(tree.num_nodes, 1);
  build_tree(space, keys, 0, 32, {}, tree);
  EXPECT_EQ(tree.num_nodes, 0);
  EXPECT_THROW(build_tree(space, keys, 10, 0, {}, tree), Error);
}

// Nodes are indexed with int: a tree beyond the node limit is an error naming the count and
// the fix, not a wrapped index (the limit, INT_MAX in use, is lowered to reach it here).
TEST_F(TreeTest, TreesBeyondTheNodeLimitAreAnError) {
  std::mt19937_64 rng(2);
  std::uniform_real_distribution<double> uniform;
  std::vector<std::array<double, 3>> points(2000);
  for (auto& p : points) p = {uniform(rng), uniform(rng), uniform(rng)};
  auto const keys = sorted_keys(points);
  Tree<> tree;
  build_tree(space, keys, 2000, 1, {}, tree);
  std::size_t const nodes = tree.num_nodes;
  build_tree(space, keys, 2000, 1, {}, tree, nodes);  // exactly at the limit
  EXPECT_EQ(std::size_t(tree.num_nodes), nodes);
  try {
    build_tree(space, keys, 2000, 1, {}, tree, nodes - 1);
    ADD_FAILURE() << "no error for " << nodes << " nodes with a limit of " << nodes - 1;
  } catch (Error const& e) {
    EXPECT_NE(std::string(e.what()).find("more than the int index limit " + std::to_string(nodes - 1) +
                                         "; use more MPI ranks or a larger leaf_size"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(build_tree(space, keys, 2000, 1, {}, tree, std::size_t(1) << 31), Error);
}

// Rebuilding a tree of the same size reuses every View (the solver rebuilds each step).
TEST_F(TreeTest, RebuildingAllocatesNothing) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal;
  std::vector<std::array<double, 3>> points(5000);
  for (auto& p : points) p = {normal(rng), normal(rng), normal(rng)};
  auto const keys = sorted_keys(points);
  Tree<> tree;
  build_tree(space, keys, 5000, 16, {}, tree);
  int const nodes = tree.num_nodes;
  void const* const data[8] = {tree.code.data(),        tree.particle_begin.data(), tree.particle_end.data(),
                               tree.child_begin.data(), tree.child_end.data(),      tree.child_index.data(),
                               tree.build_child_count.data(), tree.build_bounds.data()};
  build_tree(space, keys, 5000, 16, {}, tree);
  void const* const again[8] = {tree.code.data(),        tree.particle_begin.data(), tree.particle_end.data(),
                                tree.child_begin.data(), tree.child_end.data(),      tree.child_index.data(),
                                tree.build_child_count.data(), tree.build_bounds.data()};
  for (int k = 0; k < 8; ++k) EXPECT_EQ(data[k], again[k]) << "View " << k << " was reallocated";
  EXPECT_EQ(tree.num_nodes, nodes);
  check(tree, keys, 5000, 16);
}

}  // namespace
