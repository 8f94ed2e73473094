// A run in an external field with an integrated and a moving centre, stopped by SIGTERM and
// continued from its restart, ends bit-identical to an uninterrupted run (particles, centres,
// diagnostics and centres found), with the global steps and with hierarchical steps stopped in
// the middle of a block.
#include <kfmm/comm/initial_conditions.hpp>
#include <kfmm/core/error.hpp>
#include <kfmm/integrate/active_forces.hpp>
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

/// Particles (ids, positions, velocities), the first integrated centre, energies and centres found: the same bits.
void expect_identical(ExternalOutput const& a, ExternalOutput const& b) {
  ASSERT_EQ(a.particles.num, b.particles.num);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < a.particles.num; ++i) {
    differ += a.particles.id(i) != b.particles.id(i);
    for (int d = 0; d < 3; ++d)
      differ += a.particles.pos(i, d) != b.particles.pos(i, d) || a.particles.vel(i, d) != b.particles.vel(i, d);
  }
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

/// The 300 Plummer particles of both runs.
kfmm::Particles<kfmm::HostSpace> plummer_sphere(kfmm::Context const& context) {
  kfmm::ICOptions ic;
  ic.kind = kfmm::ICKind::Plummer;
  ic.n_total = 300;
  return kfmm::make_initial_conditions(context, ic);
}

/// A directory name that every rank agrees on.
std::string shared_directory(kfmm::Context const& context, std::string const& prefix) {
  long long pid = getpid();
  MPI_Bcast(&pid, 1, MPI_LONG_LONG, 0, context.comm());
  return (std::filesystem::temp_directory_path() / (prefix + std::to_string(pid))).string();
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
  std::string const directory = shared_directory(context, "kfmm_restart_external_");
  std::string const restart_path = directory + "/restart";
  auto const initial = plummer_sphere(context);
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
    expect_identical(second_part.at(k), uninterrupted.at(k));
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

// Hierarchical time steps stopped in the middle of a block (some particles mid-step) and continued
// from the restart: bit-identical to an uninterrupted run; a restart of another step mode, or with
// another max_rungs or block length inside a block, is refused.
/// The external run with hierarchical steps: several rungs (the satellite and the centre).
kfmm::SimulationConfig block_config() {
  auto config = external_config(kfmm::IntegratorKind::KDK);
  config.fmm.softening_length = 0.05;
  config.schedule.mode = kfmm::StepMode::Hierarchical;
  config.schedule.dt_max = 0.05;
  config.schedule.eta = 0.005;
  config.schedule.max_rungs = 8;
  return config;
}

TEST(RestartBlocks, StoppedInTheMiddleOfABlockContinuesBitForBit) {
  kfmm::Context context;
  std::string const directory = shared_directory(context, "kfmm_restart_blocks_");
  std::string const restart_path = directory + "/restart";
  auto const initial = plummer_sphere(context);
  auto const config = block_config();
  auto const forces = kfmm::direct_active_forces(context, kfmm::SofteningKind::Plummer, 0.05, 1.0);

  std::map<int, ExternalOutput> uninterrupted, first_part, second_part;
  SimulationState state;
  state.particles = kfmm::to_device(initial);
  long long stop_step = -1, sub_steps = 0;
  int deepest = 0;
  auto const find_stop = [&](SimulationEvent event, SimulationState const& s) {
    if (event != SimulationEvent::Step) return;
    ++sub_steps;
    // The first sub-step in the second interval that leaves particles mid-step.
    if (stop_step < 0 && s.next_output == 1 && !s.synchronised()) stop_step = s.step;
    for (std::size_t r = 0; r < s.last_block.steps_per_rung.size(); ++r)
      if (s.last_block.steps_per_rung[r] > 0) deepest = std::max(deepest, static_cast<int>(r));
  };
  ASSERT_EQ(kfmm::simulate(context, state, config, {}, kfmm::combine({record_external_outputs(uninterrupted), find_stop}),
                           forces),
            kfmm::SimulationStatus::Finished);
  ASSERT_EQ(uninterrupted.size(), 4u);
  ASSERT_GT(stop_step, 0) << "no sub-step ended inside a block";
  EXPECT_GE(deepest, 2) << "the run should use several rungs";
  if (context.is_root()) std::printf("%lld sub-steps, deepest rung %d, stop at sub-step %lld\n", sub_steps, deepest, stop_step);

  auto const stop = [&](SimulationEvent event, SimulationState const& s) {
    if (event == SimulationEvent::Step && s.step == stop_step && context.is_root()) std::raise(SIGTERM);
  };
  SimulationState first;
  first.particles = kfmm::to_device(initial);
  ASSERT_EQ(kfmm::simulate(context, first, config, {},
                           kfmm::combine({record_external_outputs(first_part), stop,
                                          kfmm::restart_observer(context, restart_path, config, 0)}),
                           forces),
            kfmm::SimulationStatus::Stopped);
  EXPECT_FALSE(first.synchronised());
  auto resumed = kfmm::read_restart(context, restart_path, config);
  EXPECT_EQ(resumed.step, stop_step);
  EXPECT_EQ(resumed.block_tick, first.block_tick);
  EXPECT_EQ(resumed.block.force_calls, first.block.force_calls);
  EXPECT_EQ(resumed.block.steps_per_rung, first.block.steps_per_rung);
  ASSERT_EQ(kfmm::simulate(context, resumed, config, {}, record_external_outputs(second_part), forces),
            kfmm::SimulationStatus::Finished);
  EXPECT_EQ(resumed.step, state.step);
  for (int k : {2, 3}) {
    SCOPED_TRACE(k);
    expect_identical(second_part.at(k), uninterrupted.at(k));
  }

  // Another step mode, or another block (rungs or length) in the middle of a block, is refused.
  auto global = config;
  global.schedule.mode = kfmm::StepMode::PerOutput;
  try {
    kfmm::read_restart(context, restart_path, global);
    ADD_FAILURE() << "no error";
  } catch (kfmm::Error const& e) {
    EXPECT_NE(std::string(e.what()).find("was written with hierarchical time steps"), std::string::npos) << e.what();
  }
  auto deeper = config;
  deeper.schedule.max_rungs = 9;
  try {
    kfmm::read_restart(context, restart_path, deeper);
    ADD_FAILURE() << "no error";
  } catch (kfmm::Error const& e) {
    EXPECT_NE(std::string(e.what()).find("stopped inside a block of length 0.05 with time.max_rungs = 8, but the run "
                                         "file gives 0.05 and 9"),
              std::string::npos)
        << e.what();
  }
  auto longer = config;
  longer.schedule.dt_max = 0.1;
  EXPECT_THROW(kfmm::read_restart(context, restart_path, longer), kfmm::Error);
  MPI_Barrier(context.comm());
  if (context.is_root()) std::filesystem::remove_all(directory);
}

}  // namespace
