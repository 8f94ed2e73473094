#include <kfmm/comm/exchange_plan.hpp>

#include <device_views.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace {

using kfmm::Context;
using kfmm::ExchangePlan;
using Memory = kfmm::MemorySpace;

// Rank r holds 1000 + 37·r elements (or what `count` says); element i of rank r has the global
// label r·10^6 + i.
std::size_t default_count(int rank) { return 1000 + 37 * std::size_t(rank); }
std::uint64_t label(int rank, std::size_t i) { return std::uint64_t(rank) * 1000000 + i; }

using kfmm::test_support::device_view;
using kfmm::test_support::on_host;

class ExchangePlanTest : public testing::Test {
 protected:
  Context context;
  int rank = context.rank();
  int ranks = context.size();

  // Builds a plan where element i of rank r goes to destination(r, i) and checks that labels,
  // (n, 3) positions and (n, k) floats arrive ordered by source rank, then source order, and
  // that reverse() brings them back to the original order (dropped rows zero).
  template <class Destination, class Count>
  void check_round_trip(Destination destination, Count count, std::size_t max_message_bytes = INT_MAX) {
    std::size_t const n = count(rank);
    std::vector<int> destinations(n);
    std::vector<std::uint64_t> labels(n);
    kfmm::Vec3View<double, Memory> positions("positions", n);
    Kokkos::View<float**, Kokkos::LayoutLeft, Memory> wide("wide", n, 5);
    auto positions_host = Kokkos::create_mirror_view(positions);
    auto wide_host = Kokkos::create_mirror_view(wide);
    for (std::size_t i = 0; i < n; ++i) {
      destinations[i] = destination(rank, i);
      labels[i] = label(rank, i);
      for (int k = 0; k < 3; ++k) positions_host(i, k) = 0.5 * double(labels[i]) + k;
      for (int k = 0; k < 5; ++k) wide_host(i, k) = float(i % 1000) + 0.25f * k;
    }
    Kokkos::deep_copy(positions, positions_host);
    Kokkos::deep_copy(wide, wide_host);
    ExchangePlan<Memory> const plan(context, device_view(destinations, "destinations"), n, max_message_bytes);

    // What should arrive: for each source rank s, its elements bound here, in order.
    std::vector<std::uint64_t> expected;
    for (int s = 0; s < ranks; ++s)
      for (std::size_t i = 0; i < count(s); ++i)
        if (destination(s, i) == rank) expected.push_back(label(s, i));
    ASSERT_EQ(plan.num_import(), expected.size());

    auto const imported_labels = on_host(plan.exchange(device_view(labels, "labels")));
    auto const imported_positions = on_host(plan.exchange(positions));
    auto const imported_wide = on_host(plan.exchange(wide));
    ASSERT_EQ(imported_positions.extent(0), expected.size());
    ASSERT_EQ(imported_wide.extent(1), 5u);
    for (std::size_t j = 0; j < expected.size(); ++j) {
      ASSERT_EQ(imported_labels(j), expected[j]) << "import " << j;
      for (int k = 0; k < 3; ++k) ASSERT_EQ(imported_positions(j, k), 0.5 * double(expected[j]) + k);
      for (int k = 0; k < 5; ++k) ASSERT_EQ(imported_wide(j, k), float((expected[j] % 1000000) % 1000) + 0.25f * k);
    }

    auto const returned_positions = on_host(plan.reverse(plan.exchange(positions)));
    auto const returned_wide = on_host(plan.reverse(plan.exchange(wide)));
    ASSERT_EQ(returned_positions.extent(0), n);
    for (std::size_t i = 0; i < n; ++i) {
      bool const dropped = destinations[i] < 0;
      for (int k = 0; k < 3; ++k) ASSERT_EQ(returned_positions(i, k), dropped ? 0.0 : positions_host(i, k)) << i;
      for (int k = 0; k < 5; ++k) ASSERT_EQ(returned_wide(i, k), dropped ? 0.0f : wide_host(i, k)) << i;
    }
  }

  // Exchanges labels and (n, 3) positions in place (the same View as exports and imports, as
  // redistribute() does) and checks them against the exchange into new Views.
  template <class Destination, class Count>
  void check_in_place(Destination destination, Count count) {
    std::size_t const n = count(rank);
    std::vector<int> destinations(n);
    for (std::size_t i = 0; i < n; ++i) destinations[i] = destination(rank, i);
    ExchangePlan<Memory> const plan(context, device_view(destinations, "destinations"), n);
    std::size_t const rows = std::max(n, plan.num_import());
    Kokkos::View<std::uint64_t*, Memory> labels("labels", rows);
    kfmm::Vec3View<double, Memory> positions("positions", rows);
    auto labels_host = Kokkos::create_mirror_view(labels);
    auto positions_host = Kokkos::create_mirror_view(positions);
    for (std::size_t i = 0; i < n; ++i) {
      labels_host(i) = label(rank, i);
      for (int k = 0; k < 3; ++k) positions_host(i, k) = 0.5 * double(labels_host(i)) + k;
    }
    Kokkos::deep_copy(labels, labels_host);
    Kokkos::deep_copy(positions, positions_host);
    auto const expected_labels = on_host(plan.exchange(labels));
    auto const expected_positions = on_host(plan.exchange(positions));
    plan.exchange(labels, labels);
    plan.exchange(positions, positions);
    auto const got_labels = on_host(labels);
    auto const got_positions = on_host(positions);
    for (std::size_t j = 0; j < plan.num_import(); ++j) {
      ASSERT_EQ(got_labels(j), expected_labels(j)) << "import " << j;
      for (int k = 0; k < 3; ++k) ASSERT_EQ(got_positions(j, k), expected_positions(j, k)) << "import " << j;
    }
    // And back, in place too: every element returns to its row.
    plan.reverse(labels, labels);
    auto const back = on_host(labels);
    for (std::size_t i = 0; i < n; ++i)
      if (destinations[i] >= 0) ASSERT_EQ(back(i), label(rank, i)) << "element " << i;
  }
};

// Element i of rank s goes to rank ⌊i·R/n_s⌋ (shifted by `shift`): every rank sends one
// ascending run to each rank, its own included (as particles sorted by key and cut into key
// ranges are), so the rows that stay are copied directly or left in place.
int block_destination(int s, std::size_t i, int ranks, int shift, std::size_t (*count)(int)) {
  return int((i * std::size_t(ranks) / count(s) + std::size_t(shift)) % std::size_t(ranks));
}

TEST_F(ExchangePlanTest, RowsThatStayAsOneRunRoundTrip) {
  int const r = ranks;
  check_round_trip([r](int s, std::size_t i) { return block_destination(s, i, r, 0, default_count); }, default_count);
  check_round_trip([r](int s, std::size_t i) { return block_destination(s, i, r, 1, default_count); }, default_count);
}

TEST_F(ExchangePlanTest, InPlaceExchangeOfRunsAndScatteredRows) {
  int const r = ranks;
  // Runs that start at the same row on both sides (rank 0 keeps its first rows), runs that move,
  // scattered rows (no run), drops, and ranks keeping nothing.
  check_in_place([r](int s, std::size_t i) { return block_destination(s, i, r, 0, default_count); }, default_count);
  check_in_place([r](int s, std::size_t i) { return block_destination(s, i, r, 1, default_count); }, default_count);
  check_in_place([r](int, std::size_t i) { return int(i % r); }, default_count);
  check_in_place([r](int s, std::size_t i) { return i % 5 == 0 ? -1 : block_destination(s, i, r, 0, default_count); },
                 default_count);
  check_in_place([r](int s, std::size_t) { return (s + 1) % r; }, default_count);
}

TEST_F(ExchangePlanTest, RoundTripToRankModulo) {
  int const r = ranks;
  check_round_trip([r](int, std::size_t i) { return int(i % r); }, default_count);
}

TEST_F(ExchangePlanTest, DropsAreNotSentAndReturnZero) {
  int const r = ranks;
  check_round_trip([r](int s, std::size_t i) { return i % 3 == 0 ? -1 : int((i + s) % r); }, default_count);
}

TEST_F(ExchangePlanTest, RanksSendingNothing) {
  int const r = ranks;
  check_round_trip([r](int s, std::size_t i) { return int((i + s + 1) % r); },
                   [](int s) { return s % 2 == 1 ? std::size_t(0) : default_count(s); });
}

TEST_F(ExchangePlanTest, AllToOneRank) {
  int const last = ranks - 1;
  check_round_trip([last](int, std::size_t) { return last; }, default_count);
}

// Tiny pieces (7 bytes, not a multiple of any element size) must reassemble exactly.
TEST_F(ExchangePlanTest, MessagesCutIntoPiecesReassemble) {
  int const r = ranks;
  check_round_trip([r](int s, std::size_t i) { return int((i * 7 + s) % r); }, default_count, 7);
}

struct Payload {
  double value;
  std::uint64_t id;
  int tag;
};

TEST_F(ExchangePlanTest, PayloadTypesAndByteCounters) {
  std::size_t const n = default_count(rank);
  std::vector<int> destinations(n);
  std::vector<double> doubles(n);
  std::vector<Payload> structs(n);
  for (std::size_t i = 0; i < n; ++i) {
    destinations[i] = int((i + 1) % ranks);
    doubles[i] = 0.125 * double(label(rank, i));
    structs[i] = Payload{-doubles[i], label(rank, i), rank};
  }
  ExchangePlan<Memory> const plan(context, device_view(destinations, "destinations"), n);
  auto const got_doubles = on_host(plan.exchange(device_view(doubles, "doubles")));
  auto const got_structs = on_host(plan.exchange(device_view(structs, "structs")));
  std::size_t remote_received = 0;
  for (std::size_t j = 0; j < plan.num_import(); ++j) {
    EXPECT_EQ(got_doubles(j), 0.125 * double(got_structs(j).id));
    EXPECT_EQ(got_structs(j).value, -got_doubles(j));
    EXPECT_EQ(int(got_structs(j).id / 1000000), got_structs(j).tag);
    EXPECT_EQ((got_structs(j).id % 1000000 + 1) % ranks, std::uint64_t(rank));
    if (got_structs(j).tag != rank) ++remote_received;
  }
  EXPECT_EQ(plan.bytes_received(), remote_received * sizeof(Payload));
  std::size_t remote_sent = 0;
  for (std::size_t i = 0; i < n; ++i) remote_sent += destinations[i] != rank;
  EXPECT_EQ(plan.bytes_sent(), remote_sent * sizeof(Payload));
}

TEST_F(ExchangePlanTest, BadDestinationThrowsOnEveryRank) {
  std::vector<int> destinations(10, 0);
  if (rank == ranks - 1) destinations[4] = ranks;
  try {
    ExchangePlan<Memory> plan(context, device_view(destinations, "destinations"), destinations.size());
    FAIL() << "expected kfmm::Error";
  } catch (kfmm::Error const& e) {
    std::string const message = e.what();
    EXPECT_NE(message.find("element 4 has destination rank " + std::to_string(ranks)), std::string::npos) << message;
  }
}

TEST_F(ExchangePlanTest, DeferredCheckDropsABadDestinationAndReportsIt) {
  // Element 4 of the last rank is bad: it is dropped and reported there, nobody throws, and
  // every other element arrives (rank 0 gets all of them).
  std::vector<int> destinations(10, 0);
  if (rank == ranks - 1) destinations[4] = ranks;
  std::string deferred;
  ExchangePlan<Memory> const plan(context, device_view(destinations, "destinations"), destinations.size(), deferred);
  if (rank == ranks - 1)
    EXPECT_NE(deferred.find("element 4 has destination rank " + std::to_string(ranks)), std::string::npos) << deferred;
  else
    EXPECT_TRUE(deferred.empty()) << deferred;
  std::vector<std::uint64_t> labels(10);
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = label(rank, i);
  auto const received = on_host(plan.exchange(device_view(labels, "labels")));
  std::vector<std::uint64_t> expected;
  if (rank == 0)
    for (int source = 0; source < ranks; ++source)
      for (std::size_t i = 0; i < 10; ++i)
        if (!(source == ranks - 1 && i == 4)) expected.push_back(label(source, i));
  ASSERT_EQ(received.extent(0), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(received(i), expected[i]) << i;
}

TEST_F(ExchangePlanTest, ShortImportViewIsRejected) {
  std::vector<int> destinations(10, rank);
  ExchangePlan<Memory> const plan(context, device_view(destinations, "destinations"), destinations.size());
  Kokkos::View<double*, Memory> exports("exports", 10), imports("imports", 3);
  EXPECT_THROW(plan.exchange(exports, imports), kfmm::Error);
}

// ---- The export order built in kernels (comm/export_order.hpp), for any number of ranks ----

struct HostOrder {
  std::vector<std::size_t> counts, order;
  std::size_t first_bad = kfmm::detail::no_element, self_first = kfmm::detail::no_element;
};

// The stable counting sort the kernels must reproduce, on the host.
HostOrder host_export_order(std::vector<int> const& destinations, int ranks, int self,
                            std::vector<std::size_t> const* partners) {
  HostOrder expected;
  expected.counts.assign(ranks, 0);
  std::vector<std::vector<std::size_t>> by_rank(ranks);
  for (std::size_t i = 0; i < destinations.size(); ++i) {
    int const d = destinations[i];
    bool const valid = d >= 0 && d < ranks && (partners == nullptr || (*partners)[d] > 0);
    if (valid) by_rank[d].push_back(i);
    if (!valid && d != -1 && expected.first_bad == kfmm::detail::no_element) expected.first_bad = i;
  }
  for (int r = 0; r < ranks; ++r) {
    expected.counts[r] = by_rank[r].size();
    expected.order.insert(expected.order.end(), by_rank[r].begin(), by_rank[r].end());
  }
  auto const& mine = by_rank[self];
  if (!mine.empty() && mine.back() - mine.front() + 1 == mine.size()) expected.self_first = mine.front();
  return expected;
}

void check_export_order(std::vector<int> const& destinations, int ranks, int self,
                        std::vector<std::size_t> const* partners = nullptr) {
  Kokkos::View<std::size_t*, Memory> order;
  auto const device_destinations = device_view(destinations, "destinations");
  auto const built = kfmm::detail::build_export_order(kfmm::ExecutionSpace(), Kokkos::View<int const*, Memory>(device_destinations),
                                                      destinations.size(), ranks, self, partners, order);
  auto const expected = host_export_order(destinations, ranks, self, partners);
  ASSERT_EQ(built.counts, expected.counts);
  EXPECT_EQ(built.first_bad, expected.first_bad);
  if (expected.first_bad != kfmm::detail::no_element) EXPECT_EQ(built.bad_destination, destinations[expected.first_bad]);
  EXPECT_EQ(built.self_first, expected.self_first);
  ASSERT_GE(order.extent(0), expected.order.size());
  auto const got = on_host(order);
  for (std::size_t j = 0; j < expected.order.size(); ++j) ASSERT_EQ(got(j), expected.order[j]) << "slot " << j;
}

TEST(ExportOrder, ManyRanksMostlyEmptyDropsAndRuns) {
  std::mt19937 random(7);
  for (int ranks : {1, 2, 3, 64, 1000, 4096}) {
    for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(255), std::size_t(20000)}) {
      std::vector<int> destinations(n);
      // Random ranks, a fifth dropped.
      for (auto& d : destinations) d = random() % 5 == 0 ? -1 : int(random() % ranks);
      check_export_order(destinations, ranks, 0);
      // A handful of the ranks used (most destinations empty), ascending runs as after a key
      // sort, the self rows in the middle.
      for (std::size_t i = 0; i < n; ++i) destinations[i] = int((i * 5 / (n > 0 ? n : 1)) * (ranks / 5 + 1) % ranks);
      check_export_order(destinations, ranks, n > 0 ? destinations[n / 2] : 0);
      // Every row dropped.
      std::fill(destinations.begin(), destinations.end(), -1);
      check_export_order(destinations, ranks, ranks - 1);
    }
  }
}

TEST(ExportOrder, SelfRowsAsOneRunOrScattered) {
  std::vector<int> destinations(3000, 1);
  for (std::size_t i = 1000; i < 2000; ++i) destinations[i] = 0;
  check_export_order(destinations, 3, 0);  // one run in the middle
  destinations[1500] = -1;
  check_export_order(destinations, 3, 0);  // a gap: no run
  destinations[1500] = 0;
  destinations[2999] = 0;
  check_export_order(destinations, 3, 0);  // a stray row far away: no run
}

TEST(ExportOrder, BadDestinationsAndPartnersAreDroppedAndTheFirstReported) {
  int const ranks = 300;
  std::vector<int> destinations(5000);
  for (std::size_t i = 0; i < destinations.size(); ++i) destinations[i] = int((i * 7) % ranks);
  destinations[4000] = ranks;
  destinations[3000] = -2;
  check_export_order(destinations, ranks, 1);
  std::vector<std::size_t> partners(ranks, 0);
  for (int r = 0; r < ranks; r += 3) partners[r] = 1;
  destinations[3000] = 14;  // not a partner, before the out-of-range element
  check_export_order(destinations, ranks, 0, &partners);
  destinations[3000] = 15;
  check_export_order(destinations, ranks, 1, &partners);  // the self rank is no partner either
}

// A million ranks: the blocks shrink so that the (rank, block) counters stay bounded.
TEST(ExportOrder, ManyRanksFewBlocks) {
  int const ranks = 1 << 20;
  std::vector<int> destinations(50000);
  std::mt19937 random(3);
  for (auto& d : destinations) d = int(random() % 64) * 16381 % ranks;
  check_export_order(destinations, ranks, 16381);
}

// Plans of growing and shrinking sizes one after the other share the kernels' scratch.
TEST_F(ExchangePlanTest, SuccessivePlansOfOtherSizesAndDrops) {
  int const r = ranks;
  auto const count = [](int s) { return std::size_t(40000 + 1000 * s); };
  check_round_trip([r](int s, std::size_t i) { return i % 11 == 0 ? -1 : int((i * 3 + s) % r); }, count);
  check_round_trip([r](int s, std::size_t i) { return i % 2 == 0 ? -1 : r - 1 - s % r; }, default_count);
  check_round_trip([r](int s, std::size_t i) { return block_destination(s, i, r, 1, default_count); }, default_count);
  check_round_trip([](int, std::size_t) { return -1; }, count);
}

}  // namespace
