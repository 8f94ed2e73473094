#pragma once
/// \file
/// \brief Cartesian Taylor expansions of order P (full, not traceless) of the softened kernel:
/// P2M, M2M, M2L, L2L, L2P. Device-callable, no allocation, fully unrolled at compile time.
///
/// Scaling (all scales are powers of two chosen by the caller, so rescaling is exact):
/// - a node's multipole about its centre c with scale s is stored as
///     M̃_n = Σ_j m_j ((x_j − c)/s)^n / n!,
/// - a node's local expansion about c with scale s is stored as L̃_k with
///     φ(c + s·u) = Σ_k L̃_k u^k,   φ(x) = Σ_j m_j K(|x − x_j|)   (positive; potential = −G φ).
/// So |M̃_n| ≤ Σ m and |L̃_k| ~ φ at any order: float neither overflows nor underflows for tiny or
/// huge nodes. Arrays are Real[ncoeff<P>] in the graded layout of multi_index.hpp.
#include <kfmm/core/kernel_shape.hpp>
#include <kfmm/fmm/kernel_derivatives.hpp>
#include <kfmm/fmm/lane_transpose.hpp>
#include <kfmm/fmm/multi_index.hpp>

namespace kfmm {

/// \brief P2M for W particles at once (lanes): M_lanes[n·W + w] += m_w ((x_w − c)/s)^n / n! for
/// scaled offsets u_w; the caller sums the lanes once per node (vectorises across particles).
template <int P, class Real, int W>
KOKKOS_INLINE_FUNCTION void p2m_lanes(Real const* m, Real const* ux, Real const* uy, Real const* uz, Real* M_lanes) {
  Real w[ncoeff<P> * W];
  monomials_lanes<P, true, Real, W>(ux, uy, uz, w);
  for (int n = 0; n < ncoeff<P>; ++n) {
    KFMM_LANE_LOOP
    for (int l = 0; l < W; ++l) M_lanes[n * W + l] += m[l] * w[n * W + l];
  }
}

/// \brief P2M: accumulates one particle of mass m at scaled offset u = (x − c)/s into M̃: one lane
/// of p2m_lanes().
template <int P, class Real>
KOKKOS_INLINE_FUNCTION void p2m(Real m, Real ux, Real uy, Real uz, Real* M) {
  p2m_lanes<P, Real, 1>(&m, &ux, &uy, &uz, M);
}

/// \brief Number of output coefficients that M2L, L2L and M2M accumulate at once (registers per
/// block).
inline constexpr int coefficient_block = 8;

namespace detail {
/// acc[j·W + l] += Σ X_x Y_y (lane l) over the entries of output first + j in
/// block_table<P, kind, first, count>, every index a compile-time constant. X has W lanes per
/// coefficient (X[x·W + l]); Y too, or, if shared_Y, one value for all lanes (Y[y]).
template <int P, BlockProduct kind, class Real, int W, int first, int count, bool shared_Y = false>
KOKKOS_FORCEINLINE_FUNCTION void block_products(Real const* X, Real const* Y, Real* acc) {
  constexpr auto const& table = block_table<P, kind, first, count>;
  static_for<table.size>([&](auto I) KFMM_INLINE_LAMBDA {
    constexpr int i = decltype(I)::value;
    constexpr int j = table.j[i], x = table.x[i], y = table.y[i];
    Real const* yv = shared_Y ? Y + y : Y + y * W;
    KFMM_LANE_LOOP
    for (int l = 0; l < W; ++l) acc[j * W + l] += X[x * W + l] * yv[shared_Y ? 0 : l];
  });
}

/// Every output k of a translation, coefficient_block at a time (one register accumulator per
/// output, so the multiply–adds form independent chains): out[k·W + l] += its sum of products,
/// times target_scale[|k|·W + l] / k! for a contraction (the target side of M2L and L2L).
template <int P, BlockProduct kind, bool shared_Y, class Real, int W>
KOKKOS_FORCEINLINE_FUNCTION void translate_in_blocks(Real const* X, Real const* Y, Real const* target_scale,
                                                     Real* out) {
  constexpr int N = ncoeff<P>;
  static_for<(N + coefficient_block - 1) / coefficient_block>([&](auto B) {
    constexpr int first = decltype(B)::value * coefficient_block;
    constexpr int count = N - first < coefficient_block ? N - first : coefficient_block;
    Real acc[coefficient_block * W] = {};
    block_products<P, kind, Real, W, first, count, shared_Y>(X, Y, acc);
    static_for<count>([&](auto J) {
      constexpr int j = decltype(J)::value;
      constexpr int k = first + j;
      if constexpr (kind == BlockProduct::contraction) {
        Real const inv_factorial = Real(multi_index_table<P>.inv_factorial[k]);
        Real const* scale = target_scale + multi_index_table<P>.degree[k] * W;
        KFMM_LANE_LOOP
        for (int l = 0; l < W; ++l) out[k * W + l] += acc[j * W + l] * (scale[l] * inv_factorial);
      } else {
        KFMM_LANE_LOOP
        for (int l = 0; l < W; ++l) out[k * W + l] += acc[j * W + l];
      }
    });
  });
}

/// a[n·W + l] *= factor[|n|·W + l] for every coefficient n.
template <int P, class Real, int W>
KOKKOS_INLINE_FUNCTION void scale_by_degree(Real const* factor, Real* a) {
  for (int n = 0; n < ncoeff<P>; ++n) {
    Real const* f = factor + table_degree<P>(n) * W;
    KFMM_LANE_LOOP
    for (int l = 0; l < W; ++l) a[n * W + l] *= f[l];
  }
}

/// What M2M and L2L need of W parent–child pairs, child w in lane w (offset d_w = c_child −
/// c_parent, unscaled): w[n·W + l] = (d/s_parent)^n / n! and ratio[e·W + l] = (s_child/s_parent)^e.
template <int P, class Real, int W>
KOKKOS_INLINE_FUNCTION void parent_child_lanes(Real const* dx, Real const* dy, Real const* dz, Real const* s_child,
                                               Real s_parent, Real* w, Real* ratio) {
  Real const inv_parent = Real(1) / s_parent;
  Real ux[W], uy[W], uz[W];
  KFMM_LANE_LOOP
  for (int l = 0; l < W; ++l) {
    ux[l] = dx[l] * inv_parent;
    uy[l] = dy[l] * inv_parent;
    uz[l] = dz[l] * inv_parent;
    ratio[l] = Real(1);
    for (int e = 1; e <= P; ++e) ratio[e * W + l] = ratio[(e - 1) * W + l] * (s_child[l] * inv_parent);
  }
  monomials_lanes<P, true, Real, W>(ux, uy, uz, w);
}
}  // namespace detail

/// \brief Number of children m2m_lanes() and l2l_lanes() take at once: all of an octree node's.
inline constexpr int child_lanes = 8;

/// \brief M2M from up to W children at once into one parent (scale s_parent), child w in lane
/// w: accumulates into M_lanes[n·W + w] the multipole of child w < count (M_children[w], scale
/// s_child[w], offset (dx, dy, dz)[w] = c_child − c_parent, unscaled) about the parent centre;
/// the caller sums the lanes. Idle lanes w ≥ count add exactly +0 (their moments are 0) and need
/// finite inputs only. Exact up to round-off: the shifted multipole equals P2M of the child's
/// particles about the parent centre.
///
/// M̃ᵖ_s = Σ_{k ≤ s} (s_c/s_p)^{|k|} M̃ᶜ_k (d/s_p)^{s−k} / (s−k)!, in register blocks of s.
template <int P, class Real, int W>
KOKKOS_INLINE_FUNCTION void m2m_lanes(int count, Real const* const* M_children, Real const* s_child, Real const* dx,
                                      Real const* dy, Real const* dz, Real s_parent, Real* M_lanes) {
  constexpr int N = ncoeff<P>;
  Real w[N * W], ratio[(P + 1) * W];
  detail::parent_child_lanes<P, Real, W>(dx, dy, dz, s_child, s_parent, w, ratio);
  Real a[N * W];  // (s_c/s_p)^{|k|} M̃ᶜ_k
  transpose_to_lanes<N, W>(count, M_children, a);
  detail::scale_by_degree<P, Real, W>(ratio, a);
  detail::translate_in_blocks<P, BlockProduct::convolution, false, Real, W>(a, w, nullptr, M_lanes);
}

/// \brief M2M: accumulates a child's multipole (scale s_child) into its parent's (scale
/// s_parent); (dx, dy, dz) = c_child − c_parent, unscaled. One lane of m2m_lanes().
template <int P, class Real>
KOKKOS_INLINE_FUNCTION void m2m(Real const* M_child, Real s_child, Real dx, Real dy, Real dz, Real s_parent,
                                Real* M_parent) {
  m2m_lanes<P, Real, 1>(1, &M_child, &s_child, &dx, &dy, &dz, s_parent, M_parent);
}

/// \brief Number of sources m2l_lanes() handles at once in the passes: one 64-byte SIMD vector
/// of Real (AVX-512), so the lane loops vectorise across sources.
template <class Real>
inline constexpr int m2l_width = 64 / int(sizeof(Real));

/// \brief M2L for up to W sources into one target, each source in its own lane: accumulates
/// into lane w of the target's local expansion, L_lanes[k·W + w], the field of source w < count
/// (multipole M_sources[w], scale s_sources[w], offset (dx, dy, dz)[w] = c_t − c_s). Lanes
/// w ≥ count get exactly +0 (their moments are 0, their offset a harmless unit vector). The
/// caller sums the lanes of L_lanes over w once at the end, so the cross-lane reduction is paid
/// per target rather than per source.
///
/// L_k = (1/k!) Σ_{|n| ≤ P−|k|} (−1)^{|n|} ∂^{k+n}K(c_t − c_s) M_n. The kernel derivatives are
/// taken at (c_t − c_s)/ρ with ρ = max(|dx|, |dy|, |dz|, s_source, s_target), using
/// ∂^α K_h(R) = ρ^{−1−|α|} ∂^α K_{h/ρ}(R/ρ), so every intermediate stays O(1).
template <SofteningKind kind, int P, class Real, int W>
KOKKOS_INLINE_FUNCTION void m2l_lanes(int count, Real const* const* M_sources, Real const* s_sources, Real const* dx,
                                      Real const* dy, Real const* dz, Real h, Real s_target, Real* L_lanes) {
  using compat::math::fabs;
  using compat::math::max;
  constexpr int N = ncoeff<P>;
  Real x[W], y[W], z[W], h_scaled[W];
  Real source_factor[(P + 1) * W];  // (−s_source/ρ)^d
  Real target_factor[(P + 1) * W];  // (s_target/ρ)^d / ρ
  KFMM_LANE_LOOP
  for (int l = 0; l < W; ++l) {
    bool const live = l < count;  // idle lanes compute a harmless unit offset and add nothing
    Real const ex = live ? dx[l] : Real(1), ey = live ? dy[l] : Real(0), ez = live ? dz[l] : Real(0);
    Real const s_source = live ? s_sources[l] : Real(1);
    Real const rho = max(max(max(fabs(ex), fabs(ey)), fabs(ez)), max(s_source, s_target));
    Real const inv_rho = Real(1) / rho;
    x[l] = ex * inv_rho;
    y[l] = ey * inv_rho;
    z[l] = ez * inv_rho;
    h_scaled[l] = h * inv_rho;
    source_factor[l] = Real(1);
    target_factor[l] = inv_rho;
    for (int d = 1; d <= P; ++d) {
      source_factor[d * W + l] = source_factor[(d - 1) * W + l] * (-s_source * inv_rho);
      target_factor[d * W + l] = target_factor[(d - 1) * W + l] * (s_target * inv_rho);
    }
  }
  Real D[N * W];
  kernel_derivatives_lanes<kind, P, Real, W>(x, y, z, h_scaled, D);

  Real a[N * W];  // M_n (−s_source/ρ)^|n|, lane-major
  transpose_to_lanes<N, W>(count, M_sources, a);
  detail::scale_by_degree<P, Real, W>(source_factor, a);
  // L_k = (s_target/ρ)^{|k|} / (ρ k!) Σ_n D_{k+n} a_n.
  detail::translate_in_blocks<P, BlockProduct::contraction, false, Real, W>(a, D, target_factor, L_lanes);
}

/// \brief M2L: accumulates into the local expansion of a target node (centre c_t, scale
/// s_target) the field of a source multipole (centre c_s, scale s_source);
/// (dx, dy, dz) = c_t − c_s, unscaled; h = softening length of the kernel (ε for Plummer,
/// 2.8 ε for the spline). One lane of m2l_lanes().
template <SofteningKind kind, int P, class Real>
KOKKOS_INLINE_FUNCTION void m2l(Real const* M_source, Real s_source, Real dx, Real dy, Real dz, Real h,
                                Real s_target, Real* L_target) {
  m2l_lanes<kind, P, Real, 1>(1, &M_source, &s_source, &dx, &dy, &dz, h, s_target, L_target);
}

/// \brief M2P for W points at once (lanes): adds to φ_w and ∇φ_w (unscaled) the field of one
/// source multipole (scale s_source) at the points x_w, (dx, dy, dz)_w = x_w − c_source,
/// unscaled; h as in M2L. The same sums as an M2L to a node centred on the point followed by its
/// L2P there (φ from the moments |n| ≤ P, ∇φ from |n| ≤ P − 1), without the local expansion: no
/// error from a target's extent, and 4 outputs instead of ncoeff<P>.
///   φ = (1/ρ) Σ_n D_n a_n,  ∂φ/∂x_e = (1/ρ²) Σ_{|n|<P} D_{n+e} a_n,  a_n = M_n (−s_source/ρ)^{|n|},
/// with D the kernel derivatives at (x − c)/ρ as in m2l_lanes().
template <SofteningKind kind, int P, class Real, int W>
KOKKOS_INLINE_FUNCTION void m2p_lanes(Real const* M, Real s_source, Real const* dx, Real const* dy, Real const* dz,
                                      Real h, Real* phi, Real* dphidx, Real* dphidy, Real* dphidz) {
  using compat::math::fabs;
  using compat::math::max;
  constexpr int N = ncoeff<P>;
  Real x[W], y[W], z[W], h_scaled[W], inv_rho[W];
  Real factor[(P + 1) * W];  // (−s_source/ρ)^d
  KFMM_LANE_LOOP
  for (int l = 0; l < W; ++l) {
    Real const rho = max(max(max(fabs(dx[l]), fabs(dy[l])), fabs(dz[l])), s_source);
    inv_rho[l] = Real(1) / rho;
    x[l] = dx[l] * inv_rho[l];
    y[l] = dy[l] * inv_rho[l];
    z[l] = dz[l] * inv_rho[l];
    h_scaled[l] = h * inv_rho[l];
    factor[l] = Real(1);
    for (int d = 1; d <= P; ++d) factor[d * W + l] = factor[(d - 1) * W + l] * (-s_source * inv_rho[l]);
  }
  Real D[N * W];
  kernel_derivatives_lanes<kind, P, Real, W>(x, y, z, h_scaled, D);
  // Two accumulators per output (even and odd n), as in l2p_lanes().
  Real value[2 * W] = {}, gx[2 * W] = {}, gy[2 * W] = {}, gz[2 * W] = {};
  static_for<N>([&](auto I) KFMM_INLINE_LAMBDA {
    constexpr int n = decltype(I)::value;
    constexpr int a = multi_index_table<P>.e[n][0], b = multi_index_table<P>.e[n][1], c = multi_index_table<P>.e[n][2];
    constexpr int degree = a + b + c;
    constexpr int half = (n % 2) * W;
    Real const Mn = M[n];
    Real an[W];
    KFMM_LANE_LOOP
    for (int l = 0; l < W; ++l) {
      an[l] = Mn * factor[degree * W + l];
      value[half + l] += an[l] * D[n * W + l];
    }
    if constexpr (degree < P) {
      constexpr int ex = flat_index(a + 1, b, c), ey = flat_index(a, b + 1, c), ez = flat_index(a, b, c + 1);
      KFMM_LANE_LOOP
      for (int l = 0; l < W; ++l) {
        gx[half + l] += an[l] * D[ex * W + l];
        gy[half + l] += an[l] * D[ey * W + l];
        gz[half + l] += an[l] * D[ez * W + l];
      }
    }
  });
  KFMM_LANE_LOOP
  for (int l = 0; l < W; ++l) {
    Real const inv2 = inv_rho[l] * inv_rho[l];
    phi[l] += (value[l] + value[W + l]) * inv_rho[l];
    dphidx[l] += (gx[l] + gx[W + l]) * inv2;
    dphidy[l] += (gy[l] + gy[W + l]) * inv2;
    dphidz[l] += (gz[l] + gz[W + l]) * inv2;
  }
}

/// \brief M2P at one point: one lane of m2p_lanes().
template <SofteningKind kind, int P, class Real>
KOKKOS_INLINE_FUNCTION void m2p(Real const* M, Real s_source, Real dx, Real dy, Real dz, Real h, Real& phi,
                                Real& dphidx, Real& dphidy, Real& dphidz) {
  m2p_lanes<kind, P, Real, 1>(M, s_source, &dx, &dy, &dz, h, &phi, &dphidx, &dphidy, &dphidz);
}

/// \brief L2L from one parent (local expansion L_parent, scale s_parent) into up to W children
/// at once, child w in lane w: accumulates into L_lanes[k·W + w] the parent's expansion
/// re-expanded about child w (offset (dx, dy, dz)[w] = c_child − c_parent, unscaled; scale
/// s_child[w]). Exact re-expansion of the polynomial. Idle lanes need finite inputs only.
///
/// L̃ᶜ_k = (s_c/s_p)^{|k|} (1/k!) Σ_n (k+n)! L̃ᵖ_{k+n} (d/s_p)^n / n!: the same Hankel-type
/// contraction as M2L, with the parent's coefficients shared by all lanes.
template <int P, class Real, int W>
KOKKOS_INLINE_FUNCTION void l2l_lanes(Real const* L_parent, Real s_parent, Real const* dx, Real const* dy,
                                      Real const* dz, Real const* s_child, Real* L_lanes) {
  constexpr int N = ncoeff<P>;
  Real w[N * W], ratio[(P + 1) * W];
  detail::parent_child_lanes<P, Real, W>(dx, dy, dz, s_child, s_parent, w, ratio);
  Real f[N];  // (k+n)! L̃ᵖ_{k+n}
  for (int s = 0; s < N; ++s) f[s] = L_parent[s] * Real(1.0 / detail::table_inv_factorial<P>(s));
  detail::translate_in_blocks<P, BlockProduct::contraction, true, Real, W>(w, f, ratio, L_lanes);
}

/// \brief L2L: accumulates a parent's local expansion (scale s_parent) into a child's (scale
/// s_child); (dx, dy, dz) = c_child − c_parent, unscaled. One lane of l2l_lanes().
template <int P, class Real>
KOKKOS_INLINE_FUNCTION void l2l(Real const* L_parent, Real s_parent, Real dx, Real dy, Real dz, Real s_child,
                                Real* L_child) {
  l2l_lanes<P, Real, 1>(L_parent, s_parent, &dx, &dy, &dz, &s_child, L_child);
}

/// \brief Number of particles p2m_lanes() and l2p_lanes() take at once: a SIMD vector of Real on
/// CPUs, one per thread on GPUs.
template <class ExecSpace, class Real>
inline constexpr int particle_lanes = gpu_shaped_kernels<ExecSpace>() ? 1 : m2l_width<Real>;

/// \brief L2P for W points at once (lanes): evaluates a local expansion (scale s) at
/// u_w = (x_w − c)/s. Returns φ_w = Σ m K (positive) and its gradient ∂φ/∂x in unscaled
/// coordinates (the acceleration is G ∇φ). The lanes are the particles of a leaf, so the
/// 4 · ncoeff multiply–adds per particle vectorise.
template <int P, class Real, int W>
KOKKOS_INLINE_FUNCTION void l2p_lanes(Real const* L, Real s, Real const* ux, Real const* uy, Real const* uz, Real* phi,
                                      Real* dphidx, Real* dphidy, Real* dphidz) {
  Real mono[ncoeff<P> * W];
  monomials_lanes<P, false, Real, W>(ux, uy, uz, mono);
  // Two accumulators per output (even and odd k): eight independent multiply–add chains.
  Real value[2 * W] = {}, gx[2 * W] = {}, gy[2 * W] = {}, gz[2 * W] = {};
  static_for<ncoeff<P>>([&](auto I) KFMM_INLINE_LAMBDA {
    constexpr int k = decltype(I)::value;
    constexpr int a = multi_index_table<P>.e[k][0], b = multi_index_table<P>.e[k][1], c = multi_index_table<P>.e[k][2];
    constexpr int half = (k % 2) * W;
    Real const Lk = L[k];
    KFMM_LANE_LOOP
    for (int l = 0; l < W; ++l) value[half + l] += Lk * mono[k * W + l];
    if constexpr (a > 0) {
      constexpr int below = flat_index(a - 1, b, c);
      Real const f = Real(a) * Lk;
      KFMM_LANE_LOOP
      for (int l = 0; l < W; ++l) gx[half + l] += f * mono[below * W + l];
    }
    if constexpr (b > 0) {
      constexpr int below = flat_index(a, b - 1, c);
      Real const f = Real(b) * Lk;
      KFMM_LANE_LOOP
      for (int l = 0; l < W; ++l) gy[half + l] += f * mono[below * W + l];
    }
    if constexpr (c > 0) {
      constexpr int below = flat_index(a, b, c - 1);
      Real const f = Real(c) * Lk;
      KFMM_LANE_LOOP
      for (int l = 0; l < W; ++l) gz[half + l] += f * mono[below * W + l];
    }
  });
  Real const inv_s = Real(1) / s;
  KFMM_LANE_LOOP
  for (int l = 0; l < W; ++l) {
    phi[l] = value[l] + value[W + l];
    dphidx[l] = (gx[l] + gx[W + l]) * inv_s;
    dphidy[l] = (gy[l] + gy[W + l]) * inv_s;
    dphidz[l] = (gz[l] + gz[W + l]) * inv_s;
  }
}

/// \brief L2P at one point: one lane of l2p_lanes().
template <int P, class Real>
KOKKOS_INLINE_FUNCTION void l2p(Real const* L, Real s, Real ux, Real uy, Real uz, Real& phi, Real& dphidx,
                                Real& dphidy, Real& dphidz) {
  l2p_lanes<P, Real, 1>(L, s, &ux, &uy, &uz, &phi, &dphidx, &dphidy, &dphidz);
}

}  // namespace kfmm
