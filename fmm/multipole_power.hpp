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
/// expansion.hpp (layout of multi_index.hpp): H[0] is the mass, H[1] the dipole's length.
/// Rounding can make a tiny H_n² negative; it is then taken as 0.
template <int P, class Real>
KOKKOS_INLINE_FUNCTION void harmonic_power(Real const* M, double* H) {
  // Factorials up to (2P)! once (exact in double), not a loop per use in the inner sums.
  double factorial[2 * P + 1];
  factorial[0] = 1;
  for (int q = 1; q <= 2 * P; ++q) factorial[q] = factorial[q - 1] * q;
  for (int n = 0; n <= P; ++n) {
    double h2 = 0;
    for (int k = 0; 2 * k <= n; ++k) {
      int const rank = n - 2 * k;
      // a_{n,k} = (−1)^k (2n − 2k)! / (2^n k! (n − k)! (n − 2k)!)
      double const a = (k % 2 ? -1.0 : 1.0) * factorial[2 * n - 2 * k] /
                       (double(1 << n) * factorial[k] * factorial[n - k] * factorial[rank]);
      double norm2 = 0;
      for (int ma = rank; ma >= 0; --ma)
        for (int mb = rank - ma; mb >= 0; --mb) {
          int const mc = rank - ma - mb;
          // C_k[m] = Σ_{|q| = k} (k!/q!) R[m + 2q], R_α = α! M̃_α
          double c = 0;
          for (int qa = k; qa >= 0; --qa)
            for (int qb = k - qa; qb >= 0; --qb) {
              int const qc = k - qa - qb;
              int const ea = ma + 2 * qa, eb = mb + 2 * qb, ec = mc + 2 * qc;
              double const R = double(M[flat_index(ea, eb, ec)]) * factorial[ea] * factorial[eb] *
                               factorial[ec];
              c += factorial[k] / (factorial[qa] * factorial[qb] * factorial[qc]) * R;
            }
          norm2 += factorial[rank] / (factorial[ma] * factorial[mb] * factorial[mc]) * c * c;
        }
      h2 += a * norm2;
    }
    H[n] = h2 > 0 ? compat::math::sqrt(h2) : 0.0;
  }
}

}  // namespace kfmm
