// Keys sorted per second by KeySorter (radix sort with permutation), on random 63-bit keys and
// on Hilbert keys of clumped positions (what the solver sorts every step).
#include <kfmm/core/hilbert.hpp>
#include <kfmm/core/sort.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>

namespace {

using Keys = Kokkos::View<std::uint64_t*, kfmm::MemorySpace>;

Keys random_keys(std::size_t n) {
  Keys keys("kfmm::bench::keys", n);
  auto host = Kokkos::create_mirror_view(keys);
  std::mt19937_64 random(1);
  for (std::size_t i = 0; i < n; ++i) host(i) = random() >> 1;
  Kokkos::deep_copy(keys, host);
  return keys;
}

// Gaussian clumps of width 1 at 30·N(0,1), as in jz-fmm's examples.
Keys clumped_hilbert_keys(std::size_t n) {
  kfmm::Vec3View<double> pos("kfmm::bench::pos", n);
  auto host = Kokkos::create_mirror_view(pos);
  std::mt19937_64 random(2);
  std::normal_distribution<double> normal(0, 1);
  double centres[20][3];
  for (auto& centre : centres)
    for (double& c : centre) c = 30 * normal(random);
  for (std::size_t i = 0; i < n; ++i)
    for (int k = 0; k < 3; ++k) host(i, k) = centres[i % 20][k] + normal(random);
  Kokkos::deep_copy(pos, host);
  kfmm::ExecutionSpace space;
  double lo[3], hi[3];
  kfmm::compute_bounds(space, pos, n, lo, hi);
  Keys keys("kfmm::bench::keys", n);
  kfmm::compute_keys(space, kfmm::cube_from_bounds(lo, hi), pos, n, keys);
  space.fence();
  return keys;
}

template <Keys (*make_keys)(std::size_t)>
void BM_sort_keys(benchmark::State& state) {
  std::size_t const n = state.range(0);
  Keys const original = make_keys(n);
  Keys keys("kfmm::bench::work", n);
  Kokkos::View<std::uint32_t*, kfmm::MemorySpace> permutation("kfmm::bench::permutation", n);
  kfmm::KeySorter<kfmm::MemorySpace> sorter;
  kfmm::ExecutionSpace space;
  for (auto _ : state) {
    state.PauseTiming();
    Kokkos::deep_copy(space, keys, original);
    space.fence();
    state.ResumeTiming();
    sorter.sort(space, keys, permutation, n);
    space.fence();
  }
  state.counters["keys/s"] = benchmark::Counter(double(n) * state.iterations(), benchmark::Counter::kIsRate);
}

BENCHMARK_TEMPLATE(BM_sort_keys, random_keys)->Arg(1000000)->Arg(4000000)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_TEMPLATE(BM_sort_keys, clumped_hilbert_keys)
    ->Arg(1000000)
    ->Arg(4000000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
