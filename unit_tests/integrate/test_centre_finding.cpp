// Centre finding on a Plummer sphere sphere_offset from the origin in a uniform background: both
// centres recover the sphere_offset, and the distributed answers equal the one-rank answers.
#include <kfmm/fmm/direct.hpp>
#include <kfmm/integrate/centre_finding.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace {

constexpr double sphere_offset[3] = {3.0, -2.0, 1.5};

/// 3000 Plummer particles (b = 1, r < 10) around `sphere_offset` and 1500 uniform in a cube of side 30
/// around the origin; particle i is on rank i % ranks (all on one rank for a self context).
kfmm::Particles<kfmm::MemorySpace> sphere_in_background(kfmm::Context const& context) {
  std::mt19937_64 random(12345);
  std::uniform_real_distribution<double> uniform(0, 1);
  std::size_t const n_sphere = 3000, n_background = 1500, n = n_sphere + n_background;
  kfmm::Particles<kfmm::HostSpace> host(n);
  host.num_total = n;
  for (std::size_t i = 0; i < n; ++i) {
    double x[3];
    if (i < n_sphere) {
      double r;
      do r = 1 / std::sqrt(std::pow(uniform(random), -2.0 / 3.0) - 1);
      while (r > 10);
      double const z = 2 * uniform(random) - 1, phi = 2 * M_PI * uniform(random), s = std::sqrt(1 - z * z);
      x[0] = sphere_offset[0] + r * s * std::cos(phi);
      x[1] = sphere_offset[1] + r * s * std::sin(phi);
      x[2] = sphere_offset[2] + r * z;
    } else {
      for (double& c : x) c = 30 * uniform(random) - 15;
    }
    if (static_cast<int>(i % context.size()) != context.rank()) continue;
    std::size_t const k = host.num++;
    for (int d = 0; d < 3; ++d) {
      host.pos(k, d) = x[d];
      host.vel(k, d) = 0;
    }
    host.mass(k) = 1.0 / n;
    host.id(k) = i + 1;
  }
  return kfmm::to_device(host);
}

struct Centres {
  kfmm::PotentialMinimum minimum;
  kfmm::ShrinkingSpheres spheres;
};

Centres find_centres(kfmm::Context const& context) {
  auto const particles = sphere_in_background(context);
  kfmm::ScalarView<double> potential;
  kfmm::Vec3View<double> acceleration;
  kfmm::direct_sum_all(context, particles, kfmm::SofteningKind::Plummer, 0.05, 1.0, potential, acceleration);
  return {kfmm::potential_minimum_centre(context, particles, potential),
          kfmm::shrinking_spheres_centre(context, particles, 0.9, 100)};
}

TEST(CentreFinding, BothCentresRecoverAnOffsetSphereInABackground) {
  kfmm::Context world;
  auto const distributed = find_centres(world);
  ASSERT_TRUE(distributed.minimum.found);
  double const com_shift = std::hypot(sphere_offset[0], sphere_offset[1], sphere_offset[2]) * 1500.0 / 4500.0;
  for (int d = 0; d < 3; ++d) {
    EXPECT_NEAR(distributed.minimum.position[d], sphere_offset[d], 0.15) << d;
    EXPECT_NEAR(distributed.spheres.centre[d], sphere_offset[d], 0.1) << d;
  }
  EXPECT_GE(distributed.spheres.count, 100u);
  EXPECT_GT(distributed.spheres.iterations, 5);
  EXPECT_GT(com_shift, 1.0) << "the test would not tell the centre of mass from the centre";

  // The same particles all on one rank: the same particle, and centres equal to round-off.
  kfmm::Context self(MPI_COMM_SELF);
  auto const alone = find_centres(self);
  EXPECT_EQ(distributed.minimum.id, alone.minimum.id);
  EXPECT_EQ(distributed.spheres.iterations, alone.spheres.iterations);
  EXPECT_EQ(distributed.spheres.count, alone.spheres.count);
  for (int d = 0; d < 3; ++d) {
    EXPECT_EQ(distributed.minimum.position[d], alone.minimum.position[d]);
    EXPECT_NEAR(distributed.spheres.centre[d], alone.spheres.centre[d], 1e-12);
  }
}

TEST(CentreFinding, EdgeCasesAndBadSettings) {
  kfmm::Context world;
  kfmm::Particles<kfmm::HostSpace> host(1);
  host.num_total = 1;
  if (world.is_root()) {
    host.num = 1;
    host.pos(0, 0) = 1;
    host.pos(0, 1) = 2;
    host.pos(0, 2) = 3;
    host.mass(0) = 1;
    host.id(0) = 7;
  }
  auto const particles = kfmm::to_device(host);
  auto const spheres = kfmm::shrinking_spheres_centre(world, particles, 0.5, 10);  // fewer than the minimum
  EXPECT_EQ(spheres.centre[2], 3);
  EXPECT_EQ(spheres.iterations, 0);
  kfmm::ScalarView<double> potential("potential", 1);
  Kokkos::deep_copy(potential, -1.0);
  auto const minimum = kfmm::potential_minimum_centre(world, particles, potential);
  EXPECT_TRUE(minimum.found);
  EXPECT_EQ(minimum.id, 7u);
  EXPECT_EQ(minimum.position[1], 2);
  EXPECT_THROW(kfmm::shrinking_spheres_centre(world, particles, 1.0, 10), kfmm::Error);
  EXPECT_THROW(kfmm::shrinking_spheres_centre(world, particles, 0.5, 0), kfmm::Error);
  EXPECT_THROW(kfmm::parse_centre_cadence("sometimes"), kfmm::Error);
}

}  // namespace
