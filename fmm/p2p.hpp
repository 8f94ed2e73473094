#pragma once
/// \file
/// \brief Near field (P2P): one-sided leaf–leaf sums over the P2P lists, in one of two shapes
/// (core/kernel_shape.hpp). CPU shape: each target leaf gathers all its sources (relative to
/// its centre, in Real) into scratch and every target particle runs one long SIMD loop over
/// them (W partial sums, AVX-512 where available). GPU shape: a team per target leaf walks its
/// groups of all segments in segment order, staging the sources tile by tile in level-0 team
/// scratch; one thread per target particle sums over each tile.
#include <kfmm/core/kernel_shape.hpp>
#include <kfmm/core/tree.hpp>
#include <kfmm/core/view_growth.hpp>
#include <kfmm/fmm/dual_tree_walk.hpp>
#include <kfmm/fmm/expansion_pass.hpp>
#include <kfmm/fmm/softening.hpp>
#include <kfmm/fmm/target_particles.hpp>

#if defined(__AVX512F__) && !defined(__CUDA_ARCH__) && \
    !defined(__HIP_DEVICE_COMPILE__) && !defined(__SYCL_DEVICE_ONLY__)
#define KFMM_P2P_AVX512 1
#include <immintrin.h>
#endif

namespace kfmm {

/// Scratch of the near field, kept between calls (each shape uses its own members).
template <class Real>
struct NearFieldScratch {
  /// CPU shape: x, y, z (relative to the particle's leaf centre), m of every source particle.
  Kokkos::View<Real* [4], Kokkos::LayoutLeft, MemorySpace> xm{"kfmm::fmm::p2p::xm", 0};
  /// GPU shape: first group of each node as a target (−1: none) and the next group of the same
  /// target, so that a team follows its target's groups in segment order.
  ScalarView<int> first_group{"kfmm::fmm::p2p::first_group", 0};
  ScalarView<int> next_group{"kfmm::fmm::p2p::next_group", 0};
};

/// \brief Number of sources p2p_sources() handles side by side: 16 independent partial sums per
/// target in the CPU shape (float and double), so that the loop vectorises without reassociating
/// a reduction (GCC does not vectorise a plain floating-point sum) and the result does not
/// depend on the vector unit; 1 in the GPU shape, where the team's threads are the parallelism.
template <class ExecSpace>
inline constexpr int p2p_width = gpu_shaped_kernels<ExecSpace>() ? 1 : 16;

/// \brief GPU shape: sources per tile in team scratch, which is also the number of target
/// particles a team sums at a time (one per thread on GPUs; leaves of up to 160 particles take
/// one or two passes).
inline constexpr int p2p_tile = 128;

/// \brief GPU shape: threads per team. A backend resource, not a shape: one thread per tile
/// slot on GPUs, one thread (looping over the slots) on CPU backends; results do not depend on it.
template <class ExecSpace>
constexpr int p2p_team_size() {
  return compat::is_gpu_backend<ExecSpace>() ? p2p_tile : 1;
}

/// \brief pair_kernel for the GPU-shaped near field: Plummer through the backend's reciprocal
/// square root (one instruction on GPUs instead of a square root and a division); the spline
/// branches to its Newtonian part beyond its support h, where almost all pairs lie (a thread
/// rarely diverges from its warp), and is pair_kernel's full formula inside it: the same
/// operations as pair_kernel on either side of h.
template <SofteningKind kind, class Real>
KOKKOS_INLINE_FUNCTION void p2p_pair_kernel(Real r2, Real h, Real& K, Real& F) {
  if constexpr (kind == SofteningKind::Plummer) {
    Real const inv = compat::math::rsqrt(r2 + h * h);
    K = inv;
    F = inv * inv * inv;
  } else {
    Real const r = compat::math::sqrt(r2);
    if (r < h) {
      pair_kernel<kind, Real>(r2, h, K, F);
    } else {
      Real const inv = Real(1) / r;
      K = inv;
      F = inv * inv * inv;
    }
  }
}

namespace detail {
/// One block of W sources of p2p_sources() (first … first + W − 1) with pair_kernel. With
/// `newtonian`, the caller has checked that every pair of the block lies beyond the kernel's
/// support (r ≥ h, which is every pair of the spline but the closest): K = 1/r and F = 1/r³,
/// the operations pair_kernel selects there. (The compiler may contract the sums into fused
/// multiply-adds differently in the two loops: equal to rounding, and deterministic.)
template <SofteningKind kind, bool newtonian, class Real, int W>
KOKKOS_FORCEINLINE_FUNCTION void p2p_block(Real const* KOKKOS_RESTRICT x, Real const* KOKKOS_RESTRICT y,
                                           Real const* KOKKOS_RESTRICT z, Real const* KOKKOS_RESTRICT m, int first,
                                           int self, Real xi, Real yi, Real zi, Real h, Real* KOKKOS_RESTRICT p,
                                           Real* KOKKOS_RESTRICT ax, Real* KOKKOS_RESTRICT ay,
                                           Real* KOKKOS_RESTRICT az) {
  for (int l = 0; l < W; ++l) {
    int const j = first + l;
    Real const dx = xi - x[j], dy = yi - y[j], dz = zi - z[j];
    Real const r2 = dx * dx + dy * dy + dz * dz;
    // The target itself and unsoftened coincident pairs contribute nothing.
    bool const excluded = (j == self) | (r2 + h * h == Real(0));
    Real K, F;
    if constexpr (newtonian) {
      Real const inv = Real(1) / compat::math::sqrt(excluded ? Real(1) : r2);
      K = inv;
      F = inv * inv * inv;
    } else {
      pair_kernel<kind, Real>(excluded ? Real(1) : r2, h, K, F);
    }
    Real const w = excluded ? Real(0) : m[j];
    p[l] += w * K;
    Real const wf = w * F;
    ax[l] -= wf * dx;
    ay[l] -= wf * dy;
    az[l] -= wf * dz;
  }
}
}  // namespace detail

/// \brief One target particle against `count` gathered sources (positions relative to the
/// target leaf's centre; `count` a multiple of W, padding sources of mass 0): accumulates
/// Φ = Σ m K and ∇Φ. `self` is the index of the target itself among the sources (−1 if absent).
/// Source j goes to partial sum j mod W; the W partial sums are added in a fixed order at the
/// end, so results are the same on every run and thread count.
template <SofteningKind kind, class Real, int W>
KOKKOS_INLINE_FUNCTION void p2p_sources(Real const* KOKKOS_RESTRICT x, Real const* KOKKOS_RESTRICT y,
                                        Real const* KOKKOS_RESTRICT z, Real const* KOKKOS_RESTRICT m, int count,
                                        int self, Real xi, Real yi, Real zi, Real h, Real& phi, Real& gx, Real& gy,
                                        Real& gz) {
  Real p[W] = {}, ax[W] = {}, ay[W] = {}, az[W] = {};
  for (int first = 0; first < count; first += W) {
    if constexpr (kind == SofteningKind::Spline) {
      // The spline's polynomial only for blocks with a pair inside its support h; the others
      // (nearly all, for leaves wider than a few ε) take the Newtonian loop.
      // r² < h², as the AVX-512 loop tests: no square root spent on the test.
      int inside = 0;
      Real const h2 = h * h;
      for (int l = 0; l < W; ++l) {
        int const j = first + l;
        Real const dx = xi - x[j], dy = yi - y[j], dz = zi - z[j];
        inside |= int(j != self) & int(dx * dx + dy * dy + dz * dz < h2);
      }
      if (inside)
        detail::p2p_block<kind, false, Real, W>(x, y, z, m, first, self, xi, yi, zi, h, p, ax, ay, az);
      else
        detail::p2p_block<kind, true, Real, W>(x, y, z, m, first, self, xi, yi, zi, h, p, ax, ay, az);
    } else {
      detail::p2p_block<kind, false, Real, W>(x, y, z, m, first, self, xi, yi, zi, h, p, ax, ay, az);
    }
  }
  for (int l = 0; l < W; ++l) {
    phi += p[l];
    gx += ax[l];
    gy += ay[l];
    gz += az[l];
  }
}

#ifdef KFMM_P2P_AVX512
namespace detail {

/// AVX-512 operations of the Plummer near-field loop for float (16 lanes) and double (8).
template <class Real>
struct Avx512;

template <>
struct Avx512<float> {
  using Vector = __m512;
  using Mask = __mmask16;
  static constexpr int lanes = 16;
  static constexpr int newton_steps = 1;  // rsqrt14 has 14 bits: one step gives float's 24
  static Vector set1(float v) { return _mm512_set1_ps(v); }
  static Vector load(float const* p) { return _mm512_loadu_ps(p); }
  static Vector load(Mask k, float const* p) { return _mm512_maskz_loadu_ps(k, p); }
  static Vector add(Vector a, Vector b) { return _mm512_add_ps(a, b); }
  static Vector sub(Vector a, Vector b) { return _mm512_sub_ps(a, b); }
  static Vector mul(Vector a, Vector b) { return _mm512_mul_ps(a, b); }
  static Vector fmadd(Vector a, Vector b, Vector c) { return _mm512_fmadd_ps(a, b, c); }
  static Vector fnmadd(Vector a, Vector b, Vector c) { return _mm512_fnmadd_ps(a, b, c); }
  static Vector rsqrt(Vector a) { return _mm512_rsqrt14_ps(a); }
  static Vector blend(Mask k, Vector a, Vector b) { return _mm512_mask_blend_ps(k, a, b); }
  static Mask nonzero(Vector a) { return _mm512_cmp_ps_mask(a, _mm512_setzero_ps(), _CMP_NEQ_OQ); }
  static Mask less(Vector a, Vector b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  /// Lanes whose source index first + l differs from `self`.
  static Mask not_self(int first, int self) {
    __m512i const lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    return _mm512_cmpneq_epi32_mask(_mm512_add_epi32(lane, _mm512_set1_epi32(first)), _mm512_set1_epi32(self));
  }
  static void store(float* p, Vector a) { _mm512_storeu_ps(p, a); }
};

template <>
struct Avx512<double> {
  using Vector = __m512d;
  using Mask = __mmask8;
  static constexpr int lanes = 8;
  static constexpr int newton_steps = 2;  // 14 → 28 → 53 bits
  static Vector set1(double v) { return _mm512_set1_pd(v); }
  static Vector load(double const* p) { return _mm512_loadu_pd(p); }
  static Vector load(Mask k, double const* p) { return _mm512_maskz_loadu_pd(k, p); }
  static Vector add(Vector a, Vector b) { return _mm512_add_pd(a, b); }
  static Vector sub(Vector a, Vector b) { return _mm512_sub_pd(a, b); }
  static Vector mul(Vector a, Vector b) { return _mm512_mul_pd(a, b); }
  static Vector fmadd(Vector a, Vector b, Vector c) { return _mm512_fmadd_pd(a, b, c); }
  static Vector fnmadd(Vector a, Vector b, Vector c) { return _mm512_fnmadd_pd(a, b, c); }
  static Vector rsqrt(Vector a) { return _mm512_rsqrt14_pd(a); }
  static Vector blend(Mask k, Vector a, Vector b) { return _mm512_mask_blend_pd(k, a, b); }
  static Mask nonzero(Vector a) { return _mm512_cmp_pd_mask(a, _mm512_setzero_pd(), _CMP_NEQ_OQ); }
  static Mask less(Vector a, Vector b) { return _mm512_cmp_pd_mask(a, b, _CMP_LT_OQ); }
  static Mask not_self(int first, int self) {
    __m512i const lane = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    return _mm512_cmpneq_epi64_mask(_mm512_add_epi64(lane, _mm512_set1_epi64(first)), _mm512_set1_epi64(self));
  }
  static void store(double* p, Vector a) { _mm512_storeu_pd(p, a); }
};

/// The partial sums of the AVX-512 loops: source j in lane j mod lanes, added in lane order at
/// the end, so the result is deterministic like the portable loop's.
template <class Real>
struct Avx512Sums {
  using S = Avx512<Real>;
  using V = typename S::Vector;
  V p = S::set1(0), ax = S::set1(0), ay = S::set1(0), az = S::set1(0);

  /// One block with K = 1/sqrt(s) (s > 0 in every lane) from rsqrt14 refined by Newton steps to
  /// the precision of Real, instead of a square root and a division, which bound the portable
  /// loop (both run on the unpipelined vector divider): p += m K, a −= m K³ d.
  void add_inverse_sqrt(V s, V mass, V dx, V dy, V dz) {
    V const half = S::set1(Real(0.5)), three = S::set1(3);
    V inv = S::rsqrt(s);
    for (int step = 0; step < S::newton_steps; ++step)  // 1/sqrt(s) ≈ y (3 − s y²) / 2
      inv = S::mul(S::mul(half, inv), S::fnmadd(S::mul(s, inv), inv, three));
    V const wk = S::mul(mass, inv);
    p = S::add(p, wk);
    V const wf = S::mul(wk, S::mul(inv, inv));
    ax = S::fnmadd(wf, dx, ax);
    ay = S::fnmadd(wf, dy, ay);
    az = S::fnmadd(wf, dz, az);
  }

  /// Adds the lanes in order to (phi, gx, gy, gz).
  void finish(Real& phi, Real& gx, Real& gy, Real& gz) const {
    Real lanes[4][S::lanes];
    S::store(lanes[0], p);
    S::store(lanes[1], ax);
    S::store(lanes[2], ay);
    S::store(lanes[3], az);
    for (int l = 0; l < S::lanes; ++l) {
      phi += lanes[0][l];
      gx += lanes[1][l];
      gy += lanes[2][l];
      gz += lanes[3][l];
    }
  }
};

/// \brief The Plummer loop of p2p_sources() in AVX-512 registers (Avx512Sums: rsqrt14 and
/// Newton steps, deterministic partial sums).
template <class Real>
inline void p2p_plummer_avx512(Real const* x, Real const* y, Real const* z, Real const* m, int count, int self,
                               Real xi, Real yi, Real zi, Real h, Real& phi, Real& gx, Real& gy, Real& gz) {
  using S = Avx512<Real>;
  using V = typename S::Vector;
  Avx512Sums<Real> sums;
  V const tx = S::set1(xi), ty = S::set1(yi), tz = S::set1(zi);
  V const h2 = S::set1(h * h), one = S::set1(1);
  // With softening every s ≥ h² > 0, so only the block holding the target itself needs masks.
  bool const softened = h * h > Real(0);
  int const self_block = self >= 0 ? self - self % S::lanes : -1;
  for (int first = 0; first < count; first += S::lanes) {
    V const dx = S::sub(tx, S::load(x + first));
    V const dy = S::sub(ty, S::load(y + first));
    V const dz = S::sub(tz, S::load(z + first));
    V s = S::add(S::fmadd(dz, dz, S::fmadd(dy, dy, S::mul(dx, dx))), h2);
    V mass;
    if (softened && first != self_block) {
      mass = S::load(m + first);
    } else {  // the target itself and unsoftened coincident pairs contribute nothing (mass 0, s = 1)
      typename S::Mask const kept = S::nonzero(s) & S::not_self(first, self);
      s = S::blend(kept, one, s);
      mass = S::load(kept, m + first);
    }
    sums.add_inverse_sqrt(s, mass, dx, dy, dz);
  }
  sums.finish(phi, gx, gy, gz);
}

/// \brief The spline loop of p2p_sources() in AVX-512 registers: a block of sources all beyond
/// the support h (every pair but the closest) is Newtonian, 1/r from rsqrt14 and Newton steps as
/// in the Plummer loop (Avx512Sums); a block with a pair inside h (the target itself aside)
/// takes the full formula, lane by lane (p2p_block).
template <class Real>
inline void p2p_spline_avx512(Real const* x, Real const* y, Real const* z, Real const* m, int count, int self,
                              Real xi, Real yi, Real zi, Real h, Real& phi, Real& gx, Real& gy, Real& gz) {
  using S = Avx512<Real>;
  using V = typename S::Vector;
  Avx512Sums<Real> sums;
  V const tx = S::set1(xi), ty = S::set1(yi), tz = S::set1(zi);
  V const h2 = S::set1(h * h), one = S::set1(1);
  for (int first = 0; first < count; first += S::lanes) {
    V const dx = S::sub(tx, S::load(x + first));
    V const dy = S::sub(ty, S::load(y + first));
    V const dz = S::sub(tz, S::load(z + first));
    V s = S::fmadd(dz, dz, S::fmadd(dy, dy, S::mul(dx, dx)));
    typename S::Mask const others = S::not_self(first, self);
    if (S::less(s, h2) & others) {
      Real lanes[4][S::lanes] = {};
      p2p_block<SofteningKind::Spline, false, Real, S::lanes>(x, y, z, m, first, self, xi, yi, zi, h, lanes[0],
                                                               lanes[1], lanes[2], lanes[3]);
      sums.p = S::add(sums.p, S::load(lanes[0]));
      sums.ax = S::add(sums.ax, S::load(lanes[1]));
      sums.ay = S::add(sums.ay, S::load(lanes[2]));
      sums.az = S::add(sums.az, S::load(lanes[3]));
      continue;
    }
    // Every other pair has s ≥ h² > 0 (h = 0: coincident pairs are excluded, mass 0, s = 1).
    typename S::Mask const kept = S::nonzero(s) & others;
    s = S::blend(kept, one, s);
    sums.add_inverse_sqrt(s, S::load(kept, m + first), dx, dy, dz);
  }
  sums.finish(phi, gx, gy, gz);
}

}  // namespace detail

/// \brief The spline loop on AVX-512 CPUs, float and double: see detail::p2p_spline_avx512.
template <>
inline void p2p_sources<SofteningKind::Spline, float, 16>(float const* KOKKOS_RESTRICT x,
                                                          float const* KOKKOS_RESTRICT y,
                                                          float const* KOKKOS_RESTRICT z,
                                                          float const* KOKKOS_RESTRICT m, int count, int self,
                                                          float xi, float yi, float zi, float h, float& phi,
                                                          float& gx, float& gy, float& gz) {
  detail::p2p_spline_avx512<float>(x, y, z, m, count, self, xi, yi, zi, h, phi, gx, gy, gz);
}

template <>
inline void p2p_sources<SofteningKind::Spline, double, 16>(double const* KOKKOS_RESTRICT x,
                                                           double const* KOKKOS_RESTRICT y,
                                                           double const* KOKKOS_RESTRICT z,
                                                           double const* KOKKOS_RESTRICT m, int count, int self,
                                                           double xi, double yi, double zi, double h, double& phi,
                                                           double& gx, double& gy, double& gz) {
  detail::p2p_spline_avx512<double>(x, y, z, m, count, self, xi, yi, zi, h, phi, gx, gy, gz);
}

/// \brief The Plummer loop (the default near field) on AVX-512 CPUs, float and double: see
/// detail::p2p_plummer_avx512.
template <>
inline void p2p_sources<SofteningKind::Plummer, float, 16>(float const* KOKKOS_RESTRICT x,
                                                           float const* KOKKOS_RESTRICT y,
                                                           float const* KOKKOS_RESTRICT z,
                                                           float const* KOKKOS_RESTRICT m, int count, int self,
                                                           float xi, float yi, float zi, float h, float& phi,
                                                           float& gx, float& gy, float& gz) {
  detail::p2p_plummer_avx512<float>(x, y, z, m, count, self, xi, yi, zi, h, phi, gx, gy, gz);
}

template <>
inline void p2p_sources<SofteningKind::Plummer, double, 16>(double const* KOKKOS_RESTRICT x,
                                                            double const* KOKKOS_RESTRICT y,
                                                            double const* KOKKOS_RESTRICT z,
                                                            double const* KOKKOS_RESTRICT m, int count, int self,
                                                            double xi, double yi, double zi, double h, double& phi,
                                                            double& gx, double& gy, double& gz) {
  detail::p2p_plummer_avx512<double>(x, y, z, m, count, self, xi, yi, zi, h, phi, gx, gy, gz);
}
#endif

/// \brief The near field in the CPU shape (see near_field): per list segment, a team of one
/// thread per target leaf gathers all its sources into scratch memory (relative to its own
/// centre), then every target particle of the leaf runs one long contiguous loop over them.
template <class Real, SofteningKind kind>
std::uint64_t near_field_gathered(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry,
                         PairLists const& lists, PassParticles const& particles, TargetParticles const& targets,
                         Real h, ScalarView<double> const& phi, Vec3View<double> const& grad,
                         NearFieldScratch<Real>& scratch) {
  int const n = particles.num_sources;
  grow_discarding(scratch.xm, std::size_t(n), "kfmm::fmm::p2p::xm", 8);  // rewritten below before it is read
  auto xm = scratch.xm;
  auto const pos = particles.pos;
  auto const mass = particles.mass;
  auto const centre = geometry.centre;
  auto const pbegin = tree.particle_begin;
  auto const pend = tree.particle_end;
  auto const flags = geometry.flags;
  Kokkos::parallel_for(
      "kfmm::fmm::p2p::relative_positions", Kokkos::RangePolicy<ExecutionSpace>(space, 0, tree.num_nodes),
      KOKKOS_LAMBDA(int node) {
        if (!(flags(node) & node_leaf)) return;
        for (int i = pbegin(node); i < pend(node); ++i) {
          for (int k = 0; k < 3; ++k) xm(i, k) = Real(pos(i, k) - centre(node, k));
          xm(i, 3) = Real(mass(i));
        }
      });
  auto const target = lists.target;
  auto const offset = lists.offset;
  auto const source = lists.source;
  auto const before = targets.before;
  auto const index = targets.index;
  // The largest number of sources of one target leaf sizes the scratch memory.
  int max_sources = 0;
  Kokkos::parallel_reduce(
      "kfmm::fmm::p2p::max_sources", Kokkos::RangePolicy<ExecutionSpace>(space, 0, lists.num_groups),
      KOKKOS_LAMBDA(int g, int& largest) {
        int count = 0;
        for (int e = offset(g); e < offset(g + 1); ++e) count += pend(source(e)) - pbegin(source(e));
        if (count > largest) largest = count;
      },
      Kokkos::Max<int>(max_sources));
  using Policy = Kokkos::TeamPolicy<ExecutionSpace, Kokkos::Schedule<Kokkos::Dynamic>>;
  using Member = typename Policy::member_type;
  using Scratch = Kokkos::View<Real*, typename ExecutionSpace::scratch_memory_space, Kokkos::MemoryUnmanaged>;
  constexpr int W = p2p_width<ExecutionSpace>;
  int const team_size = 1;  // the W lanes are the parallelism within a target leaf
  int const capacity = (max_sources / W + 1) * W;  // room for the padding to a multiple of W
  std::size_t const scratch_bytes = 4 * Scratch::shmem_size(capacity);
  std::uint64_t pairs = 0;
  for (int s = 0; s < lists.num_segments(); ++s) {
    int const first = lists.segment_begin[s];
    int const groups = lists.segment_begin[s + 1] - first;
    std::uint64_t segment_pairs = 0;
    Kokkos::parallel_reduce(
        "kfmm::fmm::p2p",
        Policy(space, groups, team_size).set_scratch_size(1, Kokkos::PerTeam(scratch_bytes)),
        KOKKOS_LAMBDA(Member const& team, std::uint64_t& count) {
          int const g = first + team.league_rank();
          int const a = target(g);
          Scratch sx(team.team_scratch(1), capacity), sy(team.team_scratch(1), capacity),
              sz(team.team_scratch(1), capacity), sm(team.team_scratch(1), capacity);
          // Gather the sources relative to the target leaf's centre; remember where a itself lands.
          int total = 0, self = -1;
          for (int e = offset(g); e < offset(g + 1); ++e) {
            int const b = source(e);
            int const nb = pend(b) - pbegin(b);
            if (b == a) self = total;
            Real const ox = Real(centre(b, 0) - centre(a, 0));
            Real const oy = Real(centre(b, 1) - centre(a, 1));
            Real const oz = Real(centre(b, 2) - centre(a, 2));
            int const base = pbegin(b);
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nb), [&](int j) {
              sx(total + j) = xm(base + j, 0) + ox;
              sy(total + j) = xm(base + j, 1) + oy;
              sz(total + j) = xm(base + j, 2) + oz;
              sm(total + j) = xm(base + j, 3);
            });
            total += nb;
          }
          // Pad to a multiple of W with massless sources at the centre.
          int const padded = (total + W - 1) / W * W;
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, total, padded), [&](int j) {
            sx(j) = sy(j) = sz(j) = sm(j) = Real(0);
          });
          team.team_barrier();
          // The leaf's targets (particle ia + t is source self + t of its own leaf).
          int const ia = pbegin(a), k0 = before(ia), k1 = before(pend(a));
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, k0, k1), [&](int k) {
            int const i = index(k);
            Real p = 0, gx = 0, gy = 0, gz = 0;
            p2p_sources<kind, Real, W>(sx.data(), sy.data(), sz.data(), sm.data(), padded,
                                       self >= 0 ? self + (i - ia) : -1, xm(i, 0), xm(i, 1), xm(i, 2), h, p, gx, gy,
                                       gz);
            phi(i) += p;
            grad(i, 0) += gx;
            grad(i, 1) += gy;
            grad(i, 2) += gz;
          });
          std::uint64_t const summed = std::uint64_t(k1 - k0);
          Kokkos::single(Kokkos::PerTeam(team), [&]() { count += std::uint64_t(total) * summed - (self >= 0 ? summed : 0); });
        },
        segment_pairs);
    pairs += segment_pairs;
  }
  return pairs;
}

/// \brief The near field in the GPU shape (see near_field): a team per target leaf, which sums
/// the sources of all its groups, in segment order, over all segments in one launch. Sources are
/// staged p2p_tile at a time in level-0 team scratch (positions relative to the target leaf's
/// centre, converted from double); each thread takes one of the leaf's targets per tile slot and adds
/// the tile's sources in order to the target's sums, which stay in team scratch between tiles.
/// Every target thus sums its sources in list order whatever the team size, tile size or thread
/// count. `team_size` 0 takes p2p_team_size(); tests pass others.
template <class Real, SofteningKind kind>
std::uint64_t near_field_tiled(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry,
                               PairLists const& lists, PassParticles const& particles, TargetParticles const& targets,
                               Real h, ScalarView<double> const& phi, Vec3View<double> const& grad,
                               NearFieldScratch<Real>& scratch, int team_size = 0) {
  int const nodes = tree.num_nodes;
  if (nodes == 0 || lists.num_groups == 0) return 0;
  grow_preserving(scratch.first_group, std::size_t(nodes));
  grow_preserving(scratch.next_group, std::size_t(lists.num_groups));
  auto const first_group = scratch.first_group;
  auto const next_group = scratch.next_group;
  auto const target = lists.target;
  auto const offset = lists.offset;
  auto const source = lists.source;
  // Chain the groups of each target in segment order: walking the segments backwards, each
  // group points to the target's group of the next segment. Targets are unique within a
  // segment, so the groups of one segment run in parallel without conflicts.
  Kokkos::deep_copy(space, Kokkos::subview(first_group, Kokkos::make_pair(0, nodes)), -1);
  for (int s = lists.num_segments() - 1; s >= 0; --s)
    Kokkos::parallel_for(
        "kfmm::fmm::p2p::chain_groups",
        Kokkos::RangePolicy<ExecutionSpace>(space, lists.segment_begin[s], lists.segment_begin[s + 1]),
        KOKKOS_LAMBDA(int g) {
          int const a = target(g);
          next_group(g) = first_group(a);
          first_group(a) = g;
        });

  using Policy = Kokkos::TeamPolicy<ExecutionSpace, Kokkos::Schedule<Kokkos::Dynamic>>;
  using Member = typename Policy::member_type;
  using Scratch = Kokkos::View<Real*, typename ExecutionSpace::scratch_memory_space, Kokkos::MemoryUnmanaged>;
  constexpr int T = p2p_tile;
  // Tile x, y, z, m; targets x, y, z; target sums φ, ∇φ.
  std::size_t const scratch_bytes = 11 * Scratch::shmem_size(T);
  int const threads = team_size > 0 ? team_size : p2p_team_size<ExecutionSpace>();
  auto const pos = particles.pos;
  auto const mass = particles.mass;
  auto const centre = geometry.centre;
  auto const pbegin = tree.particle_begin;
  auto const pend = tree.particle_end;
  auto const before = targets.before;
  auto const index = targets.index;
  std::uint64_t pairs = 0;
  Kokkos::parallel_reduce(
      "kfmm::fmm::p2p_tiled", Policy(space, nodes, threads).set_scratch_size(0, Kokkos::PerTeam(scratch_bytes)),
      KOKKOS_LAMBDA(Member const& team, std::uint64_t& count) {
        int const a = team.league_rank();
        int const head = first_group(a);
        if (head < 0) return;  // not a target leaf
        Scratch sx(team.team_scratch(0), T), sy(team.team_scratch(0), T), sz(team.team_scratch(0), T),
            sm(team.team_scratch(0), T);
        Scratch tx(team.team_scratch(0), T), ty(team.team_scratch(0), T), tz(team.team_scratch(0), T);
        Scratch tp(team.team_scratch(0), T), tgx(team.team_scratch(0), T), tgy(team.team_scratch(0), T),
            tgz(team.team_scratch(0), T);
        // The leaf's targets k0 … k1 − 1 (particle ia + t is source self + t of its own leaf).
        int const ia = pbegin(a), k0 = before(ia), na = before(pend(a)) - k0;
        double const cx = centre(a, 0), cy = centre(a, 1), cz = centre(a, 2);
        std::uint64_t sources = 0;
        bool self_listed = false;
        // Targets in chunks of T; every chunk walks all the sources.
        for (int c0 = 0; c0 < na; c0 += T) {
          int const nc = compat::math::min(T, na - c0);
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nc), [&](int t) {
            int const i = index(k0 + c0 + t);
            tx(t) = Real(pos(i, 0) - cx);
            ty(t) = Real(pos(i, 1) - cy);
            tz(t) = Real(pos(i, 2) - cz);
            tp(t) = tgx(t) = tgy(t) = tgz(t) = Real(0);
          });
          // Cursor over the sources (the same in every thread): group g, entry e, particle jb of
          // the entry's leaf.
          int g = head, e = offset(head), jb = 0;
          while (true) {
            // Fill a tile; `self` is the slot of particle 0 of a itself (far off if absent), so
            // that particle ia + t is excluded at slot self + t.
            int filled = 0, self = -(1 << 30);
            while (filled < T && g >= 0) {
              if (e == offset(g + 1)) {
                g = next_group(g);
                if (g >= 0) e = offset(g);
                continue;
              }
              int const b = source(e), ib = pbegin(b) + jb;
              int const take = compat::math::min(pend(b) - ib, T - filled);
              if (b == a) {
                self = filled - jb;
                self_listed = true;
              }
              int const at = filled;
              Kokkos::parallel_for(Kokkos::TeamThreadRange(team, take), [&](int j) {
                sx(at + j) = Real(pos(ib + j, 0) - cx);
                sy(at + j) = Real(pos(ib + j, 1) - cy);
                sz(at + j) = Real(pos(ib + j, 2) - cz);
                sm(at + j) = Real(mass(ib + j));
              });
              filled += take;
              jb += take;
              if (pbegin(b) + jb == pend(b)) {
                ++e;
                jb = 0;
              }
            }
            if (filled == 0) break;
            if (c0 == 0) sources += std::uint64_t(filled);
            team.team_barrier();
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nc), [&](int t) {
              Real const xi = tx(t), yi = ty(t), zi = tz(t);
              Real p = tp(t), gx = tgx(t), gy = tgy(t), gz = tgz(t);
              int const self_slot = self + (index(k0 + c0 + t) - ia);
              for (int j = 0; j < filled; ++j) {
                Real const dx = xi - sx(j), dy = yi - sy(j), dz = zi - sz(j);
                Real const r2 = dx * dx + dy * dy + dz * dz;
                // The target itself and unsoftened coincident pairs contribute nothing.
                bool const excluded = (j == self_slot) | (r2 + h * h == Real(0));
                Real K, F;
                p2p_pair_kernel<kind, Real>(excluded ? Real(1) : r2, h, K, F);
                Real const w = excluded ? Real(0) : sm(j);
                p += w * K;
                Real const wf = w * F;
                gx -= wf * dx;
                gy -= wf * dy;
                gz -= wf * dz;
              }
              tp(t) = p;
              tgx(t) = gx;
              tgy(t) = gy;
              tgz(t) = gz;
            });
            team.team_barrier();
          }
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nc), [&](int t) {
            int const i = index(k0 + c0 + t);
            phi(i) += tp(t);
            grad(i, 0) += tgx(t);
            grad(i, 1) += tgy(t);
            grad(i, 2) += tgz(t);
          });
          team.team_barrier();
        }
        std::uint64_t const targets = std::uint64_t(na);
        Kokkos::single(Kokkos::PerTeam(team), [&]() { count += sources * targets - (self_listed ? targets : 0); });
      },
      pairs);
  return pairs;
}

/// \brief Adds the near field to `phi` and `grad` for every target particle (`targets`, among
/// the pass's first num_targets particles) and returns the number of particle pairs summed. Leaves (local or imported) hold their particles at
/// `[particle_begin, particle_end)` of the pass particles. Takes the shape that
/// use_gpu_shape<ExecutionSpace>() names: near_field_tiled or near_field_gathered.
template <class Real, SofteningKind kind>
std::uint64_t near_field(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry,
                         PairLists const& lists, PassParticles const& particles, TargetParticles const& targets, Real h,
                         ScalarView<double> const& phi, Vec3View<double> const& grad, NearFieldScratch<Real>& scratch) {
  if constexpr (!gpu_shaped_kernels<ExecutionSpace>())
    if (!use_gpu_shape<ExecutionSpace>())
      return near_field_gathered<Real, kind>(space, tree, geometry, lists, particles, targets, h, phi, grad, scratch);
  return near_field_tiled<Real, kind>(space, tree, geometry, lists, particles, targets, h, phi, grad, scratch);
}

}  // namespace kfmm
