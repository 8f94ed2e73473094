#pragma once
/// \file
/// \brief Lock-free union-find on a device array of parents (ECL-CC's hooking with
/// compare-and-swap) and an atomic minimum, shared by the friends-of-friends kernels.
#include <kfmm/core/types.hpp>

#include <cstdint>

namespace kfmm::detail {

/// Root of x. Roots only ever get hooked under smaller roots, so parent(x) ≤ x and the walk
/// ends; path halving writes an ancestor into a non-root slot, which stays valid whatever other
/// threads do (non-roots never become roots again, trees only merge).
KOKKOS_INLINE_FUNCTION int fof_find(int* parent, int x) {
  volatile int* p = parent;
  int up = p[x];
  while (up != x) {
    int const grand = p[up];
    if (grand != up) p[x] = grand;
    x = up;
    up = p[x];
  }
  return x;
}

/// Joins the components of a and b: the larger root is hooked under the smaller with a
/// compare-and-swap, retried when another thread hooked that root first (ECL-CC's scheme).
KOKKOS_INLINE_FUNCTION void fof_union(int* parent, int a, int b) {
  while (true) {
    a = fof_find(parent, a);
    b = fof_find(parent, b);
    if (a == b) return;
    if (a > b) {
      int const t = a;
      a = b;
      b = t;
    }
    if (Kokkos::atomic_compare_exchange(parent + b, b, a) == b) return;
  }
}

/// *target = min(*target, value) atomically; true when this call lowered it.
KOKKOS_INLINE_FUNCTION bool fof_atomic_min(std::uint64_t* target, std::uint64_t value) {
  std::uint64_t current = *static_cast<volatile std::uint64_t*>(target);
  while (value < current) {
    std::uint64_t const seen = Kokkos::atomic_compare_exchange(target, current, value);
    if (seen == current) return true;
    current = seen;
  }
  return false;
}

}  // namespace kfmm::detail
