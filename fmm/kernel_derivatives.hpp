#pragma once
/// \file
/// \brief Cartesian derivatives ∂^α K(|x|), |α| ≤ P, of the softened kernels of softening.hpp,
/// for the far field (M2L) of Taylor expansions.
///
/// K(|x|) = f(s) with s = |x|². First the radial derivatives g_m = 2^m dᵐf/dsᵐ (closed forms per
/// kernel piece), then the Cartesian ones by the Hermite recurrence of McMurchie and Davidson
/// (see HermiteRecurrenceTable). The recurrence is a compile-time table; everything is unrolled.
#include <kfmm/fmm/multi_index.hpp>
#include <kfmm/fmm/softening.hpp>

namespace kfmm {

namespace detail {

/// Falling factorial x (x−1) … (x−m+1) of a half-integer x = q/2.
constexpr double falling_half(int q, int m) {
  double r = 1.0;
  for (int i = 0; i < m; ++i) r *= 0.5 * q - i;
  return r;
}

/// One piece of the cubic spline inside h: K = (1/h) Σ_q c_q u^q, u = r/h, q ∈ {−1,0,2,3,4,5}.
/// Exact fractions of the decimals in pair_kernel (GADGET-4's forcetree.h).
struct SplinePiece {
  double c[7];  ///< c[q + 1], q = −1 … 5
};
inline constexpr SplinePiece spline_inner{{0.0, 14.0 / 5, 0.0, -16.0 / 3, 0.0, 48.0 / 5, -32.0 / 5}};  // u < 1/2
inline constexpr SplinePiece spline_outer{
    {-1.0 / 15, 16.0 / 5, 0.0, -32.0 / 3, 16.0, -48.0 / 5, 32.0 / 15}};  // 1/2 ≤ u < 1

/// g_m = 2^m dᵐ/dsᵐ (1/h) Σ_q c_q (s/h²)^{q/2}. Terms with q ≥ 2m are written as
/// u^{q−2m} 2^m/h^{2m+1} (finite at s = 0, where they are the exact polynomial part); the others
/// as (c_q u^q/h)(2/s)^m, which is singular at s = 0 only where the true derivative is.
template <SplinePiece const& piece, int M, class Real>
KOKKOS_FORCEINLINE_FUNCTION void spline_piece_derivatives(Real s, Real u, Real hinv, Real* g) {
  Real upow[6];
  powers<5>(u, upow);
  Real uinv = Real(0);  // only pieces with a 1/u term need it (and there u ≥ 1/2)
  if constexpr (piece.c[0] != 0.0) uinv = Real(1) / u;
  Real const two_over_h2 = Real(2) * hinv * hinv;
  Real const two_over_s = Real(2) / s;
  Real hpow = hinv;        // 2^m / h^{2m+1}
  Real spow = Real(1);     // (2/s)^m
  static_for<M + 1>([&](auto Mc) {
    constexpr int m = decltype(Mc)::value;
    Real polynomial = Real(0);  // terms with q ≥ 2m
    Real singular = Real(0);    // terms with q < 2m, before the factor (2/s)^m
    static_for<7>([&](auto Qc) {
      constexpr int q = decltype(Qc)::value - 1;
      constexpr double coefficient = piece.c[q + 1] * falling_half(q, m);
      if constexpr (coefficient != 0.0) {
        if constexpr (q >= 2 * m) {
          polynomial += Real(coefficient) * upow[q - 2 * m];
        } else {
          singular += Real(coefficient) * (q < 0 ? uinv : upow[q < 0 ? 0 : q]);
        }
      }
    });
    constexpr bool has_singular = [] {
      for (int q = -1; q <= 5; ++q)
        if (q < 2 * m && piece.c[q + 1] * falling_half(q, m) != 0.0) return true;
      return false;
    }();
    g[m] = polynomial * hpow;  // (2/s)^m = ∞ at s = 0 must not meet a zero sum of no terms
    if constexpr (has_singular) g[m] += singular * hinv * spow;
    hpow *= two_over_h2;
    spow *= two_over_s;
  });
}

}  // namespace detail

/// \brief Radial derivatives g_m = 2^m dᵐ/dsᵐ K(√s), m = 0 … M, of the kernel with softening
/// length h (ε for Plummer, 2.8 ε for the spline). Values that over- or underflow to a non-finite
/// number (tiny s at high order; s = 0 where the kernel is not smooth) are set to 0, as in jz-fmm,
/// so that they cannot poison an expansion.
template <SofteningKind kind, int M, class Real>
KOKKOS_INLINE_FUNCTION void radial_derivatives(Real s, Real h, Real* g) {
  using compat::math::sqrt;
  auto newtonian_like = [&](Real g0, Real inv) {  // g_m = −(2m−1) g_{m−1} inv
    g[0] = g0;
    static_for<M>([&](auto Mc) {
      constexpr int m = decltype(Mc)::value + 1;
      g[m] = g[m - 1] * (Real(-(2 * m - 1)) * inv);
    });
  };
  if constexpr (kind == SofteningKind::Plummer) {
    Real const g0 = compat::math::rsqrt(s + h * h);
    newtonian_like(g0, g0 * g0);
  } else {
    if (s >= h * h) {
      Real const g0 = compat::math::rsqrt(s);
      newtonian_like(g0, g0 * g0);
    } else {
      Real const hinv = Real(1) / h;
      Real const u = sqrt(s) * hinv;
      if (u < Real(0.5))
        detail::spline_piece_derivatives<detail::spline_inner, M>(s, u, hinv, g);
      else
        detail::spline_piece_derivatives<detail::spline_outer, M>(s, u, hinv, g);
    }
  }
  for (int m = 0; m <= M; ++m)
    if (!compat::math::isfinite(g[m])) g[m] = Real(0);
}

/// \brief radial_derivatives() for W points at once: g[m·W + w] for s_w, h_w. The Newtonian form
/// (Plummer everywhere, the spline outside h) runs as vector loops over the lanes; lanes inside
/// the spline's softening length take the scalar piecewise path.
template <SofteningKind kind, int M, class Real, int W>
KOKKOS_INLINE_FUNCTION void radial_derivatives_lanes(Real const* s, Real const* h, Real* g) {
  Real inv[W];
  KFMM_LANE_LOOP
  for (int l = 0; l < W; ++l) {
    Real const g0 = compat::math::rsqrt(kind == SofteningKind::Plummer ? s[l] + h[l] * h[l] : s[l]);
    g[l] = g0;
    inv[l] = g0 * g0;
  }
  for (int m = 1; m <= M; ++m) {  // g_m = −(2m−1) g_{m−1} inv
    Real const c = Real(-(2 * m - 1));
    KFMM_LANE_LOOP
    for (int l = 0; l < W; ++l) g[m * W + l] = g[(m - 1) * W + l] * (c * inv[l]);
  }
  if constexpr (kind == SofteningKind::Spline) {
    KFMM_LANE_LOOP
    for (int l = 0; l < W; ++l)
      if (s[l] < h[l] * h[l]) {
        Real inside[M + 1];
        radial_derivatives<kind, M>(s[l], h[l], inside);
        for (int m = 0; m <= M; ++m) g[m * W + l] = inside[m];
      }
  }
  for (int i = 0; i < (M + 1) * W; ++i)
    if (!compat::math::isfinite(g[i])) g[i] = Real(0);
}

/// \brief The recurrence that builds every ∂^α f(|x|²), |α| ≤ P, from the radial derivatives
/// (McMurchie–Davidson's Hermite recurrence): with R⁽ᵐ⁾₀ = g_m and ∂_x g_m = x g_{m+1},
///   R⁽ᵐ⁾_{α+e} = x_e R⁽ᵐ⁺¹⁾_α + α_e R⁽ᵐ⁺¹⁾_{α−e},   ∂^α f = R⁽⁰⁾_α,
/// for |α| ≤ P − m, level m = P … 0: one multiply–add per entry (210 at P = 6, against 259
/// three-factor terms of the closed form). Entries are listed in evaluation order; levels
/// m ≥ 1 live in scratch storage at `storage_offset[m]`, level 0 is the output.
template <int P>
struct HermiteRecurrenceTable {
  static constexpr int count(int order) { return (order + 1) * (order + 2) * (order + 3) / 6; }
  static constexpr int count_entries() {
    int total = 0;
    for (int m = 0; m <= P; ++m) total += count(P - m);
    return total;
  }
  static constexpr int size = count_entries();
  static constexpr int storage = size - count(P);  ///< scratch entries (levels 1 … P)
  int level[size] = {};
  int out[size] = {};     ///< flat index: into scratch for level ≥ 1, into the output for level 0
  int axis[size] = {};    ///< −1 for α = 0 (R⁽ᵐ⁾₀ = g_m)
  int first[size] = {};   ///< scratch index of R⁽ᵐ⁺¹⁾_{α−e}
  int second[size] = {};  ///< scratch index of R⁽ᵐ⁺¹⁾_{α−2e}, −1 when α_e = 1
  double coefficient[size] = {};  ///< α_e − 1
  int storage_offset[P + 2] = {};

  constexpr HermiteRecurrenceTable() {
    // Levels P, P−1, …, 1 are stacked from scratch index 0 upwards.
    int offset = 0;
    for (int m = P; m >= 1; --m) {
      storage_offset[m] = offset;
      offset += count(P - m);
    }
    constexpr MultiIndexTable<P> t{};
    int entry = 0;
    for (int m = P; m >= 0; --m)
      for (int i = 0; i < count(P - m); ++i) {
        level[entry] = m;
        out[entry] = m == 0 ? i : storage_offset[m] + i;
        axis[entry] = t.degree[i] == 0 ? -1 : t.axis[i];
        second[entry] = -1;
        if (t.degree[i] > 0) {
          int const e = t.axis[i];
          int const ae = t.e[i][e];
          first[entry] = storage_offset[m + 1] + t.parent[i];
          if (ae >= 2) {
            int below[3] = {t.e[i][0], t.e[i][1], t.e[i][2]};
            below[e] -= 2;
            second[entry] = storage_offset[m + 1] + flat_index(below[0], below[1], below[2]);
            coefficient[entry] = ae - 1;
          }
        }
        ++entry;
      }
  }
};

template <int P>
inline constexpr HermiteRecurrenceTable<P> hermite_recurrence_table{};

/// \brief Cartesian derivatives from radial ones, for W points at once (lanes):
/// D[α·W + w] = ∂^α f(|x_w|²) for |α| ≤ P, given g[m·W + w] = 2^m f^{(m)}(|x_w|²), m = 0 … P.
/// α runs in the graded layout of multi_index.hpp.
template <int P, class Real, int W>
KOKKOS_INLINE_FUNCTION void cartesian_derivatives_lanes(Real const* x, Real const* y, Real const* z, Real const* g,
                                                        Real* D) {
  constexpr auto const& table = hermite_recurrence_table<P>;
  Real R[(table.storage > 0 ? table.storage : 1) * W];
  Real const* const coordinate[3] = {x, y, z};
  static_for<table.size>([&](auto E) {
    constexpr int entry = decltype(E)::value;
    constexpr int m = table.level[entry];
    Real* const out = (m == 0 ? D : R) + table.out[entry] * W;
    if constexpr (table.axis[entry] < 0) {
      KFMM_LANE_LOOP
      for (int l = 0; l < W; ++l) out[l] = g[m * W + l];
    } else {
      Real const* const c = coordinate[table.axis[entry]];
      Real const* const a = R + table.first[entry] * W;
      if constexpr (table.second[entry] < 0) {
        KFMM_LANE_LOOP
        for (int l = 0; l < W; ++l) out[l] = c[l] * a[l];
      } else {
        Real const* const b = R + table.second[entry] * W;
        Real const k = Real(table.coefficient[entry]);
        KFMM_LANE_LOOP
        for (int l = 0; l < W; ++l) out[l] = c[l] * a[l] + k * b[l];
      }
    }
  });
}

/// \brief kernel_derivatives() for W points at once: D[α·W + w] = ∂^α K(|x_w|) with softening
/// length h_w.
template <SofteningKind kind, int P, class Real, int W>
KOKKOS_INLINE_FUNCTION void kernel_derivatives_lanes(Real const* x, Real const* y, Real const* z, Real const* h,
                                                     Real* D) {
  Real s[W];
  KFMM_LANE_LOOP
  for (int l = 0; l < W; ++l) s[l] = x[l] * x[l] + y[l] * y[l] + z[l] * z[l];
  Real g[(P + 1) * W];
  radial_derivatives_lanes<kind, P, Real, W>(s, h, g);
  cartesian_derivatives_lanes<P, Real, W>(x, y, z, g, D);
}

/// \brief D[α] = ∂^α K(|x|) for |α| ≤ P: the derivative tensor of the softened kernel of kind
/// `kind` with softening length h (ε for Plummer, 2.8 ε for the spline) at x.
template <SofteningKind kind, int P, class Real>
KOKKOS_INLINE_FUNCTION void kernel_derivatives(Real x, Real y, Real z, Real h, Real* D) {
  kernel_derivatives_lanes<kind, P, Real, 1>(&x, &y, &z, &h, D);
}

}  // namespace kfmm
