#pragma once
/// \file
/// \brief Amortised growth of work Views that are kept between calls.
#include <kfmm/core/kokkos_compat.hpp>

#include <cstddef>
#include <string>

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

/// Makes `view` hold at least `n` rows, discarding its content: for scratch that is rewritten
/// before it is read. The old View is freed before the new one is allocated (the peak stays one
/// View) and the new one is not initialised (no pass over memory that is about to be written).
/// It gets n / slack_divisor rows more than asked, so that a size drifting up from call to call
/// does not reallocate every time.
template <class View>
void grow_discarding(View& view, std::size_t n, std::string const& label, std::size_t slack_divisor = 2) {
  if (view.extent(0) >= n) return;
  view = View();
  view = View(Kokkos::view_alloc(Kokkos::WithoutInitializing, label), n + n / slack_divisor);
}

}  // namespace kfmm
