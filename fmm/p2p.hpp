#pragma once
/// \file
/// \brief Near field (P2P): one-sided leaf–leaf sums over the P2P lists, structure of arrays,
/// positions relative to leaf centres in Real so that the inner loop vectorises.
#include <kfmm/core/tree.hpp>
#include <kfmm/fmm/dual_tree_walk.hpp>
#include <kfmm/fmm/expansion_pass.hpp>
#include <kfmm/fmm/softening.hpp>

#if defined(__AVX512F__) && !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__) && \
    !defined(__SYCL_DEVICE_ONLY__)
#define KFMM_P2P_AVX512 1
#include <immintrin.h>
#endif

namespace kfmm {

/// Per-particle scratch of the near field, kept between calls.
template <class Real>
struct NearFieldScratch {
  Kokkos::View<Real* [4], Kokkos::LayoutLeft, MemorySpace> xm{"kfmm::fmm::p2p::xm", 0};  ///< x, y, z (relative), m
};

/// \brief Number of sources p2p_sources() handles side by side: 16 independent partial sums per
/// target on CPUs (float and double), so that the loop vectorises without reassociating a
/// reduction (GCC does not vectorise a plain floating-point sum) and the result does not depend
/// on the vector unit; 1 on GPUs, where the team's threads are the parallelism.
template <class ExecSpace>
inline constexpr int p2p_width = compat::is_gpu_backend<ExecSpace>() ? 1 : 16;

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
    for (int l = 0; l < W; ++l) {
      int const j = first + l;
      Real const dx = xi - x[j], dy = yi - y[j], dz = zi - z[j];
      Real const r2 = dx * dx + dy * dy + dz * dz;
      // The target itself and unsoftened coincident pairs contribute nothing.
      bool const excluded = (j == self) | (r2 + h * h == Real(0));
      Real K, F;
      pair_kernel<kind, Real>(excluded ? Real(1) : r2, h, K, F);
      Real const w = excluded ? Real(0) : m[j];
      p[l] += w * K;
      Real const wf = w * F;
      ax[l] -= wf * dx;
      ay[l] -= wf * dy;
      az[l] -= wf * dz;
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
/// \brief The Plummer float loop on AVX-512 CPUs, the default near field. The portable loop is
/// bound by the square root and the division (both long-latency, not pipelined on the vector
/// divider); here 1/sqrt comes from rsqrt14 refined by one Newton step (relative error below
/// 4e-7, under float's own kernel round-off after the sums), 1.3× the pairs per second.
/// Same contract and fixed summation order as the portable version.
template <>
inline void p2p_sources<SofteningKind::Plummer, float, 16>(float const* KOKKOS_RESTRICT x,
                                                           float const* KOKKOS_RESTRICT y,
                                                           float const* KOKKOS_RESTRICT z,
                                                           float const* KOKKOS_RESTRICT m, int count, int self,
                                                           float xi, float yi, float zi, float h, float& phi,
                                                           float& gx, float& gy, float& gz) {
  __m512 p = _mm512_setzero_ps(), ax = p, ay = p, az = p;
  __m512 const tx = _mm512_set1_ps(xi), ty = _mm512_set1_ps(yi), tz = _mm512_set1_ps(zi);
  __m512 const h2 = _mm512_set1_ps(h * h), one = _mm512_set1_ps(1.0f);
  __m512 const half = _mm512_set1_ps(0.5f), three = _mm512_set1_ps(3.0f);
  __m512i const lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  __m512i const self_lane = _mm512_set1_epi32(self);
  for (int first = 0; first < count; first += 16) {
    __m512 const dx = _mm512_sub_ps(tx, _mm512_loadu_ps(x + first));
    __m512 const dy = _mm512_sub_ps(ty, _mm512_loadu_ps(y + first));
    __m512 const dz = _mm512_sub_ps(tz, _mm512_loadu_ps(z + first));
    __m512 const s = _mm512_add_ps(_mm512_fmadd_ps(dz, dz, _mm512_fmadd_ps(dy, dy, _mm512_mul_ps(dx, dx))), h2);
    // The target itself and unsoftened coincident pairs contribute nothing (mass 0, s = 1).
    __mmask16 const kept = _mm512_cmp_ps_mask(s, _mm512_setzero_ps(), _CMP_NEQ_OQ) &
                           _mm512_cmpneq_epi32_mask(_mm512_add_epi32(lane, _mm512_set1_epi32(first)), self_lane);
    __m512 const safe = _mm512_mask_blend_ps(kept, one, s);
    __m512 const y0 = _mm512_rsqrt14_ps(safe);
    // Newton: 1/sqrt(s) ≈ y0 (3 − s y0²) / 2
    __m512 const inv =
        _mm512_mul_ps(_mm512_mul_ps(half, y0), _mm512_fnmadd_ps(_mm512_mul_ps(safe, y0), y0, three));
    __m512 const wk = _mm512_mul_ps(_mm512_maskz_loadu_ps(kept, m + first), inv);
    p = _mm512_add_ps(p, wk);
    __m512 const wf = _mm512_mul_ps(wk, _mm512_mul_ps(inv, inv));
    ax = _mm512_fnmadd_ps(wf, dx, ax);
    ay = _mm512_fnmadd_ps(wf, dy, ay);
    az = _mm512_fnmadd_ps(wf, dz, az);
  }
  float lanes[4][16];
  _mm512_storeu_ps(lanes[0], p);
  _mm512_storeu_ps(lanes[1], ax);
  _mm512_storeu_ps(lanes[2], ay);
  _mm512_storeu_ps(lanes[3], az);
  for (int l = 0; l < 16; ++l) {
    phi += lanes[0][l];
    gx += lanes[1][l];
    gy += lanes[2][l];
    gz += lanes[3][l];
  }
}
#endif

/// \brief Adds the near field to `phi` and `grad` for every target particle and returns the
/// number of particle pairs. Leaves (local or imported) hold their particles at
/// `[particle_begin, particle_end)` of the pass particles. Each target leaf first gathers all
/// its sources into scratch memory (relative to its own centre), then every target particle
/// runs one long contiguous loop over them.
template <class Real, SofteningKind kind>
std::uint64_t near_field(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry,
                         PairLists const& lists, PassParticles const& particles, Real h, ScalarView<double> const& phi,
                         Vec3View<double> const& grad, NearFieldScratch<Real>& scratch) {
  int const n = particles.num_sources;
  if (static_cast<int>(scratch.xm.extent(0)) < n) Kokkos::resize(scratch.xm, n + n / 2);
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
  int const team_size = compat::is_gpu_backend<ExecutionSpace>() ? 128 : 1;
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
          int const ia = pbegin(a);
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, pend(a) - ia), [&](int t) {
            int const i = ia + t;
            Real p = 0, gx = 0, gy = 0, gz = 0;
            p2p_sources<kind, Real, W>(sx.data(), sy.data(), sz.data(), sm.data(), padded, self >= 0 ? self + t : -1,
                                    xm(i, 0), xm(i, 1), xm(i, 2), h, p, gx, gy, gz);
            phi(i) += p;
            grad(i, 0) += gx;
            grad(i, 1) += gy;
            grad(i, 2) += gz;
          });
          std::uint64_t const targets = pend(a) - ia;
          Kokkos::single(Kokkos::PerTeam(team), [&]() { count += std::uint64_t(total) * targets - (self >= 0 ? targets : 0); });
        },
        segment_pairs);
    pairs += segment_pairs;
  }
  return pairs;
}

}  // namespace kfmm
