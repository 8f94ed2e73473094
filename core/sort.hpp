#pragma once
/// \file
/// \brief Portable, stable, deterministic O(N) sort of 64-bit keys with their permutation
/// (least-significant-digit radix sort on parallel_for + parallel_scan), and permutation of
/// particle fields into key order (DESIGN.md §5.2).
#include <kfmm/core/error.hpp>
#include <kfmm/core/particles.hpp>
#include <kfmm/core/types.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

namespace kfmm {

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

}  // namespace detail

/// \brief Sorts keys with their permutation and keeps its scratch Views between calls
/// (they grow on demand), so a solver that sorts every step does not reallocate.
///
/// Radix sort with 8-bit digits: per pass, each block of consecutive keys counts its digits,
/// one exclusive scan over the (digit, block) counts gives every block its output offsets,
/// and each block scatters its keys in order. That makes the sort stable, and the result is
/// the unique stable order, whatever the number of blocks or threads. Passes whose digit is
/// the same in every key (found from the OR and AND of all keys) are skipped.
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
  /// or `Index` cannot count to `n`.
  template <class ExecutionSpace>
  void sort(ExecutionSpace const& space, KeyView const& keys, IndexView const& permutation, std::size_t n) {
    if (keys.extent(0) < n || permutation.extent(0) < n)
      fail("sort_by_key: n = {} exceeds the keys ({}) or permutation ({}) extent; allocate at least n entries", n,
           keys.extent(0), permutation.extent(0));
    if (n > std::size_t(std::numeric_limits<Index>::max()))
      fail("sort_by_key: n = {} keys do not fit the {}-byte permutation index (max {}); use a std::size_t "
           "permutation",
           n, sizeof(Index), std::numeric_limits<Index>::max());
    Kokkos::parallel_for(
        "kfmm::sort::iota", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
        KOKKOS_LAMBDA(std::size_t i) { permutation(i) = static_cast<Index>(i); });
    if (n < 2) return;

    std::uint64_t const varying = varying_bits(space, keys, n);
    std::size_t const blocks = number_of_blocks(space, n);
    grow(space, n, blocks);

    KeyView source_keys = keys, target_keys = keys_scratch_;
    IndexView source_permutation = permutation, target_permutation = permutation_scratch_;
    for (int shift = 0; shift < 64; shift += digit_bits) {
      if (((varying >> shift) & digit_mask) == 0) continue;
      count_digits(space, source_keys, n, blocks, shift);
      scan_counts(space, blocks);
      scatter(space, source_keys, source_permutation, target_keys, target_permutation, n, blocks, shift);
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

 private:
  static constexpr int digit_bits = 8;
  static constexpr std::size_t radix = std::size_t(1) << digit_bits;
  static constexpr std::uint64_t digit_mask = radix - 1;

  KeyView keys_scratch_;
  IndexView permutation_scratch_;
  IndexView counts_;  // counts_(digit * blocks + block), then their exclusive scan

  // Bits that differ between at least two keys.
  template <class ExecutionSpace>
  static std::uint64_t varying_bits(ExecutionSpace const& space, KeyView const& keys, std::size_t n) {
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

  // Enough blocks to keep every thread busy, each long enough to amortise its digit counts.
  template <class ExecutionSpace>
  static std::size_t number_of_blocks(ExecutionSpace const& space, std::size_t n) {
    std::size_t const min_block_length = 256;
    std::size_t const by_length = (n + min_block_length - 1) / min_block_length;
    std::size_t const by_threads = 4 * std::size_t(compat::concurrency(space));
    return by_length < by_threads ? by_length : by_threads;
  }

  template <class ExecutionSpace>
  void grow(ExecutionSpace const& space, std::size_t n, std::size_t blocks) {
    auto const alloc = [&](std::string const& label) {
      return Kokkos::view_alloc(space, Kokkos::WithoutInitializing, label);
    };
    if (keys_scratch_.extent(0) < n) keys_scratch_ = KeyView(alloc("kfmm::sort::keys_scratch"), n);
    if (permutation_scratch_.extent(0) < n)
      permutation_scratch_ = IndexView(alloc("kfmm::sort::permutation_scratch"), n);
    if (counts_.extent(0) < radix * blocks) counts_ = IndexView(alloc("kfmm::sort::digit_counts"), radix * blocks);
  }

  // Block b covers [b·length, min(n, (b+1)·length)).
  KOKKOS_INLINE_FUNCTION static std::size_t block_begin(std::size_t block, std::size_t n, std::size_t blocks) {
    return block * ((n + blocks - 1) / blocks);
  }
  KOKKOS_INLINE_FUNCTION static std::size_t block_end(std::size_t block, std::size_t n, std::size_t blocks) {
    std::size_t const end = block_begin(block + 1, n, blocks);
    return end < n ? end : n;
  }

  template <class ExecutionSpace>
  void count_digits(ExecutionSpace const& space, KeyView const& keys, std::size_t n, std::size_t blocks,
                    int shift) const {
    auto const counts = counts_;
    Kokkos::parallel_for(
        "kfmm::sort::count_digits", Kokkos::RangePolicy<ExecutionSpace>(space, 0, blocks),
        KOKKOS_LAMBDA(std::size_t block) {
          Index local[radix] = {};
          for (std::size_t i = block_begin(block, n, blocks); i < block_end(block, n, blocks); ++i)
            ++local[(keys(i) >> shift) & digit_mask];
          for (std::size_t digit = 0; digit < radix; ++digit) counts(digit * blocks + block) = local[digit];
        });
  }

  template <class ExecutionSpace>
  void scan_counts(ExecutionSpace const& space, std::size_t blocks) const {
    auto const counts = counts_;
    Kokkos::parallel_scan(
        "kfmm::sort::scan_counts", Kokkos::RangePolicy<ExecutionSpace>(space, 0, radix * blocks),
        KOKKOS_LAMBDA(std::size_t i, Index & partial, bool final) {
          Index const count = counts(i);
          if (final) counts(i) = partial;
          partial += count;
        });
  }

  template <class ExecutionSpace>
  void scatter(ExecutionSpace const& space, KeyView const& source_keys, IndexView const& source_permutation,
               KeyView const& target_keys, IndexView const& target_permutation, std::size_t n, std::size_t blocks,
               int shift) const {
    auto const counts = counts_;
    Kokkos::parallel_for(
        "kfmm::sort::scatter", Kokkos::RangePolicy<ExecutionSpace>(space, 0, blocks),
        KOKKOS_LAMBDA(std::size_t block) {
          Index next[radix];
          for (std::size_t digit = 0; digit < radix; ++digit) next[digit] = counts(digit * blocks + block);
          for (std::size_t i = block_begin(block, n, blocks); i < block_end(block, n, blocks); ++i) {
            std::uint64_t const key = source_keys(i);
            Index const at = next[(key >> shift) & digit_mask]++;
            target_keys(at) = key;
            target_permutation(at) = source_permutation(i);
          }
        });
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
/// particle `permutation[i]`.
template <class ExecutionSpace, class Index, class Memory>
void permute(ExecutionSpace const& space, Particles<Memory>& particles,
             Kokkos::View<Index*, Memory> const& permutation) {
  apply_permutation(space, permutation, particles.pos, particles.num);
  apply_permutation(space, permutation, particles.vel, particles.num);
  apply_permutation(space, permutation, particles.mass, particles.num);
  apply_permutation(space, permutation, particles.id, particles.num);
}

}  // namespace kfmm
