#pragma once
// Benchmark particles: 20 Gaussian clumps of width 1 at 30·N(0,1), as in jz-fmm's examples
// (also the clumped keys of unit_tests/core/test_sort.cpp).
#include <kfmm/core/types.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <random>

namespace kfmm::bench {

inline Vec3View<double> clumped_positions(std::size_t n, std::uint64_t seed) {
  Vec3View<double> pos("kfmm::bench::pos", n);
  auto host = Kokkos::create_mirror_view(pos);
  std::mt19937_64 random(seed);
  std::normal_distribution<double> normal(0, 1);
  double centres[20][3];
  for (auto& centre : centres)
    for (double& c : centre) c = 30 * normal(random);
  for (std::size_t i = 0; i < n; ++i)
    for (int k = 0; k < 3; ++k) host(i, k) = centres[i % 20][k] + normal(random);
  Kokkos::deep_copy(pos, host);
  return pos;
}

}  // namespace kfmm::bench
