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

/// The rows a View of `old` rows grows to when it must hold `n`: by at least half its size, so
/// that repeated small growths stay amortised O(1), and to n + n/8 when n is beyond that, so
/// that a size that drifts up a little from call to call (particles per rank, tree nodes) does
/// not reallocate on the next calls.
inline std::size_t grown_rows(std::size_t old, std::size_t n) {
  std::size_t const grown = old + old / 2 + 16;
  return n > grown ? n + n / 8 : grown;
}

}  // namespace detail

/// Makes `view` hold at least `n` rows, keeping only its first `kept` rows (at most its
/// extent) and leaving the others uninitialised: for a list appended to, whose rows beyond the
/// used ones are written before they are read. Unlike grow_preserving (below), neither the unused tail
/// of the old rows is copied nor the new ones filled, two passes over memory the first call of
/// a run would otherwise make for every list it grows.
template <class View>
void grow_appending(View& view, std::size_t n, std::size_t kept) {
  std::size_t const old = view.extent(0);
  if (old >= n) return;
  std::size_t const rows = detail::grown_rows(old, n);
  View next = allocate_kept<View>(view.label(), rows);
  kept = kept < old ? kept : old;
  if (kept > 0) Kokkos::deep_copy(detail::row_range(next, 0, kept), detail::row_range(view, 0, kept));
  view = next;
}

/// Makes `view` exactly `n` rows, keeping its first min(n, extent) rows and value-initialising
/// the others, as Kokkos::resize does, but with a large host View on huge pages before its first
/// touch (allocate_kept): for Views that live as long as a run, such as the particles, whose
/// growth in a run's first decomposition otherwise pays a page fault per 4 KiB.
template <class View>
void resize_kept(View& view, std::size_t n) {
  std::size_t const old = view.extent(0);
  if (old == n) return;
  View next = allocate_kept<View>(view.label(), n);
  std::size_t const kept = old < n ? old : n;
  if (kept > 0) Kokkos::deep_copy(detail::row_range(next, 0, kept), detail::row_range(view, 0, kept));
  if (n > kept) Kokkos::deep_copy(detail::row_range(next, kept, n), typename View::value_type{});
  view = next;
}

/// Makes `view` hold at least `n` rows, keeping its content (new rows value-initialised, as
/// Kokkos::resize leaves them); grows as detail::grown_rows says. A growth is rare, so large
/// host Views go on huge pages before their first touch (resize_kept): the first call of a run
/// (or of a bigger problem) otherwise pays a page fault per 4 KiB for every list it fills.
template <class View>
void grow_preserving(View& view, std::size_t n) {
  std::size_t const old = view.extent(0);
  if (old < n) resize_kept(view, detail::grown_rows(old, n));
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
  view = allocate_kept<View>(label, n + n / slack_divisor);
}

}  // namespace kfmm
