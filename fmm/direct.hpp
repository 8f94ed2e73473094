#pragma once
/// \file
/// \brief Reference O(N²) direct summation in double precision, over the sources of all ranks.
#include <kfmm/comm/context.hpp>
#include <kfmm/core/particles.hpp>
#include <kfmm/fmm/softening.hpp>

#include <cstdint>

namespace kfmm {

/// \brief Potential and acceleration at this rank's targets due to the sources of all ranks,
/// summed pair by pair in double: φ_i = −G Σ_{j≠i} m_j K(r_ij), a_i = −G Σ_{j≠i} m_j F(r_ij)(x_i − x_j)
/// with K, F of pair_kernel and h = softening_h(kind, eps).
///
/// The targets are the first `target_ids.extent(0)` rows of `target_pos` (any number, 0 too);
/// a source whose id equals the target's id is the target itself and is skipped. Sources are
/// `[0, sources.num)` of each rank. Every rank's targets are gathered to every rank
/// (MPI_Allgatherv), summed over the local sources in a fixed order and the partial sums are
/// added up across ranks (MPI_Reduce_scatter), so results are deterministic for a given rank
/// count and agree with any other rank count to round-off. Needs 4 doubles per target of all
/// ranks on every rank. Rows of `potential` and `acceleration` from `target_ids.extent(0)` on are
/// set to NaN. Collective over `context`; bad arguments on any rank throw kfmm::Error on all.
void direct_sum(Context const& context, Particles<MemorySpace> const& sources, Vec3View<double> const& target_pos,
                ScalarView<std::uint64_t> const& target_ids, SofteningKind kind, double eps, double G,
                ScalarView<double> const& potential, Vec3View<double> const& acceleration);

/// \brief direct_sum with this rank's particles `[0, num)` as targets and all ranks' particles as
/// sources. Allocates `potential` and `acceleration` with `particles.capacity()` rows, aligned
/// with the particles; padding rows are NaN. Collective.
void direct_sum_all(Context const& context, Particles<MemorySpace> const& particles, SofteningKind kind, double eps,
                    double G, ScalarView<double>& potential, Vec3View<double>& acceleration);

namespace detail {

/// \brief The pair sums of direct_sum on this rank alone, without MPI: potential and
/// acceleration of the targets `[0, target_ids.extent(0))` due to the sources `[0, sources.num)`,
/// in a given kernel shape (direct_sum takes use_gpu_shape<ExecutionSpace>()), so that
/// tests run both shapes on any backend. CPU shape: a thread per target. GPU shape: a team per
/// block of 128 targets, the sources in tiles in team scratch; `team_size` 0 is the backend's
/// default. Both sum every target's sources in source order. Throws kfmm::Error on bad arguments.
void direct_sum_local(ExecutionSpace const& space, Particles<MemorySpace> const& sources,
                      Vec3View<double> const& target_pos, ScalarView<std::uint64_t> const& target_ids,
                      SofteningKind kind, double eps, double G, ScalarView<double> const& potential,
                      Vec3View<double> const& acceleration, bool gpu_shape, int team_size = 0);

}  // namespace detail

}  // namespace kfmm
