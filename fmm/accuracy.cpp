#include <kfmm/fmm/accuracy.hpp>
#include <kfmm/fmm/direct.hpp>
#include <kfmm/core/error.hpp>
#include <kfmm/core/format.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

namespace kfmm {

namespace {

// A well-mixed 64-bit hash (SplitMix64 finaliser) so that sampled ids are spread evenly.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The report on the local particles `chosen` (rows of `host`, the host copy of `particles`) of
// every rank. Collective.
AccuracyReport compare_targets(Context const& context, Particles<MemorySpace> const& particles,
                               Particles<HostSpace> const& host, ScalarView<double> const& potential,
                               Vec3View<double> const& acceleration, FMMConfig const& config,
                               std::vector<std::size_t> const& chosen) {
  auto const pot = Kokkos::create_mirror_view_and_copy(HostSpace(), potential);
  auto const acc = Kokkos::create_mirror_view_and_copy(HostSpace(), acceleration);
  std::size_t const m = chosen.size();
  Vec3View<double> target_pos("kfmm::accuracy::targets", m);
  ScalarView<std::uint64_t> target_ids("kfmm::accuracy::ids", m);
  {
    auto tp = Kokkos::create_mirror_view(target_pos);
    auto ti = Kokkos::create_mirror_view(target_ids);
    for (std::size_t t = 0; t < m; ++t) {
      for (int k = 0; k < 3; ++k) tp(t, k) = host.pos(chosen[t], k);
      ti(t) = host.id(chosen[t]);
    }
    Kokkos::deep_copy(target_pos, tp);
    Kokkos::deep_copy(target_ids, ti);
  }
  ScalarView<double> direct_pot("kfmm::accuracy::potential", m);
  Vec3View<double> direct_acc("kfmm::accuracy::acceleration", m);
  direct_sum(context, particles, target_pos, target_ids, config.softening, config.softening_length, config.G,
             direct_pot, direct_acc);
  auto const dp = Kokkos::create_mirror_view_and_copy(HostSpace(), direct_pot);
  auto const da = Kokkos::create_mirror_view_and_copy(HostSpace(), direct_acc);
  // sums: squared errors and norms (4), then Σ m and Σ m x over every local particle (4).
  double sums[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (std::size_t i = 0; i < host.num; ++i) {
    sums[4] += host.mass(i);
    for (int k = 0; k < 3; ++k) sums[5 + k] += host.mass(i) * host.pos(i, k);
  }
  std::vector<double> relative(m);
  for (std::size_t t = 0; t < m; ++t) {
    std::size_t const i = chosen[t];
    double d2 = 0, r2 = 0;
    for (int k = 0; k < 3; ++k) {
      d2 += (acc(i, k) - da(t, k)) * (acc(i, k) - da(t, k));
      r2 += da(t, k) * da(t, k);
    }
    sums[0] += d2;
    sums[1] += r2;
    sums[2] += (pot(i) - dp(t)) * (pot(i) - dp(t));
    sums[3] += dp(t) * dp(t);
    relative[t] = r2 > 0 ? std::sqrt(d2 / r2) : std::sqrt(d2);
  }
  double global[8];
  MPI_Allreduce(sums, global, 8, MPI_DOUBLE, MPI_SUM, context.comm());
  int const count = static_cast<int>(m);
  std::vector<int> counts(context.size()), offsets(context.size() + 1, 0);
  MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, context.comm());
  for (int r = 0; r < context.size(); ++r) offsets[r + 1] = offsets[r] + counts[r];
  std::vector<double> all(offsets.back());
  MPI_Allgatherv(relative.data(), count, MPI_DOUBLE, all.data(), counts.data(), offsets.data(), MPI_DOUBLE,
                 context.comm());
  std::sort(all.begin(), all.end());
  AccuracyReport report;
  report.samples = all.size();
  if (all.empty()) return report;
  auto quantile = [&](double q) { return all[static_cast<std::size_t>(q * double(all.size() - 1))]; };
  report.force_l2 = global[1] > 0 ? std::sqrt(global[0] / global[1]) : std::sqrt(global[0]);
  report.potential_l2 = global[3] > 0 ? std::sqrt(global[2] / global[3]) : std::sqrt(global[2]);
  report.median = quantile(0.5);
  report.p99 = quantile(0.99);
  report.p999 = quantile(0.999);
  report.max = all.back();
  // The largest error's particle: the rank holding it (the lowest on ties) describes it.
  struct {
    double value;
    int rank;
  } local{-1.0, context.rank()}, largest{0.0, 0};
  std::size_t worst = 0;
  for (std::size_t t = 0; t < m; ++t)
    if (relative[t] > local.value) {
      local.value = relative[t];
      worst = t;
    }
  MPI_Allreduce(&local, &largest, 1, MPI_DOUBLE_INT, MPI_MAXLOC, context.comm());
  double where[4] = {0, 0, 0, 0};  // position and |a_direct| of the worst target
  std::uint64_t worst_id = 0;
  if (largest.rank == context.rank() && m > 0) {
    for (int k = 0; k < 3; ++k) where[k] = host.pos(chosen[worst], k);
    where[3] = std::sqrt(da(worst, 0) * da(worst, 0) + da(worst, 1) * da(worst, 1) + da(worst, 2) * da(worst, 2));
    worst_id = host.id(chosen[worst]);
  }
  MPI_Bcast(where, 4, MPI_DOUBLE, largest.rank, context.comm());
  MPI_Bcast(&worst_id, 1, MPI_UINT64_T, largest.rank, context.comm());
  double r2 = 0;
  for (int k = 0; k < 3; ++k) {
    double const centre = global[4] > 0 ? global[5 + k] / global[4] : 0.0;
    r2 += (where[k] - centre) * (where[k] - centre);
  }
  report.max_id = worst_id;
  report.max_radius = std::sqrt(r2);
  report.max_magnitude = where[3];
  return report;
}


// The rows of `host` whose ids are among the sorted, unique `target_ids`; an error on every
// rank when some listed id is no particle's. Collective.
std::vector<std::size_t> listed_rows(Context const& context, Particles<HostSpace> const& host,
                                     std::vector<std::uint64_t> const& target_ids) {
  std::vector<std::size_t> chosen;
  std::vector<unsigned char> found(target_ids.size(), 0);
  for (std::size_t i = 0; i < host.num; ++i) {
    auto const at = std::lower_bound(target_ids.begin(), target_ids.end(), host.id(i));
    if (at == target_ids.end() || *at != host.id(i)) continue;
    chosen.push_back(i);
    found[static_cast<std::size_t>(at - target_ids.begin())] = 1;
  }
  // Every rank learns which ids some rank holds, so all agree on the error below.
  MPI_Allreduce(MPI_IN_PLACE, found.data(), static_cast<int>(found.size()), MPI_UNSIGNED_CHAR, MPI_MAX,
                context.comm());
  std::size_t const missing = static_cast<std::size_t>(std::count(found.begin(), found.end(), 0));
  if (missing > 0)
    fail("accuracy check: {} of the {} listed target ids are not ids of the particles (the first: {}); list only "
         "ParticleIDs of this particle set",
         missing, target_ids.size(),
         target_ids[static_cast<std::size_t>(std::find(found.begin(), found.end(), 0) - found.begin())]);
  return chosen;
}

std::vector<std::uint64_t> sorted_unique(std::vector<std::uint64_t> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}


}  // namespace

AccuracyReport measure_accuracy(Context const& context, Particles<MemorySpace> const& particles,
                                ScalarView<double> const& potential, Vec3View<double> const& acceleration,
                                FMMConfig const& config, std::uint64_t samples) {
  auto const host = to_host(particles);
  double const fraction = particles.num_total > 0 ? double(samples) / double(particles.num_total) : 1.0;
  std::uint64_t const threshold =
      fraction >= 1.0 ? ~std::uint64_t(0) : static_cast<std::uint64_t>(fraction * 18446744073709551615.0);
  std::vector<std::size_t> chosen;
  for (std::size_t i = 0; i < host.num; ++i)
    if (fraction >= 1.0 || mix(host.id(i)) < threshold) chosen.push_back(i);
  return compare_targets(context, particles, host, potential, acceleration, config, chosen);
}

void check_target_ids(Context const& context, Particles<MemorySpace> const& particles,
                      std::vector<std::uint64_t> const& target_ids) {
  listed_rows(context, to_host(particles), sorted_unique(target_ids));
}

AccuracyReport measure_accuracy(Context const& context, Particles<MemorySpace> const& particles,
                                ScalarView<double> const& potential, Vec3View<double> const& acceleration,
                                FMMConfig const& config, std::vector<std::uint64_t> const& target_ids) {
  auto const host = to_host(particles);
  auto const chosen = listed_rows(context, host, sorted_unique(target_ids));
  return compare_targets(context, particles, host, potential, acceleration, config, chosen);
}

std::string describe(AccuracyReport const& report) {
  return fmt::format("accuracy vs direct summation ({} targets): force E = {:.3g}, median {:.3g}, 99% {:.3g}, "
                     "99.9% {:.3g}, max {:.3g} (id {}, r = {:.3g} from the centre of mass, |a| = {:.3g}); "
                     "potential {:.3g}",
                     report.samples, report.force_l2, report.median, report.p99, report.p999, report.max,
                     report.max_id, report.max_radius, report.max_magnitude, report.potential_l2);
}

}  // namespace kfmm
