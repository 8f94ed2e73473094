// External field and centre finding per particle: ExternalField::apply with the Milky-Way
// composite (three potentials) and with an added integrated satellite (the reaction sums and
// their Allgather), and the two centre finders, on a Hernquist-like cloud.
#include <kfmm/integrate/centre_finding.hpp>
#include <kfmm/integrate/external_field.hpp>
#include <kfmm/integrate/milky_way.hpp>

#include <benchmark/benchmark.h>

#include <cmath>
#include <random>

namespace {

kfmm::Particles<kfmm::MemorySpace> cloud(std::size_t n) {
  std::mt19937_64 random(5);
  std::uniform_real_distribution<double> uniform(0, 1);
  kfmm::Particles<kfmm::HostSpace> host(n);
  host.resize(n);
  host.num_total = n;
  for (std::size_t i = 0; i < n; ++i) {
    double const u = uniform(random), r = 10 * std::sqrt(u) / (1 - std::sqrt(u) + 1e-3);
    double const z = 2 * uniform(random) - 1, phi = 6.283185307179586 * uniform(random), s = std::sqrt(1 - z * z);
    host.pos(i, 0) = r * s * std::cos(phi);
    host.pos(i, 1) = r * s * std::sin(phi);
    host.pos(i, 2) = r * z;
    for (int d = 0; d < 3; ++d) host.vel(i, d) = 0;
    host.mass(i) = 1.0 / n;
    host.id(i) = i + 1;
  }
  return kfmm::to_device(host);
}

void ExternalApply(benchmark::State& state) {
  std::size_t const n = state.range(0);
  auto const units = kfmm::UnitSystem::astro(1, 1, 1e10);
  kfmm::ExternalField field;
  field.potentials = kfmm::milky_way_2014(units);
  if (state.range(1)) {
    auto satellite = kfmm::plummer_potential(1, 2);
    satellite.motion = kfmm::CentreMotion::Integrated;
    satellite.centre[0] = 30;
    field.potentials.push_back(satellite);
  }
  auto const particles = cloud(n);
  kfmm::Context const context;
  auto centres = field.initial_centres();
  kfmm::ScalarView<double> external;
  kfmm::Vec3View<double> acceleration("kfmm::bench::acceleration", n);
  for (auto _ : state) {
    field.apply(context, 0.0, units.G, centres, particles, external, acceleration);
    Kokkos::fence();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

void CentreFinders(benchmark::State& state) {
  std::size_t const n = state.range(0);
  auto const particles = cloud(n);
  kfmm::Context const context;
  kfmm::ScalarView<double> potential("kfmm::bench::potential", n);
  auto pos = particles.pos;
  Kokkos::parallel_for(
      "kfmm::bench::potential", Kokkos::RangePolicy<kfmm::ExecutionSpace>(0, n), KOKKOS_LAMBDA(std::size_t i) {
        potential(i) = -1 / (1 + kfmm::compat::math::sqrt(pos(i, 0) * pos(i, 0) + pos(i, 1) * pos(i, 1) +
                                                          pos(i, 2) * pos(i, 2)));
      });
  int iterations = 0;
  for (auto _ : state) {
    auto const minimum = kfmm::potential_minimum_centre(context, particles, potential);
    auto const spheres = kfmm::shrinking_spheres_centre(context, particles, 0.9, 1000);
    benchmark::DoNotOptimize(minimum.position);
    iterations = spheres.iterations;
  }
  state.counters["sphere_iterations"] = iterations;
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

BENCHMARK(ExternalApply)->Args({1 << 20, 0})->Args({1 << 20, 1})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(CentreFinders)->Arg(1 << 20)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
