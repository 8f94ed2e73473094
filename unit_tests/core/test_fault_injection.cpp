// Fault points (KFMM_FAULT_INJECTION, a testing facility): which occurrence and rank a rule
// hits, and clear errors for bad rules. The `kill` action is exercised by apps.kill_anywhere.
#include <kfmm/core/error.hpp>
#include <kfmm/core/fault_injection.hpp>

#include <gtest/gtest.h>
#include <mpi.h>

#include <string>

namespace {

namespace fi = kfmm::fault_injection;

/// How many times `point` threw in `times` calls.
int throws(char const* point, int times) {
  int thrown = 0;
  for (int i = 0; i < times; ++i) {
    try {
      fi::point(point);
    } catch (kfmm::Error const& e) {
      EXPECT_NE(std::string(e.what()).find(point), std::string::npos) << e.what();
      ++thrown;
    }
  }
  return thrown;
}

TEST(FaultInjection, HitsTheNthOccurrenceOnTheGivenRank) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  fi::arm("a:2:*:throw,b:1:0:throw");
  EXPECT_EQ(throws("c", 3), 0);
  EXPECT_EQ(throws("a", 1), 0);
  EXPECT_EQ(throws("a", 3), 1);  // the 2nd occurrence only
  EXPECT_EQ(throws("b", 2), rank == 0 ? 1 : 0);
  fi::arm("");
  EXPECT_EQ(throws("a", 2), 0);
}

TEST(FaultInjection, RejectsBadRules) {
  for (char const* bad : {"a", "a:0", "a:x", "a:1:-1", "a:1:0:explode", ":1", "a:1:0:kill:9", "a:1,b",
                          "a:1:throw"}) {  // the action needs the rank field before it
    SCOPED_TRACE(bad);
    EXPECT_THROW(fi::arm(bad), kfmm::Error);
  }
  fi::arm("");
}

}  // namespace
