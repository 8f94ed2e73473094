#pragma once
/// \file
/// \brief Collective checks of particle data over all ranks.
#include <kfmm/comm/context.hpp>
#include <kfmm/core/particles.hpp>

namespace kfmm {

/// \brief Checks the particles of every rank and throws the same kfmm::Error on every rank when
/// any check fails (no rank is left in a collective):
/// - each rank's own checks (core/validate.hpp: num ≤ capacity, finite positions and
///   velocities, positive masses, no id twice on one rank);
/// - `num_total` equals the sum of `num` over the ranks on every rank;
/// - no id is used on two ranks (exact: ids are sent to an owner rank by hash and compared).
/// Collective over `context`.
void validate_global(Context const& context, Particles<HostSpace> const& particles);

}  // namespace kfmm
