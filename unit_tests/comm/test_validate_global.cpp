#include <kfmm/comm/validate_global.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace {

using kfmm::Context;

class ValidateGlobalTest : public testing::Test {
 protected:
  Context context;
  int rank = context.rank();
  int ranks = context.size();

  // 50 + rank valid particles per rank with globally unique ids; num_total is right.
  kfmm::Particles<kfmm::HostSpace> make() const {
    std::size_t const n = 50 + rank;
    std::size_t total = 0, first = 0;
    for (int r = 0; r < ranks; ++r) {
      if (r < rank) first += 50 + r;
      total += 50 + r;
    }
    kfmm::Particles<kfmm::HostSpace> p(n);
    p.num = n;
    p.num_total = total;
    for (std::size_t i = 0; i < n; ++i) {
      for (int k = 0; k < 3; ++k) p.pos(i, k) = 0.1 * double(i + k), p.vel(i, k) = 0;
      p.mass(i) = 1;
      p.id(i) = 1000 + first + i;
    }
    return p;
  }

  // The message every rank gets, or "" when validate_global passes.
  std::string message_of(kfmm::Particles<kfmm::HostSpace> const& p) const {
    try {
      kfmm::validate_global(context, p);
    } catch (kfmm::Error const& e) {
      return e.what();
    }
    return {};
  }
};

TEST_F(ValidateGlobalTest, ValidParticlesPass) { EXPECT_EQ(message_of(make()), ""); }

TEST_F(ValidateGlobalTest, DuplicateIdNamesTheIdAndBothRanks) {
  auto p = make();
  int const other = ranks - 1;  // with one rank, both copies sit on rank 0
  if (rank == 0) p.id(3) = 777;
  if (rank == other) p.id(10) = 777;
  std::string const message = message_of(p);
  ASSERT_NE(message, "");
  EXPECT_NE(message.find("id 777"), std::string::npos) << message;
  if (ranks == 1) {
    EXPECT_NE(message.find("used twice on rank 0 (particles 3 and 10)"), std::string::npos) << message;
  } else {
    EXPECT_NE(message.find("rank 0 (particle 3) and on rank " + std::to_string(other) + " (particle 10)"),
              std::string::npos)
        << message;
  }
}

TEST_F(ValidateGlobalTest, WrongNumTotalIsNamed) {
  auto p = make();
  std::size_t const held = p.num_total;
  if (rank == ranks - 1) p.num_total = held + 5;
  std::string const message = message_of(p);
  EXPECT_NE(message.find("num_total = " + std::to_string(held + 5) + " on rank " + std::to_string(ranks - 1) +
                         " but the ranks hold " + std::to_string(held) + " particles in all; set num_total to " +
                         std::to_string(held)),
            std::string::npos)
      << message;
}

TEST_F(ValidateGlobalTest, LocalProblemOnOneRankReachesEveryRank) {
  auto p = make();
  if (rank == ranks - 1) p.pos(2, 0) = NAN;
  std::string const message = message_of(p);
  EXPECT_NE(message.find("particle 2 (id"), std::string::npos) << message;
  EXPECT_NE(message.find("rank " + std::to_string(ranks - 1) + ")"), std::string::npos) << message;
}

}  // namespace
