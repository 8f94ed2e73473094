// grow_preserving / grow_appending / grow_discarding / resize_kept: content kept (all of it, or
// the rows in use) and new rows value-initialised where promised (as Kokkos::resize left them)
// for Views of rank 1 and 2, labels kept, slack as documented (their huge pages:
// test_huge_pages.cpp).
#include <kfmm/core/types.hpp>
#include <kfmm/core/view_growth.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace {

class ViewGrowthTest : public testing::Test {
 protected:
  // `rows` positions with row i = (10 i, 10 i + 1, 10 i + 2).
  static kfmm::Vec3View<double> numbered_positions(int rows) {
    kfmm::Vec3View<double> view("positions", rows);
    auto host = Kokkos::create_mirror_view(view);
    for (int i = 0; i < rows; ++i)
      for (int a = 0; a < 3; ++a) host(i, a) = 10.0 * i + a;
    Kokkos::deep_copy(view, host);
    return view;
  }
  // Host copy of `view` after checking that its first `rows` rows are still numbered_positions'.
  static auto expect_numbered_rows(kfmm::Vec3View<double> const& view, int rows) {
    auto const grown = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), view);
    for (int i = 0; i < rows; ++i)
      for (int a = 0; a < 3; ++a) EXPECT_EQ(grown(i, a), 10.0 * i + a) << i << " " << a;
    return grown;
  }
};

TEST_F(ViewGrowthTest, PreservingKeepsRowsAndZeroesNewOnesRankOne) {
  kfmm::ScalarView<std::int64_t> view("kept", 10);
  auto host = Kokkos::create_mirror_view(view);
  for (int i = 0; i < 10; ++i) host(i) = 7 * i + 1;
  Kokkos::deep_copy(view, host);
  kfmm::grow_preserving(view, 11);
  ASSERT_GE(view.extent(0), 11u);
  EXPECT_EQ(view.label(), "kept");
  auto const grown = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), view);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(grown(i), 7 * i + 1) << i;
  for (std::size_t i = 10; i < grown.extent(0); ++i) EXPECT_EQ(grown(i), 0) << i;
  auto const data = view.data();
  kfmm::grow_preserving(view, 11);  // room enough: nothing moves
  EXPECT_EQ(view.data(), data);
}

TEST_F(ViewGrowthTest, PreservingKeepsRowsOfLayoutLeftRankTwo) {
  auto view = numbered_positions(5);
  kfmm::grow_preserving(view, 1000);
  ASSERT_GE(view.extent(0), 1000u);
  auto const grown = expect_numbered_rows(view, 5);
  for (std::size_t i = 5; i < grown.extent(0); ++i)
    for (int a = 0; a < 3; ++a) EXPECT_EQ(grown(i, a), 0.0) << i << " " << a;
}

TEST_F(ViewGrowthTest, GrowingAnEmptyViewGivesZeroedRows) {
  kfmm::ScalarView<double> view;
  kfmm::grow_preserving(view, 3);
  ASSERT_GE(view.extent(0), 3u);
  auto const grown = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), view);
  for (std::size_t i = 0; i < grown.extent(0); ++i) EXPECT_EQ(grown(i), 0.0);
}

TEST_F(ViewGrowthTest, AppendingKeepsTheUsedRowsRankOne) {
  kfmm::ScalarView<std::int64_t> view("list", 10);
  auto host = Kokkos::create_mirror_view(view);
  for (int i = 0; i < 10; ++i) host(i) = 3 * i + 2;
  Kokkos::deep_copy(view, host);
  kfmm::grow_appending(view, 11, 6);
  ASSERT_GE(view.extent(0), 11u);
  EXPECT_EQ(view.extent(0), 31u);  // detail::grown_rows: 10 + 5 + 16
  EXPECT_EQ(view.label(), "list");
  auto const grown = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), view);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(grown(i), 3 * i + 2) << i;
  auto const data = view.data();
  kfmm::grow_appending(view, 31, 31);  // room enough: nothing moves
  EXPECT_EQ(view.data(), data);
}

TEST_F(ViewGrowthTest, AppendingKeepsAtMostTheOldRowsOfLayoutLeftRankTwo) {
  auto view = numbered_positions(5);
  kfmm::grow_appending(view, 1000, 50);  // more rows in use than the View has: all of them kept
  ASSERT_GE(view.extent(0), 1000u);
  EXPECT_EQ(view.extent(0), 1125u);  // n + n/8 beyond the half
  expect_numbered_rows(view, 5);
  kfmm::ScalarView<int> empty;
  kfmm::grow_appending(empty, 4, 0);
  EXPECT_GE(empty.extent(0), 4u);
}

TEST_F(ViewGrowthTest, DiscardingGrowsWithSlackAndTheNewLabel) {
  kfmm::ScalarView<int> view("old", 4);
  kfmm::grow_discarding(view, 100, "scratch", 4);
  EXPECT_EQ(view.extent(0), 125u);
  EXPECT_EQ(view.label(), "scratch");
  kfmm::grow_discarding(view, 50, "other", 4);  // room enough: kept as it is
  EXPECT_EQ(view.label(), "scratch");
}

TEST_F(ViewGrowthTest, ResizeKeptGivesTheExactRowsKeepsAndZeroesAsKokkosResize) {
  auto view = numbered_positions(6);
  kfmm::resize_kept(view, 9);  // grows: rows 0-5 kept, 6-8 zero, no slack
  ASSERT_EQ(view.extent(0), 9u);
  EXPECT_EQ(view.label(), "positions");
  auto const grown = expect_numbered_rows(view, 6);
  for (int i = 6; i < 9; ++i)
    for (int a = 0; a < 3; ++a) EXPECT_EQ(grown(i, a), 0.0) << i << " " << a;
  kfmm::resize_kept(view, 4);  // shrinks: the first rows kept
  ASSERT_EQ(view.extent(0), 4u);
  expect_numbered_rows(view, 4);
  kfmm::Vec3View<double> empty;
  kfmm::resize_kept(empty, 3);
  ASSERT_EQ(empty.extent(0), 3u);
  auto const zeroed = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), empty);
  for (int i = 0; i < 3; ++i)
    for (int a = 0; a < 3; ++a) EXPECT_EQ(zeroed(i, a), 0.0);
}

}  // namespace
