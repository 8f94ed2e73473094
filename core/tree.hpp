#pragma once
/// \file
/// \brief Octree topology built level by level from sorted Peano–Hilbert keys.
#include <kfmm/core/types.hpp>
#include <kfmm/core/view_growth.hpp>

#include <cstdint>
#include <limits>
#include <vector>

namespace kfmm {

/// Bits per axis of a key; the deepest tree level.
constexpr int max_tree_level = 21;

/// \brief A node's cell code: a marker bit above the level's key prefix, `(1 << 3l) | prefix`,
/// so that codes of different levels never collide and a child's code is `(parent << 3) | digit`.
KOKKOS_INLINE_FUNCTION std::uint64_t cell_code(std::uint64_t key, int level) {
  return (std::uint64_t(1) << (3 * level)) | (key >> (3 * (max_tree_level - level)));
}
/// Level of a cell code (position of its marker bit / 3).
KOKKOS_INLINE_FUNCTION int code_level(std::uint64_t code) {
  int level = 0;
  // Bounded: at level 21 the marker is bit 63, and shifting by 66 would be undefined.
  while (level < max_tree_level && (code >> (3 * (level + 1)))) ++level;
  return level;
}
/// First key of the cell with this code.
KOKKOS_INLINE_FUNCTION std::uint64_t code_first_key(std::uint64_t code) {
  int const level = code_level(code);
  std::uint64_t const prefix = code ^ (std::uint64_t(1) << (3 * level));
  return prefix << (3 * (max_tree_level - level));
}

/// Trees, pair lists and the near field index a rank's particles (its own and those imported
/// for the near field) with int; half the int range leaves room for the growth factors of
/// their work arrays. Solvers check against it and name the fix (more ranks).
inline constexpr std::size_t max_rank_particles = std::size_t(std::numeric_limits<int>::max() / 2);

/// \brief Tree topology. Nodes are stored breadth first, level by level, children of a node
/// in key order; `children` is a CSR list (child_begin/child_end index into child_index)
/// so that nodes imported from other ranks can be attached later.
template <class Memory = MemorySpace>
struct Tree {
  ScalarView<std::uint64_t, Memory> code;
  ScalarView<int, Memory> particle_begin;  ///< range of the node's (sorted) local particles
  ScalarView<int, Memory> particle_end;
  ScalarView<int, Memory> child_begin;     ///< into child_index; equal to child_end for leaves
  ScalarView<int, Memory> child_end;
  ScalarView<int, Memory> child_index;
  std::vector<int> level_offset;           ///< nodes of level l: [level_offset[l], level_offset[l+1])
  int num_nodes = 0;
  /// Work Views of build_tree (children per node of a level, their key bounds), kept so that
  /// rebuilding allocates nothing once they have grown.
  ScalarView<int, Memory> build_child_count;
  ScalarView<int, Memory> build_bounds;

  int num_levels() const { return static_cast<int>(level_offset.size()) - 1; }

  /// Makes room for at least `n` nodes (and child-list entries), keeping the content. Grows to a
  /// quarter more: the node count drifts from step to step, and a node costs a few bytes only.
  void reserve(std::size_t n) {
    if (code.extent(0) < n) n += n / 4;
    grow_preserving(code, n);
    grow_preserving(particle_begin, n);
    grow_preserving(particle_end, n);
    grow_preserving(child_begin, n);
    grow_preserving(child_end, n);
    grow_preserving(child_index, n);
  }
};

/// \brief Builds the tree of `n` sorted keys: leaves are the largest cells with at most
/// `leaf_size` particles; cells at the deepest level are leaves whatever their count, so
/// coincident particles give one oversized leaf instead of endless refinement. Cells whose
/// code is in `forced_split` (sorted; cells shared with other ranks) are always split.
/// Reuses the Views of `tree` when they are large enough. Nodes are indexed with int: a tree
/// that would need more than `max_nodes` (at most, and by default, INT_MAX) throws kfmm::Error
/// naming the count and the fix (more ranks or a larger leaf size).
void build_tree(ExecutionSpace const& space, ScalarView<std::uint64_t const> keys, int n, int leaf_size,
                ScalarView<std::uint64_t const> forced_split, Tree<>& tree,
                std::size_t max_nodes = std::numeric_limits<int>::max());

}  // namespace kfmm
