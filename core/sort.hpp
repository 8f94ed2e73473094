#pragma once
/// \file
/// \brief Portable, stable, deterministic O(N) sort of 64-bit keys with their permutation
/// (least-significant-digit radix sort on parallel_for + parallel_scan), and permutation of
/// particle fields into key order.
#include <kfmm/core/displaced_keys.hpp>
#include <kfmm/core/error.hpp>
#include <kfmm/core/huge_pages.hpp>
#include <kfmm/core/kernel_shape.hpp>
#include <kfmm/core/particles.hpp>
#include <kfmm/core/sorted_runs.hpp>
#include <kfmm/core/types.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

namespace kfmm {

/// \brief Team shape of the GPU-shaped radix sort (KeySorter::sort_teams): a team sorts a block
/// of team_size × keys_per_thread consecutive keys, each thread a contiguous chunk of
/// keys_per_thread keys. 0 lets the execution space choose (GPUs: 64 threads × 32 keys; host
/// backends: one thread per team, chunks long enough that there are about four blocks per
/// thread). The sorted order does not depend on the shape.
struct SortTeamShape {
  int team_size = 0;
  int keys_per_thread = 0;
};

namespace detail {

/// Element (i, c) of a rank-1 (c ignored) or rank-2 View, so one kernel serves both.
template <class View>
KOKKOS_INLINE_FUNCTION typename View::reference_type element(View const& view, std::size_t i, std::size_t c) {
  if constexpr (View::rank == 1) {
    (void)c;
    return view(i);
  } else {
    return view(i, c);
  }
}

/// Number of columns of a rank-1 (1) or rank-2 View.
template <class View>
std::size_t columns(View const& view) {
  static_assert(View::rank == 1 || View::rank == 2, "only rank-1 and rank-2 Views are supported");
  return View::rank == 1 ? 1 : view.extent(1);
}

// Radix sort with 8-bit digits.
inline constexpr int radix_digit_bits = 8;
inline constexpr std::size_t radix = std::size_t(1) << radix_digit_bits;
inline constexpr std::uint64_t radix_digit_mask = radix - 1;

KOKKOS_INLINE_FUNCTION std::size_t radix_digit(std::uint64_t key, int shift) {
  return static_cast<std::size_t>((key >> shift) & radix_digit_mask);
}

/// Consecutive blocks of keys: block b covers [b·length, min(n, (b+1)·length)).
struct RadixBlocks {
  std::size_t n = 0, count = 0, length = 0;

  KOKKOS_INLINE_FUNCTION std::size_t begin(std::size_t block) const {
    std::size_t const b = block * length;
    return b < n ? b : n;
  }
  KOKKOS_INLINE_FUNCTION std::size_t end(std::size_t block) const { return begin(block + 1); }
};

/// Block-local digit counters of the team-shaped sort, in level-0 team scratch: 16 bits, as a
/// block holds at most 65535 keys, so that 64 threads × 256 digits take 32 KiB.
using RadixCounter = std::uint16_t;
inline constexpr std::size_t radix_max_block_length = 65535;

template <class ExecutionSpace, class IndexView>
void radix_iota(ExecutionSpace const& space, IndexView const& permutation, std::size_t n) {
  using Index = typename IndexView::non_const_value_type;
  Kokkos::parallel_for(
      "kfmm::sort::iota", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t i) { permutation(i) = static_cast<Index>(i); });
}

/// Bits that differ between at least two of the first n keys.
template <class ExecutionSpace, class KeyView>
std::uint64_t radix_varying_bits(ExecutionSpace const& space, KeyView const& keys, std::size_t n) {
  std::uint64_t any = 0, all = ~std::uint64_t(0);
  Kokkos::parallel_reduce(
      "kfmm::sort::key_bits", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t i, std::uint64_t & or_update, std::uint64_t & and_update) {
        or_update |= keys(i);
        and_update &= keys(i);
      },
      Kokkos::BOr<std::uint64_t>(any), Kokkos::BAnd<std::uint64_t>(all));
  return any ^ all;
}

/// counts(digit · blocks + block) becomes the exclusive prefix sum in that (digit, block) order:
/// the first output position of the block's keys with that digit.
template <class ExecutionSpace, class IndexView>
void radix_scan_counts(ExecutionSpace const& space, IndexView const& counts, std::size_t size) {
  using Index = typename IndexView::non_const_value_type;
  Kokkos::parallel_scan(
      "kfmm::sort::scan_counts", Kokkos::RangePolicy<ExecutionSpace>(space, 0, size),
      KOKKOS_LAMBDA(std::size_t i, Index & partial, bool final) {
        Index const count = counts(i);
        if (final) counts(i) = partial;
        partial += count;
      });
}

// ---- CPU shape: one thread per block, a private 256-entry counter array ----

template <class ExecutionSpace, class KeyView, class IndexView>
void radix_count_blocks(ExecutionSpace const& space, KeyView const& keys, IndexView const& counts,
                        RadixBlocks const blocks, int shift) {
  using Index = typename IndexView::non_const_value_type;
  Kokkos::parallel_for(
      "kfmm::sort::count_digits", Kokkos::RangePolicy<ExecutionSpace>(space, 0, blocks.count),
      KOKKOS_LAMBDA(std::size_t block) {
        Index local[radix] = {};
        for (std::size_t i = blocks.begin(block); i < blocks.end(block); ++i) ++local[radix_digit(keys(i), shift)];
        for (std::size_t digit = 0; digit < radix; ++digit) counts(digit * blocks.count + block) = local[digit];
      });
}

template <class ExecutionSpace, class KeyView, class IndexView>
void radix_scatter_blocks(ExecutionSpace const& space, KeyView const& source_keys, IndexView const& source_permutation,
                          KeyView const& target_keys, IndexView const& target_permutation, IndexView const& counts,
                          RadixBlocks const blocks, int shift) {
  using Index = typename IndexView::non_const_value_type;
  Kokkos::parallel_for(
      "kfmm::sort::scatter", Kokkos::RangePolicy<ExecutionSpace>(space, 0, blocks.count),
      KOKKOS_LAMBDA(std::size_t block) {
        Index next[radix];
        for (std::size_t digit = 0; digit < radix; ++digit) next[digit] = counts(digit * blocks.count + block);
        for (std::size_t i = blocks.begin(block); i < blocks.end(block); ++i) {
          std::uint64_t const key = source_keys(i);
          Index const at = next[radix_digit(key, shift)]++;
          target_keys(at) = key;
          target_permutation(at) = source_permutation(i);
        }
      });
}

// ---- GPU shape: a team per block, digit counters per (thread, digit) in level-0 scratch ----
//
// Thread t of a team owns the contiguous chunk [begin + t·C, begin + (t+1)·C) of its block and
// the counter column local(t·256 + digit). Counting needs no atomics; an exclusive prefix over
// the threads, per digit (one digit per thread of a TeamThreadRange, reading consecutive
// counters), gives every thread the block-local rank of its first key of each digit, so the
// scatter keeps the input order within a digit: the sort stays stable and deterministic.

template <class ExecutionSpace>
struct RadixTeams {
  using Policy = Kokkos::TeamPolicy<ExecutionSpace>;
  using Member = typename Policy::member_type;
  using Scratch = typename ExecutionSpace::scratch_memory_space;
  using Counters = Kokkos::View<RadixCounter*, Scratch, Kokkos::MemoryUnmanaged>;
};

/// Level-0 scratch bytes per team of the team-shaped sort.
template <class ExecutionSpace, class Index>
std::size_t radix_team_scratch_bytes(int team_size) {
  using Scratch = typename ExecutionSpace::scratch_memory_space;
  return Kokkos::View<RadixCounter*, Scratch, Kokkos::MemoryUnmanaged>::shmem_size(std::size_t(team_size) * radix) +
         Kokkos::View<Index*, Scratch, Kokkos::MemoryUnmanaged>::shmem_size(radix);
}

/// Zeroes the team's counters, then thread t counts the digits of its chunk into its column.
template <class Member, class Counters, class KeyView>
KOKKOS_INLINE_FUNCTION void radix_team_count(Member const& team, Counters const& local, KeyView const& keys,
                                             std::size_t chunk_begin, std::size_t chunk_end, int shift) {
  int const threads = team.team_size();
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, threads * int(radix)), [&](int j) { local(j) = 0; });
  team.team_barrier();
  std::size_t const column = std::size_t(team.team_rank()) * radix;
  for (std::size_t i = chunk_begin; i < chunk_end; ++i) ++local(column + radix_digit(keys(i), shift));
  team.team_barrier();
}

template <class ExecutionSpace, class KeyView, class IndexView>
void radix_count_teams(ExecutionSpace const& space, KeyView const& keys, IndexView const& counts,
                       RadixBlocks const blocks, int team_size, int chunk, int shift) {
  using Index = typename IndexView::non_const_value_type;
  using Teams = RadixTeams<ExecutionSpace>;
  using Counters = typename Teams::Counters;
  std::size_t const bytes = radix_team_scratch_bytes<ExecutionSpace, Index>(team_size);
  Kokkos::parallel_for(
      "kfmm::sort::count_digits_teams",
      typename Teams::Policy(space, int(blocks.count), team_size).set_scratch_size(0, Kokkos::PerTeam(bytes)),
      KOKKOS_LAMBDA(typename Teams::Member const& team) {
        std::size_t const block = team.league_rank();
        Counters local(team.team_scratch(0), std::size_t(team.team_size()) * radix);
        std::size_t const first = blocks.begin(block), last = blocks.end(block);
        std::size_t const chunk_begin = first + std::size_t(team.team_rank()) * chunk;
        std::size_t const chunk_end = chunk_begin + chunk < last ? chunk_begin + chunk : last;
        radix_team_count(team, local, keys, chunk_begin < last ? chunk_begin : last, chunk_end, shift);
        int const threads = team.team_size();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, int(radix)), [&](int digit) {
          Index sum = 0;
          for (int t = 0; t < threads; ++t) sum += local(std::size_t(t) * radix + digit);
          counts(digit * blocks.count + block) = sum;
        });
      });
}

template <class ExecutionSpace, class KeyView, class IndexView>
void radix_scatter_teams(ExecutionSpace const& space, KeyView const& source_keys, IndexView const& source_permutation,
                         KeyView const& target_keys, IndexView const& target_permutation, IndexView const& counts,
                         RadixBlocks const blocks, int team_size, int chunk, int shift) {
  using Index = typename IndexView::non_const_value_type;
  using Teams = RadixTeams<ExecutionSpace>;
  using Counters = typename Teams::Counters;
  using Bases = Kokkos::View<Index*, typename Teams::Scratch, Kokkos::MemoryUnmanaged>;
  std::size_t const bytes = radix_team_scratch_bytes<ExecutionSpace, Index>(team_size);
  Kokkos::parallel_for(
      "kfmm::sort::scatter_teams",
      typename Teams::Policy(space, int(blocks.count), team_size).set_scratch_size(0, Kokkos::PerTeam(bytes)),
      KOKKOS_LAMBDA(typename Teams::Member const& team) {
        std::size_t const block = team.league_rank();
        int const threads = team.team_size();
        Counters local(team.team_scratch(0), std::size_t(threads) * radix);
        Bases base(team.team_scratch(0), radix);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, int(radix)),
                             [&](int digit) { base(digit) = counts(digit * blocks.count + block); });
        std::size_t const first = blocks.begin(block), last = blocks.end(block);
        std::size_t chunk_begin = first + std::size_t(team.team_rank()) * chunk;
        if (chunk_begin > last) chunk_begin = last;
        std::size_t const chunk_end = chunk_begin + chunk < last ? chunk_begin + chunk : last;
        radix_team_count(team, local, source_keys, chunk_begin, chunk_end, shift);
        // Per digit, exclusive prefix over the threads: rank of each thread's first key of that
        // digit within the block.
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, int(radix)), [&](int digit) {
          RadixCounter sum = 0;
          for (int t = 0; t < threads; ++t) {
            RadixCounter const count = local(std::size_t(t) * radix + digit);
            local(std::size_t(t) * radix + digit) = sum;
            sum = static_cast<RadixCounter>(sum + count);
          }
        });
        team.team_barrier();
        RadixCounter* const rank = local.data() + std::size_t(team.team_rank()) * radix;
        Index const* const first_position = base.data();
        for (std::size_t i = chunk_begin; i < chunk_end; ++i) {
          std::uint64_t const key = source_keys(i);
          std::size_t const digit = radix_digit(key, shift);
          Index const at = first_position[digit] + rank[digit];
          rank[digit] = static_cast<RadixCounter>(rank[digit] + 1);
          target_keys(at) = key;
          target_permutation(at) = source_permutation(i);
        }
      });
}

/// Rows [0, n) of `view` reordered so that row i becomes the old row permutation[i], one
/// column at a time through `buffer` (n 8-byte words): the gather and the copy back are both
/// contiguous per column, and nothing is allocated.
template <class ExecutionSpace, class PermutationView, class View, class Buffer>
void apply_permutation_through(ExecutionSpace const& space, PermutationView const& permutation, View const& view,
                               std::size_t n, Buffer const& buffer) {
  using Value = typename View::non_const_value_type;
  static_assert(sizeof(Value) <= sizeof(typename Buffer::value_type) &&
                    alignof(Value) <= alignof(typename Buffer::value_type),
                "the buffer words must hold one field value");
  static_assert(std::is_trivially_copyable<Value>::value, "fields must be trivially copyable");
  Kokkos::View<Value*, typename View::memory_space, Kokkos::MemoryUnmanaged> column_copy(
      reinterpret_cast<Value*>(buffer.data()), n);
  std::size_t const width = columns(view);
  for (std::size_t c = 0; c < width; ++c) {
    Kokkos::parallel_for(
        "kfmm::sort::gather_column", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
        KOKKOS_LAMBDA(std::size_t i) { column_copy(i) = element(view, permutation(i), c); });
    Kokkos::parallel_for(
        "kfmm::sort::copy_back_column", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
        KOKKOS_LAMBDA(std::size_t i) { element(view, i, c) = column_copy(i); });
  }
}

/// \brief Source windows of the cache-blocked permutation: rows [w·2^shift, (w+1)·2^shift) form
/// window w, at most `radix` windows. A random gather of a column that exceeds the caches (and
/// the TLB's reach) misses on nearly every row; visiting the destination rows by source window
/// keeps the random reads inside one window at a time.
struct PermutationWindows {
  int shift = 0;
  std::size_t count = 0;
};

/// Below this many rows a column (8 bytes per row) fits the caches and the plain gather wins.
inline constexpr std::size_t blocked_permutation_min_rows = std::size_t(1) << 18;
/// Smallest window: 2^15 rows, 256 KiB of an 8-byte column.
inline constexpr int permutation_min_window_shift = 15;

/// Windows for n rows: at least 2^permutation_min_window_shift rows each (or `shift` when > 0),
/// widened until there are at most `radix` of them.
inline PermutationWindows permutation_windows(std::size_t n, int shift = 0) {
  PermutationWindows w;
  w.shift = shift > 0 ? shift : permutation_min_window_shift;
  while (((n + (std::size_t(1) << w.shift) - 1) >> w.shift) > radix) ++w.shift;
  w.count = (n + (std::size_t(1) << w.shift) - 1) >> w.shift;
  return w;
}

/// Whether more than one in eight of the rows (sampled, about 2^16 of them) come from more
/// than a smallest window away: only then does the blocked permutation pay for its plan (a
/// nearly sorted input, as the solver's after its first step, gathers almost in order anyway).
template <class ExecutionSpace, class PermutationView>
bool scattered_permutation(ExecutionSpace const& space, PermutationView const& permutation, std::size_t n) {
  std::size_t const stride = n >> 16 > 0 ? n >> 16 : 1;
  std::size_t const samples = (n + stride - 1) / stride;
  std::size_t const near = std::size_t(1) << permutation_min_window_shift;
  std::size_t far = 0;
  Kokkos::parallel_reduce(
      "kfmm::sort::sample_permutation", Kokkos::RangePolicy<ExecutionSpace>(space, 0, samples),
      KOKKOS_LAMBDA(std::size_t s, std::size_t & count) {
        std::size_t const i = s * stride, from = permutation(i);
        count += (from > i ? from - i : i - from) >= near ? 1 : 0;
      },
      far);
  return 8 * far > samples;
}

/// \brief Plan of the blocked permutation (a stable counting sort of the destination rows by
/// the window of their source row): slots are grouped by source window, ascending destination
/// within a window; source(j) is the source row of slot j and slot(i) the slot that destination
/// row i reads. counts needs radix × blocks.count entries (the radix sort's digit counts).
template <class ExecutionSpace, class PermutationView, class IndexView>
void plan_blocked_permutation(ExecutionSpace const& space, PermutationView const& permutation, IndexView const& source,
                              IndexView const& slot, IndexView const& counts, RadixBlocks const blocks,
                              PermutationWindows const windows) {
  using Index = typename IndexView::non_const_value_type;
  int const shift = windows.shift;
  radix_count_blocks(space, permutation, counts, blocks, shift);
  radix_scan_counts(space, counts, radix * blocks.count);
  Kokkos::parallel_for(
      "kfmm::sort::plan_blocked_permutation", Kokkos::RangePolicy<ExecutionSpace>(space, 0, blocks.count),
      KOKKOS_LAMBDA(std::size_t block) {
        Index next[radix];
        for (std::size_t w = 0; w < radix; ++w) next[w] = counts(w * blocks.count + block);
        for (std::size_t i = blocks.begin(block); i < blocks.end(block); ++i) {
          std::size_t const from = permutation(i);
          Index const at = next[radix_digit(from, shift)]++;
          source(at) = static_cast<Index>(from);
          slot(i) = at;
        }
      });
}

/// Rows [0, n) of `view` reordered by a planned blocked permutation, one column at a time
/// through `buffer`: the gather into the slots reads one source window at a time and writes
/// in order; the copy back reads at most `radix` ascending streams of slots and writes in order.
template <class ExecutionSpace, class IndexView, class View, class Buffer>
void apply_blocked_permutation_through(ExecutionSpace const& space, IndexView const& source, IndexView const& slot,
                                       View const& view, std::size_t n, Buffer const& buffer) {
  using Value = typename View::non_const_value_type;
  static_assert(sizeof(Value) <= sizeof(typename Buffer::value_type) &&
                    alignof(Value) <= alignof(typename Buffer::value_type),
                "the buffer words must hold one field value");
  static_assert(std::is_trivially_copyable<Value>::value, "fields must be trivially copyable");
  Kokkos::View<Value*, typename View::memory_space, Kokkos::MemoryUnmanaged> slots(
      reinterpret_cast<Value*>(buffer.data()), n);
  std::size_t const width = columns(view);
  for (std::size_t c = 0; c < width; ++c) {
    Kokkos::parallel_for(
        "kfmm::sort::gather_windows", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
        KOKKOS_LAMBDA(std::size_t j) { slots(j) = element(view, source(j), c); });
    Kokkos::parallel_for(
        "kfmm::sort::copy_back_slots", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
        KOKKOS_LAMBDA(std::size_t i) { element(view, i, c) = slots(slot(i)); });
  }
}

}  // namespace detail

/// \brief Sorts keys with their permutation and keeps its scratch Views between calls
/// (they grow on demand), so a solver that sorts every step does not reallocate.
///
/// Radix sort with 8-bit digits: per pass, each block of consecutive keys counts its digits,
/// one exclusive scan over the (digit, block) counts gives every block its output offsets,
/// and each block scatters its keys in order. That makes the sort stable, and the result is
/// the unique stable order, whatever the number of blocks, threads or the kernel shape. Passes
/// whose digit is the same in every key (found from the OR and AND of all keys) are skipped.
///
/// Two kernel shapes, chosen by use_gpu_shape<ExecutionSpace>(): sort_blocks (CPUs: one
/// thread per block with a private 256-entry counter array) and sort_teams (GPUs: a team per
/// block, counters in team scratch). Both are public so that tests run both on any backend.
template <class Memory = MemorySpace, class Index = std::uint32_t>
class KeySorter {
 public:
  using memory_space = Memory;
  using index_type = Index;
  using KeyView = Kokkos::View<std::uint64_t*, Memory>;
  using IndexView = Kokkos::View<Index*, Memory>;
  static_assert(std::is_integral<Index>::value && std::is_unsigned<Index>::value,
                "the permutation index must be an unsigned integer type");

  /// \brief Sorts `keys[0, n)` ascending and stably in place; afterwards `permutation[i]` is the
  /// original index of the i-th sorted key. Throws kfmm::Error when a View is shorter than `n`
  /// or `Index` cannot count to `n`. Returns false when the keys were sorted already (the
  /// permutation is then the identity: nothing to permute).
  ///
  /// Input in the previous step's key order is the common case (a solver re-sorting drifted
  /// particles): sorted keys cost one check; a few sorted runs that interleave little (a
  /// rank's particles after a redistribution) are merged (sort_runs); drifted keys (more
  /// descents, but at most one in displaced_descent_spacing) have their few displaced keys
  /// sorted on their own and merged in (sort_displaced); anything else, or what those paths
  /// decline, takes the radix passes.
  template <class ExecutionSpace>
  bool sort(ExecutionSpace const& space, KeyView const& keys, IndexView const& permutation, std::size_t n) {
    check_arguments(keys, permutation, n);
    std::size_t const descents = detail::count_descents(space, keys, n);
    if (descents == 0) {
      detail::radix_iota(space, permutation, n);
      return false;
    }
    // Sized whichever path this call takes: a later step whose keys drifted allocates nothing.
    grow_displaced(space, n);
    // A few runs that sort_runs() declines interleave everywhere: too many keys are displaced
    // for sort_displaced().
    if (descents < std::size_t(merge_runs_largest)) {
      if (sort_runs(space, keys, permutation, n, int(descents) + 1)) return true;
    } else if (descents <= n / displaced_descent_spacing && sort_displaced(space, keys, permutation, n)) {
      return true;
    }
    radix_sort(space, keys, permutation, n);
    return true;
  }

  /// The radix sort in the shape chosen for ExecutionSpace (sort_blocks or sort_teams).
  template <class ExecutionSpace>
  void radix_sort(ExecutionSpace const& space, KeyView const& keys, IndexView const& permutation, std::size_t n) {
    if constexpr (!gpu_shaped_kernels<ExecutionSpace>())
      if (!use_gpu_shape<ExecutionSpace>()) return sort_blocks(space, keys, permutation, n);
    sort_teams(space, keys, permutation, n);
  }

  /// Keys with at most one descent in this many may take sort_displaced().
  static constexpr std::size_t displaced_descent_spacing = 8;

  /// sort_displaced() declines when more than one key in this many is displaced.
  static constexpr std::size_t displaced_key_spacing = 8;

  /// sort_displaced() declines when the undisplaced keys still descend after this many rounds
  /// of marking.
  static constexpr int displaced_rounds = 8;

  /// \brief sort() of keys that are sorted but for a few displaced ones (see
  /// core/displaced_keys.hpp): the displaced keys are marked, radix sorted on their own and
  /// merged into the rest. False, with keys untouched, when more than one key in
  /// displaced_key_spacing is displaced or marking does not settle in displaced_rounds.
  /// Public for tests: the result equals sort_blocks()'s.
  template <class ExecutionSpace>
  bool sort_displaced(ExecutionSpace const& space, KeyView const& keys, IndexView const& permutation, std::size_t n) {
    check_arguments(keys, permutation, n);
    if (n < 2) {
      detail::radix_iota(space, permutation, n);
      return true;
    }
    std::size_t const room = grow_displaced(space, n);
    // The undisplaced keys live in the radix scratch past the `room` rows that the radix sort of
    // the displaced keys uses.
    auto const past_room = Kokkos::make_pair(room, room + n);
    KeyView const rest_keys = Kokkos::subview(keys_scratch_, past_room);
    IndexView const rest_index = Kokkos::subview(permutation_scratch_, past_room);
    // slots_ holds the marks, by original index.
    auto const slots = Kokkos::subview(slots_, Kokkos::make_pair(std::size_t(0), n));
    Kokkos::deep_copy(space, slots, Index(0));
    std::size_t reach = detail::displaced_reach;
    detail::mark_displaced(space, keys, rest_index, true, n, reach, slots_);
    std::size_t moved = 0;
    for (int round = 1;; ++round) {
      moved = detail::split_displaced(space, keys, n, slots_, rest_keys, rest_index, moved_keys_, moved_index_, room);
      if (moved > room) return false;
      if (detail::count_descents(space, rest_keys, n - moved) == 0) break;
      if (round == displaced_rounds) return false;
      reach *= 4;
      detail::mark_displaced(space, rest_keys, rest_index, false, n - moved, reach, slots_);
    }
    radix_sort(space, moved_keys_, moved_order_, moved);
    detail::merge_displaced(space, moved_keys_, moved_index_, moved_order_, moved, rest_keys, rest_index, n - moved,
                            keys, permutation);
    return true;
  }

  /// Keys that are at most this many sorted runs (a rank's own particles and those received
  /// from its partners) may take sort_runs().
  static constexpr int merge_runs_largest = 32;

  /// sort_runs() merges when its binary searches take at most this many steps per key on
  /// average (runs that interleave little); more interleaved runs go to the radix sort.
  static constexpr std::size_t merge_runs_steps_per_key = 4;

  /// \brief sort() of keys that are `runs` (≤ merge_runs_largest, from count_descents) sorted
  /// runs one after another (see core/sorted_runs.hpp): the run starts are found, each block of a
  /// run finds the window of every other run it interleaves with, and one pass merges. False,
  /// with keys untouched, when the runs interleave too much for that to pay.
  /// Public for tests: the result equals sort_blocks()'s.
  template <class ExecutionSpace>
  bool sort_runs(ExecutionSpace const& space, KeyView const& keys, IndexView const& permutation, std::size_t n,
                 int runs) {
    check_arguments(keys, permutation, n);
    if (runs < 1 || runs > merge_runs_largest)
      fail("sort_runs: {} runs, expected 1 to {}; sort() chooses the path from the keys' descents", runs,
           merge_runs_largest);
    auto const alloc = [&](std::string const& label) {
      return Kokkos::view_alloc(space, Kokkos::WithoutInitializing, label);
    };
    std::size_t const block = merge_runs_block;
    // Sized for the most runs: a later call with more runs then allocates nothing.
    std::size_t const most = std::size_t(merge_runs_largest);
    std::size_t const table = ((n + block - 1) / block + most) * most * 2;
    std::size_t const starts = std::size_t(merge_runs_largest) + 1;
    if (run_starts_.extent(0) < starts) {
      run_starts_ = IndexView(alloc("kfmm::sort::run_starts"), starts);
      run_begin_ = IndexView(alloc("kfmm::sort::run_begin"), starts);
      run_first_block_ = IndexView(alloc("kfmm::sort::run_first_block"), starts);
      run_count_ = IndexView(alloc("kfmm::sort::run_count"), 1);
    }
    if (run_windows_.extent(0) < table)
      run_windows_ = allocate_kept<IndexView>("kfmm::sort::run_windows", with_slack(table));
    Kokkos::deep_copy(space, run_count_, Index(0));
    detail::find_run_starts(space, keys, n, Kokkos::subview(run_starts_, Kokkos::make_pair(0, runs)), run_count_);
    detail::order_run_starts(space, run_starts_, runs, n, block, run_begin_, run_first_block_);
    std::size_t const steps =
        detail::find_run_windows(space, keys, n, run_begin_, run_first_block_, runs, block, run_windows_);
    if (steps > merge_runs_steps_per_key * n) return false;
    grow_scratch(space, n, 1);
    detail::merge_sorted_runs(space, keys, n, run_begin_, run_first_block_, runs, block, run_windows_, keys_scratch_,
                              permutation_scratch_);
    auto const range = Kokkos::make_pair(std::size_t(0), n);
    Kokkos::deep_copy(space, Kokkos::subview(keys, range), Kokkos::subview(keys_scratch_, range));
    Kokkos::deep_copy(space, Kokkos::subview(permutation, range), Kokkos::subview(permutation_scratch_, range));
    return true;
  }

  /// The keys' scratch as the sorts grew it (tests check where its memory lives).
  KeyView const& key_scratch() const { return keys_scratch_; }

  /// Input keys per window block of sort_runs().
  static constexpr std::size_t merge_runs_block = 1024;

  /// sort() with the CPU-shaped kernels: a few long blocks, one thread each.
  template <class ExecutionSpace>
  void sort_blocks(ExecutionSpace const& space, KeyView const& keys, IndexView const& permutation, std::size_t n) {
    if (!start(space, keys, permutation, n)) return;
    blocks_passes(space, keys, permutation, n);
  }

  /// sort() with the GPU-shaped kernels (see SortTeamShape); the result is the same.
  template <class ExecutionSpace>
  void sort_teams(ExecutionSpace const& space, KeyView const& keys, IndexView const& permutation, std::size_t n,
                  SortTeamShape shape = {}) {
    if (!start(space, keys, permutation, n)) return;
    teams_passes(space, keys, permutation, n, shape);
  }

  // The radix passes of either shape over keys[0, n) carrying `permutation` as it is (the
  // sort's stable order is that of the permutation's entries for equal keys). Public only as
  // nvcc allows device lambdas in public member functions only.
  template <class ExecutionSpace>
  void blocks_passes(ExecutionSpace const& space, KeyView const& keys, IndexView const& permutation, std::size_t n) {
    detail::RadixBlocks const blocks = cpu_blocks(space, n);
    run_passes(
        space, keys, permutation, blocks,
        [&](int shift, auto const&... views) { detail::radix_count_blocks(space, views..., blocks, shift); },
        [&](int shift, auto const&... views) { detail::radix_scatter_blocks(space, views..., blocks, shift); });
  }

  template <class ExecutionSpace>
  void teams_passes(ExecutionSpace const& space, KeyView const& keys, IndexView const& permutation, std::size_t n,
                    SortTeamShape shape) {
    int const team_size = shape.team_size > 0 ? shape.team_size : compat::is_gpu_backend<ExecutionSpace>() ? 64 : 1;
    std::size_t chunk = shape.keys_per_thread;
    if (chunk == 0) {
      std::size_t const threads = 4 * std::size_t(compat::concurrency(space));
      std::size_t const per_thread = (n + threads - 1) / threads;
      chunk = compat::is_gpu_backend<ExecutionSpace>() ? 32 : (per_thread + team_size - 1) / team_size;
      std::size_t const largest = detail::radix_max_block_length / team_size;
      chunk = chunk < 1 ? 1 : chunk > largest ? largest : chunk;
    }
    if (std::size_t(team_size) * chunk > detail::radix_max_block_length)
      fail("sort_teams: team_size {} × keys_per_thread {} exceeds the {} keys a team's 16-bit counters can rank; "
           "use fewer keys per thread",
           team_size, chunk, detail::radix_max_block_length);
    detail::RadixBlocks blocks;
    blocks.n = n;
    blocks.length = team_size * chunk;
    blocks.count = (n + blocks.length - 1) / blocks.length;
    int const keys_per_thread = static_cast<int>(chunk);
    run_passes(
        space, keys, permutation, blocks,
        [&](int shift, auto const&... views) {
          detail::radix_count_teams(space, views..., blocks, team_size, keys_per_thread, shift);
        },
        [&](int shift, auto const&... views) {
          detail::radix_scatter_teams(space, views..., blocks, team_size, keys_per_thread, shift);
        });
  }

  /// \brief Reorders every field of the `num` valid particles like kfmm::permute() (particle i
  /// becomes the old particle `permutation[i]`), one column at a time through the sorter's key
  /// scratch: 8 bytes per particle that the sorter keeps anyway, nothing allocated once grown.
  /// From blocked_permutation_min_rows particles on CPU backends, when the permutation moves
  /// rows far (detail::scattered_permutation), it takes permute_blocked(): the same result. GPUs
  /// keep the plain gather (many loads in flight hide its latency; the plan's 256 counters per
  /// thread are a CPU shape).
  template <class ExecutionSpace>
  void permute(ExecutionSpace const& space, Particles<Memory>& particles, IndexView const& permutation) {
    std::size_t const n = particles.num;
    check_permutation(permutation, n);
    if (permutes_blocked(space, permutation, n)) return permute_blocked(space, particles, permutation);
    grow_scratch(space, n, 0);
    detail::apply_permutation_through(space, permutation, particles.pos, n, keys_scratch_);
    detail::apply_permutation_through(space, permutation, particles.vel, n, keys_scratch_);
    detail::apply_permutation_through(space, permutation, particles.mass, n, keys_scratch_);
    detail::apply_permutation_through(space, permutation, particles.id, n, keys_scratch_);
  }

  /// Whether permute() takes permute_blocked() for the first `n` entries of `permutation`.
  template <class ExecutionSpace>
  static bool permutes_blocked(ExecutionSpace const& space, IndexView const& permutation, std::size_t n) {
    return n >= detail::blocked_permutation_min_rows && !use_gpu_shape<ExecutionSpace>() &&
           detail::scattered_permutation(space, permutation, n);
  }

  /// \brief permute() visiting the rows by source window (detail::PermutationWindows; windows of
  /// 2^window_shift rows when > 0, for tests): the random reads stay inside a cache- and
  /// TLB-sized window. Costs a plan (a counting sort of the rows by window) and 4 more bytes per
  /// particle of scratch; pays off when the columns exceed the caches and the permutation is
  /// far from the identity. Bit-identical to permute().
  template <class ExecutionSpace>
  void permute_blocked(ExecutionSpace const& space, Particles<Memory>& particles, IndexView const& permutation,
                       int window_shift = 0) {
    std::size_t const n = particles.num;
    check_permutation(permutation, n);
    if (n == 0) return;
    detail::RadixBlocks blocks = cpu_blocks(space, n);
    grow_scratch(space, n, detail::radix * blocks.count);
    if (slots_.extent(0) < n)
      slots_ = allocate_kept<IndexView>("kfmm::sort::permutation_slots", with_slack(n));
    detail::plan_blocked_permutation(space, permutation, permutation_scratch_, slots_, counts_, blocks,
                                     detail::permutation_windows(n, window_shift));
    detail::apply_blocked_permutation_through(space, permutation_scratch_, slots_, particles.pos, n, keys_scratch_);
    detail::apply_blocked_permutation_through(space, permutation_scratch_, slots_, particles.vel, n, keys_scratch_);
    detail::apply_blocked_permutation_through(space, permutation_scratch_, slots_, particles.mass, n, keys_scratch_);
    detail::apply_blocked_permutation_through(space, permutation_scratch_, slots_, particles.id, n, keys_scratch_);
  }

 private:
  KeyView keys_scratch_;
  IndexView permutation_scratch_;
  IndexView counts_;  // counts_(digit * blocks + block), then their exclusive scan
  IndexView slots_;   // permute_blocked: the slot each destination row reads; sort_displaced: the marks
  // sort_displaced: the displaced keys, their original indices and their sorted order.
  KeyView moved_keys_;
  IndexView moved_index_, moved_order_;
  // sort_runs: the run starts (but the first) as found, their count, the ordered starts, each
  // run's first block and every block's window in every other run.
  IndexView run_starts_, run_count_, run_begin_, run_first_block_, run_windows_;

  static void check_permutation(IndexView const& permutation, std::size_t n) {
    if (permutation.extent(0) < n)
      fail("permute: the permutation ({} entries) is shorter than the {} particles", permutation.extent(0), n);
  }

  // Blocks of the CPU-shaped kernels: enough to keep every thread busy, each long enough to
  // amortise its 256 counters.
  template <class ExecutionSpace>
  static detail::RadixBlocks cpu_blocks(ExecutionSpace const& space, std::size_t n) {
    std::size_t const min_block_length = 256;
    std::size_t const by_length = (n + min_block_length - 1) / min_block_length;
    std::size_t const by_threads = 4 * std::size_t(compat::concurrency(space));
    detail::RadixBlocks blocks;
    blocks.n = n;
    blocks.count = by_length < by_threads ? by_length : by_threads;
    blocks.length = (n + blocks.count - 1) / blocks.count;
    return blocks;
  }

  // Checks the arguments and writes the identity permutation; false when there is nothing to sort.
  template <class ExecutionSpace>
  bool start(ExecutionSpace const& space, KeyView const& keys, IndexView const& permutation, std::size_t n) {
    check_arguments(keys, permutation, n);
    detail::radix_iota(space, permutation, n);
    return n >= 2;
  }

  static void check_arguments(KeyView const& keys, IndexView const& permutation, std::size_t n) {
    if (keys.extent(0) < n || permutation.extent(0) < n)
      fail("sort_by_key: n = {} exceeds the keys ({}) or permutation ({}) extent; allocate at least n entries", n,
           keys.extent(0), permutation.extent(0));
    if (n > std::size_t(std::numeric_limits<Index>::max()))
      fail("sort_by_key: n = {} keys do not fit the {}-byte permutation index (max {}); use a std::size_t "
           "permutation",
           n, sizeof(Index), std::numeric_limits<Index>::max());
  }

  // sort_displaced()'s scratch for n keys (the radix scratch holds the undisplaced keys past
  // the room for the displaced ones); returns the most keys it may displace.
  template <class ExecutionSpace>
  std::size_t grow_displaced(ExecutionSpace const& space, std::size_t n) {
    std::size_t const room = n / displaced_key_spacing + 1;
    grow_scratch(space, n + room, 1);
    if (slots_.extent(0) < n) slots_ = allocate_kept<IndexView>("kfmm::sort::permutation_slots", with_slack(n));
    if (moved_keys_.extent(0) < room) {
      moved_keys_ = allocate_kept<KeyView>("kfmm::sort::moved_keys", with_slack(room));
      moved_index_ = allocate_kept<IndexView>("kfmm::sort::moved_index", with_slack(room));
      moved_order_ = allocate_kept<IndexView>("kfmm::sort::moved_order", with_slack(room));
    }
    return room;
  }

  // Scratch is kept between calls and grows with slack, so that a solver whose particle count
  // drifts a little from step to step does not reallocate.
  static std::size_t with_slack(std::size_t n) { return n + n / 8 + 16; }

  template <class ExecutionSpace>
  void grow_scratch(ExecutionSpace const& space, std::size_t n, std::size_t counts) {
    auto const alloc = [&](std::string const& label) {
      return Kokkos::view_alloc(space, Kokkos::WithoutInitializing, label);
    };
    if (keys_scratch_.extent(0) < n) keys_scratch_ = allocate_kept<KeyView>("kfmm::sort::keys_scratch", with_slack(n));
    if (counts == 0) return;
    if (permutation_scratch_.extent(0) < n)
      permutation_scratch_ = allocate_kept<IndexView>("kfmm::sort::permutation_scratch", with_slack(n));
    if (counts_.extent(0) < counts) counts_ = IndexView(alloc("kfmm::sort::digit_counts"), counts);
  }

  // The passes of either shape: count(shift, keys, counts) and scatter(shift, source keys,
  // source permutation, target keys, target permutation, counts) launch the shape's kernels.
  template <class ExecutionSpace, class Count, class Scatter>
  void run_passes(ExecutionSpace const& space, KeyView const& keys, IndexView const& permutation,
                  detail::RadixBlocks const& blocks, Count const& count, Scatter const& scatter) {
    std::size_t const n = blocks.n;
    std::uint64_t const varying = detail::radix_varying_bits(space, keys, n);
    grow_scratch(space, n, detail::radix * blocks.count);
    KeyView source_keys = keys, target_keys = keys_scratch_;
    IndexView source_permutation = permutation, target_permutation = permutation_scratch_;
    for (int shift = 0; shift < 64; shift += detail::radix_digit_bits) {
      if (((varying >> shift) & detail::radix_digit_mask) == 0) continue;
      count(shift, source_keys, counts_);
      detail::radix_scan_counts(space, counts_, detail::radix * blocks.count);
      scatter(shift, source_keys, source_permutation, target_keys, target_permutation, counts_);
      std::swap(source_keys, target_keys);
      std::swap(source_permutation, target_permutation);
    }
    // After an odd number of passes the result sits in the scratch Views.
    if (source_keys.data() != keys.data()) {
      auto const range = Kokkos::make_pair(std::size_t(0), n);
      Kokkos::deep_copy(space, Kokkos::subview(keys, range), Kokkos::subview(source_keys, range));
      Kokkos::deep_copy(space, Kokkos::subview(permutation, range), Kokkos::subview(source_permutation, range));
    }
  }
};

/// \brief Sorts all of `keys` ascending and stably; `permutation[i]` becomes the original index
/// of the i-th sorted key. Allocates scratch on every call: use a KeySorter to reuse it.
template <class ExecutionSpace, class Memory, class Index>
void sort_by_key(ExecutionSpace const& space, Kokkos::View<std::uint64_t*, Memory> const& keys,
                 Kokkos::View<Index*, Memory> const& permutation) {
  KeySorter<Memory, Index>().sort(space, keys, permutation, keys.extent(0));
}

/// \brief Reorders the first `n` rows of a rank-1 or (n, k) View so that row i becomes the old
/// row `permutation[i]`. Uses a temporary copy of the n rows.
template <class ExecutionSpace, class Index, class Memory, class View>
void apply_permutation(ExecutionSpace const& space, Kokkos::View<Index*, Memory> const& permutation,
                       View const& view, std::size_t n) {
  static_assert(std::is_same<typename View::memory_space, Memory>::value,
                "the View and the permutation must live in the same memory space");
  if (permutation.extent(0) < n || view.extent(0) < n)
    fail("apply_permutation: n = {} exceeds the permutation ({}) or View '{}' ({}) extent", n, permutation.extent(0),
         view.label(), view.extent(0));
  std::size_t const width = detail::columns(view);
  Kokkos::View<typename View::non_const_value_type**, Kokkos::LayoutLeft, Memory> copy(
      Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kfmm::sort::permuted_copy"), n, width);
  Kokkos::parallel_for(
      "kfmm::sort::gather", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n), KOKKOS_LAMBDA(std::size_t i) {
        for (std::size_t c = 0; c < width; ++c) copy(i, c) = detail::element(view, permutation(i), c);
      });
  Kokkos::parallel_for(
      "kfmm::sort::copy_back", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n), KOKKOS_LAMBDA(std::size_t i) {
        for (std::size_t c = 0; c < width; ++c) detail::element(view, i, c) = copy(i, c);
      });
}

/// Reorders all rows of `view` (n = permutation.extent(0)).
template <class ExecutionSpace, class Index, class Memory, class View>
void apply_permutation(ExecutionSpace const& space, Kokkos::View<Index*, Memory> const& permutation,
                       View const& view) {
  apply_permutation(space, permutation, view, permutation.extent(0));
}

/// \brief Reorders every field of the `num` valid particles: particle i becomes the old
/// particle `permutation[i]`. Allocates one 8-byte word per particle on every call, which every
/// field passes through column by column; KeySorter::permute reuses the sorter's scratch.
template <class ExecutionSpace, class Index, class Memory>
void permute(ExecutionSpace const& space, Particles<Memory>& particles,
             Kokkos::View<Index*, Memory> const& permutation) {
  std::size_t const n = particles.num;
  if (permutation.extent(0) < n)
    fail("permute: the permutation ({} entries) is shorter than the {} particles", permutation.extent(0), n);
  Kokkos::View<std::uint64_t*, Memory> buffer(
      Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kfmm::sort::permute_buffer"), n);
  detail::apply_permutation_through(space, permutation, particles.pos, n, buffer);
  detail::apply_permutation_through(space, permutation, particles.vel, n, buffer);
  detail::apply_permutation_through(space, permutation, particles.mass, n, buffer);
  detail::apply_permutation_through(space, permutation, particles.id, n, buffer);
}

}  // namespace kfmm
