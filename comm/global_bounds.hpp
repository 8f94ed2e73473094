#pragma once
/// \file
/// \brief The componentwise minimum and maximum of every rank's bounds in one collective.
#include <kfmm/comm/context.hpp>

#include <mpi.h>

namespace kfmm {

/// \brief Replaces `lo` and `hi` (this rank's bounds; an empty rank passes +DBL_MAX / −DBL_MAX,
/// as compute_bounds gives) by the minimum of every rank's `lo` and the maximum of every rank's
/// `hi`. One Allreduce instead of two: the minimum is the maximum of the negated values, which
/// is exact. Collective.
inline void allreduce_bounds(Context const& context, double lo[3], double hi[3]) {
  double values[6] = {-lo[0], -lo[1], -lo[2], hi[0], hi[1], hi[2]};
  MPI_Allreduce(MPI_IN_PLACE, values, 6, MPI_DOUBLE, MPI_MAX, context.comm());
  for (int k = 0; k < 3; ++k) {
    lo[k] = -values[k];
    hi[k] = values[3 + k];
  }
}

}  // namespace kfmm
