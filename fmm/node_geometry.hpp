#pragma once
/// \file
/// \brief Per-node geometry in double: mass, expansion centre, bounding radius, scale, flags.
#include <kfmm/core/hilbert.hpp>
#include <kfmm/core/tree.hpp>
#include <kfmm/fmm/config.hpp>

#include <cstdint>

namespace kfmm {

/// Node flags (bit set).
enum NodeFlag : int {
  node_leaf = 1,      ///< no children (a global leaf)
  node_remote = 2,    ///< owned by another rank: a source only, never a target
  node_unopened = 4,  ///< remote node whose children have not been imported yet
  node_shared = 8,    ///< cell cut by a rank boundary: replicated, its M2L done on every rank
  node_counted = 16,  ///< shared cell whose interactions this rank counts in the statistics
  /// Local node without a particle whose force is wanted (ForceSolver::compute_active): never a
  /// walk target, no L2L into it, no L2P at it. Set after compute_node_geometry, which clears it.
  node_idle = 32,
};

/// \brief Geometry of every node of a Tree (same indexing), computed bottom-up.
struct NodeGeometry {
  Vec3View<double> centre;       ///< expansion centre
  ScalarView<double> radius;     ///< bounding radius of the node's particles about `centre`
  ScalarView<double> mass;
  ScalarView<double> scale;      ///< power of two: the cell size of the node's level
  ScalarView<int> flags;         ///< NodeFlag bits
  /// The relative opening criterion's source size (Dehnen's multipole power): the k-th power
  /// mean of the particles' distances from `centre`, (Σ m|x − c|^k / M)^(1/k) with
  /// k = power_exponent, at most `radius`. Filled only when power_exponent > 0.
  ScalarView<double> power_radius;
  int power_exponent = 0;
  /// The relative criterion's harmonic multipole power per node × degree 0 … p, in units of
  /// the node's scale^n (ExpansionPass::multipole_powers, fmm/multipole_power.hpp); filled by
  /// the solver for every node, imported ones included, when it has the multipoles. Empty: the
  /// criterion bounds the powers by the power radius.
  Kokkos::View<double**, MemorySpace> multipole_power;
};

/// \brief Fills `geometry` for the local nodes `[0, tree.num_nodes)` from the sorted particles.
/// `cube` is the (global) bounding cube of the keys. Leaves: exact sums over particles;
/// inner nodes: from their children. Grows the Views of `geometry` when needed.
void compute_node_geometry(ExecutionSpace const& space, Tree<> const& tree, Vec3View<double> const& pos,
                           ScalarView<double> const& mass, ExpansionCentre centre_kind, BoundingCube const& cube,
                           NodeGeometry& geometry);

/// \brief compute_node_geometry in a given kernel shape (the one above takes
/// use_gpu_shape<ExecutionSpace>()), so that tests run both on any backend. CPU shape: a
/// thread per node. GPU shape: a team per node of a level, the particles of a leaf in 32 fixed
/// partial sums (the same result for any team size); `team_size` 0 is the backend's default.
void compute_node_geometry(ExecutionSpace const& space, Tree<> const& tree, Vec3View<double> const& pos,
                           ScalarView<double> const& mass, ExpansionCentre centre_kind, BoundingCube const& cube,
                           NodeGeometry& geometry, bool gpu_shape, int team_size = 0);

/// \brief Recomputes the geometry of the listed inner nodes from their children (all in one
/// level, or ordered so that no node precedes its children within a call).
void update_inner_node_geometry(ExecutionSpace const& space, Tree<> const& tree, ScalarView<int> const& nodes,
                                int count, ExpansionCentre centre_kind, BoundingCube const& cube,
                                NodeGeometry& geometry);

/// Power of two ≥ the cube size: the expansion scale of the root; level l has root / 2^l.
double root_scale(BoundingCube const& cube);

}  // namespace kfmm
