// Google Benchmark main with MPI and Kokkos initialised through kfmm::Environment.
#include <kfmm/comm/environment.hpp>

#include <benchmark/benchmark.h>

int main(int argc, char** argv) {
  kfmm::Environment environment(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
