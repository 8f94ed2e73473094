// ExchangePlan::exchange_in_place(): several Views moved along one plan in one record per row
// give what separate exchanges give, whether the rows that stay form a run that keeps its
// place, moves to lower or higher rows, or no run at all; and shift_rows(), the in-place move
// of that run, checked alone on every shape of chunks.
#include <kfmm/comm/exchange_plan.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace {

using kfmm::Context;
using kfmm::ExecutionSpace;
using Memory = kfmm::MemorySpace;
using Positions = kfmm::Vec3View<double, Memory>;
using Ids = kfmm::ScalarView<std::uint64_t, Memory>;

// Row i of a (rows, 3) View holds (i, i + 0.25, i + 0.5) shifted by `base`.
Positions numbered_rows(std::size_t rows, double base) {
  Positions view("rows", rows);
  Kokkos::parallel_for(
      "test::numbered_rows", Kokkos::RangePolicy<ExecutionSpace>(0, rows), KOKKOS_LAMBDA(std::size_t i) {
        for (int k = 0; k < 3; ++k) view(i, k) = base + double(i) + 0.25 * k;
      });
  Kokkos::fence();
  return view;
}

// mass(i) = i / 2, id(i) = 1000 i + 7 (a free function: nvcc's device lambdas).
void fill_numbered(Kokkos::View<float*, Memory> const& mass, Ids const& id) {
  Kokkos::parallel_for(
      "test::fields", Kokkos::RangePolicy<ExecutionSpace>(0, mass.extent(0)), KOKKOS_LAMBDA(std::size_t i) {
        mass(i) = float(i) * 0.5f;
        id(i) = std::uint64_t(i) * 1000 + 7;
      });
  Kokkos::fence();
}

// --- shift_rows alone -------------------------------------------------------------------------

struct ShiftCase {
  std::size_t rows, source, target, count, target_chunks;
};

void check_shift(ShiftCase const& c) {
  SCOPED_TRACE(testing::Message() << "rows " << c.rows << ", run [" << c.source << ", +" << c.count << ") to "
                                  << c.target << ", target_chunks " << c.target_chunks);
  auto const view = numbered_rows(c.rows, 0.0);
  std::size_t const distance = c.source > c.target ? c.source - c.target : c.target - c.source;
  std::size_t saved = 0;
  if (distance > 0 && distance < c.count) saved = kfmm::detail::RowShiftShape(c.count, distance, c.target_chunks).saved_rows();
  Kokkos::View<double*, Memory> scratch("scratch", 3 * saved + 1);
  kfmm::detail::shift_rows(ExecutionSpace(), view, c.source, c.target, c.count, scratch.data(), c.target_chunks);
  Kokkos::fence();
  auto const host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), view);
  for (std::size_t i = 0; i < c.rows; ++i) {
    bool const in_target = i >= c.target && i < c.target + c.count;
    bool const in_source = i >= c.source && i < c.source + c.count;
    // Target rows hold the run; rows of neither stay; source rows outside the target are free.
    if (!in_target && in_source) continue;
    double const expected = in_target ? double(c.source + (i - c.target)) : double(i);
    for (int k = 0; k < 3; ++k) ASSERT_EQ(host(i, k), expected + 0.25 * k) << "row " << i << " column " << k;
  }
}

TEST(ShiftRowsTest, RunsMovedInPlaceAreIntact) {
  std::vector<ShiftCase> const cases = {
      {100, 10, 10, 50, 4},     // no move
      {100, 10, 13, 50, 4},     // forward by 3: several chunks, the last one partial
      {100, 13, 10, 50, 4},     // backward by 3
      {100, 10, 11, 80, 7},     // forward by 1
      {100, 11, 10, 80, 7},     // backward by 1
      {100, 0, 37, 60, 4},      // forward by more than a chunk, less than the run
      {100, 37, 0, 60, 4},      // backward likewise
      {100, 0, 60, 40, 4},      // apart: one plain copy
      {100, 60, 0, 40, 4},      // apart, backward
      {1000, 5, 9, 990, 1},     // one chunk
      {1000, 9, 5, 990, 1000},  // as many chunks as fit
      {1000, 9, 5, 990, 64},
      {1000, 5, 9, 990, 64},
      {1000, 0, 999, 1, 3},     // one row
  };
  for (auto const& c : cases) check_shift(c);
}

TEST(ShiftRowsTest, RandomShapesAgreeWithACopy) {
  std::mt19937 random(17);
  for (int trial = 0; trial < 200; ++trial) {
    std::size_t const rows = 1 + random() % 300;
    std::size_t const source = random() % rows, target = random() % rows;
    std::size_t const room = rows - std::max(source, target);
    std::size_t const count = room == 0 ? 0 : 1 + random() % room;
    check_shift({rows, source, target, count, std::size_t(1 + random() % 40)});
  }
}

// --- exchange_in_place along plans ------------------------------------------------------------

class ExchangeInPlaceTest : public testing::Test {
 protected:
  Context context;
  int rank = context.rank();
  int ranks = context.size();

  // Moves particles whose destinations are `destinations` both ways and compares: the fields
  // after exchange_in_place must equal separate exchanges into new Views.
  void check(std::vector<int> const& destinations, std::size_t extra_rows = 0) {
    std::size_t const n = destinations.size();
    Kokkos::View<int*, Memory> dest("destinations", n);
    auto dest_host = Kokkos::create_mirror_view(dest);
    for (std::size_t i = 0; i < n; ++i) dest_host(i) = destinations[i];
    Kokkos::deep_copy(dest, dest_host);
    kfmm::ExchangePlan<Memory> plan(context, dest, n);
    std::size_t const rows = std::max(n, plan.num_import()) + extra_rows;
    auto const pos = numbered_rows(rows, 1000.0 * rank);
    auto const vel = numbered_rows(rows, -1000.0 * rank);
    Kokkos::View<float*, Memory> mass("mass", rows);
    Ids id("id", rows);
    fill_numbered(mass, id);
    auto const pos_expected = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), plan.exchange(pos));
    auto const vel_expected = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), plan.exchange(vel));
    auto const mass_expected = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), plan.exchange(mass));
    auto const id_expected = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), plan.exchange(id));
    plan.exchange_in_place(pos, vel, mass, id);
    auto const pos_host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), pos);
    auto const vel_host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), vel);
    auto const mass_host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), mass);
    auto const id_host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), id);
    for (std::size_t i = 0; i < plan.num_import(); ++i) {
      for (int k = 0; k < 3; ++k) {
        ASSERT_EQ(pos_host(i, k), pos_expected(i, k)) << "rank " << rank << " row " << i;
        ASSERT_EQ(vel_host(i, k), vel_expected(i, k)) << "rank " << rank << " row " << i;
      }
      ASSERT_EQ(mass_host(i), mass_expected(i)) << "rank " << rank << " row " << i;
      ASSERT_EQ(id_host(i), id_expected(i)) << "rank " << rank << " row " << i;
    }
    std::size_t const record = 2 * 3 * sizeof(double) + sizeof(float) + 4 + sizeof(std::uint64_t);  // padded float
    std::size_t const self = plan.import_counts()[rank];
    EXPECT_EQ(plan.bytes_received(), (plan.num_import() - self) * record);
  }

  // `n` rows cut into ascending destination ranges (as particles sorted by key are): this rank
  // sends `before` rows to lower ranks, keeps `stay`, sends the rest to higher ranks.
  std::vector<int> ranges(std::size_t before, std::size_t stay, std::size_t after) const {
    std::vector<int> destinations;
    for (std::size_t i = 0; i < before; ++i) destinations.push_back(rank == 0 ? -1 : int(i % rank));
    for (std::size_t i = 0; i < stay; ++i) destinations.push_back(rank);
    for (std::size_t i = 0; i < after; ++i) destinations.push_back(rank + 1 < ranks ? rank + 1 : -1);
    std::sort(destinations.begin(), destinations.begin() + before);
    return destinations;
  }
};

TEST_F(ExchangeInPlaceTest, RowsThatStayKeepTheirPlace) { check(ranges(0, 500, 0)); }

TEST_F(ExchangeInPlaceTest, RunMovesToHigherRows) {
  // Each rank sends 3 + rank rows up and keeps 400: a rank above 0 receives more rows before
  // its run than it sent down, so its run moves up.
  check(ranges(rank == 0 ? 0 : 2, 400, 3 + rank));
}

TEST_F(ExchangeInPlaceTest, RunMovesToLowerRows) { check(ranges(rank == 0 ? 0 : 40 + rank, 400, 1)); }

TEST_F(ExchangeInPlaceTest, RunMovesFarAndViewsHaveSpareRows) { check(ranges(rank == 0 ? 0 : 300, 100, 200), 17); }

TEST_F(ExchangeInPlaceTest, NothingStaysOrNoRun) {
  std::mt19937 random(unsigned(rank) + 5);
  std::vector<int> destinations(333);
  for (auto& d : destinations) d = int(random() % (ranks + 1)) - 1;  // unsorted, with drops
  check(destinations);
  std::vector<int> away(120, (rank + 1) % ranks);
  if (ranks == 1) away.assign(120, -1);
  check(away);
  check({});
}

TEST_F(ExchangeInPlaceTest, RanksWithAndWithoutARunTogether) {
  // Every rank sends records of the same layout whichever way its staying rows move.
  if (rank % 2 == 0) {
    check(ranges(rank == 0 ? 0 : 5, 200, 7));
  } else {
    std::vector<int> destinations(150);
    for (std::size_t i = 0; i < destinations.size(); ++i) destinations[i] = int((i * 7 + 3) % ranks);
    check(destinations);
  }
}

TEST_F(ExchangeInPlaceTest, OverlappingViewsAreRefused) {
  Kokkos::View<int*, Memory> dest("destinations", 10);
  Kokkos::deep_copy(dest, rank);
  kfmm::ExchangePlan<Memory> plan(context, dest, 10);
  Ids id("id", 20);
  auto const part = Kokkos::subview(id, Kokkos::make_pair(2, 20));
  EXPECT_THROW(plan.exchange_in_place(id, part), kfmm::Error);
  auto const pos = numbered_rows(5, 0.0);
  EXPECT_THROW(plan.exchange_in_place(pos), kfmm::Error);  // fewer rows than the plan needs
}

}  // namespace
