// The one main of every kfmm test executable: MPI and Kokkos through kfmm::Environment, then
// GoogleTest. Rank 0 prints the usual report; other ranks print only their failures.
#include <kfmm/comm/environment.hpp>

#include <gtest/gtest.h>

#include <cstdio>

namespace {

class FailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(testing::TestPartResult const& result) override {
    if (result.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_, result.file_name() ? result.file_name() : "?",
                   result.line_number(), result.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  kfmm::Environment environment(argc, argv);
  testing::InitGoogleTest(&argc, argv);
  int const rank = environment.world().rank();
  if (rank != 0) {
    auto& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  int const result = RUN_ALL_TESTS();
  // A failure on any rank fails the test on every rank.
  int failed = result != 0, any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, environment.world().comm());
  return any_failed;
}
