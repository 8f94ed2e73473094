// Export orders of an ExchangePlan built per second on the device (rows per second): the
// counting sort by destination that the plan uses (detail::build_export_order: counts per
// (rank, block), one scan, a stable scatter) against a stable radix sort of the destinations
// with KeySorter (keys = destination, then the counts per rank by binary search in the sorted
// keys). Destinations: random ranks with a tenth dropped (-1), and ascending runs (particles
// sorted by key and cut into key ranges, the decomposition's case). Args: rows, ranks.
#include <kfmm/comm/export_order.hpp>
#include <kfmm/core/binary_search.hpp>
#include <kfmm/core/sort.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>

namespace {

using Memory = kfmm::MemorySpace;
using Destinations = Kokkos::View<int*, Memory>;

Destinations make_destinations(std::size_t n, int ranks, bool runs) {
  Destinations destinations("kfmm::bench::destinations", n);
  auto host = Kokkos::create_mirror_view(destinations);
  std::mt19937 random(5);
  for (std::size_t i = 0; i < n; ++i)
    host(i) = runs ? int(i * std::size_t(ranks) / n) : random() % 10 == 0 ? -1 : int(random() % unsigned(ranks));
  Kokkos::deep_copy(destinations, host);
  return destinations;
}

void counting_sort(benchmark::State& state, bool runs) {
  std::size_t const n = std::size_t(state.range(0));
  int const ranks = int(state.range(1));
  auto const destinations = make_destinations(n, ranks, runs);
  Kokkos::View<std::size_t*, Memory> order;
  kfmm::ExecutionSpace space;
  for (auto _ : state) {
    auto const built = kfmm::detail::build_export_order(space, Kokkos::View<int const*, Memory>(destinations), n,
                                                        ranks, 0, nullptr, order);
    space.fence();
    benchmark::DoNotOptimize(built.counts.data());
  }
  state.SetItemsProcessed(state.iterations() * std::int64_t(n));
}

// Public so that nvcc accepts the device lambdas (free functions).
void destination_keys(kfmm::ExecutionSpace const& space, Destinations const& destinations, int ranks,
                      Kokkos::View<std::uint64_t*, Memory> const& keys) {
  Kokkos::parallel_for(
      "kfmm::bench::destination_keys", Kokkos::RangePolicy<kfmm::ExecutionSpace>(space, 0, destinations.extent(0)),
      KOKKOS_LAMBDA(std::size_t i) {
        int const d = destinations(i);
        keys(i) = std::uint64_t(d >= 0 && d < ranks ? d : ranks);
      });
}

void rank_offsets(kfmm::ExecutionSpace const& space, Kokkos::View<std::uint64_t*, Memory> const& keys, std::size_t n,
                  Kokkos::View<std::size_t*, Memory> const& offsets) {
  Kokkos::parallel_for(
      "kfmm::bench::rank_offsets", Kokkos::RangePolicy<kfmm::ExecutionSpace>(space, 0, offsets.extent(0)),
      KOKKOS_LAMBDA(std::size_t r) {
        offsets(r) = kfmm::lower_bound(keys, std::size_t(0), n, r);
      });
}

void radix_sort(benchmark::State& state, bool runs) {
  std::size_t const n = std::size_t(state.range(0));
  int const ranks = int(state.range(1));
  auto const destinations = make_destinations(n, ranks, runs);
  Kokkos::View<std::uint64_t*, Memory> keys("kfmm::bench::keys", n);
  Kokkos::View<std::uint32_t*, Memory> permutation("kfmm::bench::permutation", n);
  Kokkos::View<std::size_t*, Memory> offsets("kfmm::bench::offsets", std::size_t(ranks) + 1);
  auto const host_offsets = Kokkos::create_mirror_view(offsets);
  kfmm::KeySorter<Memory, std::uint32_t> sorter;
  kfmm::ExecutionSpace space;
  for (auto _ : state) {
    destination_keys(space, destinations, ranks, keys);
    sorter.sort(space, keys, permutation, n);
    rank_offsets(space, keys, n, offsets);
    Kokkos::deep_copy(space, host_offsets, offsets);
    space.fence();
    benchmark::DoNotOptimize(host_offsets.data());
  }
  state.SetItemsProcessed(state.iterations() * std::int64_t(n));
}

void arguments(benchmark::internal::Benchmark* b) {
  for (int ranks : {2, 8, 64, 1024}) b->Args({1000000, ranks});
  b->Unit(benchmark::kMillisecond);
}

void BM_ExportOrderCountingRandom(benchmark::State& state) { counting_sort(state, false); }
void BM_ExportOrderCountingRuns(benchmark::State& state) { counting_sort(state, true); }
void BM_ExportOrderRadixRandom(benchmark::State& state) { radix_sort(state, false); }
void BM_ExportOrderRadixRuns(benchmark::State& state) { radix_sort(state, true); }

BENCHMARK(BM_ExportOrderCountingRandom)->Apply(arguments);
BENCHMARK(BM_ExportOrderRadixRandom)->Apply(arguments);
BENCHMARK(BM_ExportOrderCountingRuns)->Apply(arguments);
BENCHMARK(BM_ExportOrderRadixRuns)->Apply(arguments);

}  // namespace
