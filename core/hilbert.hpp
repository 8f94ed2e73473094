#pragma once
/// \file
/// \brief 63-bit Peano–Hilbert keys (21 bits per axis) of positions in a bounding cube.
///
/// Keys follow Skilling's transpose algorithm ("Programming the Hilbert curve", AIP Conf. Proc.
/// 707, 2004): table-free, a few bit operations per level, callable on any device. The 3·l most
/// significant bits of a key name the level-l octree cell that contains the point, so every
/// octree cell is one contiguous key range.
#include <kfmm/core/error.hpp>
#include <kfmm/core/kernel_shape.hpp>
#include <kfmm/core/kokkos_compat.hpp>
#include <kfmm/core/types.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace kfmm {

/// Bits per axis of a key; keys use 3 · 21 = 63 bits.
inline constexpr int key_bits_per_axis = 21;
/// Largest integer coordinate along an axis (2^21 − 1).
inline constexpr std::uint32_t max_grid_coordinate = (std::uint32_t(1) << key_bits_per_axis) - 1;

/// \brief A cube enclosing all particles: `corner` is its lowest corner, `size` its edge length
/// (always > 0).
struct BoundingCube {
  double corner[3];
  double size;
};

/// Integer grid coordinates of a point, each in [0, 2^21 − 1].
using GridPoint = Kokkos::Array<std::uint32_t, 3>;

/// \brief The cube centred on the box [lo, hi] with a small margin, so that the largest point
/// maps strictly inside. All-coincident points (or one point) get a cube of positive size.
/// `lo` and `hi` are usually global (the caller allreduces them). Throws kfmm::Error when a
/// bound is not finite or lo > hi (an empty particle set).
inline BoundingCube cube_from_bounds(double const lo[3], double const hi[3]) {
  double extent = 0, magnitude = 0;
  for (int k = 0; k < 3; ++k) {
    if (!std::isfinite(lo[k]) || !std::isfinite(hi[k]) || !std::isfinite(hi[k] - lo[k]) || lo[k] > hi[k])
      fail("cannot build a bounding cube from bounds [{}, {}] along axis {}; the bounds must be finite with "
           "lo <= hi (an empty or non-finite particle set has no bounding cube)",
           lo[k], hi[k], "xyz"[k]);
    extent = std::max(extent, hi[k] - lo[k]);
    magnitude = std::max({magnitude, -lo[k], hi[k]});
  }
  // The margin keeps the largest point off the upper face; the magnitude term keeps the cube
  // larger than the round-off of positions far from the origin, and 1 covers a point at 0.
  double size = extent * (1 + 1e-6) + 1e-12 * magnitude;
  if (!(size > 0)) size = 1;
  BoundingCube cube{};
  for (int k = 0; k < 3; ++k) cube.corner[k] = 0.5 * (lo[k] + hi[k]) - 0.5 * size;
  cube.size = size;
  return cube;
}

namespace detail {

/// Lowest and highest coordinate along each axis.
struct AxisRanges {
  double lo[3], hi[3];
};

/// The reduction of compute_bounds(): all three axes in one pass over the positions. A functor
/// with init/join because a reduction over a struct needs them.
template <class Positions>
struct RangesOf {
  using value_type = AxisRanges;
  Positions pos;

  KOKKOS_FUNCTION void operator()(std::size_t i, value_type& r) const {
    for (int k = 0; k < 3; ++k) {
      double const x = pos(i, k);
      if (x < r.lo[k]) r.lo[k] = x;
      if (x > r.hi[k]) r.hi[k] = x;
    }
  }
  KOKKOS_FUNCTION void init(value_type& r) const {
    for (int k = 0; k < 3; ++k) {
      r.lo[k] = Kokkos::reduction_identity<double>::min();
      r.hi[k] = Kokkos::reduction_identity<double>::max();
    }
  }
  KOKKOS_FUNCTION void join(value_type& into, value_type const& from) const {
    for (int k = 0; k < 3; ++k) {
      if (from.lo[k] < into.lo[k]) into.lo[k] = from.lo[k];
      if (from.hi[k] > into.hi[k]) into.hi[k] = from.hi[k];
    }
  }
#if KFMM_KOKKOS_NEEDS_VOLATILE_JOIN
  KOKKOS_FUNCTION void join(volatile value_type& into, volatile value_type const& from) const {
    for (int k = 0; k < 3; ++k) {
      if (from.lo[k] < into.lo[k]) into.lo[k] = from.lo[k];
      if (from.hi[k] > into.hi[k]) into.hi[k] = from.hi[k];
    }
  }
#endif
};

}  // namespace detail

/// \brief Componentwise minimum and maximum of the first `n` positions (on this rank).
/// An empty range gives lo = +DBL_MAX, hi = −DBL_MAX, the identities of a global MIN/MAX reduction.
template <class ExecutionSpace, class Memory>
void compute_bounds(ExecutionSpace const& space, Vec3View<double, Memory> const& pos, std::size_t n, double lo[3],
                    double hi[3]) {
  detail::AxisRanges ranges;
  Kokkos::parallel_reduce("kfmm::hilbert::bounds", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
                          detail::RangesOf<Vec3View<double, Memory>>{pos}, ranges);
  for (int k = 0; k < 3; ++k) {
    lo[k] = ranges.lo[k];
    hi[k] = ranges.hi[k];
  }
}

namespace detail {

/// Spreads the low 21 bits of x so that bit q moves to bit 3q.
KOKKOS_INLINE_FUNCTION std::uint64_t spread_bits(std::uint64_t x) {
  x &= 0x1fffffull;
  x = (x | x << 32) & 0x1f00000000ffffull;
  x = (x | x << 16) & 0x1f0000ff0000ffull;
  x = (x | x << 8) & 0x100f00f00f00f00full;
  x = (x | x << 4) & 0x10c30c30c30c30c3ull;
  x = (x | x << 2) & 0x1249249249249249ull;
  return x;
}

/// Inverse of spread_bits: gathers bits 0, 3, 6, … into the low 21 bits.
KOKKOS_INLINE_FUNCTION std::uint32_t compact_bits(std::uint64_t x) {
  x &= 0x1249249249249249ull;
  x = (x ^ (x >> 2)) & 0x10c30c30c30c30c3ull;
  x = (x ^ (x >> 4)) & 0x100f00f00f00f00full;
  x = (x ^ (x >> 8)) & 0x1f0000ff0000ffull;
  x = (x ^ (x >> 16)) & 0x1f00000000ffffull;
  x = (x ^ (x >> 32)) & 0x1fffffull;
  return static_cast<std::uint32_t>(x);
}

}  // namespace detail

/// \brief Hilbert keys of W points at once (lanes): keys[w] of integer coordinates
/// (ix[w], iy[w], iz[w]), each < 2^21. Bits 62…0 hold, level by level from the top, one bit of
/// x, y and z of Skilling's transposed Hilbert index. Written with masks instead of branches and
/// with the lane loops innermost: one key is a chain of ~500 dependent bit operations (~70 ns),
/// while W keys side by side vectorise.
template <int W>
KOKKOS_INLINE_FUNCTION void hilbert_keys_lanes(std::uint32_t const* ix, std::uint32_t const* iy, std::uint32_t const* iz,
                                               std::uint64_t* keys) {
  std::uint32_t x[W], y[W], z[W];
  for (int l = 0; l < W; ++l) {
    x[l] = ix[l] & max_grid_coordinate;
    y[l] = iy[l] & max_grid_coordinate;
    z[l] = iz[l] & max_grid_coordinate;
  }
  // Inverse undo of the excess work, for each axis a in turn (x, y, z): where bit q of a is
  // set, invert the low bits of x; elsewhere exchange the low bits of x and a. With d = x ^ a
  // and s the mask of bit q of a, both cases are x ^= p & (s | d), a ^= p & d & ~s; the mask is
  // bit q shifted to the sign and spread by an arithmetic shift.
  for (int bit = key_bits_per_axis - 1; bit > 0; --bit) {
    std::uint32_t const p = (std::uint32_t(1) << bit) - 1;
    int const up = 31 - bit;
    for (int l = 0; l < W; ++l) {
      std::uint32_t u = x[l], v = y[l], w = z[l];
      u ^= p & std::uint32_t(std::int32_t(u << up) >> 31);  // axis x itself: an exchange with itself is nothing
      std::uint32_t set = std::uint32_t(std::int32_t(v << up) >> 31);
      std::uint32_t d = u ^ v;
      u ^= p & (set | d);
      v ^= p & d & ~set;
      set = std::uint32_t(std::int32_t(w << up) >> 31);
      d = u ^ w;
      u ^= p & (set | d);
      w ^= p & d & ~set;
      x[l] = u;
      y[l] = v;
      z[l] = w;
    }
  }
  for (int l = 0; l < W; ++l) {
    // Gray encode; bit q of t is the parity of the bits of w above q (a prefix xor).
    std::uint32_t const u = x[l], v = y[l] ^ u, w = z[l] ^ v;
    std::uint32_t t = w >> 1;
    t ^= t >> 1;
    t ^= t >> 2;
    t ^= t >> 4;
    t ^= t >> 8;
    t ^= t >> 16;
    keys[l] = detail::spread_bits(u ^ t) << 2 | detail::spread_bits(v ^ t) << 1 | detail::spread_bits(w ^ t);
  }
}

/// \brief Hilbert key of integer coordinates (each < 2^21): one lane of hilbert_keys_lanes().
KOKKOS_INLINE_FUNCTION std::uint64_t hilbert_key(std::uint32_t ix, std::uint32_t iy, std::uint32_t iz) {
  std::uint64_t key;
  hilbert_keys_lanes<1>(&ix, &iy, &iz, &key);
  return key;
}

/// \brief Integer coordinates of a key (inverse of hilbert_key).
KOKKOS_INLINE_FUNCTION GridPoint hilbert_coordinates(std::uint64_t key) {
  std::uint32_t x[3] = {detail::compact_bits(key >> 2), detail::compact_bits(key >> 1), detail::compact_bits(key)};
  // Gray decode.
  std::uint32_t t = x[2] >> 1;
  x[2] ^= x[1];
  x[1] ^= x[0];
  x[0] ^= t;
  // Undo the excess work.
  for (std::uint32_t q = 2; q != (std::uint32_t(1) << key_bits_per_axis); q <<= 1) {
    std::uint32_t const p = q - 1;
    for (int i = 2; i >= 0; --i) {
      if (x[i] & q) {
        x[0] ^= p;
      } else {
        t = (x[0] ^ x[i]) & p;
        x[0] ^= t;
        x[i] ^= t;
      }
    }
  }
  return GridPoint{{x[0], x[1], x[2]}};
}

/// \brief Grid coordinate along axis k of coordinate x in `cube`, clamped to [0, 2^21 − 1]
/// (NaN maps to 0).
KOKKOS_INLINE_FUNCTION std::uint32_t grid_coordinate(BoundingCube const& cube, int k, double x) {
  double const scale = double(std::uint64_t(1) << key_bits_per_axis) / cube.size;
  double const t = (x - cube.corner[k]) * scale;
  return t >= double(max_grid_coordinate) ? max_grid_coordinate : t >= 0 ? static_cast<std::uint32_t>(t) : 0u;
}

/// \brief Grid coordinates of a point in `cube`, clamped to [0, 2^21 − 1] (NaN maps to 0).
KOKKOS_INLINE_FUNCTION GridPoint integer_coordinates(BoundingCube const& cube, double x, double y, double z) {
  return GridPoint{{grid_coordinate(cube, 0, x), grid_coordinate(cube, 1, y), grid_coordinate(cube, 2, z)}};
}

/// \brief Lowest grid corner of the level-`level` cell (0 ≤ level ≤ 21) that holds `key`:
/// the cell of edge 2^(21−level) grid units named by the top 3·level bits of the key.
KOKKOS_INLINE_FUNCTION GridPoint cell_corner(std::uint64_t key, int level) {
  GridPoint corner = hilbert_coordinates(key);
  std::uint32_t const mask = max_grid_coordinate & ~((std::uint32_t(1) << (key_bits_per_axis - level)) - 1);
  for (int k = 0; k < 3; ++k) corner[k] &= mask;
  return corner;
}

/// \brief compute_keys() with W points per thread: W = 64 lets the key computation vectorise
/// on CPUs with several vectors in flight (see hilbert_keys_lanes), W = 1 is one thread per
/// particle (the GPU shape). Idle lanes
/// of the last block repeat its first point. Public so that tests run both shapes anywhere.
template <int W, class ExecutionSpace, class Memory>
void compute_keys_in_lanes(ExecutionSpace const& space, BoundingCube const& cube, Vec3View<double, Memory> const& pos,
                           std::size_t n, Kokkos::View<std::uint64_t*, Memory> const& keys) {
  static_assert(W >= 1, "at least one lane");
  if (pos.extent(0) < n || keys.extent(0) < n)
    fail("compute_keys: n = {} exceeds the positions ({}) or keys ({}) extent; allocate at least n entries", n,
         pos.extent(0), keys.extent(0));
  std::size_t const blocks = (n + W - 1) / W;
  Kokkos::parallel_for(
      "kfmm::hilbert::compute_keys", Kokkos::RangePolicy<ExecutionSpace>(space, 0, blocks), KOKKOS_LAMBDA(std::size_t b) {
        std::size_t const first = b * W;
        std::uint32_t gx[W], gy[W], gz[W];
        std::uint64_t block_keys[W];
        if (first + W <= n) {
          // A full block: contiguous rows, no index clamp, so the conversion vectorises too.
          for (int l = 0; l < W; ++l) gx[l] = grid_coordinate(cube, 0, pos(first + l, 0));
          for (int l = 0; l < W; ++l) gy[l] = grid_coordinate(cube, 1, pos(first + l, 1));
          for (int l = 0; l < W; ++l) gz[l] = grid_coordinate(cube, 2, pos(first + l, 2));
        } else {
          for (int l = 0; l < W; ++l) {
            std::size_t const i = first + l < n ? first + l : first;
            gx[l] = grid_coordinate(cube, 0, pos(i, 0));
            gy[l] = grid_coordinate(cube, 1, pos(i, 1));
            gz[l] = grid_coordinate(cube, 2, pos(i, 2));
          }
        }
        hilbert_keys_lanes<W>(gx, gy, gz, block_keys);
        if (first + W <= n) {
          for (int l = 0; l < W; ++l) keys(first + l) = block_keys[l];
        } else {
          for (int l = 0; l < W && first + l < n; ++l) keys(first + l) = block_keys[l];
        }
      });
}

/// Lanes per thread of compute_keys() on ExecSpace now: 64 in the CPU shape, 1 in the GPU shape.
template <class ExecSpace>
int hilbert_key_lanes() {
  return use_gpu_shape<ExecSpace>() ? 1 : 64;
}

/// \brief Writes the Hilbert keys of the first `n` positions into `keys` (extent ≥ n).
template <class ExecutionSpace, class Memory>
void compute_keys(ExecutionSpace const& space, BoundingCube const& cube, Vec3View<double, Memory> const& pos,
                  std::size_t n, Kokkos::View<std::uint64_t*, Memory> const& keys) {
  if constexpr (!gpu_shaped_kernels<ExecutionSpace>())
    if (!use_gpu_shape<ExecutionSpace>()) return compute_keys_in_lanes<64>(space, cube, pos, n, keys);
  compute_keys_in_lanes<1>(space, cube, pos, n, keys);
}

}  // namespace kfmm
