#pragma once
/// \file
/// \brief SPH-style density of each query from its k nearest neighbours.
#include <kfmm/comm/context.hpp>
#include <kfmm/core/types.hpp>
#include <kfmm/neighbors/knn.hpp>

namespace kfmm {

/// \brief ρ_i = m_i W(0, h_i) + Σ_j m_j W(r_ij, h_i) over the k neighbours of row i of `result`
/// (computed with KNNOptions::neighbour_masses), with h_i = the distance of the k-th neighbour
/// and GADGET's cubic spline of compact support h: W(r, h) = 8/(π h³) · (1 − 6u² + 6u³) for
/// u = r/h < 1/2, 16/(π h³) · (1 − u)³ for 1/2 ≤ u < 1, 0 beyond (so the k-th neighbour adds 0).
/// `self_mass` holds m_i per row for a self-query that excluded self (the particle's own
/// term); pass an empty View otherwise (separate queries, or self already among the
/// neighbours). Collective; errors agreed across ranks: no neighbour masses in `result`,
/// `self_mass` shorter than the rows, or h_i = 0 (k + 1 coincident particles; naming the row).
ScalarView<double> knn_density(ExecutionSpace const& space, Context const& context, KNNResult const& result,
                               ScalarView<double> const& self_mass);

/// GADGET's cubic spline kernel W(r, h) of support h (see knn_density).
KOKKOS_INLINE_FUNCTION double cubic_spline_kernel(double r, double h) {
  double const u = r / h;
  double const norm = 8.0 / (3.141592653589793 * h * h * h);
  if (u < 0.5) return norm * (1 - 6 * u * u + 6 * u * u * u);
  if (u < 1) {
    double const v = 1 - u;
    return norm * 2 * v * v * v;
  }
  return 0;
}

}  // namespace kfmm
