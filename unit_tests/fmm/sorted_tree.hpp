#pragma once
// Test setup shared by the near-field and node-geometry tests: particles on this rank alone,
// sorted by key, their tree, its geometry and P2P lists, as the solver builds them on one rank.
#include <kfmm/core/hilbert.hpp>
#include <kfmm/core/initial_conditions.hpp>
#include <kfmm/core/particles.hpp>
#include <kfmm/core/sort.hpp>
#include <kfmm/core/tree.hpp>
#include <kfmm/fmm/dual_tree_walk.hpp>
#include <kfmm/fmm/node_geometry.hpp>

#include <cstdint>

namespace kfmm_test {

struct SortedTree {
  kfmm::Particles<kfmm::MemorySpace> particles;
  kfmm::BoundingCube cube{};
  kfmm::Tree<> tree;
  int n = 0;
};

/// `n` Plummer-sphere particles of unequal masses (the same on every rank) plus `coincident`
/// particles at one point, which end in one oversized leaf at the deepest level.
inline kfmm::Particles<kfmm::HostSpace> plummer_with_a_clump(std::uint64_t n, int coincident) {
  kfmm::ICOptions options;
  options.kind = kfmm::ICKind::Plummer;
  options.n_total = n;
  options.seed = 11;
  auto const sphere = kfmm::generate_initial_conditions(options, 0, 1, [](std::int64_t*, int) {});
  // Filled row by row and moved to the device as whole Views: no Particles copy helpers.
  kfmm::Particles<kfmm::HostSpace> all(sphere.num + coincident);
  for (std::size_t i = 0; i < sphere.num; ++i) {
    for (int k = 0; k < 3; ++k) {
      all.pos(i, k) = sphere.pos(i, k);
      all.vel(i, k) = sphere.vel(i, k);
    }
    all.mass(i) = sphere.mass(i);
    all.id(i) = sphere.id(i);
  }
  for (int c = 0; c < coincident; ++c) {
    std::size_t const i = sphere.num + c;
    for (int k = 0; k < 3; ++k) {
      all.pos(i, k) = 0.125 * (k + 1);
      all.vel(i, k) = 0;
    }
    all.mass(i) = 1.0 / double(n);
    all.id(i) = n + c;
  }
  all.num = all.num_total = sphere.num + coincident;
  for (std::size_t i = 0; i < all.num; ++i) all.mass(i) *= 1 + double(i % 5);
  return all;
}

/// Sorts `host` by Hilbert key and builds its tree with leaves of at most `leaf_size`.
inline SortedTree sorted_tree(kfmm::Particles<kfmm::HostSpace> const& host, int leaf_size) {
  kfmm::ExecutionSpace const space;
  SortedTree s;
  s.particles = kfmm::Particles<kfmm::MemorySpace>(host.capacity());
  Kokkos::deep_copy(s.particles.pos, host.pos);
  Kokkos::deep_copy(s.particles.vel, host.vel);
  Kokkos::deep_copy(s.particles.mass, host.mass);
  Kokkos::deep_copy(s.particles.id, host.id);
  s.particles.num = s.particles.num_total = host.num;
  s.n = int(host.num);
  double lo[3], hi[3];
  kfmm::compute_bounds(space, s.particles.pos, host.num, lo, hi);
  s.cube = kfmm::cube_from_bounds(lo, hi);
  kfmm::ScalarView<std::uint64_t> keys("keys", host.num);
  kfmm::ScalarView<std::uint32_t> permutation("permutation", host.num);
  kfmm::compute_keys(space, s.cube, s.particles.pos, host.num, keys);
  kfmm::sort_by_key(space, keys, permutation);
  kfmm::permute(space, s.particles, permutation);
  kfmm::ScalarView<std::uint64_t> const no_split("no_split", 0);
  kfmm::build_tree(space, keys, s.n, leaf_size, no_split, s.tree);
  space.fence();
  return s;
}

}  // namespace kfmm_test
