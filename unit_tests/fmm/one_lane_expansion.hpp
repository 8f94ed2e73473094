#pragma once
// The one-lane expansion functions of fmm/expansion.hpp (p2m, m2m, m2l, m2p, l2l, l2p), compiled once,
// in one_lane_expansion.cpp, for every test that compares against them. Each is fully unrolled
// code of tens of thousands of instructions per order and precision; the expansion tests used to
// instantiate the same ones in each file, which made them the slowest files of the build.
//
// Compiled: double at every order this build compiles, float at orders 3, 4, 7 and 8 where built
// (what the tests use). A call at another float order links with an undefined reference.
#include <kfmm/fmm/softening.hpp>

namespace kfmm::test_support::one_lane {

template <int P, class Real>
void p2m(Real m, Real ux, Real uy, Real uz, Real* M);

template <int P, class Real>
void m2m(Real const* M_child, Real s_child, Real dx, Real dy, Real dz, Real s_parent, Real* M_parent);

template <SofteningKind kind, int P, class Real>
void m2l(Real const* M_source, Real s_source, Real dx, Real dy, Real dz, Real h, Real s_target, Real* L_target);

template <SofteningKind kind, int P, class Real>
void m2p(Real const* M, Real s_source, Real dx, Real dy, Real dz, Real h, Real& phi, Real& dphidx, Real& dphidy,
         Real& dphidz);

template <int P, class Real>
void l2l(Real const* L_parent, Real s_parent, Real dx, Real dy, Real dz, Real s_child, Real* L_child);

template <int P, class Real>
void l2p(Real const* L, Real s, Real ux, Real uy, Real uz, Real& phi, Real& dphidx, Real& dphidy, Real& dphidz);

}  // namespace kfmm::test_support::one_lane
