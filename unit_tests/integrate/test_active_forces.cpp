// Forces on the active subset: the active rows equal a full evaluation's, every other row is left
// as it was, on any rank count, for direct summation and for the FMM.
#include <kfmm/fmm/direct.hpp>
#include <kfmm/fmm/solver.hpp>
#include <kfmm/integrate/active_forces.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace {

constexpr double sentinel = -12345.0;

class ActiveForcesTest : public ::testing::Test {
 protected:
  kfmm::Context world;

  /// 4000 particles in two clumps; particle i is on rank i % ranks; every 7th is active.
  void SetUp() override {
    std::mt19937_64 random(2024);
    std::normal_distribution<double> normal(0, 1);
    std::size_t const n = 4000;
    kfmm::Particles<kfmm::HostSpace> host(n);
    host.num_total = n;
    std::vector<std::uint8_t> flags;
    for (std::size_t i = 0; i < n; ++i) {
      double x[3];
      for (double& c : x) c = (i % 3 == 0 ? 0.05 : 0.5) * normal(random) + (i % 3 == 0 ? 2.0 : 0.0);
      if (static_cast<int>(i % world.size()) != world.rank()) continue;
      std::size_t const k = host.num++;
      for (int d = 0; d < 3; ++d) {
        host.pos(k, d) = x[d];
        host.vel(k, d) = 0;
      }
      host.mass(k) = (1.0 + i % 5) / n;
      host.id(k) = i + 1;
      flags.push_back(i % 7 == 0 ? 1 : 0);
    }
    particles = kfmm::to_device(host);
    active = kfmm::ActiveFlags("active", particles.num);
    auto const active_host = Kokkos::create_mirror_view(active);
    for (std::size_t k = 0; k < flags.size(); ++k) active_host(k) = flags[k];
    Kokkos::deep_copy(active, active_host);
    potential = kfmm::ScalarView<double>("potential", particles.num);
    acceleration = kfmm::Vec3View<double>("acceleration", particles.num);
    Kokkos::deep_copy(potential, sentinel);
    Kokkos::deep_copy(acceleration, sentinel);
  }

  /// Active rows within `tolerance` (relative to |a|) of the reference, inactive rows untouched.
  void expect_active_rows(kfmm::ScalarView<double> const& reference_potential,
                          kfmm::Vec3View<double> const& reference_acceleration, double tolerance) const {
    auto const flags = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), active);
    auto const phi = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), potential);
    auto const a = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), acceleration);
    auto const phi_ref = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), reference_potential);
    auto const a_ref = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), reference_acceleration);
    int checked = 0;
    for (std::size_t i = 0; i < particles.num; ++i) {
      if (!flags(i)) {
        EXPECT_EQ(phi(i), sentinel) << i;
        for (int d = 0; d < 3; ++d) EXPECT_EQ(a(i, d), sentinel) << i;
        continue;
      }
      ++checked;
      double const scale = std::sqrt(a_ref(i, 0) * a_ref(i, 0) + a_ref(i, 1) * a_ref(i, 1) + a_ref(i, 2) * a_ref(i, 2));
      EXPECT_NEAR(phi(i), phi_ref(i), tolerance * std::abs(phi_ref(i))) << i;
      for (int d = 0; d < 3; ++d) EXPECT_NEAR(a(i, d), a_ref(i, d), tolerance * scale) << i << " " << d;
    }
    EXPECT_GT(checked, 0);
  }

  kfmm::Particles<kfmm::MemorySpace> particles;
  kfmm::ActiveFlags active;
  kfmm::ScalarView<double> potential;
  kfmm::Vec3View<double> acceleration;
};

TEST_F(ActiveForcesTest, DirectEqualsFullDirectSumOnActiveRows) {
  kfmm::ScalarView<double> full_potential;
  kfmm::Vec3View<double> full_acceleration;
  kfmm::direct_sum_all(world, particles, kfmm::SofteningKind::Plummer, 0.01, 1.0, full_potential, full_acceleration);
  auto const forces = kfmm::direct_active_forces(world, kfmm::SofteningKind::Plummer, 0.01, 1.0);
  forces(particles, active, potential, acceleration);
  expect_active_rows(full_potential, full_acceleration, 1e-12);
}

TEST_F(ActiveForcesTest, FmmEqualsFullEvaluationOnActiveRows) {
  kfmm::FMMConfig config;
  config.softening_length = 0.01;
  // The angle criterion: under the relative one the full call's lists come from the |a| estimate
  // and the active call's from the full call's |a| (fmm's active tests cover it).
  config.opening = kfmm::OpeningCriterion::Angle;
  config.theta = kfmm::default_theta(kfmm::OpeningCriterion::Angle);
  kfmm::ForceSolver solver(world, config);
  kfmm::ScalarView<double> full_potential;
  kfmm::Vec3View<double> full_acceleration;
  solver.compute_in_input_order(particles, full_potential, full_acceleration);
  auto const forces = kfmm::fmm_active_forces(solver);
  forces(particles, active, potential, acceleration);
  // The same solver, particles and decomposition weights: the same arithmetic to round-off.
  expect_active_rows(full_potential, full_acceleration, 1e-6);
}

TEST_F(ActiveForcesTest, NoActiveParticleLeavesEverythingUntouched) {
  Kokkos::deep_copy(active, 0);
  auto const forces = kfmm::direct_active_forces(world, kfmm::SofteningKind::Plummer, 0.01, 1.0);
  forces(particles, active, potential, acceleration);
  auto const a = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), acceleration);
  for (std::size_t i = 0; i < particles.num; ++i) EXPECT_EQ(a(i, 0), sentinel);
}

TEST_F(ActiveForcesTest, ShortViewsAreAnErrorOnEveryRank) {
  kfmm::ActiveFlags short_flags("short", world.rank() == 0 ? 0 : particles.num);
  auto const forces = kfmm::direct_active_forces(world, kfmm::SofteningKind::Plummer, 0.01, 1.0);
  EXPECT_THROW(forces(particles, short_flags, potential, acceleration), kfmm::Error);
}

}  // namespace
