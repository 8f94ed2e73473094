// The pool that lends ExchangePlans their export orders: an order is lent again once nobody
// else holds it, never while a plan (or a copy of one) does, and lending a free one allocates
// nothing.
#include <kfmm/comm/exchange_plan.hpp>
#include <kfmm/comm/export_order_pool.hpp>
#include <kfmm/core/memory_usage.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

namespace {

using Memory = kfmm::MemorySpace;
using Pool = kfmm::detail::ExportOrderPool<Memory>;

// Destination i % ranks for n elements (a free function: nvcc's extended lambdas may not sit in
// a test body).
kfmm::ScalarView<int> round_robin_destinations(std::size_t n, int ranks) {
  kfmm::ScalarView<int> destinations("destinations", n);
  Kokkos::parallel_for(
      "destinations", Kokkos::RangePolicy<kfmm::ExecutionSpace>(0, n),
      KOKKOS_LAMBDA(std::size_t i) { destinations(i) = static_cast<int>(i % std::size_t(ranks)); });
  Kokkos::fence();
  return destinations;
}

class ExportOrderPoolTest : public testing::Test {
 protected:
  kfmm::Context context;
};

TEST_F(ExportOrderPoolTest, LendsFreeOrdersAgainWithoutAllocating) {
  Pool pool;
  kfmm::MemoryAccounting accounting;
  auto first = pool.lend(1000);
  EXPECT_GE(first.extent(0), 1000u);
  auto second = pool.lend(10);  // the first is held: a new one
  EXPECT_NE(second.data(), first.data());
  EXPECT_EQ(pool.lent(), 2u);
  EXPECT_EQ(accounting.allocation_log().size(), 2u);
  void const* const first_data = first.data();
  first = Pool::Order();  // released
  EXPECT_EQ(pool.lent(), 1u);
  accounting.clear_allocation_log();
  auto third = pool.lend(900);  // fits the released one
  EXPECT_EQ(third.data(), first_data);
  EXPECT_TRUE(accounting.allocation_log().empty());
  auto copy = third;  // a second holder: still lent after one of them lets go
  third = Pool::Order();
  EXPECT_EQ(pool.lent(), 2u);
  auto fourth = pool.lend(900);
  EXPECT_NE(fourth.data(), first_data);
}

TEST_F(ExportOrderPoolTest, LendsTheShortestFreeOrderThatFits) {
  Pool pool;
  auto big = pool.lend(5000), small = pool.lend(100);
  void const* const big_data = big.data();
  void const* const small_data = small.data();
  big = Pool::Order();
  small = Pool::Order();
  auto const a = pool.lend(50);
  EXPECT_EQ(a.data(), small_data);
  auto const b = pool.lend(50);  // the small one is lent: the big one fits
  EXPECT_EQ(b.data(), big_data);
}

TEST_F(ExportOrderPoolTest, KeepsAtMostItsLimitOfOrders) {
  Pool pool;
  std::vector<Pool::Order> held;
  for (std::size_t i = 0; i < Pool::max_orders + 5; ++i) held.push_back(pool.lend(10 + i));
  EXPECT_EQ(pool.orders.size(), Pool::max_orders);  // the last five were not pooled
  held.clear();
  EXPECT_EQ(pool.lent(), 0u);
  auto const again = pool.lend(20);  // free ones remain usable
  EXPECT_GE(again.extent(0), 20u);
  EXPECT_EQ(pool.orders.size(), Pool::max_orders);
}

// Plans built one after another on the same destinations take the order of the plan before
// them once it is gone: the second plan allocates no export order.
TEST_F(ExportOrderPoolTest, SuccessivePlansReuseTheOrder) {
  std::size_t const n = 5000;
  Kokkos::View<int const*, Memory> const destinations = round_robin_destinations(n, context.size());
  { kfmm::ExchangePlan<Memory> plan(context, destinations, n); }
  kfmm::MemoryAccounting accounting;
  { kfmm::ExchangePlan<Memory> plan(context, destinations, n); }
  int orders = 0;
  for (auto const& [label, bytes] : accounting.allocation_log())
    orders += label == "kfmm::exchange_plan::export_order" ? 1 : 0;
  EXPECT_EQ(orders, 0);
}

}  // namespace
