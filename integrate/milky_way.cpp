#include <kfmm/integrate/milky_way.hpp>

#include <kfmm/core/error.hpp>

#include <cmath>

namespace kfmm {

std::vector<ExternalPotential> milky_way_2014(UnitSystem const& units) {
  // Physical units of the model: kpc, km/s, Msun, G in kpc (km/s)² / Msun (core/units.hpp).
  constexpr double kpc_in_cm = 3.0856775814913673e21;
  constexpr double msun_in_g = 1.988409870698051e33;
  constexpr double G_astro = 4.30071057317063e-06;
  double const length = kpc_in_cm / units.length_in_cm;        // 1 kpc in run units
  double const mass = msun_in_g / units.mass_in_g;             // 1 Msun in run units
  double const velocity = 1e5 / units.velocity_in_cm_per_s;    // 1 km/s in run units
  double const expected_G = G_astro * velocity * velocity * length / mass;
  if (!(std::fabs(units.G - expected_G) <= 1e-6 * expected_G))
    fail("the Milky-Way composite (milky_way_2014) is given in kpc, km/s and Msun and needs the run in physical "
         "units, but the units' G = {:g} differs from the physical {:g} in them; use units.system: astro",
         units.G, expected_G);

  double const R0 = 8, vc2 = 220.0 * 220.0;  // kpc, (km/s)²
  // Disk: v_c² = G M R²/(R² + (a + b)²)^{3/2} = 0.60 v_c²(R0).
  double const a_disk = 3, b_disk = 0.28;
  double const s2 = R0 * R0 + (a_disk + b_disk) * (a_disk + b_disk);
  double const m_disk = 0.60 * vc2 * s2 * std::sqrt(s2) / (R0 * R0) / G_astro;
  // Halo: v_c² = G M_s μ(R/r_s)/R, M_s = 4π ρ_s r_s³ = 0.35 v_c²(R0).
  double const r_s = 16;
  double const mu = std::log(1 + R0 / r_s) - (R0 / r_s) / (1 + R0 / r_s);
  double const m_s = 0.35 * vc2 * R0 / mu / G_astro;
  double const rho_s = m_s / (4 * M_PI * r_s * r_s * r_s);
  // Bulge: v_c² = G M R/(R + a)² = 0.05 v_c²(R0).
  double const a_bulge = 0.5;
  double const m_bulge = 0.05 * vc2 * (R0 + a_bulge) * (R0 + a_bulge) / R0 / G_astro;

  return {hernquist_potential(m_bulge * mass, a_bulge * length),
          miyamoto_nagai_potential(m_disk * mass, a_disk * length, b_disk * length),
          nfw_potential(rho_s * mass / (length * length * length), r_s * length)};
}

}  // namespace kfmm
