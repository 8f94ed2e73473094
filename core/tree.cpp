#include <kfmm/core/binary_search.hpp>
#include <kfmm/core/error.hpp>
#include <kfmm/core/tree.hpp>
#include <kfmm/core/view_growth.hpp>

#include <limits>

namespace kfmm {

namespace {

KOKKOS_INLINE_FUNCTION bool contains(ScalarView<std::uint64_t const> const& sorted, std::uint64_t value) {
  int const n = static_cast<int>(sorted.extent(0));
  int const i = lower_bound(sorted, 0, n, value);
  return i < n && sorted(i) == value;
}

}  // namespace

void build_tree(ExecutionSpace const& space, ScalarView<std::uint64_t const> keys, int n, int leaf_size,
                ScalarView<std::uint64_t const> forced_split, Tree<>& tree, std::size_t max_nodes) {
  if (leaf_size < 1) fail("leaf_size = {} is invalid; it must be at least 1", leaf_size);
  if (max_nodes > std::size_t(std::numeric_limits<int>::max()))
    fail("build_tree: max_nodes = {} exceeds the int index limit {}", max_nodes, std::numeric_limits<int>::max());
  tree.level_offset.assign(1, 0);
  tree.num_nodes = 0;
  if (n == 0) {
    tree.level_offset.push_back(0);
    return;
  }
  std::size_t const estimate = 2 * static_cast<std::size_t>(n) / leaf_size + 64;
  tree.reserve(estimate);

  // The root cell holds every key.
  {
    auto code = tree.code;
    auto begin = tree.particle_begin;
    auto end = tree.particle_end;
    Kokkos::parallel_for(
        "kfmm::tree::root", Kokkos::RangePolicy<ExecutionSpace>(space, 0, 1), KOKKOS_LAMBDA(int) {
          code(0) = 1;
          begin(0) = 0;
          end(0) = n;
        });
  }
  tree.level_offset.push_back(1);
  tree.num_nodes = 1;

  for (int level = 0; level < max_tree_level; ++level) {
    int const first = tree.level_offset[level];
    int const count = tree.level_offset[level + 1] - first;
    if (count == 0) break;
    if (tree.build_child_count.extent(0) < static_cast<std::size_t>(count)) {
      // No content to keep: plain reallocation, amortised like grow_preserving.
      std::size_t const size = std::size_t(count) + count / 2 + 16;
      tree.build_child_count =
          ScalarView<int>(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kfmm::tree::child_count"), size);
      tree.build_bounds =
          ScalarView<int>(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kfmm::tree::bounds"), 9 * size);
    }
    auto const child_count = tree.build_child_count;
    auto const bounds = tree.build_bounds;
    // Count the non-empty children of each node that splits; remember the 9 child bounds.
    auto code = tree.code;
    auto pbegin = tree.particle_begin;
    auto pend = tree.particle_end;
    int const shift = 3 * (max_tree_level - level - 1);
    Kokkos::parallel_for(
        "kfmm::tree::count_children", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count), KOKKOS_LAMBDA(int i) {
          int const node = first + i;
          int const b = pbegin(node), e = pend(node);
          bool const split = e - b > leaf_size || (forced_split.extent(0) > 0 && contains(forced_split, code(node)));
          int children = 0;
          if (split) {
            std::uint64_t const prefix = code(node) ^ (std::uint64_t(1) << (3 * level));
            int lo = b;
            for (int d = 0; d < 8; ++d) {
              bounds(9 * std::size_t(i) + d) = lo;
              int const hi = d == 7 ? e : lower_bound(keys, lo, e, ((prefix << 3) | std::uint64_t(d + 1)) << shift);
              if (hi > lo) ++children;
              lo = hi;
            }
            bounds(9 * std::size_t(i) + 8) = e;
          }
          child_count(i) = children;
        });
    long long added = 0;
    Kokkos::parallel_scan(
        "kfmm::tree::scan_children", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count),
        KOKKOS_LAMBDA(int i, long long& sum, bool final) {
          int const c = child_count(i);
          if (final) child_count(i) = static_cast<int>(sum);
          sum += c;
        },
        added);
    int const next = tree.num_nodes;
    std::size_t const needed = static_cast<std::size_t>(next) + added;
    if (needed > max_nodes)
      fail("the tree needs {} nodes at level {}, more than the int index limit {}; use more MPI ranks or a larger "
           "leaf_size",
           needed, level + 1, max_nodes);
    tree.reserve(needed);
    code = tree.code;
    pbegin = tree.particle_begin;
    pend = tree.particle_end;
    auto cbegin = tree.child_begin;
    auto cend = tree.child_end;
    auto cindex = tree.child_index;
    Kokkos::parallel_for(
        "kfmm::tree::fill_children", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count), KOKKOS_LAMBDA(int i) {
          int const node = first + i;
          int slot = next + child_count(i);
          cbegin(node) = slot;
          bool const split = (i + 1 < count ? child_count(i + 1) : added) > child_count(i);
          if (split) {
            for (int d = 0; d < 8; ++d) {
              int const lo = bounds(9 * std::size_t(i) + d), hi = bounds(9 * std::size_t(i) + d + 1);
              if (hi > lo) {
                code(slot) = (code(node) << 3) | std::uint64_t(d);
                pbegin(slot) = lo;
                pend(slot) = hi;
                cindex(slot) = slot;
                ++slot;
              }
            }
          }
          cend(node) = slot;
        });
    // Leaves of this level have no children: their (empty) range is set above.
    tree.num_nodes = next + added;
    tree.level_offset.push_back(tree.num_nodes);
    if (added == 0) break;
  }
  // Nodes of the deepest level are leaves.
  int const last_first = tree.level_offset[tree.level_offset.size() - 2];
  int const last_count = tree.num_nodes - last_first;
  auto cbegin = tree.child_begin;
  auto cend = tree.child_end;
  Kokkos::parallel_for(
      "kfmm::tree::deepest_leaves", Kokkos::RangePolicy<ExecutionSpace>(space, last_first, last_first + last_count),
      KOKKOS_LAMBDA(int node) { cbegin(node) = cend(node) = 0; });
  // Trim the trailing empty level, if any.
  while (tree.level_offset.size() > 2 && tree.level_offset[tree.level_offset.size() - 1] ==
                                             tree.level_offset[tree.level_offset.size() - 2])
    tree.level_offset.pop_back();
}

}  // namespace kfmm
