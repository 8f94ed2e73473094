#pragma once
/// \file
/// \brief Generated initial conditions spread over the ranks of a communicator.
#include <kfmm/comm/context.hpp>
#include <kfmm/core/initial_conditions.hpp>

namespace kfmm {

/// \brief This rank's contiguous slice of the particles that generate_initial_conditions
/// describes, with the centre-of-mass sums reduced over `context` (MPI_INT64_T, MPI_SUM).
/// Bit-identical to the same slice of a 1-rank run. Collective; invalid options throw
/// kfmm::Error on every rank alike (every rank must pass the same options).
Particles<HostSpace> make_initial_conditions(Context const& context, ICOptions const& options);

}  // namespace kfmm
