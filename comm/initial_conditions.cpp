#include <kfmm/comm/initial_conditions.hpp>

namespace kfmm {

Particles<HostSpace> make_initial_conditions(Context const& context, ICOptions const& options) {
  auto const sum_over_ranks = [&context](std::int64_t* values, int count) {
    MPI_Allreduce(MPI_IN_PLACE, values, count, MPI_INT64_T, MPI_SUM, context.comm());
  };
  return generate_initial_conditions(options, context.rank(), context.size(), sum_over_ranks);
}

}  // namespace kfmm
