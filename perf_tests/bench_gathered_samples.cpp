// The sample sort's host step at many ranks: R runs of 256 gathered samples ordered by key
// (ties in rank order). Arg 0: R; arg 1: 1 when the runs are in order (each rank's samples
// inside its own domain), 2 when 8 samples of each run moved into the neighbouring ranges (a
// drifting step), 0 when they interleave (new domains from scattered particles).
// `StableSortGatheredSamples` is the std::stable_sort alone, as before.
#include <kfmm/comm/gathered_samples.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace {

std::vector<kfmm::GatheredSample> gathered_runs(int ranks, int layout, std::vector<std::size_t>& bounds) {
  constexpr int per_rank = 256;
  std::mt19937_64 random(5);
  std::vector<kfmm::GatheredSample> samples;
  bounds.assign(1, 0);
  std::uint64_t const width = (std::uint64_t(1) << 63) / std::uint64_t(ranks);
  for (int r = 0; r < ranks; ++r) {
    std::vector<std::uint64_t> keys(per_rank);
    for (int s = 0; s < per_rank; ++s) {
      std::uint64_t const own = width * std::uint64_t(r) + random() % width;
      bool const moved = layout == 2 && s < 8 && r > 0 && r + 1 < ranks;
      std::uint64_t const neighbour = s % 2 == 0 ? own - width / 2 : own + width / 2;
      keys[s] = layout == 0 ? random() >> 1 : moved ? neighbour : own;
    }
    std::sort(keys.begin(), keys.end());
    for (auto key : keys) samples.emplace_back(key, 1.0);
    bounds.push_back(samples.size());
  }
  return samples;
}

void OrderGatheredSamples(benchmark::State& state) {
  std::vector<std::size_t> bounds;
  auto const gathered = gathered_runs(int(state.range(0)), int(state.range(1)), bounds);
  for (auto _ : state) {
    auto samples = gathered;
    kfmm::order_gathered_samples(samples, bounds);
    benchmark::DoNotOptimize(samples.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * gathered.size()));
}

void StableSortGatheredSamples(benchmark::State& state) {
  std::vector<std::size_t> bounds;
  auto const gathered = gathered_runs(int(state.range(0)), int(state.range(1)), bounds);
  for (auto _ : state) {
    auto samples = gathered;
    std::stable_sort(samples.begin(), samples.end(), [](auto const& a, auto const& b) { return a.first < b.first; });
    benchmark::DoNotOptimize(samples.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * gathered.size()));
}

BENCHMARK(OrderGatheredSamples)->Args({1024, 1})->Args({1024, 2})->Args({1024, 0})->Unit(benchmark::kMillisecond);
BENCHMARK(StableSortGatheredSamples)->Args({1024, 1})->Args({1024, 2})->Args({1024, 0})->Unit(benchmark::kMillisecond);

}  // namespace
