#pragma once
/// \file
/// \brief Forces on a subset of the particles (the active ones of a hierarchical time step), with
/// every particle as a source.
#include <kfmm/comm/context.hpp>
#include <kfmm/core/particles.hpp>
#include <kfmm/fmm/softening.hpp>
#include <kfmm/fmm/solver.hpp>

#include <cstdint>
#include <functional>

namespace kfmm {

/// \brief Potential and acceleration of the active particles `[0, particles.num)` with
/// `active(i) != 0`, due to all particles of all ranks (collective).
///
/// Particles keep their order and rank (unlike ForceFunction). `potential` and `acceleration`
/// must have at least `particles.num` rows, aligned with `particles`; rows of active particles
/// are overwritten, every other row is left as it is (a block-step integrator keeps the
/// accelerations of inactive particles there). Every rank takes part, also with no active
/// particle. Throws kfmm::Error (on every rank) for Views that are too short.
using ActiveForceFunction = std::function<void(Particles<MemorySpace> const& particles, ActiveFlags const& active,
                                               ScalarView<double>& potential, Vec3View<double>& acceleration)>;

/// \brief Active forces from `solver` (FMM, ForceSolver::compute_active: between two calls
/// with every particle active, the calls reuse that call's tree and decomposition and evaluate
/// only the nodes holding active particles). The solver must outlive the function.
ActiveForceFunction fmm_active_forces(ForceSolver& solver);

/// \brief Active forces by O(N_active · N) direct summation in double.
ActiveForceFunction direct_active_forces(Context const& context, SofteningKind softening, double softening_length,
                                         double G);

}  // namespace kfmm
