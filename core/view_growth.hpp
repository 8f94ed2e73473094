#pragma once
/// \file
/// \brief Amortised growth of work Views that are kept between calls.
#include <kfmm/core/kokkos_compat.hpp>

#include <cstddef>

namespace kfmm {

/// Makes `view` hold at least `n` rows, keeping its content; grows by at least half its size
/// so that repeated small growths stay amortised O(1).
template <class View>
void grow_preserving(View& view, std::size_t n) {
  if (view.extent(0) >= n) return;
  std::size_t const grown = view.extent(0) + view.extent(0) / 2 + 16;
  Kokkos::resize(view, n > grown ? n : grown);
}

}  // namespace kfmm
