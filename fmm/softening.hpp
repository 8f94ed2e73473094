#pragma once
/// \file
/// \brief The softened pair kernels shared by the near field, the far field and direct sums.
#include <kfmm/core/kokkos_compat.hpp>

#include <string>

namespace kfmm {

/// Softening kernel: the potential of a unit mass at distance r is −K(r).
enum class SofteningKind {
  Plummer,  ///< K = 1/sqrt(r² + ε²) (jz-fmm's)
  Spline    ///< GADGET's cubic spline with h = 2.8 ε; K = 1/r beyond h
};

/// "plummer" | "spline"; throws kfmm::Error naming the valid kinds otherwise.
SofteningKind parse_softening_kind(std::string const& name);
/// The name accepted by parse_softening_kind.
std::string to_string(SofteningKind kind);

/// \brief The kernel length h of pair_kernel for a softening length ε: ε for Plummer, 2.8 ε for
/// the spline (whose K(0) = 1/ε then equals Plummer's).
KOKKOS_INLINE_FUNCTION double softening_h(SofteningKind kind, double eps) {
  return kind == SofteningKind::Spline ? 2.8 * eps : eps;
}

/// \brief Pair kernel value K(r) and radial factor F(r) = −K'(r)/r, so that the acceleration
/// of i due to j is −G m_j F(r) (x_i − x_j) and its potential −G m_j K(r).
/// `h` is ε for Plummer and 2.8 ε for the spline. r2 = 0 gives the finite self-value (K(0),
/// F(0)); callers exclude self-interaction themselves.
template <SofteningKind kind, class Real>
KOKKOS_INLINE_FUNCTION void pair_kernel(Real r2, Real h, Real& K, Real& F) {
  using compat::math::sqrt;
  if constexpr (kind == SofteningKind::Plummer) {
    Real const inv = Real(1) / sqrt(r2 + h * h);
    K = inv;
    F = inv * inv * inv;
  } else {
    // Every branch is computed and one selected, so that loops over pairs vectorise.
    Real const r = sqrt(r2);
    Real const inv = Real(1) / r;  // 1/r, also 1/u = h/r for the outer spline segment
    Real const hinv = Real(1) / h;
    Real const hinv3 = hinv * hinv * hinv;
    Real const u = r * hinv, u2 = u * u;
    // GADGET-4 cubic spline (Springel 2005, eqs. in forcetree.h), u = r/h < 1/2 and 1/2 ≤ u < 1.
    Real const K_inner = hinv * (Real(2.8) - u2 * (Real(5.333333333333) + u2 * (Real(6.4) * u - Real(9.6))));
    Real const F_inner = hinv3 * (Real(10.666666666667) + u2 * (Real(32.0) * u - Real(38.4)));
    Real const inv_u = h * inv;
    Real const K_outer =
        hinv * (Real(3.2) - Real(0.066666666667) * inv_u -
                u2 * (Real(10.666666666667) + u * (Real(-16.0) + u * (Real(9.6) - Real(2.133333333333) * u))));
    Real const F_outer = hinv3 * (Real(21.333333333333) - Real(48.0) * u + Real(38.4) * u2 -
                                  Real(10.666666666667) * u2 * u - Real(0.066666666667) * inv_u * inv_u * inv_u);
    Real const K_spline = u < Real(0.5) ? K_inner : K_outer;
    Real const F_spline = u < Real(0.5) ? F_inner : F_outer;
    K = r < h ? K_spline : inv;
    F = r < h ? F_spline : inv * inv * inv;
  }
}

}  // namespace kfmm
