// Throughput of the expansion operators as the passes run them (in lanes): M2L pairs/s (and
// one by one), P2M and L2P particles/s, M2P (source, particle) evaluations/s, M2M and L2L child
// translations/s, over many
// independent items in a Kokkos parallel_for on the host execution space.
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

// P2M as the upward pass runs it: a leaf's particles W at a time (p2m_lanes), lanes summed.
template <int P, class Real>
void P2M(benchmark::State& state) {
  constexpr int N = kfmm::ncoeff<P>;
  constexpr int W = kfmm::particle_lanes<Space, Real>;
  constexpr int per_node = 32;
  auto const M = random_view<Real>("kfmm::bench::multipoles", items / per_node, N, 1);
  auto const u = random_view<Real>("kfmm::bench::offsets", items, 4, 3);
  for (auto _ : state) {
    Kokkos::parallel_for(
        "kfmm::bench::p2m", Kokkos::RangePolicy<Space>(0, items / per_node), KOKKOS_LAMBDA(int node) {
          Real lanes[N * W] = {};
          for (int first = node * per_node; first < (node + 1) * per_node; first += W) {
            Real m[W], ux[W], uy[W], uz[W];
            for (int l = 0; l < W; ++l)
              m[l] = u(first + l, 3), ux[l] = u(first + l, 0), uy[l] = u(first + l, 1), uz[l] = u(first + l, 2);
            kfmm::p2m_lanes<P, Real, W>(m, ux, uy, uz, lanes);
          }
          for (int n = 0; n < N; ++n)
            for (int l = 0; l < W; ++l) M(node, n) += lanes[n * W + l];
        });
    Space().fence();
  }
  benchmark::DoNotOptimize(M(0, 0));
  state.SetItemsProcessed(state.iterations() * items);
}

// L2P as the downward pass runs it: a leaf's particles W at a time (l2p_lanes).
template <int P, class Real>
void L2P(benchmark::State& state) {
  constexpr int N = kfmm::ncoeff<P>;
  constexpr int W = kfmm::particle_lanes<Space, Real>;
  constexpr int per_node = 32;
  auto const L = random_view<Real>("kfmm::bench::locals", items / per_node, N, 2);
  auto const u = random_view<Real>("kfmm::bench::offsets", items, 3, 3);
  auto const out = random_view<Real>("kfmm::bench::field", items, 4, 4);
  for (auto _ : state) {
    Kokkos::parallel_for(
        "kfmm::bench::l2p", Kokkos::RangePolicy<Space>(0, items / per_node), KOKKOS_LAMBDA(int node) {
          for (int first = node * per_node; first < (node + 1) * per_node; first += W) {
            Real ux[W], uy[W], uz[W], phi[W], gx[W], gy[W], gz[W];
            for (int l = 0; l < W; ++l) ux[l] = u(first + l, 0), uy[l] = u(first + l, 1), uz[l] = u(first + l, 2);
            kfmm::l2p_lanes<P, Real, W>(&L(node, 0), Real(1), ux, uy, uz, phi, gx, gy, gz);
            for (int l = 0; l < W; ++l)
              out(first + l, 0) = phi[l], out(first + l, 1) = gx[l], out(first + l, 2) = gy[l], out(first + l, 3) = gz[l];
          }
        });
    Space().fence();
  }
  benchmark::DoNotOptimize(out(0, 0));
  state.SetItemsProcessed(state.iterations() * items);
}

// M2P as the pass runs it: the particles of a leaf in lanes (particle_lanes), one source's
// multipole after another. Items are (source, particle) evaluations.
template <int P, class Real>
void M2P(benchmark::State& state) {
  constexpr int N = kfmm::ncoeff<P>;
  constexpr int W = kfmm::particle_lanes<Space, Real>;
  constexpr int sources = 16;
  auto const M = random_view<Real>("kfmm::bench::multipoles", sources, N, 1);
  auto const x = random_view<Real>("kfmm::bench::positions", items / sources, 3, 2);
  auto const out = random_view<Real>("kfmm::bench::field", items / sources, 4, 3);
  for (auto _ : state) {
    Kokkos::parallel_for(
        "kfmm::bench::m2p", Kokkos::RangePolicy<Space>(0, items / sources / W), KOKKOS_LAMBDA(int chunk) {
          int const first = chunk * W;
          Real phi[W] = {}, gx[W] = {}, gy[W] = {}, gz[W] = {};
          for (int b = 0; b < sources; ++b) {
            Real dx[W], dy[W], dz[W];
            for (int l = 0; l < W; ++l) {
              dx[l] = Real(4) + x(first + l, 0) + Real(0.1) * b;
              dy[l] = x(first + l, 1);
              dz[l] = x(first + l, 2);
            }
            kfmm::m2p_lanes<kfmm::SofteningKind::Plummer, P, Real, W>(&M(b, 0), Real(1), dx, dy, dz, Real(0.01), phi,
                                                                      gx, gy, gz);
          }
          for (int l = 0; l < W; ++l)
            out(first + l, 0) = phi[l], out(first + l, 1) = gx[l], out(first + l, 2) = gy[l], out(first + l, 3) = gz[l];
        });
    Space().fence();
  }
  benchmark::DoNotOptimize(out(0, 0));
  state.SetItemsProcessed(state.iterations() * items);
}

// M2M and L2L as the passes run them: the 8 children of a node at once, one per lane. Items
// are child translations.
template <int P, class Real>
void M2M(benchmark::State& state) {
  constexpr int N = kfmm::ncoeff<P>;
  constexpr int W = kfmm::child_lanes;
  auto const children = random_view<Real>("kfmm::bench::children", items, N, 1);
  auto const parents = random_view<Real>("kfmm::bench::parents", items / W, N, 2);
  auto const d = random_view<Real>("kfmm::bench::offsets", items, 3, 3);
  for (auto _ : state) {
    Kokkos::parallel_for(
        "kfmm::bench::m2m", Kokkos::RangePolicy<Space>(0, items / W), KOKKOS_LAMBDA(int node) {
          Real const* moments[W];
          Real s[W], dx[W], dy[W], dz[W];
          for (int l = 0; l < W; ++l) {
            int const c = node * W + l;
            moments[l] = &children(c, 0);
            s[l] = Real(0.5), dx[l] = d(c, 0), dy[l] = d(c, 1), dz[l] = d(c, 2);
          }
          Real lanes[N * W] = {};
          kfmm::m2m_lanes<P, Real, W>(W, moments, s, dx, dy, dz, Real(1), lanes);
          for (int n = 0; n < N; ++n)
            for (int l = 0; l < W; ++l) parents(node, n) += lanes[n * W + l];
        });
    Space().fence();
  }
  benchmark::DoNotOptimize(parents(0, 0));
  state.SetItemsProcessed(state.iterations() * items);
}

template <int P, class Real>
void L2L(benchmark::State& state) {
  constexpr int N = kfmm::ncoeff<P>;
  constexpr int W = kfmm::child_lanes;
  auto const parents = random_view<Real>("kfmm::bench::parents", items / W, N, 1);
  auto const children = random_view<Real>("kfmm::bench::children", items, N, 2);
  auto const d = random_view<Real>("kfmm::bench::offsets", items, 3, 3);
  for (auto _ : state) {
    Kokkos::parallel_for(
        "kfmm::bench::l2l", Kokkos::RangePolicy<Space>(0, items / W), KOKKOS_LAMBDA(int node) {
          Real s[W], dx[W], dy[W], dz[W];
          for (int l = 0; l < W; ++l) {
            int const c = node * W + l;
            s[l] = Real(0.5), dx[l] = d(c, 0), dy[l] = d(c, 1), dz[l] = d(c, 2);
          }
          Real lanes[N * W] = {};
          kfmm::l2l_lanes<P, Real, W>(&parents(node, 0), Real(1), dx, dy, dz, s, lanes);
          for (int l = 0; l < W; ++l)
            for (int n = 0; n < N; ++n) children(node * W + l, n) += lanes[n * W + l];
        });
    Space().fence();
  }
  benchmark::DoNotOptimize(children(0, 0));
  state.SetItemsProcessed(state.iterations() * items);
}

// M2L at every order; the other operators at a low and the default order (each order is
// another unrolled instantiation to compile).
#define KFMM_M2L_BENCHMARKS(P)                \
  BENCHMARK_TEMPLATE(M2L, P, float);          \
  BENCHMARK_TEMPLATE(M2L, P, double);         \
  BENCHMARK_TEMPLATE(M2LOneByOne, P, float);  \
  BENCHMARK_TEMPLATE(M2LOneByOne, P, double)

#define KFMM_PASS_BENCHMARKS(P)               \
  BENCHMARK_TEMPLATE(P2M, P, float);          \
  BENCHMARK_TEMPLATE(P2M, P, double);         \
  BENCHMARK_TEMPLATE(L2P, P, float);          \
  BENCHMARK_TEMPLATE(L2P, P, double);         \
  BENCHMARK_TEMPLATE(M2P, P, float);          \
  BENCHMARK_TEMPLATE(M2P, P, double);         \
  BENCHMARK_TEMPLATE(M2M, P, float);          \
  BENCHMARK_TEMPLATE(M2M, P, double);         \
  BENCHMARK_TEMPLATE(L2L, P, float);          \
  BENCHMARK_TEMPLATE(L2L, P, double)

KFMM_M2L_BENCHMARKS(2);
KFMM_M2L_BENCHMARKS(3);
KFMM_M2L_BENCHMARKS(4);
KFMM_M2L_BENCHMARKS(5);
KFMM_M2L_BENCHMARKS(6);
KFMM_M2L_BENCHMARKS(7);
KFMM_M2L_BENCHMARKS(8);
KFMM_PASS_BENCHMARKS(4);
KFMM_PASS_BENCHMARKS(7);

}  // namespace
