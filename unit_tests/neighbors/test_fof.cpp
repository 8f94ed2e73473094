// Friends-of-friends labels against a union-find over all pairs, on any rank and thread count.
#include <kfmm/neighbors/fof.hpp>

#include "fof_fixtures.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace kfmm::test_support;
using kfmm::Context;
using kfmm::FoFOptions;

class FoF : public testing::Test {
 protected:
  Context context;

  // Runs friends_of_friends on the points dealt to the ranks and compares every label with the
  // brute-force labels at the linking length the result reports.
  kfmm::FoFResult check(PointSet const& s, FoFOptions const& options, Deal deal, double expected_link = 0) {
    auto const rows = my_rows(context, s.size(), deal);
    auto const particles = local_particles(context, s, rows);
    auto const result = kfmm::friends_of_friends(context, particles, options);
    if (expected_link > 0) {
      EXPECT_NEAR(result.linking_length, expected_link, 1e-12 * expected_link);
    }
    auto const labels = collect(context, rows, to_vector(result.label, rows.size()), s.size());
    auto const expected = brute_force_labels(s, result.linking_length, options.box_size);
    std::size_t wrong = 0, groups = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {
      wrong += labels[i] != expected[i] ? 1 : 0;
      groups += expected[i] == s.id[i] ? 1 : 0;
    }
    EXPECT_EQ(wrong, 0u) << "of " << s.size() << " labels differ from the brute-force union-find";
    EXPECT_EQ(result.num_groups, groups);
    // The test must test something: some groups have several members, and not all are one.
    EXPECT_LT(groups, s.size());
    EXPECT_GT(groups, 1u);
    return result;
  }
};

TEST_F(FoF, UniformOpenMatchesBruteForce) {
  auto const s = uniform_points(3000, 1.0, 1);
  FoFOptions options;
  options.b = 0.6;
  // b × (bounding-box volume / N)^(1/3), with the box of the points themselves.
  double lo[3] = {1e9, 1e9, 1e9}, hi[3] = {-1e9, -1e9, -1e9};
  for (std::size_t i = 0; i < s.size(); ++i)
    for (int k = 0; k < 3; ++k) {
      lo[k] = std::min(lo[k], s.x[3 * i + k]);
      hi[k] = std::max(hi[k], s.x[3 * i + k]);
    }
  double const volume = (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]);
  check(s, options, Deal::Blocks, 0.6 * std::cbrt(volume / 3000.0));
  check(s, options, Deal::RoundRobin);
}

TEST_F(FoF, UniformPeriodicMatchesBruteForce) {
  auto const s = uniform_points(3000, 2.0, 2);
  FoFOptions options;
  options.b = 0.7;
  options.box_size = 2.0;
  check(s, options, Deal::Blocks, 0.7 * std::cbrt(8.0 / 3000.0));
  check(s, options, Deal::RoundRobin);
}

TEST_F(FoF, ClumpsOpenAndPeriodic) {
  auto s = clumped_points(4000, 7, 10.0, 0.3, 3);
  FoFOptions options;
  options.linking_length = 0.08;
  check(s, options, Deal::Blocks, 0.08);
  check(s, options, Deal::RoundRobin);
  wrap(s, 10.0);
  options.box_size = 10.0;
  check(s, options, Deal::Blocks);
}

// A chain of points 0.9 linking lengths apart, wound through the box and dealt to the ranks in
// blocks, so the one group crosses every rank boundary, plus a second chain that stops one gap
// short of the first.
TEST_F(FoF, ChainsAcrossRanks) {
  PointSet s;
  double const link = 0.1;
  std::size_t i = 0;
  for (; i < 400; ++i) {
    double const t = 0.09 * double(i);
    s.add(t, 0.5 + 0.3 * std::sin(t), 0.2 * std::cos(0.5 * t), 1000000 - i);
  }
  for (std::size_t k = 0; k < 200; ++k, ++i) s.add(0.09 * double(k), 3.0, 0.0, 10 + k);
  s.add(0.09 * 200 + 0.1001, 3.0, 0.0, 1);  // just beyond the second chain's end: alone
  FoFOptions options;
  options.linking_length = link;
  for (Deal deal : {Deal::Blocks, Deal::RoundRobin, Deal::AllOnRankZero}) {
    auto const result = check(s, options, deal);
    if (context.size() > 1) {
      // The chain crosses domains: ghosts came in and labels needed more than one round.
      std::uint64_t ghosts = result.num_ghosts, total = 0;
      MPI_Allreduce(&ghosts, &total, 1, MPI_UINT64_T, MPI_SUM, context.comm());
      EXPECT_GT(total, 0u);
      EXPECT_GE(result.merge_rounds, 2);
    }
  }
}

// Groups that wrap through the faces and a corner of the periodic box.
TEST_F(FoF, PeriodicWrapAcrossFacesAndCorner) {
  PointSet s;
  std::mt19937_64 rng(4);
  std::normal_distribution<double> g(0, 0.02);
  std::uniform_real_distribution<double> u(0, 1);
  std::size_t i = 0;
  for (; i < 500; ++i) s.add(g(rng), g(rng), g(rng), 100 + i);        // at the corner
  for (; i < 900; ++i) s.add(0.5 + g(rng), g(rng), 0.5, 100 + i);     // across the y face
  for (; i < 1300; ++i) s.add(u(rng), u(rng), u(rng), 100 + i);       // background
  wrap(s, 1.0);
  FoFOptions options;
  options.box_size = 1.0;
  options.linking_length = 0.03;
  check(s, options, Deal::Blocks);
  check(s, options, Deal::RoundRobin);
}

TEST_F(FoF, CoincidentParticles) {
  PointSet s;
  std::size_t i = 0;
  for (; i < 300; ++i) s.add(0.25, 0.25, 0.25, 5000 - i);  // one point, 300 times
  for (; i < 340; ++i) s.add(0.25 + 0.01 * double(i - 299), 0.25, 0.25, 9000 + i);  // a tail off it
  for (; i < 440; ++i) s.add(0.7, 0.7, 0.7 + 1e-9 * double(i % 3), 20000 + i);  // a second pile
  s.add(0.9, 0.9, 0.9, 3);
  FoFOptions options;
  options.linking_length = 0.015;
  check(s, options, Deal::Blocks);
  check(s, options, Deal::RoundRobin);
  options.box_size = 1.0;
  check(s, options, Deal::RoundRobin);
}

// fof_components on one rank's points directly, with grids of 1 to many coarse cells per axis
// (linking lengths up to just under half the periodic box).
// The labels fof_components + fof_min_labels give `s` on this rank alone (and fof_labels the same).
std::vector<std::uint64_t> component_labels(PointSet const& s, double link, double box) {
  kfmm::Vec3View<double, kfmm::HostSpace> host("pos", s.size());
  for (std::size_t i = 0; i < s.size(); ++i)
    for (int k = 0; k < 3; ++k) host(i, k) = s.x[3 * i + k];
  kfmm::Vec3View<double> pos("pos", s.size());
  Kokkos::deep_copy(pos, host);
  kfmm::ScalarView<int> component("component", s.size());
  kfmm::ScalarView<std::uint64_t> id("id", s.size()), label("label", s.size());
  Kokkos::deep_copy(id, Kokkos::View<std::uint64_t const*, kfmm::HostSpace, Kokkos::MemoryUnmanaged>(s.id.data(), s.size()));
  kfmm::ExecutionSpace space;
  kfmm::fof_components(space, pos, s.size(), link, box, component);
  kfmm::fof_min_labels(space, component, id, s.size(), label);
  auto const labels = to_vector(label, s.size());
  // The one-pass form gives the same labels.
  kfmm::ScalarView<std::uint64_t> fused("fused", s.size());
  kfmm::fof_labels(space, pos, id, s.size(), link, box, fused);
  EXPECT_EQ(to_vector(fused, s.size()), labels) << "link " << link << " box " << box;
  return labels;
}

void check_components(PointSet const& s, double link, double box) {
  auto const got = component_labels(s, link, box);
  auto const expected = brute_force_labels(s, link, box);
  std::size_t wrong = 0, groups = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    wrong += got[i] != expected[i] ? 1 : 0;
    groups += expected[i] == s.id[i] ? 1 : 0;
  }
  EXPECT_EQ(wrong, 0u) << "link " << link << " box " << box;
  EXPECT_LT(groups, s.size()) << "link " << link << " box " << box << ": nothing linked, the case tests nothing";
}

// Linking lengths far below the dense grid's cells (2^18 cells at most here): the link cells
// lie several levels inside a coarse cell and are found by binary search, or in a direct table
// where a coarse cell holds many fine cells.
TEST_F(FoF, ComponentsWithLinkCellsInsideCoarseCells) {
  auto s = clumped_points(3000, 4, 1.0, 0.004, 8);
  wrap(s, 1.0);
  for (double link : {0.0007, 0.0015, 0.003})
    for (double box : {0.0, 1.0}) check_components(s, link, box);
}

// A dense cube of points around the periodic box's corner (so split over eight coarse cells of
// hundreds of fine cells each, the ones with direct tables) in a sparse background, at linking
// lengths below, near and above percolation: many groups of every size, and link cells whose
// points are all one group before their neighbours are looked at.
TEST_F(FoF, DenseCubeAcrossCoarseCellFaces) {
  std::mt19937_64 random(23);
  std::uniform_real_distribution<double> cube(-0.015, 0.015), unit(0, 1);
  PointSet s;
  std::uint64_t id = 7;
  for (int i = 0; i < 3000; ++i) s.add(cube(random), cube(random), cube(random), id++);
  for (int i = 0; i < 1000; ++i) s.add(unit(random), unit(random), unit(random), id++);
  double const separation = 0.03 / std::cbrt(3000.0);
  for (double b : {0.5, 0.7, 1.0}) {
    PointSet periodic = s;
    wrap(periodic, 1.0);
    check_components(periodic, b * separation, 1.0);
    check_components(s, b * separation, 0.0);
  }
}

// Where the linking length is tiny against the extent, the coarse grid's bound makes the fine
// cells wider than l/√3 (open: two clumps far apart; periodic: a box of 10⁵ linking lengths
// with a few close pairs, across the faces too): the components stay exact.
TEST_F(FoF, ComponentsWhereTheCellsAreWidened) {
  auto s = clumped_points(1200, 2, 1.0, 0.01, 3);
  for (std::size_t i = 0; i < s.size(); i += 2) s.x[3 * i] += 1e7;
  check_components(s, 0.004, 0.0);

  PointSet p = uniform_points(400, 1.0, 9);
  double const link = 1e-5;
  for (std::size_t i = 0; i < 200; ++i) {
    double const* q = &p.x[3 * i];
    // A friend just inside the linking length, wrapped across a face for some.
    double const dx = (i % 3 == 0 ? 0.9 : 1.2) * link / std::sqrt(3.0);
    p.add(q[0] + dx, q[1] + dx, q[2] + dx, 5000 + i);
  }
  p.add(1 - 0.3 * link, 0.5, 0.5, 9000);
  p.add(0.2 * link, 0.5, 0.5, 9001);
  wrap(p, 1.0);
  check_components(p, link, 1.0);
}

// Fine cells twice the linking length (a far point widens them), so that one may hold points
// not linked to each other. Each of many four-point motifs, in random places against the cells,
// has a close pair p, q and two points r (a friend of p) and s (of q alone) more than the
// linking length apart: where p and q lie in two fine cells of one link cell and r and s in one
// fine cell of the next, s is found only by testing that cell against q's as well as p's.
TEST_F(FoF, MotifsInCellsWiderThanTheLinkingLength) {
  std::mt19937_64 random(29);
  std::uniform_real_distribution<double> jitter(0, 2);
  double const motif[4][3] = {{0, 0, 0}, {0, 0.6, 0}, {0.5, 0.6, -0.5}, {0.5, 0.6, 0.8}};
  PointSet s;
  std::uint64_t id = 10;
  for (int i = 0; i < 12; ++i)
    for (int j = 0; j < 12; ++j)
      for (int k = 0; k < 12; ++k) {
        double const c[3] = {5.0 * i + jitter(random), 5.0 * j + jitter(random), 5.0 * k + jitter(random)};
        for (auto const& m : motif) s.add(c[0] + m[0], c[1] + m[1], c[2] + m[2], id++);
      }
  s.add(131072, 0, 0, 1);
  check_components(s, 1.0, 0.0);
}

// A lone pair just within the linking length, at linking lengths that give every ratio of the
// cells to it, in random places, along the axes and in random directions: found whatever cells the two points fall in
// (a link cell narrower than l, or a reach that stops short of a face, would miss some).
TEST_F(FoF, LonePairsJustWithinReach) {
  std::mt19937_64 random(17);
  std::uniform_real_distribution<double> unit(0, 1);
  for (int step = 0; step < 45; ++step) {
    double const link = 0.05 + 0.01 * step;
    for (double box : {0.0, 1.0}) {
      for (int place = 0; place < 40; ++place) {
        double d[3], norm = 0;
        for (double& c : d) {
          c = unit(random) - 0.5;
          norm += c * c;
        }
        if (place < 30) {  // along an axis: the pair spans the most cells
          for (int k = 0; k < 3; ++k) d[k] = k == place % 3 ? 1 : 0;
          norm = 1;
        }
        PointSet s;
        double const p[3] = {unit(random), unit(random), unit(random)};
        double const r = 0.999 * link / std::sqrt(norm);
        s.add(p[0], p[1], p[2], 1);
        s.add(p[0] + r * d[0], p[1] + r * d[1], p[2] + r * d[2], 2);
        if (box > 0) wrap(s, box);
        check_components(s, link, box);
      }
    }
  }
}

TEST_F(FoF, ComponentsAtEveryGridSize) {
  auto const s = uniform_points(600, 1.0, 5);
  for (double link : {0.02, 0.05, 0.11, 0.26, 0.49}) {
    for (double box : {0.0, 1.0}) {
      auto const got = component_labels(s, link, box);
      auto const expected = brute_force_labels(s, link, box);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < s.size(); ++i) wrong += got[i] != expected[i] ? 1 : 0;
      EXPECT_EQ(wrong, 0u) << "link " << link << " box " << box;
    }
  }
}

// Same labels whatever the order of the particles on the ranks.
TEST_F(FoF, LabelsDoNotDependOnTheDeal) {
  auto const s = clumped_points(3000, 5, 4.0, 0.2, 6);
  FoFOptions options;
  options.b = 0.3;
  std::vector<std::vector<std::uint64_t>> all;
  for (Deal deal : {Deal::Blocks, Deal::RoundRobin, Deal::AllOnRankZero}) {
    auto const rows = my_rows(context, s.size(), deal);
    auto const result = kfmm::friends_of_friends(context, local_particles(context, s, rows), options);
    all.push_back(collect(context, rows, to_vector(result.label, rows.size()), s.size()));
  }
  EXPECT_EQ(all[0], all[1]);
  EXPECT_EQ(all[0], all[2]);
}

// Bad input: every rank throws the same kfmm::Error naming the value.
void expect_error(Context const& context, PointSet const& s, FoFOptions const& options, std::string const& part) {
  auto const rows = my_rows(context, s.size(), Deal::Blocks);
  auto const particles = local_particles(context, s, rows);
  try {
    kfmm::friends_of_friends(context, particles, options);
    ADD_FAILURE() << "no error; expected one containing '" << part << "'";
  } catch (kfmm::Error const& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST_F(FoF, BadInputIsAnErrorOnEveryRank) {
  auto const s = uniform_points(200, 1.0, 7);
  FoFOptions options;
  options.b = 0;
  expect_error(context, s, options, "b = 0 must be");
  options.b = -0.2;
  expect_error(context, s, options, "b = -0.2 must be");
  options.b = std::nan("");
  expect_error(context, s, options, "b = nan");
  options.b = 0.2;
  options.box_size = 0.5;  // the points span almost [0, 1)
  expect_error(context, s, options, "more than the periodic box size 0.5");
  options.box_size = -1;
  expect_error(context, s, options, "box size -1");
  options.box_size = 1;
  options.linking_length = 0.5;
  expect_error(context, s, options, "linking length 0.5 must be less than half the periodic box size 1");
  options.linking_length = -1;
  expect_error(context, s, options, "linking length -1");
  // A flat set has no bounding-box volume: give the linking length.
  PointSet flat;
  for (std::size_t i = 0; i < 50; ++i) flat.add(0.01 * double(i), 0.02 * double(i % 7), 0.0, i + 1);
  FoFOptions open;
  expect_error(context, flat, open, "give the linking length directly");
  // A non-finite position on one rank only.
  PointSet broken = s;
  broken.x[3 * 199] = std::numeric_limits<double>::infinity();
  expect_error(context, broken, open, "non-finite positions");
}

}  // namespace
