#pragma once
/// \file
/// \brief Unit systems: plain G = 1 units or jz-fmm's astrophysical units.
#include <string>

namespace kfmm {

/// \brief Simulation units, recorded in every output (GADGET-4 `/Parameters` names).
struct UnitSystem {
  std::string name = "plain";          ///< "plain" (G = 1) or "astro" (kpc, km/s, Msun)
  double length_in_cm = 1.0;
  double mass_in_g = 1.0;
  double velocity_in_cm_per_s = 1.0;
  double G = 1.0;                      ///< gravitational constant in these units

  /// G = 1, dimensionless (all cgs conversion factors 1).
  static UnitSystem plain() { return UnitSystem{}; }

  /// jz-fmm's UnitConfig: lengths in `pos_in_kpc` kpc, velocities in `vel_in_kmps` km/s,
  /// masses in `mass_in_msol` Msun; G = 4.30071057317063e-06 · m / (l · v²) in kpc (km/s)² / Msun.
  static UnitSystem astro(double pos_in_kpc = 1.0, double vel_in_kmps = 1.0, double mass_in_msol = 1.0) {
    constexpr double kpc_in_cm = 3.0856775814913673e21;
    constexpr double msun_in_g = 1.988409870698051e33;
    UnitSystem u;
    u.name = "astro";
    u.length_in_cm = pos_in_kpc * kpc_in_cm;
    u.velocity_in_cm_per_s = vel_in_kmps * 1e5;
    u.mass_in_g = mass_in_msol * msun_in_g;
    u.G = 4.30071057317063e-06 * mass_in_msol / pos_in_kpc / (vel_in_kmps * vel_in_kmps);
    return u;
  }

  /// Time unit in seconds (length / velocity).
  double time_in_s() const { return length_in_cm / velocity_in_cm_per_s; }
};

}  // namespace kfmm
