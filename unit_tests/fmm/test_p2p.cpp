// p2p_sources, the near-field inner loop of the CPU shape as the solver runs it on this host
// (the AVX-512 Plummer float loop where the compiler targets AVX-512, the portable loop
// elsewhere): equal to a double-precision pair sum, the target itself and unsoftened coincident
// pairs left out, padding sources of mass 0 harmless, for both kernels and both precisions.
// near_field in both shapes on a real tree and its P2P lists, whatever the build: the GPU shape
// (near_field_tiled) and the CPU shape (near_field_gathered) against a double pair sum over the
// lists, the exact pair count, and the GPU shape bit for bit the same for any team size. With
// a scattered subset of target particles (TargetParticles, as ForceSolver::compute_active has
// them), both shapes give those targets the bits of the full call and leave the other rows alone.
#include <kfmm/fmm/p2p.hpp>

#include "sorted_tree.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
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

// The spline's blocks of sources whose pairs all lie beyond its support h take a Newtonian loop
// (issue 17; on AVX-512 with 1/r from rsqrt14 and Newton steps): the sums equal those of the
// full formula in every block to rounding, blocks with a pair inside h or none, the target
// itself among the sources or not. (A block sent the wrong way would be off by the kernel's
// difference inside h, orders of magnitude more at h = 0.4.)
template <class Real, int L>
void expect_spline_blocks_match_the_full_formula() {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> uniform(-1, 1);
  Sources<Real> s;
  for (int j = 0; j < 300; ++j) s.add(uniform(rng), uniform(rng), uniform(rng), 1.0 + 0.5 * uniform(rng));
  s.pad();
  int const n = static_cast<int>(s.x.size());
  for (double h : {1e-3, 0.05, 0.4}) {
    for (int self : {3, 150, -1}) {
      Real const xi = self >= 0 ? s.x[self] : Real(0.1), yi = self >= 0 ? s.y[self] : Real(0.2),
                 zi = self >= 0 ? s.z[self] : Real(-0.3);
      Real phi = 0, g[3] = {0, 0, 0};
      kfmm::p2p_sources<SofteningKind::Spline, Real, L>(s.x.data(), s.y.data(), s.z.data(), s.m.data(), n, self, xi, yi,
                                                        zi, Real(h), phi, g[0], g[1], g[2]);
      // Every block through the full formula, lanes added in the same order.
      Real p[L] = {}, ax[L] = {}, ay[L] = {}, az[L] = {};
      for (int first = 0; first < n; first += L)
        kfmm::detail::p2p_block<SofteningKind::Spline, false, Real, L>(s.x.data(), s.y.data(), s.z.data(), s.m.data(),
                                                                      first, self, xi, yi, zi, Real(h), p, ax, ay, az);
      Real want = 0, want_g[3] = {0, 0, 0};
      for (int l = 0; l < L; ++l) {
        want += p[l];
        want_g[0] += ax[l];
        want_g[1] += ay[l];
        want_g[2] += az[l];
      }
      double const ulps = 64 * std::numeric_limits<Real>::epsilon();
      double const g_norm = std::sqrt(double(want_g[0]) * want_g[0] + double(want_g[1]) * want_g[1] +
                                      double(want_g[2]) * want_g[2]);
      EXPECT_NEAR(double(phi), double(want), ulps * std::abs(double(want))) << "h " << h << " self " << self << " lanes " << L;
      for (int k = 0; k < 3; ++k)
        EXPECT_NEAR(double(g[k]), double(want_g[k]), ulps * g_norm) << "component " << k << " h " << h << " self " << self;
    }
  }
}

}  // namespace

TEST(P2P, SplineNewtonianBlocksMatchTheFullFormula) {
  // The solver's width (the AVX-512 loop where the compiler targets it), and 8 lanes: the
  // portable loop on every machine.
  expect_spline_blocks_match_the_full_formula<float, W>();
  expect_spline_blocks_match_the_full_formula<double, W>();
  expect_spline_blocks_match_the_full_formula<float, 8>();
  expect_spline_blocks_match_the_full_formula<double, 8>();
}

TEST(P2P, FloatMatchesDoublePairSum) { expect_both_kernels<float>(2e-5); }

TEST(P2P, DoubleMatchesDoublePairSum) { expect_both_kernels<double>(1e-12); }

// ---- near_field on a tree ------------------------------------------------------------------

namespace {

using kfmm::HostSpace;

/// Potential and gradient of the near field of every particle, with the pair count.
struct NearFieldResult {
  std::vector<double> phi, grad;  // grad: 3 per particle
  std::uint64_t pairs = 0;
};

class NearField : public testing::Test {
 protected:
  // 3000 particles of a Plummer sphere and 300 coincident ones (a leaf of 300 > 2 tiles).
  static void SetUpTestSuite() {
    setup_ = new Setup;
    Setup& s = *setup_;
    s.sorted = kfmm_test::sorted_tree(kfmm_test::plummer_with_a_clump(3000, 300), 160);
    kfmm::ExecutionSpace const space;
    kfmm::compute_node_geometry(space, s.sorted.tree, s.sorted.particles.pos, s.sorted.particles.mass,
                                kfmm::ExpansionCentre::CentreOfMass, s.sorted.cube, s.geometry);
    kfmm::DualTreeWalk walk;
    kfmm::PairLists m2l;
    walk.run(space, s.sorted.tree, s.geometry, 0.6, 0.0, 0, m2l, s.lists);
    space.fence();
  }
  static void TearDownTestSuite() {
    delete setup_;
    setup_ = nullptr;
  }

  struct Setup {
    kfmm_test::SortedTree sorted;
    kfmm::NodeGeometry geometry;
    kfmm::PairLists lists;
  };
  static Setup* setup_;

  kfmm::PassParticles pass() const {
    auto const& p = setup_->sorted.particles;
    return kfmm::PassParticles{p.pos, p.mass, setup_->sorted.n, setup_->sorted.n};
  }

  /// Rows of particles that are not targets hold this before a call (and must after it).
  static constexpr double untouched = 5.0;

  /// One near-field call in a shape (team size 0: the backend's default) into zeroed sums, for
  /// the particles flagged in `flags` (empty: all).
  template <class Real, kfmm::SofteningKind kind>
  NearFieldResult run(bool tiled, double h, int team_size = 0, std::vector<std::uint8_t> const& flags = {}) const {
    int const n = setup_->sorted.n;
    kfmm::ScalarView<double> phi("phi", n);
    kfmm::Vec3View<double> grad("grad", n);
    kfmm::ScalarView<std::uint8_t> flagged;
    if (!flags.empty()) {
      flagged = kfmm::ScalarView<std::uint8_t>("flags", n);
      auto const f = Kokkos::create_mirror_view(flagged);
      auto const p = Kokkos::create_mirror_view(phi);
      auto const g = Kokkos::create_mirror_view(grad);
      for (int i = 0; i < n; ++i) {
        f(i) = flags[i];
        p(i) = flags[i] ? 0.0 : untouched;
        for (int k = 0; k < 3; ++k) g(i, k) = flags[i] ? 0.0 : untouched;
      }
      Kokkos::deep_copy(flagged, f);
      Kokkos::deep_copy(phi, p);
      Kokkos::deep_copy(grad, g);
    }
    kfmm::NearFieldScratch<Real> scratch;
    kfmm::ExecutionSpace const space;
    kfmm::TargetParticles targets;
    kfmm::select_targets(space, flagged, n, targets);
    auto const& s = *setup_;
    NearFieldResult r;
    r.pairs = tiled ? kfmm::near_field_tiled<Real, kind>(space, s.sorted.tree, s.geometry, s.lists, pass(), targets,
                                                         Real(h), phi, grad, scratch, team_size)
                    : kfmm::near_field_gathered<Real, kind>(space, s.sorted.tree, s.geometry, s.lists, pass(),
                                                            targets, Real(h), phi, grad, scratch);
    auto const p = Kokkos::create_mirror_view_and_copy(HostSpace(), phi);
    auto const g = Kokkos::create_mirror_view_and_copy(HostSpace(), grad);
    for (int i = 0; i < n; ++i) {
      r.phi.push_back(p(i));
      for (int k = 0; k < 3; ++k) r.grad.push_back(g(i, k));
    }
    return r;
  }

  /// The near field as a double pair sum over the lists, pair by pair on the host.
  template <kfmm::SofteningKind kind>
  NearFieldResult reference(double h) const {
    auto const& s = *setup_;
    int const n = s.sorted.n;
    auto const pos = Kokkos::create_mirror_view_and_copy(HostSpace(), s.sorted.particles.pos);
    auto const mass = Kokkos::create_mirror_view_and_copy(HostSpace(), s.sorted.particles.mass);
    auto const pbegin = Kokkos::create_mirror_view_and_copy(HostSpace(), s.sorted.tree.particle_begin);
    auto const pend = Kokkos::create_mirror_view_and_copy(HostSpace(), s.sorted.tree.particle_end);
    auto const target = Kokkos::create_mirror_view_and_copy(HostSpace(), s.lists.target);
    auto const offset = Kokkos::create_mirror_view_and_copy(HostSpace(), s.lists.offset);
    auto const source = Kokkos::create_mirror_view_and_copy(HostSpace(), s.lists.source);
    NearFieldResult r;
    r.phi.assign(n, 0.0);
    r.grad.assign(3 * std::size_t(n), 0.0);
    for (int g = 0; g < s.lists.num_groups; ++g) {
      int const a = target(g);
      for (int e = offset(g); e < offset(g + 1); ++e) {
        int const b = source(e);
        for (int i = pbegin(a); i < pend(a); ++i)
          for (int j = pbegin(b); j < pend(b); ++j) {
            if (i == j) continue;
            ++r.pairs;
            double const d[3] = {pos(i, 0) - pos(j, 0), pos(i, 1) - pos(j, 1), pos(i, 2) - pos(j, 2)};
            double const r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
            if (r2 + h * h == 0) continue;
            double K, F;
            kfmm::pair_kernel<kind, double>(r2, h, K, F);
            r.phi[i] += mass(j) * K;
            for (int k = 0; k < 3; ++k) r.grad[3 * std::size_t(i) + k] -= mass(j) * F * d[k];
          }
      }
    }
    return r;
  }

  /// Largest error of φ and ∇φ relative to the largest reference magnitude.
  static void expect_close(NearFieldResult const& got, NearFieldResult const& want, double tolerance,
                           char const* what) {
    double phi_scale = 0, grad_scale = 0, phi_error = 0, grad_error = 0;
    for (std::size_t i = 0; i < want.phi.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got.phi[i])) << what << " particle " << i;
      phi_scale = std::max(phi_scale, std::fabs(want.phi[i]));
      phi_error = std::max(phi_error, std::fabs(got.phi[i] - want.phi[i]));
    }
    for (std::size_t c = 0; c < want.grad.size(); ++c) {
      grad_scale = std::max(grad_scale, std::fabs(want.grad[c]));
      grad_error = std::max(grad_error, std::fabs(got.grad[c] - want.grad[c]));
    }
    EXPECT_GT(phi_scale, 0.0) << what;
    EXPECT_LE(phi_error, tolerance * phi_scale) << what;
    EXPECT_LE(grad_error, tolerance * grad_scale) << what;
  }

  static void expect_identical(NearFieldResult const& a, NearFieldResult const& b, char const* what) {
    EXPECT_EQ(a.pairs, b.pairs) << what;
    ASSERT_EQ(a.phi.size(), b.phi.size());
    EXPECT_EQ(std::memcmp(a.phi.data(), b.phi.data(), a.phi.size() * sizeof(double)), 0) << what;
    EXPECT_EQ(std::memcmp(a.grad.data(), b.grad.data(), a.grad.size() * sizeof(double)), 0) << what;
  }

  /// Both shapes against the reference; the GPU shape repeated with other team sizes.
  template <class Real, kfmm::SofteningKind kind>
  void check_shapes(double tolerance) const {
    for (double h : {0.0, 0.01}) {
      SCOPED_TRACE("h = " + std::to_string(h));
      auto const want = reference<kind>(h);
      auto const tiled = run<Real, kind>(true, h);
      auto const gathered = run<Real, kind>(false, h);
      EXPECT_EQ(tiled.pairs, want.pairs);
      EXPECT_EQ(gathered.pairs, want.pairs);
      expect_close(tiled, want, tolerance, "GPU shape");
      expect_close(gathered, want, tolerance, "CPU shape");
      expect_close(tiled, gathered, 2 * tolerance, "GPU shape against CPU shape");
      int const largest = kfmm::compat::concurrency(kfmm::ExecutionSpace());
      for (int team : {1, 2, 3})
        if (team <= largest) expect_identical(run<Real, kind>(true, h, team), tiled, "team size");
      expect_identical(run<Real, kind>(true, h), tiled, "second run");
    }
  }
};

NearField::Setup* NearField::setup_ = nullptr;

TEST_F(NearField, ListsExerciseSeveralSegmentsPerTargetAndLeavesLargerThanATile) {
  auto const& s = *setup_;
  auto const target = Kokkos::create_mirror_view_and_copy(HostSpace(), s.lists.target);
  auto const pbegin = Kokkos::create_mirror_view_and_copy(HostSpace(), s.sorted.tree.particle_begin);
  auto const pend = Kokkos::create_mirror_view_and_copy(HostSpace(), s.sorted.tree.particle_end);
  std::vector<int> groups_of(s.sorted.tree.num_nodes, 0);
  int largest_leaf = 0;
  for (int g = 0; g < s.lists.num_groups; ++g) {
    ++groups_of[target(g)];
    largest_leaf = std::max(largest_leaf, pend(target(g)) - pbegin(target(g)));
  }
  EXPECT_GT(s.lists.num_segments(), 1);
  EXPECT_GT(*std::max_element(groups_of.begin(), groups_of.end()), 1);
  EXPECT_GT(largest_leaf, 2 * kfmm::p2p_tile);
}

TEST_F(NearField, FloatPlummerBothShapesMatchThePairSum) { check_shapes<float, kfmm::SofteningKind::Plummer>(2e-5); }
TEST_F(NearField, FloatSplineBothShapesMatchThePairSum) { check_shapes<float, kfmm::SofteningKind::Spline>(2e-5); }
TEST_F(NearField, DoublePlummerBothShapesMatchThePairSum) { check_shapes<double, kfmm::SofteningKind::Plummer>(1e-12); }
TEST_F(NearField, DoubleSplineBothShapesMatchThePairSum) { check_shapes<double, kfmm::SofteningKind::Spline>(1e-12); }

TEST_F(NearField, AddsToTheSumsItIsGivenAndKeepsItsScratch) {
  int const n = setup_->sorted.n;
  kfmm::ScalarView<double> phi("phi", n);
  kfmm::Vec3View<double> grad("grad", n);
  Kokkos::deep_copy(phi, 1.0);
  Kokkos::deep_copy(grad, -2.0);
  kfmm::NearFieldScratch<double> scratch;
  kfmm::ExecutionSpace const space;
  auto const& s = *setup_;
  auto const targets = kfmm::all_targets(space, n);
  kfmm::near_field_tiled<double, kfmm::SofteningKind::Plummer>(space, s.sorted.tree, s.geometry, s.lists, pass(),
                                                              targets, 0.01, phi, grad, scratch);
  auto const first_group = scratch.first_group;
  kfmm::near_field_tiled<double, kfmm::SofteningKind::Plummer>(space, s.sorted.tree, s.geometry, s.lists, pass(),
                                                              targets, 0.01, phi, grad, scratch);
  EXPECT_EQ(scratch.first_group.data(), first_group.data()) << "the second call reallocated its scratch";
  auto const once = run<double, kfmm::SofteningKind::Plummer>(true, 0.01);
  auto const p = Kokkos::create_mirror_view_and_copy(HostSpace(), phi);
  auto const g = Kokkos::create_mirror_view_and_copy(HostSpace(), grad);
  for (int i = 0; i < n; i += 97) {
    EXPECT_NEAR(p(i), 1.0 + 2 * once.phi[i], 1e-12 * (1 + std::fabs(once.phi[i]))) << i;
    EXPECT_NEAR(g(i, 1), -2.0 + 2 * once.grad[3 * i + 1], 1e-12 * (2 + std::fabs(once.grad[3 * i + 1]))) << i;
  }
}

/// Scattered targets (every particle with probability 1/3, several per leaf, also in the
/// clump's leaf of more than two tiles): in both shapes, for the double spline and the float
/// Plummer kernel, each target gets exactly the bits of the full call, the other rows stay as
/// they were, and the pair count is that of the targets alone.
TEST_F(NearField, ScatteredTargetsGetTheFullCallsBitsAndNothingElseIsWritten) {
  auto const& s = *setup_;
  int const n = s.sorted.n;
  std::mt19937 random(14);
  std::vector<std::uint8_t> flags(n);
  for (auto& f : flags) f = random() % 3 == 0 ? 1 : 0;
  auto const pbegin = Kokkos::create_mirror_view_and_copy(HostSpace(), s.sorted.tree.particle_begin);
  auto const pend = Kokkos::create_mirror_view_and_copy(HostSpace(), s.sorted.tree.particle_end);
  auto const target = Kokkos::create_mirror_view_and_copy(HostSpace(), s.lists.target);
  auto const offset = Kokkos::create_mirror_view_and_copy(HostSpace(), s.lists.offset);
  auto const source = Kokkos::create_mirror_view_and_copy(HostSpace(), s.lists.source);
  // The pairs of the targets; how many target leaves mix targets and others, the largest such leaf.
  std::uint64_t pairs = 0;
  std::vector<char> seen(s.sorted.tree.num_nodes, 0);
  int mixed_leaves = 0, largest_mixed = 0;
  for (int g = 0; g < s.lists.num_groups; ++g) {
    int const a = target(g);
    int targets = 0;
    for (int i = pbegin(a); i < pend(a); ++i) targets += flags[i];
    for (int e = offset(g); e < offset(g + 1); ++e)
      pairs += std::uint64_t(targets) * (pend(source(e)) - pbegin(source(e))) - (source(e) == a ? targets : 0);
    if (!seen[a] && targets > 1 && targets < pend(a) - pbegin(a)) {
      ++mixed_leaves;
      largest_mixed = std::max(largest_mixed, pend(a) - pbegin(a));
    }
    seen[a] = 1;
  }
  EXPECT_GT(mixed_leaves, 5);
  EXPECT_GT(largest_mixed, 2 * kfmm::p2p_tile);
  for (double h : {0.0, 0.01}) {
    for (bool tiled : {true, false}) {
      SCOPED_TRACE(std::string(tiled ? "GPU shape" : "CPU shape") + ", h = " + std::to_string(h));
      NearFieldResult const full[2] = {run<double, kfmm::SofteningKind::Spline>(tiled, h),
                                       run<float, kfmm::SofteningKind::Plummer>(tiled, h)};
      NearFieldResult const some[2] = {run<double, kfmm::SofteningKind::Spline>(tiled, h, 0, flags),
                                       run<float, kfmm::SofteningKind::Plummer>(tiled, h, 0, flags)};
      for (int c = 0; c < 2; ++c) {
        SCOPED_TRACE(c == 0 ? "double spline" : "float Plummer");
        EXPECT_EQ(some[c].pairs, pairs);
        int mismatches = 0, written = 0;
        for (int i = 0; i < n; ++i)
          for (int k = -1; k < 3; ++k) {
            double const got = k < 0 ? some[c].phi[i] : some[c].grad[3 * std::size_t(i) + k];
            double const want = k < 0 ? full[c].phi[i] : full[c].grad[3 * std::size_t(i) + k];
            if (flags[i])
              mismatches += std::memcmp(&got, &want, sizeof(double)) != 0;
            else
              written += got != untouched;
          }
        EXPECT_EQ(mismatches, 0);
        EXPECT_EQ(written, 0);
      }
    }
  }
}

}  // namespace
