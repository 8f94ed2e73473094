// The run-file keys of hierarchical time steps: read into the schedule, and their errors name the key.
#include "run_file_errors.hpp"

namespace {

using kfmm::test_support::expect_contains;
using kfmm::test_support::run_file_error_of;

TEST(RunFileBlocks, ReadsHierarchicalSteps) {
  auto const settings = kfmm::parse_run_text(
      "integrator: {kind: kdk}\n"
      "time: {step_mode: hierarchical, eta: 0.01, dt_max: 0.05, dt_min: 1.0e-6, max_rungs: 12, end: 1, outputs: 2}\n",
      "blocks.yaml");
  auto const& schedule = settings.simulation.schedule;
  EXPECT_EQ(schedule.mode, kfmm::StepMode::Hierarchical);
  EXPECT_EQ(schedule.eta, 0.01);
  EXPECT_EQ(schedule.dt_max, 0.05);
  EXPECT_EQ(schedule.dt_min, 1e-6);
  EXPECT_EQ(schedule.max_rungs, 12);
  EXPECT_EQ(schedule.blocks_in_interval(0), 10);
}

TEST(RunFileBlocks, BadSettingsNameTheKey) {
  expect_contains(run_file_error_of("integrator: {kind: kdk}\ntime: {step_mode: hierarchical}\n"),
                  {"missing required key 'time.dt_max'", "the block length"});
  expect_contains(run_file_error_of("integrator: {kind: kdk}\ntime: {step_mode: hierarchical, dt_max: 0.1, dt_min: 0.2}\n"),
                  {"time.dt_min", "0.2 is larger than time.dt_max = 0.1"});
  expect_contains(run_file_error_of("integrator: {kind: kdk}\ntime: {step_mode: hierarchical, dt_max: 0.1, max_rungs: 41}\n"),
                  {"time.max_rungs", "out of range [0, 40]"});
  expect_contains(run_file_error_of("integrator: {kind: kdk}\ntime: {step_mode: hierarchical, dt_max: 0.1, eta: 0}\n"),
                  {"time.eta", "out of range"});
  expect_contains(run_file_error_of("integrator: {kind: kdk}\ntime: {step_mode: hierarchical, dt_max: .inf}\n"),
                  {"finite block length dt_max"});
  expect_contains(run_file_error_of("time: {step_mode: hierarchical, dt_max: 0.1}\n"),
                  {"set the integrator to kdk (got dkd)"});
  expect_contains(run_file_error_of("integrator: {kind: kdk}\nforce: {softening_length: 0}\n"
                                    "time: {step_mode: hierarchical, dt_max: 0.1}\n"),
                  {"needs a softening length"});
}

}  // namespace
