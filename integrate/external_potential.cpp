#include <kfmm/integrate/external_potential.hpp>

#include <kfmm/core/error.hpp>

#include <cmath>

namespace kfmm {

namespace {

ExternalPotential make(ExternalKind kind, double p0, double p1 = 0, double p2 = 0) {
  ExternalPotential p;
  p.kind = kind;
  p.param[0] = p0;
  p.param[1] = p1;
  p.param[2] = p2;
  return p;
}

/// value > 0 (or ≥ 0) and finite, else an error naming it and the limit.
void require(std::string const& label, char const* name, double value, bool zero_allowed = false) {
  bool const ok = std::isfinite(value) && (zero_allowed ? value >= 0 : value > 0);
  if (!ok)
    fail("external potential {}: {} = {} must be finite and {} 0{}", label, name, value, zero_allowed ? "≥" : ">",
         std::isfinite(value) && value <= 0 && !zero_allowed ? " (a zero or negative value has no meaning here)" : "");
}

}  // namespace

ExternalPotential point_mass_potential(double mass, double softening) {
  return make(ExternalKind::PointMass, mass, softening);
}
ExternalPotential plummer_potential(double mass, double b) { return make(ExternalKind::Plummer, mass, b); }
ExternalPotential hernquist_potential(double mass, double a) { return make(ExternalKind::Hernquist, mass, a); }
ExternalPotential nfw_potential(double rho_s, double r_s) { return make(ExternalKind::NFW, rho_s, r_s); }

ExternalPotential nfw_potential_m200(double m200, double concentration, double r200) {
  require("nfw", "m200", m200);
  require("nfw", "concentration", concentration);
  require("nfw", "r200", r200);
  double const r_s = r200 / concentration;
  double const rho_s = m200 / (4 * M_PI * r_s * r_s * r_s * detail::nfw_mass_profile(concentration));
  return nfw_potential(rho_s, r_s);
}

ExternalPotential miyamoto_nagai_potential(double mass, double a, double b) {
  return make(ExternalKind::MiyamotoNagai, mass, a, b);
}
ExternalPotential logarithmic_potential(double v0, double r_core, double q) {
  return make(ExternalKind::Logarithmic, v0, r_core, q);
}
ExternalPotential uniform_acceleration(double gx, double gy, double gz) {
  return make(ExternalKind::Uniform, gx, gy, gz);
}

double ExternalPotential::mass() const {
  switch (kind) {
    case ExternalKind::PointMass:
    case ExternalKind::Plummer:
    case ExternalKind::Hernquist:
    case ExternalKind::MiyamotoNagai: return param[0];
    default: return 0;
  }
}

void ExternalPotential::validate(std::string const& label) const {
  switch (kind) {
    case ExternalKind::PointMass:
      require(label, "mass", param[0]);
      require(label, "softening", param[1], true);
      break;
    case ExternalKind::Plummer:
      require(label, "mass", param[0]);
      require(label, "b", param[1]);
      break;
    case ExternalKind::Hernquist:
      require(label, "mass", param[0]);
      require(label, "a", param[1]);
      break;
    case ExternalKind::NFW:
      require(label, "density (rho_s)", param[0]);
      require(label, "scale_radius", param[1]);
      break;
    case ExternalKind::MiyamotoNagai:
      require(label, "mass", param[0]);
      require(label, "a", param[1], true);
      require(label, "b", param[2]);
      break;
    case ExternalKind::Logarithmic:
      require(label, "v0", param[0]);
      require(label, "core_radius", param[1]);
      require(label, "q", param[2]);
      break;
    case ExternalKind::Uniform:
      for (int d = 0; d < 3; ++d)
        if (!std::isfinite(param[d]))
          fail("external potential {}: acceleration component {} = {} must be finite", label, "xyz"[d], param[d]);
      break;
    default: fail("external potential {}: unknown kind {}", label, static_cast<int>(kind));
  }
  for (int d = 0; d < 3; ++d) {
    if (!std::isfinite(centre[d]))
      fail("external potential {}: centre component {} = {} must be finite", label, "xyz"[d], centre[d]);
    if (!std::isfinite(velocity[d]))
      fail("external potential {}: centre velocity component {} = {} must be finite", label, "xyz"[d], velocity[d]);
  }
  if (!std::isfinite(t0)) fail("external potential {}: t0 = {} must be finite", label, t0);
  if (motion == CentreMotion::Integrated && !(mass() > 0))
    fail("external potential {}: an integrated centre needs a finite mass, which {} does not have; use point_mass, "
         "plummer, hernquist or miyamoto_nagai for a potential whose centre orbits, or move it on a line "
         "(centre_motion: linear)",
         label, to_string(kind));
}

std::array<double, 3> ExternalPotential::centre_at(double time) const {
  if (motion != CentreMotion::Linear) return {centre[0], centre[1], centre[2]};
  double const dt = time - t0;
  return {centre[0] + velocity[0] * dt, centre[1] + velocity[1] * dt, centre[2] + velocity[2] * dt};
}

ExternalKind parse_external_kind(std::string const& name) {
  for (auto kind : {ExternalKind::PointMass, ExternalKind::Plummer, ExternalKind::Hernquist, ExternalKind::NFW,
                    ExternalKind::MiyamotoNagai, ExternalKind::Logarithmic, ExternalKind::Uniform})
    if (name == to_string(kind)) return kind;
  fail("unknown external potential kind '{}': use point_mass, plummer, hernquist, nfw, miyamoto_nagai, logarithmic "
       "or uniform",
       name);
}

std::string to_string(ExternalKind kind) {
  switch (kind) {
    case ExternalKind::PointMass: return "point_mass";
    case ExternalKind::Plummer: return "plummer";
    case ExternalKind::Hernquist: return "hernquist";
    case ExternalKind::NFW: return "nfw";
    case ExternalKind::MiyamotoNagai: return "miyamoto_nagai";
    case ExternalKind::Logarithmic: return "logarithmic";
    case ExternalKind::Uniform: return "uniform";
  }
  return "?";
}

}  // namespace kfmm
