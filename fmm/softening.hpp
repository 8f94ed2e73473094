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
    Real const r = sqrt(r2);
    if (r >= h) {
      Real const inv = Real(1) / r;
      K = inv;
      F = inv * inv * inv;
    } else {
      // GADGET-4 cubic spline (Springel 2005, eqs. in forcetree.h), u = r/h.
      Real const hinv = Real(1) / h;
      Real const u = r * hinv;
      if (u < Real(0.5)) {
        K = hinv * (Real(-2.8) + u * u * (Real(5.333333333333) + u * u * (Real(6.4) * u - Real(9.6))));
        F = hinv * hinv * hinv * (Real(10.666666666667) + u * u * (Real(32.0) * u - Real(38.4)));
      } else {
        K = hinv * (Real(-3.2) + Real(0.066666666667) / u +
                    u * u * (Real(10.666666666667) + u * (Real(-16.0) + u * (Real(9.6) - Real(2.133333333333) * u))));
        F = hinv * hinv * hinv *
            (Real(21.333333333333) - Real(48.0) * u + Real(38.4) * u * u - Real(10.666666666667) * u * u * u -
             Real(0.066666666667) / (u * u * u));
      }
      K = -K;
    }
  }
}

}  // namespace kfmm
