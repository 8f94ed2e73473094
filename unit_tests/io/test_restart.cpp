// A run stopped by SIGTERM and continued from its restart gives outputs bit-identical to an
// uninterrupted run on the same ranks.
#include <kfmm/comm/initial_conditions.hpp>
#include <kfmm/core/error.hpp>
#include <kfmm/core/fault_injection.hpp>
#include <kfmm/integrate/forces.hpp>
#include <kfmm/io/restart.hpp>

#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <vector>

namespace {

using kfmm::SimulationEvent;
using kfmm::SimulationState;

/// A directory name that every rank agrees on, removed at the end.
class SharedTemporaryDirectory {
 public:
  explicit SharedTemporaryDirectory(kfmm::Context const& context) : context_(context) {
    long long pid = getpid();
    MPI_Bcast(&pid, 1, MPI_LONG_LONG, 0, context.comm());
    path_ = (std::filesystem::temp_directory_path() / ("kfmm_restart_test_" + std::to_string(pid))).string();
  }
  ~SharedTemporaryDirectory() {
    MPI_Barrier(context_.comm());
    if (context_.is_root()) std::filesystem::remove_all(path_);
  }
  std::string const& path() const { return path_; }

 private:
  kfmm::Context context_;
  std::string path_;
};

/// Host copies of the state at every output, by output number.
using Outputs = std::map<int, kfmm::Particles<kfmm::HostSpace>>;

kfmm::Observer record_outputs(Outputs& outputs) {
  return [&outputs](SimulationEvent event, SimulationState const& state) {
    if (event == SimulationEvent::Output) outputs[state.output_number()] = kfmm::to_host(state.particles);
  };
}

void expect_identical(kfmm::Particles<kfmm::HostSpace> const& a, kfmm::Particles<kfmm::HostSpace> const& b) {
  ASSERT_EQ(a.num, b.num);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < a.num; ++i) {
    differ += a.id(i) != b.id(i) || a.mass(i) != b.mass(i);
    for (int d = 0; d < 3; ++d) differ += a.pos(i, d) != b.pos(i, d) || a.vel(i, d) != b.vel(i, d);
  }
  EXPECT_EQ(differ, 0u);
}

class Restart : public testing::TestWithParam<kfmm::IntegratorKind> {};

/// Runs `config` with FMM forces from `initial`, writing restarts to `restart_path`, and stops
/// it by a SIGTERM on rank 0 only at `step`.
kfmm::SimulationStatus run_fmm_until_stopped(kfmm::Context const& context, kfmm::Particles<kfmm::HostSpace> const& initial,
                                             kfmm::SimulationConfig const& config, long long step,
                                             std::string const& restart_path) {
  auto const stop = [&](SimulationEvent event, SimulationState const& state) {
    if (event == SimulationEvent::Step && state.step == step && context.is_root()) std::raise(SIGTERM);
  };
  kfmm::ForceSolver solver(context, config.fmm);
  auto particles = kfmm::to_device(initial);
  return kfmm::simulate(context, particles, config, kfmm::fmm_forces(solver),
                        kfmm::combine({stop, kfmm::restart_observer(context, restart_path, config, 0, &solver)}));
}

TEST_P(Restart, StoppedAndContinuedRunEqualsUninterruptedRun) {
  kfmm::Context context;
  SharedTemporaryDirectory directory(context);
  std::string const restart_path = directory.path() + "/restart";
  kfmm::ICOptions ic;
  ic.kind = kfmm::ICKind::Plummer;
  ic.n_total = 400;
  auto const initial = kfmm::make_initial_conditions(context, ic);
  kfmm::SimulationConfig config;
  config.integrator = GetParam();
  config.lattice = {1e-7, 1e-7};
  config.schedule.output_times = {0.1, 0.2, 0.3};
  config.schedule.steps_per_output = 5;
  auto const forces = kfmm::direct_forces(context, kfmm::SofteningKind::Plummer, 0.05, 1.0);

  Outputs uninterrupted;
  auto particles = kfmm::to_device(initial);
  ASSERT_EQ(kfmm::simulate(context, particles, config, forces, record_outputs(uninterrupted)),
            kfmm::SimulationStatus::Finished);
  ASSERT_EQ(uninterrupted.size(), 4u);

  // Stop at step 7 (inside the second interval) by a SIGTERM on rank 0 only.
  Outputs first_part;
  auto const stop_at_step_7 = [&](SimulationEvent event, SimulationState const& state) {
    if (event == SimulationEvent::Step && state.step == 7 && context.is_root()) std::raise(SIGTERM);
  };
  particles = kfmm::to_device(initial);
  auto const stopped = kfmm::simulate(
      context, particles, config, forces,
      kfmm::combine({record_outputs(first_part), stop_at_step_7, kfmm::restart_observer(context, restart_path, config, 0)}));
  ASSERT_EQ(stopped, kfmm::SimulationStatus::Stopped);
  EXPECT_EQ(first_part.size(), 2u);  // outputs 0 and 1
  ASSERT_TRUE(kfmm::restart_exists(context, restart_path));

  auto state = kfmm::read_restart(context, restart_path, config);
  EXPECT_EQ(state.step, 7);
  Outputs second_part;
  ASSERT_EQ(kfmm::simulate(context, state, config, forces, record_outputs(second_part)),
            kfmm::SimulationStatus::Finished);
  ASSERT_EQ(second_part.size(), 2u);
  for (int k : {2, 3}) {
    SCOPED_TRACE(k);
    expect_identical(second_part.at(k), uninterrupted.at(k));
  }
}

INSTANTIATE_TEST_SUITE_P(Integrators, Restart,
                         testing::Values(kfmm::IntegratorKind::DKD, kfmm::IntegratorKind::KDK,
                                         kfmm::IntegratorKind::LatticeDKD),
                         [](auto const& info) { return kfmm::to_string(info.param); });

// With FMM forces the decomposition follows the measured cost of the previous step, or keeps
// the previous domains (FMMConfig::domain_tolerance); the restart carries the weights and the
// domain boundaries, so the continued run splits the particles over the ranks exactly as the
// uninterrupted run does (it once fell back to a count split after a restart, and chose new
// domains where the uninterrupted run kept its own).
void expect_continued_decomposition(double domain_tolerance) {
  kfmm::Context context;
  SharedTemporaryDirectory directory(context);
  std::string const restart_path = directory.path() + "/restart";
  kfmm::ICOptions ic;
  ic.kind = kfmm::ICKind::GaussianClumps;
  ic.n_total = 6000;
  auto const initial = kfmm::make_initial_conditions(context, ic);
  kfmm::SimulationConfig config;
  config.fmm.leaf_size = 16;
  config.fmm.softening_length = 0.01;
  config.fmm.domain_tolerance = domain_tolerance;
  config.schedule.output_times = {0.01, 0.02};
  config.schedule.steps_per_output = 5;
  // Particles on this rank after each step's force call, and whether it kept the domains.
  using Counts = std::map<long long, std::pair<std::size_t, bool>>;
  auto record_counts = [](Counts& counts, kfmm::ForceSolver const& solver) {
    return [&counts, &solver](SimulationEvent event, SimulationState const& state) {
      if (event == SimulationEvent::Step) counts[state.step] = {state.particles.num, solver.stats().domains_kept};
    };
  };

  Counts uninterrupted_counts;
  Outputs uninterrupted;
  {
    kfmm::ForceSolver solver(context, config.fmm);
    auto particles = kfmm::to_device(initial);
    ASSERT_EQ(kfmm::simulate(context, particles, config, kfmm::fmm_forces(solver),
                             kfmm::combine({record_outputs(uninterrupted), record_counts(uninterrupted_counts, solver)})),
              kfmm::SimulationStatus::Finished);
  }
  ASSERT_EQ(run_fmm_until_stopped(context, initial, config, 4, restart_path), kfmm::SimulationStatus::Stopped);
  kfmm::ForceSolver solver(context, config.fmm);
  auto state = kfmm::read_restart(context, restart_path, config, &solver);
  EXPECT_EQ(solver.cost_weights().extent(0), context.size() > 1 ? state.particles.num : 0u);
  EXPECT_EQ(solver.domain_splitters().size(), std::size_t(context.size() - 1));
  Counts continued_counts;
  Outputs continued;
  ASSERT_EQ(kfmm::simulate(context, state, config, kfmm::fmm_forces(solver),
                           kfmm::combine({record_outputs(continued), record_counts(continued_counts, solver)})),
            kfmm::SimulationStatus::Finished);
  ASSERT_EQ(continued_counts.size(), 6u);  // steps 5 … 10
  for (auto const& [step, count] : continued_counts) {
    EXPECT_EQ(count.first, uninterrupted_counts.at(step).first) << "step " << step;
    EXPECT_EQ(count.second, uninterrupted_counts.at(step).second) << "step " << step << ": domains kept";
  }
  expect_identical(continued.at(2), uninterrupted.at(2));
}

TEST(Restart, FMMRunKeepsItsCostBalancedDecomposition) { expect_continued_decomposition(0); }

// Generous: every step after the first keeps the domains (on several ranks).
TEST(Restart, FMMRunKeepsItsKeptDomains) { expect_continued_decomposition(1.0); }

// The relative opening criterion uses |a| of the previous step; the restart carries it, so the
// continued run opens the same cells (no estimating pass) and stays bit-identical.
TEST(Restart, RelativeCriterionContinuesWithTheSameAccelerationEstimate) {
  kfmm::Context context;
  SharedTemporaryDirectory directory(context);
  std::string const restart_path = directory.path() + "/restart";
  kfmm::ICOptions ic;
  ic.kind = kfmm::ICKind::Satellites;
  ic.n_total = 1000;
  auto const initial = kfmm::make_initial_conditions(context, ic);
  kfmm::SimulationConfig config;
  config.integrator = kfmm::IntegratorKind::KDK;
  config.fmm.leaf_size = 16;
  config.fmm.softening_length = 0.01;
  config.fmm.opening = kfmm::OpeningCriterion::Relative;
  config.fmm.tolerance = 1e-5;
  config.schedule.output_times = {0.01, 0.02};
  config.schedule.steps_per_output = 2;
  // Whether each step's force call had to estimate |a| first.
  using Estimated = std::map<long long, bool>;
  auto record_estimates = [](Estimated& estimated, kfmm::ForceSolver const& solver) {
    return [&estimated, &solver](SimulationEvent event, SimulationState const& state) {
      if (event != SimulationEvent::Step) return;
      bool any = false;
      for (auto const& [name, seconds] : solver.stats().phases) any = any || name == "estimate";
      estimated[state.step] = any;
    };
  };
  Outputs uninterrupted;
  {
    kfmm::ForceSolver solver(context, config.fmm);
    auto particles = kfmm::to_device(initial);
    ASSERT_EQ(kfmm::simulate(context, particles, config, kfmm::fmm_forces(solver), record_outputs(uninterrupted)),
              kfmm::SimulationStatus::Finished);
  }
  ASSERT_EQ(run_fmm_until_stopped(context, initial, config, 3, restart_path), kfmm::SimulationStatus::Stopped);
  kfmm::ForceSolver solver(context, config.fmm);
  auto state = kfmm::read_restart(context, restart_path, config, &solver);
  ASSERT_TRUE(solver.has_acceleration_estimate());
  EXPECT_EQ(solver.acceleration_estimate().extent(0), state.particles.num);
  Estimated estimated;
  Outputs continued;
  ASSERT_EQ(kfmm::simulate(context, state, config, kfmm::fmm_forces(solver),
                           kfmm::combine({record_outputs(continued), record_estimates(estimated, solver)})),
            kfmm::SimulationStatus::Finished);
  ASSERT_FALSE(estimated.empty());
  for (auto const& [step, any] : estimated) EXPECT_FALSE(any) << "step " << step << " estimated |a| afresh";
  expect_identical(continued.at(2), uninterrupted.at(2));
}

TEST(Restart, RefusesAnotherIntegratorAndMissingFiles) {
  kfmm::Context context;
  SharedTemporaryDirectory directory(context);
  std::string const restart_path = directory.path() + "/restart";
  kfmm::SimulationConfig config;
  EXPECT_FALSE(kfmm::restart_exists(context, restart_path));
  try {
    kfmm::read_restart(context, restart_path, config);
    ADD_FAILURE() << "no error for a missing restart";
  } catch (kfmm::Error const& e) {
    EXPECT_NE(std::string(e.what()).find("no restart at"), std::string::npos) << e.what();
  }
  SimulationState state;
  state.started = true;
  state.time = 0.5;
  state.particles = kfmm::Particles<kfmm::MemorySpace>(0);
  kfmm::write_restart(context, restart_path, state, config);
  config.integrator = kfmm::IntegratorKind::KDK;
  try {
    kfmm::read_restart(context, restart_path, config);
    ADD_FAILURE() << "no error for another integrator";
  } catch (kfmm::Error const& e) {
    EXPECT_NE(std::string(e.what()).find("integrator"), std::string::npos) << e.what();
  }
}

TEST(Restart, RefusesRepeatedIds) {
  // kfmm writes unique ids; a restart whose files repeat one (altered, or mixed from two runs)
  // must not continue. Rank r holds ids 10r + {1, 2, 3}; the last rank repeats rank 0's id 2.
  kfmm::Context context;
  SharedTemporaryDirectory directory(context);
  std::string const restart_path = directory.path() + "/restart";
  kfmm::SimulationConfig config;
  kfmm::Particles<kfmm::HostSpace> host(3);
  host.num = 3;
  host.num_total = 3 * context.size();
  for (std::size_t i = 0; i < 3; ++i) {
    for (int d = 0; d < 3; ++d) host.pos(i, d) = host.vel(i, d) = 0.1 * double(i + d);
    host.mass(i) = 1;
    host.id(i) = 10 * context.rank() + i + 1;
  }
  if (context.rank() == context.size() - 1) host.id(2) = 2;
  SimulationState state;
  state.started = true;
  state.particles = kfmm::to_device(host);
  kfmm::write_restart(context, restart_path, state, config);
  try {
    kfmm::read_restart(context, restart_path, config);
    ADD_FAILURE() << "no error for repeated ids";
  } catch (kfmm::Error const& e) {
    std::string const rows = "id 2 at rows 1 and " + std::to_string(3 * context.size() - 1);
    EXPECT_NE(std::string(e.what()).find("repeats particle ids (" + rows), std::string::npos) << e.what();
  }
}

// A crash while rank 0 swaps the directories (an injected failure at the fault point stands for
// it) never leaves the run without a complete restart, also when the previous crash left only
// restart.old (the swap once removed restart.old before the new restart was in place).
TEST(Restart, InterruptedSwapsAlwaysLeaveACompleteRestart) {
  kfmm::Context context;
  SharedTemporaryDirectory directory(context);
  std::string const path = directory.path() + "/restart";
  kfmm::ICOptions ic;
  ic.kind = kfmm::ICKind::Plummer;
  ic.n_total = 100;
  kfmm::SimulationConfig config;
  config.schedule.output_times = {1.0};
  SimulationState state;
  state.started = true;
  state.particles = kfmm::to_device(kfmm::make_initial_conditions(context, ic));
  auto const write_at = [&](long long step) {
    state.step = step;
    kfmm::write_restart(context, path, state, config);
  };
  write_at(1);
  for (long long step : {2, 3}) {
    SCOPED_TRACE(step);
    kfmm::fault_injection::arm("restart.swapping:1:0:throw");
    EXPECT_THROW(write_at(step), kfmm::Error);
    kfmm::fault_injection::arm("");
    ASSERT_TRUE(kfmm::restart_exists(context, path));
    EXPECT_EQ(kfmm::read_restart(context, path, config).step, 1);
  }
  // Interrupted once the new restart is in place, before restart.old is removed.
  kfmm::fault_injection::arm("restart.swapped:1:0:throw");
  EXPECT_THROW(write_at(4), kfmm::Error);
  kfmm::fault_injection::arm("");
  EXPECT_EQ(kfmm::read_restart(context, path, config).step, 4);
  write_at(5);
  EXPECT_EQ(kfmm::read_restart(context, path, config).step, 5);
  if (context.is_root()) {
    EXPECT_FALSE(std::filesystem::exists(path + ".old"));
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  }
}

// At a step that reaches an output, the restart is written after the Output event's observers
// (the snapshot writer): a crash while the snapshot is written must leave a restart from before
// that step, so that the continued run writes the snapshot (it once continued after it).
TEST(Restart, OutputStepsRestartFollowsItsSnapshot) {
  kfmm::Context context;
  SharedTemporaryDirectory directory(context);
  std::string const path = directory.path() + "/restart";
  kfmm::ICOptions ic;
  ic.kind = kfmm::ICKind::Plummer;
  ic.n_total = 200;
  auto const initial = kfmm::make_initial_conditions(context, ic);
  kfmm::SimulationConfig config;
  config.schedule.output_times = {0.1, 0.2};
  config.schedule.steps_per_output = 3;
  auto const forces = kfmm::direct_forces(context, kfmm::SofteningKind::Plummer, 0.05, 1.0);
  auto const crash_in_snapshot_1 = [](SimulationEvent event, SimulationState const& state) {
    if (event == SimulationEvent::Output && state.output_number() == 1) kfmm::fail("crash while writing snapshot 1");
  };
  auto particles = kfmm::to_device(initial);
  EXPECT_THROW(kfmm::simulate(context, particles, config, forces,
                              kfmm::combine({crash_in_snapshot_1, kfmm::restart_observer(context, path, config, 1)})),
               kfmm::Error);
  auto state = kfmm::read_restart(context, path, config);
  EXPECT_EQ(state.step, 2);
  Outputs continued;
  ASSERT_EQ(kfmm::simulate(context, state, config, forces, record_outputs(continued)), kfmm::SimulationStatus::Finished);
  EXPECT_EQ(continued.count(1), 1u) << "the continued run skipped output 1";
}

/// The first of python3 and /usr/bin/python3 that imports h5py (the same on every rank).
std::string python_with_h5py(kfmm::Context const& context) {
  int index = -1;
  char const* candidates[] = {"python3", "/usr/bin/python3"};
  if (context.is_root())
    for (int i = 0; i < 2 && index < 0; ++i)
      if (std::system((std::string(candidates[i]) + " -c 'import h5py, numpy' >/dev/null 2>&1").c_str()) == 0) index = i;
  MPI_Bcast(&index, 1, MPI_INT, 0, context.comm());
  return index < 0 ? "" : candidates[index];
}

// Found by fuzz_tests/fuzz_restart: rank 0's file damaged in each of these ways was read
// without an error (a NaN position, 2^32 narrowed to output 0, a float id truncated, a count
// that disagrees with the other ranks), made the reader allocate for 2^40 particles, or
// overflowed the one value read from an array attribute. Every rank throws the same error.
TEST(Restart, FuzzFindingsAreClearErrors) {
  kfmm::Context context;
  SharedTemporaryDirectory directory(context);
  std::string const python = python_with_h5py(context);
  ASSERT_FALSE(python.empty()) << "neither python3 nor /usr/bin/python3 imports h5py; install python3-h5py";
  std::string const restart_path = directory.path() + "/restart";
  kfmm::SimulationConfig config;
  config.schedule.output_times = {1.0, 2.0};
  SimulationState state;
  state.started = true;
  state.time = 0.5;
  state.step = 10;
  state.step_in_interval = 10;
  kfmm::Particles<kfmm::HostSpace> host(3);
  host.num = 3;
  host.num_total = 3 * static_cast<std::size_t>(context.size());
  for (std::size_t i = 0; i < 3; ++i) {
    for (int k = 0; k < 3; ++k) host.pos(i, k) = host.vel(i, k) = 0.1 * double(i + k);
    host.mass(i) = 1.0;
    host.id(i) = 3 * static_cast<std::uint64_t>(context.rank()) + i + 1;
  }
  state.particles = kfmm::to_device(host);

  struct Case {
    char const* edit;
    std::vector<std::string> fragments;
  };
  std::vector<Case> const cases = {
      {"array_step", {"rank_0000.h5", "attribute 'step' has 3 values, expected 1"}},
      {"next_output_2_32", {"before output 4294967297", "2 outputs"}},
      {"unwritten_positions", {"rank_0000.h5", "dataset 'positions' was created but not (fully) written"}},
      {"nan_position", {"rank_0000.h5", "dataset 'positions' holds nan (particle id 1)", "finite"}},
      {"num_total", {"num_total = ", "hold " + std::to_string(3 * context.size()) + " particles together"}},
      {"wrong_rank", {"rank_0000.h5", "says it is rank 5's, not rank 0's"}},
      {"float_ids", {"rank_0000.h5", "dataset 'ids' is not of unsigned integer type"}},
      {"negative_step", {"rank_0000.h5", "step -1", "0 ≤ step_in_interval ≤ step"}},
  };
  // The undamaged restart reads back.
  kfmm::write_restart(context, restart_path, state, config);
  auto const read = kfmm::read_restart(context, restart_path, config);
  EXPECT_EQ(read.particles.num, 3u);
  EXPECT_EQ(read.step, 10);
  for (auto const& c : cases) {
    SCOPED_TRACE(c.edit);
    kfmm::write_restart(context, restart_path, state, config);
    int status = 0;
    if (context.is_root()) {
      std::string const script = (std::filesystem::path(__FILE__).parent_path() / "edit_restart.py").string();
      status = std::system((python + " " + script + " " + restart_path + "/rank_0000.h5 " + c.edit).c_str());
    }
    MPI_Bcast(&status, 1, MPI_INT, 0, context.comm());
    ASSERT_EQ(status, 0);
    try {
      kfmm::read_restart(context, restart_path, config);
      ADD_FAILURE() << "no error";
    } catch (kfmm::Error const& e) {
      for (auto const& fragment : c.fragments)
        EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << "'" << fragment << "' not in: " << e.what();
    }
  }
}

}  // namespace
