// Diagnostics on a hand-computable two-particle system, and the step schedule.
#include <kfmm/core/error.hpp>
#include <kfmm/core/fault_injection.hpp>
#include <kfmm/integrate/diagnostics.hpp>
#include <kfmm/integrate/schedule.hpp>

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace {

TEST(Diagnostics, MatchHandComputedValues) {
  kfmm::Context context;
  // Particle r (r = 0, 1) lives on rank r % size: m = 1 at (1,0,0) with v = (0,1,0), φ = −2,
  // a = (−1,0,0); m = 3 at (0,2,0) with v = (1,0,0), φ = −1, a = (0,−1,0).
  double const m[2] = {1, 3}, x[2][3] = {{1, 0, 0}, {0, 2, 0}}, v[2][3] = {{0, 1, 0}, {1, 0, 0}};
  double const phi[2] = {-2, -1}, a[2][3] = {{-1, 0, 0}, {0, -1, 0}};
  kfmm::Particles<kfmm::HostSpace> host(2);
  kfmm::ScalarView<double, kfmm::HostSpace> potential("potential", 2);
  kfmm::Vec3View<double, kfmm::HostSpace> acceleration("acceleration", 2);
  for (int p = 0; p < 2; ++p) {
    if (p % context.size() != context.rank()) continue;
    std::size_t const i = host.num++;
    host.mass(i) = m[p];
    host.id(i) = p + 1;
    potential(i) = phi[p];
    for (int d = 0; d < 3; ++d) {
      host.pos(i, d) = x[p][d];
      host.vel(i, d) = v[p][d];
      acceleration(i, d) = a[p][d];
    }
  }
  host.num_total = 2;
  auto const particles = kfmm::to_device(host);
  auto const device_potential = Kokkos::create_mirror_view_and_copy(kfmm::MemorySpace(), potential);
  auto const device_acceleration = Kokkos::create_mirror_view_and_copy(kfmm::MemorySpace(), acceleration);

  auto const d = kfmm::measure(context, particles, device_potential, device_acceleration, 0.0);
  EXPECT_DOUBLE_EQ(d.mass, 4);
  EXPECT_DOUBLE_EQ(d.kinetic, 0.5 * (1 * 1 + 3 * 1));          // 2
  EXPECT_DOUBLE_EQ(d.potential, 0.5 * (1 * -2 + 3 * -1));      // −2.5
  EXPECT_DOUBLE_EQ(d.total, -0.5);
  EXPECT_DOUBLE_EQ(d.momentum[0], 3);
  EXPECT_DOUBLE_EQ(d.momentum[1], 1);
  EXPECT_DOUBLE_EQ(d.momentum[2], 0);
  // L = 1·(1,0,0)×(0,1,0) + 3·(0,2,0)×(1,0,0) = (0,0,1) + (0,0,−6).
  EXPECT_DOUBLE_EQ(d.angular_momentum[2], -5);
  EXPECT_DOUBLE_EQ(d.angular_momentum[0], 0);
  EXPECT_DOUBLE_EQ(d.centre_of_mass[0], 0.25);
  EXPECT_DOUBLE_EQ(d.centre_of_mass[1], 1.5);
  EXPECT_DOUBLE_EQ(d.max_acceleration, 1);

  // With kick 0.5 the velocities are v + ½a: (−½,1,0) and (1,−½,0).
  auto const kicked = kfmm::measure(context, particles, device_potential, device_acceleration, 0.5);
  EXPECT_DOUBLE_EQ(kicked.kinetic, 0.5 * (1 * 1.25 + 3 * 1.25));
  EXPECT_DOUBLE_EQ(kicked.momentum[0], -0.5 + 3);
  EXPECT_DOUBLE_EQ(kicked.momentum[1], 1 - 1.5);
}

TEST(Schedule, StepsLandOnOutputTimes) {
  kfmm::Schedule schedule;
  schedule.output_times = {1.0, 3.0};
  schedule.steps_per_output = 4;
  EXPECT_DOUBLE_EQ(schedule.step_end(0, 0, 0.0, 0), 0.25);
  EXPECT_EQ(schedule.step_end(0, 3, 0.75, 0), 1.0);
  EXPECT_DOUBLE_EQ(schedule.step_end(1, 1, 1.5, 0), 2.0);

  schedule.mode = kfmm::StepMode::Fixed;
  schedule.dt = 0.3;
  EXPECT_DOUBLE_EQ(schedule.step_end(0, 1, 0.3, 0), 0.6);
  EXPECT_EQ(schedule.step_end(0, 3, 0.9, 0), 1.0);  // shortened to land on the output

  schedule.mode = kfmm::StepMode::Adaptive;
  schedule.dt_max = 0.5;
  EXPECT_DOUBLE_EQ(schedule.step_end(1, 0, 1.0, 0.2), 1.2);
  EXPECT_DOUBLE_EQ(schedule.step_end(1, 0, 1.0, 7.0), 1.5);
  EXPECT_EQ(schedule.step_end(1, 0, 2.9, 0.2), 3.0);
}

TEST(Schedule, RejectsBadTimes) {
  kfmm::Schedule schedule;
  schedule.output_times = {1.0, 1.0};
  EXPECT_THROW(schedule.validate(), kfmm::Error);
  schedule.output_times = {-1.0};
  schedule.mode = kfmm::StepMode::Fixed;
  EXPECT_THROW(schedule.validate(), kfmm::Error);  // backward needs per_output
  schedule.mode = kfmm::StepMode::PerOutput;
  EXPECT_NO_THROW(schedule.validate());
  schedule.steps_per_output = 0;
  EXPECT_THROW(schedule.validate(), kfmm::Error);
}

// A restarted run keeps the complete rows up to its restart's step: rows after it are dropped
// (the run repeats those steps), and so is a row cut short by a crash. An interrupted resume
// leaves the file as it was (it was once truncated before the kept rows were written back).
TEST(DiagnosticsLog, ResumeKeepsCompleteRowsUpToTheRestartStep) {
  kfmm::Context context;
  long long token = getpid();
  MPI_Bcast(&token, 1, MPI_LONG_LONG, 0, context.comm());
  std::string const path =
      (std::filesystem::temp_directory_path() / ("kfmm_diagnostics_test_" + std::to_string(token) + ".csv")).string();
  auto const contents = [&] {
    std::ifstream file(path);
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
  };
  auto const steps = [&] {
    std::string listed, line;
    std::stringstream text(contents());
    std::getline(text, line);
    while (std::getline(text, line)) listed += line.substr(0, line.find(',')) + " ";
    return listed;
  };
  {
    kfmm::DiagnosticsLog log(context, path);
    for (long long step = 0; step <= 6; ++step) log.write(step, 0.1, kfmm::Diagnostics{});
  }
  if (context.is_root()) std::ofstream(path, std::ios::app) << "7,0.1,0.0";  // a torn last row
  MPI_Barrier(context.comm());
  std::string const written = context.is_root() ? contents() : "";

  kfmm::fault_injection::arm("diagnostics.resume:1:0:throw");
  EXPECT_THROW(kfmm::DiagnosticsLog(context, path, 3), kfmm::Error);
  kfmm::fault_injection::arm("");
  if (context.is_root()) EXPECT_EQ(contents(), written);

  { kfmm::DiagnosticsLog log(context, path, 9); }
  if (context.is_root()) EXPECT_EQ(steps(), "0 1 2 3 4 5 6 ");
  {
    kfmm::DiagnosticsLog log(context, path, 3);
    log.write(4, 0.1, kfmm::Diagnostics{});
  }
  if (context.is_root()) {
    EXPECT_EQ(steps(), "0 1 2 3 4 ");
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  }
  MPI_Barrier(context.comm());
  if (context.is_root()) std::filesystem::remove(path);
}

}  // namespace
