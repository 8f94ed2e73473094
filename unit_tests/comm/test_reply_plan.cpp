// ExchangePlan::reply_to and ExchangePlan::within: plans whose counts travel between the
// partners of an earlier plan, point to point, without a consensus.
#include <kfmm/comm/exchange_plan.hpp>

#include <device_views.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using kfmm::Context;
using kfmm::ExchangePlan;
using Memory = kfmm::MemorySpace;
using kfmm::test_support::device_view;
using kfmm::test_support::on_host;

// Rank r asks rank s (itself included) for something when asks(r, s): rank 1 asks nobody, the
// others a rank-dependent subset; it sends requests(r, s) request rows there (uneven sizes).
bool asks(int r, int s) { return r != 1 && (r + 2 * s) % 3 != 1; }
std::size_t requests(int r, int s) { return asks(r, s) ? 1 + (3 * std::size_t(r) + 5 * std::size_t(s)) % 4 : 0; }
std::uint64_t label(int r, int s, std::size_t i) { return std::uint64_t(r) * 1000000 + std::uint64_t(s) * 1000 + i; }
// Answer rows owner s gives to request `request` of rank r: none to every request of r when
// (r + s) % 4 == 3 (an empty answer to a partner), else 0, 1 or 2.
std::size_t answers(int r, int s, std::uint64_t request) { return (r + s) % 4 == 3 ? 0 : request % 3; }

class ReplyPlanTest : public testing::Test {
 protected:
  Context context;
  int rank = context.rank();
  int ranks = context.size();

  // The request plan of asks()/requests(): rows addressed to their owners, carrying labels.
  ExchangePlan<Memory> request_plan(std::vector<std::uint64_t>& labels) {
    std::vector<int> destinations;
    for (int s = 0; s < ranks; ++s)
      for (std::size_t i = 0; i < requests(rank, s); ++i) {
        destinations.push_back(s);
        labels.push_back(label(rank, s, i));
      }
    // Interleave the destinations: the plan sorts them, the answers must still follow its order.
    std::reverse(destinations.begin(), destinations.end());
    std::reverse(labels.begin(), labels.end());
    return ExchangePlan<Memory>(context, device_view(destinations, "request_ranks"), destinations.size());
  }

  // Rows this rank answers to the requests it received (import order), and their destinations.
  void answer_rows(ExchangePlan<Memory> const& asked, std::vector<std::uint64_t> const& received,
                   std::vector<int>& destinations, std::vector<std::uint64_t>& rows) {
    auto const& offsets = asked.import_offsets();
    for (int r = 0; r < ranks; ++r)
      for (std::size_t i = offsets[r]; i < offsets[r + 1]; ++i)
        for (std::size_t j = 0; j < answers(r, rank, received[i]); ++j) {
          destinations.push_back(r);
          rows.push_back(received[i] * 10 + j);
        }
  }

  // What this rank expects back: from each rank it asked, in rank order, the answers to its
  // requests there in the order it sent them.
  std::vector<std::uint64_t> expected_answers(std::vector<std::uint64_t> const& labels) {
    std::vector<std::uint64_t> expected;
    for (int s = 0; s < ranks; ++s)
      for (std::uint64_t const request : labels)
        if (int((request / 1000) % 1000) == s)
          for (std::size_t j = 0; j < answers(rank, s, request); ++j) expected.push_back(request * 10 + j);
    return expected;
  }
};

TEST_F(ReplyPlanTest, AnswersReachTheRanksThatAskedInTheirOrder) {
  std::vector<std::uint64_t> labels;
  auto const asked = request_plan(labels);
  auto const received = on_host(asked.exchange(device_view(labels, "labels")));
  std::vector<std::uint64_t> received_host(received.data(), received.data() + received.extent(0));
  std::vector<int> destinations;
  std::vector<std::uint64_t> rows;
  answer_rows(asked, received_host, destinations, rows);
  // Uneven widths on the device: (n, 2) integers and (n, 3) doubles along one plan.
  Kokkos::View<std::uint64_t* [2], Memory> codes("codes", rows.size());
  Kokkos::View<double**, Memory> values("values", rows.size(), 3);
  {
    auto codes_host = Kokkos::create_mirror_view(codes);
    auto values_host = Kokkos::create_mirror_view(values);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      codes_host(i, 0) = rows[i];
      codes_host(i, 1) = std::uint64_t(rank);
      for (int k = 0; k < 3; ++k) values_host(i, k) = 0.5 * double(rows[i]) + k;
    }
    Kokkos::deep_copy(codes, codes_host);
    Kokkos::deep_copy(values, values_host);
  }
  auto const reply = ExchangePlan<Memory>::reply_to(context, asked, device_view(destinations, "answer_ranks"),
                                                    destinations.size());
  auto const expected = expected_answers(labels);
  ASSERT_EQ(reply.num_import(), expected.size());
  if (rank == 1 && ranks > 1) EXPECT_EQ(reply.num_import(), 0u);  // asked nobody
  auto const got_codes = on_host(reply.exchange(codes));
  auto const got_values = on_host(reply.exchange(values));
  for (std::size_t j = 0; j < expected.size(); ++j) {
    ASSERT_EQ(got_codes(j, 0), expected[j]) << "answer " << j;
    EXPECT_EQ(got_codes(j, 1), (expected[j] / 10000) % 1000) << "answer " << j;  // the owner
    for (int k = 0; k < 3; ++k) EXPECT_EQ(got_values(j, k), 0.5 * double(expected[j]) + k);
  }
  // Import counts per rank: zero from ranks not asked, and from those that gave empty answers.
  for (int s = 0; s < ranks; ++s) {
    std::size_t count = 0;
    for (std::uint64_t const request : labels)
      if (int((request / 1000) % 1000) == s) count += answers(rank, s, request);
    EXPECT_EQ(reply.import_counts()[s], count) << "from rank " << s;
  }
  // And back along the reply plan to the owners, in their order.
  auto const returned = on_host(reply.reverse(reply.exchange(codes)));
  ASSERT_EQ(returned.extent(0), rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(returned(i, 0), rows[i]) << i;
}

TEST_F(ReplyPlanTest, RepeatedRoundsStayApart) {
  // Consecutive reply rounds with different counts must not take each other's counts.
  // Odd rounds answer along the counts alone (counts_only(): no element order kept).
  std::vector<std::uint64_t> labels;
  auto const full = request_plan(labels);
  auto const counts = full.counts_only();
  auto const& imports = full.import_counts();
  EXPECT_THROW((void)counts.exchange(device_view(labels, "labels")), kfmm::Error);
  for (int round = 0; round < 5; ++round) {
    auto const& asked = round % 2 == 0 ? full : counts;
    std::vector<int> destinations;
    for (int r = 0; r < ranks; ++r)
      if (imports[r] > 0)
        for (int j = 0; j < (round + r + rank) % 3; ++j) destinations.push_back(r);
    auto const reply = ExchangePlan<Memory>::reply_to(context, asked, device_view(destinations, "answer_ranks"),
                                                      destinations.size());
    for (int s = 0; s < ranks; ++s)
      EXPECT_EQ(reply.import_counts()[s], asked.export_counts()[s] > 0 ? std::size_t((round + rank + s) % 3) : 0u)
          << "round " << round << " from rank " << s;
  }
}

TEST_F(ReplyPlanTest, AnswerToARankThatDidNotAskThrowsOnEveryRank) {
  // The last rank answers rank 1 (which asks nobody; on one rank: rank 0 that asked nobody).
  std::vector<int> destinations;
  std::vector<std::uint64_t> labels;
  auto const asked = ranks == 1 ? ExchangePlan<Memory>(context, device_view(destinations, "none"), 0)
                                : request_plan(labels);
  int const outsider = ranks == 1 ? 0 : 1;
  for (int r = 0; r < ranks; ++r)
    if (asked.import_counts()[r] > 0) destinations.push_back(r);
  if (rank == ranks - 1) destinations.push_back(outsider);
  try {
    (void)ExchangePlan<Memory>::reply_to(context, asked, device_view(destinations, "answer_ranks"),
                                         destinations.size());
    FAIL() << "expected kfmm::Error";
  } catch (kfmm::Error const& e) {
    std::string const message = e.what();
    EXPECT_NE(message.find("destination rank " + std::to_string(outsider) + ", which is not a partner"),
              std::string::npos)
        << message;
  }
}

TEST_F(ReplyPlanTest, DeferredCheckDropsAnAnswerToARankThatDidNotAsk) {
  if (ranks == 1) GTEST_SKIP() << "needs a rank that asks nobody";
  std::vector<std::uint64_t> labels;
  auto const asked = request_plan(labels);
  // One row to each rank that asked; the last rank also answers rank 1, which asked nobody.
  std::vector<int> destinations;
  for (int r = 0; r < ranks; ++r)
    if (asked.import_counts()[r] > 0) destinations.push_back(r);
  if (rank == ranks - 1) destinations.insert(destinations.begin(), 1);
  std::string deferred;
  auto const reply = ExchangePlan<Memory>::reply_to(context, asked, device_view(destinations, "answer_ranks"),
                                                    destinations.size(), deferred);
  if (rank == ranks - 1)
    EXPECT_NE(deferred.find("element 0 has destination rank 1"), std::string::npos) << deferred;
  else
    EXPECT_TRUE(deferred.empty()) << deferred;
  std::vector<int> sources(destinations.size(), rank);
  auto const got = on_host(reply.exchange(device_view(sources, "sources")));
  std::vector<int> expected;
  for (int s = 0; s < ranks; ++s)
    if (asked.export_counts()[s] > 0) expected.push_back(s);
  ASSERT_EQ(got.extent(0), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(got(i), expected[i]);
}

TEST_F(ReplyPlanTest, WithinSendsAgainToSomeOfTheEarlierDestinations) {
  std::vector<std::uint64_t> labels;
  auto const earlier = request_plan(labels);
  // Every other row again, to the same rank as before; imports follow the earlier plan's sources.
  std::vector<int> destinations;
  std::vector<std::uint64_t> again;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    int const owner = int((labels[i] / 1000) % 1000);
    destinations.push_back(i % 2 == 0 ? owner : -1);
    again.push_back(labels[i]);
  }
  auto const plan = ExchangePlan<Memory>::within(context, earlier, device_view(destinations, "ranks"),
                                                 destinations.size());
  auto const got = on_host(plan.exchange(device_view(again, "labels")));
  std::vector<std::uint64_t> expected;
  for (int r = 0; r < ranks; ++r) {
    std::vector<std::uint64_t> theirs;  // rank r's labels in its (reversed) order
    for (int s = ranks - 1; s >= 0; --s)
      for (std::size_t i = requests(r, s); i-- > 0;) theirs.push_back(label(r, s, i));
    for (std::size_t i = 0; i < theirs.size(); i += 2)
      if (int((theirs[i] / 1000) % 1000) == rank) expected.push_back(theirs[i]);
  }
  ASSERT_EQ(got.extent(0), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(got(i), expected[i]) << i;
  // A destination the earlier plan never sent to is refused on every rank: rank 1 sent nothing.
  if (ranks == 1) return;
  std::vector<int> outside(1, rank == 1 ? 0 : -1);
  EXPECT_THROW((void)ExchangePlan<Memory>::within(context, earlier, device_view(outside, "outside"), 1), kfmm::Error);
}

}  // namespace
