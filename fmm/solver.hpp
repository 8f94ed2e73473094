#pragma once
/// \file
/// \brief The force solver: FMM potential and acceleration of every particle, on one rank or many.
#include <kfmm/comm/context.hpp>
#include <kfmm/core/particles.hpp>
#include <kfmm/fmm/config.hpp>
#include <kfmm/fmm/stats.hpp>

#include <memory>

namespace kfmm {

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
  /// this rank's input order (jz-fmm's "loc"). Collective.
  void compute_in_input_order(Particles<MemorySpace> const& particles, ScalarView<double>& potential,
                              Vec3View<double>& acceleration);

  /// Owner-order results of the last compute().
  ScalarView<double> potential() const;
  Vec3View<double> acceleration() const;

  /// Timings, interaction counts and communication figures of the last call.
  ForceStats const& stats() const;
  FMMConfig const& config() const;
  Context const& context() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kfmm
