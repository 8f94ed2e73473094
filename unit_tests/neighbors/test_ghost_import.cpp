// Ghost import against brute force: every (particle, image) within the radius of a query box,
// on 1-4 ranks, open and periodic (cubic and rectangular) boxes, with and without shifted positions.
#include <kfmm/comm/context.hpp>
#include <kfmm/core/error.hpp>
#include <kfmm/neighbors/ghost_import.hpp>

#include <device_views.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

namespace {

using kfmm::Context;
using kfmm::GhostOptions;
using kfmm::PeriodicBox;
using kfmm::QueryBox;

struct Global {
  std::vector<double> pos;  // 3 per particle
  std::vector<int> owner;
};

// n particles in the box [0, L) (the unit cube when open): two thirds uniform, one third in a
// tight clump; mostly in slabs along x by rank, some scattered.
Global make_particles(std::size_t n, int ranks, double const* length, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  Global g;
  for (std::size_t i = 0; i < n; ++i) {
    double x[3];
    bool const clump = i % 3 == 0;
    for (int k = 0; k < 3; ++k) {
      x[k] = clump ? 0.93 + 0.06 * u(rng) : u(rng);
      if (x[k] >= 1) x[k] = 0.999;
      g.pos.push_back(x[k] * length[k]);
    }
    g.owner.push_back(i % 10 == 0 ? int(i % ranks) : std::min(ranks - 1, int(x[0] * ranks)));
  }
  return g;
}

kfmm::Particles<kfmm::MemorySpace> local_particles(Global const& g, int rank) {
  std::size_t const n = g.owner.size();
  kfmm::Particles<kfmm::HostSpace> host(n);
  std::size_t m = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (g.owner[i] != rank) continue;
    for (int k = 0; k < 3; ++k) {
      host.pos(m, k) = g.pos[3 * i + k];
      host.vel(m, k) = 10.0 * i + k;
    }
    host.mass(m) = 1.0 + i;
    host.id(m) = 1000 + i;
    ++m;
  }
  host.num = m;
  host.num_total = n;
  kfmm::Particles<kfmm::MemorySpace> local(std::max<std::size_t>(m, 1));
  local.assign(host);
  return local;
}

std::vector<QueryBox> make_boxes(int rank, int count, double const* length, bool with_infinite, unsigned seed) {
  std::mt19937_64 rng(seed + 7919 * rank);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<QueryBox> boxes;
  for (int b = 0; b < count; ++b) {
    QueryBox q{};
    double const size = b % 4 == 0 ? 0 : 0.1 * u(rng);
    for (int k = 0; k < 3; ++k) {
      q.lo[k] = u(rng) * (1 - size) * length[k];
      q.hi[k] = q.lo[k] + size * length[k];
    }
    q.radius = b % 5 == 0 ? 0.3 : 0.12 * u(rng);
    boxes.push_back(q);
  }
  if (with_infinite) {
    QueryBox q{{0.5, 0.5, 0.5}, {0.5, 0.5, 0.5}, std::numeric_limits<double>::infinity()};
    boxes.push_back(q);
  }
  return boxes;
}

double gap2(QueryBox const& q, double const* p) {
  double d2 = 0;
  for (int k = 0; k < 3; ++k) {
    double const g = p[k] < q.lo[k] ? q.lo[k] - p[k] : p[k] > q.hi[k] ? p[k] - q.hi[k] : 0;
    d2 += g * g;
  }
  return d2;
}

// (id, image, origin rank) of every expected ghost, sorted.
using Entry = std::tuple<std::uint64_t, int, int>;

std::vector<Entry> brute_force(Global const& g, std::vector<QueryBox> const& boxes, int rank, GhostOptions const& o) {
  std::vector<Entry> expected;
  bool const periodic = o.periodic.enabled;
  for (std::size_t i = 0; i < g.owner.size(); ++i) {
    for (int image = 0; image < 27; ++image) {
      if (!periodic && image != kfmm::unshifted_image) continue;
      if (g.owner[i] == rank && (image == kfmm::unshifted_image || !o.shift_positions)) continue;
      double p[3];
      for (int k = 0; k < 3; ++k)
        p[k] = g.pos[3 * i + k] + (periodic ? kfmm::image_shift(image, k) * o.periodic.length[k] : 0.0);
      bool hit = false;
      for (auto const& q : boxes) hit = hit || gap2(q, p) <= q.radius * q.radius;
      if (hit) expected.emplace_back(1000 + i, o.shift_positions || !periodic ? image : kfmm::unshifted_image, g.owner[i]);
    }
  }
  std::sort(expected.begin(), expected.end());
  expected.erase(std::unique(expected.begin(), expected.end()), expected.end());
  return expected;
}

class GhostImportTest : public testing::Test {
 protected:
  Context context;
  kfmm::ExecutionSpace space;

  void check(std::size_t n, GhostOptions const& options, int boxes_here, bool with_infinite, unsigned seed) {
    double const unit[3] = {1, 1, 1};
    double const* length = options.periodic.enabled ? options.periodic.length : unit;
    Global const g = make_particles(n, context.size(), length, seed);
    auto const local = local_particles(g, context.rank());
    auto const boxes = make_boxes(context.rank(), boxes_here, length, with_infinite, seed);
    auto const ghosts = kfmm::import_ghosts(space, context, local, kfmm::test_support::device_view(boxes, "boxes"), options);

    auto pos = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), ghosts.pos);
    auto vel = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), ghosts.vel);
    auto mass = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), ghosts.mass);
    auto id = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), ghosts.id);
    auto rank = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), ghosts.rank);
    auto image = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), ghosts.image);
    std::vector<Entry> got;
    bool const shifted = options.periodic.enabled && options.shift_positions;
    for (std::size_t j = 0; j < ghosts.num; ++j) {
      std::size_t const i = id(j) - 1000;
      ASSERT_LT(i, n);
      got.emplace_back(id(j), image(j), rank(j));
      EXPECT_EQ(mass(j), 1.0 + i);
      for (int k = 0; k < 3; ++k) {
        double const shift = shifted ? kfmm::image_shift(image(j), k) * length[k] : 0.0;
        EXPECT_NEAR(pos(j, k), g.pos[3 * i + k] + shift, 1e-12) << "ghost " << id(j) << " axis " << k;
        EXPECT_EQ(vel(j, k), 10.0 * i + k);
      }
    }
    std::vector<Entry> sorted = got;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "a ghost came twice";
    EXPECT_EQ(sorted, brute_force(g, boxes, context.rank(), options));
    // Ordered by origin rank.
    for (std::size_t j = 1; j < ghosts.num; ++j) EXPECT_LE(rank(j - 1), rank(j));
  }
};

TEST_F(GhostImportTest, OpenBoxesMatchBruteForce) { check(3000, GhostOptions{}, 40, false, 1); }

TEST_F(GhostImportTest, InfiniteRadiusImportsEveryOtherRank) { check(800, GhostOptions{}, 3, true, 2); }

TEST_F(GhostImportTest, NoBoxesNoParticles) {
  GhostOptions o;
  check(0, o, 0, false, 3);
  check(500, o, context.rank() == 0 ? 5 : 0, false, 3);
}

TEST_F(GhostImportTest, PeriodicCubeShiftedImagesMatchBruteForce) {
  GhostOptions o;
  o.periodic = PeriodicBox::cube(2.0);
  check(3000, o, 40, false, 4);
}

TEST_F(GhostImportTest, PeriodicRectangularBoxMatchesBruteForce) {
  GhostOptions o;
  o.periodic = PeriodicBox::box(1.0, 0.7, 1.3);
  o.boxes_per_rank = 3;
  check(2000, o, 30, false, 5);
}

TEST_F(GhostImportTest, PeriodicUnshiftedOneCopyPerParticle) {
  GhostOptions o;
  o.periodic = PeriodicBox::cube(1.0);
  o.shift_positions = false;
  check(2000, o, 30, false, 6);
}

TEST_F(GhostImportTest, BadBoxOnOneRankFailsEverywhere) {
  double const unit[3] = {1, 1, 1};
  auto const local = local_particles(make_particles(100, context.size(), unit, 7), context.rank());
  auto boxes = make_boxes(context.rank(), 3, unit, false, 7);
  if (context.rank() == context.size() - 1) boxes[1].radius = -0.5;
  try {
    kfmm::import_ghosts(space, context, local, kfmm::test_support::device_view(boxes, "boxes"));
    FAIL() << "no error";
  } catch (kfmm::Error const& e) {
    EXPECT_NE(std::string(e.what()).find("radius -0.5"), std::string::npos) << e.what();
  }
}

TEST_F(GhostImportTest, ParticleOutsidePeriodicBoxFails) {
  double const unit[3] = {1, 1, 1};
  auto const local = local_particles(make_particles(100, context.size(), unit, 8), context.rank());
  auto const boxes = make_boxes(context.rank(), 3, unit, false, 8);
  GhostOptions o;
  o.periodic = PeriodicBox::cube(0.5);
  try {
    kfmm::import_ghosts(space, context, local, kfmm::test_support::device_view(boxes, "boxes"), o);
    FAIL() << "no error";
  } catch (kfmm::Error const& e) {
    EXPECT_NE(std::string(e.what()).find("outside the periodic box"), std::string::npos) << e.what();
  }
}

}  // namespace
