#pragma once
/// \file
/// \brief Kernels that sort keys which are already sorted or nearly so (the previous step's key
/// order after a small drift) faster than a full radix sort, with the same result: the stable
/// order, ties by original index.
///
/// The keys split into a "kept" subsequence, already in stable order (key ≥ every earlier key
/// and ≤ every later key), and the few "moved" others. The moved keys are sorted on their own
/// (KeySorter's radix passes), then both sorted sequences are merged by binary search: each
/// element's output slot is its rank in its own sequence plus the number of elements of the
/// other sequence that precede it in (key, index) order. Three scans and two merge kernels
/// replace the radix sort's count and scatter passes.
#include <kfmm/core/kokkos_compat.hpp>

#include <cstddef>
#include <cstdint>

namespace kfmm::detail {

/// Running maximum of keys as a scan value (the scan joins with +=; the volatile overload is
/// what Kokkos 3 calls, Kokkos ≥ 4 the plain one).
struct RunningKeyMax {
  std::uint64_t value = 0;
  KOKKOS_INLINE_FUNCTION void operator+=(RunningKeyMax const& other) {
    if (other.value > value) value = other.value;
  }
  KOKKOS_INLINE_FUNCTION void operator+=(volatile RunningKeyMax const& other) volatile {
    std::uint64_t const v = other.value;
    if (v > value) value = v;
  }
};

/// Running minimum of keys as a scan value (starts at the largest key).
struct RunningKeyMin {
  std::uint64_t value = ~std::uint64_t(0);
  KOKKOS_INLINE_FUNCTION void operator+=(RunningKeyMin const& other) {
    if (other.value < value) value = other.value;
  }
  KOKKOS_INLINE_FUNCTION void operator+=(volatile RunningKeyMin const& other) volatile {
    std::uint64_t const v = other.value;
    if (v < value) value = v;
  }
};

/// Number of i in [1, n) with keys(i) < keys(i − 1): 0 means sorted.
template <class ExecutionSpace, class KeyView>
std::size_t count_descents(ExecutionSpace const& space, KeyView const& keys, std::size_t n) {
  std::size_t descents = 0;
  if (n < 2) return 0;
  Kokkos::parallel_reduce(
      "kfmm::sort::count_descents", Kokkos::RangePolicy<ExecutionSpace>(space, 1, n),
      KOKKOS_LAMBDA(std::size_t i, std::size_t & count) { count += keys(i) < keys(i - 1) ? 1 : 0; }, descents);
  return descents;
}

/// Marks the kept keys (kept(i) = 1): keys(i) ≥ all keys before i and ≤ all keys after i.
/// `scratch` (n keys) receives the running maximum before each key.
template <class ExecutionSpace, class KeyView, class FlagView>
void mark_kept_keys(ExecutionSpace const& space, KeyView const& keys, std::size_t n, KeyView const& scratch,
                    FlagView const& kept) {
  Kokkos::parallel_scan(
      "kfmm::sort::max_before", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t i, RunningKeyMax & running, bool final) {
        std::uint64_t const key = keys(i);
        if (final) scratch(i) = running.value;
        if (key > running.value) running.value = key;
      });
  Kokkos::parallel_scan(
      "kfmm::sort::min_after", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t j, RunningKeyMin & running, bool final) {
        std::size_t const i = n - 1 - j;
        std::uint64_t const key = keys(i);
        if (final) kept(i) = key >= scratch(i) && key <= running.value ? 1 : 0;
        if (key < running.value) running.value = key;
      });
}

/// Splits the keys by `kept`: before(i) = moved keys before i; kept_index(r) = index of the
/// r-th kept key; moved_keys / moved_index (room for `room` entries; beyond it nothing is
/// written) = the moved keys and their indices in index order. Returns the number of moved keys.
template <class ExecutionSpace, class KeyView, class FlagView, class IndexView>
std::size_t split_kept_keys(ExecutionSpace const& space, KeyView const& keys, std::size_t n, FlagView const& kept,
                            IndexView const& before, IndexView const& kept_index, KeyView const& moved_keys,
                            IndexView const& moved_index, std::size_t room) {
  using Index = typename IndexView::non_const_value_type;
  Index moved = 0;
  Kokkos::parallel_scan(
      "kfmm::sort::split_kept", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t i, Index & count, bool final) {
        bool const keep = kept(i) != 0;
        if (final) {
          before(i) = count;
          if (keep)
            kept_index(i - count) = static_cast<Index>(i);
          else if (count < room) {
            moved_keys(count) = keys(i);
            moved_index(count) = static_cast<Index>(i);
          }
        }
        if (!keep) ++count;
      },
      moved);
  return moved;
}

/// Merges the kept keys (in place in `keys`, flagged by `kept`) with the m sorted moved keys
/// (moved_keys, moved_index: their original indices) into out_keys / out_permutation.
template <class ExecutionSpace, class KeyView, class FlagView, class IndexView>
void merge_kept_and_moved(ExecutionSpace const& space, KeyView const& keys, std::size_t n, FlagView const& kept,
                          IndexView const& before, IndexView const& kept_index, KeyView const& moved_keys,
                          IndexView const& moved_index, std::size_t m, KeyView const& out_keys,
                          IndexView const& out_permutation) {
  using Index = typename IndexView::non_const_value_type;
  Kokkos::parallel_for(
      "kfmm::sort::merge_kept", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n), KOKKOS_LAMBDA(std::size_t i) {
        if (!kept(i)) return;
        std::uint64_t const key = keys(i);
        std::size_t low = 0, high = m;  // moved entries before (key, i)
        while (low < high) {
          std::size_t const middle = (low + high) / 2;
          std::uint64_t const other = moved_keys(middle);
          if (other < key || (other == key && std::size_t(moved_index(middle)) < i))
            low = middle + 1;
          else
            high = middle;
        }
        std::size_t const at = i - std::size_t(before(i)) + low;
        out_keys(at) = key;
        out_permutation(at) = static_cast<Index>(i);
      });
  std::size_t const kept_count = n - m;
  Kokkos::parallel_for(
      "kfmm::sort::merge_moved", Kokkos::RangePolicy<ExecutionSpace>(space, 0, m), KOKKOS_LAMBDA(std::size_t j) {
        std::uint64_t const key = moved_keys(j);
        std::size_t const index = moved_index(j);
        std::size_t low = 0, high = kept_count;  // kept entries before (key, index)
        while (low < high) {
          std::size_t const middle = (low + high) / 2;
          std::size_t const at = kept_index(middle);
          std::uint64_t const other = keys(at);
          if (other < key || (other == key && at < index))
            low = middle + 1;
          else
            high = middle;
        }
        out_keys(j + low) = key;
        out_permutation(j + low) = static_cast<Index>(index);
      });
}

}  // namespace kfmm::detail
