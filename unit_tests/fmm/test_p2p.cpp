// p2p_sources, the near-field inner loop as the solver runs it on this host (the AVX-512
// Plummer float loop where the compiler targets AVX-512, the portable loop elsewhere): equal
// to a double-precision pair sum, the target itself and unsoftened coincident pairs left out,
// padding sources of mass 0 harmless, for both kernels and both precisions.
#include <kfmm/fmm/p2p.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace {

using kfmm::SofteningKind;

constexpr int W = kfmm::p2p_width<Kokkos::DefaultHostExecutionSpace>;

template <class Real>
struct Sources {
  std::vector<Real> x, y, z, m;
  int count = 0;  // real sources; the vectors are padded with massless ones to a multiple of W

  void add(double px, double py, double pz, double mass) {
    x.push_back(Real(px)), y.push_back(Real(py)), z.push_back(Real(pz)), m.push_back(Real(mass));
    ++count;
  }
  void pad() {
    while (x.size() % W != 0) x.push_back(0), y.push_back(0), z.push_back(0), m.push_back(0);
  }
};

struct Field {
  double phi = 0, g[3] = {0, 0, 0};
};

// The reference: every pair in double, skipping the target and zero-distance unsoftened pairs.
template <SofteningKind kind, class Real>
Field reference(Sources<Real> const& s, int self, double const xi[3], double h) {
  Field f;
  for (int j = 0; j < s.count; ++j) {
    double const d[3] = {xi[0] - double(s.x[j]), xi[1] - double(s.y[j]), xi[2] - double(s.z[j])};
    double const r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
    if (j == self || r2 + h * h == 0) continue;
    double K, F;
    kfmm::pair_kernel<kind, double>(r2, h, K, F);
    f.phi += double(s.m[j]) * K;
    for (int k = 0; k < 3; ++k) f.g[k] -= double(s.m[j]) * F * d[k];
  }
  return f;
}

template <SofteningKind kind, class Real>
void expect_matches_reference(double h, double tolerance) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> uniform(-1, 1);
  Sources<Real> s;
  for (int j = 0; j < 200; ++j) s.add(uniform(rng), uniform(rng), uniform(rng), 1.0 + 0.5 * uniform(rng));
  s.add(double(s.x[7]), double(s.y[7]), double(s.z[7]), 1.0);  // coincident with source 7
  s.pad();
  for (int self : {7, 100, -1}) {
    double const xi[3] = {self >= 0 ? double(s.x[self]) : 0.25, self >= 0 ? double(s.y[self]) : -0.5,
                          self >= 0 ? double(s.z[self]) : 0.125};
    Real phi = 0, g[3] = {0, 0, 0};
    kfmm::p2p_sources<kind, Real, W>(s.x.data(), s.y.data(), s.z.data(), s.m.data(), static_cast<int>(s.x.size()),
                                     self, Real(xi[0]), Real(xi[1]), Real(xi[2]), Real(h), phi, g[0], g[1], g[2]);
    Field const f = reference<kind>(s, self, xi, h);
    double const g_norm = std::sqrt(f.g[0] * f.g[0] + f.g[1] * f.g[1] + f.g[2] * f.g[2]);
    ASSERT_TRUE(std::isfinite(double(phi))) << "self " << self << " h " << h;
    EXPECT_NEAR(double(phi), f.phi, tolerance * f.phi) << "self " << self << " h " << h;
    for (int k = 0; k < 3; ++k)
      EXPECT_NEAR(double(g[k]), f.g[k], tolerance * g_norm) << "component " << k << " self " << self << " h " << h;
  }
}

template <class Real>
void expect_both_kernels(double tolerance) {
  for (double h : {0.0, 1e-3, 0.3}) {
    expect_matches_reference<SofteningKind::Plummer, Real>(h, tolerance);
    expect_matches_reference<SofteningKind::Spline, Real>(h, tolerance);
  }
}

}  // namespace

TEST(P2P, FloatMatchesDoublePairSum) { expect_both_kernels<float>(2e-5); }

TEST(P2P, DoubleMatchesDoublePairSum) { expect_both_kernels<double>(1e-12); }
