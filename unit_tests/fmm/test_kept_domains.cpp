// Domains kept between evaluations (FMMConfig::domain_tolerance): while the previous splitters
// balance the cost they stay and only particles that crossed a boundary move; forces are the
// same bits as with new domains at every evaluation, and a load that no longer balances gets
// new domains.
#include <kfmm/comm/initial_conditions.hpp>
#include "drifting_clumps.hpp"
#include <kfmm/fmm/solver.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using namespace kfmm;

class KeptDomainsTest : public testing::Test {
 protected:
  Context world;

  Particles<MemorySpace> make(std::uint64_t n) { return test::clumps(world, n, 5); }

  // Results of `a` and `b` on `particles` (input order), compared bit for bit.
  void expect_same_forces(ForceSolver& a, ForceSolver& b, Particles<MemorySpace> const& particles,
                          std::string const& when) {
    ScalarView<double> pa, pb;
    Vec3View<double> aa, ab;
    a.compute_in_input_order(particles, pa, aa);
    b.compute_in_input_order(particles, pb, ab);
    auto const p = Kokkos::create_mirror_view_and_copy(HostSpace(), pa);
    auto const q = Kokkos::create_mirror_view_and_copy(HostSpace(), pb);
    auto const x = Kokkos::create_mirror_view_and_copy(HostSpace(), aa);
    auto const y = Kokkos::create_mirror_view_and_copy(HostSpace(), ab);
    std::size_t differ = 0;
    for (std::size_t i = 0; i < particles.num; ++i)
      differ += p(i) != q(i) || x(i, 0) != y(i, 0) || x(i, 1) != y(i, 1) || x(i, 2) != y(i, 2);
    EXPECT_EQ(differ, 0u) << when << ", rank " << world.rank();
  }

};

using test::drift;  // some particles cross the domain boundaries

// Device lambdas live in free functions (nvcc's extended-lambda rule).
// Every other particle onto one point: whoever owns that point would hold about half of all.
void gather_half(Particles<MemorySpace>& particles) {
  auto const pos = particles.pos;
  Kokkos::parallel_for(
      "test::gather", Kokkos::RangePolicy<ExecutionSpace>(0, particles.num), KOKKOS_LAMBDA(std::size_t i) {
        if (i % 2 == 0)
          for (int d = 0; d < 3; ++d) pos(i, d) = 0.125 * (d + 1);
      });
}

TEST_F(KeptDomainsTest, KeptDomainsGiveTheSameForcesAsNewOnes) {
  auto particles = make(6000);
  FMMConfig keep, renew;
  keep.domain_tolerance = 1.0;  // generous: the domains are kept after the first evaluation
  renew.domain_tolerance = 0;
  ForceSolver a(world, keep), b(world, renew);
  for (int step = 0; step < 4; ++step) {
    expect_same_forces(a, b, particles, "step " + std::to_string(step));
    EXPECT_FALSE(b.stats().domains_kept);
    EXPECT_EQ(a.stats().domains_kept, world.size() > 1 && step > 0) << "step " << step;
    drift(particles, 0.05);
  }
}

TEST_F(KeptDomainsTest, ALoadThatNoLongerBalancesGetsNewDomains) {
  if (world.size() == 1) GTEST_SKIP() << "one rank has one domain";
  auto particles = make(6000);
  FMMConfig keep, renew;
  keep.domain_tolerance = 0.2;
  renew.domain_tolerance = 0;
  ForceSolver a(world, keep), b(world, renew);
  expect_same_forces(a, b, particles, "first evaluation");
  gather_half(particles);
  expect_same_forces(a, b, particles, "after the gathering");
  EXPECT_FALSE(a.stats().domains_kept);
}

TEST_F(KeptDomainsTest, ToleranceOutsideItsRangeIsNamed) {
  FMMConfig config;
  config.domain_tolerance = -0.1;
  try {
    ForceSolver solver(world, config);
    ADD_FAILURE() << "no error";
  } catch (Error const& e) {
    EXPECT_NE(std::string(e.what()).find("domain_tolerance = -0.1 is outside [0, 10]"), std::string::npos) << e.what();
  }
}

// Boundaries handed in (from a restart) take effect only when they are R − 1 ascending keys,
// the same on every rank; anything else is an error on every rank, naming what is wrong.
TEST_F(KeptDomainsTest, SetSplittersChecksCountOrderAndAgreement) {
  FMMConfig config;
  config.domain_tolerance = 1.0;
  ForceSolver solver(world, config);
  auto const expect_error = [&](std::vector<std::uint64_t> const& keys, std::string const& part) {
    try {
      solver.set_domain_splitters(keys);
      ADD_FAILURE() << "no error for " << part << ", rank " << world.rank();
    } catch (Error const& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  std::size_t const bounds = std::size_t(world.size()) - 1;
  expect_error(std::vector<std::uint64_t>(bounds + 1, 7), "keys on rank");
  if (bounds >= 2) {
    std::vector<std::uint64_t> descending(bounds);
    for (std::size_t k = 0; k < bounds; ++k) descending[k] = bounds - k;
    expect_error(descending, "give ascending keys");
  }
  if (bounds >= 1) {
    std::vector<std::uint64_t> keys(bounds, 100);
    keys.back() += world.rank();  // ascending on every rank, different between them
    expect_error(keys, "the ranks give different key " + std::to_string(bounds - 1));
  }
  // Valid keys are taken as they are, and the next call keeps them.
  auto particles = make(6000);
  ScalarView<double> phi;
  Vec3View<double> acc;
  solver.compute_in_input_order(particles, phi, acc);
  auto const chosen = solver.domain_splitters();
  ASSERT_EQ(chosen.size(), bounds);
  ForceSolver restored(world, config);
  restored.set_domain_splitters(chosen);
  EXPECT_EQ(restored.domain_splitters(), chosen);
  restored.compute_in_input_order(particles, phi, acc);
  EXPECT_EQ(restored.stats().domains_kept, world.size() > 1);
  restored.set_domain_splitters({});
  EXPECT_TRUE(restored.domain_splitters().empty());
}

}  // namespace
