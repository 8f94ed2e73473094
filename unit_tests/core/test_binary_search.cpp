#include <kfmm/core/binary_search.hpp>
#include <kfmm/core/types.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace kfmm_test {

// For every query: lower and upper bound of it in values[begin, end), and the first index of
// the range whose value exceeds it twice over (partition_point with a projection), searched in
// a kernel of the execution space (the way the library searches).
void search_on_device(std::vector<std::uint64_t> const& values, std::vector<std::uint64_t> const& queries, int begin,
                      int end, std::vector<int>& lower, std::vector<int>& upper, std::vector<int>& doubled) {
  using kfmm::ScalarView;
  ScalarView<std::uint64_t> v("values", values.size()), q("queries", queries.size());
  ScalarView<int> lo("lower", queries.size()), hi("upper", queries.size()), twice("doubled", queries.size());
  auto const hv = Kokkos::create_mirror_view(v);
  auto const hq = Kokkos::create_mirror_view(q);
  for (std::size_t i = 0; i < values.size(); ++i) hv(i) = values[i];
  for (std::size_t i = 0; i < queries.size(); ++i) hq(i) = queries[i];
  Kokkos::deep_copy(v, hv);
  Kokkos::deep_copy(q, hq);
  Kokkos::parallel_for(
      "kfmm_test::binary_search", Kokkos::RangePolicy<kfmm::ExecutionSpace>(0, queries.size()),
      KOKKOS_LAMBDA(std::size_t i) {
        std::uint64_t const key = q(i);
        lo(i) = kfmm::lower_bound(v, begin, end, key);
        hi(i) = kfmm::upper_bound(v, begin, end, key);
        twice(i) = kfmm::partition_point(begin, end, [&](int j) { return v(j) <= 2 * key; });
      });
  auto const hlo = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), lo);
  auto const hhi = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), hi);
  auto const htwice = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), twice);
  lower.assign(hlo.data(), hlo.data() + queries.size());
  upper.assign(hhi.data(), hhi.data() + queries.size());
  doubled.assign(htwice.data(), htwice.data() + queries.size());
}

}  // namespace kfmm_test

namespace {

class BinarySearchTest : public testing::Test {
 protected:
  // Sorted values with runs of equal ones (and gaps), and queries in, between, below and above.
  void SetUp() override {
    std::mt19937_64 random(7);
    std::uint64_t value = 3;
    for (int i = 0; i < 200; ++i) {
      int const copies = 1 + static_cast<int>(random() % 4);
      for (int c = 0; c < copies; ++c) values.push_back(value);
      value += 1 + random() % 5;
    }
    for (std::uint64_t key = 0; key <= value + 2; ++key) queries.push_back(key);
    queries.push_back(~std::uint64_t(0));
  }
  // The searches in [begin, end) against std's on the same range, as indices into values.
  void check(int begin, int end) const {
    std::vector<int> lower, upper, doubled;
    kfmm_test::search_on_device(values, queries, begin, end, lower, upper, doubled);
    auto const first = values.begin() + begin, last = values.begin() + end;
    for (std::size_t i = 0; i < queries.size(); ++i) {
      std::uint64_t const key = queries[i];
      EXPECT_EQ(lower[i], std::lower_bound(first, last, key) - values.begin()) << "key " << key;
      EXPECT_EQ(upper[i], std::upper_bound(first, last, key) - values.begin()) << "key " << key;
      EXPECT_EQ(doubled[i], std::upper_bound(first, last, 2 * key) - values.begin()) << "key " << key;
    }
  }
  std::vector<std::uint64_t> values, queries;
};

TEST_F(BinarySearchTest, WholeRangeMatchesStd) { check(0, static_cast<int>(values.size())); }

TEST_F(BinarySearchTest, SubrangesMatchStd) {
  int const n = static_cast<int>(values.size());
  check(5, 17);
  check(n / 3, n - 1);
  check(n - 1, n);
}

TEST_F(BinarySearchTest, EmptyRangeGivesItsStart) {
  check(0, 0);
  check(11, 11);
}

}  // namespace
