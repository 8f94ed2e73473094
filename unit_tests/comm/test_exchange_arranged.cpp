// ExchangePlan::exchange_arranged(): elements read through a row permutation, their keys
// travelling in the records and the imports arranged by the stable sort of those keys give
// what a permutation, separate exchanges and a stable sort of the imports give, for ranges of
// sorted keys (a decomposition), scattered destinations with drops, ties across ranks and
// ranks that keep or send nothing.
#include <kfmm/comm/exchange_plan.hpp>
#include <kfmm/core/sort.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

using kfmm::Context;
using Memory = kfmm::MemorySpace;
using Keys = kfmm::ScalarView<std::uint64_t, Memory>;
using Index = kfmm::ScalarView<std::uint32_t, Memory>;
using Positions = kfmm::Vec3View<double, Memory>;

template <class View, class Values>
View upload(char const* label, Values const& values, std::size_t rows) {
  View view(std::string(label), rows);
  auto host = Kokkos::create_mirror_view(view);
  for (std::size_t i = 0; i < values.size(); ++i) host(i) = values[i];
  Kokkos::deep_copy(view, host);
  return view;
}

class ExchangeArrangedTest : public testing::Test {
 protected:
  Context context;
  int rank = context.rank();
  int ranks = context.size();

  // Element e of this rank has key keys[e] and lives in row rows[e]; it goes to destinations[e].
  void check(std::vector<std::uint64_t> const& keys, std::vector<std::uint32_t> const& rows,
             std::vector<int> const& destinations) {
    std::size_t const n = keys.size();
    ASSERT_EQ(rows.size(), n);
    auto const dest = upload<Kokkos::View<int*, Memory>>("destinations", destinations, n);
    kfmm::ExchangePlan<Memory> plan(context, dest, n);
    std::size_t const imported = plan.num_import();
    std::size_t const room = std::max(n, imported) + 3;
    // Row r holds (1000 rank + r, ..., + 0.5), mass r / 4, id 1e6 rank + r.
    std::vector<double> mass_rows(room);
    std::vector<std::uint64_t> id_rows(room);
    Positions pos("pos", room);
    auto pos_host = Kokkos::create_mirror_view(pos);
    for (std::size_t r = 0; r < room; ++r) {
      for (int k = 0; k < 3; ++k) pos_host(r, k) = 1000.0 * rank + double(r) + 0.25 * k;
      mass_rows[r] = 0.25 * double(r);
      id_rows[r] = std::uint64_t(1000000) * std::uint64_t(rank) + r;
    }
    Kokkos::deep_copy(pos, pos_host);
    auto const mass = upload<kfmm::ScalarView<double, Memory>>("mass", mass_rows, room);
    auto const id = upload<kfmm::ScalarView<std::uint64_t, Memory>>("id", id_rows, room);

    // Expected: the elements in element order exchanged field by field, then stably sorted by key.
    std::vector<double> pos_elements(3 * n), mass_elements(n);
    std::vector<std::uint64_t> id_elements(n);
    for (std::size_t e = 0; e < n; ++e) {
      for (int k = 0; k < 3; ++k) pos_elements[3 * e + k] = pos_host(rows[e], k);
      mass_elements[e] = mass_rows[rows[e]];
      id_elements[e] = id_rows[rows[e]];
    }
    Positions pos_e("pos_elements", n);
    auto pos_e_host = Kokkos::create_mirror_view(pos_e);
    for (std::size_t e = 0; e < n; ++e)
      for (int k = 0; k < 3; ++k) pos_e_host(e, k) = pos_elements[3 * e + k];
    Kokkos::deep_copy(pos_e, pos_e_host);
    auto const keys_view = upload<Keys>("keys", keys, n);
    auto const got_keys = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), plan.exchange(keys_view));
    auto const got_pos = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), plan.exchange(pos_e));
    auto const got_mass = Kokkos::create_mirror_view_and_copy(
        Kokkos::HostSpace(), plan.exchange(upload<kfmm::ScalarView<double, Memory>>("m", mass_elements, n)));
    auto const got_id = Kokkos::create_mirror_view_and_copy(
        Kokkos::HostSpace(), plan.exchange(upload<kfmm::ScalarView<std::uint64_t, Memory>>("i", id_elements, n)));
    std::vector<std::size_t> expected(imported);
    std::iota(expected.begin(), expected.end(), std::size_t(0));
    std::stable_sort(expected.begin(), expected.end(),
                     [&](std::size_t a, std::size_t b) { return got_keys(a) < got_keys(b); });

    auto const rows_view = upload<Index>("rows", rows, n);
    Keys import_keys("import_keys", imported + 1);
    Index arrangement("arrangement", imported + 1);
    kfmm::ScalarView<double, Memory> scratch("scratch", imported + 1);
    kfmm::KeySorter<Memory, std::uint32_t> sorter;
    int arranged = 0;
    auto const arrange = [&] {
      ++arranged;
      sorter.sort(kfmm::ExecutionSpace(), import_keys, arrangement, imported);
      Kokkos::fence();
      return arrangement;
    };
    plan.exchange_arranged(rows_view, keys_view, import_keys, arrange, scratch, pos, mass, id);
    EXPECT_EQ(arranged, 1);
    auto const keys_after = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), import_keys);
    auto const pos_after = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), pos);
    auto const mass_after = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), mass);
    auto const id_after = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), id);
    for (std::size_t j = 0; j < imported; ++j) {
      std::size_t const i = expected[j];
      ASSERT_EQ(keys_after(j), got_keys(i)) << "rank " << rank << " row " << j;
      for (int k = 0; k < 3; ++k) ASSERT_EQ(pos_after(j, k), got_pos(i, k)) << "rank " << rank << " row " << j;
      ASSERT_EQ(mass_after(j), got_mass(i)) << "rank " << rank << " row " << j;
      ASSERT_EQ(id_after(j), got_id(i)) << "rank " << rank << " row " << j;
    }
    std::size_t const record = sizeof(std::uint64_t) + 3 * sizeof(double) + sizeof(double) + sizeof(std::uint64_t);
    EXPECT_EQ(plan.bytes_received(), (imported - plan.import_counts()[rank]) * record);
  }

  std::vector<std::uint32_t> shuffled_rows(std::size_t n, unsigned seed) const {
    std::vector<std::uint32_t> rows(n);
    std::iota(rows.begin(), rows.end(), 0u);
    std::mt19937 random(seed);
    std::shuffle(rows.begin(), rows.end(), random);
    return rows;
  }
};

TEST_F(ExchangeArrangedTest, SortedKeysCutIntoRanges) {
  // As a decomposition: keys sorted on each rank, rank r owning [r, r + 1) · 2^40, every rank
  // holding keys of every range; some keys tie within and across ranks.
  std::mt19937_64 random(unsigned(rank) + 11);
  std::size_t const n = 700 + 50 * rank;
  std::vector<std::uint64_t> keys(n);
  for (auto& k : keys) k = random() % (std::uint64_t(ranks) << 40) / 64 * 64;
  keys[0] = keys[n / 2] = std::uint64_t(ranks - 1) << 40;  // ties on every rank
  std::sort(keys.begin(), keys.end());
  std::vector<int> destinations(n);
  for (std::size_t e = 0; e < n; ++e) destinations[e] = int(keys[e] >> 40);
  check(keys, shuffled_rows(n, unsigned(rank) + 3), destinations);
  std::vector<std::uint32_t> identity(n);
  std::iota(identity.begin(), identity.end(), 0u);
  check(keys, identity, destinations);
}

TEST_F(ExchangeArrangedTest, NearlySortedRowsOfADriftingStep) {
  // As a drifting step: rows nearly in key order (a few neighbours swapped, a few keys far
  // from their rows); more or fewer rows leave for lower ranks than arrive, so the staying
  // rows move up on some ranks and down on others.
  std::mt19937_64 random(unsigned(rank) + 41);
  std::size_t const n = 20000 + 3000 * std::size_t(rank);
  std::vector<std::uint64_t> keys(n);
  for (auto& k : keys) k = random() % (std::uint64_t(ranks) << 40) / 16 * 16;
  std::sort(keys.begin(), keys.end());
  std::vector<std::uint32_t> rows(n);
  std::iota(rows.begin(), rows.end(), 0u);
  for (std::size_t e = 1; e < n; e += 37) std::swap(rows[e - 1], rows[e]);
  for (std::size_t e = 0; e + 500 < n; e += 997) std::swap(rows[e], rows[e + 500]);
  std::vector<int> destinations(n);
  for (std::size_t e = 0; e < n; ++e) destinations[e] = int(keys[e] >> 40);
  check(keys, rows, destinations);
  // Only the first rows leave, to the rank below, whose keys are all lower: the staying run
  // moves down by as many rows, the imports land after it.
  for (auto& k : keys) k = (std::uint64_t(rank) << 40) + k % (std::uint64_t(1) << 40);
  std::sort(keys.begin(), keys.end());
  for (std::size_t e = 0; e < n; ++e) destinations[e] = e < 100 * std::size_t(rank) ? rank - 1 : rank;
  check(keys, rows, destinations);
}

TEST_F(ExchangeArrangedTest, ScatteredDestinationsWithDrops) {
  std::mt19937_64 random(unsigned(rank) + 29);
  std::size_t const n = 513;
  std::vector<std::uint64_t> keys(n);
  std::vector<int> destinations(n);
  for (std::size_t e = 0; e < n; ++e) {
    keys[e] = random() % 97;  // many ties
    destinations[e] = int(random() % std::uint64_t(ranks + 1)) - 1;
  }
  check(keys, shuffled_rows(n, unsigned(rank) + 5), destinations);
}

TEST_F(ExchangeArrangedTest, NothingStaysOrNothingMoves) {
  std::size_t const n = 64;
  std::vector<std::uint64_t> keys(n);
  for (std::size_t e = 0; e < n; ++e) keys[e] = (n - e) * 3;
  check(keys, shuffled_rows(n, 7), std::vector<int>(n, (rank + 1) % ranks));
  check(keys, shuffled_rows(n, 8), std::vector<int>(n, rank));
  check({}, {}, {});
}

TEST_F(ExchangeArrangedTest, OverlappingViewsAreRefused) {
  Kokkos::View<int*, Memory> dest("destinations", 10);
  Kokkos::deep_copy(dest, rank);
  kfmm::ExchangePlan<Memory> plan(context, dest, 10);
  Index rows("rows", 10);
  Keys keys("keys", 10), import_keys("import_keys", 10);
  kfmm::ScalarView<double, Memory> scratch("scratch", 10);
  auto const arrange = [&] { return rows; };
  EXPECT_THROW(plan.exchange_arranged(rows, keys, import_keys, arrange, scratch, keys), kfmm::Error);
  EXPECT_THROW(plan.exchange_arranged(rows, keys, import_keys, arrange, Keys("short", 3), scratch), kfmm::Error);
}

}  // namespace
