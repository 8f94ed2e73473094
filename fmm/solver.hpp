#pragma once
/// \file
/// \brief The force solver: FMM potential and acceleration of every particle, on one rank or many.
#include <kfmm/comm/context.hpp>
#include <kfmm/core/particles.hpp>
#include <kfmm/fmm/config.hpp>
#include <kfmm/fmm/stats.hpp>

#include <cstdint>
#include <memory>
#include <vector>

namespace kfmm {

/// Per-particle flag aligned with the particles: nonzero = active (its force is wanted).
using ActiveFlags = ScalarView<std::uint8_t>;

/// \brief Computes the FMM potential and acceleration of all particles on all ranks.
///
/// Keeps its buffers between calls and grows them only when N grows (a growth is logged once).
/// Results are double Views (the arithmetic inside follows `FMMConfig::precision`); padding
/// slots (`[num, capacity)`) are NaN. Potential convention: φ_i = −G Σ_{j≠i} m_j K(r_ij).
class ForceSolver {
 public:
  /// Collective over `context`; throws kfmm::Error for an invalid configuration.
  ForceSolver(Context const& context, FMMConfig const& config);
  ~ForceSolver();
  ForceSolver(ForceSolver&&) noexcept;
  ForceSolver& operator=(ForceSolver&&) noexcept;

  /// \brief Redistributes `particles` over the ranks (each rank gets a contiguous range of
  /// Peano–Hilbert keys, balanced by the measured cost of the previous call) and sorts them
  /// ("owner order"), then computes forces. Afterwards potential() and acceleration() are
  /// aligned with `particles`. Collective.
  void compute(Particles<MemorySpace>& particles);

  /// \brief Same forces, but `particles` stays as it is on this rank: results come back in
  /// this rank's input order (jz-fmm's "loc"). Keeps the plan compute_active() reuses (the
  /// owner-order copy of the particles, the exchange plan back to the input order, the local
  /// tree's topology) until the next compute() or compute_in_input_order(). Collective.
  void compute_in_input_order(Particles<MemorySpace> const& particles, ScalarView<double>& potential,
                              Vec3View<double>& acceleration);

  /// \brief Potential and acceleration of the particles with `active(i) != 0` due to all
  /// particles of all ranks, in this rank's input order, like compute_in_input_order(): their
  /// rows of `potential` and `acceleration` (at least `particles.num` rows, like `active`) are
  /// overwritten, every other row is left as it is. Collective; every rank takes part, also
  /// one without particles or without active ones. Throws kfmm::Error on every rank for Views
  /// shorter than the particles.
  ///
  /// The active rows equal those of compute_in_input_order() on the same tree: a call after
  /// compute_in_input_order() (or a compute_active() with every particle active) with the same
  /// particles at the same positions gives the same values. Such a full call keeps a plan
  /// (owner ranks and order, the local tree); later calls with the same particles (the same ids
  /// in the same order on every rank, positions and masses may change, e.g. drifted by a
  /// block-step integrator) reuse it: positions travel to their owners along the plan, the
  /// local tree keeps its topology and gets new node centres, radii (measured from the
  /// particles, so they enclose particles that left their cell) and multipoles from all
  /// particles; the walk, M2L and L2L run only for nodes holding active particles, L2P and P2P
  /// only for the active particles of those leaves. Accuracy stays that of the opening
  /// criterion as long as the tree's cells stay compact; call it with every particle active
  /// (or compute_in_input_order) to rebuild the tree and rebalance the ranks, e.g. at each
  /// synchronisation of the time-step hierarchy. No particle active anywhere: nothing is
  /// computed. Other particles than the plan's: a full evaluation (which keeps a new plan).
  ///
  /// The relative criterion uses the |a| estimate of every particle and replaces it by the new
  /// |a| of the active ones only. On several ranks the measured cost of each reused-plan call
  /// is added to cost_weights() (to the active particles, sharing each target leaf's cost), so
  /// the next full call balances the ranks by the work of the whole block of calls.
  void compute_active(Particles<MemorySpace> const& particles, ActiveFlags const& active,
                      ScalarView<double> const& potential, Vec3View<double> const& acceleration);

  /// Owner-order results of the last compute().
  ScalarView<double> potential() const;
  Vec3View<double> acceleration() const;

  /// \brief Per-particle cost weights (in P2P pairs) measured by the last call, aligned with the
  /// particles as that call left them (owner order after compute(), input order after
  /// compute_in_input_order() and compute_active(), the latter adding the costs of its
  /// reused-plan calls to those of the last full one); the next call balances the ranks by
  /// them. Empty on one rank.
  /// A restart saves them so that the run continues with the same decomposition.
  ScalarView<double> cost_weights() const;
  /// \brief Weights for the next call's decomposition, aligned with the particles it will get
  /// (`num` entries, e.g. cost_weights() read back from a restart). Throws kfmm::Error for fewer
  /// than `num` entries or a weight that is not finite and ≥ 0.
  void set_cost_weights(ScalarView<double> const& weights, std::size_t num);

  /// \brief The boundaries between the ranks' domains (R − 1 Hilbert keys, ascending) after the
  /// last call; empty on one rank and before the first call. With FMMConfig::domain_tolerance
  /// the next call keeps them while they balance the cost. A restart saves them.
  std::vector<std::uint64_t> domain_splitters() const;
  /// \brief Domain boundaries for the next call to keep (domain_splitters() read back from a
  /// restart). Takes R − 1 ascending keys, the same on every rank, or none (the next call
  /// chooses new domains). Collective: every rank calls it; a count other than R − 1, keys out
  /// of order or keys that differ between ranks throw kfmm::Error on every rank.
  void set_domain_splitters(std::vector<std::uint64_t> const& splitters);

  /// \brief The relative opening criterion's |a| per particle: the last call's |acceleration|,
  /// aligned with the particles as it left them (like cost_weights()); empty before the first
  /// call and with the angle criterion. The next call uses it, instead of a first evaluation
  /// at `estimate_theta`, when it gets the same particles (the same ids in the same order on
  /// every rank, e.g. the next step of a simulation). A restart saves it.
  ScalarView<double> acceleration_estimate() const;
  /// Whether acceleration_estimate() holds one (also for a rank without particles).
  bool has_acceleration_estimate() const;
  /// \brief Gives the next call |a| for `particles` (`particles.num` values aligned with them,
  /// e.g. acceleration_estimate() read back from a restart). Throws kfmm::Error for fewer values
  /// than particles or a value that is not finite and ≥ 0.
  void set_acceleration_estimate(Particles<MemorySpace> const& particles, ScalarView<double> const& magnitude);
  /// \brief Drops the estimate: the next call estimates |a| afresh. For callers that change the
  /// particles' positions by more than a time step while keeping their ids.
  void forget_acceleration_estimate();

  /// Timings, interaction counts and communication figures of the last call. Phase times and
  /// this rank's figures are always there; the global figures (P2P pairs, M2L, nodes, leaves,
  /// particle and byte extremes over ranks, cost imbalance) only after collect_statistics(true),
  /// as they cost collectives on every call (otherwise they are 0, the imbalance 1).
  ForceStats const& stats() const;
  /// Whether calls gather the global figures of stats() (off by default; `kfmm bench` and
  /// `kfmm forces` turn it on).
  void collect_statistics(bool on);
  FMMConfig const& config() const;
  Context const& context() const;

  /// The implementation (public only as a name: nvcc allows device lambdas in public classes only).
  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace kfmm
