#pragma once
/// \file
/// \brief Conserved quantities of the whole system, reduced deterministically over all ranks.
#include <kfmm/comm/context.hpp>
#include <kfmm/core/particles.hpp>

#include <array>
#include <cstdio>
#include <string>

namespace kfmm {

/// \brief Global energies, momenta and centre of mass at one time (same on every rank).
struct Diagnostics {
  double time = 0;                            ///< time the values describe
  double mass = 0;
  double kinetic = 0;                         ///< ½ Σ m v²
  double potential = 0;                       ///< ½ Σ m φ (self-gravity)
  double external = 0;                        ///< Σ m φ_ext (external field, ExternalField)
  double centres = 0;                         ///< energy of the integrated external centres
  double total = 0;                           ///< kinetic + potential + external + centres
  double energy_error = 0;                    ///< (total − E₀) / |E₀|, E₀ at the start of the run
  std::array<double, 3> momentum{};           ///< Σ m v
  std::array<double, 3> angular_momentum{};   ///< Σ m x × v
  std::array<double, 3> centre_of_mass{};     ///< Σ m x / Σ m
  double max_acceleration = 0;                ///< max |a| (sets the adaptive step)
  bool has_centres = false;                   ///< the two centres below were found for this row
  std::array<double, 3> centre_potential_minimum{};  ///< position of the most bound particle
  std::array<double, 3> centre_shrinking_spheres{};  ///< Power et al. (2003) centre
};

/// \brief Measures the system with velocities v + kick·a (kick = ½dt gives DKD's mid-step
/// velocities at its mid-step positions, kick = 0 the stored ones). Sums run over fixed blocks
/// of particles and then over ranks in rank order, so the values do not depend on the thread
/// count and are identical on every rank. `energy_error` is left 0, `centres` too (the caller adds
/// them). `external_potential` (φ_ext per particle) may be an empty View: no external field.
/// Collective.
Diagnostics measure(Context const& context, Particles<MemorySpace> const& particles,
                    ScalarView<double> const& potential, Vec3View<double> const& acceleration, double kick,
                    ScalarView<double> const& external_potential = {});

/// \brief Writes one CSV line per step (rank 0 only; other ranks hold no file).
class DiagnosticsLog {
 public:
  /// Creates `path` with a header, or, when `resume_after_step` ≥ 0, keeps the complete rows of
  /// an existing file up to that step (a restarted run continues the file; rows after the step
  /// and a row cut short by a crash are dropped, so the file ends as an uninterrupted run's).
  /// The file is replaced through `path.tmp`: a crash leaves the old or the new file, whole.
  DiagnosticsLog(Context const& context, std::string const& path, long long resume_after_step = -1);
  ~DiagnosticsLog();
  DiagnosticsLog(DiagnosticsLog const&) = delete;
  DiagnosticsLog& operator=(DiagnosticsLog const&) = delete;

  void write(long long step, double dt, Diagnostics const& diagnostics);

  /// The CSV column names, in order.
  static std::string header();

 private:
  std::FILE* file_ = nullptr;
};

}  // namespace kfmm
