// Integrators on systems with known answers: a Kepler orbit (energy, closure, second order),
// exact reversibility of the lattice DKD, momentum conservation.
#include <kfmm/comm/initial_conditions.hpp>
#include <kfmm/integrate/simulation.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace {

using kfmm::IntegratorKind;
using kfmm::SimulationEvent;
using kfmm::SimulationState;

constexpr double pi = 3.141592653589793;

/// Two bodies of mass ½ on a Kepler orbit with a = 1, e = 0.5 (period 2π), at pericentre,
/// all on rank 0 (the other ranks hold none).
kfmm::Particles<kfmm::MemorySpace> kepler_pair(kfmm::Context const& context) {
  kfmm::Particles<kfmm::HostSpace> host(2);
  host.resize(context.is_root() ? 2 : 0);
  host.num_total = 2;
  double const e = 0.5, separation = 1 - e, speed = std::sqrt((1 + e) / (1 - e));
  for (std::size_t i = 0; i < host.num; ++i) {
    double const sign = i == 0 ? 1 : -1;
    host.pos(i, 0) = sign * separation / 2;
    host.pos(i, 1) = host.pos(i, 2) = 0;
    host.vel(i, 1) = sign * speed / 2;
    host.vel(i, 0) = host.vel(i, 2) = 0;
    host.mass(i) = 0.5;
    host.id(i) = i + 1;
  }
  return kfmm::to_device(host);
}

struct OrbitResult {
  double final_energy_error = 0;
  double max_energy_error = 0;
  double closure_error = 0;  ///< |Δ separation vector| after one period
};

OrbitResult run_orbit(IntegratorKind integrator, long long steps) {
  kfmm::Context context;
  auto particles = kepler_pair(context);
  auto const initial = kfmm::to_host(particles);
  kfmm::SimulationConfig config;
  config.integrator = integrator;
  config.schedule.output_times = {2 * pi};
  config.schedule.steps_per_output = steps;
  OrbitResult result;
  auto const observer = [&](SimulationEvent event, SimulationState const& state) {
    if (event == SimulationEvent::Step)
      result.max_energy_error = std::max(result.max_energy_error, std::fabs(state.diagnostics.energy_error));
    if (event == SimulationEvent::Finish) result.final_energy_error = state.diagnostics.energy_error;
  };
  auto const forces = kfmm::direct_forces(context, kfmm::SofteningKind::Plummer, 0.0, 1.0);
  EXPECT_EQ(kfmm::simulate(context, particles, config, forces, observer), kfmm::SimulationStatus::Finished);
  auto const final_state = kfmm::to_host(particles);
  if (context.is_root()) {
    double sum = 0;
    for (int d = 0; d < 3; ++d) {
      double const before = initial.pos(0, d) - initial.pos(1, d);
      double const after = final_state.pos(0, d) - final_state.pos(1, d);
      sum += (after - before) * (after - before);
    }
    result.closure_error = std::sqrt(sum);
  }
  MPI_Bcast(&result.closure_error, 1, MPI_DOUBLE, 0, context.comm());
  return result;
}

class KeplerOrbit : public testing::TestWithParam<IntegratorKind> {};

TEST_P(KeplerOrbit, ConservesEnergyClosesAndIsSecondOrder) {
  auto const fine = run_orbit(GetParam(), 1000);
  auto const coarse = run_orbit(GetParam(), 500);
  EXPECT_LE(std::fabs(fine.final_energy_error), 1e-5);
  EXPECT_LE(fine.max_energy_error, 1e-3);
  EXPECT_LE(fine.closure_error, 3e-3) << "the orbit does not close (phase error O(dt²))";
  // Second order: halving dt divides the errors by about 4.
  double const energy_ratio = coarse.max_energy_error / fine.max_energy_error;
  double const closure_ratio = coarse.closure_error / fine.closure_error;
  EXPECT_NEAR(energy_ratio, 4.0, 0.6);
  EXPECT_NEAR(closure_ratio, 4.0, 0.6);
  if (kfmm::Context().is_root())
    std::printf("%s: |dE/E| end %.3g, max %.3g; closure %.3g; ratios energy %.3f closure %.3f\n",
                kfmm::to_string(GetParam()).c_str(), fine.final_energy_error, fine.max_energy_error, fine.closure_error,
                energy_ratio, closure_ratio);
}

INSTANTIATE_TEST_SUITE_P(Leapfrogs, KeplerOrbit, testing::Values(IntegratorKind::DKD, IntegratorKind::KDK),
                         [](auto const& info) { return kfmm::to_string(info.param); });

kfmm::Particles<kfmm::MemorySpace> plummer(kfmm::Context const& context, std::uint64_t n) {
  kfmm::ICOptions options;
  options.kind = kfmm::ICKind::Plummer;
  options.n_total = n;
  options.seed = 7;
  return kfmm::to_device(kfmm::make_initial_conditions(context, options));
}

TEST(LatticeDKD, ForwardThenBackwardReturnsTheInitialStateBitForBit) {
  kfmm::Context context;
  auto particles = plummer(context, 600);
  kfmm::SimulationConfig config;
  config.integrator = IntegratorKind::LatticeDKD;
  config.lattice = {1e-6, 1e-6};
  config.schedule.output_times = {0.5};
  config.schedule.steps_per_output = 16;
  auto const forces = kfmm::direct_forces(context, kfmm::SofteningKind::Plummer, 0.05, 1.0);

  auto initial = kfmm::to_device(kfmm::to_host(particles));
  kfmm::quantize_to_lattice(initial, config.lattice);
  auto const expected = kfmm::to_host(initial);

  SimulationState state;
  state.particles = particles;
  ASSERT_EQ(kfmm::simulate(context, state, config, forces, nullptr), kfmm::SimulationStatus::Finished);
  auto const forward = kfmm::to_host(state.particles);

  // Back from t = 0.5 to 0 with the same 16 steps, negative dt.
  config.schedule.start_time = 0.5;
  config.schedule.output_times = {0.0};
  state.next_output = 0;
  state.step_in_interval = 0;
  ASSERT_EQ(kfmm::simulate(context, state, config, forces, nullptr), kfmm::SimulationStatus::Finished);
  auto const back = kfmm::to_host(state.particles);

  ASSERT_EQ(back.num, expected.num);
  std::size_t moved = 0, differ = 0;
  for (std::size_t i = 0; i < back.num; ++i)
    for (int d = 0; d < 3; ++d) {
      moved += forward.pos(i, d) != expected.pos(i, d);
      differ += back.pos(i, d) != expected.pos(i, d) || back.vel(i, d) != expected.vel(i, d);
    }
  EXPECT_GT(moved, back.num) << "the forward run did not move the particles";
  EXPECT_EQ(differ, 0u);
}

TEST(Integrators, ConserveMomentumToRoundOff) {
  kfmm::Context context;
  for (auto integrator : {IntegratorKind::DKD, IntegratorKind::KDK}) {
    auto particles = plummer(context, 300);
    kfmm::SimulationConfig config;
    config.integrator = integrator;
    config.schedule.output_times = {0.2};
    config.schedule.steps_per_output = 10;
    double largest = 0, initial_scale = 0;
    auto const observer = [&](SimulationEvent event, SimulationState const& state) {
      auto const& p = state.diagnostics.momentum;
      double const magnitude = std::sqrt(p[0] * p[0] + p[1] * p[1] + p[2] * p[2]);
      if (event == SimulationEvent::Start) initial_scale = std::sqrt(2 * state.diagnostics.kinetic);  // ~ Σ m|v|
      largest = std::max(largest, magnitude);
    };
    kfmm::simulate(context, particles, config, kfmm::direct_forces(context, kfmm::SofteningKind::Plummer, 0.05, 1.0),
                   observer);
    EXPECT_GT(initial_scale, 0.1);
    EXPECT_LE(largest, 1e-13 * initial_scale) << kfmm::to_string(integrator);
  }
}

}  // namespace
