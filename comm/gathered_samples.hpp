#pragma once
/// \file
/// \brief The order of the sample sort's gathered samples: by key, ties in source-rank order.
///
/// Every rank receives all ranks' samples, one run per rank in rank order, each run picked from
/// that rank's sorted keys. When the runs are already in order one after another (domains that
/// change little between steps: each rank's samples lie in its own domain) the concatenation is
/// the order, and one pass over the runs finds that; otherwise a stable sort orders them
/// (merging the runs pairwise measured slower than std::stable_sort at 1024 interleaved runs,
/// perf_tests/bench_gathered_samples.cpp). Host code: the samples are a host vector (R × samples
/// per rank), the same on every rank.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace kfmm {

/// A gathered sample: its key and the weight it stands for.
using GatheredSample = std::pair<std::uint64_t, double>;

/// \brief Sorts `samples` by key, stably (ties keep their order: source rank, then position in
/// the run). `bounds` (R + 1 entries, non-decreasing, bounds.back() = samples.size()) delimits
/// the runs. Returns whether they were in order already (nothing moved).
inline bool order_gathered_samples(std::vector<GatheredSample>& samples, std::vector<std::size_t> const& bounds) {
  auto const by_key = [](GatheredSample const& a, GatheredSample const& b) { return a.first < b.first; };
  std::size_t const runs = bounds.empty() ? 0 : bounds.size() - 1;
  bool in_order = true, any = false;
  std::uint64_t last = 0;
  for (std::size_t r = 0; r < runs && in_order; ++r) {
    std::size_t const b = bounds[r], e = bounds[r + 1];
    if (b == e) continue;
    in_order = (!any || samples[b].first >= last) && std::is_sorted(samples.begin() + b, samples.begin() + e, by_key);
    last = samples[e - 1].first;
    any = true;
  }
  if (!in_order) std::stable_sort(samples.begin(), samples.end(), by_key);
  return in_order;
}

}  // namespace kfmm
