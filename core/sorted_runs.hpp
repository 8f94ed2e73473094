#pragma once
/// \file
/// \brief Kernels that sort keys which are a few sorted runs one after another (a rank's own
/// sorted particles and those received from each partner, in rank order) faster than a full
/// radix sort, with the same result: the stable order, ties by original index.
///
/// The run starts are found, then every key's output slot is its rank in its run plus, per
/// other run, the number of that run's keys before it, searched only in the window that the
/// key's block of its run spans (one slot, no search, where runs do not interleave).
///
/// Keys that are nearly sorted in another sense (a drifted step's keys: a few percent of
/// neighbouring keys descend, some jump far) take core/displaced_keys.hpp instead.
#include <kfmm/core/binary_search.hpp>
#include <kfmm/core/kokkos_compat.hpp>

#include <cstddef>
#include <cstdint>

namespace kfmm::detail {

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

/// Writes the positions i in [1, n) with keys(i) < keys(i − 1), where each sorted run but the
/// first starts, to starts(1), starts(2), … in no particular order (merge_sorted_runs orders
/// them); `count` (one entry, zero on entry) receives their number. For keys with few
/// descents: every descent takes an atomic.
template <class ExecutionSpace, class KeyView, class StartView, class CountView>
void find_run_starts(ExecutionSpace const& space, KeyView const& keys, std::size_t n, StartView const& starts,
                     CountView const& count) {
  using Index = typename CountView::non_const_value_type;
  std::size_t const room = starts.extent(0);
  if (n < 2) return;
  Kokkos::parallel_for(
      "kfmm::sort::find_run_starts", Kokkos::RangePolicy<ExecutionSpace>(space, 1, n), KOKKOS_LAMBDA(std::size_t i) {
        if (!(keys(i) < keys(i - 1))) return;
        std::size_t const slot = std::size_t(Kokkos::atomic_fetch_add(&count(0), Index(1))) + 1;
        if (slot < room) starts(slot) = static_cast<Index>(i);
      });
}

/// Orders the run starts and splits each run into blocks of `block` keys: begin(0) = 0,
/// begin(1 … runs − 1) = starts(1 … runs − 1) ascending (find_run_starts writes them in no
/// particular order), begin(runs) = n; first_block(r) = number of blocks of the runs before r
/// (first_block(runs): all blocks, at most n / block + runs).
template <class ExecutionSpace, class IndexView>
void order_run_starts(ExecutionSpace const& space, IndexView const& starts, int runs, std::size_t n,
                      std::size_t block, IndexView const& begin, IndexView const& first_block) {
  using Index = typename IndexView::non_const_value_type;
  Kokkos::parallel_for(
      "kfmm::sort::order_run_starts", Kokkos::RangePolicy<ExecutionSpace>(space, 0, 1), KOKKOS_LAMBDA(int) {
        begin(0) = 0;
        begin(runs) = static_cast<Index>(n);
        for (int r = 1; r < runs; ++r) {  // insertion sort of the few starts
          Index const start = starts(r);
          int at = r;
          while (at > 1 && begin(at - 1) > start) {
            begin(at) = begin(at - 1);
            --at;
          }
          begin(at) = start;
        }
        first_block(0) = 0;
        for (int r = 0; r < runs; ++r)
          first_block(r + 1) = first_block(r) + static_cast<Index>((begin(r + 1) - begin(r) + block - 1) / block);
      });
}

/// The run that holds position i (linear: runs are few); with each run's first block in place
/// of its start, the run that holds block i.
template <class IndexView>
KOKKOS_INLINE_FUNCTION int run_of(IndexView const& begin, std::size_t i) {
  int r = 0;
  while (i >= std::size_t(begin(r + 1))) ++r;
  return r;
}

/// The first position in the sorted keys[low, high) whose key is not before `key`: keys < key
/// come before it, and equal keys too when `with_equal`.
template <class KeyView>
KOKKOS_INLINE_FUNCTION std::size_t keys_before(KeyView const& keys, std::size_t low, std::size_t high,
                                               std::uint64_t key, bool with_equal) {
  return with_equal ? upper_bound(keys, low, high, key) : lower_bound(keys, low, high, key);
}

/// For every block (order_run_starts) and every other run r: the window [low, high) of run r
/// that holds every key of run r between the block's first and last key, at
/// windows((block·runs + r)·2) and the next entry. Returns the binary-search steps the merge
/// will take (per key, the sum over other runs of log2 of their window): runs that interleave
/// little cost few.
template <class ExecutionSpace, class KeyView, class IndexView>
std::size_t find_run_windows(ExecutionSpace const& space, KeyView const& keys, std::size_t n, IndexView const& begin,
                             IndexView const& first_block, int runs, std::size_t block, IndexView const& windows) {
  using Index = typename IndexView::non_const_value_type;
  std::size_t const most_blocks = (n + block - 1) / block + std::size_t(runs);
  std::size_t steps = 0;
  Kokkos::parallel_reduce(
      "kfmm::sort::run_windows", Kokkos::RangePolicy<ExecutionSpace>(space, 0, most_blocks * std::size_t(runs)),
      KOKKOS_LAMBDA(std::size_t j, std::size_t & sum) {
        std::size_t const b = j / std::size_t(runs);
        int const r = static_cast<int>(j % std::size_t(runs));
        if (b >= std::size_t(first_block(runs))) return;
        int const own = run_of(first_block, b);
        if (own == r) return;
        std::size_t const first = std::size_t(begin(own)) + (b - std::size_t(first_block(own))) * block;
        std::size_t const last = first + block < std::size_t(begin(own + 1)) ? first + block : begin(own + 1);
        std::uint64_t const smallest = keys(first), largest = keys(last - 1);
        std::size_t const low = keys_before(keys, begin(r), begin(r + 1), smallest, false);
        std::size_t const end = keys_before(keys, low, begin(r + 1), largest, true);
        windows(2 * j) = static_cast<Index>(low);
        windows(2 * j + 1) = static_cast<Index>(end);
        std::size_t depth = 0;
        for (std::size_t width = end - low; width > 0; width >>= 1) ++depth;
        sum += (last - first) * depth;
      },
      steps);
  return steps;
}

/// Merges the `runs` sorted runs of keys[0, n) (begin, first_block: from order_run_starts;
/// windows: from find_run_windows with the same `block`) into out_keys / out_permutation,
/// stably: equal keys keep their input order. Each key's slot is its rank in its run plus, per
/// other run, the number of that run's keys before it, searched only in its block's window.
template <class ExecutionSpace, class KeyView, class IndexView>
void merge_sorted_runs(ExecutionSpace const& space, KeyView const& keys, std::size_t n, IndexView const& begin,
                       IndexView const& first_block, int runs, std::size_t block, IndexView const& windows,
                       KeyView const& out_keys, IndexView const& out_permutation) {
  using Index = typename IndexView::non_const_value_type;
  Kokkos::parallel_for(
      "kfmm::sort::merge_runs", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n), KOKKOS_LAMBDA(std::size_t i) {
        std::uint64_t const key = keys(i);
        int const own = run_of(begin, i);
        std::size_t at = i - std::size_t(begin(own));
        std::size_t const window = (std::size_t(first_block(own)) + at / block) * std::size_t(runs) * 2;
        for (int r = 0; r < runs; ++r) {
          if (r == own) continue;
          // Keys of earlier runs equal to this one come first (stable), of later runs after.
          at += keys_before(keys, windows(window + 2 * r), windows(window + 2 * r + 1), key, r < own) -
                std::size_t(begin(r));
        }
        out_keys(at) = key;
        out_permutation(at) = static_cast<Index>(i);
      });
}

}  // namespace kfmm::detail
