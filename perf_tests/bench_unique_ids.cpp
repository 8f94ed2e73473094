// Ids checked per second by find_repeated_ids (hash to owner ranks, exchange, radix sort,
// neighbour compare): what reading a particle file or a restart adds. Ids 1..N shuffled, as
// a file written by any code may hold them; on one rank the exchange is a local copy.
#include <kfmm/comm/unique_ids.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace {

void FindRepeatedIds(benchmark::State& state) {
  std::size_t const n = state.range(0);
  std::vector<std::uint64_t> values(n);
  std::iota(values.begin(), values.end(), std::uint64_t(1));
  std::shuffle(values.begin(), values.end(), std::mt19937_64(3));
  kfmm::ScalarView<std::uint64_t> ids("kfmm::bench::ids", n);
  Kokkos::deep_copy(ids, Kokkos::View<std::uint64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(values.data(), n));
  kfmm::Context const context;
  for (auto _ : state) {
    auto const repeats = kfmm::find_repeated_ids(kfmm::ExecutionSpace(), context, ids, n);
    benchmark::DoNotOptimize(repeats.count);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

BENCHMARK(FindRepeatedIds)->Arg(1 << 20)->Arg(1 << 22)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
