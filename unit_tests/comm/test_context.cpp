// kfmm inside a caller's MPI application: its messages travel on its own duplicate of the
// caller's communicator, so they never match the caller's receives, however wide.
#include <kfmm/comm/exchange_plan.hpp>

#include <device_views.hpp>

#include <gtest/gtest.h>

#include <vector>

namespace {

using kfmm::Context;

TEST(Context, WorksOnItsOwnDuplicateOfTheCommunicator) {
  Context const context(MPI_COMM_WORLD);
  int same = MPI_UNEQUAL;
  MPI_Comm_compare(context.comm(), MPI_COMM_WORLD, &same);
  EXPECT_EQ(same, MPI_CONGRUENT);  // the same group, another communication context
  Context const copy = context;
  EXPECT_EQ(copy.comm(), context.comm());  // copies share the duplicate
}

TEST(Context, KfmmMessagesNeverMatchTheCallersPendingReceives) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  // The caller waits for anything from anyone on its communicator while kfmm works.
  int received = -1;
  MPI_Request request;
  MPI_Irecv(&received, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &request);
  {
    Context const context(MPI_COMM_WORLD);
    // Every element to the next rank: messages between every pair of neighbours.
    std::vector<int> destinations(100, (rank + 1) % ranks), values(100, rank);
    kfmm::ExchangePlan<> const plan(context, kfmm::test_support::device_view(destinations), destinations.size());
    auto const imported = plan.exchange(kfmm::test_support::device_view(values));
    auto const host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), imported);
    ASSERT_EQ(host.extent(0), 100u);
    for (std::size_t i = 0; i < host.extent(0); ++i) ASSERT_EQ(host(i), (rank + ranks - 1) % ranks);
  }
  int done = 0;
  MPI_Test(&request, &done, MPI_STATUS_IGNORE);
  EXPECT_EQ(done, 0) << "kfmm's message matched the caller's receive";
  MPI_Barrier(MPI_COMM_WORLD);  // every rank looked before any caller's message is sent
  // The caller's own message still arrives where it was expected.
  int const message = 1000 + rank;
  MPI_Send(&message, 1, MPI_INT, (rank + 1) % ranks, 5, MPI_COMM_WORLD);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  EXPECT_EQ(received, 1000 + (rank + ranks - 1) % ranks);
}

}  // namespace
