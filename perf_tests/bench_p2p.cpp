// Throughput of the near-field kernel: P2P pairs/s of p2p_sources() as the near field runs it
// (one target against a gathered, padded block of sources), float and double, both kernels,
// over many targets in a Kokkos parallel_for on the host execution space.
#include <kfmm/fmm/p2p.hpp>

#include <benchmark/benchmark.h>

#include <random>

namespace {

using Space = Kokkos::DefaultHostExecutionSpace;
constexpr int W = kfmm::p2p_width<Space>;
constexpr int sources = 27 * 64;  // a leaf of 64 and its 26 neighbours
constexpr int targets = 1 << 12;

template <kfmm::SofteningKind kind, class Real>
void P2P(benchmark::State& state) {
  static_assert(sources % W == 0, "the block of sources is padded to the kernel width");
  Kokkos::View<Real* [4], Kokkos::LayoutLeft, Kokkos::HostSpace> xm("kfmm::bench::sources", sources);
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> uniform(-1.5, 1.5);
  for (int j = 0; j < sources; ++j) {
    for (int k = 0; k < 3; ++k) xm(j, k) = Real(uniform(rng));
    xm(j, 3) = Real(1.0 / sources);
  }
  Kokkos::View<Real* [4], Kokkos::LayoutLeft, Kokkos::HostSpace> out("kfmm::bench::out", targets);
  Real const h = Real(0.01);
  for (auto _ : state) {
    Kokkos::parallel_for(
        "kfmm::bench::p2p", Kokkos::RangePolicy<Space>(0, targets), KOKKOS_LAMBDA(int t) {
          int const i = t % sources;
          Real p = 0, gx = 0, gy = 0, gz = 0;
          kfmm::p2p_sources<kind, Real, W>(&xm(0, 0), &xm(0, 1), &xm(0, 2), &xm(0, 3), sources, i, xm(i, 0),
                                           xm(i, 1), xm(i, 2), h, p, gx, gy, gz);
          out(t, 0) = p;
          out(t, 1) = gx;
          out(t, 2) = gy;
          out(t, 3) = gz;
        });
    Space().fence();
  }
  benchmark::DoNotOptimize(out(0, 0));
  state.SetItemsProcessed(state.iterations() * std::int64_t(targets) * sources);
}

}  // namespace

BENCHMARK_TEMPLATE(P2P, kfmm::SofteningKind::Plummer, float)->UseRealTime();
BENCHMARK_TEMPLATE(P2P, kfmm::SofteningKind::Plummer, double)->UseRealTime();
BENCHMARK_TEMPLATE(P2P, kfmm::SofteningKind::Spline, float)->UseRealTime();
BENCHMARK_TEMPLATE(P2P, kfmm::SofteningKind::Spline, double)->UseRealTime();
