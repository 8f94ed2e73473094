// k nearest neighbours (self-query, k = 8, open box) per second on uniform points and on
// the 20 Gaussian clumps: decomposition (on several ranks), trees, walks, ghost import.
// Figures and the commands that produce them are in README.md ("Neighbours").
#include <kfmm/comm/context.hpp>
#include <kfmm/comm/initial_conditions.hpp>
#include <kfmm/neighbors/knn.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>

namespace {

void KNN(benchmark::State& state, kfmm::ICKind kind) {
  kfmm::Context const context;
  kfmm::ICOptions ic;
  ic.kind = kind;
  ic.n_total = static_cast<std::uint64_t>(state.range(0));
  auto const particles = kfmm::to_device(kfmm::make_initial_conditions(context, ic));
  kfmm::KNNOptions options;
  options.k = static_cast<int>(state.range(1));
  if (state.range(2) > 0) options.leaf_size = static_cast<int>(state.range(2));
  for (auto _ : state) {
    auto const result = kfmm::knn(kfmm::ExecutionSpace(), context, particles, options);
    benchmark::DoNotOptimize(result.distance.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * particles.num));
}

void KNNUniform(benchmark::State& state) { KNN(state, kfmm::ICKind::Uniform); }
void KNNClumps(benchmark::State& state) { KNN(state, kfmm::ICKind::GaussianClumps); }

BENCHMARK(KNNUniform)->Args({100000, 8, 0})->Args({1000000, 8, 0})->Args({1000000, 16, 0})->Args({10000000, 8, 0})->Args({1000000, 8, 16})->Args({1000000, 8, 128})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(KNNClumps)->Args({1000000, 8, 0})->Args({1000000, 32, 0})->Args({1000000, 64, 0})->Args({300000, 128, 0})->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
