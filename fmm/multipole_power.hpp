#pragma once
/// \file
/// \brief The harmonic multipole power of a node: per degree n, the part of the node's order-n
/// moment that a distant point feels.
///
/// For particles at offsets x_j from the expansion centre, the degree-n term of the far
/// potential is Σ_j m_j |x_j|^n P_n(cos γ_j) / d^(n+1). Its largest value over directions is at
/// most H_n / d^(n+1) with
///     H_n² = Σ_{j,k} m_j m_k |x_j|^n |x_k|^n P_n(cos ∠(x_j, x_k))
/// (the addition theorem), the power of the degree-n spherical-harmonic coefficients (Dehnen
/// 2014's multipole power). H_n = Σ m |x|^n for a point mass or a cell whose mass sits on one
/// side, but only the non-spherical part remains for smooth cells: H_n is much smaller than
/// Σ m |x|^n there, and the relative opening criterion opens far fewer of them.
///
/// Computed from the full (non-traceless) moments R_α = Σ m x^α of degree n alone, through the
/// contractions C_k = trace^k R_n (rank n − 2k) and Legendre's coefficients:
///     |x|^n |y|^n P_n(cos ∠) = Σ_k a_{n,k} (x·y)^(n−2k) (|x| |y|)^(2k),
///     H_n² = Σ_k a_{n,k} ‖C_k‖²,   ‖C‖² = Σ_{|m| = rank} (rank!/m!) C_m².
#include <kfmm/core/kokkos_compat.hpp>
#include <kfmm/fmm/multi_index.hpp>

namespace kfmm {

/// \brief H_n / s^n for n = 0 … P from the scaled moments M̃_α = Σ m (x/s)^α / α! of
/// expansion.hpp (layout of multi_index.hpp), for L nodes at once: lane l reads the moments at
/// M[l] and writes H[n][l]. H[0] is the mass, H[1] the dipole's length. Rounding can make a tiny
/// H_n² negative; it is then taken as 0.
///
/// The lanes share every coefficient (the divisions of factorials are most of a node's cost),
/// and each lane does the arithmetic of L = 1 in the same order, so a node's powers do not
/// depend on L: the CPU shape runs L = 8 (SIMD lanes over nodes), the GPU shape L = 1.
template <int P, int L, class Real>
KOKKOS_INLINE_FUNCTION void harmonic_power_lanes(Real const* const* M, double (*H)[L]) {
  // Factorials up to (2P)! once (exact in double), not a loop per use in the inner sums.
  double factorial[2 * P + 1];
  factorial[0] = 1;
  for (int q = 1; q <= 2 * P; ++q) factorial[q] = factorial[q - 1] * q;
  // The sums use fused_multiply_add: the same bits for every L whatever the compiler contracts.
  // R_α = α! M̃_α, read where used (one lane: no array beyond the registers) or, for lanes,
  // computed once per moment into a lane-major table (the sums below read each R many times).
  constexpr int N = (P + 1) * (P + 2) * (P + 3) / 6;
  double R[L > 1 ? N : 1][L];
  if constexpr (L > 1) {
    for (int d = 0, i = 0; d <= P; ++d)
      for (int ea = d; ea >= 0; --ea)
        for (int eb = d - ea; eb >= 0; --eb, ++i) {
          int const ec = d - ea - eb;
          for (int l = 0; l < L; ++l) R[i][l] = double(M[l][i]) * factorial[ea] * factorial[eb] * factorial[ec];
        }
  }
  for (int n = 0; n <= P; ++n) {
    double h2[L];
    KFMM_LANE_LOOP
    for (int l = 0; l < L; ++l) h2[l] = 0;
    for (int k = 0; 2 * k <= n; ++k) {
      int const rank = n - 2 * k;
      // a_{n,k} = (−1)^k (2n − 2k)! / (2^n k! (n − k)! (n − 2k)!)
      double const a = (k % 2 ? -1.0 : 1.0) * factorial[2 * n - 2 * k] /
                       (double(1 << n) * factorial[k] * factorial[n - k] * factorial[rank]);
      // k!/q! for |q| = k in the order of the sums below, once for all m.
      double weight[(P / 2 + 1) * (P / 2 + 2) / 2];
      for (int qa = k, j = 0; qa >= 0; --qa)
        for (int qb = k - qa; qb >= 0; --qb, ++j)
          weight[j] = factorial[k] / (factorial[qa] * factorial[qb] * factorial[k - qa - qb]);
      double norm2[L];
      KFMM_LANE_LOOP
      for (int l = 0; l < L; ++l) norm2[l] = 0;
      for (int ma = rank; ma >= 0; --ma)
        for (int mb = rank - ma; mb >= 0; --mb) {
          int const mc = rank - ma - mb;
          // C_k[m] = Σ_{|q| = k} (k!/q!) R[m + 2q]
          double c[L];
          KFMM_LANE_LOOP
          for (int l = 0; l < L; ++l) c[l] = 0;
          for (int qa = k, j = 0; qa >= 0; --qa)
            for (int qb = k - qa; qb >= 0; --qb, ++j) {
              int const qc = k - qa - qb;
              int const ea = ma + 2 * qa, eb = mb + 2 * qb, ec = mc + 2 * qc;
              int const at = flat_index(ea, eb, ec);
              if constexpr (L > 1) {
                KFMM_LANE_LOOP
                for (int l = 0; l < L; ++l) c[l] = compat::math::fused_multiply_add(weight[j], R[at][l], c[l]);
              } else {
                c[0] = compat::math::fused_multiply_add(
                    weight[j], double(M[0][at]) * factorial[ea] * factorial[eb] * factorial[ec], c[0]);
              }
            }
          double const multinomial = factorial[rank] / (factorial[ma] * factorial[mb] * factorial[mc]);
          KFMM_LANE_LOOP
          for (int l = 0; l < L; ++l) norm2[l] = compat::math::fused_multiply_add(multinomial * c[l], c[l], norm2[l]);
        }
      KFMM_LANE_LOOP
      for (int l = 0; l < L; ++l) h2[l] = compat::math::fused_multiply_add(a, norm2[l], h2[l]);
    }
    KFMM_LANE_LOOP
    for (int l = 0; l < L; ++l) H[n][l] = h2[l] > 0 ? compat::math::sqrt(h2[l]) : 0.0;
  }
}

/// \brief harmonic_power_lanes() for one node: H[n], n = 0 … P, from the moments at M.
template <int P, class Real>
KOKKOS_INLINE_FUNCTION void harmonic_power(Real const* M, double* H) {
  Real const* lane[1] = {M};
  double h[P + 1][1];
  harmonic_power_lanes<P, 1, Real>(lane, h);
  for (int n = 0; n <= P; ++n) H[n] = h[n][0];
}

}  // namespace kfmm
