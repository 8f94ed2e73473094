// detail::import_counts (the counts of an exchange, by nonblocking consensus): every rank
// learns exactly what each other rank exports to it, over many consecutive rounds with
// sparse, changing patterns and ranks running at different speeds (a rank one round ahead
// must not be mistaken for the current round).
#include <kfmm/comm/exchange_plan.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace {

using namespace kfmm;

// What rank `from` exports to rank `to` in round `round`: zero for most pairs.
std::size_t exported(int from, int to, int round) {
  std::uint64_t h = std::uint64_t(from) * 0x9E3779B97F4A7C15ull ^ std::uint64_t(to) * 0xC2B2AE3D27D4EB4Full ^
                    std::uint64_t(round) * 0x165667B19E3779F9ull;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return h % 3 == 0 ? std::size_t(h % 1000 + (round % 7 == 0 ? (std::size_t(1) << 40) : 0)) : 0;
}

class ImportCountsTest : public testing::Test {
 protected:
  Context world;
};

TEST_F(ImportCountsTest, EveryRankLearnsWhatTheOthersExportToIt) {
  int const ranks = world.size(), rank = world.rank();
  for (int round = 0; round < 300; ++round) {
    std::vector<std::size_t> out(ranks);
    for (int to = 0; to < ranks; ++to) out[to] = exported(rank, to, round);
    // Skew: one rank lags now and then, so the others run ahead into the next round.
    if (round % 50 == rank % 50) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto const in = detail::import_counts(world, out);
    ASSERT_EQ(in.size(), std::size_t(ranks));
    for (int from = 0; from < ranks; ++from)
      ASSERT_EQ(in[from], exported(from, rank, round)) << "round " << round << ", from rank " << from;
  }
}

TEST_F(ImportCountsTest, NoExportsAnywhere) {
  auto const in = detail::import_counts(world, std::vector<std::size_t>(world.size(), 0));
  EXPECT_EQ(in, std::vector<std::size_t>(world.size(), 0));
}

}  // namespace
