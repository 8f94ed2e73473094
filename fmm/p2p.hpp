#pragma once
/// \file
/// \brief Near field (P2P): one-sided leaf–leaf sums over the P2P lists, structure of arrays,
/// positions relative to leaf centres in Real so that the inner loop vectorises.
#include <kfmm/core/tree.hpp>
#include <kfmm/fmm/dual_tree_walk.hpp>
#include <kfmm/fmm/expansion_pass.hpp>
#include <kfmm/fmm/softening.hpp>

namespace kfmm {

/// Per-particle scratch of the near field, kept between calls.
template <class Real>
struct NearFieldScratch {
  Kokkos::View<Real* [4], Kokkos::LayoutLeft, MemorySpace> xm{"kfmm::fmm::p2p::xm", 0};  ///< x, y, z (relative), m
};

/// \brief One target particle against one source leaf: accumulates Φ = Σ m K and ∇Φ.
/// `skip` is the index of the target itself within the source leaf (−1 if not there).
template <SofteningKind kind, class Real>
KOKKOS_INLINE_FUNCTION void p2p_leaf(Real const* KOKKOS_RESTRICT x, Real const* KOKKOS_RESTRICT y,
                                     Real const* KOKKOS_RESTRICT z, Real const* KOKKOS_RESTRICT m, int begin, int end,
                                     int skip, Real xi, Real yi, Real zi, Real h, Real& phi, Real& gx, Real& gy,
                                     Real& gz) {
  Real p = 0, ax = 0, ay = 0, az = 0;
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#pragma GCC ivdep
#endif
  for (int j = begin; j < end; ++j) {
    Real const dx = xi - x[j], dy = yi - y[j], dz = zi - z[j];
    Real const r2 = dx * dx + dy * dy + dz * dz;
    // The target itself and unsoftened coincident pairs contribute nothing.
    bool const excluded = j == skip || r2 + h * h == Real(0);
    Real K, F;
    pair_kernel<kind, Real>(excluded ? Real(1) : r2, h, K, F);
    Real const w = excluded ? Real(0) : m[j];
    p += w * K;
    Real const wf = w * F;
    ax -= wf * dx;
    ay -= wf * dy;
    az -= wf * dz;
  }
  phi += p;
  gx += ax;
  gy += ay;
  gz += az;
}

/// \brief Adds the near field to `phi` and `grad` for every target particle and returns the
/// number of particle pairs. Leaves (local or imported) hold their particles at
/// `[particle_begin, particle_end)` of the pass particles.
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
  std::uint64_t pairs = 0;
  for (int s = 0; s < lists.num_segments(); ++s) {
    std::uint64_t segment_pairs = 0;
    Kokkos::parallel_reduce(
        "kfmm::fmm::p2p",
        Kokkos::RangePolicy<ExecutionSpace, Kokkos::Schedule<Kokkos::Dynamic>>(space, lists.segment_begin[s],
                                                                                lists.segment_begin[s + 1]),
        KOKKOS_LAMBDA(int g, std::uint64_t& count) {
          int const a = target(g);
          Real const* x = &xm(0, 0);
          Real const* y = &xm(0, 1);
          Real const* z = &xm(0, 2);
          Real const* m = &xm(0, 3);
          for (int i = pbegin(a); i < pend(a); ++i) {
            Real p = 0, gx = 0, gy = 0, gz = 0;
            for (int e = offset(g); e < offset(g + 1); ++e) {
              int const b = source(e);
              // Target position relative to the source leaf's centre.
              Real const xi = x[i] + Real(centre(a, 0) - centre(b, 0));
              Real const yi = y[i] + Real(centre(a, 1) - centre(b, 1));
              Real const zi = z[i] + Real(centre(a, 2) - centre(b, 2));
              p2p_leaf<kind, Real>(x, y, z, m, pbegin(b), pend(b), a == b ? i : -1, xi, yi, zi, h, p, gx, gy, gz);
            }
            phi(i) += p;
            grad(i, 0) += gx;
            grad(i, 1) += gy;
            grad(i, 2) += gz;
          }
          std::uint64_t sources = 0;
          for (int e = offset(g); e < offset(g + 1); ++e) sources += pend(source(e)) - pbegin(source(e));
          count += sources * std::uint64_t(pend(a) - pbegin(a));
        },
        segment_pairs);
    pairs += segment_pairs;
  }
  return pairs;
}

}  // namespace kfmm
