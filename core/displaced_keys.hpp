#pragma once
/// \file
/// \brief Kernels that sort keys which are sorted but for a few displaced ones (a drifted
/// step's Hilbert keys in the previous step's order) faster than a full radix sort, with the
/// same result: the stable order, ties by original index.
///
/// Every descent keys(i) < keys(i − 1) joins two stretches that are out of order against each
/// other: the end of the one before (its keys above keys(i)) or the start of the one after (its
/// keys below keys(i − 1)) has to move. The shorter of the two is marked displaced, so a key
/// that jumped far (a particle that crossed a coarse Hilbert cell boundary) is marked alone and
/// does not take its neighbours with it. The unmarked keys are compacted and checked; marking
/// repeats on them while they still descend (marks near each other can leave new descents).
/// The displaced keys, few, are radix sorted, and one pass over the rest, block by block (each
/// finding its first displaced key by binary search), merges both.
#include <kfmm/core/binary_search.hpp>
#include <kfmm/core/kokkos_compat.hpp>

#include <cstddef>
#include <cstdint>

namespace kfmm::detail {

/// How far from a descent mark_displaced() looks on either side in the first round; each
/// later round looks four times as far.
inline constexpr std::size_t displaced_reach = 64;

/// Marks (mark(original) ≠ 0) the shorter side of every descent of keys[0, n), looking at most
/// `reach` keys either side; both sides when both reach that far (a stretch of displaced keys
/// longer than `reach` then loses `reach` keys per round, whichever side it is on). `index(i)`
/// is the original index of keys(i), or i itself when `direct` (index is then not read).
template <class ExecutionSpace, class KeyView, class IndexView, class MarkView>
void mark_displaced(ExecutionSpace const& space, KeyView const& keys, IndexView const& index, bool direct,
                    std::size_t n, std::size_t reach, MarkView const& mark) {
  using Mark = typename MarkView::non_const_value_type;
  if (n < 2) return;
  Kokkos::parallel_for(
      "kfmm::sort::mark_displaced", Kokkos::RangePolicy<ExecutionSpace>(space, 1, n), KOKKOS_LAMBDA(std::size_t i) {
        std::uint64_t const low = keys(i), high = keys(i - 1);
        if (!(low < high)) return;
        // keys[i − a, i) are above keys(i); keys[i, i + b) are below keys(i − 1). Both sides grow
        // in step, and stop once the shorter is known.
        std::size_t a = 1, b = 1;
        for (;;) {
          bool const a_grows = a < reach && a < i && keys(i - a - 1) > low;
          bool const b_grows = b < reach && i + b < n && keys(i + b) < high;
          if ((!a_grows && (!b_grows || a <= b)) || (!b_grows && b < a)) break;
          a += a_grows ? 1 : 0;
          b += b_grows ? 1 : 0;
        }
        bool const capped = a == reach && b == reach;
        bool const earlier = capped || a <= b, later = capped || !earlier;
        std::size_t const from = earlier ? i - a : i, to = later ? i + b : i;
        for (std::size_t j = from; j < to; ++j) Kokkos::atomic_fetch_or(&mark(direct ? j : std::size_t(index(j))), Mark(1));
      });
}

/// Splits keys[0, n) by `mark`, keeping the order: the unmarked ones to rest_keys / rest_index,
/// the marked ones to moved_keys / moved_index (original indices), at most `room` of them (the
/// rest is not written). Returns the number marked.
template <class ExecutionSpace, class KeyView, class IndexView, class MarkView>
std::size_t split_displaced(ExecutionSpace const& space, KeyView const& keys, std::size_t n, MarkView const& mark,
                            KeyView const& rest_keys, IndexView const& rest_index, KeyView const& moved_keys,
                            IndexView const& moved_index, std::size_t room) {
  using Index = typename IndexView::non_const_value_type;
  std::size_t moved = 0;
  Kokkos::parallel_scan(
      "kfmm::sort::split_displaced", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t i, std::size_t & before, bool final) {
        bool const marked = mark(i) != 0;
        if (final) {
          if (!marked) {
            rest_keys(i - before) = keys(i);
            rest_index(i - before) = static_cast<Index>(i);
          } else if (before < room) {
            moved_keys(before) = keys(i);
            moved_index(before) = static_cast<Index>(i);
          }
        }
        before += marked ? 1 : 0;
      },
      moved);
  return moved;
}

/// Rest keys per block of merge_displaced().
inline constexpr std::size_t displaced_merge_block = 256;

/// Merges the `m` displaced keys, sorted (moved_keys sorted, moved_index(order(j)) the original
/// index of the j-th), into the `r` sorted rest keys, ties by original index, writing keys and
/// their original indices to keys / permutation [0, r + m). Block b of the rest, [b·B, (b+1)·B),
/// finds by binary search the displaced keys before its first key and merges from there up to
/// those before the next block's first key; the first block starts from the first displaced
/// key, the last one ends with the last.
template <class ExecutionSpace, class KeyView, class IndexView, class PermutationView>
void merge_displaced(ExecutionSpace const& space, KeyView const& moved_keys, IndexView const& moved_index,
                     IndexView const& order, std::size_t m, KeyView const& rest_keys, IndexView const& rest_index,
                     std::size_t r, KeyView const& keys, PermutationView const& permutation) {
  using Out = typename PermutationView::non_const_value_type;
  std::size_t const block = displaced_merge_block;
  std::size_t const blocks = r > 0 ? (r + block - 1) / block : 1;
  Kokkos::parallel_for(
      "kfmm::sort::merge_displaced", Kokkos::RangePolicy<ExecutionSpace>(space, 0, blocks),
      KOKKOS_LAMBDA(std::size_t b) {
        // Whether displaced key j comes before rest key p.
        auto const before = [&](std::size_t j, std::size_t p) {
          std::uint64_t const key = moved_keys(j), rest = rest_keys(p);
          return key < rest || (key == rest && moved_index(order(j)) < rest_index(p));
        };
        std::size_t const first = b * block, last = first + block < r ? first + block : r;
        // The first block also takes the displaced keys before every rest key.
        std::size_t j =
            b > 0 ? partition_point(std::size_t(0), m, [&](std::size_t k) { return before(k, first); }) : 0;
        std::size_t const end =
            last < r ? partition_point(j, m, [&](std::size_t k) { return before(k, last); }) : m;
        std::size_t out = first + j;
        for (std::size_t p = first; p < last; ++p) {
          for (; j < end && before(j, p); ++j, ++out) {
            keys(out) = moved_keys(j);
            permutation(out) = static_cast<Out>(moved_index(order(j)));
          }
          keys(out) = rest_keys(p);
          permutation(out) = static_cast<Out>(rest_index(p));
          ++out;
        }
        for (; j < end; ++j, ++out) {
          keys(out) = moved_keys(j);
          permutation(out) = static_cast<Out>(moved_index(order(j)));
        }
      });
}

}  // namespace kfmm::detail
