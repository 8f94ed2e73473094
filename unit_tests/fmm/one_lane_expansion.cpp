// One instantiation of each one-lane expansion function for all expansion tests (see the header).
#include <fmm/one_lane_expansion.hpp>

#include <kfmm/build_config.hpp>
#include <kfmm/fmm/expansion.hpp>

// Host code only: the CUDA compile check's device pass skips it. An explicit instantiation would
// compile the one-lane (CPU-shape) functions for the device as well, which no GPU kernel calls
// (the GPU shape runs expansion_teams.hpp) and which nvcc does not accept there.
#if !defined(__CUDA_ARCH__)
namespace kfmm::test_support::one_lane {

template <int P, class Real>
void p2m(Real m, Real ux, Real uy, Real uz, Real* M) {
  kfmm::p2m<P>(m, ux, uy, uz, M);
}

template <int P, class Real>
void m2m(Real const* M_child, Real s_child, Real dx, Real dy, Real dz, Real s_parent, Real* M_parent) {
  kfmm::m2m<P>(M_child, s_child, dx, dy, dz, s_parent, M_parent);
}

template <SofteningKind kind, int P, class Real>
void m2l(Real const* M_source, Real s_source, Real dx, Real dy, Real dz, Real h, Real s_target, Real* L_target) {
  kfmm::m2l<kind, P>(M_source, s_source, dx, dy, dz, h, s_target, L_target);
}

template <SofteningKind kind, int P, class Real>
void m2p(Real const* M, Real s_source, Real dx, Real dy, Real dz, Real h, Real& phi, Real& dphidx, Real& dphidy,
         Real& dphidz) {
  phi = dphidx = dphidy = dphidz = Real(0);  // m2p accumulates
  kfmm::m2p<kind, P>(M, s_source, dx, dy, dz, h, phi, dphidx, dphidy, dphidz);
}

template <int P, class Real>
void l2l(Real const* L_parent, Real s_parent, Real dx, Real dy, Real dz, Real s_child, Real* L_child) {
  kfmm::l2l<P>(L_parent, s_parent, dx, dy, dz, s_child, L_child);
}

template <int P, class Real>
void l2p(Real const* L, Real s, Real ux, Real uy, Real uz, Real& phi, Real& dphidx, Real& dphidy, Real& dphidz) {
  kfmm::l2p<P>(L, s, ux, uy, uz, phi, dphidx, dphidy, dphidz);
}

// Explicit instantiations (a test file sees only the declarations), at the orders this build
// compiles: KFMM_EXPANSION_ORDER_MASK has bit p set for order p.
#define KFMM_ONE_LANE_AT(P, Real)                                                                              \
  template void p2m<P, Real>(Real, Real, Real, Real, Real*);                                                   \
  template void m2m<P, Real>(Real const*, Real, Real, Real, Real, Real, Real*);                                \
  template void m2l<SofteningKind::Plummer, P, Real>(Real const*, Real, Real, Real, Real, Real, Real, Real*);   \
  template void m2l<SofteningKind::Spline, P, Real>(Real const*, Real, Real, Real, Real, Real, Real, Real*);    \
  template void m2p<SofteningKind::Plummer, P, Real>(Real const*, Real, Real, Real, Real, Real, Real&, Real&, Real&, \
                                                    Real&);                                                    \
  template void m2p<SofteningKind::Spline, P, Real>(Real const*, Real, Real, Real, Real, Real, Real&, Real&, Real&,  \
                                                   Real&);                                                     \
  template void l2l<P, Real>(Real const*, Real, Real, Real, Real, Real, Real*);                                \
  template void l2p<P, Real>(Real const*, Real, Real, Real, Real, Real&, Real&, Real&, Real&);

#if KFMM_EXPANSION_ORDER_MASK & (1 << 1)
KFMM_ONE_LANE_AT(1, double)
#endif
#if KFMM_EXPANSION_ORDER_MASK & (1 << 2)
KFMM_ONE_LANE_AT(2, double)
#endif
#if KFMM_EXPANSION_ORDER_MASK & (1 << 3)
KFMM_ONE_LANE_AT(3, double)
KFMM_ONE_LANE_AT(3, float)
#endif
#if KFMM_EXPANSION_ORDER_MASK & (1 << 4)
KFMM_ONE_LANE_AT(4, double)
KFMM_ONE_LANE_AT(4, float)
#endif
#if KFMM_EXPANSION_ORDER_MASK & (1 << 5)
KFMM_ONE_LANE_AT(5, double)
#endif
#if KFMM_EXPANSION_ORDER_MASK & (1 << 6)
KFMM_ONE_LANE_AT(6, double)
#endif
#if KFMM_EXPANSION_ORDER_MASK & (1 << 7)
KFMM_ONE_LANE_AT(7, double)
KFMM_ONE_LANE_AT(7, float)
#endif
#if KFMM_EXPANSION_ORDER_MASK & (1 << 8)
KFMM_ONE_LANE_AT(8, double)
KFMM_ONE_LANE_AT(8, float)
#endif
#undef KFMM_ONE_LANE_AT

}  // namespace kfmm::test_support::one_lane
#endif
