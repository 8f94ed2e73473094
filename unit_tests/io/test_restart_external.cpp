// A run in an external field with an integrated and a moving centre, stopped by SIGTERM and
// continued from its restart, ends bit-identical to an uninterrupted run (particles, centres,
// diagnostics and centres found).
#include <kfmm/comm/initial_conditions.hpp>
#include <kfmm/core/error.hpp>
#include <kfmm/integrate/forces.hpp>
#include <kfmm/io/restart.hpp>

#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <map>

namespace {

using kfmm::SimulationEvent;
using kfmm::SimulationState;

/// What a run has at one output.
struct ExternalOutput {
  kfmm::Particles<kfmm::HostSpace> particles;
  std::vector<kfmm::CentreState> centres;
  kfmm::Diagnostics diagnostics;
};

kfmm::Observer record_external_outputs(std::map<int, ExternalOutput>& outputs) {
  return [&outputs](SimulationEvent event, SimulationState const& state) {
    if (event == SimulationEvent::Output)
      outputs[state.output_number()] = {kfmm::to_host(state.particles), state.centres, state.diagnostics};
  };
}

kfmm::SimulationConfig external_config(kfmm::IntegratorKind integrator) {
  kfmm::SimulationConfig config;
  config.integrator = integrator;
  config.schedule.output_times = {0.1, 0.2, 0.3};
  config.schedule.steps_per_output = 5;
  auto host = kfmm::hernquist_potential(5, 1);
  auto satellite = kfmm::plummer_potential(0.5, 0.2);
  satellite.motion = kfmm::CentreMotion::Integrated;
  satellite.centre[0] = 1.5;
  satellite.velocity[1] = 1.0;
  auto passer = kfmm::point_mass_potential(0.1, 0.1);
  passer.motion = kfmm::CentreMotion::Linear;
  passer.centre[1] = -3;
  passer.velocity[1] = 5;
  config.external.potentials = {host, satellite, passer};
  config.centres.cadence = kfmm::CentreCadence::Step;
  config.centres.min_particles = 20;
  return config;
}

class RestartExternal : public testing::TestWithParam<kfmm::IntegratorKind> {};

TEST_P(RestartExternal, StoppedAndContinuedRunEqualsUninterruptedRun) {
  kfmm::Context context;
  long long pid = getpid();
  MPI_Bcast(&pid, 1, MPI_LONG_LONG, 0, context.comm());
  std::string const directory =
      (std::filesystem::temp_directory_path() / ("kfmm_restart_external_" + std::to_string(pid))).string();
  std::string const restart_path = directory + "/restart";
  kfmm::ICOptions ic;
  ic.kind = kfmm::ICKind::Plummer;
  ic.n_total = 300;
  auto const initial = kfmm::make_initial_conditions(context, ic);
  auto const config = external_config(GetParam());
  auto const forces = kfmm::direct_forces(context, kfmm::SofteningKind::Plummer, 0.05, 1.0);

  std::map<int, ExternalOutput> uninterrupted, first_part, second_part;
  auto particles = kfmm::to_device(initial);
  ASSERT_EQ(kfmm::simulate(context, particles, config, forces, record_external_outputs(uninterrupted)),
            kfmm::SimulationStatus::Finished);
  ASSERT_EQ(uninterrupted.size(), 4u);

  auto const stop_at_step_7 = [&](SimulationEvent event, SimulationState const& state) {
    if (event == SimulationEvent::Step && state.step == 7 && context.is_root()) std::raise(SIGTERM);
  };
  particles = kfmm::to_device(initial);
  ASSERT_EQ(kfmm::simulate(context, particles, config, forces,
                           kfmm::combine({record_external_outputs(first_part), stop_at_step_7,
                                          kfmm::restart_observer(context, restart_path, config, 0)})),
            kfmm::SimulationStatus::Stopped);
  auto state = kfmm::read_restart(context, restart_path, config);
  ASSERT_EQ(state.centres.size(), 1u);
  ASSERT_EQ(kfmm::simulate(context, state, config, forces, record_external_outputs(second_part)),
            kfmm::SimulationStatus::Finished);
  for (int k : {2, 3}) {
    SCOPED_TRACE(k);
    auto const& a = second_part.at(k);
    auto const& b = uninterrupted.at(k);
    ASSERT_EQ(a.particles.num, b.particles.num);
    std::size_t differ = 0;
    for (std::size_t i = 0; i < a.particles.num; ++i)
      for (int d = 0; d < 3; ++d)
        differ += a.particles.pos(i, d) != b.particles.pos(i, d) || a.particles.vel(i, d) != b.particles.vel(i, d);
    EXPECT_EQ(differ, 0u);
    EXPECT_EQ(a.centres[0].position, b.centres[0].position);
    EXPECT_EQ(a.centres[0].velocity, b.centres[0].velocity);
    EXPECT_EQ(a.diagnostics.total, b.diagnostics.total);
    EXPECT_EQ(a.diagnostics.external, b.diagnostics.external);
    EXPECT_EQ(a.diagnostics.centres, b.diagnostics.centres);
    EXPECT_TRUE(a.diagnostics.has_centres);
    EXPECT_EQ(a.diagnostics.centre_shrinking_spheres, b.diagnostics.centre_shrinking_spheres);
    EXPECT_EQ(a.diagnostics.centre_potential_minimum, b.diagnostics.centre_potential_minimum);
  }
  // The satellite moved, and the field counts in the energy.
  EXPECT_GT(std::fabs(uninterrupted.at(3).centres[0].position[1]), 0.1);
  EXPECT_LT(uninterrupted.at(3).diagnostics.external, 0);

  // A restart without its centres' run file (no integrated centre configured) is refused.
  auto other = config;
  other.external.potentials.resize(1);
  EXPECT_THROW(kfmm::read_restart(context, restart_path, other), kfmm::Error);
  MPI_Barrier(context.comm());
  if (context.is_root()) std::filesystem::remove_all(directory);
}

INSTANTIATE_TEST_SUITE_P(Integrators, RestartExternal,
                         testing::Values(kfmm::IntegratorKind::DKD, kfmm::IntegratorKind::KDK),
                         [](auto const& info) { return kfmm::to_string(info.param); });

}  // namespace
