#pragma once
/// \file
/// \brief The order of the sample sort's gathered samples: by key, ties in source-rank order.
///
/// Every rank receives all ranks' samples, one run per rank in rank order, each run picked from
/// that rank's sorted keys. Ranks' domains follow the key order, so the runs overlap only where
/// particles moved across a boundary since the domains were chosen: each run is merged into the
/// ordered samples before it from the first of those it precedes (binary search), which moves
/// only the overlap, nothing when the runs are in order. Runs that interleave widely (new domains
/// from scattered particles) would make that quadratic: past a bound on the moved samples a
/// stable sort of all takes over. Host code: the samples are a host vector (R × samples per
/// rank), the same on every rank. perf_tests/bench_gathered_samples.cpp measures both cases.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace kfmm {

/// A gathered sample: its key and the weight it stands for.
using GatheredSample = std::pair<std::uint64_t, double>;

/// What order_gathered_samples did.
enum class SampleOrdering {
  InOrder,  ///< the runs were in order one after another: nothing moved
  Merged,   ///< overlapping ends of runs merged
  Sorted    ///< a stable sort of all (a run not sorted, or runs that interleave widely)
};

/// \brief Sorts `samples` by key, stably (ties keep their order: source rank, then position in
/// the run). `bounds` (R + 1 entries, non-decreasing, bounds.back() = samples.size()) delimits
/// the runs.
inline SampleOrdering order_gathered_samples(std::vector<GatheredSample>& samples,
                                             std::vector<std::size_t> const& bounds) {
  auto const by_key = [](GatheredSample const& a, GatheredSample const& b) { return a.first < b.first; };
  auto const sort_all = [&] {
    std::stable_sort(samples.begin(), samples.end(), by_key);
    return SampleOrdering::Sorted;
  };
  std::size_t const runs = bounds.empty() ? 0 : bounds.size() - 1;
  for (std::size_t r = 0; r < runs; ++r)
    if (!std::is_sorted(samples.begin() + bounds[r], samples.begin() + bounds[r + 1], by_key)) return sort_all();
  // Samples before bounds[r] are in order; run r joins them. A stable sort's order: run r's
  // samples go after the earlier ones with equal keys (upper_bound).
  std::size_t moved = 0;
  auto const budget = samples.size();
  for (std::size_t r = 1; r < runs; ++r) {
    std::size_t const b = bounds[r], e = bounds[r + 1];
    if (b == e || b == 0 || !(samples[b].first < samples[b - 1].first)) continue;
    // Only the overlap moves: the earlier samples above run r's first, and run r's samples
    // below the last earlier one (those not below it are in place).
    auto const from = std::upper_bound(samples.begin(), samples.begin() + b, samples[b], by_key);
    auto const to = std::lower_bound(samples.begin() + b, samples.begin() + e, samples[b - 1], by_key);
    moved += std::size_t(to - from);
    // Partly merged samples keep the stable order among equal keys: sorting them is exact.
    if (moved > budget) return sort_all();
    std::inplace_merge(from, samples.begin() + b, to, by_key);
  }
  return moved == 0 ? SampleOrdering::InOrder : SampleOrdering::Merged;
}

}  // namespace kfmm
