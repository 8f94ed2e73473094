#pragma once
/// \file
/// \brief An open or periodic (cubic or rectangular) box and its minimum-image arithmetic.
#include <kfmm/core/types.hpp>

#include <cmath>

namespace kfmm {

/// \brief Open boundaries (`enabled == false`) or a periodic box [0, L_x) × [0, L_y) × [0, L_z).
struct PeriodicBox {
  bool enabled = false;
  double length[3] = {0, 0, 0};

  static PeriodicBox open() { return {}; }
  static PeriodicBox cube(double l) { return box(l, l, l); }
  static PeriodicBox box(double lx, double ly, double lz) {
    PeriodicBox b;
    b.enabled = true;
    b.length[0] = lx;
    b.length[1] = ly;
    b.length[2] = lz;
    return b;
  }
};

/// Shift code of an image (sx, sy, sz) ∈ {−1, 0, 1}³: (sx+1) + 3(sy+1) + 9(sz+1); 13 is no shift.
inline constexpr int unshifted_image = 13;
KOKKOS_INLINE_FUNCTION int image_shift(int image, int axis) {
  int const digit = axis == 0 ? image % 3 : axis == 1 ? (image / 3) % 3 : image / 9;
  return digit - 1;
}

/// `x` wrapped into [0, length) (a value that rounds up to `length` becomes 0).
KOKKOS_INLINE_FUNCTION double wrap_coordinate(double x, double length) {
  double w = x - length * compat::math::floor(x / length);
  if (w >= length || w < 0) w = 0;
  return w;
}

/// |dx| folded to its minimum image along an axis of `length` (dx in (−length, length)).
KOKKOS_INLINE_FUNCTION double minimum_image_gap(double dx, double length) {
  double const a = compat::math::fabs(dx);
  double const b = length - a;
  return a < b ? a : b;
}

/// The gap of two intervals along an open axis from the two signed distances between their
/// facing ends (`above`: how far the second starts above the first; `below`: how far the first
/// starts above the second), as selections rather than branches (SIMD lanes and GPU threads
/// take it without diverging): the positive one, or 0 when they overlap.
KOKKOS_INLINE_FUNCTION double separation(double above, double below) {
  double const g = above > below ? above : below;
  return g > 0 ? g : 0;
}

/// Gap between a coordinate `x` and the interval [lo, hi] (lo ≤ hi) along an open axis.
KOKKOS_INLINE_FUNCTION double open_interval_gap(double x, double lo, double hi) { return separation(lo - x, x - hi); }

/// Gap between a coordinate `x` and the interval [lo, hi] along one axis, folded to the
/// minimum image when `length` > 0 (coordinate and interval inside [0, length)): the smallest
/// gap of x and its two images.
KOKKOS_INLINE_FUNCTION double interval_gap(double x, double lo, double hi, double length) {
  double g = open_interval_gap(x, lo, hi);
  if (length > 0) {
    double const g_up = open_interval_gap(x + length, lo, hi);
    double const g_down = open_interval_gap(x - length, lo, hi);
    g = g_up < g ? g_up : g;
    g = g_down < g ? g_down : g;
  }
  return g;
}

/// Gap between the intervals [a, b] and [c, d] along an axis, minimum image when `length` > 0:
/// the smallest gap of [c, d] and the images of [a, b].
KOKKOS_INLINE_FUNCTION double intervals_gap(double a, double b, double c, double d, double length) {
  double g = separation(c - b, a - d);
  if (length > 0) {
    double const up = separation(c - b - length, a + length - d);
    double const down = separation(c - b + length, a - length - d);
    g = up < g ? up : g;
    g = down < g ? down : g;
  }
  return g;
}

}  // namespace kfmm
