#pragma once
/// \file
/// \brief One analytic external potential (NFW, Hernquist, Plummer, Miyamoto–Nagai, logarithmic
/// halo, uniform acceleration, point mass): a POD description that lives in device Views and the
/// device function that evaluates it. docs/external_potentials.md has the formulas.
#include <kfmm/core/kokkos_compat.hpp>

#include <Kokkos_Core.hpp>

#include <array>
#include <string>

namespace kfmm {

/// Which model. Parameters in ExternalPotential::param, by kind (the factories below fill them).
enum class ExternalKind : int {
  PointMass,      ///< M, softening ε ≥ 0: φ = −GM/sqrt(r² + ε²)
  Plummer,        ///< M, b: φ = −GM/sqrt(r² + b²)
  Hernquist,      ///< M, a: φ = −GM/(r + a)
  NFW,            ///< ρ_s, r_s: φ = −4πGρ_s r_s³ ln(1 + r/r_s)/r
  MiyamotoNagai,  ///< M, a, b: φ = −GM/sqrt(R² + (a + sqrt(z² + b²))²), symmetry axis z
  Logarithmic,    ///< v_0, r_c, q: φ = ½ v_0² ln(r_c² + x² + y² + z²/q²)
  Uniform         ///< g_x, g_y, g_z: φ = −g·(x − c), a = g everywhere
};

/// How the centre c of a potential moves.
enum class CentreMotion : int {
  Fixed,      ///< c = centre
  Linear,     ///< c(t) = centre + velocity·(t − t0)
  Integrated  ///< a massive point (mass: the model's M) moved by the integrator in the other external
              ///< potentials and, in reaction, by the particles (ExternalPotentials::apply)
};

/// \brief A potential, its parameters and its centre: plain data, so an array of them can be
/// copied to the device and evaluated there with external_field().
struct ExternalPotential {
  ExternalKind kind = ExternalKind::PointMass;
  double param[4] = {0, 0, 0, 0};
  CentreMotion motion = CentreMotion::Fixed;
  double centre[3] = {0, 0, 0};    ///< at time t0 (Fixed, Linear), or the initial position (Integrated)
  double velocity[3] = {0, 0, 0};  ///< Linear: the constant velocity; Integrated: the initial one
  double t0 = 0;                   ///< Linear only

  /// The mass that an integrated centre carries (M of the finite-mass kinds; 0 for the others).
  double mass() const;
  /// Throws kfmm::Error naming the parameter, its value and the limit (`label` names the potential).
  void validate(std::string const& label) const;
  /// Position of the centre at `time` for Fixed and Linear centres (Integrated: the initial one).
  std::array<double, 3> centre_at(double time) const;
};

/// Factories: a fixed centre at the origin; set `motion`, `centre`, `velocity` afterwards.
ExternalPotential point_mass_potential(double mass, double softening = 0);
ExternalPotential plummer_potential(double mass, double b);
ExternalPotential hernquist_potential(double mass, double a);
/// NFW from the characteristic density ρ_s and the scale radius r_s.
ExternalPotential nfw_potential(double rho_s, double r_s);
/// NFW from M_200, the concentration c and r_200 (the radius inside which the mean density is
/// 200 ρ_crit, so ρ_crit and the Hubble constant stay the caller's choice): r_s = r_200/c,
/// ρ_s = M_200 / (4π r_s³ (ln(1 + c) − c/(1 + c))).
ExternalPotential nfw_potential_m200(double m200, double concentration, double r200);
ExternalPotential miyamoto_nagai_potential(double mass, double a, double b);
ExternalPotential logarithmic_potential(double v0, double r_core, double q);
ExternalPotential uniform_acceleration(double gx, double gy, double gz);

ExternalKind parse_external_kind(std::string const& name);  ///< point_mass, plummer, hernquist, nfw, ...
std::string to_string(ExternalKind kind);

namespace detail {

/// ln(1 + x)/x for x ≥ 0 without cancellation at small x.
KOKKOS_INLINE_FUNCTION double log1p_over_x(double x) {
  if (x < 1e-2) {  // alternating series Σ (−x)^n/(n + 1): truncation error below x⁹ < 1e-18
    double sum = 0, term = 1;
    for (int n = 0; n <= 8; ++n, term *= -x) sum += term / (n + 1);
    return sum;
  }
  return compat::math::log(1 + x) / x;
}

/// ln(1 + x) − x/(1 + x) (the NFW mass profile) for x ≥ 0; the difference cancels at small x.
KOKKOS_INLINE_FUNCTION double nfw_mass_profile(double x) {
  if (x < 1e-2) {  // Σ_{n≥2} (−1)^n (n − 1) x^n / n
    double sum = 0, power = x * x;
    for (int n = 2; n <= 10; ++n, power *= -x) sum += (n - 1) * power / n;
    return sum;
  }
  return compat::math::log(1 + x) - x / (1 + x);
}

}  // namespace detail

/// \brief Potential φ and acceleration a = −∇φ of `p` at the offset (x, y, z) from its centre.
/// At the centre itself, where the direction of a cusp's force is undefined, a = 0.
KOKKOS_INLINE_FUNCTION void external_field(ExternalPotential const& p, double G, double x, double y, double z,
                                           double& phi, double a[3]) {
  using compat::math::log;
  using compat::math::sqrt;
  double const r2 = x * x + y * y + z * z;
  double const r = sqrt(r2);
  double f = 0;  // a = f·(x, y, z) for the spherical kinds
  phi = 0;
  switch (p.kind) {
    case ExternalKind::PointMass: {
      double const s2 = r2 + p.param[1] * p.param[1];
      phi = s2 > 0 ? -G * p.param[0] / sqrt(s2) : 0;
      f = s2 > 0 ? -G * p.param[0] / (s2 * sqrt(s2)) : 0;
      break;
    }
    case ExternalKind::Plummer: {
      double const s2 = r2 + p.param[1] * p.param[1];
      phi = -G * p.param[0] / sqrt(s2);
      f = -G * p.param[0] / (s2 * sqrt(s2));
      break;
    }
    case ExternalKind::Hernquist: {
      double const s = r + p.param[1];
      phi = -G * p.param[0] / s;
      f = r > 0 ? -G * p.param[0] / (r * s * s) : 0;
      break;
    }
    case ExternalKind::NFW: {
      double const rs = p.param[1];
      double const k = 4 * 3.14159265358979323846 * G * p.param[0] * rs * rs * rs;  // G M_s
      double const u = r / rs;
      phi = -k / rs * detail::log1p_over_x(u);
      // −G M(<r)/r³ with M(<r) = M_s μ(u): μ(u)/u³ → 1/(2u) at small u, so f ~ 1/r.
      f = r > 0 ? -k * detail::nfw_mass_profile(u) / (r2 * r) : 0;
      break;
    }
    case ExternalKind::MiyamotoNagai: {
      double const zeta = sqrt(z * z + p.param[2] * p.param[2]);
      double const s = p.param[1] + zeta;
      double const d2 = x * x + y * y + s * s;
      double const gm_d3 = G * p.param[0] / (d2 * sqrt(d2));
      phi = -G * p.param[0] / sqrt(d2);
      a[0] = -gm_d3 * x;
      a[1] = -gm_d3 * y;
      a[2] = -gm_d3 * z * s / zeta;
      return;
    }
    case ExternalKind::Logarithmic: {
      double const v2 = p.param[0] * p.param[0];
      double const q2 = p.param[2] * p.param[2];
      double const s2 = p.param[1] * p.param[1] + x * x + y * y + z * z / q2;
      phi = 0.5 * v2 * log(s2);
      a[0] = -v2 * x / s2;
      a[1] = -v2 * y / s2;
      a[2] = -v2 * z / (q2 * s2);
      return;
    }
    case ExternalKind::Uniform: {
      phi = -(p.param[0] * x + p.param[1] * y + p.param[2] * z);
      for (int d = 0; d < 3; ++d) a[d] = p.param[d];
      return;
    }
  }
  a[0] = f * x;
  a[1] = f * y;
  a[2] = f * z;
}

}  // namespace kfmm
