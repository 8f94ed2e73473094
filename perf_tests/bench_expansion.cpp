// Throughput of the expansion operators: M2L pairs/s (batched as in the passes, and one by
// one), P2M and L2P particles/s, over many independent items in a Kokkos parallel_for on the
// host execution space.
#include <kfmm/fmm/expansion.hpp>

#include <benchmark/benchmark.h>

#include <random>
#include <string>

namespace {

using Space = Kokkos::DefaultHostExecutionSpace;
constexpr int items = 1 << 14;

template <class Real>
Kokkos::View<Real**, Kokkos::LayoutRight, Kokkos::HostSpace> random_view(char const* label, int rows, int cols,
                                                                          unsigned seed) {
  Kokkos::View<Real**, Kokkos::LayoutRight, Kokkos::HostSpace> v(std::string(label), rows, cols);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> uniform(-0.5, 0.5);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) v(i, j) = Real(uniform(rng));
  return v;
}

// M2L as the passes run it: each target takes its sources m2l_width at a time (m2l_lanes).
template <int P, class Real>
void M2L(benchmark::State& state) {
  constexpr int N = kfmm::ncoeff<P>;
  constexpr int W = kfmm::m2l_width<Real>;
  constexpr int per_target = 32;
  auto const M = random_view<Real>("kfmm::bench::multipoles", items, N, 1);
  auto const L = random_view<Real>("kfmm::bench::locals", items / per_target, N * W, 2);
  auto const d = random_view<Real>("kfmm::bench::offsets", items, 3, 3);
  for (auto _ : state) {
    Kokkos::parallel_for(
        "kfmm::bench::m2l", Kokkos::RangePolicy<Space>(0, items / per_target), KOKKOS_LAMBDA(int t) {
          for (int first = t * per_target; first < (t + 1) * per_target; first += W) {
            Real const* moments[W];
            Real scales[W], dx[W], dy[W], dz[W];
            for (int l = 0; l < W; ++l) {
              moments[l] = &M(first + l, 0);
              scales[l] = Real(1);
              dx[l] = Real(4) + d(first + l, 0);
              dy[l] = d(first + l, 1);
              dz[l] = d(first + l, 2);
            }
            kfmm::m2l_lanes<kfmm::SofteningKind::Plummer, P, Real, W>(W, moments, scales, dx, dy, dz, Real(0.01),
                                                                      Real(1), &L(t, 0));
          }
        });
    Space().fence();
  }
  benchmark::DoNotOptimize(L(0, 0));
  state.SetItemsProcessed(state.iterations() * items);
}

// The one-source m2l(), independent pairs.
template <int P, class Real>
void M2LOneByOne(benchmark::State& state) {
  constexpr int N = kfmm::ncoeff<P>;
  auto const M = random_view<Real>("kfmm::bench::multipoles", items, N, 1);
  auto const L = random_view<Real>("kfmm::bench::locals", items, N, 2);
  auto const d = random_view<Real>("kfmm::bench::offsets", items, 3, 3);
  for (auto _ : state) {
    Kokkos::parallel_for(
        "kfmm::bench::m2l_one_by_one", Kokkos::RangePolicy<Space>(0, items), KOKKOS_LAMBDA(int i) {
          kfmm::m2l<kfmm::SofteningKind::Plummer, P>(&M(i, 0), Real(1), Real(4) + d(i, 0), d(i, 1), d(i, 2),
                                                     Real(0.01), Real(1), &L(i, 0));
        });
    Space().fence();
  }
  benchmark::DoNotOptimize(L(0, 0));
  state.SetItemsProcessed(state.iterations() * items);
}

template <int P, class Real>
void P2M(benchmark::State& state) {
  constexpr int N = kfmm::ncoeff<P>;
  constexpr int per_node = 32;
  auto const M = random_view<Real>("kfmm::bench::multipoles", items / per_node, N, 1);
  auto const u = random_view<Real>("kfmm::bench::offsets", items, 3, 3);
  for (auto _ : state) {
    Kokkos::parallel_for(
        "kfmm::bench::p2m", Kokkos::RangePolicy<Space>(0, items / per_node), KOKKOS_LAMBDA(int node) {
          for (int j = node * per_node; j < (node + 1) * per_node; ++j)
            kfmm::p2m<P>(Real(1), u(j, 0), u(j, 1), u(j, 2), &M(node, 0));
        });
    Space().fence();
  }
  benchmark::DoNotOptimize(M(0, 0));
  state.SetItemsProcessed(state.iterations() * items);
}

template <int P, class Real>
void L2P(benchmark::State& state) {
  constexpr int N = kfmm::ncoeff<P>;
  constexpr int per_node = 32;
  auto const L = random_view<Real>("kfmm::bench::locals", items / per_node, N, 2);
  auto const u = random_view<Real>("kfmm::bench::offsets", items, 3, 3);
  auto const out = random_view<Real>("kfmm::bench::field", items, 4, 4);
  for (auto _ : state) {
    Kokkos::parallel_for(
        "kfmm::bench::l2p", Kokkos::RangePolicy<Space>(0, items), KOKKOS_LAMBDA(int j) {
          kfmm::l2p<P>(&L(j / per_node, 0), Real(1), u(j, 0), u(j, 1), u(j, 2), out(j, 0), out(j, 1), out(j, 2),
                       out(j, 3));
        });
    Space().fence();
  }
  benchmark::DoNotOptimize(out(0, 0));
  state.SetItemsProcessed(state.iterations() * items);
}

#define KFMM_EXPANSION_BENCHMARKS(P)          \
  BENCHMARK_TEMPLATE(M2L, P, float);          \
  BENCHMARK_TEMPLATE(M2L, P, double);         \
  BENCHMARK_TEMPLATE(M2LOneByOne, P, float);  \
  BENCHMARK_TEMPLATE(M2LOneByOne, P, double); \
  BENCHMARK_TEMPLATE(P2M, P, float);          \
  BENCHMARK_TEMPLATE(P2M, P, double);         \
  BENCHMARK_TEMPLATE(L2P, P, float);          \
  BENCHMARK_TEMPLATE(L2P, P, double)

KFMM_EXPANSION_BENCHMARKS(2);
KFMM_EXPANSION_BENCHMARKS(3);
KFMM_EXPANSION_BENCHMARKS(4);
KFMM_EXPANSION_BENCHMARKS(5);
KFMM_EXPANSION_BENCHMARKS(6);
KFMM_EXPANSION_BENCHMARKS(7);
KFMM_EXPANSION_BENCHMARKS(8);

}  // namespace
