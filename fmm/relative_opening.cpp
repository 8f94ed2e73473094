#include <kfmm/core/view_growth.hpp>
#include <kfmm/fmm/relative_opening.hpp>

#include <limits>

namespace kfmm {

void relative_opening_allowance(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry,
                                ScalarView<double> const& magnitude, double factor, int num_nodes,
                                ScalarView<double>& allowed) {
  grow_preserving(allowed, std::size_t(num_nodes > 0 ? num_nodes : 1));
  Kokkos::deep_copy(space, Kokkos::subview(allowed, Kokkos::make_pair(0, num_nodes)), 0.0);
  auto out = allowed;
  auto const flags = geometry.flags;
  auto const pbegin = tree.particle_begin, pend = tree.particle_end;
  auto const cbegin = tree.child_begin, cend = tree.child_end, cindex = tree.child_index;
  double const none = std::numeric_limits<double>::infinity();
  // Deepest level first: a node's children are done before it.
  for (int level = tree.num_levels() - 1; level >= 0; --level)
    Kokkos::parallel_for(
        "kfmm::fmm::relative_opening_allowance",
        Kokkos::RangePolicy<ExecutionSpace>(space, tree.level_offset[level], tree.level_offset[level + 1]),
        KOKKOS_LAMBDA(int node) {
          double smallest = none;
          if (flags(node) & node_leaf) {
            for (int i = pbegin(node); i < pend(node); ++i) {
              double const g = factor * magnitude(i);
              smallest = g < smallest ? g : smallest;
            }
          } else {
            for (int c = cbegin(node); c < cend(node); ++c) {
              int const child = cindex(c);
              if (!(flags(child) & node_remote)) smallest = out(child) < smallest ? out(child) : smallest;
            }
          }
          out(node) = smallest;
        });
}

}  // namespace kfmm
