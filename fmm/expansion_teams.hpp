#pragma once
/// \file
/// \brief The GPU shape of the expansion kernels (P2M, M2M, M2L, L2L, L2P): Kokkos teams, one
/// thread per coefficient or particle, operands in level-0 team scratch, no SIMD lanes. The
/// passes take it where use_gpu_shape<ExecutionSpace>() (core/kernel_shape.hpp) says so;
/// the unit tests also call these entry points directly on the CPU, so every build runs them.
///
/// Every output coefficient (or particle) is owned by exactly one thread, which sums its terms
/// in a fixed order: the results do not depend on the team size or the number of teams in
/// flight (deterministic, no atomics). Index arithmetic is done on flat indices (device-safe,
/// no host tables read at run-time indices).
#include <kfmm/core/kernel_shape.hpp>
#include <kfmm/core/tree.hpp>
#include <kfmm/fmm/dual_tree_walk.hpp>
#include <kfmm/fmm/expansion.hpp>
#include <kfmm/fmm/node_geometry.hpp>
#include <kfmm/fmm/target_particles.hpp>

#include <cstddef>

namespace kfmm::detail {

/// Level-0 scratch each team of the expansion kernels may use: fits the 48 KiB a CUDA block gets
/// without opt-in, with room for two resident teams per SM on larger parts.
inline constexpr std::size_t expansion_scratch_budget = 32 * 1024;

/// Team shape of the expansion kernels: team_size 0 lets the backend choose (Kokkos::AUTO; on
/// host backends that is one thread, teams are plain loops). Tests set explicit sizes to show
/// that results do not depend on them.
struct TeamShape {
  int team_size = 0;
};

template <class Policy>
Policy make_team_policy(ExecutionSpace const& space, int league, TeamShape shape, std::size_t scratch_bytes) {
  Policy policy = shape.team_size > 0 ? Policy(space, league, shape.team_size) : Policy(space, league, Kokkos::AUTO);
  return policy.set_scratch_size(0, Kokkos::PerTeam(scratch_bytes));
}

using TeamPolicyDynamic = Kokkos::TeamPolicy<ExecutionSpace, Kokkos::Schedule<Kokkos::Dynamic>>;
using TeamMember = TeamPolicyDynamic::member_type;
template <class Real>
using TeamScratch = Kokkos::View<Real*, ExecutionSpace::scratch_memory_space, Kokkos::MemoryUnmanaged>;

/// L2P at one point, as l2p_lanes<P, Real, 1> (same products, same two accumulators per
/// output) but each monomial made just before the terms that use it: fully unrolled, only about
/// two degree shells of monomials are live at once, so a GPU thread keeps them in registers.
template <int P, class Real>
KOKKOS_INLINE_FUNCTION void l2p_streamed(Real const* L, Real s, Real ux, Real uy, Real uz, Real& phi, Real& dphidx,
                                         Real& dphidy, Real& dphidz) {
  Real const u[3] = {ux, uy, uz};
  Real mono[ncoeff<P>];
  Real value[2] = {}, gx[2] = {}, gy[2] = {}, gz[2] = {};
  static_for<ncoeff<P>>([&](auto I) KFMM_INLINE_LAMBDA {
    constexpr int k = decltype(I)::value;
    constexpr int a = multi_index_table<P>.e[k][0], b = multi_index_table<P>.e[k][1], c = multi_index_table<P>.e[k][2];
    constexpr int half = k % 2;
    if constexpr (k == 0) {
      mono[0] = Real(1);
    } else {
      constexpr int parent = multi_index_table<P>.parent[k];
      constexpr int axis = multi_index_table<P>.axis[k];
      mono[k] = mono[parent] * u[axis];
    }
    Real const Lk = L[k];
    value[half] += Lk * mono[k];
    if constexpr (a > 0) gx[half] += (Real(a) * Lk) * mono[flat_index(a - 1, b, c)];
    if constexpr (b > 0) gy[half] += (Real(b) * Lk) * mono[flat_index(a, b - 1, c)];
    if constexpr (c > 0) gz[half] += (Real(c) * Lk) * mono[flat_index(a, b, c - 1)];
  });
  Real const inv_s = Real(1) / s;
  phi = value[0] + value[1];
  dphidx = (gx[0] + gx[1]) * inv_s;
  dphidy = (gy[0] + gy[1]) * inv_s;
  dphidz = (gz[0] + gz[1]) * inv_s;
}

/// Scratch layout of M2L for a batch of B sources, every array source-minor ([i·B + j]):
/// acc[N] | x, y, z, h/ρ, 1/ρ [5B] | (−s_source/ρ)^d, (s_target/ρ)^d/ρ, g_d [3(P+1)B] |
/// two Hermite level buffers (the second ends as ∂K) [2NB] | scaled moments [NB].
template <class Real, int P>
struct M2LTeamLayout {
  static constexpr int N = ncoeff<P>;
  static constexpr int per_source = 5 + 3 * (P + 1) + 3 * N;
  static constexpr int batch = [] {
    int const fit = (int(expansion_scratch_budget / sizeof(Real)) - N) / per_source;
    return fit > 1 ? fit : 1;
  }();
  static constexpr int reals = N + batch * per_source;
};

/// M2L, GPU shape: a team per target group g of one segment of the lists. Sources go through
/// in batches of B (M2LTeamLayout::batch). Per batch: a thread per source computes the scaled
/// offset, the degree factors and the radial derivatives; then the team runs the Hermite
/// recurrence level by level over (entry, source) pairs and scales the moments; then a thread
/// per output coefficient k adds Σ_j (s_t/ρ_j)^{|k|}/(ρ_j k!) Σ_n D_j,{k+n} a_j,n, sources and
/// n in a fixed order, into acc[k] in scratch. Same arithmetic as m2l_lanes().
template <class Real, int P, SofteningKind kind>
struct M2LTeams {
  static constexpr int N = ncoeff<P>;
  using Layout = M2LTeamLayout<Real, P>;
  static constexpr int B = Layout::batch;
  using Coefficients = Kokkos::View<Real* [N], Kokkos::LayoutRight, MemorySpace>;

  Coefficients M, L;
  Vec3View<double> centre;
  ScalarView<double> scale;
  ScalarView<int> target, offset, source;
  Real h;
  int first_group;

  KOKKOS_INLINE_FUNCTION void operator()(TeamMember const& team) const {
    int const g = first_group + team.league_rank();
    int const t = target(g);
    int const begin = offset(g), total = offset(g + 1) - begin;
    Real const s_target = Real(scale(t));
    TeamScratch<Real> shared(team.team_scratch(0), Layout::reals);
    Real* const acc = shared.data();
    Real* const geo = acc + N;  // x, y, z, h/ρ, 1/ρ
    Real* const source_factor = geo + 5 * B;
    Real* const target_factor = source_factor + (P + 1) * B;
    Real* const radial = target_factor + (P + 1) * B;
    Real* const level_buffer[2] = {radial + (P + 1) * B, radial + (P + 1) * B + N * B};
    Real* const moments = level_buffer[1] + N * B;
    Real* const D = level_buffer[0];  // level 0 of the recurrence

    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, N), [&](int k) { acc[k] = Real(0); });
    for (int first = 0; first < total; first += B) {
      int const nb = compat::math::min(B, total - first);
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nb), [&](int j) {
        using compat::math::fabs;
        using compat::math::max;
        int const b = source(begin + first + j);
        Real const ex = Real(centre(t, 0) - centre(b, 0)), ey = Real(centre(t, 1) - centre(b, 1)),
                   ez = Real(centre(t, 2) - centre(b, 2));
        Real const s_source = Real(scale(b));
        Real const rho = max(max(max(fabs(ex), fabs(ey)), fabs(ez)), max(s_source, s_target));
        Real const inv_rho = Real(1) / rho;
        Real const x = ex * inv_rho, y = ey * inv_rho, z = ez * inv_rho, h_scaled = h * inv_rho;
        geo[j] = x;
        geo[B + j] = y;
        geo[2 * B + j] = z;
        geo[3 * B + j] = h_scaled;
        geo[4 * B + j] = inv_rho;
        Real sf = Real(1), tf = inv_rho;
        source_factor[j] = sf;
        target_factor[j] = tf;
        for (int d = 1; d <= P; ++d) {
          sf *= -s_source * inv_rho;
          tf *= s_target * inv_rho;
          source_factor[d * B + j] = sf;
          target_factor[d * B + j] = tf;
        }
        Real gm[P + 1];
        radial_derivatives<kind, P>(x * x + y * y + z * z, h_scaled, gm);
        for (int m = 0; m <= P; ++m) radial[m * B + j] = gm[m];
      });
      team.team_barrier();
      // Scaled moments a_n = M_n (−s_source/ρ)^{|n|}, and the Hermite recurrence
      // R⁽ᵐ⁾_{α+e} = x_e R⁽ᵐ⁺¹⁾_α + α_e R⁽ᵐ⁺¹⁾_{α−e} for m = P … 0 (as cartesian_derivatives_lanes).
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, N * nb), [&](int q) {
        int const n = q / nb, j = q % nb;
        moments[n * B + j] = M(source(begin + first + j), n) * source_factor[degree_of(n) * B + j];
      });
      for (int m = P; m >= 0; --m) {
        Real* const out = level_buffer[m % 2];
        Real const* const in = level_buffer[(m + 1) % 2];
        int const count = (P - m + 1) * (P - m + 2) * (P - m + 3) / 6;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, count * nb), [&](int q) {
          int const i = q / nb, j = q % nb;
          if (i == 0) {
            out[j] = radial[m * B + j];
            return;
          }
          int e[3] = {0, 0, 0};
          exponents_of(i, e[0], e[1], e[2]);
          int const axis = e[0] > 0 ? 0 : (e[1] > 0 ? 1 : 2);
          Real const coordinate = geo[axis * B + j];
          e[axis] -= 1;
          Real const first_term = coordinate * in[flat_index(e[0], e[1], e[2]) * B + j];
          if (e[axis] >= 1) {
            int const k = e[axis];
            e[axis] -= 1;
            out[i * B + j] = first_term + Real(k) * in[flat_index(e[0], e[1], e[2]) * B + j];
          } else {
            out[i * B + j] = first_term;
          }
        });
        team.team_barrier();
      }
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, N), [&](int k) {
        int ka = 0, kb = 0, kc = 0;
        exponents_of(k, ka, kb, kc);
        int const dk = ka + kb + kc;
        Real const inv_factorial = Real(inv_factorial_of(ka, kb, kc));
        Real sum = acc[k];
        for (int j = 0; j < nb; ++j) {
          Real part = Real(0);
          int n = 0;
          for (int d = 0; d <= P - dk; ++d)
            for (int a = d; a >= 0; --a)
              for (int b = d - a; b >= 0; --b, ++n)
                part += moments[n * B + j] * D[flat_index(ka + a, kb + b, kc + d - a - b) * B + j];
          sum += part * (target_factor[dk * B + j] * inv_factorial);
        }
        acc[k] = sum;
      });
      team.team_barrier();
    }
    team.team_barrier();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, N), [&](int k) { L(t, k) += acc[k]; });
  }
};

/// M2L over all segments of `lists`, GPU shape (see M2LTeams); L accumulates.
template <class Real, int P, SofteningKind kind>
void m2l_teams(ExecutionSpace const& space, typename M2LTeams<Real, P, kind>::Coefficients const& M,
               typename M2LTeams<Real, P, kind>::Coefficients const& L, NodeGeometry const& geometry,
               PairLists const& lists, Real h, TeamShape shape = {}) {
  using Functor = M2LTeams<Real, P, kind>;
  std::size_t const bytes = TeamScratch<Real>::shmem_size(Functor::Layout::reals);
  for (int s = 0; s < lists.num_segments(); ++s) {
    int const groups = lists.segment_begin[s + 1] - lists.segment_begin[s];
    if (groups == 0) continue;
    Kokkos::parallel_for("kfmm::fmm::m2l_teams", make_team_policy<TeamPolicyDynamic>(space, groups, shape, bytes),
                         Functor{M, L, geometry.centre, geometry.scale, lists.target, lists.offset, lists.source, h,
                                 lists.segment_begin[s]});
  }
}

/// M2P, GPU shape: a team per group g of one segment of the M2P lists (target leaf t), a thread
/// per target particle of t at a time, which takes the group's sources in list order: the scaled
/// offset, degree factors and radial derivatives in registers, the Hermite recurrence (as
/// cartesian_derivatives_lanes) in its own 2·N reals of team scratch, then φ += Σ_n D_n a_n and
/// ∂φ/∂x_e += Σ_{|n|<P} D_{n+e} a_n with a_n = M_n (−s_source/ρ)^{|n|}. Same arithmetic as
/// m2p_lanes(); each particle's sum has a fixed order, whatever the team size.
template <class Real, int P, SofteningKind kind>
struct M2PTeams {
  static constexpr int N = ncoeff<P>;
  static constexpr int per_thread = 2 * N;  // two levels of the recurrence
  /// Threads per team on GPUs: as many as the scratch budget holds, at most a warp.
  static constexpr int gpu_team_size = [] {
    int const fit = int(expansion_scratch_budget / sizeof(Real)) / per_thread;
    return fit < 1 ? 1 : fit > 32 ? 32 : fit;
  }();
  using Coefficients = Kokkos::View<Real* [N], Kokkos::LayoutRight, MemorySpace>;

  Coefficients M;
  Vec3View<double> centre;
  ScalarView<double> scale;
  Vec3View<double> pos;
  ScalarView<int> pbegin, pend, before, index;
  ScalarView<int> target, offset, source;
  ScalarView<double> phi;
  Vec3View<double> grad;
  Real h;
  int first_group;

  KOKKOS_INLINE_FUNCTION void operator()(TeamMember const& team) const {
    int const g = first_group + team.league_rank();
    int const t = target(g);
    int const begin = before(pbegin(t)), end = before(pend(t));
    TeamScratch<Real> shared(team.team_scratch(0), std::size_t(per_thread) * team.team_size());
    Real* const mine = shared.data() + std::size_t(per_thread) * team.team_rank();
    Real* const level_buffer[2] = {mine, mine + N};
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, end - begin), [&](int k) {
      using compat::math::fabs;
      using compat::math::max;
      int const i = index(begin + k);
      Real value = Real(0), gx = Real(0), gy = Real(0), gz = Real(0);
      for (int e = offset(g); e < offset(g + 1); ++e) {
        int const b = source(e);
        Real const ex = Real(pos(i, 0) - centre(b, 0)), ey = Real(pos(i, 1) - centre(b, 1)),
                   ez = Real(pos(i, 2) - centre(b, 2));
        Real const s_source = Real(scale(b));
        Real const rho = max(max(max(fabs(ex), fabs(ey)), fabs(ez)), s_source);
        Real const inv_rho = Real(1) / rho;
        Real const geo[3] = {ex * inv_rho, ey * inv_rho, ez * inv_rho};
        Real gm[P + 1];
        radial_derivatives<kind, P>(geo[0] * geo[0] + geo[1] * geo[1] + geo[2] * geo[2], h * inv_rho, gm);
        // R⁽ᵐ⁾_{α+e} = x_e R⁽ᵐ⁺¹⁾_α + α_e R⁽ᵐ⁺¹⁾_{α−e}, m = P … 0; level 0 is ∂K (level_buffer[0]).
        for (int m = P; m >= 0; --m) {
          Real* const out = level_buffer[m % 2];
          Real const* const in = level_buffer[(m + 1) % 2];
          int const count = (P - m + 1) * (P - m + 2) * (P - m + 3) / 6;
          out[0] = gm[m];
          for (int q = 1; q < count; ++q) {
            int x[3] = {0, 0, 0};
            exponents_of(q, x[0], x[1], x[2]);
            int const axis = x[0] > 0 ? 0 : (x[1] > 0 ? 1 : 2);
            x[axis] -= 1;
            Real const first_term = geo[axis] * in[flat_index(x[0], x[1], x[2])];
            if (x[axis] >= 1) {
              int const c = x[axis];
              x[axis] -= 1;
              out[q] = first_term + Real(c) * in[flat_index(x[0], x[1], x[2])];
            } else {
              out[q] = first_term;
            }
          }
        }
        Real const* const D = level_buffer[0];
        Real factor = Real(1);  // (−s_source/ρ)^d
        Real v = Real(0), fx = Real(0), fy = Real(0), fz = Real(0);
        int n = 0;
        for (int d = 0; d <= P; ++d) {
          for (int a = d; a >= 0; --a)
            for (int bb = d - a; bb >= 0; --bb, ++n) {
              int const c = d - a - bb;
              Real const an = M(b, n) * factor;
              v += an * D[n];
              if (d < P) {
                fx += an * D[flat_index(a + 1, bb, c)];
                fy += an * D[flat_index(a, bb + 1, c)];
                fz += an * D[flat_index(a, bb, c + 1)];
              }
            }
          factor *= -s_source * inv_rho;
        }
        value += v * inv_rho;
        Real const inv2 = inv_rho * inv_rho;
        gx += fx * inv2;
        gy += fy * inv2;
        gz += fz * inv2;
      }
      phi(i) += value;
      grad(i, 0) += gx;
      grad(i, 1) += gy;
      grad(i, 2) += gz;
    });
  }
};

/// M2P over all segments of `lists`, GPU shape (see M2PTeams); phi and grad accumulate.
template <class Real, int P, SofteningKind kind>
void m2p_teams(ExecutionSpace const& space, typename M2PTeams<Real, P, kind>::Coefficients const& M,
               NodeGeometry const& geometry, Tree<> const& tree, Vec3View<double> const& pos,
               TargetParticles const& targets, PairLists const& lists, Real h, ScalarView<double> const& phi,
               Vec3View<double> const& grad, TeamShape shape = {}) {
  using Functor = M2PTeams<Real, P, kind>;
  // Scratch is sized per thread: the team size is fixed (AUTO could exceed what it holds).
  int const team_size = shape.team_size > 0 ? shape.team_size : gpu_shaped_kernels<ExecutionSpace>() ? Functor::gpu_team_size : 1;
  std::size_t const bytes = TeamScratch<Real>::shmem_size(std::size_t(Functor::per_thread) * team_size);
  for (int s = 0; s < lists.num_segments(); ++s) {
    int const groups = lists.segment_begin[s + 1] - lists.segment_begin[s];
    if (groups == 0) continue;
    Kokkos::parallel_for("kfmm::fmm::m2p_teams",
                         make_team_policy<TeamPolicyDynamic>(space, groups, TeamShape{team_size}, bytes),
                         Functor{M, geometry.centre, geometry.scale, pos, tree.particle_begin, tree.particle_end,
                                 targets.before, targets.index, lists.target, lists.offset, lists.source, phi, grad,
                                 h, lists.segment_begin[s]});
  }
}

/// What M2M and L2L need of the children of a node, chunk of up to 8 (an octree node's): per
/// child c, w[c·N + n] = (d_c/s_parent)^n / n! and ratio[c·(P+1) + e] = (s_c/s_parent)^e, as
/// parent_child_lanes().
template <class Real, int P>
KOKKOS_INLINE_FUNCTION void child_offsets_to_scratch(Vec3View<double> const& centre, ScalarView<double> const& scale,
                                                     int node, int child, Real* w, Real* ratio) {
  Real const inv_parent = Real(1) / Real(scale(node));
  Real const ux = Real(centre(child, 0) - centre(node, 0)) * inv_parent;
  Real const uy = Real(centre(child, 1) - centre(node, 1)) * inv_parent;
  Real const uz = Real(centre(child, 2) - centre(node, 2)) * inv_parent;
  Real const step = Real(scale(child)) * inv_parent;
  ratio[0] = Real(1);
  for (int e = 1; e <= P; ++e) ratio[e] = ratio[e - 1] * step;
  monomials<P, true>(ux, uy, uz, w);
}

/// Children per chunk of M2M and L2L: all of an octree node's.
inline constexpr int team_child_chunk = 8;

/// Scratch of the upward pass: P2M keeps a tile of particles' monomials [T·N] and masses [T];
/// M2M a chunk of children's offset monomials, scaled moments [2·8·N] and ratios [8·(P+1)];
/// both an accumulator [N].
template <class Real, int P>
struct UpwardTeamLayout {
  static constexpr int N = ncoeff<P>;
  static constexpr int m2m_reals = N + team_child_chunk * (2 * N + P + 1);
  static constexpr int tile = [] {
    int const fit = (int(expansion_scratch_budget / sizeof(Real)) - N) / (N + 1);
    return fit > 1 ? fit : 1;
  }();
  static constexpr int p2m_reals = N + tile * (N + 1);
  static constexpr int reals = p2m_reals > m2m_reals ? p2m_reals : m2m_reals;
};

/// P2M at a leaf, M2M at an inner node, GPU shape: a team per node (nodes(first + r) if `nodes`
/// is set, else first + r). P2M: per tile of particles, a thread per particle writes its
/// monomials into scratch, then a thread per coefficient k sums m_i u_i^k/k! over the tile in
/// particle order. M2M: per chunk of children, a thread per child makes its offset monomials, a
/// thread per (child, coefficient) its scaled moments, then a thread per output s sums
/// Σ_c Σ_{k ≤ s} a_c,k w_c,{s−k} (k in graded order, as m2m_lanes()).
template <class Real, int P>
struct UpwardTeams {
  static constexpr int N = ncoeff<P>;
  using Layout = UpwardTeamLayout<Real, P>;
  using Coefficients = Kokkos::View<Real* [N], Kokkos::LayoutRight, MemorySpace>;

  Coefficients M;
  Vec3View<double> pos;
  ScalarView<double> mass;
  ScalarView<int> pbegin, pend, cbegin, cend, cindex;
  Vec3View<double> centre;
  ScalarView<double> scale;
  ScalarView<int> nodes;
  int first;

  KOKKOS_INLINE_FUNCTION void operator()(TeamMember const& team) const {
    int const node = nodes.data() ? nodes(first + team.league_rank()) : first + team.league_rank();
    TeamScratch<Real> shared(team.team_scratch(0), Layout::reals);
    Real* const acc = shared.data();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, N), [&](int k) { acc[k] = Real(0); });
    team.team_barrier();
    if (cbegin(node) == cend(node))
      p2m(team, node, acc);
    else
      m2m(team, node, acc);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, N), [&](int k) { M(node, k) = acc[k]; });
  }

  KOKKOS_INLINE_FUNCTION void p2m(TeamMember const& team, int node, Real* acc) const {
    constexpr int T = Layout::tile;
    Real* const w = acc + N;
    Real* const m = w + T * N;
    double const inv = 1.0 / scale(node);
    int const begin = pbegin(node), end = pend(node);
    for (int tile_first = begin; tile_first < end; tile_first += T) {
      int const count = compat::math::min(T, end - tile_first);
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, count), [&](int l) {
        int const i = tile_first + l;
        m[l] = Real(mass(i));
        monomials<P, true>(Real((pos(i, 0) - centre(node, 0)) * inv), Real((pos(i, 1) - centre(node, 1)) * inv),
                           Real((pos(i, 2) - centre(node, 2)) * inv), w + l * N);
      });
      team.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, N), [&](int k) {
        Real sum = acc[k];
        for (int l = 0; l < count; ++l) sum += m[l] * w[l * N + k];
        acc[k] = sum;
      });
      team.team_barrier();
    }
  }

  KOKKOS_INLINE_FUNCTION void m2m(TeamMember const& team, int node, Real* acc) const {
    constexpr int C = team_child_chunk;
    Real* const w = acc + N;
    Real* const a = w + C * N;
    Real* const ratio = a + C * N;
    for (int chunk = cbegin(node); chunk < cend(node); chunk += C) {
      int const count = compat::math::min(C, cend(node) - chunk);
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, count), [&](int c) {
        child_offsets_to_scratch<Real, P>(centre, scale, node, cindex(chunk + c), w + c * N, ratio + c * (P + 1));
      });
      team.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, count * N), [&](int q) {
        int const c = q / N, k = q % N;
        a[c * N + k] = M(cindex(chunk + c), k) * ratio[c * (P + 1) + degree_of(k)];
      });
      team.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, N), [&](int s) {
        int sa = 0, sb = 0, sc = 0;
        exponents_of(s, sa, sb, sc);
        Real sum = acc[s];
        for (int c = 0; c < count; ++c) {
          Real part = Real(0);
          int k = 0;
          for (int d = 0; d <= sa + sb + sc; ++d)
            for (int ka = d; ka >= 0; --ka)
              for (int kb = d - ka; kb >= 0; --kb, ++k) {
                int const kc = d - ka - kb;
                if (ka <= sa && kb <= sb && kc <= sc)
                  part += a[c * N + k] * w[c * N + flat_index(sa - ka, sb - kb, sc - kc)];
              }
          sum += part;
        }
        acc[s] = sum;
      });
      team.team_barrier();
    }
  }
};

/// P2M / M2M over the nodes [first, first + count) (nodes unset) or nodes(first … first +
/// count − 1), GPU shape (see UpwardTeams). Overwrites their multipoles.
template <class Real, int P>
void upward_teams(ExecutionSpace const& space, typename UpwardTeams<Real, P>::Coefficients const& M,
                  Tree<> const& tree, NodeGeometry const& geometry, Vec3View<double> const& pos,
                  ScalarView<double> const& mass, ScalarView<int> const& nodes, int first, int count,
                  TeamShape shape = {}) {
  if (count <= 0) return;
  using Functor = UpwardTeams<Real, P>;
  std::size_t const bytes = TeamScratch<Real>::shmem_size(Functor::Layout::reals);
  Kokkos::parallel_for("kfmm::fmm::upward_teams", make_team_policy<TeamPolicyDynamic>(space, count, shape, bytes),
                       Functor{M, pos, mass, tree.particle_begin, tree.particle_end, tree.child_begin, tree.child_end,
                               tree.child_index, geometry.centre, geometry.scale, nodes, first});
}

/// L2L, GPU shape: a team per parent node of one level. Scratch: the parent's coefficients
/// times k! [N], and per chunk of children their offset monomials [8·N] and ratios [8·(P+1)].
/// A thread per (child, coefficient k) adds (s_c/s_p)^{|k|}/k! Σ_n w_c,n f_{k+n} (n in graded
/// order, as l2l_lanes()) to the child's local expansion; remote children are skipped.
template <class Real, int P>
struct L2LTeams {
  static constexpr int N = ncoeff<P>;
  static constexpr int reals = N + team_child_chunk * (N + P + 1);
  using Coefficients = Kokkos::View<Real* [N], Kokkos::LayoutRight, MemorySpace>;

  Coefficients L;
  Vec3View<double> centre;
  ScalarView<double> scale;
  ScalarView<int> cbegin, cend, cindex, flags;
  int first;

  KOKKOS_INLINE_FUNCTION void operator()(TeamMember const& team) const {
    constexpr int C = team_child_chunk;
    int const node = first + team.league_rank();
    if (cbegin(node) == cend(node)) return;
    TeamScratch<Real> shared(team.team_scratch(0), reals);
    Real* const f = shared.data();
    Real* const w = f + N;
    Real* const ratio = w + C * N;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, N), [&](int s) {
      int a = 0, b = 0, c = 0;
      exponents_of(s, a, b, c);
      f[s] = L(node, s) * Real(1.0 / inv_factorial_of(a, b, c));
    });
    for (int chunk = cbegin(node); chunk < cend(node); chunk += C) {
      int const count = compat::math::min(C, cend(node) - chunk);
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, count), [&](int c) {
        child_offsets_to_scratch<Real, P>(centre, scale, node, cindex(chunk + c), w + c * N, ratio + c * (P + 1));
      });
      team.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, count * N), [&](int q) {
        int const c = q / N, k = q % N;
        int const child = cindex(chunk + c);
        if (flags(child) & (node_remote | node_idle)) return;
        int ka = 0, kb = 0, kc = 0;
        exponents_of(k, ka, kb, kc);
        int const dk = ka + kb + kc;
        Real sum = Real(0);
        int n = 0;
        for (int d = 0; d <= P - dk; ++d)
          for (int a = d; a >= 0; --a)
            for (int b = d - a; b >= 0; --b, ++n)
              sum += w[c * N + n] * f[flat_index(ka + a, kb + b, kc + d - a - b)];
        L(child, k) += sum * (ratio[c * (P + 1) + dk] * Real(inv_factorial_of(ka, kb, kc)));
      });
      team.team_barrier();
    }
  }
};

/// L2L from the nodes [first, first + count) into their children, GPU shape (see L2LTeams).
template <class Real, int P>
void l2l_teams(ExecutionSpace const& space, typename L2LTeams<Real, P>::Coefficients const& L, Tree<> const& tree,
               NodeGeometry const& geometry, int first, int count, TeamShape shape = {}) {
  if (count <= 0) return;
  using Functor = L2LTeams<Real, P>;
  std::size_t const bytes = TeamScratch<Real>::shmem_size(Functor::reals);
  Kokkos::parallel_for("kfmm::fmm::l2l_teams", make_team_policy<TeamPolicyDynamic>(space, count, shape, bytes),
                       Functor{L, geometry.centre, geometry.scale, tree.child_begin, tree.child_end, tree.child_index,
                               geometry.flags, first});
}

/// L2P, GPU shape: a team per node (leaves that are neither remote nor idle do work); the
/// leaf's local coefficients in scratch [N], a thread per target particle (TargetParticles)
/// evaluating l2p_streamed().
template <class Real, int P>
struct L2PTeams {
  static constexpr int N = ncoeff<P>;
  using Coefficients = Kokkos::View<Real* [N], Kokkos::LayoutRight, MemorySpace>;

  Coefficients L;
  Vec3View<double> centre;
  ScalarView<double> scale;
  Vec3View<double> pos;
  ScalarView<int> before, index;
  ScalarView<int> pbegin, pend, cbegin, cend, flags;
  ScalarView<double> phi;
  Vec3View<double> grad;

  KOKKOS_INLINE_FUNCTION void operator()(TeamMember const& team) const {
    int const node = team.league_rank();
    if (cbegin(node) != cend(node) || (flags(node) & (node_remote | node_idle))) return;
    TeamScratch<Real> local(team.team_scratch(0), N);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, N), [&](int k) { local(k) = L(node, k); });
    team.team_barrier();
    double const s = scale(node);
    double const inv = 1.0 / s;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, before(pbegin(node)), before(pend(node))), [&](int k) {
      int const i = index(k);
      Real p, gx, gy, gz;
      l2p_streamed<P>(local.data(), Real(s), Real((pos(i, 0) - centre(node, 0)) * inv),
                      Real((pos(i, 1) - centre(node, 1)) * inv), Real((pos(i, 2) - centre(node, 2)) * inv), p, gx,
                      gy, gz);
      phi(i) = p;
      grad(i, 0) = gx;
      grad(i, 1) = gy;
      grad(i, 2) = gz;
    });
  }
};

/// L2P into phi / grad (overwritten) of the target particles of every local leaf, GPU shape.
template <class Real, int P>
void l2p_teams(ExecutionSpace const& space, typename L2PTeams<Real, P>::Coefficients const& L, Tree<> const& tree,
               NodeGeometry const& geometry, Vec3View<double> const& pos, TargetParticles const& targets,
               ScalarView<double> const& phi, Vec3View<double> const& grad, TeamShape shape = {}) {
  if (tree.num_nodes <= 0) return;
  using Functor = L2PTeams<Real, P>;
  std::size_t const bytes = TeamScratch<Real>::shmem_size(ncoeff<P>);
  Kokkos::parallel_for("kfmm::fmm::l2p_teams", make_team_policy<TeamPolicyDynamic>(space, tree.num_nodes, shape, bytes),
                       Functor{L, geometry.centre, geometry.scale, pos, targets.before, targets.index,
                               tree.particle_begin, tree.particle_end,
                               tree.child_begin, tree.child_end, geometry.flags, phi, grad});
}

}  // namespace kfmm::detail
