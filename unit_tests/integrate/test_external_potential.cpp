// External potentials: a = −∇φ by finite differences, circular velocities and enclosed masses
// against the analytic formulas, the Milky-Way composite's normalisation, device evaluation.
#include <kfmm/core/error.hpp>
#include <kfmm/core/units.hpp>
#include <kfmm/integrate/external_field.hpp>
#include <kfmm/integrate/milky_way.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace {

using kfmm::ExternalPotential;

constexpr double nfw_pi = 3.141592653589793;

struct Named {
  std::string name;
  ExternalPotential potential;
};

/// One of each kind, with a centre off the origin so that the offsets are exercised.
std::vector<Named> all_kinds() {
  std::vector<Named> list = {
      {"point_mass", kfmm::point_mass_potential(2.0, 0.05)},
      {"plummer", kfmm::plummer_potential(3.0, 0.7)},
      {"hernquist", kfmm::hernquist_potential(1.5, 0.4)},
      {"nfw", kfmm::nfw_potential(0.2, 1.3)},
      {"nfw_m200", kfmm::nfw_potential_m200(10.0, 8.0, 5.0)},
      {"miyamoto_nagai", kfmm::miyamoto_nagai_potential(2.0, 1.1, 0.3)},
      {"logarithmic", kfmm::logarithmic_potential(1.2, 0.5, 0.8)},
      {"uniform", kfmm::uniform_acceleration(0.1, -0.2, 0.3)},
  };
  for (auto& entry : list) {
    entry.potential.centre[0] = 0.3;
    entry.potential.centre[1] = -0.2;
    entry.potential.centre[2] = 0.1;
  }
  return list;
}

void field_of(ExternalPotential const& p, double G, double const x[3], double& phi, double a[3]) {
  kfmm::external_field(p, G, x[0] - p.centre[0], x[1] - p.centre[1], x[2] - p.centre[2], phi, a);
}

TEST(ExternalPotential, AccelerationIsMinusTheGradientOfThePotential) {
  double const G = 1.7;
  double const points[][3] = {{1.0, 0.5, -0.3}, {0.31, -0.19, 0.12}, {-3.0, 2.0, 4.0}, {0.3, -0.2, 2.5},
                              {12.0, -7.0, 0.2}};
  for (auto const& [name, p] : all_kinds()) {
    p.validate(name);
    for (auto const& x : points) {
      double phi, a[3];
      field_of(p, G, x, phi, a);
      double const scale = std::sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2]);
      for (int d = 0; d < 3; ++d) {
        double const h = 1e-5 * (1 + std::fabs(x[d]));
        double xp[3] = {x[0], x[1], x[2]}, xm[3] = {x[0], x[1], x[2]};
        xp[d] += h;
        xm[d] -= h;
        double phi_p, phi_m, unused[3];
        field_of(p, G, xp, phi_p, unused);
        field_of(p, G, xm, phi_m, unused);
        double const gradient = (phi_p - phi_m) / (2 * h);
        EXPECT_NEAR(a[d], -gradient, 1e-6 * scale + 1e-12)
            << name << " at (" << x[0] << ", " << x[1] << ", " << x[2] << ") component " << d;
      }
    }
  }
}

/// v_c² = r dφ/dr = r |a_r| in the plane z = 0 through the centre (origin-centred models).
double circular_velocity2(ExternalPotential const& p, double G, double r) {
  double phi, a[3];
  kfmm::external_field(p, G, r, 0, 0, phi, a);
  return -r * a[0];
}

TEST(ExternalPotential, CircularVelocitiesMatchTheEnclosedMasses) {
  double const G = 0.8;
  for (double r : {0.01, 0.3, 1.0, 2.5, 40.0}) {
    double const M = 2.0;
    // Spherical models: v_c² = G M(<r)/r.
    double const b = 0.7;
    EXPECT_NEAR(circular_velocity2(kfmm::plummer_potential(M, b), G, r),
                G * M * r * r * r / std::pow(r * r + b * b, 1.5) / r, 1e-13 * G * M / b);
    double const a = 0.4;
    EXPECT_NEAR(circular_velocity2(kfmm::hernquist_potential(M, a), G, r), G * M * r * r / ((r + a) * (r + a)) / r,
                1e-13 * G * M / a);
    EXPECT_NEAR(circular_velocity2(kfmm::point_mass_potential(M), G, r), G * M / r, 1e-13 * G * M / r);
    double const rho = 0.3, rs = 1.5, x = r / rs;
    double const m_nfw = 4 * nfw_pi * rho * rs * rs * rs * (std::log(1 + x) - x / (1 + x));
    EXPECT_NEAR(circular_velocity2(kfmm::nfw_potential(rho, rs), G, r), G * m_nfw / r,
                1e-10 * G * m_nfw / r + 1e-15);
    // Miyamoto–Nagai in its plane: v_c² = G M R²/(R² + (a + b)²)^{3/2}.
    double const am = 1.1, bm = 0.3;
    EXPECT_NEAR(circular_velocity2(kfmm::miyamoto_nagai_potential(M, am, bm), G, r),
                G * M * r * r / std::pow(r * r + (am + bm) * (am + bm), 1.5), 1e-13 * G * M);
    // Logarithmic: v_c² = v0² R²/(r_c² + R²), flat at v0 far out.
    double const v0 = 1.2, rc = 0.5;
    EXPECT_NEAR(circular_velocity2(kfmm::logarithmic_potential(v0, rc, 0.8), G, r), v0 * v0 * r * r / (rc * rc + r * r),
                1e-13 * v0 * v0);
  }
  // The NFW built from M_200 holds M_200 inside r_200.
  double const m200 = 10, c = 8, r200 = 5;
  EXPECT_NEAR(circular_velocity2(kfmm::nfw_potential_m200(m200, c, r200), G, r200) * r200 / G, m200, 1e-12 * m200);
}

TEST(ExternalPotential, NfwCentreIsFiniteAndSmooth) {
  auto const p = kfmm::nfw_potential(0.3, 1.5);
  double phi0, a0[3];
  kfmm::external_field(p, 1.0, 0, 0, 0, phi0, a0);
  EXPECT_NEAR(phi0, -4 * nfw_pi * 0.3 * 1.5 * 1.5, 1e-14);
  EXPECT_EQ(a0[0], 0);
  // Across the switch between the series and the closed form (r/r_s = 1e-2).
  double phi_in, phi_out, a_in[3], a_out[3];
  kfmm::external_field(p, 1.0, 0.015 * (1 - 1e-14), 0, 0, phi_in, a_in);
  kfmm::external_field(p, 1.0, 0.015 * (1 + 1e-14), 0, 0, phi_out, a_out);
  EXPECT_NEAR(phi_in, phi_out, 1e-12 * std::fabs(phi_in));
  EXPECT_NEAR(a_in[0], a_out[0], 1e-8 * std::fabs(a_in[0]));
}

TEST(ExternalPotential, MilkyWay2014HasTheNormalisationOfBovy2015) {
  auto const units = kfmm::UnitSystem::astro(1.0, 1.0, 1e10);
  kfmm::ExternalField mw;
  mw.potentials = kfmm::milky_way_2014(units);
  ASSERT_EQ(mw.potentials.size(), 3u);
  mw.validate();
  double vc2 = 0;
  std::vector<double> share;
  for (auto const& p : mw.potentials) {
    share.push_back(circular_velocity2(p, units.G, 8.0));
    vc2 += share.back();
  }
  EXPECT_NEAR(std::sqrt(vc2), 220.0, 1e-9);
  EXPECT_NEAR(share[0] / vc2, 0.05, 1e-12);  // bulge
  EXPECT_NEAR(share[1] / vc2, 0.60, 1e-12);  // disk
  EXPECT_NEAR(share[2] / vc2, 0.35, 1e-12);  // halo
  // Bovy's disk mass, 6.8e10 Msun, and a bulge near his 5e9 Msun.
  EXPECT_NEAR(mw.potentials[1].param[0] * 1e10, 6.82e10, 0.01e10);
  EXPECT_NEAR(mw.potentials[0].param[0] * 1e10, 5.08e9, 0.01e9);
  EXPECT_THROW(kfmm::milky_way_2014(kfmm::UnitSystem::plain()), kfmm::Error);
}

TEST(ExternalPotential, BadParametersNameTheValueAndTheLimit) {
  auto expect_error = [](ExternalPotential const& p, char const* needle) {
    try {
      p.validate("test");
      ADD_FAILURE() << "no error for " << needle;
    } catch (kfmm::Error const& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(kfmm::hernquist_potential(-1, 1), "mass = -1 must be finite and > 0");
  expect_error(kfmm::plummer_potential(1, 0), "b = 0 must be finite and > 0");
  expect_error(kfmm::logarithmic_potential(1, 1, 0), "q = 0 must be finite and > 0");
  expect_error(kfmm::logarithmic_potential(1, 1, -2), "q = -2");
  expect_error(kfmm::nfw_potential(1, 0), "scale_radius = 0");
  expect_error(kfmm::point_mass_potential(1, -0.1), "softening = -0.1 must be finite and ≥ 0");
  expect_error(kfmm::miyamoto_nagai_potential(1, 1, 0), "b = 0");
  auto nan_centre = kfmm::hernquist_potential(1, 1);
  nan_centre.centre[1] = std::nan("");
  expect_error(nan_centre, "centre component y = nan");
  auto integrated_nfw = kfmm::nfw_potential(1, 1);
  integrated_nfw.motion = kfmm::CentreMotion::Integrated;
  expect_error(integrated_nfw, "needs a finite mass");
  EXPECT_THROW(kfmm::parse_external_kind("isochrone"), kfmm::Error);
  EXPECT_EQ(kfmm::parse_external_kind("miyamoto_nagai"), kfmm::ExternalKind::MiyamotoNagai);
}

TEST(ExternalField, DeviceApplyEqualsHostEvaluationAndMovesCentresOnLines) {
  kfmm::Context context;
  kfmm::ExternalField field;
  for (auto const& [name, p] : all_kinds()) field.potentials.push_back(p);
  field.potentials[2].motion = kfmm::CentreMotion::Linear;  // hernquist moves along (1, 2, 0) from t0 = 0.5
  field.potentials[2].velocity[0] = 1;
  field.potentials[2].velocity[1] = 2;
  field.potentials[2].t0 = 0.5;
  field.validate();
  std::size_t const n = 100;
  kfmm::Particles<kfmm::HostSpace> host(n);
  host.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    host.mass(i) = 1;
    host.id(i) = i + 1;
    for (int d = 0; d < 3; ++d) host.pos(i, d) = std::sin(1.3 * i + 2.1 * d) * (1 + 0.1 * i);
  }
  auto particles = kfmm::to_device(host);
  kfmm::ScalarView<double> external;
  kfmm::Vec3View<double> acceleration("acceleration", n);
  Kokkos::deep_copy(acceleration, 1.0);  // apply() adds
  std::vector<kfmm::CentreState> centres;
  double const time = 2.0, G = 1.3;
  field.apply(context, time, G, centres, particles, external, acceleration);
  auto const phi = Kokkos::create_mirror_view_and_copy(kfmm::HostSpace(), external);
  auto const a = Kokkos::create_mirror_view_and_copy(kfmm::HostSpace(), acceleration);
  auto const centre = field.potentials[2].centre_at(time);
  EXPECT_DOUBLE_EQ(centre[0], 0.3 + 1.5);
  EXPECT_DOUBLE_EQ(centre[1], -0.2 + 3.0);
  for (std::size_t i = 0; i < n; ++i) {
    double host_phi;
    std::array<double, 3> host_a;
    field.evaluate({host.pos(i, 0), host.pos(i, 1), host.pos(i, 2)}, time, G, centres, host_phi, host_a);
    EXPECT_NEAR(phi(i), host_phi, 1e-13 * std::fabs(host_phi));
    for (int d = 0; d < 3; ++d) EXPECT_NEAR(a(i, d), 1.0 + host_a[d], 1e-12 * (1 + std::fabs(host_a[d])));
  }
}

}  // namespace
