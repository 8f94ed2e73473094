#pragma once
/// \file
/// \brief The export order of an ExchangePlan, built in kernels on the plan's memory space: a
/// stable counting sort of the elements by destination rank (bins 0..R−1, bin R for dropped
/// elements). Only R + 1 offsets, the first bad element and the self rows' bounds reach the
/// host; the per-element destinations and order stay on the device.
#include <kfmm/comm/export_order_pool.hpp>
#include <kfmm/core/error.hpp>
#include <kfmm/core/kokkos_compat.hpp>
#include <kfmm/core/view_growth.hpp>
#include <kfmm/core/session_scratch.hpp>
#include <kfmm/core/sort.hpp>
#include <kfmm/core/space_copy.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kfmm::detail {

inline constexpr std::size_t no_element = std::size_t(-1);

/// Scratch of the counting sort, kept for the life of the Kokkos session and grown on demand,
/// so that building a plan allocates only its order: the (bin, block) counters and their scan,
/// the R + 1 export offsets, and the partner flags of reply_to()/within() plans, with the host
/// copies of the offsets and flags.
template <class Memory>
struct ExportOrderScratch {
  Kokkos::View<std::size_t*, Memory> bins;
  Kokkos::View<std::size_t*, Memory> offsets;
  Kokkos::View<std::uint8_t*, Memory> partners;
  Kokkos::View<std::size_t*, Kokkos::HostSpace> host_offsets;
  Kokkos::View<std::uint8_t*, Kokkos::HostSpace> host_partners;
};

/// Blocks of rows, one thread each: enough to keep every thread busy, each long enough to
/// amortise its R + 1 counters, and at most `largest_bins` counters in all (R of thousands).
template <class ExecutionSpace>
RadixBlocks export_blocks(ExecutionSpace const& space, std::size_t n, int ranks) {
  constexpr std::size_t min_block_length = 256, largest_bins = std::size_t(1) << 22;
  std::size_t const by_length = (n + min_block_length - 1) / min_block_length;
  std::size_t const by_threads = 4 * std::size_t(compat::concurrency(space));
  std::size_t const by_bins = largest_bins / (std::size_t(ranks) + 1);
  std::size_t count = by_length < by_threads ? by_length : by_threads;
  count = count < by_bins ? count : by_bins;
  RadixBlocks blocks;
  blocks.n = n;
  blocks.count = count > 0 ? count : 1;
  blocks.length = n > 0 ? (n + blocks.count - 1) / blocks.count : 1;
  return blocks;
}

/// The bin of destination d: d itself when it is a rank (and a partner, when partners are
/// checked), `ranks` (dropped) otherwise.
template <class Partners>
KOKKOS_INLINE_FUNCTION int export_bin(int d, int ranks, Partners const& partners, bool check_partners) {
  return d >= 0 && d < ranks && (!check_partners || partners(d) != 0) ? d : ranks;
}

/// What the count pass learned: the first element whose destination is neither −1 nor a valid
/// rank (no_element if none), and the first and last element that stays on `self`.
struct ExportScan {
  std::size_t first_bad = no_element;
  std::size_t self_first = no_element;
  std::size_t self_last = 0;
};

/// Counts the elements of each block per bin into bins(bin · blocks + block) and finds the
/// first bad element and the self rows' bounds.
template <class ExecutionSpace, class Destinations, class Bins, class Partners>
ExportScan count_export_bins(ExecutionSpace const& space, Destinations const& destinations, int ranks, int self,
                             Partners const& partners, bool check_partners, Bins const& bins,
                             RadixBlocks const blocks) {
  std::size_t const stride = blocks.count;
  ExportScan scan;
  Kokkos::parallel_reduce(
      "kfmm::exchange_plan::count_destinations", Kokkos::RangePolicy<ExecutionSpace>(space, 0, blocks.count),
      KOKKOS_LAMBDA(std::size_t block, std::size_t & first_bad, std::size_t & self_first, std::size_t & self_last) {
        for (int bin = 0; bin <= ranks; ++bin) bins(std::size_t(bin) * stride + block) = 0;
        // Counted by runs of one bin (destinations come mostly in runs): no memory round trip
        // per element.
        int run_bin = ranks;
        std::size_t run = 0;
        for (std::size_t i = blocks.begin(block); i < blocks.end(block); ++i) {
          int const d = destinations(i);
          int const bin = export_bin(d, ranks, partners, check_partners);
          if (bin != run_bin) {
            bins(std::size_t(run_bin) * stride + block) += run;
            run_bin = bin;
            run = 0;
          }
          ++run;
          if (bin == ranks && d != -1 && i < first_bad) first_bad = i;
          if (bin == self) {
            if (i < self_first) self_first = i;
            if (i > self_last) self_last = i;
          }
        }
        bins(std::size_t(run_bin) * stride + block) += run;
      },
      Kokkos::Min<std::size_t>(scan.first_bad), Kokkos::Min<std::size_t>(scan.self_first),
      Kokkos::Max<std::size_t>(scan.self_last));
  return scan;
}

/// offsets(r) = the first export slot of rank r (r ≤ ranks; offsets(ranks) = exports in all),
/// read from the scanned bins.
template <class ExecutionSpace, class Bins, class Offsets>
void export_offsets(ExecutionSpace const& space, Bins const& bins, int ranks, std::size_t blocks,
                    Offsets const& offsets) {
  Kokkos::parallel_for(
      "kfmm::exchange_plan::export_offsets", Kokkos::RangePolicy<ExecutionSpace>(space, 0, std::size_t(ranks) + 1),
      KOKKOS_LAMBDA(std::size_t r) { offsets(r) = bins(r * blocks); });
}

/// order(slot) = element, each block's elements in ascending order after those of the blocks
/// before it in the same bin: the stable order by destination. Dropped elements get no slot.
template <class ExecutionSpace, class Destinations, class Bins, class Partners, class Order>
void scatter_export_order(ExecutionSpace const& space, Destinations const& destinations, int ranks,
                          Partners const& partners, bool check_partners, Bins const& bins, RadixBlocks const blocks,
                          Order const& order) {
  std::size_t const stride = blocks.count;
  Kokkos::parallel_for(
      "kfmm::exchange_plan::export_order", Kokkos::RangePolicy<ExecutionSpace>(space, 0, blocks.count),
      KOKKOS_LAMBDA(std::size_t block) {
        // The next slot of the current run's bin stays in a register until the bin changes.
        int run_bin = ranks;
        std::size_t next = bins(std::size_t(ranks) * stride + block);
        for (std::size_t i = blocks.begin(block); i < blocks.end(block); ++i) {
          int const bin = export_bin(destinations(i), ranks, partners, check_partners);
          if (bin != run_bin) {
            bins(std::size_t(run_bin) * stride + block) = next;
            run_bin = bin;
            next = bins(std::size_t(bin) * stride + block);
          }
          if (bin < ranks) order(next++) = i;
        }
      });
}

/// \brief The stable export order of the first n destinations and what the host needs of it.
struct ExportOrder {
  std::vector<std::size_t> counts;  // elements per destination rank (dropped ones excluded)
  std::size_t first_bad = no_element;
  int bad_destination = 0;        // destination of first_bad
  std::size_t self_first = no_element;  // first element of the self rows when they form one ascending run
};

/// Sorts the first `n` destinations (each should be −1 or a rank in [0, ranks) that is a
/// partner when `partners_host` is given) stably by rank into `order` (kept when it holds the
/// exports, else replaced by one lent from export_order_pool()); others are dropped and the first of them
/// reported. Kernels on `space`; R + 1 offsets and three scalars cross to the host.
template <class ExecutionSpace, class Memory>
ExportOrder build_export_order(ExecutionSpace const& space, Kokkos::View<int const*, Memory> const& destinations,
                               std::size_t n, int ranks, int self, std::vector<std::size_t> const* partners_host,
                               Kokkos::View<std::size_t*, Memory>& order) {
  auto& scratch = session_scratch<ExportOrderScratch<Memory>>();
  RadixBlocks const blocks = export_blocks(space, n, ranks);
  std::size_t const num_bins = (std::size_t(ranks) + 1) * blocks.count;
  grow_discarding(scratch.bins, num_bins, "kfmm::exchange_plan::bins");
  grow_discarding(scratch.offsets, std::size_t(ranks) + 1, "kfmm::exchange_plan::offsets");
  bool const check_partners = partners_host != nullptr;
  // R flags: which ranks may receive (a byte per rank, like the counts); read by the copy
  // before the fence below.
  if (check_partners) {
    grow_discarding(scratch.partners, std::size_t(ranks), "kfmm::exchange_plan::partners");
    grow_discarding(scratch.host_partners, std::size_t(ranks), "kfmm::exchange_plan::host_partners");
    auto const flags = Kokkos::subview(scratch.host_partners, Kokkos::make_pair(0, ranks));
    for (int r = 0; r < ranks; ++r) flags(r) = (*partners_host)[r] > 0 ? 1 : 0;
    copy_contiguous(space, Kokkos::subview(scratch.partners, Kokkos::make_pair(0, ranks)), flags);
  }
  auto const bins = scratch.bins;
  auto const offsets = scratch.offsets;
  auto const partners = scratch.partners;
  auto const rows = Kokkos::subview(destinations, Kokkos::make_pair(std::size_t(0), n));
  ExportScan const scan = count_export_bins(space, rows, ranks, self, partners, check_partners, bins, blocks);
  radix_scan_counts(space, bins, num_bins);
  export_offsets(space, bins, ranks, blocks.count, offsets);
  grow_discarding(scratch.host_offsets, std::size_t(ranks) + 1, "kfmm::exchange_plan::host_offsets");
  auto const host_offsets = Kokkos::subview(scratch.host_offsets, Kokkos::make_pair(0, ranks + 1));
  copy_contiguous(space, host_offsets, Kokkos::subview(offsets, Kokkos::make_pair(0, ranks + 1)));
  compat::fence(space, "kfmm::exchange_plan (export offsets on the host)");

  ExportOrder result;
  result.counts.resize(ranks);
  for (int r = 0; r < ranks; ++r) result.counts[r] = host_offsets(r + 1) - host_offsets(r);
  result.first_bad = scan.first_bad;
  if (scan.first_bad != no_element) {
    Kokkos::View<int, Kokkos::HostSpace> bad("kfmm::exchange_plan::bad_destination");
    copy_contiguous(space, bad, Kokkos::subview(destinations, scan.first_bad));
    compat::fence(space, "kfmm::exchange_plan (bad destination on the host)");
    result.bad_destination = bad();
  }
  // The self rows are sorted ascending, so they are one run exactly when they span no gap.
  std::size_t const self_count = result.counts[self];
  if (self_count > 0 && scan.self_last - scan.self_first + 1 == self_count) result.self_first = scan.self_first;

  std::size_t const exports = host_offsets(ranks);
  if (order.extent(0) < exports) order = export_order_pool<Memory>().lend(exports);
  scatter_export_order(space, rows, ranks, partners, check_partners, bins, blocks, order);
  return result;
}

}  // namespace kfmm::detail
