#include <kfmm/core/hilbert.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <set>
#include <vector>

namespace {

using kfmm::GridPoint;
using kfmm::hilbert_coordinates;
using kfmm::hilbert_key;

TEST(Hilbert, KeyAndCoordinatesAreInverse) {
  std::mt19937_64 random(7);
  std::uniform_int_distribution<std::uint32_t> coordinate(0, kfmm::max_grid_coordinate);
  for (int trial = 0; trial < 100000; ++trial) {
    std::uint32_t const x = coordinate(random), y = coordinate(random), z = coordinate(random);
    std::uint64_t const key = hilbert_key(x, y, z);
    ASSERT_LT(key, std::uint64_t(1) << 63);
    GridPoint const back = hilbert_coordinates(key);
    ASSERT_EQ(back[0], x);
    ASSERT_EQ(back[1], y);
    ASSERT_EQ(back[2], z);
  }
  // The corners of the grid too.
  for (std::uint32_t c : {0u, kfmm::max_grid_coordinate}) {
    GridPoint const back = hilbert_coordinates(hilbert_key(c, 0, c));
    EXPECT_EQ(back[0], c);
    EXPECT_EQ(back[1], 0u);
    EXPECT_EQ(back[2], c);
  }
}

// On the finest 2^4 grid of a cell of level 17 the keys 0 … 4095 walk through the 4096 points
// and every step goes to a face neighbour: the defining property of a Hilbert curve.
TEST(Hilbert, ConsecutiveKeysAreFaceNeighbours) {
  int const bits = 4;
  std::uint64_t const cells = std::uint64_t(1) << (3 * bits);
  std::set<std::uint64_t> visited;
  GridPoint previous = hilbert_coordinates(0);
  for (std::uint64_t key = 0; key < cells; ++key) {
    GridPoint const point = hilbert_coordinates(key);
    for (int k = 0; k < 3; ++k) ASSERT_LT(point[k], 1u << bits) << "key " << key;
    visited.insert(point[0] | std::uint64_t(point[1]) << 21 | std::uint64_t(point[2]) << 42);
    if (key == 0) continue;
    int distance = 0;
    for (int k = 0; k < 3; ++k) distance += std::abs(int(point[k]) - int(previous[k]));
    ASSERT_EQ(distance, 1) << "keys " << key - 1 << " and " << key;
    previous = point;
  }
  EXPECT_EQ(visited.size(), cells);
}

TEST(Hilbert, KeysWithACommonPrefixShareTheirCell) {
  std::mt19937_64 random(3);
  for (int level = 0; level <= kfmm::key_bits_per_axis; ++level) {
    int const low_bits = 3 * (kfmm::key_bits_per_axis - level);
    std::uint32_t const cell_edge = std::uint32_t(1) << (kfmm::key_bits_per_axis - level);
    for (int trial = 0; trial < 200; ++trial) {
      std::uint64_t const prefix = (random() >> 1) >> low_bits << low_bits;
      GridPoint const corner = kfmm::cell_corner(prefix, level);
      for (int k = 0; k < 3; ++k) ASSERT_EQ(corner[k] % cell_edge, 0u);
      std::uint64_t const low_mask = low_bits == 0 ? 0 : (std::uint64_t(1) << low_bits) - 1;
      std::uint64_t const key = prefix | (random() & low_mask);
      GridPoint const key_corner = kfmm::cell_corner(key, level);
      for (int k = 0; k < 3; ++k) ASSERT_EQ(key_corner[k], corner[k]) << "level " << level;
      GridPoint const point = hilbert_coordinates(key);
      for (int k = 0; k < 3; ++k) {
        ASSERT_GE(point[k], corner[k]);
        ASSERT_LT(point[k] - corner[k], cell_edge);
      }
    }
  }
}

TEST(Hilbert, CubeEnclosesTheBoundsWithPositiveSize) {
  double const lo[3] = {-1, 2, 3}, hi[3] = {1, 2.5, 7};
  auto const cube = kfmm::cube_from_bounds(lo, hi);
  EXPECT_GT(cube.size, 4.0);
  for (int k = 0; k < 3; ++k) {
    EXPECT_LT(cube.corner[k], lo[k]);
    EXPECT_GT(cube.corner[k] + cube.size, hi[k]);
  }
  double const point[3] = {5, 5, 5};
  EXPECT_GT(kfmm::cube_from_bounds(point, point).size, 0.0);
  double const origin[3] = {0, 0, 0};
  EXPECT_GT(kfmm::cube_from_bounds(origin, origin).size, 0.0);
  // The largest point maps inside, not onto the clamp.
  auto const grid = kfmm::integer_coordinates(cube, hi[0], hi[1], hi[2]);
  EXPECT_LT(grid[2], kfmm::max_grid_coordinate);
}

TEST(Hilbert, NonFiniteOrEmptyBoundsAreRejected) {
  double const lo[3] = {0, 0, 0}, hi[3] = {1, NAN, 1};
  EXPECT_THROW(kfmm::cube_from_bounds(lo, hi), kfmm::Error);
  double const empty_lo[3] = {1e308, 1e308, 1e308}, empty_hi[3] = {-1e308, -1e308, -1e308};
  EXPECT_THROW(kfmm::cube_from_bounds(empty_lo, empty_hi), kfmm::Error);
}

// Runs compute_bounds + cube_from_bounds + compute_keys on host positions.
std::vector<std::uint64_t> keys_of(std::vector<std::array<double, 3>> const& points) {
  std::size_t const n = points.size();
  kfmm::Vec3View<double> pos("pos", n);
  auto pos_host = Kokkos::create_mirror_view(pos);
  for (std::size_t i = 0; i < n; ++i)
    for (int k = 0; k < 3; ++k) pos_host(i, k) = points[i][k];
  Kokkos::deep_copy(pos, pos_host);
  kfmm::ExecutionSpace space;
  double lo[3], hi[3];
  kfmm::compute_bounds(space, pos, n, lo, hi);
  Kokkos::View<std::uint64_t*, kfmm::MemorySpace> keys("keys", n);
  kfmm::compute_keys(space, kfmm::cube_from_bounds(lo, hi), pos, n, keys);
  auto keys_host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), keys);
  return std::vector<std::uint64_t>(keys_host.data(), keys_host.data() + n);
}

TEST(Hilbert, CoincidentPointsGetEqualKeys) {
  auto const keys = keys_of({{0.3, 0.3, 0.3}, {0.3, 0.3, 0.3}, {1, 2, 3}, {0.3, 0.3, 0.3}});
  EXPECT_EQ(keys[0], keys[1]);
  EXPECT_EQ(keys[0], keys[3]);
  EXPECT_NE(keys[0], keys[2]);
  auto const single = keys_of({{4, 4, 4}, {4, 4, 4}});
  EXPECT_EQ(single[0], single[1]);
}

TEST(Hilbert, TinySeparationsFarFromTheOriginStayFiniteAndOrdered) {
  std::vector<std::array<double, 3>> points;
  for (int i = 0; i < 10; ++i) points.push_back({1e3 + 1e-9 * i, 1e3, 1e3 - 1e-9 * i});
  auto const keys = keys_of(points);
  for (std::uint64_t key : keys) {
    EXPECT_LT(key, std::uint64_t(1) << 63);
    GridPoint const grid = hilbert_coordinates(key);
    for (int k = 0; k < 3; ++k) EXPECT_LE(grid[k], kfmm::max_grid_coordinate);
  }
  // Points along x decode to non-decreasing x grid coordinates (distinct or equal, never swapped).
  for (std::size_t i = 1; i < keys.size(); ++i)
    EXPECT_GE(hilbert_coordinates(keys[i])[0], hilbert_coordinates(keys[i - 1])[0]);
  EXPECT_NE(keys.front(), keys.back());
}

TEST(Hilbert, ComputeKeysMatchesTheScalarFunctions) {
  std::mt19937_64 random(11);
  std::normal_distribution<double> normal(0, 10);
  std::vector<std::array<double, 3>> points(1000);
  for (auto& p : points) p = {normal(random), normal(random), normal(random)};
  auto const keys = keys_of(points);
  double lo[3] = {1e308, 1e308, 1e308}, hi[3] = {-1e308, -1e308, -1e308};
  for (auto const& p : points)
    for (int k = 0; k < 3; ++k) lo[k] = std::min(lo[k], p[k]), hi[k] = std::max(hi[k], p[k]);
  auto const cube = kfmm::cube_from_bounds(lo, hi);
  for (std::size_t i = 0; i < points.size(); ++i) {
    GridPoint const g = kfmm::integer_coordinates(cube, points[i][0], points[i][1], points[i][2]);
    ASSERT_EQ(keys[i], hilbert_key(g[0], g[1], g[2]));
  }
}

// Both shapes of compute_keys (64 lanes per thread on CPUs, one thread per particle on GPUs)
// give the same keys, also for a count that is not a multiple of the lane width, for NaN and for
// points outside the cube.
TEST(Hilbert, LaneAndPerParticleShapesGiveTheSameKeys) {
  std::mt19937_64 random(13);
  std::normal_distribution<double> normal(0, 5);
  std::size_t const n = 250 * 64 + 7;
  kfmm::Vec3View<double> pos("pos", n + 3);
  auto pos_host = Kokkos::create_mirror_view(pos);
  for (std::size_t i = 0; i < n + 3; ++i)
    for (int k = 0; k < 3; ++k) pos_host(i, k) = normal(random);
  pos_host(5, 1) = NAN;
  // Outside the cube (clamped), in a full block of lanes and in the last, partial one.
  pos_host(20, 0) = 1e3;
  pos_host(21, 2) = -1e3;
  pos_host(n - 2, 1) = 1e3;
  Kokkos::deep_copy(pos, pos_host);
  kfmm::ExecutionSpace space;
  double const lo[3] = {-40, -40, -40}, hi[3] = {40, 40, 40};
  auto const cube = kfmm::cube_from_bounds(lo, hi);
  for (std::size_t count : {n, std::size_t(1), std::size_t(15), std::size_t(17), std::size_t(63), std::size_t(65)}) {
    SCOPED_TRACE(testing::Message() << "n = " << count);
    Kokkos::View<std::uint64_t*, kfmm::MemorySpace> lanes("lanes", n + 3), single("single", n + 3), chosen("chosen", n + 3);
    Kokkos::deep_copy(lanes, 7);  // past `count` must stay untouched
    Kokkos::deep_copy(single, 7);
    kfmm::compute_keys_in_lanes<64>(space, cube, pos, count, lanes);
    kfmm::compute_keys_in_lanes<1>(space, cube, pos, count, single);
    kfmm::compute_keys(space, cube, pos, count, chosen);
    auto const a = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), lanes);
    auto const b = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), single);
    auto const c = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), chosen);
    for (std::size_t i = 0; i < n + 3; ++i) {
      ASSERT_EQ(a(i), b(i)) << "point " << i;
      if (i < count) {
        ASSERT_EQ(c(i), a(i)) << "point " << i;
        GridPoint const g = kfmm::integer_coordinates(cube, pos_host(i, 0), pos_host(i, 1), pos_host(i, 2));
        ASSERT_EQ(a(i), hilbert_key(g[0], g[1], g[2])) << "point " << i;
      } else {
        ASSERT_EQ(a(i), 7u) << "point " << i;
      }
    }
  }
  // The lane count follows the requested kernel shape; GPU backends always take one lane.
  for (auto shape : {kfmm::KernelShape::Cpu, kfmm::KernelShape::Gpu}) {
    kfmm::ScopedKernelShape const scope(shape);
    bool const gpu = shape == kfmm::KernelShape::Gpu || kfmm::gpu_shaped_kernels<kfmm::ExecutionSpace>();
    EXPECT_EQ(kfmm::hilbert_key_lanes<kfmm::ExecutionSpace>(), gpu ? 1 : 64) << kfmm::to_string(shape);
  }
}

}  // namespace
