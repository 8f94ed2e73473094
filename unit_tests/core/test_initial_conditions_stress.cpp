// The initial-condition kinds that stress the opening criterion (nfw, satellites, mass_spectrum,
// disk, filament): each property below fails if its generator draws the wrong distribution.
// Rank-count independence and seeds are checked for every kind in test_initial_conditions.cpp.
#include <kfmm/core/error.hpp>
#include <kfmm/core/initial_conditions.hpp>

#include <gtest/gtest.h>

#include <initial_conditions_checks.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace {

using kfmm::test_support::single_rank_sums;
using kfmm::test_support::virial_ratio;

using kfmm::HostSpace;
using kfmm::ICKind;
using kfmm::ICOptions;
using kfmm::Particles;
using Field = kfmm::Vec3View<double, HostSpace>;
using Point = std::array<double, 3>;

ICOptions options_for(ICKind kind, std::uint64_t n) {
  ICOptions options;
  options.kind = kind;
  options.n_total = n;
  return options;
}

Particles<HostSpace> generate(ICOptions const& options) {
  return kfmm::generate_initial_conditions(options, 0, 1, single_rank_sums);
}

double distance(Particles<HostSpace> const& p, std::size_t i, Point const& centre) {
  double d2 = 0;
  for (int c = 0; c < 3; ++c) d2 += (p.pos(i, c) - centre[c]) * (p.pos(i, c) - centre[c]);
  return std::sqrt(d2);
}

/// Per-coordinate median of the positions of particles [begin, end): the centre of a symmetric
/// model, robust against the shift to the centre-of-mass frame and against outliers.
Point median_position(Particles<HostSpace> const& p, std::size_t begin, std::size_t end) {
  Point median{};
  std::vector<double> values(end - begin);
  for (int c = 0; c < 3; ++c) {
    for (std::size_t i = begin; i < end; ++i) values[i - begin] = p.pos(i, c);
    std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
    median[c] = values[values.size() / 2];
  }
  return median;
}

Point mean_velocity(Particles<HostSpace> const& p, std::size_t begin, std::size_t end) {
  Point mean{};
  for (std::size_t i = begin; i < end; ++i)
    for (int c = 0; c < 3; ++c) mean[c] += p.vel(i, c) / double(end - begin);
  return mean;
}

/// |Σ m x| of a field (the centre of mass times the total mass 1).
double mass_weighted_norm(Particles<HostSpace> const& p, Field const& field) {
  double norm2 = 0;
  for (int c = 0; c < 3; ++c) {
    double sum = 0;
    for (std::size_t i = 0; i < p.num; ++i) sum += p.mass(i) * field(i, c);
    norm2 += sum * sum;
  }
  return std::sqrt(norm2);
}

long double total_mass(Particles<HostSpace> const& p, std::size_t begin, std::size_t end) {
  long double sum = 0;
  for (std::size_t i = begin; i < end; ++i) sum += p.mass(i);
  return sum;
}

/// Fraction of particles [begin, end) within `r` of `centre`.
double fraction_within(Particles<HostSpace> const& p, std::size_t begin, std::size_t end, Point const& centre,
                       double r) {
  std::size_t inside = 0;
  for (std::size_t i = begin; i < end; ++i) inside += distance(p, i, centre) < r;
  return double(inside) / double(end - begin);
}

/// A sampled fraction of `count` draws against its expectation, within 4 binomial deviations.
void expect_binomial(double measured, double expected, std::size_t count, std::string const& what) {
  double const deviation = std::sqrt(expected * (1 - expected) / double(count));
  EXPECT_NEAR(measured, expected, 4 * deviation) << what;
}

// ---- nfw -----------------------------------------------------------------------------------------

double nfw_mu(double r) { return std::log1p(r) - r / (1 + r); }

/// σ_r²(r) of the isotropic Jeans equation of NFW truncated at r_t (mass 1 within r_t), by
/// Simpson's rule in ln r, independent of the generator's table.
double nfw_dispersion2(double r, double r_t) {
  int const intervals = 2000;
  double const low = std::log(r), h = (std::log(r_t) - low) / intervals;
  double sum = 0;
  for (int k = 0; k <= intervals; ++k) {
    double const x = std::exp(low + k * h);
    double const value = nfw_mu(x) / (x * x * (1 + x) * (1 + x));
    sum += value * (k == 0 || k == intervals ? 1 : (k % 2 ? 4 : 2));
  }
  return r * (1 + r) * (1 + r) * sum * h / 3 / nfw_mu(r_t);
}

TEST(InitialConditions, NfwEnclosedMassFollowsTheTruncatedProfile) {
  auto const options = options_for(ICKind::NFW, 20000);
  auto const p = generate(options);
  EXPECT_LT(mass_weighted_norm(p, p.pos), 1e-10);
  EXPECT_LT(mass_weighted_norm(p, p.vel), 1e-10);
  Point const centre = median_position(p, 0, p.num);
  for (std::size_t i = 0; i < p.num; ++i) ASSERT_LE(distance(p, i, centre), options.truncation_radius + 0.1);
  for (double r : {0.3, 1.0, 3.0, 10.0, 30.0})
    expect_binomial(fraction_within(p, 0, p.num, centre, r), nfw_mu(r) / nfw_mu(options.truncation_radius), p.num,
                    "M(<" + std::to_string(r) + ")");
}

TEST(InitialConditions, NfwVelocitiesSolveTheJeansEquation) {
  auto const options = options_for(ICKind::NFW, 20000);
  auto const p = generate(options);
  Point const centre = median_position(p, 0, p.num);
  // Σv² of the particles in a shell against Σ3σ²(r_i): Gaussian v² has relative spread √(2/3).
  for (double r : {0.3, 1.0, 3.0, 10.0, 30.0}) {
    double measured = 0, expected = 0;
    std::size_t count = 0;
    for (std::size_t i = 0; i < p.num; ++i) {
      double const d = distance(p, i, centre);
      if (d < r / 1.3 || d > r * 1.3) continue;
      ++count;
      measured += p.vel(i, 0) * p.vel(i, 0) + p.vel(i, 1) * p.vel(i, 1) + p.vel(i, 2) * p.vel(i, 2);
      expected += 3 * nfw_dispersion2(d, options.truncation_radius);
    }
    ASSERT_GT(count, 100u) << "shell at r = " << r;
    EXPECT_NEAR(measured / expected, 1.0, 4 * std::sqrt(2.0 / 3.0 / double(count))) << "shell at r = " << r;
  }
  // A truncated model with σ → 0 at r_t has no surface pressure: 2K/|W| = 1 (sampling spread
  // 0.025 at this N; a 10 % error of σ moves it by 0.21).
  EXPECT_NEAR(virial_ratio(generate(options_for(ICKind::NFW, 4000))), 1.0, 0.08);
}

// ---- satellites -------------------------------------------------------------------------------

double hernquist_mass(double r) { return r * r / ((1 + r) * (1 + r)); }

TEST(InitialConditions, SatellitesOrbitInTheHaloAtTheirRadii) {
  auto options = options_for(ICKind::Satellites, 20000);
  options.truncation_radius = 200;
  auto const satellites = kfmm::halo_satellites(options);
  ASSERT_EQ(satellites.size(), 5u);
  for (auto const& s : satellites) {
    double const r = std::sqrt(s.centre[0] * s.centre[0] + s.centre[1] * s.centre[1] + s.centre[2] * s.centre[2]);
    double const v2 = s.velocity[0] * s.velocity[0] + s.velocity[1] * s.velocity[1] + s.velocity[2] * s.velocity[2];
    double const radial = s.velocity[0] * s.centre[0] + s.velocity[1] * s.centre[1] + s.velocity[2] * s.centre[2];
    EXPECT_GE(r, 0.5);
    EXPECT_LE(r, 20.0);
    // Circular: perpendicular to the radius, v² = G M_halo(<r)/r with the halo's 80 %.
    EXPECT_LT(std::fabs(radial), 1e-12 * r * std::sqrt(v2));
    EXPECT_NEAR(v2 * r / (0.8 * hernquist_mass(r) / hernquist_mass(200)), 1.0, 1e-12);
  }
  options.seed = 43;
  EXPECT_NE(kfmm::halo_satellites(options)[0].centre[0], satellites[0].centre[0]);
}

TEST(InitialConditions, SatellitesAreDenseAndTheHaloAndBackgroundHoldTheRest) {
  auto options = options_for(ICKind::Satellites, 20000);
  options.truncation_radius = 200;
  auto const p = generate(options);
  auto const satellites = kfmm::halo_satellites(options);
  auto const begins = kfmm::satellite_component_begins(options);
  ASSERT_EQ(begins.size(), 8u);  // halo, 5 satellites, background, end
  EXPECT_EQ(begins.back(), p.num);
  EXPECT_LT(mass_weighted_norm(p, p.pos), 1e-10);
  EXPECT_LT(mass_weighted_norm(p, p.vel), 1e-10);
  EXPECT_NEAR(double(total_mass(p, 0, p.num)), 1.0, 1e-12);
  double const fractions[7] = {0.8, 0.03, 0.03, 0.03, 0.03, 0.03, 0.05};
  for (std::size_t c = 0; c < 7; ++c)
    EXPECT_NEAR(double(total_mass(p, begins[c], begins[c + 1])), fractions[c], 1e-12) << "component " << c;

  // The whole model moved by one vector: the halo's centre. Its particles follow the truncated
  // Hernquist profile around it.
  Point const halo = median_position(p, 0, begins[1]);
  for (double r : {0.5, 2.0, 10.0, 50.0})
    expect_binomial(fraction_within(p, 0, begins[1], halo, r), hernquist_mass(r) / hernquist_mass(200),
                    begins[1], "halo M(<" + std::to_string(r) + ")");

  // The background is at rest in the halo frame, so its velocity is the frame's velocity.
  Point frame_velocity;
  for (int c = 0; c < 3; ++c) frame_velocity[c] = p.vel(begins[6], c);
  for (std::size_t i = begins[6]; i < begins[7]; ++i)
    for (int c = 0; c < 3; ++c) {
      ASSERT_LE(std::fabs(p.pos(i, c) - halo[c]), 200.05);
      ASSERT_EQ(p.vel(i, c), frame_velocity[c]);
    }

  for (std::size_t k = 0; k < satellites.size(); ++k) {
    std::size_t const begin = begins[k + 1], end = begins[k + 2];
    // Each satellite sits at its drawn centre (relative to the halo) ...
    Point const median = median_position(p, begin, end);
    Point centre;
    for (int c = 0; c < 3; ++c) {
      centre[c] = halo[c] + satellites[k].centre[c];
      EXPECT_NEAR(median[c], centre[c], 0.02) << "satellite " << k << " axis " << c;
    }
    // ... holds 3 % of the mass with 94.3 % of it within 5 Plummer radii (0.1 halo radii; the
    // halo adds up to 0.0004 there) ...
    double inside = 0;
    for (std::size_t i = 0; i < p.num; ++i)
      if (distance(p, i, centre) < 0.1) inside += p.mass(i);
    double const plummer = std::pow(1 + 1.0 / 25, -1.5) / std::pow(1 + 1e-4, -1.5);
    EXPECT_NEAR(inside, 0.03 * plummer + 0.0002, 0.0014) << "satellite " << k;
    // ... and moves on its circular orbit (internal 1D dispersion 0.38: 0.016 for the mean).
    Point const velocity = mean_velocity(p, begin, end);
    for (int c = 0; c < 3; ++c)
      EXPECT_NEAR(velocity[c], satellites[k].velocity[c] + frame_velocity[c], 0.08) << "satellite " << k;
  }
}

// ---- mass spectrum ------------------------------------------------------------------------------

TEST(InitialConditions, MassSpectrumSpansItsDecadesAndSumsToOne) {
  auto const options = options_for(ICKind::MassSpectrum, 20000);
  auto const p = generate(options);
  double lightest = 1, heaviest = 0;
  for (std::size_t i = 0; i < p.num; ++i) {
    lightest = std::min(lightest, p.mass(i));
    heaviest = std::max(heaviest, p.mass(i));
  }
  EXPECT_GE(heaviest / lightest, std::pow(10.0, options.mass_decades - 0.1));
  EXPECT_LE(heaviest / lightest, std::pow(10.0, options.mass_decades));
  EXPECT_NEAR(double(total_mass(p, 0, p.num)), 1.0, 1e-12);
  // Log-uniform: half of the particles in the upper half of the decades.
  std::size_t upper = 0;
  for (std::size_t i = 0; i < p.num; ++i) upper += p.mass(i) > heaviest * std::pow(10.0, -options.mass_decades / 2);
  expect_binomial(double(upper) / double(p.num), 0.5, p.num, "upper half of the decades");
  // The centre of mass is mass-weighted.
  EXPECT_LT(mass_weighted_norm(p, p.pos), 1e-10);
  EXPECT_LT(mass_weighted_norm(p, p.vel), 1e-10);

  // Positions and velocities are the hernquist kind's, moved by one vector.
  auto hernquist_options = options;
  hernquist_options.kind = ICKind::Hernquist;
  auto const h = generate(hernquist_options);
  for (std::size_t i = 0; i < p.num; ++i)
    for (int c = 0; c < 3; ++c) {
      ASSERT_NEAR(p.pos(i, c) - h.pos(i, c), p.pos(0, c) - h.pos(0, c), 1e-12);
      ASSERT_NEAR(p.vel(i, c) - h.vel(i, c), p.vel(0, c) - h.vel(0, c), 1e-12);
    }

  // Zero decades: equal masses.
  auto equal_options = options_for(ICKind::MassSpectrum, 1000);
  equal_options.mass_decades = 0;
  auto const equal = generate(equal_options);
  for (std::size_t i = 0; i < equal.num; ++i) ASSERT_EQ(equal.mass(i), 1.0 / 1000);
}

// ---- disk ----------------------------------------------------------------------------------------

double disk_mass(double R) { return 1 - (1 + R) * std::exp(-R); }

TEST(InitialConditions, DiskIsThinExponentialAndRotatesCircularly) {
  auto const options = options_for(ICKind::Disk, 20000);
  auto const p = generate(options);
  EXPECT_LT(mass_weighted_norm(p, p.pos), 1e-10);
  EXPECT_LT(mass_weighted_norm(p, p.vel), 1e-10);
  double const z_d = options.disk_scale_height;
  // Median |z| of sech²(z/z_d)/(2 z_d) is atanh(1/2)·z_d (sampling error of the median 0.9 %).
  std::vector<double> heights(p.num);
  for (std::size_t i = 0; i < p.num; ++i) heights[i] = std::fabs(p.pos(i, 2));
  std::nth_element(heights.begin(), heights.begin() + p.num / 2, heights.end());
  EXPECT_NEAR(heights[p.num / 2] / (std::atanh(0.5) * z_d), 1.0, 0.04);

  // Σ ∝ e^{−R} cut at R = min(truncation_radius, 10) = 10.
  std::vector<double> radii(p.num);
  for (std::size_t i = 0; i < p.num; ++i) radii[i] = std::hypot(p.pos(i, 0), p.pos(i, 1));
  EXPECT_LE(*std::max_element(radii.begin(), radii.end()), 10.05);
  for (double R : {0.5, 1.0, 2.0, 4.0}) {
    double const inside = double(std::count_if(radii.begin(), radii.end(), [R](double x) { return x < R; }));
    expect_binomial(inside / double(p.num), disk_mass(R) / disk_mass(10), p.num, "M(<" + std::to_string(R) + ")");
  }
  // Circular in the plane: v² = G M(<R)/R (up to the centre-of-mass shift, ~0.003).
  for (std::size_t i = 0; i < p.num; ++i) {
    ASSERT_EQ(p.vel(i, 2), 0.0);
    double const R = radii[i];
    if (R < 0.5) continue;
    double const tangential = (-p.pos(i, 1) * p.vel(i, 0) + p.pos(i, 0) * p.vel(i, 1)) / R;
    double const radial = (p.pos(i, 0) * p.vel(i, 0) + p.pos(i, 1) * p.vel(i, 1)) / R;
    ASSERT_NEAR(tangential, std::sqrt(disk_mass(R) / disk_mass(10) / R), 0.02) << "R = " << R;
    ASSERT_NEAR(radial, 0.0, 0.02) << "R = " << R;
  }

  // A smaller truncation radius cuts the disk there.
  auto small = options_for(ICKind::Disk, 5000);
  small.truncation_radius = 3;
  auto const q = generate(small);
  double inside = 0;
  for (std::size_t i = 0; i < q.num; ++i) {
    double const R = std::hypot(q.pos(i, 0), q.pos(i, 1));
    ASSERT_LE(R, 3.05);
    inside += R < 1;
  }
  expect_binomial(inside / double(q.num), disk_mass(1) / disk_mass(3), q.num, "M(<1) of a disk cut at 3");
}

// ---- filament ------------------------------------------------------------------------------------

void expect_filament(ICOptions const& options) {
  auto const p = generate(options);
  double const s3 = 1 / std::sqrt(3.0), s2 = 1 / std::sqrt(2.0), s6 = 1 / std::sqrt(6.0);
  double const along[3] = {s2, -s2, 0}, radial[3] = {s3, s3, s3}, across[3] = {-s6, -s6, 2 * s6};
  double distance_sum = 0, along_sum = 0, radial2 = 0, across2 = 0;
  for (std::size_t i = 0; i < p.num; ++i) {
    double t = 0, u = 0, w = 0;
    for (int c = 0; c < 3; ++c) {
      ASSERT_EQ(p.vel(i, c), 0.0);
      double const offset = p.pos(i, c) - options.offset * radial[c];
      t += offset * along[c];
      u += offset * radial[c];
      w += offset * across[c];
    }
    ASSERT_LE(std::fabs(t), 0.5 + 1e-9);
    ASSERT_EQ(p.mass(i), 1.0 / double(p.num));
    distance_sum += distance(p, i, Point{});
    along_sum += t;
    radial2 += u * u;
    across2 += w * w;
  }
  double const n = double(p.num);
  EXPECT_NEAR(distance_sum / n, options.offset, 1e-4 + 1e-9 * options.offset);
  EXPECT_NEAR(along_sum / n, 0.0, 0.01);  // uniform on [−½, ½]: σ of the mean 0.002
  // Each transverse coordinate has the standard deviation filament_width (rms error 0.5 %).
  EXPECT_NEAR(std::sqrt(radial2 / n) / options.filament_width, 1.0, 0.03);
  EXPECT_NEAR(std::sqrt(across2 / n) / options.filament_width, 1.0, 0.03);
}

TEST(InitialConditions, FilamentIsThinStraightAndFarAway) {
  expect_filament(options_for(ICKind::Filament, 20000));
  auto far = options_for(ICKind::Filament, 5000);
  far.offset = 1e6;
  far.filament_width = 1e-2;
  expect_filament(far);
}

// ---- validation ----------------------------------------------------------------------------------

TEST(InitialConditions, InvalidOptionsOfTheStressKindsNameFieldAndValue) {
  struct Case {
    ICKind kind;
    std::function<void(ICOptions&)> set;
    std::vector<char const*> expected;
  };
  std::vector<Case> const cases = {
      {ICKind::NFW, [](ICOptions& o) { o.truncation_radius = 0.5; }, {"truncation_radius = 0.5", "nfw"}},
      {ICKind::NFW, [](ICOptions& o) { o.n_total = std::uint64_t(1) << 40; }, {"2^42"}},
      {ICKind::Satellites, [](ICOptions& o) { o.satellites = 7; }, {"satellites = 7", "[0, 6]", "20 %"}},
      {ICKind::Satellites, [](ICOptions& o) { o.satellites = -1; }, {"satellites = -1"}},
      {ICKind::Satellites, [](ICOptions& o) { o.satellite_scale = 0; }, {"satellite_scale = 0", "(0, 1]"}},
      {ICKind::Satellites, [](ICOptions& o) { o.satellite_scale = 2; }, {"satellite_scale = 2"}},
      {ICKind::Satellites, [](ICOptions& o) { o.truncation_radius = 10; }, {"truncation_radius = 10", "20"}},
      {ICKind::Satellites, [](ICOptions& o) { o.n_total = 50; }, {"n_total = 50", "100"}},
      {ICKind::MassSpectrum, [](ICOptions& o) { o.mass_decades = 13; }, {"mass_decades = 13", "[0, 12]"}},
      {ICKind::MassSpectrum, [](ICOptions& o) { o.mass_decades = -1; }, {"mass_decades = -1"}},
      {ICKind::Disk, [](ICOptions& o) { o.disk_scale_height = 0; }, {"disk_scale_height = 0", "(0, 1]"}},
      {ICKind::Disk, [](ICOptions& o) { o.disk_scale_height = 1.5; }, {"disk_scale_height = 1.5"}},
      {ICKind::Filament, [](ICOptions& o) { o.filament_width = 0; }, {"filament_width = 0", "(0, 1]"}},
      {ICKind::Filament, [](ICOptions& o) { o.filament_width = NAN; }, {"filament_width = nan"}},
      {ICKind::Filament, [](ICOptions& o) { o.offset = -1; }, {"offset = -1", "[0, 1e+06]"}},
      {ICKind::Filament, [](ICOptions& o) { o.offset = 2e6; }, {"offset = 2000000"}},
  };
  for (auto const& c : cases) {
    auto options = options_for(c.kind, 1000);
    c.set(options);
    try {
      options.validate();
      ADD_FAILURE() << "no error for " << c.expected.front();
    } catch (kfmm::Error const& e) {
      for (char const* part : c.expected)
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << "'" << part << "' not in: " << e.what();
    }
  }
  // The limits themselves are valid, and fields of other kinds are not checked.
  auto options = options_for(ICKind::Satellites, 1000);
  for (int count : {0, 6}) {
    options.satellites = count;
    EXPECT_NO_THROW(options.validate());
  }
  options = options_for(ICKind::MassSpectrum, 1000);
  options.mass_decades = 12;
  EXPECT_NO_THROW(options.validate());
  options = options_for(ICKind::Filament, 1000);
  options.offset = 0;
  options.mass_decades = -5;
  EXPECT_NO_THROW(options.validate());
}

}  // namespace
