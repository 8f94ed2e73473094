// Orbits in external potentials with the global-step leapfrogs: a Kepler orbit around a point
// mass, the same orbit around a centre moving on a line, a binary of two integrated centres, and
// the particles' pull on an integrated centre (momentum and energy conservation).
#include <kfmm/integrate/simulation.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace {

using kfmm::IntegratorKind;
using kfmm::SimulationEvent;
using kfmm::SimulationState;

constexpr double orbit_pi = 3.141592653589793;

/// Particles given on every rank; rank 0 keeps them all (direct forces keep order and rank).
kfmm::Particles<kfmm::MemorySpace> on_root(kfmm::Context const& context, std::vector<std::array<double, 7>> const& list) {
  kfmm::Particles<kfmm::HostSpace> host(list.size());
  host.resize(context.is_root() ? list.size() : 0);
  host.num_total = list.size();
  for (std::size_t i = 0; i < host.num; ++i) {
    for (int d = 0; d < 3; ++d) {
      host.pos(i, d) = list[i][d];
      host.vel(i, d) = list[i][3 + d];
    }
    host.mass(i) = list[i][6];
    host.id(i) = i + 1;
  }
  return kfmm::to_device(host);
}

std::array<double, 3> root_position(kfmm::Context const& context, kfmm::Particles<kfmm::MemorySpace> const& particles,
                                    std::size_t i) {
  std::array<double, 3> x{};
  if (context.is_root()) {
    auto const host = kfmm::to_host(particles);
    for (int d = 0; d < 3; ++d) x[d] = host.pos(i, d);
  }
  MPI_Bcast(x.data(), 3, MPI_DOUBLE, 0, context.comm());
  return x;
}

struct OrbitRun {
  double max_energy_error = 0;
  SimulationState state;
};

OrbitRun run_in_field(kfmm::Context const& context, kfmm::Particles<kfmm::MemorySpace> particles, kfmm::SimulationConfig config,
        std::vector<double> outputs, long long steps_per_output, double softening = 0.0,
        std::function<void(SimulationState const&)> on_output = {}) {
  config.schedule.output_times = outputs;
  config.schedule.steps_per_output = steps_per_output;
  OrbitRun result;
  result.state.particles = particles;
  auto const observer = [&](SimulationEvent event, SimulationState const& state) {
    if (event == SimulationEvent::Step)
      result.max_energy_error = std::max(result.max_energy_error, std::fabs(state.diagnostics.energy_error));
    if (event == SimulationEvent::Output && on_output) on_output(state);
  };
  auto const forces = kfmm::direct_forces(context, kfmm::SofteningKind::Plummer, softening, config.fmm.G);
  EXPECT_EQ(kfmm::simulate(context, result.state, config, forces, observer), kfmm::SimulationStatus::Finished);
  return result;
}

class ExternalKepler : public testing::TestWithParam<IntegratorKind> {};

// A test particle around a point mass (GM = 1, a = 1, e = 0.5, period 2π), from pericentre:
// apocentre after half a period, back at pericentre after one; energy conserved to O(dt²).
TEST_P(ExternalKepler, OrbitAroundAPointMassHasItsPeriodAndEnergy) {
  kfmm::Context context;
  double const e = 0.5, rp = 1 - e, vp = std::sqrt((1 + e) / (1 - e));
  kfmm::SimulationConfig config;
  config.integrator = GetParam();
  config.external.potentials = {kfmm::point_mass_potential(1.0)};
  config.centres.cadence = kfmm::CentreCadence::None;
  std::vector<std::array<double, 3>> at_outputs;
  auto const particles = on_root(context, {{rp, 0, 0, 0, vp, 0, 1e-3}});
  auto const result = run_in_field(context, particles, config, {orbit_pi, 2 * orbit_pi}, 1000, 0.0, [&](SimulationState const& state) {
    at_outputs.push_back(root_position(context, state.particles, 0));
  });
  ASSERT_EQ(at_outputs.size(), 3u);  // start, half period, period
  EXPECT_NEAR(at_outputs[1][0], -(1 + e), 2e-3) << "apocentre after half a period";
  EXPECT_NEAR(std::fabs(at_outputs[1][1]), 0, 2e-3);
  EXPECT_NEAR(at_outputs[2][0], rp, 2e-3) << "pericentre after one period";
  EXPECT_NEAR(at_outputs[2][1], 0, 5e-3);
  EXPECT_LE(result.max_energy_error, 1e-3);
  EXPECT_LE(std::fabs(result.state.diagnostics.energy_error), 1e-5);
  // The energy is the particle's in the field: ½ v² − GM/r, a = −1/(2E) = 1.
  EXPECT_NEAR(result.state.initial_energy / 1e-3, -0.5, 1e-12);
}

// The same orbit around a point mass that moves on a line: the same orbit in its frame.
TEST_P(ExternalKepler, OrbitAroundAMovingCentreIsTheSameInItsFrame) {
  kfmm::Context context;
  double const e = 0.5, rp = 1 - e, vp = std::sqrt((1 + e) / (1 - e));
  double const V[3] = {0.7, -0.3, 0.2};
  kfmm::SimulationConfig config;
  config.integrator = GetParam();
  auto moving = kfmm::point_mass_potential(1.0);
  moving.motion = kfmm::CentreMotion::Linear;
  moving.centre[0] = 5;  // at t0 = 1 (before the start at 0: centre(0) = (5, 0, 0) − V)
  moving.t0 = 1;
  for (int d = 0; d < 3; ++d) moving.velocity[d] = V[d];
  config.external.potentials = {moving};
  auto const c0 = moving.centre_at(0.0);
  auto const particles =
      on_root(context, {{c0[0] + rp, c0[1], c0[2], V[0], V[1] + vp, V[2], 1e-3}});
  auto const result = run_in_field(context, particles, config, {2 * orbit_pi}, 1000);
  auto const x = root_position(context, result.state.particles, 0);
  auto const c = moving.centre_at(2 * orbit_pi);
  EXPECT_NEAR(x[0] - c[0], rp, 2e-3);
  EXPECT_NEAR(x[1] - c[1], 0, 5e-3);
  EXPECT_NEAR(x[2] - c[2], 0, 1e-12);
}

// Two integrated point masses (½ each) on a circular binary of separation 1: period 2π, and
// the pair's energy and momentum kept; a far, light particle is the only N-body particle.
TEST_P(ExternalKepler, TwoIntegratedCentresOrbitEachOther) {
  kfmm::Context context;
  kfmm::SimulationConfig config;
  config.integrator = GetParam();
  auto a = kfmm::point_mass_potential(0.5), b = kfmm::point_mass_potential(0.5);
  a.motion = b.motion = kfmm::CentreMotion::Integrated;
  a.centre[0] = 0.5;
  b.centre[0] = -0.5;
  a.velocity[1] = 0.5;  // v² = G M_other / (2 · separation) for each: ½ · ½ ... circular speed ½
  b.velocity[1] = -0.5;
  config.external.potentials = {a, b};
  auto const particles = on_root(context, {{1e3, 0, 0, 0, 0, 0, 1e-12}});
  auto const result = run_in_field(context, particles, config, {2 * orbit_pi}, 2000);
  auto const& centres = result.state.centres;
  ASSERT_EQ(centres.size(), 2u);
  EXPECT_NEAR(centres[0].position[0], 0.5, 2e-3);
  EXPECT_NEAR(centres[0].position[1], 0.0, 5e-3);
  for (int d = 0; d < 3; ++d) {
    EXPECT_NEAR(centres[0].position[d] + centres[1].position[d], 0, 1e-12) << "centre of mass moved";
    EXPECT_NEAR(centres[0].velocity[d] + centres[1].velocity[d], 0, 1e-12) << "momentum changed";
  }
  // E = ½·½·¼·2 − ½·½/1 = −1/8, kept to the leapfrog's accuracy.
  EXPECT_NEAR(result.state.initial_energy, -0.125, 1e-9);
  EXPECT_LE(result.max_energy_error, 1e-4);
}

// A Plummer sphere of particles and a massive integrated Hernquist perturber flying through it:
// the particles pull on it, so the total momentum (particles + centre) and energy are kept.
TEST_P(ExternalKepler, ParticlesPullOnAnIntegratedCentre) {
  kfmm::Context context;
  std::vector<std::array<double, 7>> list;
  for (int i = 0; i < 64; ++i) {
    double const u = (i + 0.5) / 64;
    double const r = 0.3 + 1.5 * u;
    double const phi = 2.399963 * i, z = 1 - 2 * u;
    double const s = std::sqrt(1 - z * z);
    list.push_back({r * s * std::cos(phi), r * s * std::sin(phi), r * z, -0.1 * std::sin(phi), 0.1 * std::cos(phi), 0,
                    1.0 / 64});
  }
  kfmm::SimulationConfig config;
  config.integrator = GetParam();
  auto perturber = kfmm::hernquist_potential(0.5, 0.3);
  perturber.motion = kfmm::CentreMotion::Integrated;
  perturber.centre[0] = -3;
  perturber.centre[1] = 0.4;
  perturber.velocity[0] = 1.2;
  config.external.potentials = {perturber};
  config.centres.cadence = kfmm::CentreCadence::None;
  std::vector<std::array<double, 3>> momentum;  // particles + centre at each output
  auto const result = run_in_field(context, on_root(context, list), config, {2.5, 5.0}, 1000, 0.05, [&](SimulationState const& s) {
    std::array<double, 3> p;
    for (int k = 0; k < 3; ++k) p[k] = s.diagnostics.momentum[k] + 0.5 * s.centres.at(0).velocity[k];
    momentum.push_back(p);
  });
  auto const& state = result.state;
  auto const& d = state.diagnostics;
  auto const& centre = state.centres.at(0);
  ASSERT_EQ(momentum.size(), 3u);
  for (std::size_t output = 1; output < 3; ++output)
    for (int k = 0; k < 3; ++k) EXPECT_NEAR(momentum[output][k], momentum[0][k], 1e-13) << output << " " << k;
  EXPECT_GT(std::fabs(centre.velocity[0] - 1.2), 1e-3) << "the particles did not slow the perturber";
  EXPECT_LE(result.max_energy_error, 1e-3);
  EXPECT_NE(d.centres, 0.0);
}

INSTANTIATE_TEST_SUITE_P(Leapfrogs, ExternalKepler, testing::Values(IntegratorKind::DKD, IntegratorKind::KDK),
                         [](auto const& info) { return kfmm::to_string(info.param); });

}  // namespace
