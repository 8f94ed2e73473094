// Taylor expansions: P2M → M2L → L2P and P2M → M2P against direct sums for both kernels
// (convergence in P),
// exactness of M2M and L2L, lane forms against one lane, float robustness at extreme scales,
// runtime order dispatch.
#include <kfmm/core/error.hpp>
#include <kfmm/fmm/expansion.hpp>
#include <kfmm/fmm/expansion_dispatch.hpp>
#include <built_orders.hpp>
#include <fmm/one_lane_expansion.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <vector>

namespace {

using kfmm::SofteningKind;
using Vec = std::array<double, 3>;
namespace one_lane = kfmm::test_support::one_lane;

struct Cluster {
  std::vector<Vec> pos;
  std::vector<double> mass;
};

// n particles uniform in a cube of side `side` centred at `centre`.
Cluster random_cluster(int n, Vec centre, double side, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(-0.5, 0.5);
  Cluster c;
  for (int i = 0; i < n; ++i) {
    c.pos.push_back({centre[0] + side * uniform(rng), centre[1] + side * uniform(rng), centre[2] + side * uniform(rng)});
    c.mass.push_back(0.5 + uniform(rng));
  }
  return c;
}

// φ = Σ m K and ∇φ at every target, double direct sum.
template <SofteningKind kind>
std::vector<std::array<double, 4>> direct_field(Cluster const& targets, Cluster const& sources, double h) {
  std::vector<std::array<double, 4>> out;
  for (auto const& x : targets.pos) {
    std::array<double, 4> f = {0, 0, 0, 0};
    for (std::size_t j = 0; j < sources.pos.size(); ++j) {
      Vec const d = {x[0] - sources.pos[j][0], x[1] - sources.pos[j][1], x[2] - sources.pos[j][2]};
      double K, F;
      kfmm::pair_kernel<kind, double>(d[0] * d[0] + d[1] * d[1] + d[2] * d[2], h, K, F);
      f[0] += sources.mass[j] * K;
      for (int a = 0; a < 3; ++a) f[1 + a] -= sources.mass[j] * F * d[a];
    }
    out.push_back(f);
  }
  return out;
}

struct Errors {
  double potential, force;  // relative L2 errors over the targets
};

// P2M about c_s (scale s_s) → M2L → L2P about c_t (scale s_t), in arithmetic Real.
template <SofteningKind kind, int P, class Real>
std::vector<std::array<double, 4>> expansion_field(Cluster const& targets, Vec c_t, double s_t, Cluster const& sources,
                                                   Vec c_s, double s_s, double h) {
  Real M[kfmm::ncoeff<P>] = {}, L[kfmm::ncoeff<P>] = {};
  for (std::size_t j = 0; j < sources.pos.size(); ++j)
    one_lane::p2m<P>(Real(sources.mass[j]), Real((sources.pos[j][0] - c_s[0]) / s_s), Real((sources.pos[j][1] - c_s[1]) / s_s),
                 Real((sources.pos[j][2] - c_s[2]) / s_s), M);
  one_lane::m2l<kind, P>(M, Real(s_s), Real(c_t[0] - c_s[0]), Real(c_t[1] - c_s[1]), Real(c_t[2] - c_s[2]), Real(h), Real(s_t),
                     L);
  std::vector<std::array<double, 4>> out;
  for (auto const& x : targets.pos) {
    Real phi, gx, gy, gz;
    one_lane::l2p<P>(L, Real(s_t), Real((x[0] - c_t[0]) / s_t), Real((x[1] - c_t[1]) / s_t), Real((x[2] - c_t[2]) / s_t),
                 phi, gx, gy, gz);
    out.push_back({double(phi), double(gx), double(gy), double(gz)});
  }
  return out;
}

Errors relative_errors(std::vector<std::array<double, 4>> const& got, std::vector<std::array<double, 4>> const& exact) {
  double dp = 0, p = 0, df = 0, f = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    dp += std::pow(got[i][0] - exact[i][0], 2);
    p += std::pow(exact[i][0], 2);
    for (int a = 1; a < 4; ++a) {
      df += std::pow(got[i][a] - exact[i][a], 2);
      f += std::pow(exact[i][a], 2);
    }
  }
  return {std::sqrt(dp / p), std::sqrt(df / f)};
}

// Two unit cubes at distance 6 (pair ratio √3/6 ≈ 0.29), scales 1.
struct WellSeparatedPair {
  Vec c_s{0.0, 0.0, 0.0}, c_t{6.0, 0.0, 0.0};
  Cluster sources = random_cluster(50, c_s, 1.0, 1), targets = random_cluster(50, c_t, 1.0, 2);
};

template <SofteningKind kind>
struct ConvergenceAtOrder {
  template <int P>
  struct At {
    static Errors run(WellSeparatedPair const& pair, double h) {
      return relative_errors(
          expansion_field<kind, P, double>(pair.targets, pair.c_t, 1.0, pair.sources, pair.c_s, 1.0, h),
          direct_field<kind>(pair.targets, pair.sources, h));
    }
  };
};

template <SofteningKind kind>
void expect_geometric_convergence(double h) {
  SCOPED_TRACE(testing::Message() << kfmm::to_string(kind) << " h = " << h);
  WellSeparatedPair const pair;
  std::array<Errors, 9> e{};
  for (int p = 1; p <= 8; ++p)
    e[p] = kfmm::dispatch_order<ConvergenceAtOrder<kind>::template At>(p, pair, h);
  for (int p = 1; p + 2 <= 8; ++p) {
    EXPECT_LT(e[p + 2].potential, e[p].potential / 5) << "p = " << p;
    EXPECT_LT(e[p + 2].force, e[p].force / 5) << "p = " << p;
  }
  EXPECT_LT(e[8].potential, 1e-7);
  EXPECT_LT(e[8].force, 1e-6);
}

TEST(Expansion, ConvergesToDirectSumPlummer) {
  if constexpr (kfmm::test_support::all_expansion_orders_built()) {
    expect_geometric_convergence<SofteningKind::Plummer>(0.05);  // nearly Newtonian
    expect_geometric_convergence<SofteningKind::Plummer>(6.0);   // softening ~ separation
  } else {
    GTEST_SKIP() << kfmm::test_support::not_built_message(0);
  }
}

TEST(Expansion, ConvergesToDirectSumSpline) {
  if constexpr (kfmm::test_support::all_expansion_orders_built()) {
    // Pair distances lie in [4.27, 7.73]. h = 2.8 ε chosen so that all of them fall in one piece
    // of the kernel: outside h (Newtonian), in 1/2 ≤ r/h < 1, and in r/h < 1/2.
    expect_geometric_convergence<SofteningKind::Spline>(2.8);
    expect_geometric_convergence<SofteningKind::Spline>(8.2);
    expect_geometric_convergence<SofteningKind::Spline>(16.8);
  } else {
    GTEST_SKIP() << kfmm::test_support::not_built_message(0);
  }
}

// P2M about c_s → M2P at every target: the multipole evaluated at each point.
template <SofteningKind kind, int P>
std::vector<std::array<double, 4>> m2p_field(Cluster const& targets, Cluster const& sources, Vec c_s, double s_s,
                                             double h) {
  double M[kfmm::ncoeff<P>] = {};
  for (std::size_t j = 0; j < sources.pos.size(); ++j)
    one_lane::p2m<P>(sources.mass[j], (sources.pos[j][0] - c_s[0]) / s_s, (sources.pos[j][1] - c_s[1]) / s_s,
                     (sources.pos[j][2] - c_s[2]) / s_s, M);
  std::vector<std::array<double, 4>> out;
  for (auto const& x : targets.pos) {
    double phi, gx, gy, gz;
    one_lane::m2p<kind, P>(M, s_s, x[0] - c_s[0], x[1] - c_s[1], x[2] - c_s[2], h, phi, gx, gy, gz);
    out.push_back({phi, gx, gy, gz});
  }
  return out;
}

// M2P at order P against the direct sum, and against M2L into a node centred on each target
// followed by L2P at its centre (the same sums, so equal to rounding): the largest relative
// difference of the latter.
template <SofteningKind kind>
struct M2PAtOrder {
  template <int P>
  struct At {
    static std::array<double, 3> run(WellSeparatedPair const& pair, double h) {
      auto const got = m2p_field<kind, P>(pair.targets, pair.sources, pair.c_s, 1.0, h);
      double largest = 0;
      for (std::size_t i = 0; i < pair.targets.pos.size(); ++i) {
        Cluster one;
        one.pos = {pair.targets.pos[i]};
        one.mass = {1.0};
        auto const via_local = expansion_field<kind, P, double>(one, one.pos[0], 0.5, pair.sources, pair.c_s, 1.0, h);
        for (int a = 0; a < 4; ++a)
          largest = std::max(largest, std::abs(got[i][a] - via_local[0][a]) / std::abs(via_local[0][0]));
      }
      Errors const e = relative_errors(got, direct_field<kind>(pair.targets, pair.sources, h));
      return {e.potential, e.force, largest};
    }
  };
};

template <SofteningKind kind>
void expect_m2p_converges(double h) {
  SCOPED_TRACE(testing::Message() << kfmm::to_string(kind) << " h = " << h);
  WellSeparatedPair const pair;
  std::array<std::array<double, 3>, 9> e{};
  for (int p = 1; p <= 8; ++p) {
    e[p] = kfmm::dispatch_order<M2PAtOrder<kind>::template At>(p, pair, h);
    EXPECT_LT(e[p][2], 1e-12) << "M2P differs from M2L + L2P at the point, p = " << p;
  }
  for (int p = 1; p + 2 <= 8; ++p) {
    EXPECT_LT(e[p + 2][0], e[p][0] / 5) << "p = " << p;
    EXPECT_LT(e[p + 2][1], e[p][1] / 5) << "p = " << p;
  }
  EXPECT_LT(e[8][0], 1e-7);
  EXPECT_LT(e[8][1], 1e-6);
}

// M2P has no target expansion, so its error is the source's alone: it converges to the direct sum
// at the rate of the source's extent over the distance, both kernels.
TEST(Expansion, M2PConvergesToDirectSumAndEqualsM2LThenL2PAtThePoint) {
  if constexpr (kfmm::test_support::all_expansion_orders_built()) {
    expect_m2p_converges<SofteningKind::Plummer>(0.05);
    expect_m2p_converges<SofteningKind::Plummer>(6.0);
    expect_m2p_converges<SofteningKind::Spline>(2.8);
    expect_m2p_converges<SofteningKind::Spline>(16.8);
  } else {
    GTEST_SKIP() << kfmm::test_support::not_built_message(0);
  }
}

template <int P>
struct ShiftExactness {
  static void run() {
    SCOPED_TRACE(testing::Message() << "P = " << P);
    constexpr int N = kfmm::ncoeff<P>;
    // Child cube (scale 1/2) in the upper octant of a parent cube of scale 1.
    Vec const c_parent = {0.0, 0.0, 0.0}, c_child = {0.25, 0.25, -0.25};
    Cluster const particles = random_cluster(20, c_child, 0.5, 3);
    double M_direct[N] = {}, M_child[N] = {}, M_shifted[N] = {};
    for (std::size_t j = 0; j < particles.pos.size(); ++j) {
      auto const& x = particles.pos[j];
      one_lane::p2m<P>(particles.mass[j], x[0] - c_parent[0], x[1] - c_parent[1], x[2] - c_parent[2], M_direct);
      one_lane::p2m<P>(particles.mass[j], (x[0] - c_child[0]) / 0.5, (x[1] - c_child[1]) / 0.5, (x[2] - c_child[2]) / 0.5,
                   M_child);
    }
    one_lane::m2m<P>(M_child, 0.5, c_child[0] - c_parent[0], c_child[1] - c_parent[1], c_child[2] - c_parent[2], 1.0,
                 M_shifted);
    for (int i = 0; i < N; ++i) EXPECT_NEAR(M_shifted[i], M_direct[i], 1e-13 * M_direct[0]) << "n = " << i;

    // L2L: the child's local expansion is the same polynomial, so L2P agrees at any point.
    Cluster const sources = random_cluster(20, {5.0, -3.0, 2.0}, 1.0, 4);
    double M_src[N] = {}, L_parent[N] = {}, L_child[N] = {};
    for (std::size_t j = 0; j < sources.pos.size(); ++j)
      one_lane::p2m<P>(sources.mass[j], sources.pos[j][0] - 5.0, sources.pos[j][1] + 3.0, sources.pos[j][2] - 2.0, M_src);
    one_lane::m2l<SofteningKind::Plummer, P>(M_src, 1.0, -5.0, 3.0, -2.0, 0.1, 1.0, L_parent);
    one_lane::l2l<P>(L_parent, 1.0, c_child[0], c_child[1], c_child[2], 0.5, L_child);
    for (auto const& x : particles.pos) {
      double p1, x1, y1, z1, p2, x2, y2, z2;
      one_lane::l2p<P>(L_parent, 1.0, x[0], x[1], x[2], p1, x1, y1, z1);
      one_lane::l2p<P>(L_child, 0.5, (x[0] - c_child[0]) / 0.5, (x[1] - c_child[1]) / 0.5, (x[2] - c_child[2]) / 0.5, p2,
                   x2, y2, z2);
      double const g = std::sqrt(x1 * x1 + y1 * y1 + z1 * z1);
      EXPECT_NEAR(p2, p1, 1e-14 * std::abs(p1));
      EXPECT_NEAR(x2, x1, 1e-13 * g);
      EXPECT_NEAR(y2, y1, 1e-13 * g);
      EXPECT_NEAR(z2, z1, 1e-13 * g);
    }
  }
};

TEST(Expansion, M2MAndL2LAreExactTranslations) {
  kfmm::test_support::for_each_built_order<ShiftExactness>();
}

// The lane forms the passes run (several sources, children or particles at once, with idle
// lanes) agree with one-lane calls, lane by lane, in float and double.
template <int P, class Real>
void expect_lanes_match_one_lane() {
  SCOPED_TRACE(testing::Message() << "P = " << P << (sizeof(Real) == 4 ? " float" : " double"));
  constexpr int N = kfmm::ncoeff<P>;
  double const tol = sizeof(Real) == 4 ? 2e-5 : 1e-12;
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(-0.5, 0.5);
  auto near = [&](Real got, Real want, Real scale, char const* what, int k) {
    EXPECT_NEAR(double(got), double(want), tol * double(scale)) << what << " k = " << k;
  };
  auto max_abs = [](Real const* v, int n, int stride) {
    Real m = 0;
    for (int i = 0; i < n; ++i) m = std::max(m, std::abs(v[i * stride]));
    return m;
  };
  // Lanes that sum into one output (M2L, M2M): the sum matches, idle lanes hold exactly 0.
  auto expect_lane_sums = [&](Real const* lanes, int W, int count, Real const* one, char const* what) {
    for (int k = 0; k < N; ++k) {
      Real sum = 0;
      for (int l = 0; l < W; ++l) {
        sum += lanes[k * W + l];
        if (l >= count) EXPECT_EQ(lanes[k * W + l], Real(0)) << what << " idle lane " << l << " k = " << k;
      }
      near(sum, one[k], max_abs(one, N, 1), what, k);
    }
  };

  {  // M2L: 11 sources in 16 lanes into one target vs 11 single calls.
    constexpr int W = 16, count = 11;
    std::vector<std::array<Real, N>> M(W);
    Real const* sources[W];
    Real s[W], dx[W], dy[W], dz[W];
    for (int l = 0; l < W; ++l) {
      for (auto& m : M[l]) m = Real(u(rng));
      sources[l] = M[l].data();
      s[l] = Real(0.5 + 0.5 * u(rng));
      dx[l] = Real(4 + u(rng)), dy[l] = Real(3 * u(rng)), dz[l] = Real(-2 + u(rng));
    }
    Real lanes[N * W] = {}, one[N] = {};
    kfmm::m2l_lanes<SofteningKind::Plummer, P, Real, W>(count, sources, s, dx, dy, dz, Real(0.1), Real(0.7), lanes);
    for (int l = 0; l < count; ++l)
      one_lane::m2l<SofteningKind::Plummer, P>(M[l].data(), s[l], dx[l], dy[l], dz[l], Real(0.1), Real(0.7), one);
    expect_lane_sums(lanes, W, count, one, "m2l");
  }
  {  // L2L: one parent into 5 children in 8 lanes vs 5 single calls.
    constexpr int W = 8, count = 5;
    Real L[N], dx[W], dy[W], dz[W], s[W];
    for (auto& v : L) v = Real(u(rng));
    for (int l = 0; l < W; ++l) dx[l] = Real(u(rng)), dy[l] = Real(u(rng)), dz[l] = Real(u(rng)), s[l] = Real(0.5);
    Real lanes[N * W] = {};
    kfmm::l2l_lanes<P, Real, W>(L, Real(1), dx, dy, dz, s, lanes);
    for (int l = 0; l < count; ++l) {
      Real one[N] = {};
      one_lane::l2l<P>(L, Real(1), dx[l], dy[l], dz[l], s[l], one);
      for (int k = 0; k < N; ++k) near(lanes[k * W + l], one[k], max_abs(one, N, 1), "l2l", k);
    }
  }
  {  // M2M: 6 children in 8 lanes into one parent vs 6 single calls.
    constexpr int W = 8, count = 6;
    std::vector<std::array<Real, N>> M(W);
    Real const* children[W];
    Real dx[W], dy[W], dz[W], s[W];
    for (int l = 0; l < W; ++l) {
      for (auto& m : M[l]) m = Real(u(rng));
      children[l] = M[l].data();
      dx[l] = Real(u(rng)), dy[l] = Real(u(rng)), dz[l] = Real(u(rng)), s[l] = Real(0.5);
    }
    Real lanes[N * W] = {}, one[N] = {};
    kfmm::m2m_lanes<P, Real, W>(count, children, s, dx, dy, dz, Real(1), lanes);
    for (int l = 0; l < count; ++l) one_lane::m2m<P>(M[l].data(), s[l], dx[l], dy[l], dz[l], Real(1), one);
    expect_lane_sums(lanes, W, count, one, "m2m");
  }
  {  // P2M and L2P: 13 particles in 16 lanes (idle lanes massless) vs one at a time.
    constexpr int W = 16, count = 13;
    Real m[W], ux[W], uy[W], uz[W];
    for (int l = 0; l < W; ++l) m[l] = l < count ? Real(1 + u(rng)) : Real(0), ux[l] = Real(u(rng)), uy[l] = Real(u(rng)), uz[l] = Real(u(rng));
    Real lanes[N * W] = {}, one[N] = {}, sum[N] = {};
    kfmm::p2m_lanes<P, Real, W>(m, ux, uy, uz, lanes);
    for (int l = 0; l < count; ++l) one_lane::p2m<P>(m[l], ux[l], uy[l], uz[l], one);
    for (int k = 0; k < N; ++k) {
      for (int l = 0; l < W; ++l) sum[k] += lanes[k * W + l];
      near(sum[k], one[k], max_abs(one, N, 1), "p2m", k);
    }
    Real phi[W], gx[W], gy[W], gz[W];
    kfmm::l2p_lanes<P, Real, W>(one, Real(2), ux, uy, uz, phi, gx, gy, gz);
    for (int l = 0; l < count; ++l) {
      Real p1, x1, y1, z1;
      one_lane::l2p<P>(one, Real(2), ux[l], uy[l], uz[l], p1, x1, y1, z1);
      Real const g = std::sqrt(x1 * x1 + y1 * y1 + z1 * z1);
      near(phi[l], p1, std::abs(p1), "l2p potential", l);
      near(gx[l], x1, g, "l2p x", l);
      near(gy[l], y1, g, "l2p y", l);
      near(gz[l], z1, g, "l2p z", l);
    }
  }
}

TEST(Expansion, LaneFormsMatchOneLane) {
  if constexpr (kfmm::expansion_order_built(3)) {
    expect_lanes_match_one_lane<3, float>();
    expect_lanes_match_one_lane<3, double>();
  }
  // The default order and precision, in every build (double at order 7 would repeat order 3's
  // check of the same code at a large compile cost).
  expect_lanes_match_one_lane<7, float>();
}

// Float at P = 8 with nodes of scale 2^e separated by 8·2^e: without the power-of-two scaling,
// |d|^8 overflows (e = 20) or underflows (e = −30) in float.
template <SofteningKind kind>
void expect_float_accurate_at_scale(int e, double h_over_scale) {
  SCOPED_TRACE(testing::Message() << kfmm::to_string(kind) << " scale 2^" << e);
  double const s = std::ldexp(1.0, e);
  Vec const c_s = {0.0, 0.0, 0.0}, c_t = {0.0, 8 * s, 0.0};
  Cluster const sources = random_cluster(50, c_s, s, 5), targets = random_cluster(50, c_t, s, 6);
  double const h = h_over_scale * s;
  auto const got = expansion_field<kind, 8, float>(targets, c_t, s, sources, c_s, s, h);
  Errors const err = relative_errors(got, direct_field<kind>(targets, sources, h));
  for (auto const& f : got)
    for (double v : f) EXPECT_TRUE(std::isfinite(v));
  EXPECT_LT(err.potential, 1e-5);
  EXPECT_LT(err.force, 1e-5);
}

TEST(Expansion, FloatStaysFiniteAndAccurateForTinyAndHugeNodes) {
  if constexpr (kfmm::expansion_order_built(8)) {
    for (int e : {-30, 20}) {
      expect_float_accurate_at_scale<SofteningKind::Plummer>(e, 0.1);
      expect_float_accurate_at_scale<SofteningKind::Spline>(e, 24.0);  // all pairs inside h/2
    }
  } else {
    GTEST_SKIP() << kfmm::test_support::not_built_message(8);
  }
}

template <int P>
struct ReportOrder {
  static int run(int offset) { return P + offset; }
};

TEST(Expansion, DispatchOrderCallsTheMatchingInstantiation) {
  for (int p = 1; p <= 8; ++p) EXPECT_EQ(kfmm::dispatch_order<ReportOrder>(p, 100), 100 + p);
  EXPECT_THROW(kfmm::dispatch_order<ReportOrder>(0, 0), kfmm::Error);
  EXPECT_THROW(kfmm::dispatch_order<ReportOrder>(9, 0), kfmm::Error);
}

}  // namespace
