#include <kfmm/core/initial_conditions.hpp>
#include <kfmm/core/random.hpp>

#include <gtest/gtest.h>

#include <initial_conditions_checks.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace {

using kfmm::test_support::single_rank_sums;
using kfmm::test_support::virial_ratio;

using kfmm::HostSpace;
using kfmm::ICKind;
using kfmm::ICOptions;
using kfmm::Particles;

Particles<HostSpace> generate(ICKind kind, std::uint64_t n, std::uint64_t seed = 42) {
  ICOptions options;
  options.kind = kind;
  options.n_total = n;
  options.seed = seed;
  return kfmm::generate_initial_conditions(options, 0, 1, single_rank_sums);
}

/// Simulated MPI_Allreduce for slice `rank` of `nranks` in one process: adds the local sums of
/// every other slice, which it learns by generating those slices and capturing their sums.
kfmm::IntegerAllreduce simulated_allreduce(ICOptions const& options, int rank, int nranks) {
  return [=](std::int64_t* values, int count) {
    std::vector<std::int64_t> total(values, values + count);
    for (int other = 0; other < nranks; ++other) {
      if (other == rank) continue;
      kfmm::generate_initial_conditions(options, other, nranks, [&](std::int64_t* local, int n) {
        for (int k = 0; k < n; ++k) total[k] += local[k];
      });
    }
    std::copy(total.begin(), total.end(), values);
  };
}

bool bitwise_equal(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

double radius(Particles<HostSpace> const& p, std::size_t i) {
  return std::sqrt(p.pos(i, 0) * p.pos(i, 0) + p.pos(i, 1) * p.pos(i, 1) + p.pos(i, 2) * p.pos(i, 2));
}

double median_radius(Particles<HostSpace> const& p) {
  std::vector<double> radii(p.num);
  for (std::size_t i = 0; i < p.num; ++i) radii[i] = radius(p, i);
  std::nth_element(radii.begin(), radii.begin() + radii.size() / 2, radii.end());
  return radii[radii.size() / 2];
}

double centre_of_mass_norm(Particles<HostSpace> const& p, Kokkos::View<double* [3], Kokkos::LayoutLeft, HostSpace> field) {
  double norm2 = 0;
  for (int c = 0; c < 3; ++c) {
    double sum = 0;
    for (std::size_t i = 0; i < p.num; ++i) sum += p.mass(i) * field(i, c);
    norm2 += sum * sum;
  }
  return std::sqrt(norm2);
}

// ---- the generator ----------------------------------------------------------------------------

TEST(CounterRandom, PhiloxMatchesRandom123KnownAnswers) {
  struct Case {
    kfmm::Philox4x32 counter;
    std::uint32_t key[2];
    std::uint32_t expected[4];
  };
  Case const cases[] = {
      {{{0, 0, 0, 0}}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{{~0u, ~0u, ~0u, ~0u}}, {~0u, ~0u}, {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (auto const& c : cases) {
    auto const out = kfmm::philox4x32_10(c.counter, c.key[0], c.key[1]);
    for (int k = 0; k < 4; ++k) EXPECT_EQ(out.word[k], c.expected[k]) << "word " << k;
  }
}

TEST(CounterRandom, UniformAndNormalMoments) {
  kfmm::CounterRandom random(7, kfmm::RandomStream::Particle, 3);
  int const n = 200000;
  double u_sum = 0, u_min = 1, u_max = 0, g_sum = 0, g2_sum = 0, g4_sum = 0;
  for (int k = 0; k < n; ++k) {
    double const u = random.uniform();
    u_sum += u;
    u_min = std::min(u_min, u);
    u_max = std::max(u_max, u);
    double const g = random.normal();
    g_sum += g;
    g2_sum += g * g;
    g4_sum += g * g * g * g;
  }
  EXPECT_GT(u_min, 0.0);
  EXPECT_LT(u_max, 1.0);
  EXPECT_NEAR(u_sum / n, 0.5, 0.003);
  EXPECT_NEAR(g_sum / n, 0.0, 0.01);
  EXPECT_NEAR(g2_sum / n, 1.0, 0.01);
  EXPECT_NEAR(g4_sum / n, 3.0, 0.05);
}

TEST(CounterRandom, StreamsAreIndependentOfOneAnother) {
  kfmm::CounterRandom a(1, kfmm::RandomStream::Particle, 0), b(1, kfmm::RandomStream::Particle, 1),
      c(1, kfmm::RandomStream::Model, 0), d(2, kfmm::RandomStream::Particle, 0);
  double const first = a.uniform();
  EXPECT_NE(first, b.uniform());
  EXPECT_NE(first, c.uniform());
  EXPECT_NE(first, d.uniform());
}

// A free function: nvcc allows device lambdas in free and public member functions only, and
// GoogleTest's test bodies are private.
Kokkos::View<double*> draw_on_device(int n) {
  Kokkos::View<double*> device("kfmm::test::draws", n);
  Kokkos::parallel_for(
      "kfmm::test::draw", Kokkos::RangePolicy<kfmm::ExecutionSpace>(0, n), KOKKOS_LAMBDA(int i) {
        kfmm::CounterRandom random(11, kfmm::RandomStream::Particle, std::uint64_t(i));
        random.uniform();
        device(i) = random.normal();
      });
  return device;
}

TEST(CounterRandom, DeviceDrawsEqualHostDraws) {
  int const n = 64;
  auto const device = draw_on_device(n);
  auto const host = Kokkos::create_mirror_view_and_copy(HostSpace(), device);
  for (int i = 0; i < n; ++i) {
    kfmm::CounterRandom random(11, kfmm::RandomStream::Particle, std::uint64_t(i));
    random.uniform();
    EXPECT_TRUE(bitwise_equal(host(i), random.normal())) << "particle " << i;
  }
}

// ---- names and options ------------------------------------------------------------------------

TEST(InitialConditions, KindNamesRoundTrip) {
  ASSERT_EQ(kfmm::all_ic_kinds().size(), 9u);
  for (auto kind : kfmm::all_ic_kinds()) EXPECT_EQ(kfmm::parse_ic_kind(kfmm::to_string(kind)), kind);
  EXPECT_EQ(kfmm::parse_ic_kind("gaussian_clumps"), ICKind::GaussianClumps);
}

TEST(InitialConditions, BadKindNameListsTheValidKinds) {
  try {
    kfmm::parse_ic_kind("plumer");
    FAIL() << "no error for an unknown kind";
  } catch (kfmm::Error const& e) {
    std::string const message = e.what();
    for (char const* word : {"'plumer'", "clumps", "plummer", "hernquist", "uniform", "nfw", "satellites",
                             "mass_spectrum", "disk", "filament"})
      EXPECT_NE(message.find(word), std::string::npos) << message;
  }
}

TEST(InitialConditions, InvalidOptionsAreNamed) {
  ICOptions options;
  options.n_total = 0;
  EXPECT_THROW(kfmm::generate_initial_conditions(options, 0, 1, single_rank_sums), kfmm::Error);
  options = ICOptions{};
  options.kind = ICKind::Plummer;
  options.truncation_radius = -1;
  try {
    options.validate();
    FAIL() << "no error for a negative truncation radius";
  } catch (kfmm::Error const& e) {
    EXPECT_NE(std::string(e.what()).find("truncation_radius = -1"), std::string::npos) << e.what();
  }
  options.truncation_radius = 100;
  options.n_total = std::uint64_t(1) << 40;
  EXPECT_THROW(options.validate(), kfmm::Error);
  EXPECT_THROW(kfmm::generate_initial_conditions(ICOptions{}, 3, 3, single_rank_sums), kfmm::Error);
}

// ---- every kind -------------------------------------------------------------------------------

class EveryKind : public testing::TestWithParam<ICKind> {};

TEST_P(EveryKind, MassesSumToOneAndIdsCountFromOne) {
  std::uint64_t const n = 1000;
  auto const p = generate(GetParam(), n);
  ASSERT_EQ(p.num, n);
  EXPECT_EQ(p.num_total, n);
  // Masses are equal except for the satellites (per component) and the mass spectrum.
  bool const equal = GetParam() != ICKind::Satellites && GetParam() != ICKind::MassSpectrum;
  double total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (equal) EXPECT_EQ(p.mass(i), 1.0 / double(n));
    EXPECT_GT(p.mass(i), 0.0);
    EXPECT_EQ(p.id(i), i + 1);
    total += p.mass(i);
  }
  EXPECT_NEAR(total, 1.0, 1e-12);
}

TEST_P(EveryKind, SameSeedIsIdenticalAndOtherSeedDiffers) {
  auto const a = generate(GetParam(), 500, 5), b = generate(GetParam(), 500, 5), c = generate(GetParam(), 500, 6);
  std::size_t differing = 0;
  for (std::size_t i = 0; i < 500; ++i) {
    EXPECT_TRUE(bitwise_equal(a.mass(i), b.mass(i)));
    for (int k = 0; k < 3; ++k) {
      EXPECT_TRUE(bitwise_equal(a.pos(i, k), b.pos(i, k)));
      EXPECT_TRUE(bitwise_equal(a.vel(i, k), b.vel(i, k)));
      differing += a.pos(i, k) != c.pos(i, k);
    }
  }
  EXPECT_EQ(differing, 1500u);
}

TEST_P(EveryKind, SlicesOfAnyRankCountConcatenateToTheOneRankSet) {
  ICOptions options;
  options.kind = GetParam();
  options.n_total = 613;
  auto const whole = kfmm::generate_initial_conditions(options, 0, 1, single_rank_sums);
  for (int nranks = 1; nranks <= 5; ++nranks) {
    std::size_t next = 0;
    for (int rank = 0; rank < nranks; ++rank) {
      auto const slice =
          kfmm::generate_initial_conditions(options, rank, nranks, simulated_allreduce(options, rank, nranks));
      EXPECT_EQ(slice.num_total, options.n_total);
      for (std::size_t k = 0; k < slice.num; ++k, ++next) {
        ASSERT_EQ(slice.id(k), whole.id(next)) << nranks << " ranks, rank " << rank;
        ASSERT_TRUE(bitwise_equal(slice.mass(k), whole.mass(next)));
        for (int c = 0; c < 3; ++c) {
          ASSERT_TRUE(bitwise_equal(slice.pos(k, c), whole.pos(next, c))) << nranks << " ranks, id " << slice.id(k);
          ASSERT_TRUE(bitwise_equal(slice.vel(k, c), whole.vel(next, c))) << nranks << " ranks, id " << slice.id(k);
        }
      }
    }
    EXPECT_EQ(next, whole.num) << nranks << " ranks";
  }
}

INSTANTIATE_TEST_SUITE_P(InitialConditions, EveryKind, testing::ValuesIn(kfmm::all_ic_kinds()),
                         [](testing::TestParamInfo<ICKind> const& info) { return kfmm::to_string(info.param); });

// ---- the models -------------------------------------------------------------------------------

TEST(InitialConditions, UniformFillsTheUnitCubeAtRest) {
  auto const p = generate(ICKind::Uniform, 20000);
  for (int c = 0; c < 3; ++c) {
    double sum = 0;
    for (std::size_t i = 0; i < p.num; ++i) {
      ASSERT_GE(p.pos(i, c), 0.0);
      ASSERT_LT(p.pos(i, c), 1.0);
      ASSERT_EQ(p.vel(i, c), 0.0);
      sum += p.pos(i, c);
    }
    EXPECT_NEAR(sum / p.num, 0.5, 0.01);  // σ of the mean = 0.002
  }
}

TEST(InitialConditions, ClumpParticlesScatterByOneAroundTheirClumps) {
  ICOptions options;
  options.n_total = 20000;
  auto const p = kfmm::generate_initial_conditions(options, 0, 1, single_rank_sums);
  auto const clumps = kfmm::gaussian_clumps(options);
  ASSERT_EQ(clumps.size(), 20u);

  // Clump centres are spread by 30 per axis, bulk velocities by 20 around −2·centre.
  double centre2 = 0, bulk2 = 0;
  for (auto const& clump : clumps)
    for (int c = 0; c < 3; ++c) {
      centre2 += clump.centre[c] * clump.centre[c];
      bulk2 += (clump.velocity[c] + 2 * clump.centre[c]) * (clump.velocity[c] + 2 * clump.centre[c]);
    }
  EXPECT_NEAR(std::sqrt(centre2 / 60), 30.0, 8.0);
  EXPECT_NEAR(std::sqrt(bulk2 / 60), 20.0, 6.0);

  // Each particle is near a clump: the distance to the nearest centre is chi-distributed with
  // 3 degrees of freedom (mean 2√(2/π) = 1.596), offsets and velocities have σ = 1 and 20.
  std::vector<std::size_t> members(clumps.size(), 0);
  double distance_sum = 0, offset2 = 0, velocity2 = 0;
  for (std::size_t i = 0; i < p.num; ++i) {
    std::size_t nearest = 0;
    double nearest2 = INFINITY;
    for (std::size_t k = 0; k < clumps.size(); ++k) {
      double d2 = 0;
      for (int c = 0; c < 3; ++c) d2 += std::pow(p.pos(i, c) - clumps[k].centre[c], 2);
      if (d2 < nearest2) nearest2 = d2, nearest = k;
    }
    ++members[nearest];
    distance_sum += std::sqrt(nearest2);
    offset2 += nearest2;
    for (int c = 0; c < 3; ++c) velocity2 += std::pow(p.vel(i, c) - clumps[nearest].velocity[c], 2);
  }
  EXPECT_NEAR(distance_sum / p.num, 2 * std::sqrt(2 / M_PI), 0.03);
  EXPECT_NEAR(std::sqrt(offset2 / (3.0 * p.num)), 1.0, 0.03);
  EXPECT_NEAR(std::sqrt(velocity2 / (3.0 * p.num)), 20.0, 0.5);
  for (std::size_t k = 0; k < clumps.size(); ++k) EXPECT_NEAR(double(members[k]), 1000.0, 150.0) << "clump " << k;
}

TEST(InitialConditions, PlummerIsCentredVirialisedAndHasItsHalfMassRadius) {
  ICOptions options;
  options.kind = ICKind::Plummer;
  options.n_total = 4000;
  auto const p = kfmm::generate_initial_conditions(options, 0, 1, single_rank_sums);
  EXPECT_LT(centre_of_mass_norm(p, p.pos), 1e-10);
  EXPECT_LT(centre_of_mass_norm(p, p.vel), 1e-10);
  for (std::size_t i = 0; i < p.num; ++i) ASSERT_LE(radius(p, i), options.truncation_radius * 1.001);
  // Velocities are in equilibrium with the untruncated potential while the masses 1/N put all
  // the mass within r_t, so 2K/|W| = M(r_t) = 0.99985.
  EXPECT_NEAR(virial_ratio(p) / std::pow(1 + 1e-4, -1.5), 1.0, 0.05);
  // Half of the mass within r_t = 100: M(r) = r³/(1+r²)^{3/2}, a = 1 (1.3048; N = 40000 makes
  // the sampling error of the median 0.6 %).
  options.n_total = 40000;
  double const half = 0.5 * std::pow(1 + 1e-4, -1.5);
  double const expected = 1 / std::sqrt(std::pow(half, -2.0 / 3.0) - 1);
  EXPECT_NEAR(median_radius(kfmm::generate_initial_conditions(options, 0, 1, single_rank_sums)) / expected, 1.0, 0.05);
}

TEST(InitialConditions, HernquistIsCentredVirialisedAndHasItsHalfMassRadius) {
  ICOptions options;
  options.kind = ICKind::Hernquist;
  options.n_total = 4000;
  auto const p = kfmm::generate_initial_conditions(options, 0, 1, single_rank_sums);
  EXPECT_LT(centre_of_mass_norm(p, p.pos), 1e-10);
  EXPECT_LT(centre_of_mass_norm(p, p.vel), 1e-10);
  for (std::size_t i = 0; i < p.num; ++i) ASSERT_LE(radius(p, i), options.truncation_radius * 1.001);
  // As for Plummer, 2K/|W| = M(r_t) = (100/101)² = 0.980.
  EXPECT_NEAR(virial_ratio(p) / std::pow(100.0 / 101.0, 2), 1.0, 0.05);
  // Half of the mass within r_t = 100: M(r) = r²/(1+r)², so 2.335 (1 + √2 = 2.414 untruncated;
  // N = 40000 makes the sampling error of the median 0.8 %).
  options.n_total = 40000;
  double const root = std::sqrt(0.5) * (100.0 / 101.0);
  double const expected = root / (1 - root);
  EXPECT_NEAR(median_radius(kfmm::generate_initial_conditions(options, 0, 1, single_rank_sums)) / expected, 1.0, 0.07);
}

}  // namespace
