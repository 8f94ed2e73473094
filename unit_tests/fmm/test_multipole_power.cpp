// The harmonic multipole power from a node's moments against its definition as a double sum
// over particle pairs, for a point mass, symmetric arrangements whose low degrees cancel,
// random clusters (every order, float and double moments) and a lopsided cell.
#include <kfmm/fmm/expansion.hpp>
#include <kfmm/fmm/multipole_power.hpp>

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>
#include <vector>

namespace {

using Vec = std::array<double, 3>;

struct Particle {
  Vec x;
  double m;
};

double legendre(int n, double t) {
  double p0 = 1, p1 = t;
  if (n == 0) return p0;
  for (int k = 1; k < n; ++k) {
    double const p2 = ((2 * k + 1) * t * p1 - k * p0) / (k + 1);
    p0 = p1;
    p1 = p2;
  }
  return p1;
}

// H_n / s^n from the definition: Σ_jk m_j m_k |u_j|^n |u_k|^n P_n(cos ∠(u_j, u_k)), u = x/s.
double power_by_pairs(std::vector<Particle> const& particles, int n, double s) {
  double h2 = 0;
  for (auto const& a : particles)
    for (auto const& b : particles) {
      Vec const u = {a.x[0] / s, a.x[1] / s, a.x[2] / s}, v = {b.x[0] / s, b.x[1] / s, b.x[2] / s};
      double const ru = std::sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2]);
      double const rv = std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
      if (ru == 0 || rv == 0) {
        if (n == 0) h2 += a.m * b.m;
        continue;
      }
      double const c = (u[0] * v[0] + u[1] * v[1] + u[2] * v[2]) / (ru * rv);
      h2 += a.m * b.m * std::pow(ru * rv, n) * legendre(n, c);
    }
  return std::sqrt(std::max(h2, 0.0));
}

template <int P, class Real>
std::array<double, P + 1> power_from_moments(std::vector<Particle> const& particles, double s) {
  std::array<Real, kfmm::ncoeff<P>> M{};
  for (auto const& p : particles)
    kfmm::p2m<P, Real>(Real(p.m), Real(p.x[0] / s), Real(p.x[1] / s), Real(p.x[2] / s), M.data());
  std::array<double, P + 1> H{};
  kfmm::harmonic_power<P, Real>(M.data(), H.data());
  return H;
}

std::vector<Particle> random_cell(int n, Vec offset, double side, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(-0.5, 0.5);
  std::vector<Particle> out;
  for (int i = 0; i < n; ++i)
    out.push_back({{offset[0] + side * uniform(rng), offset[1] + side * uniform(rng), offset[2] + side * uniform(rng)},
                   0.5 + uniform(rng)});
  return out;
}

class MultipolePower : public ::testing::Test {
 protected:
  template <int P, class Real>
  void expect_definition(std::vector<Particle> const& particles, double s, double tolerance) {
    auto const H = power_from_moments<P, Real>(particles, s);
    for (int n = 0; n <= P; ++n) {
      double const expected = power_by_pairs(particles, n, s);
      double bound = 0;  // Σ m |u|^n: the scale of H_n and its upper limit
      for (auto const& p : particles)
        bound += p.m * std::pow(std::sqrt(p.x[0] * p.x[0] + p.x[1] * p.x[1] + p.x[2] * p.x[2]) / s, n);
      EXPECT_NEAR(H[n], expected, tolerance * bound) << "degree " << n << " of order " << P;
      EXPECT_LE(H[n], bound * (1 + tolerance)) << "degree " << n << " of order " << P;
    }
  }
};

TEST_F(MultipolePower, PointMassKeepsEveryDegree) {
  std::vector<Particle> const point = {{{0.3, -0.2, 0.1}, 2.0}};
  auto const H = power_from_moments<8, double>(point, 1.0);
  double const r = std::sqrt(0.09 + 0.04 + 0.01);
  for (int n = 0; n <= 8; ++n) EXPECT_NEAR(H[n], 2.0 * std::pow(r, n), 1e-13) << "degree " << n;
}

TEST_F(MultipolePower, CubeCornersCancelBelowDegreeFour) {
  // Inversion symmetry removes the odd degrees, cubic symmetry the quadrupole; degree 4 stays.
  std::vector<Particle> corners;
  for (int i = 0; i < 8; ++i) corners.push_back({{i & 1 ? 0.5 : -0.5, i & 2 ? 0.5 : -0.5, i & 4 ? 0.5 : -0.5}, 1.0});
  auto const H = power_from_moments<6, double>(corners, 1.0);
  EXPECT_NEAR(H[0], 8.0, 1e-14);
  for (int n : {1, 2, 3, 5}) EXPECT_LT(H[n], 1e-6) << "degree " << n;
  EXPECT_GT(H[4], 0.1);
  expect_definition<6, double>(corners, 1.0, 1e-6);
}

TEST_F(MultipolePower, MatchesTheDefinitionAtEveryOrder) {
  auto const cell = random_cell(40, {0.05, -0.02, 0.03}, 1.0, 7);
  expect_definition<1, double>(cell, 1.0, 1e-12);
  expect_definition<2, double>(cell, 1.0, 1e-12);
  expect_definition<3, double>(cell, 1.0, 1e-12);
  expect_definition<4, double>(cell, 1.0, 1e-12);
  expect_definition<5, double>(cell, 1.0, 1e-12);
  expect_definition<6, double>(cell, 1.0, 1e-12);
  expect_definition<7, double>(cell, 1.0, 1e-11);
  expect_definition<8, double>(cell, 1.0, 1e-11);
  // Float moments: H is an estimate, rounding of the moments may move it by ~√ε of its bound.
  expect_definition<7, float>(cell, 1.0, 2e-3);
}

TEST_F(MultipolePower, SmoothCellsCancelLopsidedCellsDoNot) {
  // 400 particles filling a cell evenly against the same mass crowded into one corner.
  auto const smooth = random_cell(400, {0, 0, 0}, 1.0, 11);
  auto const lopsided = random_cell(400, {0.4, 0.4, 0.4}, 0.05, 12);
  auto const Hs = power_from_moments<7, double>(smooth, 1.0);
  auto const Hl = power_from_moments<7, double>(lopsided, 1.0);
  for (int n = 2; n <= 7; ++n) {
    double bound_s = 0, bound_l = 0;
    for (auto const& p : smooth) bound_s += p.m * std::pow(std::hypot(p.x[0], p.x[1], p.x[2]), n);
    for (auto const& p : lopsided) bound_l += p.m * std::pow(std::hypot(p.x[0], p.x[1], p.x[2]), n);
    EXPECT_LT(Hs[n], 0.3 * bound_s) << "degree " << n;
    EXPECT_GT(Hl[n], 0.9 * bound_l) << "degree " << n;
  }
  expect_definition<7, double>(smooth, 1.0, 1e-11);
  expect_definition<7, double>(lopsided, 1.0, 1e-11);
}

// Eight nodes at once, one per lane (the CPU shape), give each node the bits it gets alone (the
// GPU shape), whatever the other lanes hold: a point mass, symmetric, smooth and lopsided cells.
template <int P, class Real>
void expect_lanes_match_one_node() {
  std::vector<std::vector<Particle>> cells = {{{{0.3, -0.2, 0.1}, 2.0}},
                                              random_cell(40, {0.05, -0.02, 0.03}, 1.0, 7),
                                              random_cell(400, {0, 0, 0}, 1.0, 11),
                                              random_cell(400, {0.4, 0.4, 0.4}, 0.05, 12)};
  for (unsigned seed = 20; cells.size() < 8; ++seed) cells.push_back(random_cell(10 + int(seed), {0.1, 0.2, -0.1}, 0.7, seed));
  std::vector<std::array<Real, kfmm::ncoeff<P>>> moments(8);
  Real const* lane[8];
  for (int l = 0; l < 8; ++l) {
    moments[l] = {};
    for (auto const& p : cells[l]) kfmm::p2m<P, Real>(Real(p.m), Real(p.x[0]), Real(p.x[1]), Real(p.x[2]), moments[l].data());
    lane[l] = moments[l].data();
  }
  double together[P + 1][8];
  kfmm::harmonic_power_lanes<P, 8, Real>(lane, together);
  for (int l = 0; l < 8; ++l) {
    std::array<double, P + 1> alone{};
    kfmm::harmonic_power<P, Real>(lane[l], alone.data());
    for (int n = 0; n <= P; ++n) EXPECT_EQ(together[n][l], alone[n]) << "lane " << l << ", degree " << n << ", order " << P;
  }
}

TEST_F(MultipolePower, LanesGiveEachNodeItsOwnPowers) {
  expect_lanes_match_one_node<1, double>();
  expect_lanes_match_one_node<4, float>();
  expect_lanes_match_one_node<7, float>();
  expect_lanes_match_one_node<7, double>();
  expect_lanes_match_one_node<8, double>();
}

TEST_F(MultipolePower, ScaleOnlyRescalesTheUnits) {
  auto const cell = random_cell(30, {0.1, 0.0, -0.1}, 0.5, 3);
  auto const H1 = power_from_moments<5, double>(cell, 1.0);
  auto const H2 = power_from_moments<5, double>(cell, 0.25);
  for (int n = 0; n <= 5; ++n) EXPECT_NEAR(H2[n], H1[n] * std::pow(4.0, n), 1e-12 * std::pow(4.0, n) * (1 + H1[n]));
}

}  // namespace
