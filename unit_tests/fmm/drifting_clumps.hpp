#pragma once
// Particles for the solver tests that evaluate several steps: the Gaussian clumps, and a drift.
#include <kfmm/comm/initial_conditions.hpp>

#include <cstdint>

namespace kfmm::test {

inline Particles<MemorySpace> clumps(Context const& world, std::uint64_t n, std::uint64_t seed) {
  ICOptions options;
  options.kind = ICKind::GaussianClumps;
  options.n_total = n;
  options.seed = seed;
  return to_device(make_initial_conditions(world, options));
}

// Device lambdas live in free functions (nvcc's extended-lambda rule).
// Moves every particle by dt × its velocity.
inline void drift(Particles<MemorySpace>& particles, double dt) {
  auto const pos = particles.pos;
  auto const vel = particles.vel;
  Kokkos::parallel_for(
      "test::drift", Kokkos::RangePolicy<ExecutionSpace>(0, particles.num), KOKKOS_LAMBDA(std::size_t i) {
        for (int d = 0; d < 3; ++d) pos(i, d) += dt * vel(i, d);
      });
  Kokkos::fence();
}

}  // namespace kfmm::test
