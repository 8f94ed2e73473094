// Hierarchical time steps stopped in the middle of a block (some particles mid-step) and continued
// from the restart end bit-identical to an uninterrupted run, in an external field with an
// integrated centre; a restart of another step mode or with rungs beyond max_rungs is refused.
#include <kfmm/comm/initial_conditions.hpp>
#include <kfmm/core/error.hpp>
#include <kfmm/integrate/active_forces.hpp>
#include <kfmm/io/restart.hpp>

#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <map>

namespace {

using kfmm::SimulationEvent;
using kfmm::SimulationState;

struct BlockOutput {
  kfmm::Particles<kfmm::HostSpace> particles;
  std::vector<kfmm::CentreState> centres;
  kfmm::Diagnostics diagnostics;
};

kfmm::Observer record_block_outputs(std::map<int, BlockOutput>& outputs) {
  return [&outputs](SimulationEvent event, SimulationState const& state) {
    if (event == SimulationEvent::Output)
      outputs[state.output_number()] = {kfmm::to_host(state.particles), state.centres, state.diagnostics};
  };
}

kfmm::SimulationConfig block_config() {
  kfmm::SimulationConfig config;
  config.integrator = kfmm::IntegratorKind::KDK;
  config.fmm.softening_length = 0.05;
  config.schedule.mode = kfmm::StepMode::Hierarchical;
  config.schedule.output_times = {0.1, 0.2, 0.3};
  config.schedule.dt_max = 0.05;
  config.schedule.eta = 0.005;  // several rungs in a Plummer sphere with a satellite
  config.schedule.max_rungs = 8;
  auto satellite = kfmm::plummer_potential(0.5, 0.2);
  satellite.motion = kfmm::CentreMotion::Integrated;
  satellite.centre[0] = 1.5;
  satellite.velocity[1] = 1.0;
  config.external.potentials = {kfmm::hernquist_potential(5, 1), satellite};
  config.centres.cadence = kfmm::CentreCadence::Output;
  config.centres.min_particles = 20;
  return config;
}

TEST(RestartBlocks, StoppedInTheMiddleOfABlockContinuesBitForBit) {
  kfmm::Context context;
  long long pid = getpid();
  MPI_Bcast(&pid, 1, MPI_LONG_LONG, 0, context.comm());
  std::string const directory =
      (std::filesystem::temp_directory_path() / ("kfmm_restart_blocks_" + std::to_string(pid))).string();
  std::string const restart_path = directory + "/restart";
  kfmm::ICOptions ic;
  ic.kind = kfmm::ICKind::Plummer;
  ic.n_total = 300;
  auto const initial = kfmm::make_initial_conditions(context, ic);
  auto const config = block_config();
  auto const forces = kfmm::direct_active_forces(context, kfmm::SofteningKind::Plummer, 0.05, 1.0);

  std::map<int, BlockOutput> uninterrupted, first_part, second_part;
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
  ASSERT_EQ(kfmm::simulate(context, state, config, {}, kfmm::combine({record_block_outputs(uninterrupted), find_stop}),
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
                           kfmm::combine({record_block_outputs(first_part), stop,
                                          kfmm::restart_observer(context, restart_path, config, 0)}),
                           forces),
            kfmm::SimulationStatus::Stopped);
  EXPECT_FALSE(first.synchronised());
  auto resumed = kfmm::read_restart(context, restart_path, config);
  EXPECT_EQ(resumed.step, stop_step);
  EXPECT_EQ(resumed.block_tick, first.block_tick);
  EXPECT_EQ(resumed.block.force_calls, first.block.force_calls);
  EXPECT_EQ(resumed.block.steps_per_rung, first.block.steps_per_rung);
  ASSERT_EQ(kfmm::simulate(context, resumed, config, {}, record_block_outputs(second_part), forces),
            kfmm::SimulationStatus::Finished);
  EXPECT_EQ(resumed.step, state.step);
  for (int k : {2, 3}) {
    SCOPED_TRACE(k);
    auto const& a = second_part.at(k);
    auto const& b = uninterrupted.at(k);
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
    EXPECT_EQ(a.diagnostics.centre_potential_minimum, b.diagnostics.centre_potential_minimum);
  }

  // Another step mode, or fewer rungs than the restart's, is refused.
  auto global = config;
  global.schedule.mode = kfmm::StepMode::PerOutput;
  try {
    kfmm::read_restart(context, restart_path, global);
    ADD_FAILURE() << "no error";
  } catch (kfmm::Error const& e) {
    EXPECT_NE(std::string(e.what()).find("was written with hierarchical time steps"), std::string::npos) << e.what();
  }
  auto shallow = config;
  shallow.schedule.max_rungs = 1;
  EXPECT_THROW(kfmm::read_restart(context, restart_path, shallow), kfmm::Error);
  MPI_Barrier(context.comm());
  if (context.is_root()) std::filesystem::remove_all(directory);
}

}  // namespace
