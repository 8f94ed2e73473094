#pragma once
/// \file
/// \brief Kernels of ExchangePlan::exchange_in_place(): rows of several Views packed together
/// into fixed-size byte records (one message per partner for all fields), and a run of rows
/// moved in place by a few rows without a second copy.
#include <kfmm/core/error.hpp>
#include <kfmm/core/sort.hpp>
#include <kfmm/core/types.hpp>

#include <cstddef>
#include <cstdint>

namespace kfmm::detail {

/// Export slot j in [begin, end) gets row order(j) of `source` at byte `offset` of record
/// j − skip of `records` (record_bytes each; the buffer leaves out the rows that stay). A free
/// function: nvcc allows device lambdas only there and in public member functions.
template <class ExecutionSpace, class Source, class Order>
void pack_field(ExecutionSpace const& space, Source const& source, Order const& order, std::size_t offset,
                std::size_t record_bytes, std::size_t begin, std::size_t end, std::size_t skip, char* records) {
  using T = typename Source::non_const_value_type;
  if (end <= begin) return;
  std::size_t const width = columns(source);
  Kokkos::parallel_for(
      "kfmm::exchange_plan::pack_records", Kokkos::RangePolicy<ExecutionSpace>(space, begin, end),
      KOKKOS_LAMBDA(std::size_t j) {
        T* const slot = reinterpret_cast<T*>(records + (j - skip) * record_bytes + offset);
        std::size_t const row = order(j);
        for (std::size_t c = 0; c < width; ++c) slot[c] = element(source, row, c);
      });
}

/// Row i in [begin, end) of `target` from record i − skip of `records` (imports land in row
/// order, the rows that stay left out of the buffer).
template <class ExecutionSpace, class Target>
void unpack_field(ExecutionSpace const& space, char const* records, std::size_t offset, std::size_t record_bytes,
                  std::size_t begin, std::size_t end, std::size_t skip, Target const& target) {
  using T = typename Target::non_const_value_type;
  if (end <= begin) return;
  std::size_t const width = columns(target);
  Kokkos::parallel_for(
      "kfmm::exchange_plan::unpack_records", Kokkos::RangePolicy<ExecutionSpace>(space, begin, end),
      KOKKOS_LAMBDA(std::size_t i) {
        T const* const slot = reinterpret_cast<T const*>(records + (i - skip) * record_bytes + offset);
        for (std::size_t c = 0; c < width; ++c) element(target, i, c) = slot[c];
      });
}

/// The row of export slot first + j when the elements are rows of the Views through `rows`
/// (element e is row rows(e)): pack_field()'s order in ExchangePlan::exchange_arranged().
template <class Order, class Rows>
struct RowsThrough {
  Order order;
  Rows rows;
  std::size_t first = 0;
  KOKKOS_INLINE_FUNCTION std::size_t operator()(std::size_t j) const { return std::size_t(rows(order(first + j))); }
};

/// \brief Where each row j < count of an arrangement comes from, found once for all the columns
/// arrange_column() arranges: row j takes import arrangement(j), which is record i (i − stay
/// past the self imports), stored as −1 − (its slot), or for a self import i in [self_begin,
/// self_end) row self_rows(i − self_begin) of the Views, stored as that row (≥ 0). Sources hold
/// a signed integer wide enough for both (32 bits where they fit: every column reads them).
template <class ExecutionSpace, class Arrangement, class SelfRows, class Sources>
void arrangement_sources(ExecutionSpace const& space, Arrangement const& arrangement, SelfRows const& self_rows,
                         std::size_t self_begin, std::size_t self_end, std::size_t count, Sources const& sources) {
  if (count == 0) return;
  using Index = typename Sources::non_const_value_type;
  std::size_t const stay = self_end - self_begin;
  Kokkos::parallel_for(
      "kfmm::exchange_plan::arrangement_sources", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count),
      KOKKOS_LAMBDA(std::size_t j) {
        std::size_t const i = std::size_t(arrangement(j));
        if (i >= self_begin && i < self_end) {
          sources(j) = Index(self_rows(i - self_begin));
        } else {
          std::size_t const slot = i < self_begin ? i : i - stay;
          sources(j) = Index(-1 - std::int64_t(slot));
        }
      });
}

/// \brief Column `column` of rows [0, count) of `view` arranged into `scratch` (words of at
/// least the value's size): row j takes row sources(j) of `view` where that is ≥ 0, else record
/// −1 − sources(j) of `records`, its field at byte `offset` (arrangement_sources()). Reads
/// `view` only: the caller copies the scratch back once the column is arranged.
template <class ExecutionSpace, class View, class Sources, class Scratch>
void arrange_column(ExecutionSpace const& space, View const& view, std::size_t column, Sources const& sources,
                    char const* records, std::size_t offset, std::size_t record_bytes, std::size_t count,
                    Scratch const& scratch) {
  using T = typename View::non_const_value_type;
  static_assert(sizeof(T) <= sizeof(typename Scratch::value_type) &&
                    alignof(T) <= alignof(typename Scratch::value_type),
                "the scratch words must hold one field value");
  if (count == 0) return;
  T* const words = reinterpret_cast<T*>(scratch.data());
  Kokkos::parallel_for(
      "kfmm::exchange_plan::arrange_column", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count),
      KOKKOS_LAMBDA(std::size_t j) {
        std::int64_t const source = std::int64_t(sources(j));
        words[j] = source >= 0 ? element(view, std::size_t(source), column)
                               : reinterpret_cast<T const*>(records + std::size_t(-1 - source) * record_bytes +
                                                            offset)[column];
      });
}

/// Keys of the self imports: import_keys(target + k) = keys(order(source + k)), k < count.
template <class ExecutionSpace, class Keys, class Order, class ImportKeys>
void gather_self_keys(ExecutionSpace const& space, Keys const& keys, Order const& order, std::size_t source,
                      ImportKeys const& import_keys, std::size_t target, std::size_t count) {
  if (count == 0) return;
  Kokkos::parallel_for(
      "kfmm::exchange_plan::gather_self_keys", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count),
      KOKKOS_LAMBDA(std::size_t k) { import_keys(target + k) = keys(order(source + k)); });
}

/// Column `column` of rows [0, count) of `view` from `scratch` (arrange_column()'s words).
template <class ExecutionSpace, class View, class Scratch>
void copy_column_back(ExecutionSpace const& space, Scratch const& scratch, std::size_t column, std::size_t count,
                      View const& view) {
  using T = typename View::non_const_value_type;
  if (count == 0) return;
  T const* const words = reinterpret_cast<T const*>(scratch.data());
  Kokkos::parallel_for(
      "kfmm::exchange_plan::copy_column_back", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count),
      KOKKOS_LAMBDA(std::size_t j) { element(view, j, column) = words[j]; });
}

/// \brief How shift_rows() cuts a run of `count` rows moved by `distance` rows: into chunks of
/// `steps` blocks of `distance` rows, each chunk moved block by block by one team.
struct RowShiftShape {
  std::size_t distance = 0;  // |target − source| rows, > 0
  std::size_t steps = 1;     // blocks per chunk
  std::size_t chunk = 0;     // rows per chunk: steps · distance
  std::size_t chunks = 0;

  RowShiftShape(std::size_t count, std::size_t distance, std::size_t target_chunks)
      : distance(distance),
        steps(target_chunks > 0 && count > target_chunks * distance
                  ? (count + target_chunks * distance - 1) / (target_chunks * distance)
                  : 1),
        chunk(steps * distance), chunks((count + chunk - 1) / chunk) {}
  /// Rows saved before the move: those of each chunk that its neighbour overwrites.
  std::size_t saved_rows() const { return (chunks - 1) * distance; }
};

/// \brief Moves rows [source, source + count) of `view` to rows [target, target + count) in
/// place, reading and writing every row once (through a buffer: twice), for a run that
/// overlaps its target (the rows that stay on a rank when the rows before them change).
///
/// The run is cut into chunks of whole blocks of `distance` rows, one team per chunk; a team
/// moves its blocks one after another in the order that reads a block before the previous
/// move overwrites it (from the end when moving to higher rows), each row of a block by the
/// thread that owns its residue modulo the distance, so that no barrier is needed. The rows a
/// chunk's neighbour overwrites (one block per chunk) are saved first into `scratch` (at least
/// RowShiftShape::saved_rows() · columns values). About `target_chunks` chunks share the work
/// (a few per core; tests use small values to get many). Rows outside the source run are
/// overwritten where the target lies.
template <class ExecutionSpace, class View>
void shift_rows(ExecutionSpace const& space, View const& view, std::size_t source, std::size_t target,
                std::size_t count, typename View::non_const_value_type* scratch, std::size_t target_chunks) {
  if (count == 0 || source == target) return;
  bool const forward = target > source;  // rows move to higher indices
  RowShiftShape const shape(count, forward ? target - source : source - target, target_chunks);
  std::size_t const width = columns(view);
  std::size_t const distance = shape.distance, chunk = shape.chunk, chunks = shape.chunks;
  std::size_t const end = source + count;
  if (distance >= count) {  // apart: one parallel copy
    Kokkos::parallel_for(
        "kfmm::exchange_plan::move_rows", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count),
        KOKKOS_LAMBDA(std::size_t i) {
          for (std::size_t col = 0; col < width; ++col) element(view, target + i, col) = element(view, source + i, col);
        });
    return;
  }
  // Forward, chunk c's last block lands on the first block of chunk c + 1; backward, the first
  // block of chunk c + 1 lands on the last block of chunk c (chunks before the last are full).
  // Save slot s = c' · distance + k holds row k of the first block of chunk c' + 1 (forward)
  // or of the last block of chunk c' (backward).
  if (chunks > 1) {
    Kokkos::parallel_for(
        "kfmm::exchange_plan::shift_save", Kokkos::RangePolicy<ExecutionSpace>(space, 0, (chunks - 1) * distance),
        KOKKOS_LAMBDA(std::size_t s) {
          std::size_t const saved = s / distance, k = s % distance;
          std::size_t const row =
              forward ? source + (saved + 1) * chunk + k : source + saved * chunk + chunk - distance + k;
          if (row < end)
            for (std::size_t c = 0; c < width; ++c) scratch[s * width + c] = element(view, row, c);
        });
  }
  using Team = typename Kokkos::TeamPolicy<ExecutionSpace>::member_type;
  Kokkos::parallel_for(
      "kfmm::exchange_plan::shift_rows", Kokkos::TeamPolicy<ExecutionSpace>(space, int(chunks), Kokkos::AUTO),
      KOKKOS_LAMBDA(Team const& team) {
        std::size_t const c = std::size_t(team.league_rank());
        std::size_t const begin = source + c * chunk;
        std::size_t const chunk_end = begin + chunk < end ? begin + chunk : end;
        std::size_t const blocks = (chunk_end - begin + distance - 1) / distance;
        for (std::size_t step = 0; step < blocks; ++step) {
          std::size_t const b = forward ? blocks - 1 - step : step;
          // Row k of every block belongs to the same thread: it read the row this move
          // overwrites in its previous step, so the steps need no barrier.
          for (std::size_t k = std::size_t(team.team_rank()); k < distance; k += std::size_t(team.team_size())) {
            std::size_t const row = begin + b * distance + k;
            if (row >= chunk_end) break;
            std::size_t const to = forward ? row + distance : row - distance;
            bool const saved = forward ? (b == 0 && c > 0) : (c + 1 < chunks && b + 1 == blocks);
            std::size_t const slot = (forward ? c - 1 : c) * distance + k;
            for (std::size_t col = 0; col < width; ++col)
              element(view, to, col) = saved ? scratch[slot * width + col] : element(view, row, col);
          }
        }
      });
}

}  // namespace kfmm::detail
