#pragma once
/// \file
/// \brief The arithmetic of one force evaluation on a built tree with interaction lists:
/// upward pass (P2M, M2M), M2L, downward pass (L2L, L2P) and the near field (P2P), for an
/// expansion order, arithmetic type and softening kernel chosen at run time.
#include <kfmm/core/tree.hpp>
#include <kfmm/fmm/dual_tree_walk.hpp>
#include <kfmm/fmm/node_geometry.hpp>
#include <kfmm/fmm/target_particles.hpp>

#include <memory>

namespace kfmm {

/// \brief Inputs of a pass: the sorted source particles (local first, then imported ones) and
/// the particles whose forces are wanted (the first `num_targets` sources).
struct PassParticles {
  Vec3View<double> pos;
  ScalarView<double> mass;
  int num_sources = 0;
  int num_targets = 0;
};

/// \brief Runs the passes of one configuration; keeps its expansion storage between calls.
/// Results: Φ_i = Σ_{j≠i} m_j K(r_ij) and ∇Φ_i, in the order of the particles (double).
class ExpansionPass {
 public:
  virtual ~ExpansionPass() = default;

  /// P2M at leaves and M2M up the local tree (nodes `[0, tree.num_nodes)` by levels).
  virtual void upward(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry,
                      PassParticles const& particles) = 0;
  /// M2M into the listed inner nodes from their children (nodes of one level per call).
  virtual void upward_nodes(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry,
                            ScalarView<int> const& nodes, int count) = 0;
  /// Whether the pass computes in float: its coefficients, and the masses and relative
  /// positions its kernels read, are floats (rows between ranks then carry them as floats,
  /// core/packed_words.hpp).
  virtual bool single_precision() const = 0;
  /// Multipoles of `count` nodes starting at `first` as raw coefficients (for export to other
  /// ranks) / setting them from imported coefficients. Coefficients are doubles in these Views
  /// (floats held exactly when single_precision()).
  virtual int coefficients_per_node() const = 0;
  virtual void get_multipoles(ExecutionSpace const& space, ScalarView<int> const& nodes, int count,
                              Kokkos::View<double**, MemorySpace> const& out) const = 0;
  virtual void set_multipoles(ExecutionSpace const& space, int first, int count,
                              Kokkos::View<double**, MemorySpace> const& in) = 0;
  /// Makes room for nodes added to the tree after upward() (imported nodes).
  virtual void reserve_nodes(std::size_t count) = 0;
  /// The harmonic multipole power (fmm/multipole_power.hpp) of nodes first … first + count − 1
  /// into out(node, n), n = 0 … order, in units of the node's scale^n; `out` must hold them.
  virtual void multipole_powers(ExecutionSpace const& space, int first, int count,
                                Kokkos::View<double**, MemorySpace> const& out) const = 0;
  /// The same for the listed nodes `nodes(0 … count − 1)` only.
  virtual void multipole_powers_of(ExecutionSpace const& space, ScalarView<int> const& nodes, int count,
                                   Kokkos::View<double**, MemorySpace> const& out) const = 0;

  /// Clears the local expansions and applies M2L over the lists.
  virtual void translate(ExecutionSpace const& space, NodeGeometry const& geometry, PairLists const& m2l) = 0;
  /// L2L down the local tree, then L2P into phi / grad of the `targets` (overwritten). Nodes
  /// flagged node_idle get no L2L and no L2P; rows of other particles keep what they held.
  virtual void evaluate_locals(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry,
                               PassParticles const& particles, TargetParticles const& targets,
                               ScalarView<double> const& phi, Vec3View<double> const& grad) = 0;
  /// Adds the near field (P2P over the lists) to phi / grad of the `targets`.
  virtual void add_near_field(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry,
                              PairLists const& p2p, PassParticles const& particles, TargetParticles const& targets,
                              ScalarView<double> const& phi, Vec3View<double> const& grad) = 0;

  /// Adds the M2P interactions (every listed source's multipole at each target particle of its
  /// group's leaf, OpeningTest::m2p_theta) to phi / grad of the `targets`.
  virtual void add_multipoles_at_particles(ExecutionSpace const& space, Tree<> const& tree,
                                           NodeGeometry const& geometry, PairLists const& m2p,
                                           PassParticles const& particles, TargetParticles const& targets,
                                           ScalarView<double> const& phi, Vec3View<double> const& grad) = 0;

  /// Particle pairs of the last add_near_field().
  virtual std::uint64_t p2p_pairs() const = 0;
  /// (source, target particle) evaluations of the last add_multipoles_at_particles().
  virtual std::uint64_t m2p_evaluations() const = 0;
};

/// The pass for (order, precision, softening kind, softening length ε ≥ 0).
std::unique_ptr<ExpansionPass> make_expansion_pass(int order, Precision precision, SofteningKind kind,
                                                   double softening_length);

}  // namespace kfmm
