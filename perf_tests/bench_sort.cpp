// Keys sorted per second by KeySorter (radix sort with permutation), on random 63-bit keys, on
// Hilbert keys of clumped positions (what the solver sorts), on already sorted keys (the
// solver's keys after the first step are nearly sorted), on sorted keys after a drift (what the
// decomposition sorts each step) and on sorted runs (what a rank sorts after a redistribution);
// both kernel shapes. Particles
// permuted per second (pos, vel, mass, id): the sorter's permute and the allocating permute().
#include <kfmm/core/hilbert.hpp>
#include <kfmm/core/sort.hpp>

#include "clumped_positions.hpp"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

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

kfmm::Vec3View<double> clumped_positions(std::size_t n) { return kfmm::bench::clumped_positions(n, 2); }

Keys clumped_hilbert_keys(std::size_t n) {
  auto const pos = clumped_positions(n);
  kfmm::ExecutionSpace space;
  double lo[3], hi[3];
  kfmm::compute_bounds(space, pos, n, lo, hi);
  Keys keys("kfmm::bench::keys", n);
  kfmm::compute_keys(space, kfmm::cube_from_bounds(lo, hi), pos, n, keys);
  space.fence();
  return keys;
}

Keys sorted_clumped_hilbert_keys(std::size_t n) {
  Keys keys = clumped_hilbert_keys(n);
  Kokkos::View<std::uint32_t*, kfmm::MemorySpace> permutation("kfmm::bench::permutation", n);
  kfmm::sort_by_key(kfmm::ExecutionSpace(), keys, permutation);
  return keys;
}

// What the solver sorts after a step: sorted clumped keys whose positions drifted a little
// (a few percent of neighbouring keys descend, some keys jump far).
Keys drifted_keys(std::size_t n, double drift) {
  auto const pos = clumped_positions(n);
  kfmm::ExecutionSpace space;
  double lo[3], hi[3];
  kfmm::compute_bounds(space, pos, n, lo, hi);
  auto const cube = kfmm::cube_from_bounds(lo, hi);
  Keys keys("kfmm::bench::keys", n);
  kfmm::compute_keys(space, cube, pos, n, keys);
  Kokkos::View<std::uint32_t*, kfmm::MemorySpace> permutation("kfmm::bench::permutation", n);
  kfmm::sort_by_key(space, keys, permutation);
  kfmm::Vec3View<double> drifted("kfmm::bench::drifted", n);
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), pos);
  auto order = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), permutation);
  auto moved = Kokkos::create_mirror_view(drifted);
  std::mt19937_64 random(3);
  std::normal_distribution<double> normal(0, drift);
  for (std::size_t i = 0; i < n; ++i)
    for (int k = 0; k < 3; ++k) moved(i, k) = host(order(i), k) + normal(random);
  Kokkos::deep_copy(drifted, moved);
  kfmm::compute_keys(space, cube, drifted, n, keys);
  space.fence();
  return keys;
}

// A step's drift in a clump of width 1 (a few percent of neighbouring keys descend), and a
// tenth of it.
Keys drifted_clumped_hilbert_keys(std::size_t n) { return drifted_keys(n, 1e-3); }
Keys slightly_drifted_clumped_hilbert_keys(std::size_t n) { return drifted_keys(n, 1e-4); }
// As many neighbouring keys descend (6–7 %) as in the 1e6-clump run of the README's GADGET-4
// comparison after each KDK step (per rank, 2 ranks).
Keys step_drifted_clumped_hilbert_keys(std::size_t n) { return drifted_keys(n, 3e-3); }

// What a rank sorts after a redistribution: rows in source rank order, so the sorted keys that
// crossed in from the rank below, then its own sorted keys, then those from the rank above,
// each received run interleaving with the own keys near its end of the key range.
Keys received_runs_keys(std::size_t n) {
  Keys const sorted = sorted_clumped_hilbert_keys(n);
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), sorted);
  std::vector<std::uint64_t> low, own, high;
  std::mt19937_64 random(4);
  std::uniform_real_distribution<double> uniform(0, 1);
  for (std::size_t i = 0; i < n; ++i) {
    double const at = double(i) / double(n);
    if (at < 0.03 && uniform(random) < 0.3)
      low.push_back(host(i));
    else if (at > 0.97 && uniform(random) < 0.3)
      high.push_back(host(i));
    else
      own.push_back(host(i));
  }
  std::size_t at = 0;
  for (auto const* run : {&low, &own, &high})
    for (std::uint64_t key : *run) host(at++) = key;
  Keys keys("kfmm::bench::keys", n);
  Kokkos::deep_copy(keys, host);
  return keys;
}

enum class Shape { chosen, blocks, teams };

template <Keys (*make_keys)(std::size_t), Shape shape = Shape::chosen>
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
    if (shape == Shape::blocks)
      sorter.sort_blocks(space, keys, permutation, n);
    else if (shape == Shape::teams)
      sorter.sort_teams(space, keys, permutation, n);
    else
      sorter.sort(space, keys, permutation, n);
    space.fence();
  }
  state.counters["keys/s"] = benchmark::Counter(double(n) * state.iterations(), benchmark::Counter::kIsRate);
  auto const host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), original);
  std::size_t descents = 0;
  for (std::size_t i = 1; i < n; ++i) descents += host(i) < host(i - 1) ? 1 : 0;
  state.counters["descents"] = double(descents) / double(n);
}

BENCHMARK_TEMPLATE(BM_sort_keys, random_keys)->Arg(1000000)->Arg(4000000)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_TEMPLATE(BM_sort_keys, clumped_hilbert_keys)
    ->Arg(1000000)
    ->Arg(4000000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_TEMPLATE(BM_sort_keys, sorted_clumped_hilbert_keys)
    ->Arg(1000000)
    ->Arg(4000000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_TEMPLATE(BM_sort_keys, drifted_clumped_hilbert_keys)
    ->Arg(500000)
    ->Arg(4000000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_TEMPLATE(BM_sort_keys, received_runs_keys)
    ->Arg(500000)
    ->Arg(4000000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_TEMPLATE(BM_sort_keys, slightly_drifted_clumped_hilbert_keys)
    ->Arg(500000)
    ->Arg(4000000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_TEMPLATE(BM_sort_keys, slightly_drifted_clumped_hilbert_keys, Shape::blocks)
    ->Arg(500000)
    ->Arg(4000000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_TEMPLATE(BM_sort_keys, drifted_clumped_hilbert_keys, Shape::blocks)
    ->Arg(500000)
    ->Arg(4000000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_TEMPLATE(BM_sort_keys, step_drifted_clumped_hilbert_keys)
    ->Arg(500000)
    ->Arg(4000000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_TEMPLATE(BM_sort_keys, step_drifted_clumped_hilbert_keys, Shape::blocks)
    ->Arg(500000)
    ->Arg(4000000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_TEMPLATE(BM_sort_keys, clumped_hilbert_keys, Shape::blocks)
    ->Arg(1000000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_TEMPLATE(BM_sort_keys, clumped_hilbert_keys, Shape::teams)
    ->Arg(1000000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Particles permuted per second, by a permutation that sorts clumped particles by key (as in the
// solver's first call) or by the identity (the solver's particles are nearly in order afterwards).
template <bool sorting, bool with_sorter>
void BM_permute(benchmark::State& state) {
  std::size_t const n = state.range(0);
  kfmm::ExecutionSpace space;
  kfmm::Particles<kfmm::MemorySpace> particles(n);
  particles.num = particles.num_total = n;
  Kokkos::deep_copy(particles.pos, clumped_positions(n));
  Keys keys = sorting ? clumped_hilbert_keys(n) : sorted_clumped_hilbert_keys(n);
  Kokkos::View<std::uint32_t*, kfmm::MemorySpace> permutation("kfmm::bench::permutation", n);
  kfmm::KeySorter<kfmm::MemorySpace> sorter;
  sorter.sort(space, keys, permutation, n);
  sorter.permute(space, particles, permutation);  // grows the sorter's scratch
  space.fence();
  for (auto _ : state) {
    if (with_sorter)
      sorter.permute(space, particles, permutation);
    else
      kfmm::permute(space, particles, permutation);
    space.fence();
  }
  state.counters["particles/s"] = benchmark::Counter(double(n) * state.iterations(), benchmark::Counter::kIsRate);
}

BENCHMARK_TEMPLATE(BM_permute, true, true)->Arg(1000000)->Arg(4000000)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_TEMPLATE(BM_permute, false, true)->Arg(1000000)->Arg(4000000)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_TEMPLATE(BM_permute, false, false)->Arg(1000000)->Arg(4000000)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

// The blocked permutation at a given window (2^shift source rows) on the sorting permutation of
// clumped particles: how the window size trades cache reach against copy-back streams.
void BM_permute_windows(benchmark::State& state) {
  std::size_t const n = state.range(0);
  int const shift = static_cast<int>(state.range(1));
  kfmm::ExecutionSpace space;
  kfmm::Particles<kfmm::MemorySpace> particles(n);
  particles.num = particles.num_total = n;
  Kokkos::deep_copy(particles.pos, clumped_positions(n));
  Keys keys = clumped_hilbert_keys(n);
  Kokkos::View<std::uint32_t*, kfmm::MemorySpace> permutation("kfmm::bench::permutation", n);
  kfmm::KeySorter<kfmm::MemorySpace> sorter;
  sorter.sort(space, keys, permutation, n);
  sorter.permute_blocked(space, particles, permutation, shift);  // grows the sorter's scratch
  space.fence();
  for (auto _ : state) {
    sorter.permute_blocked(space, particles, permutation, shift);
    space.fence();
  }
  state.counters["particles/s"] = benchmark::Counter(double(n) * state.iterations(), benchmark::Counter::kIsRate);
}

BENCHMARK(BM_permute_windows)
    ->ArgsProduct({{1000000, 4000000}, {13, 15, 17}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
