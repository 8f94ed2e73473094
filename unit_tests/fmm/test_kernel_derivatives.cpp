// Derivatives of the softened kernels: order 0 and 1 against pair_kernel, every higher order
// against central differences of the order below, Laplace identities, non-finite handling.
#include <kfmm/fmm/kernel_derivatives.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>

namespace {

using kfmm::SofteningKind;
constexpr int P = 8;
constexpr int N = kfmm::ncoeff<P>;
using Tensor = std::array<double, N>;

template <SofteningKind kind>
Tensor derivatives(std::array<double, 3> x, double h) {
  Tensor D;
  kfmm::kernel_derivatives<kind, P>(x[0], x[1], x[2], h, D.data());
  return D;
}

// Largest |D_α| over |α| = d, the scale that errors of order d are measured against.
double degree_scale(Tensor const& D, int d) {
  double scale = 0;
  for (int i = 0; i < N; ++i)
    if (kfmm::multi_index_table<P>.degree[i] == d) scale = std::max(scale, std::abs(D[i]));
  return scale;
}

template <SofteningKind kind>
void expect_consistent_derivatives(std::array<double, 3> x, double h) {
  SCOPED_TRACE(testing::Message() << "x = (" << x[0] << ", " << x[1] << ", " << x[2] << "), h = " << h);
  Tensor const D = derivatives<kind>(x, h);
  double K, F;
  kfmm::pair_kernel<kind, double>(x[0] * x[0] + x[1] * x[1] + x[2] * x[2], h, K, F);
  EXPECT_NEAR(D[0], K, 1e-11 * K);
  for (int axis = 0; axis < 3; ++axis)  // ∂K/∂x = K'(r) x/r = −F x
    EXPECT_NEAR(D[1 + axis], -F * x[axis], 1e-11 * F * std::sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2]));

  double const r = std::sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2]);
  double const delta = 1e-5 * r;
  auto const& t = kfmm::multi_index_table<P>;
  for (int i = 1; i < N; ++i) {
    int const axis = t.axis[i];
    auto plus = x, minus = x;
    plus[axis] += delta;
    minus[axis] -= delta;
    double const fd = (derivatives<kind>(plus, h)[t.parent[i]] - derivatives<kind>(minus, h)[t.parent[i]]) / (2 * delta);
    EXPECT_NEAR(D[i], fd, 1e-7 * degree_scale(D, t.degree[i]))
        << "alpha = (" << t.e[i][0] << ", " << t.e[i][1] << ", " << t.e[i][2] << ")";
  }
}

TEST(KernelDerivatives, PlummerMatchesKernelAndFiniteDifferences) {
  expect_consistent_derivatives<SofteningKind::Plummer>({0.7, -0.4, 0.3}, 0.5);
  expect_consistent_derivatives<SofteningKind::Plummer>({2.0, 1.0, -1.5}, 0.01);
  expect_consistent_derivatives<SofteningKind::Plummer>({0.05, 0.02, -0.01}, 1.0);
}

TEST(KernelDerivatives, SplineMatchesKernelAndFiniteDifferencesInEveryPiece) {
  double const h = 1.0;
  // Inner piece, both sides of u = 1/2, outer piece, Newtonian region.
  for (double u : {0.2, 0.4999, 0.5001, 0.8, 1.7}) {
    std::array<double, 3> const direction = {0.6, -0.48, 0.64};  // unit vector
    expect_consistent_derivatives<SofteningKind::Spline>({u * direction[0], u * direction[1], u * direction[2]}, h);
  }
}

// ∇²K = −3ε²(r²+ε²)^{−5/2} for Plummer and 0 outside h for the spline, so every higher
// derivative of the Laplacian is known: Σ_i D_{α+2e_i} = ∂^α(∇²K).
TEST(KernelDerivatives, LaplacianIdentitiesHoldAtEveryOrder) {
  auto const& t = kfmm::multi_index_table<P>;
  std::array<double, 3> const x = {0.9, 0.5, -0.7};
  double const eps = 0.6;
  Tensor const newtonian = derivatives<SofteningKind::Spline>(x, 0.5);  // |x| > h: pure 1/r
  Tensor const plummer = derivatives<SofteningKind::Plummer>(x, eps);
  for (int i = 0; i < N; ++i) {
    int const a = t.e[i][0], b = t.e[i][1], c = t.e[i][2];
    if (t.degree[i] + 2 > P) continue;
    double const laplace_newtonian = newtonian[kfmm::flat_index(a + 2, b, c)] +
                                     newtonian[kfmm::flat_index(a, b + 2, c)] +
                                     newtonian[kfmm::flat_index(a, b, c + 2)];
    EXPECT_NEAR(laplace_newtonian, 0.0, 1e-12 * degree_scale(newtonian, t.degree[i] + 2));
    if (t.degree[i] == 0) {
      double const s = x[0] * x[0] + x[1] * x[1] + x[2] * x[2] + eps * eps;
      double const laplace = plummer[kfmm::flat_index(2, 0, 0)] + plummer[kfmm::flat_index(0, 2, 0)] +
                             plummer[kfmm::flat_index(0, 0, 2)];
      EXPECT_NEAR(laplace, -3 * eps * eps * std::pow(s, -2.5), 1e-13);
    }
  }
}

TEST(KernelDerivatives, RadialDerivativesMatchFiniteDifferencesInS) {
  constexpr int M = 8;
  auto radial = [](SofteningKind kind, double s, double h) {
    std::array<double, M + 1> g;
    if (kind == SofteningKind::Plummer)
      kfmm::radial_derivatives<SofteningKind::Plummer, M>(s, h, g.data());
    else
      kfmm::radial_derivatives<SofteningKind::Spline, M>(s, h, g.data());
    return g;
  };
  for (auto kind : {SofteningKind::Plummer, SofteningKind::Spline})
    for (double s : {0.01, 0.2, 0.26, 0.7, 2.0}) {  // spline with h = 1: both pieces and outside
      auto const g = radial(kind, s, 1.0);
      double const delta = 1e-6 * s;
      auto const gp = radial(kind, s + delta, 1.0), gm = radial(kind, s - delta, 1.0);
      for (int m = 1; m <= M; ++m) {  // g_m = 2 d g_{m−1}/ds
        double const fd = 2 * (gp[m - 1] - gm[m - 1]) / (2 * delta);
        EXPECT_NEAR(g[m], fd, 1e-6 * (std::abs(g[m]) + std::abs(g[m - 1]) / s))
            << kfmm::to_string(kind) << " s = " << s << " m = " << m;
      }
    }
}

TEST(KernelDerivatives, NonFiniteValuesBecomeZero) {
  // Spline at the origin: the r⁵ term has no smooth derivatives of order ≥ 5 there.
  Tensor const at_origin = derivatives<SofteningKind::Spline>({0.0, 0.0, 0.0}, 1.0);
  for (double d : at_origin) EXPECT_TRUE(std::isfinite(d));
  double K, F;
  kfmm::pair_kernel<SofteningKind::Spline, double>(0.0, 1.0, K, F);
  EXPECT_NEAR(at_origin[0], K, 1e-11);
  // Second derivatives at the origin are the polynomial part: ∂_xx K = −F(0).
  EXPECT_NEAR(at_origin[kfmm::flat_index(2, 0, 0)], -F, 1e-9 * F);

  // Float at high order and tiny separation overflows: results are finite, not inf/nan.
  float D[N];
  kfmm::kernel_derivatives<SofteningKind::Plummer, P>(1e-6f, 0.0f, 0.0f, 1e-6f, D);
  for (float d : D) EXPECT_TRUE(std::isfinite(d));
  kfmm::kernel_derivatives<SofteningKind::Spline, P>(0.0f, 0.0f, 0.0f, 0.0f, D);
  for (float d : D) EXPECT_TRUE(std::isfinite(d));
}

}  // namespace
