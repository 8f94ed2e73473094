#include <kfmm/core/error.hpp>
#include <kfmm/core/hilbert.hpp>
#include <kfmm/core/huge_pages.hpp>
#include <kfmm/core/sort.hpp>
#include <kfmm/neighbors/point_tree.hpp>

#include <cfloat>
#include <limits>

namespace kfmm {

namespace detail {
std::size_t exclusive_scan_in_place(ExecutionSpace const& space, ScalarView<std::size_t> const& values, std::size_t n) {
  std::size_t total = 0;
  Kokkos::parallel_scan(
      "kfmm::neighbors::scan", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t i, std::size_t & sum, bool final) {
        std::size_t const v = values(i);
        if (final) values(i) = sum;
        sum += v;
      },
      total);
  space.fence();
  return total;
}

}  // namespace detail

void compute_point_tree_boxes(ExecutionSpace const& space, PointTree& t) {
  t.lo = Vec3View<double>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::neighbors::node_lo"), t.tree.num_nodes);
  t.hi = Vec3View<double>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::neighbors::node_hi"), t.tree.num_nodes);
  auto const lo = t.lo, hi = t.hi, pos = t.pos;
  auto const begin = t.tree.particle_begin, end = t.tree.particle_end;
  auto const child_begin = t.tree.child_begin, child_end = t.tree.child_end, child_index = t.tree.child_index;
  // Children sit on the next level, so going up level by level finds their boxes ready.
  for (int level = t.tree.num_levels() - 1; level >= 0; --level) {
    Kokkos::parallel_for(
        "kfmm::neighbors::node_boxes",
        Kokkos::RangePolicy<ExecutionSpace>(space, t.tree.level_offset[level], t.tree.level_offset[level + 1]),
        KOKKOS_LAMBDA(int node) {
          double l[3], h[3];
          for (int k = 0; k < 3; ++k) {
            l[k] = DBL_MAX;
            h[k] = -DBL_MAX;
          }
          if (child_begin(node) == child_end(node)) {
            for (int i = begin(node); i < end(node); ++i)
              for (int k = 0; k < 3; ++k) {
                double const x = pos(i, k);
                l[k] = x < l[k] ? x : l[k];
                h[k] = x > h[k] ? x : h[k];
              }
          } else {
            for (int c = child_begin(node); c < child_end(node); ++c) {
              int const child = child_index(c);
              for (int k = 0; k < 3; ++k) {
                l[k] = lo(child, k) < l[k] ? lo(child, k) : l[k];
                h[k] = hi(child, k) > h[k] ? hi(child, k) : h[k];
              }
            }
          }
          for (int k = 0; k < 3; ++k) {
            lo(node, k) = l[k];
            hi(node, k) = h[k];
          }
        });
  }
  space.fence();
}

PointTree build_point_tree(ExecutionSpace const& space, Vec3View<double> const& pos, std::size_t n, int leaf_size) {
  if (n > max_rank_particles)
    fail("a neighbour search tree over {} points exceeds the per-rank limit {} (int tree indices); use more MPI ranks",
         n, max_rank_particles);
  if (leaf_size < 1) fail("neighbour search leaf size {} is invalid; it must be at least 1", leaf_size);
  PointTree t;
  t.n = static_cast<int>(n);
  t.pos = allocate_large<Vec3View<double>>("kfmm::neighbors::sorted_pos", n);
  t.order = allocate_large<ScalarView<std::uint32_t>>("kfmm::neighbors::order", n);
  auto const keys = allocate_large<ScalarView<std::uint64_t>>("kfmm::neighbors::keys", n);
  if (n > 0) {
    double lo[3], hi[3];
    compute_bounds(space, pos, n, lo, hi);
    BoundingCube const cube = cube_from_bounds(lo, hi);
    compute_keys(space, cube, pos, n, keys);
    KeySorter<MemorySpace, std::uint32_t>().sort(space, keys, t.order, n);
    auto const sorted = t.pos;
    auto const order = t.order;
    Kokkos::parallel_for(
        "kfmm::neighbors::gather_sorted", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n), KOKKOS_LAMBDA(std::size_t i) {
          for (int k = 0; k < 3; ++k) sorted(i, k) = pos(order(i), k);
        });
  }
  ScalarView<std::uint64_t> const no_split("kfmm::neighbors::no_split", 0);
  build_tree(space, keys, t.n, leaf_size, no_split, t.tree);
  compute_point_tree_boxes(space, t);
  return t;
}

}  // namespace kfmm
