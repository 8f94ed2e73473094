// Hilbert keys computed per second by compute_keys() (the first stage of every decomposition and
// of the one-rank sort), on clumped positions in memory order and in key order (what the
// solver's positions are after its first step).
#include <kfmm/core/hilbert.hpp>
#include <kfmm/core/sort.hpp>

#include "clumped_positions.hpp"

#include <benchmark/benchmark.h>

#include <cstdint>

namespace {

// Clumped positions (clumped_positions.hpp); `sorted`: rows in Hilbert key order.
kfmm::Vec3View<double> key_bench_positions(std::size_t n, bool sorted, kfmm::BoundingCube& cube) {
  auto const pos = kfmm::bench::clumped_positions(n, 5);
  kfmm::ExecutionSpace space;
  double lo[3], hi[3];
  kfmm::compute_bounds(space, pos, n, lo, hi);
  cube = kfmm::cube_from_bounds(lo, hi);
  if (!sorted) return pos;
  Kokkos::View<std::uint64_t*, kfmm::MemorySpace> keys("kfmm::bench::keys", n);
  kfmm::compute_keys(space, cube, pos, n, keys);
  Kokkos::View<std::uint32_t*, kfmm::MemorySpace> permutation("kfmm::bench::permutation", n);
  kfmm::sort_by_key(space, keys, permutation);
  kfmm::Vec3View<double> ordered("kfmm::bench::ordered", n);
  Kokkos::parallel_for(
      "kfmm::bench::order_positions", Kokkos::RangePolicy<kfmm::ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t i) {
        for (int k = 0; k < 3; ++k) ordered(i, k) = pos(permutation(i), k);
      });
  space.fence();
  return ordered;
}

void BM_hilbert_keys(benchmark::State& state, bool sorted) {
  std::size_t const n = static_cast<std::size_t>(state.range(0));
  kfmm::BoundingCube cube{};
  auto const pos = key_bench_positions(n, sorted, cube);
  Kokkos::View<std::uint64_t*, kfmm::MemorySpace> keys("kfmm::bench::keys", n);
  kfmm::ExecutionSpace space;
  for (auto _ : state) {
    kfmm::compute_keys(space, cube, pos, n, keys);
    space.fence();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(n));
}

}  // namespace

BENCHMARK_CAPTURE(BM_hilbert_keys, memory_order, false)
    ->Arg(1000000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_hilbert_keys, key_order, true)->Arg(1000000)->Unit(benchmark::kMillisecond)->UseRealTime();
