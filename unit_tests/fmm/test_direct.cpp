#include <kfmm/comm/initial_conditions.hpp>
#include <kfmm/core/kernel_shape.hpp>
#include <kfmm/fmm/direct.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace {

using kfmm::Context;
using kfmm::HostSpace;
using kfmm::Particles;
using kfmm::SofteningKind;

// ---- the spline kernel against the density it is the potential of -----------------------------

/// GADGET's cubic-spline density of unit mass with support h, at u = r/h < 1.
double spline_density(double u, double h) {
  double const shape = u < 0.5 ? 1 - 6 * u * u + 6 * u * u * u : 2 * (1 - u) * (1 - u) * (1 - u);
  return 8 / (M_PI * h * h * h) * shape;
}

/// Composite Simpson rule of f on [a, b].
template <class F>
double simpson(F const& f, double a, double b, int intervals = 2000) {
  double const step = (b - a) / intervals;
  double sum = f(a) + f(b);
  for (int k = 1; k < intervals; ++k) sum += (k % 2 ? 4 : 2) * f(a + k * step);
  return sum * step / 3;
}

/// Mass of the spline density within r (both branches integrated separately: the density has a
/// kink at u = 0.5).
double spline_enclosed_mass(double r, double h) {
  auto const shell = [h](double s) { return 4 * M_PI * s * s * spline_density(s / h, h); };
  if (r <= 0.5 * h) return simpson(shell, 0, r);
  return simpson(shell, 0, 0.5 * h) + simpson(shell, 0.5 * h, r);
}

struct KernelValue {
  double K, F;
};

KernelValue spline(double r, double h) {
  KernelValue v;
  kfmm::pair_kernel<SofteningKind::Spline, double>(r * r, h, v.K, v.F);
  return v;
}

TEST(Softening, NamesRoundTripAndBadNamesListTheValidOnes) {
  for (auto kind : {SofteningKind::Plummer, SofteningKind::Spline})
    EXPECT_EQ(kfmm::parse_softening_kind(kfmm::to_string(kind)), kind);
  try {
    kfmm::parse_softening_kind("cubic");
    FAIL() << "no error for an unknown softening kind";
  } catch (kfmm::Error const& e) {
    std::string const message = e.what();
    for (char const* word : {"'cubic'", "plummer", "spline"}) EXPECT_NE(message.find(word), std::string::npos) << message;
  }
  EXPECT_EQ(kfmm::softening_h(SofteningKind::Plummer, 0.01), 0.01);
  EXPECT_DOUBLE_EQ(kfmm::softening_h(SofteningKind::Spline, 0.01), 0.028);
}

TEST(Softening, SplineIsNewtonianBeyondHAndPlummerLikeAtTheCentre) {
  double const h = kfmm::softening_h(SofteningKind::Spline, 0.1);
  for (double r : {h, 1.5 * h, 10 * h}) {
    auto const v = spline(r, h);
    EXPECT_EQ(v.K, 1 / r);
    EXPECT_DOUBLE_EQ(v.F, 1 / (r * r * r));  // (1/r)³, within 4 ulp of 1/r³
  }
  EXPECT_NEAR(spline(0, h).K, 1 / 0.1, 1e-9);  // K(0) = 2.8/h = 1/ε
}

TEST(Softening, SplineIsContinuousAtHalfSupportAndAtTheSupport) {
  double const h = 0.7;
  for (double u : {0.5, 1.0}) {
    auto const below = spline(h * u * (1 - 1e-9), h), above = spline(h * u * (1 + 1e-9), h);
    EXPECT_NEAR(below.K / above.K, 1.0, 1e-6) << "u = " << u;
    EXPECT_NEAR(below.F / above.F, 1.0, 1e-6) << "u = " << u;
  }
}

TEST(Softening, SplineForceAndPotentialAreThoseOfTheSplineDensity) {
  double const h = 0.9;
  for (double u : {0.05, 0.3, 0.5, 0.62, 0.9}) {
    double const r = u * h;
    auto const v = spline(r, h);
    // Gauss: F·r³ = M(<r); potential: K(r) = 1/h + ∫_r^h F(s) s ds.
    EXPECT_NEAR(v.F * r * r * r / spline_enclosed_mass(r, h), 1.0, 1e-8) << "u = " << u;
    auto const force_times_s = [h](double s) { return spline(s, h).F * s; };
    double const tail = u < 0.5 ? simpson(force_times_s, r, 0.5 * h) + simpson(force_times_s, 0.5 * h, h)
                                : simpson(force_times_s, r, h);
    EXPECT_NEAR(v.K / (1 / h + tail), 1.0, 1e-8) << "u = " << u;
  }
}

// ---- direct_sum ------------------------------------------------------------------------------

struct Forces {
  std::vector<double> potential;
  std::vector<std::array<double, 3>> acceleration;
};

Particles<HostSpace> make_particles(std::vector<std::array<double, 3>> const& pos, std::vector<double> const& mass,
                                    std::vector<std::uint64_t> const& id) {
  Particles<HostSpace> p(pos.size());
  p.num = p.num_total = pos.size();
  for (std::size_t i = 0; i < pos.size(); ++i) {
    for (int c = 0; c < 3; ++c) {
      p.pos(i, c) = pos[i][c];
      p.vel(i, c) = 0;
    }
    p.mass(i) = mass[i];
    p.id(i) = id[i];
  }
  return p;
}

/// direct_sum at the particles `targets` (this rank's) due to `sources` (this rank's share).
Forces direct(Context const& context, Particles<HostSpace> const& sources, Particles<HostSpace> const& targets,
              SofteningKind kind, double eps, double G) {
  auto const device_sources = kfmm::to_device(sources);
  auto const device_targets = kfmm::to_device(targets);
  kfmm::ScalarView<double> potential("potential", targets.num);
  kfmm::Vec3View<double> acceleration("acceleration", targets.num);
  kfmm::direct_sum(context, device_sources, device_targets.pos, device_targets.id, kind, eps, G, potential,
                   acceleration);
  auto const phi = Kokkos::create_mirror_view_and_copy(HostSpace(), potential);
  auto const acc = Kokkos::create_mirror_view_and_copy(HostSpace(), acceleration);
  Forces forces;
  for (std::size_t i = 0; i < targets.num; ++i) {
    forces.potential.push_back(phi(i));
    forces.acceleration.push_back({acc(i, 0), acc(i, 1), acc(i, 2)});
  }
  return forces;
}

/// The particles of `all` that rank `rank` holds when particle k goes to rank k % size.
Particles<HostSpace> round_robin_share(Particles<HostSpace> const& all, Context const& context) {
  Particles<HostSpace> share(all.num);
  share.num_total = all.num;
  for (std::size_t k = std::size_t(context.rank()); k < all.num; k += std::size_t(context.size())) {
    share.copy_range(all, k, k + 1, share.num);
    ++share.num;
  }
  return share;
}

class TwoParticles : public testing::Test {
 protected:
  // Particle 1 of mass 0.3 at the origin, particle 2 of mass 0.7 at distance 1.3.
  Particles<HostSpace> const pair = make_particles({{0, 0, 0}, {0.3, -0.4, 1.2}}, {0.3, 0.7}, {1, 2});
  double const r = 1.3, G = 2;
  Context const context;

  /// Both particles are targets on every rank; the sources live on rank 0 only.
  Forces compute(SofteningKind kind, double eps) const {
    Particles<HostSpace> const none(0);
    return direct(context, context.is_root() ? pair : none, pair, kind, eps, G);
  }

  /// Checks φ_i = −G m_j K and a_i = −G m_j F (x_i − x_j) for both particles.
  void expect(Forces const& forces, double K, double F, double tolerance) const {
    for (int i = 0; i < 2; ++i) {
      int const j = 1 - i;
      double const m = pair.mass(j);
      EXPECT_NEAR(forces.potential[i], -G * m * K, tolerance * G * m * K) << "particle " << i;
      for (int c = 0; c < 3; ++c) {
        double const expected = -G * m * F * (pair.pos(i, c) - pair.pos(j, c));
        EXPECT_NEAR(forces.acceleration[i][c], expected, tolerance * G * m * F * r) << "particle " << i << " axis " << c;
      }
    }
  }
};

TEST_F(TwoParticles, PlummerMatchesTheFormula) {
  double const eps = 0.5, s2 = r * r + eps * eps;
  expect(compute(SofteningKind::Plummer, eps), 1 / std::sqrt(s2), std::pow(s2, -1.5), 1e-14);
}

TEST_F(TwoParticles, SplineBeyondHIsNewtonian) {
  expect(compute(SofteningKind::Spline, 0.3), 1 / r, 1 / (r * r * r), 1e-14);  // h = 0.84 < r
}

TEST_F(TwoParticles, SplineInsideHIsThePotentialOfTheSplineDensity) {
  for (double eps : {0.7, 1.0}) {  // u = 0.66 and 0.46: both branches
    double const h = 2.8 * eps;
    auto const force_times_s = [h](double s) { return spline(s, h).F * s; };
    double const F = spline_enclosed_mass(r, h) / (r * r * r);
    double const K = r / h < 0.5 ? 1 / h + simpson(force_times_s, r, 0.5 * h) + simpson(force_times_s, 0.5 * h, h)
                                 : 1 / h + simpson(force_times_s, r, h);
    SCOPED_TRACE("eps = " + std::to_string(eps));
    expect(compute(SofteningKind::Spline, eps), K, F, 1e-8);
  }
}

TEST(DirectSum, ThreeBodiesByHand) {
  Context const context;
  auto const all = make_particles({{0, 0, 0}, {1, 0, 0}, {0, 2, 0}}, {1, 2, 3}, {7, 8, 9});
  auto const mine = round_robin_share(all, context);
  auto const forces = direct(context, mine, mine, SofteningKind::Plummer, 0.0, 1.0);
  double const r23 = std::pow(5.0, 1.5);  // |x2 − x3|³
  double const potential[3] = {-3.5, -(1 + 3 / std::sqrt(5.0)), -(0.5 + 2 / std::sqrt(5.0))};
  double const acceleration[3][3] = {{2, 0.75, 0}, {-1 - 3 / r23, 6 / r23, 0}, {2 / r23, -0.25 - 4 / r23, 0}};
  for (std::size_t k = 0; k < mine.num; ++k) {
    std::size_t const i = mine.id(k) - 7;
    EXPECT_NEAR(forces.potential[k], potential[i], 1e-14) << "body " << i;
    for (int c = 0; c < 3; ++c) EXPECT_NEAR(forces.acceleration[k][c], acceleration[i][c], 1e-14) << "body " << i;
  }
}

/// 1000 Plummer-sphere particles with unequal masses, sliced over the ranks.
Particles<HostSpace> unequal_masses(Particles<HostSpace> particles) {
  for (std::size_t i = 0; i < particles.num; ++i) particles.mass(i) *= 1 + double(particles.id(i) % 7);
  return particles;
}

kfmm::ICOptions plummer_options(std::uint64_t n) {
  kfmm::ICOptions options;
  options.kind = kfmm::ICKind::Plummer;
  options.n_total = n;
  options.seed = 3;
  return options;
}

class EveryKernel : public testing::TestWithParam<SofteningKind> {};

TEST_P(EveryKernel, MomentumIsConserved) {
  Context const context;
  auto const particles = kfmm::to_device(unequal_masses(kfmm::make_initial_conditions(context, plummer_options(1000))));
  kfmm::ScalarView<double> potential;
  kfmm::Vec3View<double> acceleration;
  kfmm::direct_sum_all(context, particles, GetParam(), 0.05, 1.0, potential, acceleration);
  auto const acc = Kokkos::create_mirror_view_and_copy(HostSpace(), acceleration);
  auto const host = kfmm::to_host(particles);
  double sums[4] = {};  // Σ m a (3 components), Σ m |a|
  for (std::size_t i = 0; i < host.num; ++i) {
    for (int c = 0; c < 3; ++c) sums[c] += host.mass(i) * acc(i, c);
    sums[3] += host.mass(i) * std::sqrt(acc(i, 0) * acc(i, 0) + acc(i, 1) * acc(i, 1) + acc(i, 2) * acc(i, 2));
  }
  MPI_Allreduce(MPI_IN_PLACE, sums, 4, MPI_DOUBLE, MPI_SUM, context.comm());
  EXPECT_GT(sums[3], 0.0);
  EXPECT_LT(std::sqrt(sums[0] * sums[0] + sums[1] * sums[1] + sums[2] * sums[2]) / sums[3], 1e-12);
}

TEST_P(EveryKernel, DistributedSumEqualsTheOneRankSum) {
  Context const context, self(MPI_COMM_SELF);
  auto const options = plummer_options(1200);
  auto const local = kfmm::to_device(unequal_masses(kfmm::make_initial_conditions(context, options)));
  auto const everyone =
      kfmm::to_device(unequal_masses(kfmm::generate_initial_conditions(options, 0, 1, [](std::int64_t*, int) {})));
  double const eps = 0.02, G = 1.5;

  // Odd ranks ask for no targets the second time round.
  for (bool odd_ranks_idle : {false, true}) {
    std::size_t const n = odd_ranks_idle && context.rank() % 2 ? 0 : local.num;
    auto const ids = Kokkos::subview(local.id, Kokkos::make_pair(std::size_t(0), n));
    kfmm::ScalarView<double> phi("phi", n), phi_one("phi_one", n);
    kfmm::Vec3View<double> acc("acc", n), acc_one("acc_one", n);
    kfmm::direct_sum(context, local, local.pos, ids, GetParam(), eps, G, phi, acc);
    kfmm::direct_sum(self, everyone, local.pos, ids, GetParam(), eps, G, phi_one, acc_one);
    auto const p = Kokkos::create_mirror_view_and_copy(HostSpace(), phi);
    auto const p1 = Kokkos::create_mirror_view_and_copy(HostSpace(), phi_one);
    auto const a = Kokkos::create_mirror_view_and_copy(HostSpace(), acc);
    auto const a1 = Kokkos::create_mirror_view_and_copy(HostSpace(), acc_one);
    double max_potential = 0, max_acceleration = 0, potential_error = 0, acceleration_error = 0;
    for (std::size_t i = 0; i < n; ++i) {
      max_potential = std::max(max_potential, std::fabs(p1(i)));
      potential_error = std::max(potential_error, std::fabs(p(i) - p1(i)));
      for (int c = 0; c < 3; ++c) {
        max_acceleration = std::max(max_acceleration, std::fabs(a1(i, c)));
        acceleration_error = std::max(acceleration_error, std::fabs(a(i, c) - a1(i, c)));
      }
    }
    EXPECT_LE(potential_error, 1e-12 * max_potential) << "odd ranks idle: " << odd_ranks_idle;
    EXPECT_LE(acceleration_error, 1e-12 * max_acceleration) << "odd ranks idle: " << odd_ranks_idle;
  }
}

INSTANTIATE_TEST_SUITE_P(DirectSum, EveryKernel, testing::Values(SofteningKind::Plummer, SofteningKind::Spline),
                         [](testing::TestParamInfo<SofteningKind> const& info) { return kfmm::to_string(info.param); });

TEST(DirectSum, RepeatsBitForBitAndPadsWithNaN) {
  Context const context;
  auto const host = kfmm::make_initial_conditions(context, plummer_options(300));
  Particles<kfmm::MemorySpace> padded(host.num + 4);
  padded.assign(host);
  padded.fill_padding();
  kfmm::ScalarView<double> phi_a, phi_b;
  kfmm::Vec3View<double> acc_a, acc_b;
  kfmm::direct_sum_all(context, padded, SofteningKind::Spline, 0.01, 1.0, phi_a, acc_a);
  kfmm::direct_sum_all(context, padded, SofteningKind::Spline, 0.01, 1.0, phi_b, acc_b);
  auto const a = Kokkos::create_mirror_view_and_copy(HostSpace(), acc_a);
  auto const b = Kokkos::create_mirror_view_and_copy(HostSpace(), acc_b);
  auto const pa = Kokkos::create_mirror_view_and_copy(HostSpace(), phi_a);
  ASSERT_EQ(a.extent(0), padded.capacity());
  for (std::size_t i = 0; i < padded.num; ++i)
    for (int c = 0; c < 3; ++c) ASSERT_EQ(std::memcmp(&a(i, c), &b(i, c), sizeof(double)), 0);
  for (std::size_t i = padded.num; i < padded.capacity(); ++i) {
    EXPECT_TRUE(std::isnan(pa(i)));
    EXPECT_TRUE(std::isnan(a(i, 2)));
  }
}

// Both kernel shapes of the local sums, whatever the build: the GPU shape (a team per block of
// targets, sources in tiles in team scratch) sums every target's sources in the same order as the
// CPU shape, so both agree to the last bits, for any team size, with targets and sources that do
// not fill the last tile.
class DirectShapes : public testing::TestWithParam<SofteningKind> {
 protected:
  struct HostForces {
    std::vector<double> potential, acceleration;
  };

  static HostForces local_sums(Particles<kfmm::MemorySpace> const& sources, Particles<kfmm::MemorySpace> const& targets,
                               SofteningKind kind, bool gpu_shape, int team_size = 0) {
    std::size_t const n = targets.num;
    kfmm::ScalarView<double> potential("potential", n);
    kfmm::Vec3View<double> acceleration("acceleration", n);
    auto const ids = Kokkos::subview(targets.id, Kokkos::make_pair(std::size_t(0), n));
    kfmm::detail::direct_sum_local(kfmm::ExecutionSpace(), sources, targets.pos, ids, kind, 0.02, 1.5, potential,
                                   acceleration, gpu_shape, team_size);
    auto const p = Kokkos::create_mirror_view_and_copy(HostSpace(), potential);
    auto const a = Kokkos::create_mirror_view_and_copy(HostSpace(), acceleration);
    HostForces f;
    for (std::size_t i = 0; i < n; ++i) {
      f.potential.push_back(p(i));
      for (int c = 0; c < 3; ++c) f.acceleration.push_back(a(i, c));
    }
    return f;
  }
};

TEST_P(DirectShapes, GpuShapeEqualsCpuShapeForEveryTeamSize) {
  auto const host = unequal_masses(kfmm::generate_initial_conditions(plummer_options(700), 0, 1, [](std::int64_t*, int) {}));
  auto const sources = kfmm::to_device(host);
  // Targets: every third particle (they find themselves among the sources) and two outsiders.
  Particles<HostSpace> picked(host.num / 3 + 3);
  for (std::size_t i = 0; i < host.num; i += 3) {
    picked.copy_range(host, i, i + 1, picked.num);
    ++picked.num;
  }
  for (double x : {0.5, 40.0}) {
    std::size_t const t = picked.num++;
    for (int c = 0; c < 3; ++c) picked.pos(t, c) = x * (c + 1);
    picked.id(t) = 1u << 30;
  }
  auto const targets = kfmm::to_device(picked);
  auto const cpu = local_sums(sources, targets, GetParam(), false);
  auto const gpu = local_sums(sources, targets, GetParam(), true);
  ASSERT_EQ(cpu.potential.size(), picked.num);
  double scale = 0;
  for (double a : cpu.acceleration) scale = std::max(scale, std::fabs(a));
  for (std::size_t i = 0; i < picked.num; ++i) {
    EXPECT_NEAR(gpu.potential[i], cpu.potential[i], 1e-14 * std::fabs(cpu.potential[i])) << i;
    for (int c = 0; c < 3; ++c)
      EXPECT_NEAR(gpu.acceleration[3 * i + c], cpu.acceleration[3 * i + c], 1e-14 * scale) << i;
  }
  int const largest = kfmm::compat::concurrency(kfmm::ExecutionSpace());
  for (int team : {1, 2, 3}) {
    if (team > largest) continue;
    auto const other = local_sums(sources, targets, GetParam(), true, team);
    EXPECT_EQ(std::memcmp(other.potential.data(), gpu.potential.data(), gpu.potential.size() * sizeof(double)), 0)
        << "team size " << team;
    EXPECT_EQ(std::memcmp(other.acceleration.data(), gpu.acceleration.data(),
                          gpu.acceleration.size() * sizeof(double)),
              0)
        << "team size " << team;
  }
  // direct_sum on this rank alone takes the requested shape (GPU backends: always the GPU one).
  Context const self(MPI_COMM_SELF);
  for (auto shape : {kfmm::KernelShape::Cpu, kfmm::KernelShape::Gpu}) {
    kfmm::ScopedKernelShape const scope(shape);
    kfmm::ScalarView<double> phi("phi", picked.num);
    kfmm::Vec3View<double> acc("acc", picked.num);
    auto const ids = Kokkos::subview(targets.id, Kokkos::make_pair(std::size_t(0), picked.num));
    kfmm::direct_sum(self, sources, targets.pos, ids, GetParam(), 0.02, 1.5, phi, acc);
    auto const p = Kokkos::create_mirror_view_and_copy(HostSpace(), phi);
    auto const& selected = kfmm::use_gpu_shape<kfmm::ExecutionSpace>() ? gpu : cpu;
    for (std::size_t i = 0; i < picked.num; ++i) EXPECT_EQ(p(i), selected.potential[i]) << kfmm::to_string(shape) << " " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(DirectSum, DirectShapes, testing::Values(SofteningKind::Plummer, SofteningKind::Spline),
                         [](testing::TestParamInfo<SofteningKind> const& info) { return kfmm::to_string(info.param); });

TEST(DirectSum, BadArgumentsOnOneRankThrowOnAll) {
  Context const context;
  auto const particles = kfmm::to_device(kfmm::make_initial_conditions(context, plummer_options(100)));
  // Rank 0's potential has one row too few.
  std::size_t const rows = context.is_root() ? particles.num - 1 : particles.num;
  kfmm::ScalarView<double> potential("potential", rows);
  kfmm::Vec3View<double> acceleration("acceleration", particles.num);
  auto const ids = Kokkos::subview(particles.id, Kokkos::make_pair(std::size_t(0), particles.num));
  try {
    kfmm::direct_sum(context, particles, particles.pos, ids, SofteningKind::Plummer, 0.01, 1, potential, acceleration);
    FAIL() << "no error for a short potential View";
  } catch (kfmm::Error const& e) {
    EXPECT_NE(std::string(e.what()).find("potential has"), std::string::npos) << e.what();
  }
  kfmm::ScalarView<double> long_enough("potential", particles.num);
  EXPECT_THROW(kfmm::direct_sum(context, particles, particles.pos, ids, SofteningKind::Plummer, -1.0, 1.0, long_enough,
                                acceleration),
               kfmm::Error);
}

}  // namespace
