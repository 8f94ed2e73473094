#pragma once
/// \file
/// \brief Accuracy of computed forces against direct summation on a sample of targets.
#include <kfmm/comm/context.hpp>
#include <kfmm/core/particles.hpp>
#include <kfmm/fmm/config.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kfmm {

/// \brief Errors over the sampled targets of all ranks (same on every rank).
struct AccuracyReport {
  std::uint64_t samples = 0;
  double force_l2 = 0;      ///< E = sqrt(Σ|a − a_direct|² / Σ|a_direct|²)
  double median = 0;        ///< per-particle |a − a_direct| / |a_direct|
  double p99 = 0;
  double p999 = 0;          ///< 99.9th percentile
  double max = 0;
  double potential_l2 = 0;  ///< sqrt(Σ(φ − φ_direct)² / Σφ_direct²)
  /// Where the largest error is, so that a tail can be traced to its particle: its id, its
  /// distance from the centre of mass of all particles, and its |a_direct|.
  std::uint64_t max_id = 0;
  double max_radius = 0;
  double max_magnitude = 0;
};

/// \brief Compares `potential` and `acceleration` (aligned with `particles`) with double
/// direct summation over all ranks' particles, for about `samples` targets chosen by a hash of
/// their ids (all particles when samples ≥ num_total), with the softening, kernel and G of
/// `config`. Collective.
AccuracyReport measure_accuracy(Context const& context, Particles<MemorySpace> const& particles,
                                ScalarView<double> const& potential, Vec3View<double> const& acceleration,
                                FMMConfig const& config, std::uint64_t samples);

/// \brief measure_accuracy on the particles whose ids are listed (the same list on every rank,
/// any order, repeats counted once), e.g. the particles another code's force test sampled, so
/// that both codes' error tails come from the same particles. Every listed id must be a particle's
/// (kfmm::Error on every rank otherwise, naming how many are not and the first). Collective.
AccuracyReport measure_accuracy(Context const& context, Particles<MemorySpace> const& particles,
                                ScalarView<double> const& potential, Vec3View<double> const& acceleration,
                                FMMConfig const& config, std::vector<std::uint64_t> const& target_ids);

/// \brief The check of measure_accuracy(…, target_ids) alone, e.g. before a long force
/// calculation: kfmm::Error on every rank when a listed id is no particle's. Collective.
void check_target_ids(Context const& context, Particles<MemorySpace> const& particles,
                      std::vector<std::uint64_t> const& target_ids);

/// One line: "accuracy vs direct summation (N targets): force E = …, median …, 99% …, 99.9% …,
/// max … (id …, r = … from the centre of mass, |a| = …); potential …".
std::string describe(AccuracyReport const& report);

}  // namespace kfmm
