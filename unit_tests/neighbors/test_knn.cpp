// k nearest neighbours against brute force (all pairs, minimum image in periodic boxes) on
// uniform, clustered and coincident particles, periodic cubes and rectangular boxes, k larger
// than a rank's count, separate query sets, with and without self, leaves of one point and far
// queries; both kernel shapes alike; and the bad-input errors.
#include <kfmm/comm/context.hpp>
#include <kfmm/core/error.hpp>
#include <kfmm/core/kernel_shape.hpp>
#include <kfmm/neighbors/knn.hpp>
#include <kfmm/neighbors/knn_density.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

using kfmm::Context;
using kfmm::KNNOptions;
using kfmm::PeriodicBox;

struct PointSet {
  std::vector<double> pos;  // 3 per point
  std::vector<std::uint64_t> id;
  std::size_t size() const { return id.size(); }
};

enum class Shape { Uniform, Clustered, Coincident };

// n points in [origin, origin + extent) per axis; ids a permutation of 5n.. so that id order
// is not position order.
PointSet make_points(std::size_t n, Shape shape, double const* extent, double origin, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::normal_distribution<double> gauss(0, 1);
  PointSet s;
  std::vector<double> centres;
  for (int c = 0; c < 6; ++c)
    for (int a = 0; a < 3; ++a) centres.push_back(0.2 + 0.6 * u(rng));
  std::vector<double> spots;
  for (int c = 0; c < 7; ++c)
    for (int a = 0; a < 3; ++a) spots.push_back(u(rng));
  for (std::size_t i = 0; i < n; ++i) {
    for (int a = 0; a < 3; ++a) {
      double x = u(rng);
      if (shape == Shape::Clustered && i % 4 != 0) x = centres[3 * (i % 6) + a] + 0.01 * gauss(rng);
      if (shape == Shape::Coincident && i % 3 != 0) x = spots[3 * (i % 7) + a];
      x = std::min(std::max(x, 0.0), 0.999999);
      s.pos.push_back(origin + x * extent[a]);
    }
    s.id.push_back(5 * n + (i * 7919) % n);
  }
  return s;
}

// Points of `s` this rank holds: a scattered share, so that knn() has to move them.
std::vector<std::size_t> share(std::size_t n, int rank, int ranks) {
  std::vector<std::size_t> mine;
  for (std::size_t i = 0; i < n; ++i)
    if (int((i * 2654435761u) % 1000 * ranks / 1000) == rank) mine.push_back(i);
  return mine;
}

kfmm::Particles<kfmm::MemorySpace> to_particles(PointSet const& s, std::vector<std::size_t> const& rows) {
  kfmm::Particles<kfmm::HostSpace> host(std::max<std::size_t>(rows.size(), 1));
  for (std::size_t m = 0; m < rows.size(); ++m) {
    for (int a = 0; a < 3; ++a) {
      host.pos(m, a) = s.pos[3 * rows[m] + a];
      host.vel(m, a) = 0;
    }
    host.mass(m) = 1;
    host.id(m) = s.id[rows[m]];
  }
  host.num = rows.size();
  host.num_total = s.size();
  kfmm::Particles<kfmm::MemorySpace> device(host.capacity());
  device.assign(host);
  return device;
}

// The k nearest (distance, id) of point x among `s`, skipping row `skip`.
std::vector<std::pair<double, std::uint64_t>> brute_force(PointSet const& s, double const* x, int k,
                                                          PeriodicBox const& box, std::size_t skip) {
  std::vector<std::pair<double, std::uint64_t>> all;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i == skip) continue;
    double d2 = 0;
    for (int a = 0; a < 3; ++a) {
      double dx = std::fabs(x[a] - s.pos[3 * i + a]);
      if (box.enabled) {
        dx = std::fmod(dx, box.length[a]);
        dx = std::min(dx, box.length[a] - dx);
      }
      d2 += dx * dx;
    }
    all.emplace_back(std::sqrt(d2), s.id[i]);
  }
  std::partial_sort(all.begin(), all.begin() + k, all.end());
  all.resize(k);
  return all;
}

class KNNTest : public testing::Test {
 protected:
  Context context;
  kfmm::ExecutionSpace space;

  void expect_rows(kfmm::KNNResult const& result, std::vector<std::vector<std::pair<double, std::uint64_t>>> const& expected) {
    ASSERT_EQ(result.num, expected.size());
    auto const distance = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), result.distance);
    auto const id = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), result.id);
    int mismatches = 0;
    for (std::size_t q = 0; q < expected.size() && mismatches < 5; ++q)
      for (std::size_t j = 0; j < expected[q].size(); ++j) {
        bool const ok = id(q, j) == expected[q][j].second &&
                        std::fabs(distance(q, j) - expected[q][j].first) <= 1e-12 * (1 + expected[q][j].first);
        if (!ok) {
          ADD_FAILURE() << "query " << q << " neighbour " << j << ": got id " << id(q, j) << " at " << distance(q, j)
                        << ", expected id " << expected[q][j].second << " at " << expected[q][j].first;
          ++mismatches;
          break;
        }
      }
  }

  void check_self(PointSet const& s, KNNOptions const& options) {
    auto const rows = share(s.size(), context.rank(), context.size());
    auto const particles = to_particles(s, rows);
    auto const result = kfmm::knn(space, context, particles, options);
    std::vector<std::vector<std::pair<double, std::uint64_t>>> expected;
    for (std::size_t row : rows)
      expected.push_back(brute_force(s, &s.pos[3 * row], options.k, options.periodic,
                                     options.include_self ? s.size() : row));
    expect_rows(result, expected);
  }

  void check_queries(PointSet const& s, PointSet const& queries, KNNOptions const& options) {
    auto const rows = share(s.size(), context.rank(), context.size());
    auto const particles = to_particles(s, rows);
    // Queries by a different share than the particles: rank r takes every R-th, from r.
    std::vector<std::size_t> mine;
    for (std::size_t j = context.rank(); j < queries.size(); j += context.size()) mine.push_back(j);
    kfmm::Vec3View<double> qpos("queries", mine.size());
    auto host = Kokkos::create_mirror_view(qpos);
    std::vector<std::vector<std::pair<double, std::uint64_t>>> expected;
    for (std::size_t m = 0; m < mine.size(); ++m) {
      for (int a = 0; a < 3; ++a) host(m, a) = queries.pos[3 * mine[m] + a];
      expected.push_back(brute_force(s, &queries.pos[3 * mine[m]], options.k, options.periodic, s.size()));
    }
    Kokkos::deep_copy(qpos, host);
    expect_rows(kfmm::knn(space, context, particles, qpos, mine.size(), options), expected);
  }

  void expect_error(PointSet const& s, KNNOptions const& options, std::string const& fragment) {
    auto const particles = to_particles(s, share(s.size(), context.rank(), context.size()));
    try {
      kfmm::knn(space, context, particles, options);
      ADD_FAILURE() << "no error for " << fragment;
    } catch (kfmm::Error const& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  }
};

double const unit[3] = {1, 1, 1};

TEST_F(KNNTest, UniformSelfQueryExcludingSelf) {
  KNNOptions o;
  o.k = 8;
  check_self(make_points(2000, Shape::Uniform, unit, 0, 1), o);
  o.leaf_size = 3;  // deep trees, leaves smaller than k
  check_self(make_points(2000, Shape::Uniform, unit, 0, 1), o);
}

TEST_F(KNNTest, ClusteredSelfQuery) {
  KNNOptions o;
  o.k = 16;
  o.leaf_size = 8;
  check_self(make_points(2000, Shape::Clustered, unit, -0.5, 2), o);
}

TEST_F(KNNTest, CoincidentParticlesTiesBrokenById) {
  KNNOptions o;
  o.k = 12;
  check_self(make_points(600, Shape::Coincident, unit, 0, 3), o);
  o.include_self = true;  // the particle itself ties at 0 with the others at its spot
  check_self(make_points(600, Shape::Coincident, unit, 0, 3), o);
}

TEST_F(KNNTest, IncludeSelfPutsEachParticleFirst) {
  KNNOptions o;
  o.k = 5;
  o.include_self = true;
  check_self(make_points(700, Shape::Uniform, unit, 0, 4), o);
}

TEST_F(KNNTest, PeriodicCubeWrapsAround) {
  KNNOptions o;
  o.k = 10;
  o.periodic = PeriodicBox::cube(1.0);
  check_self(make_points(1500, Shape::Uniform, unit, 0, 5), o);
  // Positions given outside [0, L) (extent still ≤ L) are wrapped.
  check_self(make_points(800, Shape::Clustered, unit, -0.3, 6), o);
}

TEST_F(KNNTest, PeriodicRectangularBox) {
  double const length[3] = {2.0, 0.5, 1.0};
  KNNOptions o;
  o.k = 9;
  o.periodic = PeriodicBox::box(2.0, 0.5, 1.0);
  check_self(make_points(1500, Shape::Uniform, length, 0, 7), o);
}

TEST_F(KNNTest, KLargerThanTheLocalCount) {
  // 30 particles on up to 4 ranks: after the decomposition no rank holds 25.
  KNNOptions o;
  o.k = 25;
  check_self(make_points(30, Shape::Uniform, unit, 0, 8), o);
  o.k = 29;
  o.periodic = PeriodicBox::cube(1.0);
  check_self(make_points(30, Shape::Clustered, unit, 0, 9), o);
}

TEST_F(KNNTest, FewerParticlesThanRanks) {
  // 3 particles: on 4 ranks at least one rank holds none, and may hold queries.
  KNNOptions o;
  o.k = 2;
  check_self(make_points(3, Shape::Uniform, unit, 0, 21), o);
  o.k = 3;
  check_queries(make_points(3, Shape::Clustered, unit, 0, 22), make_points(9, Shape::Uniform, unit, 0, 23), o);
  o.periodic = PeriodicBox::cube(1.0);
  o.k = 1;
  check_self(make_points(2, Shape::Uniform, unit, 0, 24), o);
}

TEST_F(KNNTest, LargeKUsesTheWideLists) {
  KNNOptions o;
  o.k = 40;
  check_self(make_points(500, Shape::Clustered, unit, 0, 10), o);
  o.k = kfmm::max_knn_k;
  check_self(make_points(300, Shape::Uniform, unit, 0, 11), o);
}

TEST_F(KNNTest, SeparateQuerySet) {
  KNNOptions o;
  o.k = 6;
  double const wide[3] = {1.4, 1.4, 1.4};
  check_queries(make_points(1500, Shape::Clustered, unit, 0, 12), make_points(400, Shape::Uniform, wide, -0.2, 13), o);
  o.periodic = PeriodicBox::cube(1.0);
  check_queries(make_points(1500, Shape::Uniform, unit, 0, 14), make_points(400, Shape::Uniform, unit, 0, 15), o);
  o.k = 100;
  o.periodic = {};
  check_queries(make_points(100, Shape::Coincident, unit, 0, 16), make_points(50, Shape::Uniform, unit, 0, 17), o);
}

// Leaves of one point and far queries: many source leaves within a query leaf's k-th
// distance, nearly equal distances (far queries), leaves smaller than k.
TEST_F(KNNTest, ManySourceLeavesAndFarQueries) {
  KNNOptions o;
  o.k = 20;
  o.leaf_size = 1;
  check_self(make_points(700, Shape::Clustered, unit, 0, 20), o);
  double const far[3] = {30, 30, 30};
  o.leaf_size = 4;
  check_queries(make_points(900, Shape::Uniform, unit, 0, 21), make_points(60, Shape::Uniform, far, 10, 22), o);
  o.periodic = PeriodicBox::cube(1.0);
  o.leaf_size = 1;
  check_queries(make_points(800, Shape::Coincident, unit, 0, 23), make_points(60, Shape::Uniform, unit, 0, 24), o);
}

// Leaves with more queries than walk together (a team's lists in scratch): piles of coincident
// points and leaves larger than a group, so that one leaf's queries walk as several groups;
// lists too long for the fast scratch level; masses carried along.
TEST_F(KNNTest, LeavesLargerThanAWalkGroup) {
  KNNOptions o;
  o.k = 10;
  check_self(make_points(1500, Shape::Coincident, unit, 0, 30), o);
  o.leaf_size = 300;
  o.k = 24;
  check_self(make_points(2500, Shape::Uniform, unit, 0, 31), o);
  o.neighbour_masses = true;
  check_self(make_points(2500, Shape::Clustered, unit, 0, 32), o);
}

// The CPU shape (queries side by side in SIMD lanes on AVX-512 CPUs) and the GPU shape (one
// thread per query) list the same neighbours bit for bit: ids, distances and masses, for every
// list capacity and lists shorter than theirs (k = 1, 7, 13, 17, 40, 100), ties (coincident
// points), periodic images, self included or not, and a separate query set.
TEST_F(KNNTest, BothKernelShapesFindTheSameLists) {
  auto const run = [&](kfmm::KernelShape shape, PointSet const& s, PointSet const* queries, KNNOptions const& o) {
    kfmm::ScopedKernelShape const scoped(shape);
    auto const particles = to_particles(s, share(s.size(), context.rank(), context.size()));
    if (queries == nullptr) return kfmm::knn(space, context, particles, o);
    kfmm::Vec3View<double> qpos("queries", queries->size());
    auto host = Kokkos::create_mirror_view(qpos);
    for (std::size_t j = 0; j < queries->size(); ++j)
      for (int a = 0; a < 3; ++a) host(j, a) = queries->pos[3 * j + a];
    Kokkos::deep_copy(qpos, host);
    return kfmm::knn(space, context, particles, qpos, queries->size(), o);
  };
  auto const expect_same = [&](PointSet const& s, PointSet const* queries, KNNOptions const& o,
                               std::string const& what) {
    auto const cpu = run(kfmm::KernelShape::Cpu, s, queries, o);
    auto const gpu = run(kfmm::KernelShape::Gpu, s, queries, o);
    ASSERT_EQ(cpu.num, gpu.num) << what;
    auto const cd = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), cpu.distance);
    auto const gd = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), gpu.distance);
    auto const ci = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), cpu.id);
    auto const gi = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), gpu.id);
    auto const cm = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), cpu.mass);
    auto const gm = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), gpu.mass);
    std::size_t differ = 0;
    for (std::size_t q = 0; q < cpu.num; ++q)
      for (int j = 0; j < o.k; ++j)
        differ += cd(q, j) != gd(q, j) || ci(q, j) != gi(q, j) || (o.neighbour_masses && cm(q, j) != gm(q, j));
    EXPECT_EQ(differ, 0u) << what << ": entries that differ between the shapes, of " << cpu.num * o.k;
  };
  KNNOptions o;
  o.neighbour_masses = true;
  for (int k : {1, 7, 8, 13, 16, 17, 40, 100}) {
    o.k = k;
    o.include_self = false;
    o.periodic = {};
    expect_same(make_points(3000, Shape::Clustered, unit, 0, 40), nullptr, o, "clustered, k = " + std::to_string(k));
    o.include_self = true;
    expect_same(make_points(900, Shape::Coincident, unit, 0, 41), nullptr, o, "coincident, k = " + std::to_string(k));
    o.periodic = PeriodicBox::cube(1.0);
    expect_same(make_points(2000, Shape::Uniform, unit, 0, 42), nullptr, o, "periodic, k = " + std::to_string(k));
  }
  o.k = 11;
  o.periodic = {};
  auto const queries = make_points(500, Shape::Clustered, unit, -0.1, 44);
  expect_same(make_points(2000, Shape::Uniform, unit, 0, 43), &queries, o, "separate queries");
}

TEST_F(KNNTest, DensityMatchesDirectSums) {
  auto const s = make_points(900, Shape::Clustered, unit, 0, 19);
  auto const rows = share(s.size(), context.rank(), context.size());
  auto particles = to_particles(s, rows);
  // Unequal masses: particle of global row i weighs 1 + i % 3.
  auto mass = Kokkos::create_mirror_view(particles.mass);
  Kokkos::deep_copy(mass, particles.mass);
  for (std::size_t m = 0; m < rows.size(); ++m) mass(m) = 1.0 + rows[m] % 3;
  Kokkos::deep_copy(particles.mass, mass);
  std::vector<double> mass_of_id(6 * s.size());
  for (std::size_t i = 0; i < s.size(); ++i) mass_of_id[s.id[i]] = 1.0 + i % 3;
  KNNOptions o;
  o.k = 10;
  o.neighbour_masses = true;
  auto const result = kfmm::knn(space, context, particles, o);
  auto const density = Kokkos::create_mirror_view_and_copy(
      Kokkos::HostSpace(), kfmm::knn_density(space, context, result, particles.mass));
  for (std::size_t m = 0; m < rows.size(); ++m) {
    auto const nearest = brute_force(s, &s.pos[3 * rows[m]], o.k, o.periodic, rows[m]);
    double const h = nearest.back().first;
    double expected = (1.0 + rows[m] % 3) * 8 / (M_PI * h * h * h);
    for (auto const& [r, id] : nearest) {
      double const u = r / h;
      double const w = u < 0.5 ? 1 - 6 * u * u + 6 * u * u * u : u < 1 ? 2 * std::pow(1 - u, 3) : 0;
      expected += mass_of_id[id] * 8 / (M_PI * h * h * h) * w;
    }
    ASSERT_NEAR(density(m), expected, 1e-10 * expected) << "row " << m;
  }
  // Without masses in the result, and with the k-th neighbour at distance 0: errors.
  o.neighbour_masses = false;
  auto const plain = kfmm::knn(space, context, particles, o);
  EXPECT_THROW(kfmm::knn_density(space, context, plain, particles.mass), kfmm::Error);
  auto const piled = to_particles(make_points(300, Shape::Coincident, unit, 0, 20),
                                  share(300, context.rank(), context.size()));
  o.neighbour_masses = true;
  auto const zero = kfmm::knn(space, context, piled, o);
  try {
    kfmm::knn_density(space, context, zero, piled.mass);
    ADD_FAILURE() << "no error";
  } catch (kfmm::Error const& e) {
    EXPECT_NE(std::string(e.what()).find("distance 0"), std::string::npos) << e.what();
  }
}

TEST_F(KNNTest, BadInputIsAnErrorOnEveryRank) {
  auto const s = make_points(50, Shape::Uniform, unit, 0, 18);
  KNNOptions o;
  o.k = 0;
  expect_error(s, o, "k = 0 is invalid");
  o.k = 50;
  expect_error(s, o, "k = 50 exceeds the 49 other particles");
  o.include_self = true;
  o.k = 51;
  expect_error(s, o, "k = 51 exceeds the number of particles N = 50");
  o.k = kfmm::max_knn_k + 1;
  expect_error(s, o, "exceeds the largest supported k = 128");
  o.k = 4;
  o.periodic = PeriodicBox::box(1.0, 0.5, 1.0);
  expect_error(s, o, "periodic box length 0.5 along y is smaller than the extent");
  o.periodic = PeriodicBox::cube(-1.0);
  expect_error(s, o, "periodic box length -1 along x must be finite and positive");
}

}  // namespace
