#include <kfmm/neighbors/fof.hpp>

#include <kfmm/comm/global_bounds.hpp>
#include <kfmm/core/binary_search.hpp>
#include <kfmm/core/error.hpp>
#include <kfmm/core/hilbert.hpp>
#include <kfmm/core/huge_pages.hpp>
#include <kfmm/core/kokkos_compat.hpp>
#include <kfmm/core/sort.hpp>
#include <kfmm/core/tree.hpp>
#include <kfmm/neighbors/union_find.hpp>

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace kfmm {

namespace detail {

/// Minimum-image difference (box > 0) or the plain difference.
KOKKOS_INLINE_FUNCTION double fof_wrap_difference(double d, double box) {
  return box > 0 ? d - box * compat::math::floor(d / box + 0.5) : d;
}

/// Morton code of integer coordinates (x in the lowest bit of each triple).
KOKKOS_INLINE_FUNCTION std::uint64_t fof_morton(std::uint32_t x, std::uint32_t y, std::uint32_t z) {
  return spread_bits(x) | (spread_bits(y) << 1) | (spread_bits(z) << 2);
}

/// Per fine cell, in one cache line: centre (0..2), half extent (3..5) of its points' bounding
/// box, 1 when the cell is linked as a whole (6).
using FoFCellBoxes = Kokkos::View<double* [8], Kokkos::LayoutRight, MemorySpace>;

/// The cells of one linking pass. Fine cells (edge between l/2 and l/√3 where the periodic box
/// allows: a full one has a diagonal ≤ l) come 2×2×2 to a link cell (edge ≥ l: a point's
/// friends lie in the 27 link cells around its own) and 2^inside per axis to a coarse cell (a
/// dense grid of coarse_side³ cells, edge ≥ l, holding fine-cell ranges). A fine cell's code (the
/// sort key) is its coarse cell's row-major index (z, y, x) above the Morton code of its place
/// inside the coarse cell: the fine cells of a link cell are contiguous, and so are those of a
/// coarse cell and of the cells of a coarse row.
struct FoFGrid {
  double corner[3] = {0, 0, 0};
  double fine_edge = 1;
  double box = 0;        // periodic box (0: open); then coarse_side · 2^inside · fine_edge = box
  double link2 = 0;      // squared linking length
  int coarse_side = 1;   // coarse cells per axis
  int inside = 1;        // fine levels inside a coarse cell (≥ 1: the link level is inside - 1)

  int fine_side() const { return coarse_side << inside; }
  std::size_t coarse_cells() const { return std::size_t(coarse_side) * std::size_t(coarse_side) * coarse_side; }
};

/// Sorted fine-cell codes of the (wrapped) points, the sorted wrapped positions and the permutation.
void fof_sorted_points(ExecutionSpace const& space, Vec3View<double> const& pos, std::size_t n, FoFGrid const& grid,
                       ScalarView<std::uint64_t> const& keys, ScalarView<std::uint32_t> const& permutation,
                       Vec3View<double> const& sorted) {
  double const scale = 1 / grid.fine_edge;
  double const box = grid.box;
  double const c0 = grid.corner[0], c1 = grid.corner[1], c2 = grid.corner[2];
  int const inside = grid.inside;
  std::uint32_t const last = std::uint32_t(grid.fine_side() - 1);
  std::uint64_t const coarse_side = std::uint64_t(grid.coarse_side);
  Kokkos::parallel_for(
      "kfmm::fof::keys", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n), KOKKOS_LAMBDA(std::size_t i) {
        double const corner[3] = {c0, c1, c2};
        std::uint32_t f[3], c[3];
        for (int k = 0; k < 3; ++k) {
          double x = pos(i, k);
          if (box > 0) {
            x -= box * compat::math::floor(x / box);
            if (!(x < box)) x = 0;  // round-off of a tiny negative x
          }
          double const t = (x - corner[k]) * scale;
          std::uint32_t const g = t >= double(last) ? last : t >= 0 ? static_cast<std::uint32_t>(t) : 0u;
          f[k] = g & ((std::uint32_t(1) << inside) - 1);
          c[k] = g >> inside;
        }
        std::uint64_t const row_major = (std::uint64_t(c[2]) * coarse_side + c[1]) * coarse_side + c[0];
        keys(i) = (row_major << (3 * inside)) | fof_morton(f[0], f[1], f[2]);  // order inside a fine cell: any
      });
  KeySorter<MemorySpace, std::uint32_t> sorter;
  sorter.sort(space, keys, permutation, n);
  Kokkos::parallel_for(
      "kfmm::fof::gather_positions", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n), KOKKOS_LAMBDA(std::size_t i) {
        constexpr std::size_t ahead = 32;  // points in flight: the reads are in random order
        if (i + ahead < n) {
          std::uint32_t const later = permutation(i + ahead);
          for (int k = 0; k < 3; ++k) compat::math::prefetch(&pos(later, k));
        }
        for (int k = 0; k < 3; ++k) {
          double x = pos(permutation(i), k);
          if (box > 0) {
            x -= box * compat::math::floor(x / box);
            if (!(x < box)) x = 0;
          }
          sorted(i, k) = x;
        }
      });
}

/// Fine cells: runs of equal keys. Returns their count; begin(c) is the first sorted point of
/// cell c, begin(count) = n.
int fof_fine_cells(ExecutionSpace const& space, ScalarView<std::uint64_t> const& keys, std::size_t n,
                   ScalarView<int>& begin) {
  int count = 0;
  Kokkos::parallel_reduce(
      "kfmm::fof::count_fine_cells", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t i, int& sum) {
        if (i == 0 || keys(i) != keys(i - 1)) ++sum;
      },
      count);
  begin = allocate_large<ScalarView<int>>("kfmm::fof::fine_begin", count + 1);
  auto const first = begin;
  Kokkos::parallel_scan(
      "kfmm::fof::fine_cells", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t i, int& index, bool final) {
        bool const starts = i == 0 || keys(i) != keys(i - 1);
        if (starts) {
          if (final) first(index) = int(i);
          ++index;
        }
      });
  Kokkos::deep_copy(space, Kokkos::subview(begin, count), int(n));
  return count;
}

/// The fine cells of one linking pass as the link kernel reads them. Only cells of two or more
/// points have a stored box: where nearly every point is alone (uniform points at b = 0.2) a
/// box per cell would be the largest array of the pass; a one-point cell's box is its point.
struct FoFCells {
  Vec3View<double> sorted;  // wrapped positions in cell order
  ScalarView<int> begin;    // first point of each cell; begin(cells) = n
  ScalarView<int> slot;     // row of a cell's box in `boxes`, −1 for a one-point cell
  ScalarView<std::uint64_t> keys;  // the sorted points' fine-cell codes
  FoFCellBoxes boxes;
  int* parent = nullptr;
  double box = 0;    // periodic box (0: open)
  double link2 = 0;  // squared linking length

  /// Code of fine cell c: its coarse cell's row-major index above the Morton code inside it.
  KOKKOS_INLINE_FUNCTION std::uint64_t code(int c) const { return keys(begin(c)); }

  /// Centre and half extent of cell c's points, and whether they are linked as a whole.
  KOKKOS_INLINE_FUNCTION void bounds(int c, double centre[3], double half[3], bool& whole) const {
    int const s = slot(c);
    if (s < 0) {
      int const i = begin(c);
      for (int k = 0; k < 3; ++k) {
        centre[k] = sorted(i, k);
        half[k] = 0;
      }
      whole = true;
      return;
    }
    for (int k = 0; k < 3; ++k) {
      centre[k] = boxes(s, k);
      half[k] = boxes(s, 3 + k);
    }
    whole = boxes(s, 6) != 0;
  }

  /// Whether cell c's points are one component from the start (one point, or a diagonal within
  /// the linking length).
  KOKKOS_INLINE_FUNCTION bool whole(int c) const {
    int const s = slot(c);
    return s < 0 || boxes(s, 6) != 0;
  }

  /// Links the points of cells a and b (b ≥ a) closer than the linking length; (ac, ah, a_whole)
  /// are bounds(a). True when both are linked as a whole and are now one component.
  KOKKOS_FORCEINLINE_FUNCTION bool link(int a, int b, double const ac[3], double const ah[3], bool a_whole) const {
    if (b == a && a_whole) return true;
    double bc[3], bh[3];
    bool b_whole;
    bounds(b, bc, bh, b_whole);
    // Without branches: whether a gap is positive is as likely as not in dense regions.
    double gap2 = 0, far2 = 0;
    for (int k = 0; k < 3; ++k) {
      double const d = compat::math::fabs(fof_wrap_difference(bc[k] - ac[k], box));
      double const g = compat::math::max(d - ah[k] - bh[k], 0.0);
      double const f = d + ah[k] + bh[k];
      gap2 += g * g;
      far2 += f * f;
    }
    if (gap2 > link2) return false;
    int const a_begin = begin(a), a_end = begin(a + 1);
    int const b_begin = begin(b), b_end = begin(b + 1);
    bool const both_whole = a_whole && b_whole;
    if (both_whole) {
      if (fof_find(parent, a_begin) == fof_find(parent, b_begin)) return true;
      if (far2 <= link2) {
        fof_union(parent, a_begin, b_begin);
        return true;
      }
    }
    bool linked = false;
    for (int j = b_begin; j < b_end && !(linked && both_whole); ++j) {
      int const i_end = b == a ? j : a_end;
      for (int i = a_begin; i < i_end; ++i) {
        double r2 = 0;
        for (int k = 0; k < 3; ++k) {
          double const d = fof_wrap_difference(sorted(j, k) - sorted(i, k), box);
          r2 += d * d;
        }
        if (r2 <= link2) {
          fof_union(parent, i, j);
          linked = true;
          if (a_whole) break;  // j now hangs on all of A
        }
      }
    }
    return linked && both_whole;
  }
};

/// The rows of the cells of two or more points in the box table (FoFCells::slot); returns
/// their count.
int fof_box_slots(ExecutionSpace const& space, ScalarView<int> const& begin, int cells, ScalarView<int>& slot) {
  slot = allocate_large<ScalarView<int>>("kfmm::fof::box_slot", cells);
  auto const out = slot;
  int count = 0;
  Kokkos::parallel_scan(
      "kfmm::fof::box_slots", Kokkos::RangePolicy<ExecutionSpace>(space, 0, cells),
      KOKKOS_LAMBDA(int c, int& index, bool final) {
        bool const several = begin(c + 1) - begin(c) > 1;
        if (final) out(c) = several ? index : -1;
        if (several) ++index;
      },
      count);
  return count;
}

/// Bounding boxes of the cells of two or more points (centre, half extent); such a cell whose
/// diagonal is within the linking length is linked as a whole (every point's parent is its
/// first point), else every point starts as its own root.
void fof_cell_boxes(ExecutionSpace const& space, FoFCells const& cells, int count) {
  auto const sorted = cells.sorted;
  auto const begin = cells.begin;
  auto const slot = cells.slot;
  auto const box = cells.boxes;
  int* const parent = cells.parent;
  double const link2 = cells.link2;
  Kokkos::parallel_for(
      "kfmm::fof::cell_boxes", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count), KOKKOS_LAMBDA(int c) {
        int const b = begin(c), e = begin(c + 1), s = slot(c);
        if (s < 0) {
          parent[b] = b;
          return;
        }
        double diagonal2 = 0;
        for (int k = 0; k < 3; ++k) {
          double lo = sorted(b, k), hi = lo;
          for (int i = b + 1; i < e; ++i) {
            double const x = sorted(i, k);
            lo = x < lo ? x : lo;
            hi = x > hi ? x : hi;
          }
          box(s, k) = 0.5 * (lo + hi);
          box(s, 3 + k) = 0.5 * (hi - lo);
          diagonal2 += (hi - lo) * (hi - lo);
        }
        bool const linked = diagonal2 <= link2;
        box(s, 6) = linked ? 1 : 0;
        box(s, 7) = 0;
        for (int i = b; i < e; ++i) parent[i] = linked ? b : i;
      });
}

/// coarse_begin(k) = first fine cell whose coarse cell is ≥ k, for k in [0, cells]: the fine
/// cells of coarse cell k are [coarse_begin(k), coarse_begin(k + 1)).
void fof_coarse_grid(ExecutionSpace const& space, FoFCells const& fine, int fine_cells, int shift,
                     std::size_t coarse_cells, ScalarView<int> const& coarse_begin) {
  Kokkos::parallel_for(
      "kfmm::fof::coarse_grid", Kokkos::RangePolicy<ExecutionSpace>(space, 0, fine_cells), KOKKOS_LAMBDA(int c) {
        std::uint64_t const k = fine.code(c) >> shift;
        std::uint64_t const previous = c == 0 ? 0 : (fine.code(c - 1) >> shift) + 1;
        for (std::uint64_t j = previous; j <= k; ++j) coarse_begin(j) = c;
      });
  std::uint64_t last = 0;
  Kokkos::parallel_reduce(
      "kfmm::fof::last_coarse_cell", Kokkos::RangePolicy<ExecutionSpace>(space, 0, 1),
      KOKKOS_LAMBDA(int, std::uint64_t& value) { value = fine.code(fine_cells - 1) >> shift; }, last);
  Kokkos::parallel_for(
      "kfmm::fof::coarse_grid_tail", Kokkos::RangePolicy<ExecutionSpace>(space, last + 1, coarse_cells + 1),
      KOKKOS_LAMBDA(std::size_t j) { coarse_begin(j) = fine_cells; });
}

/// Direct tables of the coarse cells holding many fine cells (dense regions), so that finding
/// a link cell's fine cells there takes two reads instead of a binary search over thousands:
/// first(table · stride + m) = first fine cell of the coarse cell whose sub-cell (the Morton
/// code of its place `levels` levels below the coarse cell) is ≥ m, for m in [0, 8^levels].
struct FoFDenseTables {
  ScalarView<int> table;  // per coarse cell: its table, −1 for none (empty View: no tables)
  ScalarView<int> first;
  // Per sub-cell when the sub-cells are the link cells: 1 once all of the link cell's points
  // are one component (it stays so), else 0 (or not known yet).
  ScalarView<std::uint8_t> united;
  int levels = 0;  // sub-cell levels below a coarse cell: min(link levels, 3)
  int stride = 1;  // 8^levels + 1

  KOKKOS_INLINE_FUNCTION int of(std::uint64_t t) const { return table.extent(0) > 0 ? table(t) : -1; }
};

/// A table for each coarse cell of at least this many fine cells: the tables take at most two
/// ints per fine cell.
inline constexpr int fof_dense_table_least = 256;

/// Whether coarse cell t gets a direct table.
KOKKOS_INLINE_FUNCTION bool fof_dense_cell(ScalarView<int> const& coarse_begin, std::size_t t) {
  return coarse_begin(t + 1) - coarse_begin(t) >= fof_dense_table_least;
}

FoFDenseTables fof_dense_tables(ExecutionSpace const& space, FoFGrid const& grid, FoFCells const& fine, int cells,
                                ScalarView<int> const& coarse_begin) {
  FoFDenseTables dense;
  dense.levels = std::min(grid.inside - 1, 3);
  if (dense.levels == 0) return dense;  // a link cell is a coarse cell: no search to spare
  int const sub_cells = 1 << (3 * dense.levels);
  dense.stride = sub_cells + 1;
  std::size_t const coarse_cells = grid.coarse_cells();
  int tables = 0;
  Kokkos::parallel_reduce(
      "kfmm::fof::count_dense_cells", Kokkos::RangePolicy<ExecutionSpace>(space, 0, coarse_cells),
      KOKKOS_LAMBDA(std::size_t t, int& count) { count += fof_dense_cell(coarse_begin, t) ? 1 : 0; },
      tables);
  if (tables == 0) return dense;
  dense.table = allocate_large<ScalarView<int>>("kfmm::fof::dense_table", coarse_cells);
  dense.first = allocate_large<ScalarView<int>>("kfmm::fof::dense_first", std::size_t(tables) * dense.stride);
  if (dense.levels == grid.inside - 1)
    dense.united = ScalarView<std::uint8_t>("kfmm::fof::dense_united", std::size_t(tables) * dense.stride);
  auto const table = dense.table;
  auto const first = dense.first;
  Kokkos::parallel_scan(
      "kfmm::fof::dense_tables", Kokkos::RangePolicy<ExecutionSpace>(space, 0, coarse_cells),
      KOKKOS_LAMBDA(std::size_t t, int& index, bool final) {
        bool const dense_cell = fof_dense_cell(coarse_begin, t);
        if (final) table(t) = dense_cell ? index : -1;
        if (dense_cell) ++index;
      });
  int const shift = 3 * (grid.inside - dense.levels);  // fine code → sub-cell code
  int const top_shift = 3 * grid.inside;               // fine code → coarse index
  std::uint64_t const mask = std::uint64_t(sub_cells - 1);
  int const stride = dense.stride;
  Kokkos::parallel_for(
      "kfmm::fof::dense_first", Kokkos::RangePolicy<ExecutionSpace>(space, 0, cells), KOKKOS_LAMBDA(int c) {
        std::uint64_t const code = fine.code(c);
        std::uint64_t const t = code >> top_shift;
        int const id = table(t);
        if (id < 0) return;
        int* const row = &first(std::size_t(id) * stride);
        int const m = int((code >> shift) & mask);
        int const previous = c == coarse_begin(t) ? -1 : int((fine.code(c - 1) >> shift) & mask);
        for (int j = previous + 1; j <= m; ++j) row[j] = c;
        if (c + 1 == coarse_begin(t + 1))
          for (int j = m + 1; j <= sub_cells; ++j) row[j] = c + 1;
      });
  return dense;
}

/// Coordinate of the neighbour at offset d ∈ {−1, 0, 1} of coarse coordinate c; false when
/// there is none (open boundary) or it repeats another offset's cell (periodic, < 3 per axis).
KOKKOS_INLINE_FUNCTION bool fof_neighbour(int c, int d, int side, bool periodic, int& out) {
  out = c + d;
  if (!periodic) return out >= 0 && out < side;
  if ((side == 1 && d != 0) || (side == 2 && d == -1)) return false;
  out = out < 0 ? out + side : out >= side ? out - side : out;
  return true;
}

/// Where the coarse cells around a link cell hold few fine cells in all (sparse regions), they
/// are scanned whole; beyond this many, the link cells around it are looked up instead.
inline constexpr int fof_scan_limit = 32;

/// Tests every pair of fine cells (A, B), B ≥ A, closer than the linking length and links their
/// points closer than it. One work item per link cell (edge ≥ the linking length), run by its
/// first fine cell. B is looked for in the coarse cells (edge ≥ the linking length) A's box
/// reaches: A's own and its neighbours towards the faces A lies within a linking length of.
/// Where those hold more than fof_scan_limit fine cells, B is looked for in the 27 link cells
/// around A's instead, each found once for all the fine cells of A's link cell: in a direct
/// table where its coarse cell holds many fine cells (fof_dense_tables), else by a binary
/// search inside its coarse cell. A link cell whose points are all one component says so in
/// that table, so that a neighbour already joined to it is passed over with one comparison of
/// roots; the link cells run from the last, so that most of the neighbours a link cell links
/// with (those of larger code) have run before it.
void fof_link_cells(ExecutionSpace const& space, FoFGrid const& grid, FoFCells const& fine, int cells,
                    ScalarView<int> const& coarse_begin, FoFDenseTables const& dense) {
  int const inside = grid.inside;  // fine levels inside a coarse cell
  int const extra = inside - 1;     // link levels inside a coarse cell
  int const below = 1;              // fine levels inside a link cell
  std::uint64_t const top_side = std::uint64_t(grid.coarse_side);
  int const side = grid.coarse_side << extra;  // link cells per axis
  bool const periodic = grid.box > 0;
  double const coarse_edge = grid.fine_edge * double(1 << inside);
  // A little over the linking length: a point within it of a face by the keys' rounding still
  // reaches across.
  double const reach = std::sqrt(grid.link2) + 1e-9 * coarse_edge;
  double const c0 = grid.corner[0], c1 = grid.corner[1], c2 = grid.corner[2];
  int const most_per_link_cell = 1 << (3 * below);
  Kokkos::parallel_for(
      "kfmm::fof::link_cells", Kokkos::RangePolicy<ExecutionSpace, Kokkos::Schedule<Kokkos::Dynamic>>(space, 0, cells),
      KOKKOS_LAMBDA(int item) {
        // Last cell first: a link cell's neighbours of larger code, which it is to link with,
        // have mostly run, so may already be known united (FoFDenseTables::united).
        int const a0 = cells - 1 - item;
        std::uint64_t const own = fine.code(a0) >> (3 * below);  // the link cell's code: coarse index, Morton inside
        if (a0 > 0 && (fine.code(a0 - 1) >> (3 * below)) == own) return;  // not the link cell's first fine cell
        int a1 = a0 + 1;
        while (a1 < cells && a1 - a0 < most_per_link_cell && (fine.code(a1) >> (3 * below)) == own) ++a1;
        double const corner[3] = {c0, c1, c2};
        std::uint64_t const top_index = fine.code(a0) >> (3 * inside);
        int const top_cell[3] = {int(top_index % top_side), int((top_index / top_side) % top_side),
                                 int(top_index / (top_side * top_side))};
        bool const all = periodic && top_side < 3;  // every offset (fof_neighbour drops the repeats)

        // Offsets of the coarse cells a box [lo, hi] reaches along axis k.
        auto const reached = [&](int k, double lo, double hi, int& from, int& to) {
          double const face = corner[k] + coarse_edge * top_cell[k];
          from = all || lo - reach < face ? -1 : 0;
          to = all || hi + reach >= face + coarse_edge ? 1 : 0;
        };
        // f(first, last) for the fine cells [first, last) of each coarse cell in reach whose index
        // is ≥ the own one's (the pairs with smaller ones are theirs), from fine cell a on in the own one.
        auto const for_coarse_cells = [&](int const from[3], int const to[3], int a, auto const& f) {
          for (int dz = from[2]; dz <= to[2]; ++dz) {
            int z;
            if (!fof_neighbour(top_cell[2], dz, int(top_side), periodic, z)) continue;
            for (int dy = from[1]; dy <= to[1]; ++dy) {
              int y;
              if (!fof_neighbour(top_cell[1], dy, int(top_side), periodic, y)) continue;
              for (int dx = from[0]; dx <= to[0]; ++dx) {
                int x;
                if (!fof_neighbour(top_cell[0], dx, int(top_side), periodic, x)) continue;
                std::uint64_t const t = (std::uint64_t(z) * top_side + std::uint64_t(y)) * top_side + std::uint64_t(x);
                if (t < top_index) continue;
                f(t == top_index ? a : coarse_begin(t), coarse_begin(t + 1));
              }
            }
          }
        };

        // Sparse, one fine cell (the most common case there): its candidates are linked as they
        // are counted, until they turn out to be too many (what was linked stays linked).
        if (a1 - a0 == 1) {
          double ac[3], ah[3];
          bool a_whole;
          fine.bounds(a0, ac, ah, a_whole);
          int from[3], to[3];
          for (int k = 0; k < 3; ++k) reached(k, ac[k] - ah[k], ac[k] + ah[k], from[k], to[k]);
          int found = 0;
          for_coarse_cells(from, to, a0, [&](int first, int last) {
            found += last - first;
            if (found <= fof_scan_limit)
              for (int b = first; b < last; ++b) fine.link(a0, b, ac, ah, a_whole);
          });
          if (found <= fof_scan_limit) return;
        }
        // Sparse, several fine cells: how many fine cells the coarse cells their points reach hold.
        double lo[3], hi[3];
        for (int a = a0; a < a1; ++a) {
          double ac[3], ah[3];
          bool whole;
          fine.bounds(a, ac, ah, whole);
          for (int k = 0; k < 3; ++k) {
            lo[k] = a == a0 || ac[k] - ah[k] < lo[k] ? ac[k] - ah[k] : lo[k];
            hi[k] = a == a0 || ac[k] + ah[k] > hi[k] ? ac[k] + ah[k] : hi[k];
          }
        }
        int from[3], to[3];
        for (int k = 0; k < 3; ++k) reached(k, lo[k], hi[k], from[k], to[k]);
        int found = 0;
        for_coarse_cells(from, to, a0, [&](int first, int last) { found += last - first; });
        if (found <= fof_scan_limit) {
          for (int a = a0; a < a1; ++a) {
            double ac[3], ah[3];
            bool a_whole;
            fine.bounds(a, ac, ah, a_whole);
            for (int k = 0; k < 3; ++k) reached(k, ac[k] - ah[k], ac[k] + ah[k], from[k], to[k]);
            for_coarse_cells(from, to, a, [&](int first, int last) {
              for (int b = first; b < last; ++b) fine.link(a, b, ac, ah, a_whole);
            });
          }
          return;
        }

        // Dense: the link cells around.
        std::uint64_t const in_top = own & ((std::uint64_t(1) << (3 * extra)) - 1);
        int cell[3];
        for (int k = 0; k < 3; ++k) cell[k] = (top_cell[k] << extra) | int(compact_bits(in_top >> k));
        int const mask = (1 << extra) - 1;
        // Inside A's link cell each pair of fine cells once (B ≥ A).
        for (int a = a0; a < a1; ++a) {
          double ac[3], ah[3];
          bool a_whole;
          fine.bounds(a, ac, ah, a_whole);
          for (int b = a; b < a1; ++b) fine.link(a, b, ac, ah, a_whole);
        }
        // When all of A's link cell is now one component (it stays one), a neighbour's fine cell
        // B linked as a whole that is already in it needs nothing more: one comparison of roots
        // instead of a test per fine cell of A (the common case in dense regions, where the
        // neighbours have been joined through others).
        int const a_point = fine.begin(a0);
        bool united = true;
        for (int a = a0; a < a1 && united; ++a)
          united = fine.whole(a) && fof_find(fine.parent, fine.begin(a)) == fof_find(fine.parent, a_point);
        bool const flags = dense.united.extent(0) > 0;
        if (united && flags) {
          int const table = dense.of(top_index);
          if (table >= 0)
            static_cast<volatile std::uint8_t*>(
                dense.united.data())[std::size_t(table) * dense.stride + int(in_top)] = 1;
        }
        // Each pair of link cells once, from the one whose code is smaller (its fine cells come
        // first).
        for (int dz = -1; dz <= 1; ++dz) {
          int z;
          if (!fof_neighbour(cell[2], dz, side, periodic, z)) continue;
          for (int dy = -1; dy <= 1; ++dy) {
            int y;
            if (!fof_neighbour(cell[1], dy, side, periodic, y)) continue;
            for (int dx = -1; dx <= 1; ++dx) {
              int x;
              if (!fof_neighbour(cell[0], dx, side, periodic, x)) continue;
              std::uint64_t const t =
                  (std::uint64_t(z >> extra) * top_side + std::uint64_t(y >> extra)) * top_side + std::uint64_t(x >> extra);
              std::uint64_t const target = (t << (3 * extra)) | fof_morton(std::uint32_t(x & mask),
                                                                           std::uint32_t(y & mask),
                                                                           std::uint32_t(z & mask));
              if (target <= own) continue;
              // The fine cells of that link cell: a run inside its coarse cell's fine cells.
              int b_first = coarse_begin(t), b_last = coarse_begin(t + 1);
              int const table = dense.of(t);
              if (table >= 0) {
                int const m = int((target & ((std::uint64_t(1) << (3 * extra)) - 1)) >> (3 * (extra - dense.levels)));
                std::size_t const entry = std::size_t(table) * dense.stride + m;
                b_first = dense.first(entry);
                b_last = dense.first(entry + 1);
                // Both link cells united and already one component: nothing to link.
                if (united && flags && b_first < b_last &&
                    static_cast<volatile std::uint8_t const*>(dense.united.data())[entry] != 0 &&
                    fof_find(fine.parent, fine.begin(b_first)) == fof_find(fine.parent, a_point))
                  continue;
              }
              if (extra > (table >= 0 ? dense.levels : 0)) {
                auto const link_code = [&](int b) { return fine.code(b) >> (3 * below); };
                b_first = lower_bound(link_code, b_first, b_last, target);
                int const bound = b_last - b_first > most_per_link_cell ? b_first + most_per_link_cell : b_last;
                b_last = upper_bound(link_code, b_first, bound, target);
              }
              if (b_first == b_last) continue;
              if (united) {
                for (int b = b_first; b < b_last; ++b) {
                  if (fine.whole(b) && fof_find(fine.parent, fine.begin(b)) == fof_find(fine.parent, a_point)) continue;
                  for (int a = a0; a < a1; ++a) {
                    double ac[3], ah[3];
                    bool a_whole;
                    fine.bounds(a, ac, ah, a_whole);
                    if (fine.link(a, b, ac, ah, a_whole)) break;  // B has joined all of A
                  }
                }
                continue;
              }
              for (int a = a0; a < a1; ++a) {
                double ac[3], ah[3];
                bool a_whole;
                fine.bounds(a, ac, ah, a_whole);
                for (int b = b_first; b < b_last; ++b) fine.link(a, b, ac, ah, a_whole);
              }
            }
          }
        }
      });
}

}  // namespace detail

namespace detail {

/// The linked points of one pass: the union-find forest over the points in cell order
/// (parent), the permutation from that order to the input's, and the sorted keys (dead after
/// linking: work space for what follows).
struct FoFForest {
  ScalarView<std::uint32_t> permutation;
  ScalarView<int> parent;
  ScalarView<std::uint64_t> keys;
};

FoFForest fof_forest(ExecutionSpace const& space, Vec3View<double> const& pos, std::size_t n, double linking_length,
                     double box_size) {
  if (n > max_rank_particles)
    fail("friends-of-friends: {} points (own and imported) on one rank exceed the limit {} (int indices); use more "
         "ranks",
         n, max_rank_particles);
  if (!(linking_length > 0) || !std::isfinite(linking_length))
    fail("friends-of-friends: linking length {} must be finite and > 0", linking_length);

  FoFGrid grid;
  grid.box = box_size;
  grid.link2 = linking_length * linking_length;
  double const l = linking_length;
  // Coarse cells: at most max(2^18, n), so that their table stays small beside the points.
  std::size_t const max_cells = std::max<std::size_t>(std::size_t(1) << 18, n);
  int most_side = int(std::cbrt(double(max_cells)));
  while (std::size_t(most_side + 1) * (most_side + 1) * (most_side + 1) <= max_cells) ++most_side;
  while (std::size_t(most_side) * most_side * most_side > max_cells) --most_side;
  constexpr int most_inside = 10;  // 3·10 bits of Morton code under ≤ 31 bits of coarse index
  if (box_size > 0) {
    // The cells tile the box: fine_side · fine_edge = box with fine_edge in [l/2, l/√3] (or
    // just ≥ l/2 where no such multiple of 2^inside exists), the fewest levels inside a coarse
    // cell that keep the coarse cells within bounds.
    for (int inside = 1;; ++inside) {
      double const unit = l * double(1 << inside);
      double const most = std::floor(2 * box_size / unit * (1 - 1e-12));  // fine edge ≥ l/2, beyond round-off
      if (most > most_side && inside < most_inside) continue;
      double const least = std::ceil(std::sqrt(3.0) * box_size / unit);  // fine edge ≤ l/√3
      grid.coarse_side = int(std::max(1.0, std::min(least <= most ? least : most, double(most_side))));
      grid.inside = inside;
      break;
    }
    grid.fine_edge = box_size / double(grid.fine_side());
  } else {
    // Open: fine cells of edge l/√3 from the lower corner of the bounds, as many as cover them
    // (wider where the bounds are too far apart for the coarse grid's bounds).
    double lo[3], hi[3];
    compute_bounds(space, pos, n, lo, hi);
    double extent = 0;
    for (int k = 0; k < 3; ++k) {
      grid.corner[k] = lo[k];
      extent = std::max(extent, hi[k] - lo[k]);
    }
    double edge = l / std::sqrt(3.0);
    double const cover = std::floor(extent / edge) + 1;  // fine cells per axis needed
    int inside = 1;
    while (inside < most_inside && std::ceil(cover / double(1 << inside)) > most_side) ++inside;
    double side = std::ceil(cover / double(1 << inside));
    if (side > most_side) {
      side = most_side;
      edge = std::max(edge, extent / (double(most_side) * double(1 << inside)) * (1 + 1e-12));
    }
    grid.coarse_side = int(side);
    grid.inside = inside;
    grid.fine_edge = edge;
  }
  std::size_t const coarse_cells = grid.coarse_cells();

  FoFForest forest;
  forest.keys = allocate_large<ScalarView<std::uint64_t>>("kfmm::fof::keys", n);
  forest.permutation = allocate_large<ScalarView<std::uint32_t>>("kfmm::fof::permutation", n);
  auto const sorted = allocate_large<Vec3View<double>>("kfmm::fof::sorted", n);
  fof_sorted_points(space, pos, n, grid, forest.keys, forest.permutation, sorted);

  FoFCells fine_cells;
  int const cells = fof_fine_cells(space, forest.keys, n, fine_cells.begin);
  int const several = fof_box_slots(space, fine_cells.begin, cells, fine_cells.slot);
  fine_cells.keys = forest.keys;
  fine_cells.sorted = sorted;
  fine_cells.boxes = allocate_large<FoFCellBoxes>("kfmm::fof::cell_boxes", several);
  forest.parent = allocate_large<ScalarView<int>>("kfmm::fof::parent", n);
  fine_cells.parent = forest.parent.data();
  fine_cells.box = grid.box;
  fine_cells.link2 = grid.link2;
  fof_cell_boxes(space, fine_cells, cells);

  auto const coarse_begin = allocate_large<ScalarView<int>>("kfmm::fof::coarse_begin", coarse_cells + 1);
  fof_coarse_grid(space, fine_cells, cells, 3 * grid.inside, coarse_cells, coarse_begin);
  auto const dense = fof_dense_tables(space, grid, fine_cells, cells, coarse_begin);
  fof_link_cells(space, grid, fine_cells, cells, coarse_begin, dense);
  return forest;
}

}  // namespace detail

void fof_components(ExecutionSpace const& space, Vec3View<double> const& pos, std::size_t n, double linking_length,
                    double box_size, ScalarView<int> const& component) {
  if (n == 0) return;
  if (component.extent(0) < n || pos.extent(0) < n)
    fail("fof_components: n = {} exceeds the positions ({}) or the component View ({})", n, pos.extent(0),
         component.extent(0));
  auto const forest = detail::fof_forest(space, pos, n, linking_length, box_size);
  // Roots in sorted order, reported as input indices.
  auto const permutation = forest.permutation;
  int* const p = forest.parent.data();
  Kokkos::parallel_for(
      "kfmm::fof::components", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n), KOKKOS_LAMBDA(std::size_t i) {
        component(permutation(i)) = int(permutation(detail::fof_find(p, int(i))));
      });
  space.fence();
}

void fof_labels(ExecutionSpace const& space, Vec3View<double> const& pos, ScalarView<std::uint64_t> const& id,
                std::size_t n, double linking_length, double box_size, ScalarView<std::uint64_t> const& label) {
  if (n == 0) return;
  if (label.extent(0) < n || pos.extent(0) < n || id.extent(0) < n)
    fail("fof_labels: n = {} exceeds the positions ({}), the ids ({}) or the label View ({})", n, pos.extent(0),
         id.extent(0), label.extent(0));
  auto const forest = detail::fof_forest(space, pos, n, linking_length, box_size);
  // The smallest id per root, kept in the root's slot of the (now free) keys.
  auto const permutation = forest.permutation;
  auto const smallest = forest.keys;
  int* const p = forest.parent.data();
  // Roots first, by plain writes (most points are roots of their own where few are linked);
  // then the other points, atomically.
  Kokkos::parallel_for(
      "kfmm::fof::root_ids", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n), KOKKOS_LAMBDA(std::size_t i) {
        smallest(i) = p[i] == int(i) ? id(permutation(i)) : std::numeric_limits<std::uint64_t>::max();
      });
  Kokkos::parallel_for(
      "kfmm::fof::smallest_id", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n), KOKKOS_LAMBDA(std::size_t i) {
        if (p[i] != int(i)) detail::fof_atomic_min(&smallest(detail::fof_find(p, int(i))), id(permutation(i)));
      });
  Kokkos::parallel_for(
      "kfmm::fof::labels", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n), KOKKOS_LAMBDA(std::size_t i) {
        label(permutation(i)) = smallest(detail::fof_find(p, int(i)));
      });
  space.fence();
}

void fof_min_labels(ExecutionSpace const& space, ScalarView<int> const& component, ScalarView<std::uint64_t> const& id,
                    std::size_t n, ScalarView<std::uint64_t> const& label) {
  auto const smallest = allocate_large<ScalarView<std::uint64_t>>("kfmm::fof::smallest", n);
  Kokkos::deep_copy(space, smallest, std::numeric_limits<std::uint64_t>::max());
  Kokkos::parallel_for(
      "kfmm::fof::smallest_id", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t i) { detail::fof_atomic_min(&smallest(component(i)), id(i)); });
  Kokkos::parallel_for(
      "kfmm::fof::labels", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t i) { label(i) = smallest(component(i)); });
  space.fence();
}

double fof_linking_length(FoFOptions const& options, std::uint64_t num_total, double const lo[3], double const hi[3]) {
  double const box = options.box_size;
  if (!std::isfinite(box) || box < 0)
    fail("friends-of-friends: box size {} must be finite and >= 0 (0: open boundaries)", box);
  if (box > 0)
    for (int k = 0; k < 3; ++k)
      if (num_total > 0 && hi[k] - lo[k] > box)
        fail("friends-of-friends: the particles extend over {} along {} ([{}, {}]), more than the periodic box size "
             "{}; give the box the particles live in (or 0 for open boundaries)",
             hi[k] - lo[k], "xyz"[k], lo[k], hi[k], box);
  double length = options.linking_length;
  if (length != 0) {
    if (!(length > 0) || !std::isfinite(length))
      fail("friends-of-friends: linking length {} must be finite and > 0 (or 0 to use b)", length);
  } else {
    if (!(options.b > 0) || !std::isfinite(options.b))
      fail("friends-of-friends: b = {} must be finite and > 0 (the linking length is b times the mean "
           "interparticle separation; 0.2 is usual)",
           options.b);
    if (num_total == 0) return 0;
    double volume = 1;
    if (box > 0) {
      volume = box * box * box;
    } else {
      for (int k = 0; k < 3; ++k) volume *= hi[k] - lo[k];
      if (!(volume > 0) || !std::isfinite(volume))
        fail("friends-of-friends: the particles' bounding box [{}, {}] x [{}, {}] x [{}, {}] has volume {}, so there "
             "is no mean interparticle separation; give the linking length directly",
             lo[0], hi[0], lo[1], hi[1], lo[2], hi[2], volume);
    }
    length = options.b * std::cbrt(volume / double(num_total));
  }
  if (box > 0 && !(length < 0.5 * box))
    fail("friends-of-friends: linking length {} must be less than half the periodic box size {}", length, box);
  return length;
}

namespace {

/// Global bounds of the particles and the count of non-finite positions.
void global_bounds(Context const& context, Particles<> const& particles, double lo[3], double hi[3],
                   std::uint64_t& non_finite) {
  ExecutionSpace space;
  auto const pos = particles.pos;
  std::uint64_t bad = 0;
  Kokkos::parallel_reduce(
      "kfmm::fof::non_finite", Kokkos::RangePolicy<ExecutionSpace>(space, 0, particles.num),
      KOKKOS_LAMBDA(std::size_t i, std::uint64_t & count) {
        for (int k = 0; k < 3; ++k)
          if (!compat::math::isfinite(pos(i, k))) {
            ++count;
            break;
          }
      },
      bad);
  compute_bounds(space, pos, particles.num, lo, hi);
  allreduce_bounds(context, lo, hi);
  MPI_Allreduce(&bad, &non_finite, 1, MPI_UINT64_T, MPI_SUM, context.comm());
}

}  // namespace

FoFResult friends_of_friends(Context const& context, Particles<> const& particles, FoFOptions const& options) {
  ExecutionSpace space;
  std::size_t const n = particles.num;
  std::uint64_t local = n, total = 0;
  MPI_Allreduce(&local, &total, 1, MPI_UINT64_T, MPI_SUM, context.comm());
  double lo[3], hi[3];
  std::uint64_t non_finite = 0;
  global_bounds(context, particles, lo, hi, non_finite);
  FoFResult result;
  collectively(context, [&] {
    if (non_finite > 0)
      fail("friends-of-friends: {} particle(s) have non-finite positions; fix the input", non_finite);
    result.linking_length = fof_linking_length(options, total, lo, hi);
  });
  result.label = allocate_large<ScalarView<std::uint64_t>>("kfmm::fof::label", n);
  if (total == 0) return result;
  if (context.size() == 1) {
    collectively(context, [&] {
      fof_labels(space, particles.pos, particles.id, n, result.linking_length, options.box_size, result.label);
    });
  } else {
    detail::fof_distributed(context, particles, result.linking_length, options.box_size, result);
  }
  auto const label = result.label;
  auto const id = particles.id;
  std::uint64_t groups = 0;
  Kokkos::parallel_reduce(
      "kfmm::fof::count_groups", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t i, std::uint64_t & count) { count += label(i) == id(i) ? 1 : 0; }, groups);
  MPI_Allreduce(&groups, &result.num_groups, 1, MPI_UINT64_T, MPI_SUM, context.comm());
  return result;
}

}  // namespace kfmm
