// measure_accuracy: the error statistics against direct summation and where the largest error is,
// at any rank count (the particles are spread over all ranks of the test).
#include "drifting_clumps.hpp"
#include <kfmm/fmm/accuracy.hpp>
#include <kfmm/fmm/direct.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using namespace kfmm;

class AccuracyReportTest : public testing::Test {
 protected:
  Context world;
  FMMConfig config;

  // Centre of mass of all ranks' particles.
  void centre_of_mass(Particles<MemorySpace> const& particles, double centre[3]) {
    auto const host = to_host(particles);
    double sums[4] = {0, 0, 0, 0};
    for (std::size_t i = 0; i < host.num; ++i) {
      sums[0] += host.mass(i);
      for (int k = 0; k < 3; ++k) sums[1 + k] += host.mass(i) * host.pos(i, k);
    }
    double global[4];
    MPI_Allreduce(sums, global, 4, MPI_DOUBLE, MPI_SUM, world.comm());
    for (int k = 0; k < 3; ++k) centre[k] = global[1 + k] / global[0];
  }
};

// The exact forces with one particle's acceleration scaled by 1.05 (a relative error of 0.05)
// and another's by 1.01: the report's largest error is 0.05, at that particle's id, distance
// from the centre of mass and |a|.
TEST_F(AccuracyReportTest, LargestErrorNamesItsParticle) {
  auto const particles = test::clumps(world, 3000, 11);
  ScalarView<double> potential;
  Vec3View<double> acceleration;
  direct_sum_all(world, particles, config.softening, config.softening_length, config.G, potential, acceleration);
  std::uint64_t const worst_id = 1234, other_id = 77;
  auto const host = to_host(particles);
  auto acc = Kokkos::create_mirror_view_and_copy(HostSpace(), acceleration);
  double expected[4] = {0, 0, 0, 0};  // position and |a| of the worst particle, on its rank
  int holder = 0;
  for (std::size_t i = 0; i < host.num; ++i) {
    double const factor = host.id(i) == worst_id ? 1.05 : host.id(i) == other_id ? 1.01 : 1.0;
    if (host.id(i) == worst_id) {
      for (int k = 0; k < 3; ++k) expected[k] = host.pos(i, k);
      expected[3] = std::sqrt(acc(i, 0) * acc(i, 0) + acc(i, 1) * acc(i, 1) + acc(i, 2) * acc(i, 2));
      holder = 1;
    }
    for (int k = 0; k < 3; ++k) acc(i, k) *= factor;
  }
  Kokkos::deep_copy(acceleration, acc);
  double global[4];
  MPI_Allreduce(expected, global, 4, MPI_DOUBLE, MPI_SUM, world.comm());
  int holders = 0;
  MPI_Allreduce(&holder, &holders, 1, MPI_INT, MPI_SUM, world.comm());
  ASSERT_EQ(holders, 1) << "particle id " << worst_id << " is not in the set";
  double centre[3];
  centre_of_mass(particles, centre);
  double r2 = 0;
  for (int k = 0; k < 3; ++k) r2 += (global[k] - centre[k]) * (global[k] - centre[k]);

  AccuracyReport const report = measure_accuracy(world, particles, potential, acceleration, config, 3000);
  EXPECT_EQ(report.samples, 3000u);
  EXPECT_NEAR(report.max, 0.05, 1e-12);
  EXPECT_EQ(report.max_id, worst_id);
  EXPECT_NEAR(report.max_radius, std::sqrt(r2), 1e-12 * (1 + std::sqrt(r2)));
  EXPECT_NEAR(report.max_magnitude, global[3], 1e-12 * global[3]);
  EXPECT_LT(report.p999, 0.05);
  std::string const line = describe(report);
  EXPECT_NE(line.find("max 0.05 (id 1234, r = "), std::string::npos) << line;
}

// The forces of direct summation itself: every error is at round-off; the report still names a
// sampled particle.
TEST_F(AccuracyReportTest, ExactForcesGiveZeroErrors) {
  auto const particles = test::clumps(world, 500, 11);
  ScalarView<double> potential;
  Vec3View<double> acceleration;
  direct_sum_all(world, particles, config.softening, config.softening_length, config.G, potential, acceleration);
  AccuracyReport const report = measure_accuracy(world, particles, potential, acceleration, config, 500);
  EXPECT_EQ(report.samples, 500u);
  EXPECT_LE(report.max, 1e-13);
  EXPECT_LE(report.force_l2, 1e-13);
  EXPECT_GT(report.max_magnitude, 0.0);
  EXPECT_GE(report.max_id, 1u);
}

// The same exact forces with every particle's acceleration scaled by 1 + id·1e-5 (errors that
// differ per particle): a list of every id (shuffled, with repeats) gives the report of sampling
// every particle, and a list of some ids the report of those: its largest error is the largest
// listed id's.
TEST_F(AccuracyReportTest, ListedTargetsAreTheParticlesCompared) {
  auto const particles = test::clumps(world, 800, 5);
  ScalarView<double> potential;
  Vec3View<double> acceleration;
  direct_sum_all(world, particles, config.softening, config.softening_length, config.G, potential, acceleration);
  auto const host = to_host(particles);
  auto acc = Kokkos::create_mirror_view_and_copy(HostSpace(), acceleration);
  for (std::size_t i = 0; i < host.num; ++i)
    for (int k = 0; k < 3; ++k) acc(i, k) *= 1 + 1e-5 * double(host.id(i));
  Kokkos::deep_copy(acceleration, acc);
  std::vector<std::uint64_t> every;
  for (std::uint64_t id = 800; id >= 1; --id) every.push_back(id);  // test::clumps numbers 1…N
  every.push_back(17);
  every.push_back(800);
  AccuracyReport const all = measure_accuracy(world, particles, potential, acceleration, config, 800);
  AccuracyReport const listed = measure_accuracy(world, particles, potential, acceleration, config, every);
  EXPECT_EQ(listed.samples, 800u);
  EXPECT_EQ(listed.force_l2, all.force_l2);
  EXPECT_EQ(listed.median, all.median);
  EXPECT_EQ(listed.p99, all.p99);
  EXPECT_EQ(listed.max, all.max);
  EXPECT_EQ(listed.max_id, 800u);

  std::vector<std::uint64_t> const some = {3, 250, 41, 599, 250};
  AccuracyReport const few = measure_accuracy(world, particles, potential, acceleration, config, some);
  EXPECT_EQ(few.samples, 4u);
  EXPECT_EQ(few.max_id, 599u);
  EXPECT_NEAR(few.max, 599e-5, 1e-9);
}

// A listed id that no particle has fails on every rank, naming the count and the id.
TEST_F(AccuracyReportTest, UnknownListedIdFailsOnEveryRank) {
  auto const particles = test::clumps(world, 300, 5);
  ScalarView<double> potential;
  Vec3View<double> acceleration;
  direct_sum_all(world, particles, config.softening, config.softening_length, config.G, potential, acceleration);
  std::vector<std::uint64_t> const ids = {5, 1000000007, 12, 300, 301};
  try {
    measure_accuracy(world, particles, potential, acceleration, config, ids);
    FAIL() << "no error";
  } catch (Error const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("2 of the 5 listed target ids"), std::string::npos) << what;
    EXPECT_NE(what.find("the first: 301"), std::string::npos) << what;
  }
}

}  // namespace
