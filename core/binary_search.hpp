#pragma once
/// \file
/// \brief Binary searches over sorted Views (or anything indexed with operator()) for device
/// code: one loop for every search of the library, so that bounds and tie rules are written once.
#include <Kokkos_Core.hpp>

namespace kfmm {

/// \brief The first index i in [begin, end) with below(i) false, where below is true on a
/// prefix of the range and false after it (end when it is true everywhere).
template <class Index, class Below>
KOKKOS_INLINE_FUNCTION Index partition_point(Index begin, Index end, Below const& below) {
  while (begin < end) {
    Index const middle = begin + (end - begin) / 2;
    if (below(middle))
      begin = middle + 1;
    else
      end = middle;
  }
  return begin;
}

/// \brief The first index in [begin, end) whose value is not less than `value` (values sorted
/// ascending): the number of values < `value` when the range starts at 0.
template <class Values, class Index, class T>
KOKKOS_INLINE_FUNCTION Index lower_bound(Values const& values, Index begin, Index end, T const& value) {
  return partition_point(begin, end, [&](Index i) { return values(i) < value; });
}

/// \brief The first index in [begin, end) whose value is greater than `value` (values sorted
/// ascending): the number of values ≤ `value` when the range starts at 0.
template <class Values, class Index, class T>
KOKKOS_INLINE_FUNCTION Index upper_bound(Values const& values, Index begin, Index end, T const& value) {
  return partition_point(begin, end, [&](Index i) { return values(i) <= value; });
}

}  // namespace kfmm
