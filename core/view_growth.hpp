#pragma once
/// \file
/// \brief Amortised growth of work Views that are kept between calls.
#include <kfmm/core/huge_pages.hpp>
#include <kfmm/core/kokkos_compat.hpp>

#include <cstddef>
#include <string>

namespace kfmm {

namespace detail {

/// Rows [begin, end) of a View (its other extents whole).
template <class View>
auto row_range(View const& view, std::size_t begin, std::size_t end) {
  static_assert(View::rank >= 1 && View::rank <= 3, "grown Views have rank 1 to 3");
  auto const rows = Kokkos::make_pair(begin, end);
  if constexpr (View::rank == 1)
    return Kokkos::subview(view, rows);
  else if constexpr (View::rank == 2)
    return Kokkos::subview(view, rows, Kokkos::ALL);
  else
    return Kokkos::subview(view, rows, Kokkos::ALL, Kokkos::ALL);
}

/// `rows` rows of a kept work View, not initialised. Large host ones go on huge pages before
/// their first touch: a growth is rare, but the first call of a run (or of a bigger problem)
/// otherwise pays a page fault per 4 KiB for every list it fills.
template <class View>
View allocate_kept(std::string const& label, std::size_t rows) {
  View view(Kokkos::view_alloc(Kokkos::WithoutInitializing, label), rows);
  advise_huge_pages(view, kept_huge_page_min_bytes);
  return view;
}

}  // namespace detail

/// Makes `view` hold at least `n` rows, keeping its content (new rows value-initialised, as
/// Kokkos::resize leaves them); grows by at least half its size so that repeated small growths
/// stay amortised O(1), and to n + n/8 when n is beyond that, so that a size that drifts up a
/// little from call to call (particles per rank, tree nodes) does not reallocate on the next calls.
template <class View>
void grow_preserving(View& view, std::size_t n) {
  std::size_t const old = view.extent(0);
  if (old >= n) return;
  std::size_t const grown = old + old / 2 + 16;
  std::size_t const rows = n > grown ? n + n / 8 : grown;
  View next = detail::allocate_kept<View>(view.label(), rows);
  if (old > 0) Kokkos::deep_copy(detail::row_range(next, 0, old), view);
  Kokkos::deep_copy(detail::row_range(next, old, rows), typename View::value_type{});
  view = next;
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
  view = detail::allocate_kept<View>(label, n + n / slack_divisor);
}

}  // namespace kfmm
