#include <kfmm/core/kernel_shape.hpp>
#include <kfmm/core/view_growth.hpp>
#include <kfmm/fmm/node_geometry.hpp>

#include <cmath>

namespace kfmm {

double root_scale(BoundingCube const& cube) { return std::exp2(std::ceil(std::log2(cube.size))); }

namespace {

/// GPU shape: the particles of a leaf are summed in this many fixed partial sums (particle i
/// into sum i mod lanes), added in lane order, whatever the team size: the result is the same
/// on every backend and thread count. One warp on CUDA.
constexpr int geometry_lanes = 32;

/// GPU shape: threads per team; a backend resource (results do not depend on it).
constexpr int geometry_team_size() { return compat::is_gpu_backend<ExecutionSpace>() ? geometry_lanes : 1; }

/// Tag of the GPU-shaped operator: a team per node.
struct TeamPerNode {};

// Computes one node's geometry: leaves from their particles, inner nodes from their children.
// CPU shape: one thread per node (operator()(int)). GPU shape: a team per node of one level
// starting at `first` (operator()(TeamPerNode, member)).
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
  ScalarView<double> power_radius;
  int power_exponent = 0;  // 0: no power radius
  int first = 0;

  using Scratch = Kokkos::View<double*, ExecutionSpace::scratch_memory_space, Kokkos::MemoryUnmanaged>;
  static constexpr int per_lane = 5;  // mass, first moment, power sum
  static std::size_t scratch_bytes() { return Scratch::shmem_size(per_lane * geometry_lanes); }

  KOKKOS_INLINE_FUNCTION double power(double d) const {
    double p = 1;
    for (int k = 0; k < power_exponent; ++k) p *= d;
    return p;
  }
  /// The power radius of a node of mass m whose power sum (or its bound) is `sum`: never more
  /// than the bounding radius r, which also bounds it.
  KOKKOS_INLINE_FUNCTION double power_mean_radius(double sum, double m, double r) const {
    if (!(m > 0) || !(sum > 0)) return 0.0;
    return compat::math::min(r, compat::math::pow(sum / m, 1.0 / power_exponent));
  }
  // Distance of particle i from c.
  KOKKOS_INLINE_FUNCTION double distance(int i, double const c[3]) const {
    double d2 = 0;
    for (int k = 0; k < 3; ++k) d2 += (pos(i, k) - c[k]) * (pos(i, k) - c[k]);
    return compat::math::sqrt(d2);
  }

  /// The expansion centre of a node of mass m and first moment mx.
  KOKKOS_INLINE_FUNCTION void expansion_centre(int node, int level, double m, double const mx[3], double c[3]) const {
    if (geometric) {
      GridPoint const cell = cell_corner(code_first_key(code(node)), level);
      double const half = 0.5 * double(std::uint64_t(1) << (max_tree_level - level));
      for (int k = 0; k < 3; ++k) c[k] = corner[k] + (double(cell[k]) + half) * grid_unit;
    } else {
      for (int k = 0; k < 3; ++k) c[k] = m > 0 ? mx[k] / m : 0.0;
    }
  }

  template <class Member>
  KOKKOS_INLINE_FUNCTION void operator()(TeamPerNode, Member const& team) const {
    int const node = first + team.league_rank();
    if (cbegin(node) != cend(node)) {  // inner: at most 8 children, one thread
      Kokkos::single(Kokkos::PerTeam(team), [&]() { (*this)(node); });
      return;
    }
    int const level = code_level(code(node));
    int const begin = pbegin(node), end = pend(node);
    Scratch partial(team.team_scratch(0), per_lane * geometry_lanes);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, geometry_lanes), [&](int l) {
      double m = 0, mx[3] = {0, 0, 0};
      for (int i = begin + l; i < end; i += geometry_lanes) {
        m += mass(i);
        for (int k = 0; k < 3; ++k) mx[k] += mass(i) * pos(i, k);
      }
      partial(per_lane * l) = m;
      for (int k = 0; k < 3; ++k) partial(per_lane * l + 1 + k) = mx[k];
    });
    team.team_barrier();
    // Every thread adds the lane sums in the same order, so all hold the same centre.
    double m = 0, mx[3] = {0, 0, 0};
    for (int l = 0; l < geometry_lanes; ++l) {
      m += partial(per_lane * l);
      for (int k = 0; k < 3; ++k) mx[k] += partial(per_lane * l + 1 + k);
    }
    double c[3];
    expansion_centre(node, level, m, mx, c);
    // The largest squared distance: a maximum, exact in any order.
    double r2 = 0;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, begin, end),
        [&](int i, double& largest) {
          double d2 = 0;
          for (int k = 0; k < 3; ++k) d2 += (pos(i, k) - c[k]) * (pos(i, k) - c[k]);
          largest = compat::math::max(largest, d2);
        },
        Kokkos::Max<double>(r2));
    double const r = compat::math::sqrt(compat::math::max(r2, 0.0));
    double power_sum = 0;
    if (power_exponent > 0) {  // in the same fixed lanes as the mass
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, geometry_lanes), [&](int l) {
        double sum = 0;
        for (int i = begin + l; i < end; i += geometry_lanes) sum += mass(i) * power(distance(i, c));
        partial(per_lane * l + 4) = sum;
      });
      team.team_barrier();
      for (int l = 0; l < geometry_lanes; ++l) power_sum += partial(per_lane * l + 4);
    }
    Kokkos::single(Kokkos::PerTeam(team), [&]() {
      if (power_exponent > 0) power_radius(node) = power_mean_radius(power_sum, m, r);
      node_mass(node) = m;
      for (int k = 0; k < 3; ++k) centre(node, k) = c[k];
      radius(node) = r;
      scale(node) = top / double(std::uint64_t(1) << level);
      flags(node) = node_leaf;
    });
  }

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
    expansion_centre(node, level, m, mx, c);
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
    if (power_exponent > 0) {
      // Leaves: exact. Inner nodes: the bound |x − c| ≤ |x − c_child| + |c_child − c| with the
      // children's power means (Minkowski's inequality).
      double sum = 0;
      if (leaf) {
        for (int i = pbegin(node); i < pend(node); ++i) sum += mass(i) * power(distance(i, c));
      } else {
        for (int cc = cbegin(node); cc < cend(node); ++cc) {
          int const child = cindex(cc);
          double d2 = 0;
          for (int k = 0; k < 3; ++k) d2 += (centre(child, k) - c[k]) * (centre(child, k) - c[k]);
          sum += node_mass(child) * power(compat::math::sqrt(d2) + power_radius(child));
        }
      }
      power_radius(node) = power_mean_radius(sum, m, r);
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
  if (geometry.power_exponent > 0) grow_preserving(geometry.power_radius, n);
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
                             centre_kind == ExpansionCentre::Geometric,
                             geometry.power_radius,
                             geometry.power_exponent};
}

}  // namespace

void compute_node_geometry(ExecutionSpace const& space, Tree<> const& tree, Vec3View<double> const& pos,
                           ScalarView<double> const& mass, ExpansionCentre centre_kind, BoundingCube const& cube,
                           NodeGeometry& geometry) {
  compute_node_geometry(space, tree, pos, mass, centre_kind, cube, geometry, use_gpu_shape<ExecutionSpace>());
}

void compute_node_geometry(ExecutionSpace const& space, Tree<> const& tree, Vec3View<double> const& pos,
                           ScalarView<double> const& mass, ExpansionCentre centre_kind, BoundingCube const& cube,
                           NodeGeometry& geometry, bool gpu_shape, int team_size) {
  auto functor = make_functor(tree, pos, mass, centre_kind, cube, geometry);
  int const threads = team_size > 0 ? team_size : geometry_team_size();
  // Deepest level first, so that children are done before their parents.
  for (int level = tree.num_levels() - 1; level >= 0; --level) {
    int const begin = tree.level_offset[level], end = tree.level_offset[level + 1];
    if (gpu_shape) {
      functor.first = begin;
      using Policy = Kokkos::TeamPolicy<ExecutionSpace, TeamPerNode>;
      Kokkos::parallel_for("kfmm::fmm::node_geometry_teams",
                           Policy(space, end - begin, threads)
                               .set_scratch_size(0, Kokkos::PerTeam(NodeGeometryFunctor::scratch_bytes())),
                           functor);
    } else {
      Kokkos::parallel_for("kfmm::fmm::node_geometry", Kokkos::RangePolicy<ExecutionSpace>(space, begin, end), functor);
    }
  }
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
