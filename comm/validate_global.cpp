#include <kfmm/comm/unique_ids.hpp>
#include <kfmm/comm/validate_global.hpp>
#include <kfmm/core/validate.hpp>

#include <kfmm/core/format.hpp>

#include <string>

namespace kfmm {

namespace {

std::string check_num_total(Context const& context, Particles<HostSpace> const& particles) {
  unsigned long long const local = particles.num;
  unsigned long long total = 0;
  MPI_Allreduce(&local, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, context.comm());
  if (particles.num_total == total) return {};
  return fmt::format("num_total = {} on rank {} but the ranks hold {} particles in all; set num_total to {}",
                     particles.num_total, context.rank(), total, total);
}

// The smallest id used twice, named by rank and local index (the ranks' own checks already
// caught ids repeated on one rank).
std::string find_id_on_two_ranks(Context const& context, Particles<HostSpace> const& particles) {
  IdRepeats const repeats = find_repeated_ids(context, particles);
  if (!repeats) return {};
  return fmt::format("id {} is used on rank {} (particle {}) and on rank {} (particle {}); particle ids must be "
                     "unique across ranks",
                     repeats.id, repeats.ranks[0], repeats.indices[0], repeats.ranks[1], repeats.indices[1]);
}

}  // namespace

void validate_global(Context const& context, Particles<HostSpace> const& particles) {
  agree_on_error(context, find_invalid_particle(particles, context.rank()));
  agree_on_error(context, check_num_total(context, particles));
  agree_on_error(context, find_id_on_two_ranks(context, particles));
}

}  // namespace kfmm
