// The GPU shape of the expansion kernels (expansion_teams.hpp), run on this build's backend in
// every configuration: M2L, M2P, P2M, M2M, L2L and L2P team kernels against the one-lane
// expansion functions (the CPU shape) to round-off, on hand-made lists and trees that take
// several source batches, particle tiles and child chunks; results independent of the team size.
#include <kfmm/fmm/expansion_teams.hpp>
#include <built_orders.hpp>
#include <device_views.hpp>
#include <fmm/one_lane_expansion.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <vector>

namespace {

using namespace kfmm;
using kfmm::detail::TeamShape;
namespace one_lane = kfmm::test_support::one_lane;

using kfmm::test_support::device_view;

Vec3View<double> device_vec3(std::vector<std::array<double, 3>> const& values) {
  Vec3View<double> view("test", values.size());
  auto host = Kokkos::create_mirror_view(view);
  for (std::size_t i = 0; i < values.size(); ++i)
    for (int a = 0; a < 3; ++a) host(i, a) = values[i][a];
  Kokkos::deep_copy(view, host);
  return view;
}

template <class Real, int P>
using Coefficients = Kokkos::View<Real* [ncoeff<P>], Kokkos::LayoutRight, MemorySpace>;

template <class Real, int P>
std::vector<std::array<Real, ncoeff<P>>> to_host(Coefficients<Real, P> const& view) {
  auto const host = Kokkos::create_mirror_view_and_copy(HostSpace(), view);
  std::vector<std::array<Real, ncoeff<P>>> out(view.extent(0));
  for (std::size_t i = 0; i < out.size(); ++i)
    for (int k = 0; k < ncoeff<P>; ++k) out[i][k] = host(i, k);
  return out;
}

template <class Real, int P>
Coefficients<Real, P> to_device(std::vector<std::array<Real, ncoeff<P>>> const& values) {
  Coefficients<Real, P> view("test", values.size());
  auto host = Kokkos::create_mirror_view(view);
  for (std::size_t i = 0; i < values.size(); ++i)
    for (int k = 0; k < ncoeff<P>; ++k) host(i, k) = values[i][k];
  Kokkos::deep_copy(view, host);
  return view;
}

template <class Real>
double tolerance() {
  return sizeof(Real) == 4 ? 3e-5 : 1e-12;
}

template <class Real, std::size_t N>
double max_abs(std::array<Real, N> const& v) {
  double m = 0;
  for (Real x : v) m = std::max(m, std::abs(double(x)));
  return m;
}

// Team sizes to run: the backend's choice, 1, and 2 where the backend has two threads.
std::vector<TeamShape> team_shapes() {
  std::vector<TeamShape> shapes = {TeamShape{0}, TeamShape{1}};
  if (ExecutionSpace().concurrency() >= 2) shapes.push_back(TeamShape{2});
  return shapes;
}

// M2L: targets 0, 1 with many sources (several batches) in segment 0, target 0 again in
// segment 1; against one m2l() call per source, accumulated per target.
template <class Real, int P, SofteningKind kind>
void expect_m2l_teams_match_one_lane() {
  SCOPED_TRACE(testing::Message() << "P = " << P << (sizeof(Real) == 4 ? " float" : " double"));
  constexpr int N = ncoeff<P>;
  constexpr int batch = detail::M2LTeamLayout<Real, P>::batch;
  int const num_nodes = 2 + 2 * batch + 7;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(-0.5, 0.5);
  std::vector<std::array<Real, N>> M(num_nodes);
  std::vector<std::array<double, 3>> centre(num_nodes);
  std::vector<double> scale(num_nodes);
  for (int i = 0; i < num_nodes; ++i) {
    for (auto& m : M[i]) m = Real(u(rng));
    scale[i] = i < 2 ? 0.5 : std::ldexp(1.0, -int(2 * (u(rng) + 0.5)));
    centre[i] = i < 2 ? std::array<double, 3>{0.1 * i, 0.0, 0.0}
                      : std::array<double, 3>{4 + u(rng), 3 * u(rng), -3 + u(rng)};
  }
  // Groups: (target 0: sources 2 … 2 + batch + 3), (target 1: all sources), (target 0: 5 sources).
  std::vector<int> target = {0, 1, 0}, offset = {0}, source;
  auto add_group = [&](int first, int count) {
    for (int j = 0; j < count; ++j) source.push_back(first + j);
    offset.push_back(int(source.size()));
  };
  add_group(2, batch + 3);
  add_group(2, num_nodes - 2);
  add_group(7, 5);
  PairLists lists;
  lists.target = device_view(target);
  lists.offset = device_view(offset);
  lists.source = device_view(source);
  lists.segment_begin = {0, 2, 3};
  lists.num_groups = 3;
  lists.num_entries = int(source.size());
  NodeGeometry geometry;
  geometry.centre = device_vec3(centre);
  geometry.scale = device_view(scale);
  Real const h = Real(0.3);

  std::vector<std::array<Real, N>> want(num_nodes);
  for (auto& w : want) w.fill(Real(0));
  for (int g = 0; g < 3; ++g)
    for (int e = offset[g]; e < offset[g + 1]; ++e) {
      int const a = target[g], b = source[e];
      one_lane::m2l<kind, P>(M[b].data(), Real(scale[b]), Real(centre[a][0] - centre[b][0]), Real(centre[a][1] - centre[b][1]),
                   Real(centre[a][2] - centre[b][2]), h, Real(scale[a]), want[a].data());
    }

  auto const M_device = to_device<Real, P>(M);
  std::vector<std::array<Real, N>> first_result;
  for (TeamShape shape : team_shapes()) {
    Coefficients<Real, P> L("L", num_nodes);
    detail::m2l_teams<Real, P, kind>(ExecutionSpace(), M_device, L, geometry, lists, h, shape);
    auto const got = to_host<Real, P>(L);
    for (int a = 0; a < 2; ++a)
      for (int k = 0; k < N; ++k)
        EXPECT_NEAR(double(got[a][k]), double(want[a][k]), tolerance<Real>() * max_abs(want[a]))
            << "target " << a << " k = " << k << " team size " << shape.team_size;
    if (first_result.empty())
      first_result = got;
    else
      EXPECT_EQ(got, first_result) << "team size " << shape.team_size << " changed the bits";
  }
}

// Orders 3 and 8 where the build compiles them (built_orders.hpp); 7, the default, always.
TEST(ExpansionTeams, M2LMatchesOneLane) {
  if constexpr (expansion_order_built(3)) {
    expect_m2l_teams_match_one_lane<float, 3, SofteningKind::Plummer>();
    expect_m2l_teams_match_one_lane<double, 3, SofteningKind::Spline>();
  }
  expect_m2l_teams_match_one_lane<float, 7, SofteningKind::Plummer>();
  expect_m2l_teams_match_one_lane<double, 7, SofteningKind::Plummer>();
  if constexpr (expansion_order_built(8)) {
    expect_m2l_teams_match_one_lane<float, 8, SofteningKind::Spline>();
    expect_m2l_teams_match_one_lane<double, 8, SofteningKind::Spline>();
  }
}

// A two-level tree: root 0 with 9 children 1 … 9 (two chunks of children), leaves holding
// 0 … 2·tile + 5 particles (several P2M tiles, an empty leaf); child 4 is remote.
struct SmallTree {
  Tree<> tree;
  NodeGeometry geometry;
  std::vector<std::array<double, 3>> pos, centre;
  std::vector<double> mass, scale;
  std::vector<int> pbegin, pend, flags;
  Vec3View<double> pos_device;
  ScalarView<double> mass_device;

  explicit SmallTree(int tile) {
    std::mt19937_64 rng(9);
    std::uniform_real_distribution<double> u(-0.5, 0.5);
    int const children = 9;
    centre.push_back({0.0, 0.0, 0.0});
    scale.push_back(1.0);
    pbegin.push_back(0);
    flags.push_back(0);
    std::vector<int> cbegin = {0}, cend = {children}, cindex;
    for (int c = 0; c < children; ++c) {
      std::array<double, 3> const cc = {0.25 * (c % 2 ? 1 : -1), 0.25 * (c % 4 < 2 ? 1 : -1), 0.25 * (c < 4 ? 1 : -1)};
      int const count = c == 0 ? 2 * tile + 5 : (c == 3 ? 0 : 3 + 7 * c);
      pbegin.push_back(int(pos.size()));
      for (int i = 0; i < count; ++i) {
        pos.push_back({cc[0] + 0.5 * u(rng), cc[1] + 0.5 * u(rng), cc[2] + 0.5 * u(rng)});
        mass.push_back(1 + u(rng));
      }
      pend.push_back(int(pos.size()));
      centre.push_back(cc);
      scale.push_back(0.5);
      flags.push_back(c == 3 ? node_remote : node_leaf);
      cindex.push_back(1 + c);
      cbegin.push_back(0);
      cend.push_back(0);
    }
    pend.insert(pend.begin(), int(pos.size()));
    tree.particle_begin = device_view(pbegin);
    tree.particle_end = device_view(pend);
    tree.child_begin = device_view(cbegin);
    tree.child_end = device_view(cend);
    tree.child_index = device_view(cindex);
    tree.level_offset = {0, 1, 1 + children};
    tree.num_nodes = 1 + children;
    geometry.centre = device_vec3(centre);
    geometry.scale = device_view(scale);
    geometry.flags = device_view(flags);
    pos_device = device_vec3(pos);
    mass_device = device_view(mass);
  }
};

template <class Real, int P>
void expect_upward_and_downward_teams_match_one_lane() {
  SCOPED_TRACE(testing::Message() << "P = " << P << (sizeof(Real) == 4 ? " float" : " double"));
  constexpr int N = ncoeff<P>;
  SmallTree const t(detail::UpwardTeamLayout<Real, P>::tile);
  int const nodes = t.tree.num_nodes;

  // P2M at the leaves, then M2M into the root, one particle / child at a time.
  std::vector<std::array<Real, N>> want(nodes);
  for (auto& w : want) w.fill(Real(0));
  for (int node = 1; node < nodes; ++node)
    for (int i = t.pbegin[node]; i < t.pend[node]; ++i) {
      double const inv = 1.0 / t.scale[node];
      one_lane::p2m<P>(Real(t.mass[i]), Real((t.pos[i][0] - t.centre[node][0]) * inv),
             Real((t.pos[i][1] - t.centre[node][1]) * inv), Real((t.pos[i][2] - t.centre[node][2]) * inv),
             want[node].data());
    }
  for (int child = 1; child < nodes; ++child)
    one_lane::m2m<P>(want[child].data(), Real(t.scale[child]), Real(t.centre[child][0]), Real(t.centre[child][1]),
           Real(t.centre[child][2]), Real(1), want[0].data());

  // L2L from a root expansion into the children (not the remote one), L2P at their particles.
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(-0.5, 0.5);
  std::vector<std::array<Real, N>> L0(nodes), L_want(nodes);
  for (auto& l : L0) l.fill(Real(0));
  for (auto& v : L0[0]) v = Real(u(rng));
  for (int child = 1; child < nodes; ++child) {
    for (auto& v : L0[child]) v = Real(u(rng));  // L2L adds to what is there
    L_want[child] = L0[child];
    if (t.flags[child] & node_remote) continue;
    one_lane::l2l<P>(L0[0].data(), Real(1), Real(t.centre[child][0]), Real(t.centre[child][1]), Real(t.centre[child][2]),
           Real(t.scale[child]), L_want[child].data());
  }
  L_want[0] = L0[0];

  std::vector<std::array<Real, N>> first_M, first_L;
  std::vector<double> first_field;
  for (TeamShape shape : team_shapes()) {
    SCOPED_TRACE(testing::Message() << "team size " << shape.team_size);
    Coefficients<Real, P> M("M", nodes);
    detail::upward_teams<Real, P>(ExecutionSpace(), M, t.tree, t.geometry, t.pos_device, t.mass_device,
                                  ScalarView<int>{}, 1, nodes - 1, shape);
    detail::upward_teams<Real, P>(ExecutionSpace(), M, t.tree, t.geometry, t.pos_device, t.mass_device,
                                  device_view(std::vector<int>{0}), 0, 1, shape);
    auto const got_M = to_host<Real, P>(M);
    for (int node = 0; node < nodes; ++node)
      for (int k = 0; k < N; ++k)
        EXPECT_NEAR(double(got_M[node][k]), double(want[node][k]), tolerance<Real>() * (max_abs(want[node]) + 1e-30))
            << "multipole of node " << node << " k = " << k;

    auto const L = to_device<Real, P>(L0);
    detail::l2l_teams<Real, P>(ExecutionSpace(), L, t.tree, t.geometry, 0, 1, shape);
    auto const got_L = to_host<Real, P>(L);
    for (int node = 0; node < nodes; ++node)
      for (int k = 0; k < N; ++k)
        EXPECT_NEAR(double(got_L[node][k]), double(L_want[node][k]), tolerance<Real>() * max_abs(L_want[node]))
            << "local of node " << node << " k = " << k;

    int const n = int(t.pos.size());
    ScalarView<double> phi("phi", n);
    Vec3View<double> grad("grad", n);
    Kokkos::deep_copy(phi, -1.0);
    detail::l2p_teams<Real, P>(ExecutionSpace(), L, t.tree, t.geometry, t.pos_device, all_targets(ExecutionSpace(), n),
                               phi, grad, shape);
    auto const phi_host = Kokkos::create_mirror_view_and_copy(HostSpace(), phi);
    auto const grad_host = Kokkos::create_mirror_view_and_copy(HostSpace(), grad);
    std::vector<double> field;
    for (int node = 1; node < nodes; ++node)
      for (int i = t.pbegin[node]; i < t.pend[node]; ++i) {
        if (t.flags[node] & node_remote) {
          EXPECT_EQ(phi_host(i), -1.0) << "L2P wrote a particle of a remote leaf";
          continue;
        }
        double const inv = 1.0 / t.scale[node];
        Real p, gx, gy, gz;
        one_lane::l2p<P>(got_L[node].data(), Real(t.scale[node]), Real((t.pos[i][0] - t.centre[node][0]) * inv),
               Real((t.pos[i][1] - t.centre[node][1]) * inv), Real((t.pos[i][2] - t.centre[node][2]) * inv), p, gx,
               gy, gz);
        double const g = std::sqrt(double(gx) * gx + double(gy) * gy + double(gz) * gz);
        EXPECT_NEAR(phi_host(i), double(p), tolerance<Real>() * std::abs(double(p))) << "particle " << i;
        EXPECT_NEAR(grad_host(i, 0), double(gx), tolerance<Real>() * g) << "particle " << i;
        EXPECT_NEAR(grad_host(i, 1), double(gy), tolerance<Real>() * g) << "particle " << i;
        EXPECT_NEAR(grad_host(i, 2), double(gz), tolerance<Real>() * g) << "particle " << i;
        field.insert(field.end(), {phi_host(i), grad_host(i, 0), grad_host(i, 1), grad_host(i, 2)});
      }
    if (first_M.empty()) {
      first_M = got_M;
      first_L = got_L;
      first_field = field;
    } else {
      EXPECT_EQ(got_M, first_M) << "the team size changed the bits of M";
      EXPECT_EQ(got_L, first_L) << "the team size changed the bits of L";
      EXPECT_EQ(field, first_field) << "the team size changed the bits of the field";
    }
  }
}

TEST(ExpansionTeams, UpwardAndDownwardMatchOneLane) {
  if constexpr (expansion_order_built(3)) {
    expect_upward_and_downward_teams_match_one_lane<float, 3>();
    expect_upward_and_downward_teams_match_one_lane<double, 3>();
  }
  expect_upward_and_downward_teams_match_one_lane<float, 7>();
  expect_upward_and_downward_teams_match_one_lane<double, 7>();
  if constexpr (expansion_order_built(8)) expect_upward_and_downward_teams_match_one_lane<double, 8>();
}

// M2P: leaves of the small tree take far sources (a group with more sources than a team has
// threads, a leaf in two segments, leaves in no group); against one m2p() call per source and
// particle. Particles outside the groups' leaves keep their values; phi and grad accumulate.
template <class Real, int P, SofteningKind kind>
void expect_m2p_teams_match_one_lane() {
  SCOPED_TRACE(testing::Message() << "P = " << P << (sizeof(Real) == 4 ? " float" : " double"));
  constexpr int N = ncoeff<P>;
  SmallTree const t(3);
  int const first_source = t.tree.num_nodes, sources = 40;
  std::mt19937_64 rng(8);
  std::uniform_real_distribution<double> u(-0.5, 0.5);
  std::vector<std::array<double, 3>> centre = t.centre;
  std::vector<double> scale = t.scale;
  std::vector<std::array<Real, N>> M(first_source + sources);
  for (auto& m : M) m.fill(Real(0));
  for (int j = 0; j < sources; ++j) {
    centre.push_back({3 + u(rng), 2 * u(rng), -2 + u(rng)});
    scale.push_back(std::ldexp(1.0, -int(2 * (u(rng) + 0.5))));
    for (auto& m : M[first_source + j]) m = Real(u(rng));
  }
  // Segment 0: (leaf 1: all sources), (leaf 2: 5 of them); segment 1: (leaf 1: 3 of them).
  std::vector<int> target = {1, 2, 1}, offset = {0}, source;
  auto add_group = [&](int first, int count) {
    for (int j = 0; j < count; ++j) source.push_back(first_source + first + j);
    offset.push_back(int(source.size()));
  };
  add_group(0, sources);
  add_group(4, 5);
  add_group(30, 3);
  PairLists lists;
  lists.target = device_view(target);
  lists.offset = device_view(offset);
  lists.source = device_view(source);
  lists.segment_begin = {0, 2, 3};
  lists.num_groups = 3;
  lists.num_entries = int(source.size());
  NodeGeometry geometry = t.geometry;
  geometry.centre = device_vec3(centre);
  geometry.scale = device_view(scale);
  Real const h = Real(0.3);

  int const n = int(t.pos.size());
  std::vector<std::array<double, 4>> want(n, {-1.0, 0.5, 0.25, 0.125});
  for (int g = 0; g < 3; ++g)
    for (int i = t.pbegin[target[g]]; i < t.pend[target[g]]; ++i) {
      Real sum[4] = {};
      for (int e = offset[g]; e < offset[g + 1]; ++e) {
        int const b = source[e];
        Real f[4];
        one_lane::m2p<kind, P>(M[b].data(), Real(scale[b]), Real(t.pos[i][0] - centre[b][0]),
                               Real(t.pos[i][1] - centre[b][1]), Real(t.pos[i][2] - centre[b][2]), h, f[0], f[1],
                               f[2], f[3]);
        for (int k = 0; k < 4; ++k) sum[k] += f[k];
      }
      for (int k = 0; k < 4; ++k) want[i][k] += double(sum[k]);
    }

  auto const M_device = to_device<Real, P>(M);
  std::vector<double> first_field;
  for (TeamShape shape : team_shapes()) {
    SCOPED_TRACE(testing::Message() << "team size " << shape.team_size);
    ScalarView<double> phi("phi", n);
    Vec3View<double> grad("grad", n);
    Kokkos::deep_copy(phi, -1.0);
    Kokkos::deep_copy(Kokkos::subview(grad, Kokkos::ALL, 0), 0.5);
    Kokkos::deep_copy(Kokkos::subview(grad, Kokkos::ALL, 1), 0.25);
    Kokkos::deep_copy(Kokkos::subview(grad, Kokkos::ALL, 2), 0.125);
    detail::m2p_teams<Real, P, kind>(ExecutionSpace(), M_device, geometry, t.tree, t.pos_device,
                                     all_targets(ExecutionSpace(), n), lists, h, phi, grad, shape);
    auto const phi_host = Kokkos::create_mirror_view_and_copy(HostSpace(), phi);
    auto const grad_host = Kokkos::create_mirror_view_and_copy(HostSpace(), grad);
    std::vector<double> field;
    for (int i = 0; i < n; ++i) {
      double const got[4] = {phi_host(i), grad_host(i, 0), grad_host(i, 1), grad_host(i, 2)};
      double const scale_of = std::abs(want[i][0]) + std::abs(want[i][1]) + 1;
      for (int k = 0; k < 4; ++k) EXPECT_NEAR(got[k], want[i][k], tolerance<Real>() * scale_of) << "particle " << i << " k " << k;
      field.insert(field.end(), got, got + 4);
    }
    if (first_field.empty())
      first_field = field;
    else
      EXPECT_EQ(field, first_field) << "the team size changed the bits of the field";
  }
}

TEST(ExpansionTeams, M2PMatchesOneLane) {
  if constexpr (expansion_order_built(3)) expect_m2p_teams_match_one_lane<double, 3, SofteningKind::Spline>();
  expect_m2p_teams_match_one_lane<float, 7, SofteningKind::Plummer>();
  expect_m2p_teams_match_one_lane<double, 7, SofteningKind::Spline>();
  if constexpr (expansion_order_built(8)) expect_m2p_teams_match_one_lane<double, 8, SofteningKind::Plummer>();
}

// The streamed L2P of the GPU shape is l2p_lanes() with one lane, term for term.
template <int P, class Real>
void expect_streamed_l2p_matches() {
  std::mt19937_64 rng(2);
  std::uniform_real_distribution<double> u(-0.5, 0.5);
  Real L[ncoeff<P>];
  for (auto& v : L) v = Real(u(rng));
  for (int i = 0; i < 20; ++i) {
    Real const x = Real(u(rng)), y = Real(u(rng)), z = Real(u(rng));
    Real p1, x1, y1, z1, p2, x2, y2, z2;
    one_lane::l2p<P>(L, Real(0.5), x, y, z, p1, x1, y1, z1);
    detail::l2p_streamed<P>(L, Real(0.5), x, y, z, p2, x2, y2, z2);
    double const g = std::sqrt(double(x1) * x1 + double(y1) * y1 + double(z1) * z1);
    EXPECT_NEAR(double(p2), double(p1), tolerance<Real>() * std::abs(double(p1)));
    EXPECT_NEAR(double(x2), double(x1), tolerance<Real>() * g);
    EXPECT_NEAR(double(y2), double(y1), tolerance<Real>() * g);
    EXPECT_NEAR(double(z2), double(z1), tolerance<Real>() * g);
  }
}

TEST(ExpansionTeams, StreamedL2PMatchesLaneForm) {
  if constexpr (expansion_order_built(1)) expect_streamed_l2p_matches<1, double>();
  if constexpr (expansion_order_built(4)) expect_streamed_l2p_matches<4, float>();
  expect_streamed_l2p_matches<7, float>();
  if constexpr (expansion_order_built(8)) expect_streamed_l2p_matches<8, double>();
}

// Index arithmetic the team kernels use in place of the host tables.
TEST(ExpansionTeams, IndexArithmeticMatchesTables) {
  constexpr int P = 8;
  auto const& t = multi_index_table<P>;
  for (int i = 0; i < ncoeff<P>; ++i) {
    int a = -1, b = -1, c = -1;
    exponents_of(i, a, b, c);
    EXPECT_EQ(a, t.e[i][0]) << i;
    EXPECT_EQ(b, t.e[i][1]) << i;
    EXPECT_EQ(c, t.e[i][2]) << i;
    EXPECT_EQ(degree_of(i), t.degree[i]) << i;
    EXPECT_EQ(inv_factorial_of(a, b, c), t.inv_factorial[i]) << i;
  }
}

}  // namespace
