// Friends-of-friends on one rank: particles linked per second for uniform points in a periodic
// unit box (b = 0.2, the usual halo finder setting, where nearly every particle is alone) and
// for the 20 Gaussian clumps of `kfmm ic clumps` (open boundaries, b = 0.2 of the
// bounding-box separation, where most particles sit in a few dense groups), and the catalogue
// of the clump groups (≥ 20 members). Run with OMP_NUM_THREADS=2 for the setting.
#include <kfmm/comm/initial_conditions.hpp>
#include <kfmm/neighbors/fof.hpp>
#include <kfmm/neighbors/fof_catalogue.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>

namespace {

kfmm::Particles<> make_points(kfmm::Context const& context, kfmm::ICKind kind, std::uint64_t n) {
  kfmm::ICOptions ic;
  ic.kind = kind;
  ic.n_total = n;
  ic.seed = 5;
  return kfmm::to_device(kfmm::make_initial_conditions(context, ic));
}

/// friends_of_friends() on N = range(0) points of the given kind, timed per call.
void run_fof(benchmark::State& state, kfmm::ICKind kind, kfmm::FoFOptions const& options) {
  kfmm::Context const context;
  auto const particles = make_points(context, kind, std::uint64_t(state.range(0)));
  std::uint64_t groups = 0;
  for (auto _ : state) {
    auto const result = kfmm::friends_of_friends(context, particles, options);
    groups = result.num_groups;
  }
  state.counters["groups"] = double(groups);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * particles.num));
}

void FoFUniformPeriodic(benchmark::State& state) {
  kfmm::FoFOptions options;
  options.box_size = 1;  // uniform points fill the unit cube
  run_fof(state, kfmm::ICKind::Uniform, options);
}

// The same points at b = 0.7, the setting of jz-tree's published comparison (jz-tree and
// hfof): most points have friends and most fine cells several points (the dense path).
void FoFUniformPeriodicLongLink(benchmark::State& state) {
  kfmm::FoFOptions options;
  options.box_size = 1;
  options.b = 0.7;
  run_fof(state, kfmm::ICKind::Uniform, options);
}

void FoFClumps(benchmark::State& state) { run_fof(state, kfmm::ICKind::GaussianClumps, kfmm::FoFOptions{}); }

void FoFCatalogueClumps(benchmark::State& state) {
  kfmm::Context const context;
  auto const particles = make_points(context, kfmm::ICKind::GaussianClumps, std::uint64_t(state.range(0)));
  auto const result = kfmm::friends_of_friends(context, particles, kfmm::FoFOptions{});
  std::uint64_t groups = 0;
  for (auto _ : state) {
    auto const catalogue = kfmm::fof_catalogue(context, particles, result.label, kfmm::FoFCatalogueOptions{});
    groups = catalogue.num_total;
  }
  state.counters["groups"] = double(groups);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * particles.num));
}

BENCHMARK(FoFUniformPeriodic)->Arg(1000000)->Arg(10000000)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(FoFUniformPeriodicLongLink)->Arg(1000000)->Arg(10000000)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(FoFClumps)->Arg(1000000)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(FoFCatalogueClumps)->Arg(1000000)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
