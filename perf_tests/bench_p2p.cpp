// Throughput of the near-field kernel: P2P pairs/s of p2p_sources() as the CPU shape runs it
// (one target against a gathered, padded block of sources), float and double, both kernels,
// over many targets in a Kokkos parallel_for on the host execution space. NearField: the whole
// near field (near_field_gathered, near_field_tiled) of 2e5 clump particles at the default
// leaf size and opening angle, float Plummer, in both kernel shapes on the default space.
#include <kfmm/core/hilbert.hpp>
#include <kfmm/core/initial_conditions.hpp>
#include <kfmm/core/sort.hpp>
#include <kfmm/fmm/p2p.hpp>

#include <benchmark/benchmark.h>

#include <memory>
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

/// A sorted set of clump particles, its tree, geometry and P2P lists (built once).
struct NearFieldSetup {
  kfmm::Particles<kfmm::MemorySpace> particles;
  kfmm::Tree<> tree;
  kfmm::NodeGeometry geometry;
  kfmm::PairLists lists;
  int n = 0;

  NearFieldSetup() {
    kfmm::ExecutionSpace const space;
    kfmm::ICOptions options;
    options.n_total = 200000;
    particles = kfmm::to_device(kfmm::generate_initial_conditions(options, 0, 1, [](std::int64_t*, int) {}));
    n = int(particles.num);
    double lo[3], hi[3];
    kfmm::compute_bounds(space, particles.pos, particles.num, lo, hi);
    auto const cube = kfmm::cube_from_bounds(lo, hi);
    kfmm::ScalarView<std::uint64_t> keys("kfmm::bench::keys", particles.num);
    kfmm::ScalarView<std::uint32_t> permutation("kfmm::bench::permutation", particles.num);
    kfmm::compute_keys(space, cube, particles.pos, particles.num, keys);
    kfmm::sort_by_key(space, keys, permutation);
    kfmm::permute(space, particles, permutation);
    kfmm::FMMConfig const config;
    kfmm::ScalarView<std::uint64_t> const no_split("kfmm::bench::no_split", 0);
    kfmm::build_tree(space, keys, n, config.leaf_size, no_split, tree);
    kfmm::compute_node_geometry(space, tree, particles.pos, particles.mass, config.centre, cube, geometry);
    kfmm::DualTreeWalk walk;
    kfmm::PairLists m2l;
    walk.run(space, tree, geometry, config.theta, 0.0, 0, m2l, lists);
    space.fence();
  }
};

NearFieldSetup const& near_field_setup() {
  static NearFieldSetup const setup;
  return setup;
}

void NearField(benchmark::State& state) {
  auto const& s = near_field_setup();
  bool const tiled = state.range(0) != 0;
  kfmm::ScalarView<double> phi("kfmm::bench::phi", s.n);
  kfmm::Vec3View<double> grad("kfmm::bench::grad", s.n);
  kfmm::NearFieldScratch<float> scratch;
  kfmm::PassParticles const pass{s.particles.pos, s.particles.mass, s.n, s.n};
  kfmm::ExecutionSpace const space;
  auto const targets = kfmm::all_targets(space, s.n);
  std::uint64_t pairs = 0;
  for (auto _ : state) {
    pairs = tiled ? kfmm::near_field_tiled<float, kfmm::SofteningKind::Plummer>(space, s.tree, s.geometry, s.lists,
                                                                                 pass, targets, 0.01f, phi, grad, scratch)
                  : kfmm::near_field_gathered<float, kfmm::SofteningKind::Plummer>(
                        space, s.tree, s.geometry, s.lists, pass, targets, 0.01f, phi, grad, scratch);
    space.fence();
  }
  state.SetLabel(tiled ? "GPU shape (tiled)" : "CPU shape (gathered)");
  state.SetItemsProcessed(state.iterations() * std::int64_t(pairs));
}

}  // namespace

BENCHMARK(NearField)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(P2P, kfmm::SofteningKind::Plummer, float)->UseRealTime();
BENCHMARK_TEMPLATE(P2P, kfmm::SofteningKind::Plummer, double)->UseRealTime();
BENCHMARK_TEMPLATE(P2P, kfmm::SofteningKind::Spline, float)->UseRealTime();
BENCHMARK_TEMPLATE(P2P, kfmm::SofteningKind::Spline, double)->UseRealTime();
