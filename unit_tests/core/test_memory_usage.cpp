#include <kfmm/core/error.hpp>
#include <kfmm/core/memory_usage.hpp>
#include <kfmm/core/types.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>

namespace {

std::string const device_space = kfmm::MemorySpace::name();

// A stand-in for a Kokkos Tools library: counts the events it receives.
int tool_allocations = 0, tool_deallocations = 0;
void tool_allocate(Kokkos_Profiling_SpaceHandle, char const*, void const*, std::uint64_t) { ++tool_allocations; }
void tool_deallocate(Kokkos_Profiling_SpaceHandle, char const*, void const*, std::uint64_t) { ++tool_deallocations; }

TEST(MemoryAccounting, CountsCurrentAndPeakBytesOfViews) {
  kfmm::MemoryAccounting accounting;
  auto const before = accounting.usage(device_space);
  std::uint64_t const total_before = accounting.current_bytes();
  {
    Kokkos::View<double*, kfmm::MemorySpace> a("a", 1000);
    Kokkos::View<float**, kfmm::MemorySpace> b("b", 300, 7);
    auto const both = accounting.usage(device_space);
    EXPECT_EQ(both.current_bytes - before.current_bytes, 1000u * 8 + 300u * 7 * 4);
    EXPECT_EQ(both.allocations - before.allocations, 2u);
    a = {};  // freed: current drops, the peak stays
    auto const one = accounting.usage(device_space);
    EXPECT_EQ(one.current_bytes - before.current_bytes, 300u * 7 * 4);
    EXPECT_EQ(one.peak_bytes, both.current_bytes);
    EXPECT_EQ(accounting.peak_bytes() - total_before, 1000u * 8 + 300u * 7 * 4);
  }
  EXPECT_EQ(accounting.usage(device_space).current_bytes, before.current_bytes);
  EXPECT_EQ(accounting.current_bytes(), total_before);
  accounting.reset_peak();
  EXPECT_EQ(accounting.peak_bytes(), total_before);
  EXPECT_EQ(accounting.usage(device_space).peak_bytes, before.current_bytes);
  {
    Kokkos::View<int*, kfmm::MemorySpace> c("c", 100);
    EXPECT_EQ(accounting.peak_bytes() - total_before, 400u);
  }
}

TEST(MemoryAccounting, GroupsCurrentBytesByLabel) {
  kfmm::MemoryAccounting accounting;
  Kokkos::View<double*, kfmm::MemorySpace> a("kfmm::test::same", 100), b("kfmm::test::same", 50);
  Kokkos::View<float*, kfmm::MemorySpace> c("kfmm::test::other", 1000);
  auto const labels = accounting.current_by_label();
  ASSERT_GE(labels.size(), 2u);
  EXPECT_EQ(labels[0], (std::pair<std::string, std::uint64_t>{"kfmm::test::other", 4000}));
  EXPECT_EQ(labels[1], (std::pair<std::string, std::uint64_t>{"kfmm::test::same", 1200}));
}

TEST(MemoryAccounting, LogsEveryAllocationInOrder) {
  kfmm::MemoryAccounting accounting;
  accounting.clear_allocation_log();
  { Kokkos::View<double*, kfmm::MemorySpace> a("kfmm::test::first", 10); }
  Kokkos::View<int*, kfmm::MemorySpace> b("kfmm::test::second", 4);
  auto const log = accounting.allocation_log();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0], (std::pair<std::string, std::uint64_t>{"kfmm::test::first", 80}));
  EXPECT_EQ(log[1], (std::pair<std::string, std::uint64_t>{"kfmm::test::second", 16}));
  accounting.clear_allocation_log();
  EXPECT_TRUE(accounting.allocation_log().empty());
}

TEST(MemoryAccounting, PeakOfTheSumAcrossSpacesIsNotTheSumOfPeaks) {
  kfmm::MemoryAccounting accounting;
  std::uint64_t const base = accounting.current_bytes();
  { Kokkos::View<char*, kfmm::MemorySpace> a("a", 5000); }
  { Kokkos::View<char*, kfmm::HostSpace> b("b", 3000); }
  EXPECT_EQ(accounting.peak_bytes() - base, 5000u);
  std::uint64_t sum_of_peaks = 0;
  for (auto const& space : accounting.usage()) sum_of_peaks += space.peak_bytes;
  EXPECT_GE(sum_of_peaks, accounting.peak_bytes());
}

TEST(MemoryAccounting, IgnoresMemoryAllocatedBeforeItStarted) {
  Kokkos::View<double*, kfmm::MemorySpace> old("old", 2000);
  kfmm::MemoryAccounting accounting;
  std::uint64_t const base = accounting.current_bytes();
  old = {};
  EXPECT_EQ(accounting.current_bytes(), base);  // not subtracted: counts never go negative
}

TEST(MemoryAccounting, StopsCountingWhenDestroyed) {
  {
    kfmm::MemoryAccounting accounting;
    EXPECT_FALSE(accounting.tool_chained());
  }
  auto const callbacks = Kokkos::Tools::Experimental::get_callbacks();
  EXPECT_EQ(callbacks.allocate_data, nullptr);
  EXPECT_EQ(callbacks.deallocate_data, nullptr);
  kfmm::MemoryAccounting accounting;  // can start again
  { Kokkos::View<double*, kfmm::MemorySpace> a("a", 10); }
  EXPECT_EQ(accounting.usage(device_space).peak_bytes, 80u);
}

TEST(MemoryAccounting, OneInstanceAtATime) {
  kfmm::MemoryAccounting accounting;
  EXPECT_THROW(kfmm::MemoryAccounting second, kfmm::Error);
}

// A Kokkos Tools library installed its callbacks first: it still sees every event, and gets its
// callbacks back at the end.
TEST(MemoryAccounting, KeepsAToolLibraryWorking) {
  Kokkos::Tools::Experimental::set_allocate_data_callback(tool_allocate);
  Kokkos::Tools::Experimental::set_deallocate_data_callback(tool_deallocate);
  tool_allocations = tool_deallocations = 0;
  {
    kfmm::MemoryAccounting accounting;
    EXPECT_TRUE(accounting.tool_chained());
    { Kokkos::View<double*, kfmm::MemorySpace> a("a", 64); }
    EXPECT_EQ(accounting.usage(device_space).peak_bytes, 512u);
    EXPECT_EQ(tool_allocations, 1);
    EXPECT_EQ(tool_deallocations, 1);
  }
  auto const callbacks = Kokkos::Tools::Experimental::get_callbacks();
  EXPECT_EQ(callbacks.allocate_data, &tool_allocate);
  EXPECT_EQ(callbacks.deallocate_data, &tool_deallocate);
  Kokkos::Tools::Experimental::set_allocate_data_callback(nullptr);
  Kokkos::Tools::Experimental::set_deallocate_data_callback(nullptr);
}

}  // namespace
