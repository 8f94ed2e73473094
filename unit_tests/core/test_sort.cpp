#include <kfmm/core/hilbert.hpp>
#include <kfmm/core/sort.hpp>

#include "../../perf_tests/clumped_positions.hpp"  // the benchmarks' clumps, shared

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

using Keys = Kokkos::View<std::uint64_t*, kfmm::MemorySpace>;

template <class T>
std::vector<T> to_vector(Kokkos::View<T*, kfmm::MemorySpace> const& view) {
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), view);
  return std::vector<T>(host.data(), host.data() + host.extent(0));
}

Keys to_view(std::vector<std::uint64_t> const& keys) {
  Keys view("keys", keys.size());
  auto host = Kokkos::create_mirror_view(view);
  std::copy(keys.begin(), keys.end(), host.data());
  Kokkos::deep_copy(view, host);
  return view;
}

// Sorts with kfmm and checks keys and permutation against std::stable_sort.
template <class Index>
void expect_like_stable_sort(std::vector<std::uint64_t> const& keys) {
  std::vector<std::size_t> order(keys.size());
  std::iota(order.begin(), order.end(), std::size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return keys[a] < keys[b]; });
  Keys view = to_view(keys);
  Kokkos::View<Index*, kfmm::MemorySpace> permutation("permutation", keys.size());
  kfmm::sort_by_key(kfmm::ExecutionSpace(), view, permutation);
  auto const sorted = to_vector(view);
  auto const got = to_vector(permutation);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(got[i], order[i]) << "position " << i << " of " << keys.size();
    ASSERT_EQ(sorted[i], keys[order[i]]) << "position " << i;
  }
}

std::vector<std::uint64_t> random_keys(std::size_t n, std::uint64_t mask, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<std::uint64_t> keys(n);
  for (auto& key : keys) key = random() & mask;
  return keys;
}

TEST(Sort, RandomKeysOfEverySize) {
  for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(1000), std::size_t(1000000)})
    expect_like_stable_sort<std::uint32_t>(random_keys(n, ~std::uint64_t(0), n));
}

TEST(Sort, SizeTPermutation) { expect_like_stable_sort<std::size_t>(random_keys(5000, 0xffff0000ffull, 2)); }

TEST(Sort, AlreadySortedAndReversedKeys) {
  auto keys = random_keys(100000, (std::uint64_t(1) << 63) - 1, 5);
  std::sort(keys.begin(), keys.end());
  expect_like_stable_sort<std::uint32_t>(keys);
  std::reverse(keys.begin(), keys.end());
  expect_like_stable_sort<std::uint32_t>(keys);
}

TEST(Sort, ConstantKeysKeepTheirOrder) {
  expect_like_stable_sort<std::uint32_t>(std::vector<std::uint64_t>(1000, 0x123456789abcdefull));
  expect_like_stable_sort<std::uint32_t>(std::vector<std::uint64_t>(1000000, 0));
}

TEST(Sort, FewDistinctKeysAreStable) {
  auto keys = random_keys(1000000, 3, 9);
  for (auto& key : keys) key <<= 40;  // digits vary only in one byte
  expect_like_stable_sort<std::uint32_t>(keys);
  expect_like_stable_sort<std::uint32_t>(random_keys(1000, 7, 10));
}

TEST(Sort, SorterReusesScratchAndSortsAPrefix) {
  kfmm::KeySorter<kfmm::MemorySpace> sorter;
  kfmm::ExecutionSpace space;
  for (std::size_t n : {std::size_t(2000), std::size_t(300), std::size_t(5000)}) {
    auto keys = random_keys(n + 10, ~std::uint64_t(0), n);
    Keys view = to_view(keys);
    Kokkos::View<std::uint32_t*, kfmm::MemorySpace> permutation("permutation", n + 10);
    sorter.sort(space, view, permutation, n);
    auto const sorted = to_vector(view);
    std::vector<std::uint64_t> expected(keys.begin(), keys.begin() + n);
    std::sort(expected.begin(), expected.end());
    ASSERT_TRUE(std::equal(expected.begin(), expected.end(), sorted.begin()));
    // Keys past n are untouched.
    EXPECT_TRUE(std::equal(keys.begin() + n, keys.end(), sorted.begin() + n));
  }
}

TEST(Sort, ShortViewsAreRejected) {
  Keys keys("keys", 10);
  Kokkos::View<std::uint32_t*, kfmm::MemorySpace> permutation("permutation", 5);
  kfmm::KeySorter<kfmm::MemorySpace> sorter;
  EXPECT_THROW(sorter.sort(kfmm::ExecutionSpace(), keys, permutation, 10), kfmm::Error);
}

TEST(Sort, PermuteReordersEveryParticleField) {
  std::size_t const n = 100;
  kfmm::Particles<kfmm::HostSpace> host(n + 5);
  host.num = host.num_total = n;
  for (std::size_t i = 0; i < n; ++i) {
    for (int k = 0; k < 3; ++k) host.pos(i, k) = 10.0 * i + k, host.vel(i, k) = -double(i) - k;
    host.mass(i) = 0.5 * i;
    host.id(i) = 1000 + i;
  }
  auto particles = kfmm::to_device(host);
  Kokkos::View<std::uint32_t*, kfmm::MemorySpace> permutation("permutation", n);
  auto permutation_host = Kokkos::create_mirror_view(permutation);
  for (std::size_t i = 0; i < n; ++i) permutation_host(i) = std::uint32_t((7 * i + 3) % n);
  Kokkos::deep_copy(permutation, permutation_host);
  kfmm::permute(kfmm::ExecutionSpace(), particles, permutation);
  auto const back = kfmm::to_host(particles);
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t const old = permutation_host(i);
    EXPECT_EQ(back.id(i), 1000 + old);
    EXPECT_EQ(back.mass(i), 0.5 * old);
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(back.pos(i, k), 10.0 * old + k);
      EXPECT_EQ(back.vel(i, k), -double(old) - k);
    }
  }
}

// The GPU-shaped sort (a team per block, digit counters in team scratch) against
// std::stable_sort and the CPU-shaped sort, for team sizes and chunk lengths that leave
// partial chunks, empty threads in the last block and single-key blocks.
template <class Index>
void expect_team_sort_like_stable_sort(std::vector<std::uint64_t> const& keys, kfmm::SortTeamShape shape) {
  SCOPED_TRACE(testing::Message() << "n = " << keys.size() << ", team size " << shape.team_size << ", keys per thread "
                                  << shape.keys_per_thread);
  std::vector<std::size_t> order(keys.size());
  std::iota(order.begin(), order.end(), std::size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return keys[a] < keys[b]; });
  kfmm::ExecutionSpace space;
  kfmm::KeySorter<kfmm::MemorySpace, Index> sorter;
  Keys teams = to_view(keys), blocks = to_view(keys);
  Kokkos::View<Index*, kfmm::MemorySpace> team_permutation("permutation", keys.size()),
      block_permutation("permutation", keys.size());
  sorter.sort_teams(space, teams, team_permutation, keys.size(), shape);
  sorter.sort_blocks(space, blocks, block_permutation, keys.size());
  auto const sorted = to_vector(teams);
  auto const got = to_vector(team_permutation);
  auto const cpu_sorted = to_vector(blocks);
  auto const cpu_got = to_vector(block_permutation);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(got[i], order[i]) << "position " << i;
    ASSERT_EQ(sorted[i], keys[order[i]]) << "position " << i;
    ASSERT_EQ(cpu_got[i], got[i]) << "position " << i;
    ASSERT_EQ(cpu_sorted[i], sorted[i]) << "position " << i;
  }
}

std::vector<kfmm::SortTeamShape> sort_team_shapes() {
  std::vector<kfmm::SortTeamShape> shapes = {{0, 0}, {1, 1}, {1, 256}};
  if (kfmm::ExecutionSpace().concurrency() >= 2) {
    shapes.push_back({2, 3});
    shapes.push_back({2, 0});
  }
  return shapes;
}

TEST(Sort, TeamShapeMatchesStableSort) {
  for (auto const shape : sort_team_shapes()) {
    // Tiny blocks mean 256 counters per few keys: keep those sorts short.
    bool const tiny_blocks = shape.keys_per_thread > 0 && shape.team_size * shape.keys_per_thread < 64;
    std::size_t const large = tiny_blocks ? 3001 : 30011, medium = tiny_blocks ? 1001 : 5000;
    for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(2), std::size_t(5), std::size_t(1000), large})
      expect_team_sort_like_stable_sort<std::uint32_t>(random_keys(n, ~std::uint64_t(0), n + 1), shape);
    auto few = random_keys(medium, 3, 9);
    for (auto& key : few) key <<= 40;  // digits vary only in one byte: long equal runs
    expect_team_sort_like_stable_sort<std::uint32_t>(few, shape);
    auto sorted = random_keys(medium, (std::uint64_t(1) << 63) - 1, 5);
    std::sort(sorted.begin(), sorted.end());
    expect_team_sort_like_stable_sort<std::uint32_t>(sorted, shape);
    std::reverse(sorted.begin(), sorted.end());
    expect_team_sort_like_stable_sort<std::uint32_t>(sorted, shape);
    expect_team_sort_like_stable_sort<std::uint32_t>(std::vector<std::uint64_t>(medium, 42), shape);
    expect_team_sort_like_stable_sort<std::size_t>(random_keys(medium, 0xffff0000ffull, 2), shape);
  }
}

// One digit value everywhere in a full block: the 16-bit counters reach the block length.
TEST(Sort, TeamShapeCountsAFullBlockOfOneDigit) {
  std::vector<std::uint64_t> keys(3 * 65535 + 11, 0x100);
  for (std::size_t i = 0; i < keys.size(); i += 1000) keys[i] = 0x1ff;  // two digits in byte 0
  expect_team_sort_like_stable_sort<std::uint32_t>(keys, {1, 65535});
  if (kfmm::ExecutionSpace().concurrency() >= 2) expect_team_sort_like_stable_sort<std::uint32_t>(keys, {2, 32767});
}

TEST(Sort, TeamShapeRejectsBlocksBeyondItsCounters) {
  Keys keys = to_view(random_keys(10, ~std::uint64_t(0), 1));
  Kokkos::View<std::uint32_t*, kfmm::MemorySpace> permutation("permutation", 10);
  kfmm::KeySorter<kfmm::MemorySpace> sorter;
  EXPECT_THROW(sorter.sort_teams(kfmm::ExecutionSpace(), keys, permutation, 10, {1, 65536}), kfmm::Error);
}

// The sorter's own permute() (through its key scratch) reorders like the free permute().
TEST(Sort, SorterPermuteMatchesPermute) {
  std::size_t const n = 3000;
  kfmm::Particles<kfmm::HostSpace> host(n + 5);
  host.num = host.num_total = n;
  for (std::size_t i = 0; i < n; ++i) {
    for (int k = 0; k < 3; ++k) host.pos(i, k) = 10.0 * i + k, host.vel(i, k) = -double(i) - k;
    host.mass(i) = 0.5 * i;
    host.id(i) = 1000 + i;
  }
  auto keys = random_keys(n, 0xfff, 3);
  Keys key_view = to_view(keys);
  Kokkos::View<std::uint32_t*, kfmm::MemorySpace> permutation("permutation", n);
  kfmm::KeySorter<kfmm::MemorySpace> sorter;
  kfmm::ExecutionSpace space;
  sorter.sort(space, key_view, permutation, n);
  auto by_sorter = kfmm::to_device(host);
  auto by_function = kfmm::to_device(host);
  sorter.permute(space, by_sorter, permutation);
  kfmm::permute(space, by_function, permutation);
  auto const a = kfmm::to_host(by_sorter);
  auto const b = kfmm::to_host(by_function);
  auto const perm = to_vector(permutation);
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t const old = perm[i];
    ASSERT_EQ(a.id(i), 1000 + old);
    ASSERT_EQ(b.id(i), a.id(i));
    ASSERT_EQ(a.mass(i), 0.5 * old);
    ASSERT_EQ(b.mass(i), a.mass(i));
    for (int k = 0; k < 3; ++k) {
      ASSERT_EQ(a.pos(i, k), 10.0 * old + k);
      ASSERT_EQ(a.vel(i, k), -double(old) - k);
      ASSERT_EQ(b.pos(i, k), a.pos(i, k));
      ASSERT_EQ(b.vel(i, k), a.vel(i, k));
    }
  }
}

}  // namespace

namespace {

// Particles whose every field encodes the row, so a permuted copy shows where each row came from.
kfmm::Particles<kfmm::HostSpace> numbered_particles(std::size_t n) {
  kfmm::Particles<kfmm::HostSpace> host(n + 3);
  host.num = host.num_total = n;
  for (std::size_t i = 0; i < n; ++i) {
    for (int k = 0; k < 3; ++k) host.pos(i, k) = 10.0 * i + k + 0.25, host.vel(i, k) = -double(i) - k;
    host.mass(i) = 0.5 * i;
    host.id(i) = 7 + 3 * i;
  }
  return host;
}

Kokkos::View<std::uint32_t*, kfmm::MemorySpace> permutation_view(std::vector<std::uint32_t> const& order) {
  Kokkos::View<std::uint32_t*, kfmm::MemorySpace> permutation("permutation", order.size());
  auto host = Kokkos::create_mirror_view(permutation);
  std::copy(order.begin(), order.end(), host.data());
  Kokkos::deep_copy(permutation, host);
  return permutation;
}

// The blocked permutation (windows of 2^shift source rows) gives the plain gather's bits.
void expect_blocked_like_plain(std::vector<std::uint32_t> const& order, int window_shift) {
  std::size_t const n = order.size();
  auto const host = numbered_particles(n);
  auto const permutation = permutation_view(order);
  kfmm::ExecutionSpace space;
  kfmm::KeySorter<kfmm::MemorySpace> sorter;
  auto blocked = kfmm::to_device(host);
  auto plain = kfmm::to_device(host);
  sorter.permute_blocked(space, blocked, permutation, window_shift);
  kfmm::permute(space, plain, permutation);
  auto const a = kfmm::to_host(blocked);
  auto const b = kfmm::to_host(plain);
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t const old = order[i];
    ASSERT_EQ(a.id(i), 7 + 3 * old) << "row " << i << ", windows of 2^" << window_shift;
    ASSERT_EQ(a.id(i), b.id(i));
    ASSERT_EQ(a.mass(i), b.mass(i));
    for (int k = 0; k < 3; ++k) {
      ASSERT_EQ(a.pos(i, k), 10.0 * old + k + 0.25);
      ASSERT_EQ(a.pos(i, k), b.pos(i, k));
      ASSERT_EQ(a.vel(i, k), b.vel(i, k));
    }
  }
}

}  // namespace

// Random, identity and reversed permutations, windows from 16 rows (many windows, a partial
// last one) to the default (one window at this size), and the sizes with 0 and 1 rows.
TEST(Sort, BlockedPermuteMatchesPlainGather) {
  for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(4099)}) {
    std::vector<std::uint32_t> order(n);
    std::iota(order.begin(), order.end(), 0u);
    std::vector<std::uint32_t> reversed(order.rbegin(), order.rend());
    std::vector<std::uint32_t> shuffled = order;
    std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937_64(n));
    for (int shift : {4, 7, 0}) {
      expect_blocked_like_plain(order, shift);
      expect_blocked_like_plain(reversed, shift);
      expect_blocked_like_plain(shuffled, shift);
    }
  }
}

// More rows than 256 windows of 2^4 hold: the windows widen (at most 256 counters per block).
TEST(Sort, BlockedPermuteWidensWindowsBeyond256) {
  std::size_t const n = 256 * 16 * 3 + 5;
  EXPECT_LE(kfmm::detail::permutation_windows(n, 4).count, kfmm::detail::radix);
  EXPECT_EQ(kfmm::detail::permutation_windows(n, 4).shift, 6);
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(5));
  expect_blocked_like_plain(order, 4);
}

// From blocked_permutation_min_rows on, the sorter's permute() takes the blocked path on CPU
// backends: still the plain gather's result.
TEST(Sort, LargeSorterPermuteMatchesPermute) {
  std::size_t const n = kfmm::detail::blocked_permutation_min_rows + 77;
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(9));
  auto const host = numbered_particles(n);
  auto const permutation = permutation_view(order);
  kfmm::ExecutionSpace space;
  EXPECT_TRUE(kfmm::detail::scattered_permutation(space, permutation, n));
  Kokkos::View<std::uint32_t*, kfmm::MemorySpace> identity("identity", n);
  kfmm::detail::radix_iota(space, identity, n);
  EXPECT_FALSE(kfmm::detail::scattered_permutation(space, identity, n));
  kfmm::KeySorter<kfmm::MemorySpace> sorter;
  auto by_sorter = kfmm::to_device(host);
  sorter.permute(space, by_sorter, permutation);
  auto const a = kfmm::to_host(by_sorter);
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_EQ(a.id(i), 7 + 3 * std::size_t(order[i])) << "row " << i;
    ASSERT_EQ(a.vel(i, 2), -double(order[i]) - 2);
  }
}

namespace {

// Sorted keys disturbed a little: `moves` keys swapped with one up to `reach` places further,
// and runs of equal keys (ties must stay in index order).
std::vector<std::uint64_t> nearly_sorted_keys(std::size_t n, std::size_t moves, std::size_t reach, std::uint64_t seed) {
  auto keys = random_keys(n, 0xfffffffull, seed);
  std::sort(keys.begin(), keys.end());
  for (std::size_t i = 0; i + 3 < n; i += 97) keys[i + 1] = keys[i + 2] = keys[i];  // ties
  std::mt19937_64 random(seed + 1);
  for (std::size_t k = 0; k < moves && n > 1; ++k) {
    std::size_t const i = random() % n;
    std::size_t const j = std::min(n - 1, i + random() % (reach + 1));
    std::swap(keys[i], keys[j]);
  }
  return keys;
}

// Checks keys and permutation against std::stable_sort.
void expect_stable_order(std::vector<std::uint64_t> const& keys, Keys const& view,
                         Kokkos::View<std::uint32_t*, kfmm::MemorySpace> const& permutation) {
  std::vector<std::size_t> order(keys.size());
  std::iota(order.begin(), order.end(), std::size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return keys[a] < keys[b]; });
  auto const sorted = to_vector(view);
  auto const got = to_vector(permutation);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(got[i], order[i]) << "position " << i << " of " << keys.size();
    ASSERT_EQ(sorted[i], keys[order[i]]) << "position " << i;
  }
}

// KeySorter::sort() against std::stable_sort; returns its answer (false: the keys were sorted).
bool sort_like_stable_sort(kfmm::KeySorter<kfmm::MemorySpace>& sorter, std::vector<std::uint64_t> const& keys) {
  Keys view = to_view(keys);
  Kokkos::View<std::uint32_t*, kfmm::MemorySpace> permutation("permutation", keys.size());
  bool const moved = sorter.sort(kfmm::ExecutionSpace(), view, permutation, keys.size());
  expect_stable_order(keys, view, permutation);
  return moved;
}

TEST(Sort, SortedKeysAreDetectedAndLeftAsTheyAre) {
  kfmm::KeySorter<kfmm::MemorySpace> sorter;
  auto keys = nearly_sorted_keys(50000, 0, 0, 3);
  EXPECT_FALSE(sort_like_stable_sort(sorter, keys));  // identity: nothing to permute
  keys[100] = keys[50000 - 1] + 1;
  EXPECT_TRUE(sort_like_stable_sort(sorter, keys));
  EXPECT_TRUE(sort_like_stable_sort(sorter, nearly_sorted_keys(30000, 3000, 30000, 6)));  // many moved: radix
}

// Nearly sorted keys, whichever path sort() takes for them (identity, runs merge, radix): the
// stable sort, for moves near and far, ties, a moved key at either end, rotations and sizes
// around the paths' limits.
TEST(Sort, NearlySortedKeysMatchStableSort) {
  kfmm::KeySorter<kfmm::MemorySpace> sorter;
  for (std::size_t n : {std::size_t(2), std::size_t(3), std::size_t(17), std::size_t(1000), std::size_t(50000)})
    for (std::size_t moves : {std::size_t(1), std::size_t(5), n / 200 + 1})
      for (std::size_t reach : {std::size_t(1), std::size_t(40), n}) {
        SCOPED_TRACE("n " + std::to_string(n) + ", moves " + std::to_string(moves) + ", reach " + std::to_string(reach));
        sort_like_stable_sort(sorter, nearly_sorted_keys(n, moves, reach, n + moves + reach));
      }
  auto keys = nearly_sorted_keys(5000, 0, 0, 8);
  std::rotate(keys.begin(), keys.begin() + 1, keys.end());  // the smallest key last
  EXPECT_TRUE(sort_like_stable_sort(sorter, keys));
  std::rotate(keys.begin(), keys.end() - 2, keys.end());  // the largest keys first
  EXPECT_TRUE(sort_like_stable_sort(sorter, keys));
  std::rotate(keys.begin(), keys.begin() + 2500, keys.end());  // rotated by half
  EXPECT_TRUE(sort_like_stable_sort(sorter, keys));
}

// What a drifted step leaves: sorted keys with ties, neighbours swapped locally (a share
// `local`), single keys that jumped far up or down (a share `jumps`), and `blocks` stretches
// of `block` consecutive keys that jumped together (particles crossing a coarse cell boundary
// side by side), as consecutive far keys.
std::vector<std::uint64_t> drifted_keys(std::size_t n, double local, double jumps, std::size_t blocks,
                                        std::size_t block, std::uint64_t seed) {
  auto keys = nearly_sorted_keys(n, 0, 0, seed);
  std::mt19937_64 random(seed + 2);
  std::uniform_real_distribution<double> uniform(0, 1);
  for (std::size_t i = 0; i + 3 < n; ++i)
    if (uniform(random) < local) std::swap(keys[i], keys[i + 1 + random() % 3]);
  for (std::size_t i = 0; i < n; ++i)
    if (uniform(random) < jumps) keys[i] = keys[random() % n];
  for (std::size_t b = 0; b < blocks && n > block; ++b) {
    std::size_t const at = random() % (n - block), from = random() % (n - block);
    for (std::size_t k = 0; k < block; ++k) keys[at + k] = keys[from] + k;
  }
  return keys;
}

// The displaced-keys path gives the stable sort for drifted keys (local swaps, far jumps up
// and down, stretches that jumped together, shorter and longer than the marking reaches, ties
// between displaced and undisplaced keys); keys too disordered for it are declined untouched,
// and sort() then takes another path.
TEST(Sort, DisplacedPathMatchesStableSort) {
  using Sorter = kfmm::KeySorter<kfmm::MemorySpace>;
  Sorter sorter;
  kfmm::ExecutionSpace space;
  enum Expect { accept, decline, either };
  auto check = [&](std::vector<std::uint64_t> const& keys, Expect expect, std::string const& what) {
    SCOPED_TRACE(what);
    Keys view = to_view(keys);
    Kokkos::View<std::uint32_t*, kfmm::MemorySpace> permutation("permutation", keys.size());
    bool const accepted = sorter.sort_displaced(space, view, permutation, keys.size());
    if (expect != either) EXPECT_EQ(accepted, expect == accept);
    if (accepted)
      expect_stable_order(keys, view, permutation);
    else
      EXPECT_EQ(to_vector(view), keys);
    sort_like_stable_sort(sorter, keys);
  };
  for (std::size_t n : {std::size_t(2), std::size_t(5), std::size_t(300), std::size_t(20000), std::size_t(150000)})
    for (double local : {0.0, 0.03})
      for (double jumps : {0.0, 0.002})
        for (std::size_t block : {std::size_t(1), std::size_t(5), std::size_t(40), std::size_t(150)}) {
          // Far fewer displaced keys than the path's room (one in eight): accepted; more: either.
          std::size_t const blocks = n / 5000 + 1;
          bool const few = n <= block || blocks * block <= n / 32 + 1;
          check(drifted_keys(n, local, jumps, blocks, block, n + block), few ? accept : either,
                "n " + std::to_string(n) + ", local " + std::to_string(local) + ", jumps " + std::to_string(jumps) +
                    ", " + std::to_string(blocks) + " blocks of " + std::to_string(block));
        }
  check({5, 1, 2, 3, 5, 5, 6}, accept, "a displaced key equal to later ones goes first");
  check({1, 2, 5, 5, 6, 7, 8, 5, 9}, accept, "a displaced key equal to earlier ones goes last");
  check({3, 3, 3, 1, 1, 1}, decline, "two runs of ties: half the keys move");
  // Displaced keys that go before every other key or after every other one: the merge's first
  // and last blocks.
  auto ends = nearly_sorted_keys(3000, 0, 0, 13);
  ends[1700] = 0;
  ends[2100] = 1;
  ends[40] = ends[2999] + 1;
  ends[41] = ends[2999] + 2;
  check(ends, accept, "displaced keys first and last");
  // A stretch that jumped down, longer than the first round's reach: it moves, and few of the
  // keys before it (the room, 501 keys, is less than the stretch and both rounds' reach).
  auto down = nearly_sorted_keys(4000, 0, 0, 12);
  for (std::size_t k = 0; k < 300; ++k) down[2000 + k] = down[100] + k;
  check(down, accept, "300 keys that jumped down together");
  check(random_keys(20000, 0xffffffull, 11), decline, "random keys: most are displaced");
  std::vector<std::uint64_t> reversed(3000);
  std::iota(reversed.rbegin(), reversed.rend(), std::uint64_t(0));
  check(reversed, decline, "reversed keys");
  // Every key a descent from the one before, in pairs (2 1 4 3 6 5 …): half the keys move.
  std::vector<std::uint64_t> pairs(4000);
  for (std::size_t i = 0; i < pairs.size(); ++i) pairs[i] = i ^ 1;
  check(pairs, decline, "swapped pairs");
}

// Hilbert keys of clumped points (20 Gaussian clumps of width 1) in the key order of the points
// before they drifted by `drift` (Gaussian, per axis): what the solver sorts after a step.
std::vector<std::uint64_t> drifted_hilbert_keys(std::size_t n, double drift, std::uint64_t seed) {
  auto const pos = kfmm::bench::clumped_positions(n, seed);
  kfmm::ExecutionSpace space;
  double lo[3], hi[3];
  kfmm::compute_bounds(space, pos, n, lo, hi);
  auto const cube = kfmm::cube_from_bounds(lo, hi);
  Keys keys("keys", n);
  kfmm::compute_keys(space, cube, pos, n, keys);
  Kokkos::View<std::uint32_t*, kfmm::MemorySpace> order("order", n);
  kfmm::sort_by_key(space, keys, order);
  auto const by_key = to_vector(order);
  kfmm::Vec3View<double> drifted("drifted", n);
  auto moved = Kokkos::create_mirror_view(drifted);
  auto const host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), pos);
  std::mt19937_64 random(seed + 3);
  std::normal_distribution<double> step(0, drift);
  for (std::size_t i = 0; i < n; ++i)
    for (int k = 0; k < 3; ++k) moved(i, k) = host(by_key[i], k) + step(random);
  Kokkos::deep_copy(drifted, moved);
  kfmm::compute_keys(space, cube, drifted, n, keys);
  return to_vector(keys);
}

// sort() of drifted Hilbert keys, by whichever path it takes, and the displaced-keys path on
// its own: the stable sort.
TEST(Sort, DriftedHilbertKeysMatchStableSort) {
  kfmm::KeySorter<kfmm::MemorySpace> sorter;
  kfmm::ExecutionSpace space;
  for (double drift : {1e-4, 1e-3, 3e-3}) {
    SCOPED_TRACE("drift " + std::to_string(drift));
    auto const keys = drifted_hilbert_keys(200000, drift, 21);
    sort_like_stable_sort(sorter, keys);
    Keys view = to_view(keys);
    Kokkos::View<std::uint32_t*, kfmm::MemorySpace> permutation("permutation", keys.size());
    EXPECT_TRUE(sorter.sort_displaced(space, view, permutation, keys.size()));
    expect_stable_order(keys, view, permutation);
  }
}

// `runs` sorted runs one after another, as a rank holds them after a redistribution: a `share`
// of a sorted pool is dealt to random runs (those keys interleave across runs), the rest in
// contiguous ranges, the largest range first (runs that do not interleave but are out of
// order), with ties within and across runs.
std::vector<std::uint64_t> sorted_runs(std::size_t n, int runs, double share, std::uint64_t seed) {
  auto pool = random_keys(n, 0xffffffull, seed);
  std::sort(pool.begin(), pool.end());
  for (std::size_t i = 0; i + 3 < n; i += 53) pool[i + 1] = pool[i + 2] = pool[i];  // ties
  std::mt19937_64 random(seed + 1);
  std::uniform_real_distribution<double> uniform(0, 1);
  std::vector<std::vector<std::uint64_t>> dealt(runs);
  for (std::size_t i = 0; i < n; ++i) {
    int const range = static_cast<int>(i * std::size_t(runs) / std::max<std::size_t>(n, 1));
    dealt[uniform(random) < share ? int(random() % runs) : range].push_back(pool[i]);
  }
  std::vector<std::uint64_t> keys;
  for (int r = runs - 1; r >= 0; --r) keys.insert(keys.end(), dealt[r].begin(), dealt[r].end());
  return keys;
}

// The runs path (merge of a few sorted runs) gives the stable sort, whatever the number of
// runs, their lengths (down to one key) and ties across runs; runs that interleave everywhere
// are declined with the keys untouched, and sort() then takes another path.
TEST(Sort, RunsPathMatchesStableSort) {
  kfmm::KeySorter<kfmm::MemorySpace> sorter;
  kfmm::ExecutionSpace space;
  auto check = [&](std::vector<std::uint64_t> const& keys, bool must_accept, std::string const& what) {
    std::size_t runs = 1;
    for (std::size_t i = 1; i < keys.size(); ++i) runs += keys[i] < keys[i - 1] ? 1 : 0;
    ASSERT_LE(runs, std::size_t(kfmm::KeySorter<kfmm::MemorySpace>::merge_runs_largest)) << what;
    Keys view = to_view(keys);
    Kokkos::View<std::uint32_t*, kfmm::MemorySpace> permutation("permutation", keys.size());
    bool const accepted = sorter.sort_runs(space, view, permutation, keys.size(), int(runs));
    if (must_accept) EXPECT_TRUE(accepted) << what;
    if (accepted)
      expect_stable_order(keys, view, permutation);
    else
      EXPECT_EQ(to_vector(view), keys) << what;
    EXPECT_EQ(sort_like_stable_sort(sorter, keys), runs > 1) << what;
  };
  for (std::size_t n : {std::size_t(2), std::size_t(3), std::size_t(17), std::size_t(3000), std::size_t(70000)})
    for (int runs : {1, 2, 3, 7, 32})
      for (double share : {0.0, 0.02, 1.0}) {
        auto keys = sorted_runs(n, runs, share, n + runs);
        std::size_t descents = 0;
        for (std::size_t i = 1; i < keys.size(); ++i) descents += keys[i] < keys[i - 1] ? 1 : 0;
        if (descents >= std::size_t(kfmm::KeySorter<kfmm::MemorySpace>::merge_runs_largest)) continue;
        check(keys, share == 0.0, "n " + std::to_string(n) + ", runs " + std::to_string(runs) + ", share " +
                                      std::to_string(share));
      }
  // Runs that cover the whole key range each: every key searches every other run in full.
  std::vector<std::uint64_t> interleaved;
  for (int r = 0; r < 8; ++r)
    for (std::uint64_t k = 0; k < 20000; ++k) interleaved.push_back(8 * k + std::uint64_t(7 - r));
  check(interleaved, false, "eight runs interleaved everywhere");
  Keys view = to_view(interleaved);
  Kokkos::View<std::uint32_t*, kfmm::MemorySpace> permutation("permutation", interleaved.size());
  EXPECT_FALSE(sorter.sort_runs(space, view, permutation, interleaved.size(), 8));
  // A key after a long run that belongs before all of it, and one key per run.
  auto tail = nearly_sorted_keys(40000, 0, 0, 9);
  tail.push_back(0);
  check(tail, true, "smallest key last");
  check({5, 4, 3, 2, 1}, true, "five runs of one key");
  check({1, 1, 0, 1, 0, 0}, true, "ties across runs");
}

}  // namespace
