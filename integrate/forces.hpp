#pragma once
/// \file
/// \brief The force interface of the integrators, so they do not depend on how forces are made.
#include <kfmm/comm/context.hpp>
#include <kfmm/core/particles.hpp>
#include <kfmm/fmm/softening.hpp>

#include <functional>

namespace kfmm {

class ForceSolver;

/// \brief Computes potential and acceleration of every particle on every rank (collective).
///
/// It may reorder particles or move them to other ranks ("owner order"); afterwards `potential`
/// and `acceleration` are aligned with `particles` as they are after the call. It resizes the
/// result Views as needed. Integrators apply their kicks right after the call, so whatever
/// they keep per particle stays aligned.
using ForceFunction = std::function<void(Particles<MemorySpace>& particles, ScalarView<double>& potential,
                                         Vec3View<double>& acceleration)>;

/// \brief Forces from `solver` (FMM, owner order). The solver must outlive the function.
ForceFunction fmm_forces(ForceSolver& solver);

/// \brief Forces by O(N²) direct summation in double; particles keep their order and rank.
ForceFunction direct_forces(Context const& context, SofteningKind softening, double softening_length, double G);

}  // namespace kfmm
