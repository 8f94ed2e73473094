// The FoF catalogue against direct sums over the brute-force groups, on any rank count.
#include <kfmm/neighbors/fof.hpp>
#include <kfmm/neighbors/fof_catalogue.hpp>

#include "fof_fixtures.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace {

using namespace kfmm::test_support;
using kfmm::Context;

struct ExpectedGroup {
  std::uint64_t label = 0, length = 0, most_bound = 0;
  double mass = 0, pos[3] = {0, 0, 0}, vel[3] = {0, 0, 0}, dispersion = 0, half_mass_radius = 0;
};

// Direct sums over the members of each brute-force group with ≥ min_members particles, in the
// catalogue's order (length descending, label ascending).
std::vector<ExpectedGroup> expected_groups(PointSet const& s, std::vector<std::uint64_t> const& labels,
                                           std::uint64_t min_members, double box, double G, double eps) {
  std::map<std::uint64_t, std::vector<std::size_t>> members;
  for (std::size_t i = 0; i < s.size(); ++i) members[labels[i]].push_back(i);
  std::vector<ExpectedGroup> out;
  for (auto& [label, rows] : members) {
    if (rows.size() < min_members) continue;
    ExpectedGroup g;
    g.label = label;
    g.length = rows.size();
    std::size_t ref = rows[0];
    for (std::size_t i : rows)
      if (s.id[i] < s.id[ref]) ref = i;
    double offset[3] = {0, 0, 0};
    for (std::size_t i : rows) {
      g.mass += s.m[i];
      for (int k = 0; k < 3; ++k) {
        offset[k] += s.m[i] * image(s.x[3 * i + k] - s.x[3 * ref + k], box);
        g.vel[k] += s.m[i] * s.v[3 * i + k];
      }
    }
    for (int k = 0; k < 3; ++k) {
      g.pos[k] = s.x[3 * ref + k] + offset[k] / g.mass;
      if (box > 0) g.pos[k] -= box * std::floor(g.pos[k] / box);
      g.vel[k] /= g.mass;
    }
    std::vector<std::pair<double, std::size_t>> by_distance;
    double spread = 0;
    for (std::size_t i : rows) {
      double r2 = 0;
      for (int k = 0; k < 3; ++k) {
        double const dv = s.v[3 * i + k] - g.vel[k];
        spread += s.m[i] * dv * dv;
        double const d = image(s.x[3 * i + k] - g.pos[k], box);
        r2 += d * d;
      }
      by_distance.emplace_back(std::sqrt(r2), s.id[i]);
    }
    g.dispersion = std::sqrt(spread / (3 * g.mass));
    std::sort(by_distance.begin(), by_distance.end());
    std::map<std::uint64_t, double> mass_of;
    for (std::size_t i : rows) mass_of[s.id[i]] = s.m[i];
    double enclosed = 0;
    for (auto const& [r, id] : by_distance) {
      enclosed += mass_of[id];
      g.half_mass_radius = r;
      if (enclosed >= 0.5 * g.mass) break;
    }
    double best = INFINITY;
    for (std::size_t i : rows) {
      double phi = 0, kinetic = 0;
      for (std::size_t j : rows) {
        if (j == i) continue;
        double r2 = eps * eps;
        for (int k = 0; k < 3; ++k) {
          double const d = image(s.x[3 * j + k] - s.x[3 * i + k], box);
          r2 += d * d;
        }
        phi -= s.m[j] / std::sqrt(r2);
      }
      for (int k = 0; k < 3; ++k) kinetic += 0.5 * std::pow(s.v[3 * i + k] - g.vel[k], 2);
      double const e = kinetic + G * phi;
      if (e < best || (e == best && s.id[i] < g.most_bound)) {
        best = e;
        g.most_bound = s.id[i];
      }
    }
    out.push_back(g);
  }
  std::sort(out.begin(), out.end(), [](ExpectedGroup const& a, ExpectedGroup const& b) {
    return a.length != b.length ? a.length > b.length : a.label < b.label;
  });
  return out;
}

class FoFCatalogue : public testing::Test {
 protected:
  Context context;

  void check(PointSet const& s, kfmm::FoFOptions const& fof, kfmm::FoFCatalogueOptions const& options, Deal deal) {
    auto const rows = my_rows(context, s.size(), deal);
    auto const particles = local_particles(context, s, rows);
    auto const result = kfmm::friends_of_friends(context, particles, fof);
    kfmm::ScalarView<std::int64_t> numbers;
    auto const catalogue = kfmm::fof_catalogue(context, particles, result.label, options, &numbers);
    auto const all = kfmm::gather_catalogue(context, catalogue);
    auto const labels = brute_force_labels(s, result.linking_length, fof.box_size);
    auto const expected = expected_groups(s, labels, options.min_members, fof.box_size, options.G, options.softening);
    ASSERT_GE(expected.size(), 2u) << "the set must have several groups to test";
    EXPECT_EQ(all.num_total, expected.size());
    std::uint64_t members = 0;
    for (auto const& g : expected) members += g.length;
    EXPECT_EQ(all.num_members_total, members);
    if (context.rank() == 0) {
      ASSERT_EQ(all.num, expected.size());
      for (std::size_t g = 0; g < all.num; ++g) {
        auto const& e = expected[g];
        double const tol = 1e-12;
        EXPECT_EQ(all.number(g), g);
        EXPECT_EQ(all.label(g), e.label) << "group " << g;
        EXPECT_EQ(all.length(g), e.length) << "group " << g;
        EXPECT_NEAR(all.mass(g), e.mass, tol * e.mass);
        for (int k = 0; k < 3; ++k) {
          EXPECT_NEAR(all.pos(g, k), e.pos[k], 1e-10) << "group " << g << " axis " << k;
          EXPECT_NEAR(all.vel(g, k), e.vel[k], 1e-12) << "group " << g;
        }
        EXPECT_NEAR(all.velocity_dispersion(g), e.dispersion, 1e-12);
        EXPECT_NEAR(all.half_mass_radius(g), e.half_mass_radius, 1e-10) << "group " << g;
        if (options.most_bound) {
          EXPECT_EQ(all.most_bound_id(g), e.most_bound) << "group " << g;
        }
      }
    } else {
      EXPECT_EQ(all.num, 0u);
    }
    // Every particle's group number names the group of its label (−1 below min_members).
    auto const got = collect(context, rows, to_vector(numbers, rows.size()), s.size());
    std::map<std::uint64_t, std::int64_t> number_of;
    for (std::size_t g = 0; g < expected.size(); ++g) number_of[expected[g].label] = std::int64_t(g);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {
      auto const it = number_of.find(labels[i]);
      wrong += got[i] != (it == number_of.end() ? -1 : it->second) ? 1 : 0;
    }
    EXPECT_EQ(wrong, 0u) << "particles with a wrong group number";
  }
};

TEST_F(FoFCatalogue, ClumpsOpenMatchesDirectSums) {
  auto const s = clumped_points(3000, 9, 10.0, 0.25, 11);
  kfmm::FoFOptions fof;
  fof.linking_length = 0.1;
  kfmm::FoFCatalogueOptions options;
  options.most_bound = true;
  options.softening = 0.01;
  options.G = 2;
  check(s, fof, options, Deal::Blocks);
  check(s, fof, options, Deal::RoundRobin);
}

TEST_F(FoFCatalogue, PeriodicGroupsAcrossTheFaces) {
  auto s = clumped_points(3000, 9, 1.0, 0.04, 12);
  wrap(s, 1.0);
  kfmm::FoFOptions fof;
  fof.box_size = 1.0;
  fof.linking_length = 0.012;
  kfmm::FoFCatalogueOptions options;
  options.box_size = 1.0;
  options.min_members = 5;
  options.most_bound = true;
  check(s, fof, options, Deal::RoundRobin);
  options.min_members = 1;  // every particle a group, isolated ones too
  options.most_bound = false;
  check(s, fof, options, Deal::Blocks);
}

TEST_F(FoFCatalogue, BadInputIsAnErrorOnEveryRank) {
  auto const s = uniform_points(100, 1.0, 13);
  auto const rows = my_rows(context, s.size(), Deal::Blocks);
  auto const particles = local_particles(context, s, rows);
  auto const result = kfmm::friends_of_friends(context, particles, kfmm::FoFOptions{});
  auto expect = [&](kfmm::FoFCatalogueOptions const& options, std::string const& part) {
    try {
      kfmm::fof_catalogue(context, particles, result.label, options);
      ADD_FAILURE() << "no error; expected '" << part << "'";
    } catch (kfmm::Error const& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  kfmm::FoFCatalogueOptions options;
  options.min_members = 0;
  expect(options, "min_members = 0 must be >= 1");
  options.min_members = 20;
  options.softening = -1;
  expect(options, "softening -1");
  options.softening = 0;
  options.G = 0;
  expect(options, "G = 0");
}

}  // namespace
