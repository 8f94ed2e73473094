// ExchangePlan::send_once and ExchangePlan::reply_once: the plan and its one exchange in one
// step, the counts travelling with the rows (one message per partner). They must give what
// the plan and its exchange give: the same imports in the same order and the same counts.
#include <kfmm/comm/exchange_plan.hpp>

#include <device_views.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

using kfmm::Context;
using kfmm::ExchangePlan;
using Memory = kfmm::MemorySpace;
using kfmm::test_support::device_view;
using kfmm::test_support::on_host;
using Rows = Kokkos::View<std::uint64_t**, Memory>;

// Rows rank r sends to rank s in round `round`: none from rank 1, none to rank s when
// (r + s + round) % 3 == 2, else 1–5 (self included); one more row with destination −1.
std::size_t once_rows(int r, int s, int round) {
  if (r == 1 || (r + s + round) % 3 == 2) return 0;
  return 1 + (std::size_t(r) * 7 + std::size_t(s) * 3 + std::size_t(round)) % 5;
}
std::uint64_t once_label(int r, int s, std::size_t i, int round) {
  return std::uint64_t(round) * 1000000000 + std::uint64_t(r) * 1000000 + std::uint64_t(s) * 1000 + i;
}

class SendOnceTest : public testing::Test {
 protected:
  Context context;
  int rank = context.rank();
  int ranks = context.size();

  // The destinations and two-column rows (label, label + 1) of round `round`, the destinations
  // interleaved (the plan sorts them) and one dropped row.
  void round_rows(int round, std::vector<int>& destinations, Rows& rows) {
    std::vector<std::uint64_t> labels;
    for (int s = ranks - 1; s >= 0; --s)
      for (std::size_t i = 0; i < once_rows(rank, s, round); ++i) {
        destinations.push_back(s);
        labels.push_back(once_label(rank, s, i, round));
      }
    destinations.insert(destinations.begin() + destinations.size() / 2, -1);
    labels.insert(labels.begin() + labels.size() / 2, 7);
    rows = Rows("kfmm::test::rows", labels.size(), 2);
    auto host = Kokkos::create_mirror_view(rows);
    for (std::size_t i = 0; i < labels.size(); ++i) host(i, 0) = labels[i], host(i, 1) = labels[i] + 1;
    Kokkos::deep_copy(rows, host);
  }

  // Both Views' first `count` rows equal.
  static void expect_same_rows(Rows const& got, Rows const& expected, std::size_t count) {
    auto const a = on_host(got);
    auto const b = on_host(expected);
    ASSERT_GE(a.extent(0), count);
    ASSERT_GE(b.extent(0), count);
    // Counted, not asserted row by row: a failure must not leave this rank's later collectives
    // out of step with the other ranks'.
    std::size_t differ = 0, first = count;
    for (std::size_t i = 0; i < count; ++i)
      for (std::size_t c = 0; c < 2; ++c)
        if (a(i, c) != b(i, c)) first = differ++ == 0 ? i : first;
    EXPECT_EQ(differ, 0u) << "first differing row " << first << " of " << count;
  }

  // send_once of round_rows()' rows into `asked` (sized by the import count).
  ExchangePlan<Memory> ask_once(std::vector<int> const& destinations, Rows const& rows, Rows& asked,
                                std::string& deferred) {
    return ExchangePlan<Memory>::send_once(
        context, device_view(destinations, "destinations"), destinations.size(), rows,
        [&asked](std::size_t count) {
          asked = Rows("kfmm::test::asked", count, 2);
          return asked;
        },
        deferred);
  }

  static void expect_same_counts(ExchangePlan<Memory> const& got, ExchangePlan<Memory> const& expected) {
    EXPECT_EQ(got.import_counts(), expected.import_counts());
    EXPECT_EQ(got.import_offsets(), expected.import_offsets());
    EXPECT_EQ(got.export_counts(), expected.export_counts());
    EXPECT_EQ(got.num_import(), expected.num_import());
  }
};

TEST_F(SendOnceTest, EqualsThePlanAndItsExchange) {
  std::vector<int> destinations;
  Rows rows;
  round_rows(0, destinations, rows);
  auto const ranks_view = device_view(destinations, "destinations");
  ExchangePlan<Memory> const plan(context, ranks_view, destinations.size());
  Rows const expected = plan.exchange(rows);
  std::string deferred;
  Rows imports;
  auto const once = ExchangePlan<Memory>::send_once(
      context, ranks_view, destinations.size(), rows,
      [&imports](std::size_t count) {
        imports = Rows("kfmm::test::imports", count + 3, 2);  // more rows than needed
        return imports;
      },
      deferred);
  EXPECT_TRUE(deferred.empty()) << deferred;
  expect_same_counts(once, plan);
  expect_same_rows(imports, expected, plan.num_import());
  // The plan moves further payloads like the two-step plan.
  expect_same_rows(once.exchange(rows), expected, plan.num_import());
}

TEST_F(SendOnceTest, RepliesEqualReplyToAndItsExchangeRoundAfterRound) {
  // Requests and answers alternate as in the walk; sizes change every round, some partners get
  // empty answers, and a rank may be a round ahead of another.
  for (int round = 0; round < 12; ++round) {
    std::vector<int> destinations;
    Rows rows;
    round_rows(round, destinations, rows);
    std::string deferred;
    Rows asked;
    auto const ask = ask_once(destinations, rows, asked, deferred);
    // Answer each request with (label mod 3) rows to its source.
    auto const asked_host = on_host(asked);
    std::vector<int> answer_ranks;
    std::vector<std::uint64_t> answer_labels;
    auto const& offsets = ask.import_offsets();
    for (int r = 0; r < ranks; ++r)
      for (std::size_t i = offsets[r]; i < offsets[r + 1]; ++i)
        for (std::uint64_t j = 0; j < asked_host(i, 0) % 3; ++j) {
          answer_ranks.push_back(r);
          answer_labels.push_back(asked_host(i, 0) * 10 + j);
        }
    Rows answers("kfmm::test::answers", answer_labels.size(), 2);
    auto answers_host = Kokkos::create_mirror_view(answers);
    for (std::size_t i = 0; i < answer_labels.size(); ++i)
      answers_host(i, 0) = answer_labels[i], answers_host(i, 1) = std::uint64_t(rank);
    Kokkos::deep_copy(answers, answers_host);
    auto const answer_view = device_view(answer_ranks, "answer_ranks");
    auto const reply = ExchangePlan<Memory>::reply_to(context, ask, answer_view, answer_ranks.size());
    Rows const expected = reply.exchange(answers);
    Rows got;
    auto const once = ExchangePlan<Memory>::reply_once(
        context, ask, answer_view, answer_ranks.size(), answers,
        [&got](std::size_t count) {
          got = Rows("kfmm::test::got", count, 2);
          return got;
        },
        deferred);
    EXPECT_TRUE(deferred.empty()) << deferred;
    expect_same_counts(once, reply);
    expect_same_rows(got, expected, reply.num_import());
    // Every answer names the rank that sent it and answers a request of this rank and round.
    auto const got_host = on_host(got);
    std::size_t foreign = 0;
    for (std::size_t i = 0; i < once.num_import(); ++i) {
      std::uint64_t const request = got_host(i, 0) / 10;
      foreign += request / 1000000000 != std::uint64_t(round) || (request / 1000000) % 1000 != std::uint64_t(rank) ||
                 (request / 1000) % 1000 != got_host(i, 1);
    }
    EXPECT_EQ(foreign, 0u) << "answers of another round, rank or owner in round " << round;
  }
}

TEST_F(SendOnceTest, ReplyOnceDropsAnAnswerToARankThatDidNotAsk) {
  if (ranks == 1) GTEST_SKIP() << "needs a rank that asks nobody";
  std::vector<int> destinations;
  Rows rows;
  round_rows(0, destinations, rows);
  std::string deferred;
  Rows asked;
  auto const ask = ask_once(destinations, rows, asked, deferred);
  // One row to each rank that asked; the last rank also answers rank 1, which sent nothing.
  std::vector<int> answer_ranks;
  for (int r = 0; r < ranks; ++r)
    if (r != rank && ask.import_counts()[r] > 0) answer_ranks.push_back(r);
  if (rank == ranks - 1 && rank != 1) answer_ranks.insert(answer_ranks.begin(), 1);
  Rows answers("kfmm::test::answers", answer_ranks.size(), 2);
  Kokkos::deep_copy(answers, std::uint64_t(rank));
  Rows got;
  auto const once = ExchangePlan<Memory>::reply_once(
      context, ask, device_view(answer_ranks, "answer_ranks"), answer_ranks.size(), answers,
      [&got](std::size_t count) {
        got = Rows("kfmm::test::got", count, 2);
        return got;
      },
      deferred);
  if (rank == ranks - 1 && rank != 1)
    EXPECT_NE(deferred.find("element 0 has destination rank 1"), std::string::npos) << deferred;
  else
    EXPECT_TRUE(deferred.empty()) << deferred;
  // One row from each other rank this one asked, in rank order.
  std::vector<std::uint64_t> expected;
  for (int s = 0; s < ranks; ++s)
    if (s != rank && ask.export_counts()[s] > 0) expected.push_back(std::uint64_t(s));
  auto const got_host = on_host(got);
  ASSERT_EQ(once.num_import(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(got_host(i, 0), expected[i]);
}

}  // namespace
