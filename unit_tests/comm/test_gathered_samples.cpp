// order_gathered_samples: the sample sort's gathered samples (one sorted run per rank) in the
// order a stable sort by key gives, ties in rank order; runs already in order (left as they
// are), runs overlapping at their ends (merged), interleaved runs with ties across ranks (the
// stable sort takes over), empty runs, and unsorted runs.
#include <kfmm/comm/gathered_samples.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace {

using kfmm::GatheredSample;

class GatheredSamplesTest : public testing::Test {
 protected:
  std::mt19937_64 random{2026};

  // `runs` runs of random lengths (some empty) with keys from [0, key_range): sorted runs
  // unless `unsorted_run` names one to leave shuffled. Each sample's weight is its run index,
  // and the key's low bits are left to chance, so ties across runs occur for small ranges.
  std::vector<GatheredSample> make_runs(int runs, std::uint64_t key_range, std::vector<std::size_t>& bounds,
                                        int unsorted_run = -1) {
    std::vector<GatheredSample> samples;
    bounds.assign(1, 0);
    for (int r = 0; r < runs; ++r) {
      std::size_t const length = random() % 5 == 0 ? 0 : random() % 40;
      std::vector<std::uint64_t> keys(length);
      for (auto& key : keys) key = random() % key_range;
      if (r != unsorted_run) std::sort(keys.begin(), keys.end());
      for (std::size_t s = 0; s < length; ++s) samples.emplace_back(keys[s], double(r) + 1e-3 * double(s));
      bounds.push_back(samples.size());
    }
    return samples;
  }

  static void expect_stable_order(std::vector<GatheredSample> samples, std::vector<std::size_t> const& bounds) {
    auto expected = samples;
    std::stable_sort(expected.begin(), expected.end(), [](auto const& a, auto const& b) { return a.first < b.first; });
    kfmm::order_gathered_samples(samples, bounds);
    ASSERT_EQ(samples.size(), expected.size());
    for (std::size_t i = 0; i < samples.size(); ++i) {
      EXPECT_EQ(samples[i].first, expected[i].first) << "position " << i;
      EXPECT_EQ(samples[i].second, expected[i].second) << "position " << i << " (order among equal keys)";
    }
  }
};

TEST_F(GatheredSamplesTest, InterleavedRunsWithTiesAcrossRanks) {
  for (int runs : {1, 2, 3, 7, 16, 33, 1024})
    for (std::uint64_t range : {std::uint64_t(5), std::uint64_t(1000), ~std::uint64_t(0)}) {
      std::vector<std::size_t> bounds;
      auto const samples = make_runs(runs, range, bounds);
      expect_stable_order(samples, bounds);
      if (runs > 2 && range > 1000) {  // random runs interleave
        auto copy = samples;
        EXPECT_NE(kfmm::order_gathered_samples(copy, bounds), kfmm::SampleOrdering::InOrder) << runs << " runs";
      }
    }
}

TEST_F(GatheredSamplesTest, RunsAlreadyInOrderStayAsTheyAre) {
  // Each rank's samples inside its own key range (the steady state of kept domains), equal keys
  // where one run ends and the next starts included.
  std::vector<GatheredSample> samples;
  std::vector<std::size_t> bounds{0};
  for (int r = 0; r < 9; ++r) {
    for (int s = 0; s < 5; ++s) samples.emplace_back(std::uint64_t(100 * r + 25 * s), double(r));
    if (r % 3 == 0) samples.emplace_back(std::uint64_t(100 * (r + 1)), double(r));  // ties the next run's first
    bounds.push_back(samples.size());
  }
  auto const before = samples;
  EXPECT_EQ(kfmm::order_gathered_samples(samples, bounds), kfmm::SampleOrdering::InOrder);
  EXPECT_EQ(samples, before);
  expect_stable_order(before, bounds);
}

TEST_F(GatheredSamplesTest, RunsThatOverlapAtTheirEndsAreMerged) {
  // Each rank's samples in its own range but for a few that moved across a boundary (the
  // samples of a drifting step), with ties at the overlaps; the first and a middle run empty.
  std::vector<GatheredSample> samples;
  std::vector<std::size_t> bounds{0, 0};
  for (int r = 1; r < 12; ++r) {
    if (r == 6) {
      bounds.push_back(samples.size());
      continue;
    }
    std::vector<std::uint64_t> keys;
    for (int s = 0; s < 20; ++s) keys.push_back(std::uint64_t(1000 * r + 50 * s));
    keys.push_back(std::uint64_t(1000 * r - 100));  // moved below its range
    keys.push_back(std::uint64_t(1000 * r - 50));   // equal to the previous run's last key
    if (r % 2 == 0) keys.push_back(std::uint64_t(1000 * r + 1500));  // moved above
    std::sort(keys.begin(), keys.end());
    for (auto key : keys) samples.emplace_back(key, double(r));
    bounds.push_back(samples.size());
  }
  auto copy = samples;
  EXPECT_EQ(kfmm::order_gathered_samples(copy, bounds), kfmm::SampleOrdering::Merged);
  expect_stable_order(samples, bounds);
}

TEST_F(GatheredSamplesTest, RunsInOrderAtTheirEndsButUnsortedInsideAreSorted) {
  // Run boundaries ascend (0 … 9, 10 … 19, …) but the middle run is shuffled inside.
  std::vector<GatheredSample> samples;
  std::vector<std::size_t> bounds{0};
  for (int r = 0; r < 3; ++r) {
    for (int s = 0; s < 10; ++s) {
      int const k = r == 1 && s > 0 && s < 9 ? 9 - s : s;  // 10, 18, 17, …, 11, 19
      samples.emplace_back(std::uint64_t(10 * r + k), double(r));
    }
    bounds.push_back(samples.size());
  }
  auto copy = samples;
  EXPECT_EQ(kfmm::order_gathered_samples(copy, bounds), kfmm::SampleOrdering::Sorted);
  expect_stable_order(samples, bounds);
}

TEST_F(GatheredSamplesTest, AnUnsortedRunFallsBackToAStableSort) {
  for (int runs : {2, 5, 12}) {
    std::vector<std::size_t> bounds;
    auto const samples = make_runs(runs, 50, bounds, runs / 2);
    expect_stable_order(samples, bounds);
  }
}

TEST_F(GatheredSamplesTest, NoSamplesOrNoRuns) {
  std::vector<GatheredSample> none;
  kfmm::order_gathered_samples(none, {});
  kfmm::order_gathered_samples(none, {0, 0, 0});
  EXPECT_TRUE(none.empty());
}

}  // namespace
