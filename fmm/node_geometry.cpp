#include <kfmm/core/view_growth.hpp>
#include <kfmm/fmm/node_geometry.hpp>

#include <cmath>

namespace kfmm {

double root_scale(BoundingCube const& cube) { return std::exp2(std::ceil(std::log2(cube.size))); }

namespace {

// Computes one node's geometry: leaves from their particles, inner nodes from their children.
struct NodeGeometryFunctor {
  ScalarView<std::uint64_t> code;
  ScalarView<int> pbegin, pend, cbegin, cend, cindex;
  Vec3View<double> pos;
  ScalarView<double> mass;
  Vec3View<double> centre;
  ScalarView<double> radius, node_mass, scale;
  ScalarView<int> flags;
  double top, grid_unit, corner[3];
  bool geometric;

  KOKKOS_INLINE_FUNCTION void operator()(int node) const {
    int const level = code_level(code(node));
    bool const leaf = cbegin(node) == cend(node);
    double m = 0, mx[3] = {0, 0, 0};
    if (leaf) {
      for (int i = pbegin(node); i < pend(node); ++i) {
        m += mass(i);
        for (int k = 0; k < 3; ++k) mx[k] += mass(i) * pos(i, k);
      }
    } else {
      for (int c = cbegin(node); c < cend(node); ++c) {
        int const child = cindex(c);
        m += node_mass(child);
        for (int k = 0; k < 3; ++k) mx[k] += node_mass(child) * centre(child, k);
      }
    }
    double c[3];
    if (geometric) {
      GridPoint const cell = cell_corner(code_first_key(code(node)), level);
      double const half = 0.5 * double(std::uint64_t(1) << (max_tree_level - level));
      for (int k = 0; k < 3; ++k) c[k] = corner[k] + (double(cell[k]) + half) * grid_unit;
    } else {
      for (int k = 0; k < 3; ++k) c[k] = m > 0 ? mx[k] / m : 0.0;
    }
    // Bounding radius: exact over the particles of a leaf, from the children's spheres above.
    double r = 0;
    if (leaf) {
      for (int i = pbegin(node); i < pend(node); ++i) {
        double d2 = 0;
        for (int k = 0; k < 3; ++k) d2 += (pos(i, k) - c[k]) * (pos(i, k) - c[k]);
        r = compat::math::max(r, d2);
      }
      r = compat::math::sqrt(r);
    } else {
      for (int cc = cbegin(node); cc < cend(node); ++cc) {
        int const child = cindex(cc);
        double d2 = 0;
        for (int k = 0; k < 3; ++k) d2 += (centre(child, k) - c[k]) * (centre(child, k) - c[k]);
        r = compat::math::max(r, compat::math::sqrt(d2) + radius(child));
      }
    }
    node_mass(node) = m;
    for (int k = 0; k < 3; ++k) centre(node, k) = c[k];
    radius(node) = r;
    scale(node) = top / double(std::uint64_t(1) << level);
    flags(node) = leaf ? node_leaf : 0;
  }
};

NodeGeometryFunctor make_functor(Tree<> const& tree, Vec3View<double> const& pos, ScalarView<double> const& mass,
                                 ExpansionCentre centre_kind, BoundingCube const& cube, NodeGeometry& geometry) {
  std::size_t const n = tree.code.extent(0);
  grow_preserving(geometry.centre, n);
  grow_preserving(geometry.radius, n);
  grow_preserving(geometry.mass, n);
  grow_preserving(geometry.scale, n);
  grow_preserving(geometry.flags, n);
  return NodeGeometryFunctor{tree.code,
                             tree.particle_begin,
                             tree.particle_end,
                             tree.child_begin,
                             tree.child_end,
                             tree.child_index,
                             pos,
                             mass,
                             geometry.centre,
                             geometry.radius,
                             geometry.mass,
                             geometry.scale,
                             geometry.flags,
                             root_scale(cube),
                             cube.size / double(std::uint64_t(1) << max_tree_level),
                             {cube.corner[0], cube.corner[1], cube.corner[2]},
                             centre_kind == ExpansionCentre::Geometric};
}

}  // namespace

void compute_node_geometry(ExecutionSpace const& space, Tree<> const& tree, Vec3View<double> const& pos,
                           ScalarView<double> const& mass, ExpansionCentre centre_kind, BoundingCube const& cube,
                           NodeGeometry& geometry) {
  auto const functor = make_functor(tree, pos, mass, centre_kind, cube, geometry);
  // Deepest level first, so that children are done before their parents.
  for (int level = tree.num_levels() - 1; level >= 0; --level)
    Kokkos::parallel_for("kfmm::fmm::node_geometry",
                         Kokkos::RangePolicy<ExecutionSpace>(space, tree.level_offset[level], tree.level_offset[level + 1]),
                         functor);
}

void update_inner_node_geometry(ExecutionSpace const& space, Tree<> const& tree, ScalarView<int> const& nodes,
                                int count, ExpansionCentre centre_kind, BoundingCube const& cube,
                                NodeGeometry& geometry) {
  auto const functor = make_functor(tree, {}, {}, centre_kind, cube, geometry);
  Kokkos::parallel_for(
      "kfmm::fmm::inner_node_geometry", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count),
      KOKKOS_LAMBDA(int i) { functor(nodes(i)); });
}

}  // namespace kfmm
