#pragma once
/// \file
/// \brief Amortised growth of work Views that are kept between calls.
#include <kfmm/core/kokkos_compat.hpp>

#include <cstddef>

namespace kfmm {

/// Makes `view` hold at least `n` rows, keeping its content; grows by at least half its size
/// so that repeated small growths stay amortised O(1), and to n + n/8 when n is beyond that, so
/// that a size that drifts up a little from call to call (particles per rank, tree nodes) does
/// not reallocate on the next calls.
template <class View>
void grow_preserving(View& view, std::size_t n) {
  if (view.extent(0) >= n) return;
  std::size_t const grown = view.extent(0) + view.extent(0) / 2 + 16;
  Kokkos::resize(view, n > grown ? n + n / 8 : grown);
}

}  // namespace kfmm
