#pragma once
/// \file
/// \brief An octree over points for neighbour searches: Hilbert-sorted copies of the positions,
/// core/tree.hpp's topology and a tight bounding box per node.
#include <kfmm/core/tree.hpp>
#include <kfmm/core/types.hpp>

#include <cstddef>
#include <cstdint>

namespace kfmm {

/// \brief Points sorted by Peano–Hilbert key (in the cube around them) and their octree.
/// Node `i` holds the sorted points [tree.particle_begin(i), tree.particle_end(i)); a node is a
/// leaf when tree.child_begin(i) == tree.child_end(i); node 0 is the root when n > 0.
struct PointTree {
  Tree<> tree;
  Vec3View<double> pos;             ///< sorted positions (n rows)
  ScalarView<std::uint32_t> order;  ///< order(i): index in the input of sorted point i
  Vec3View<double> lo, hi;          ///< tight bounding box of each node's points
  int n = 0;
};

/// \brief Builds the tree of the first `n` rows of `pos` with leaves of at most `leaf_size`
/// points (coincident points end in one oversized leaf at the deepest level). `n` must not
/// exceed max_rank_particles (kfmm::Error naming the count otherwise).
PointTree build_point_tree(ExecutionSpace const& space, Vec3View<double> const& pos, std::size_t n, int leaf_size);

/// Node boxes of `t` from its sorted points, deepest level first (public for nvcc's lambdas).
void compute_point_tree_boxes(ExecutionSpace const& space, PointTree& t);

}  // namespace kfmm
