#include <kfmm/core/error.hpp>
#include <kfmm/fmm/direct.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace kfmm {

namespace {

/// Per target (φ, a_x, a_y, a_z), rows contiguous so that each rank's block is one MPI segment.
template <class Memory>
using PartialSums = Kokkos::View<double* [4], Kokkos::LayoutRight, Memory>;

/// Sums of every target over the local sources, in source order.
template <SofteningKind kind>
void sum_over_local_sources(ExecutionSpace const& space, Particles<MemorySpace> const& sources,
                            Vec3View<double> const& target_pos, ScalarView<std::uint64_t> const& target_ids,
                            double h, double G, PartialSums<MemorySpace> const& partial) {
  auto const source_pos = sources.pos;
  auto const source_mass = sources.mass;
  auto const source_id = sources.id;
  std::size_t const n_sources = sources.num;
  Kokkos::parallel_for(
      "kfmm::fmm::direct_sum", Kokkos::RangePolicy<ExecutionSpace>(space, 0, target_ids.extent(0)),
      KOKKOS_LAMBDA(std::size_t i) {
        double const x = target_pos(i, 0), y = target_pos(i, 1), z = target_pos(i, 2);
        std::uint64_t const id = target_ids(i);
        double phi = 0, ax = 0, ay = 0, az = 0;
        for (std::size_t j = 0; j < n_sources; ++j) {
          if (source_id(j) == id) continue;
          double const dx = x - source_pos(j, 0), dy = y - source_pos(j, 1), dz = z - source_pos(j, 2);
          double K, F;
          pair_kernel<kind, double>(dx * dx + dy * dy + dz * dz, h, K, F);
          double const m = source_mass(j);
          phi -= m * K;
          ax -= m * F * dx;
          ay -= m * F * dy;
          az -= m * F * dz;
        }
        partial(i, 0) = G * phi;
        partial(i, 1) = G * ax;
        partial(i, 2) = G * ay;
        partial(i, 3) = G * az;
      });
}

/// Why the arguments of this rank cannot be used, or an empty string.
std::string check_arguments(Particles<MemorySpace> const& sources, Vec3View<double> const& target_pos,
                            std::size_t n_targets, double eps, double G, ScalarView<double> const& potential,
                            Vec3View<double> const& acceleration) {
  auto const too_short = [&](char const* what, std::size_t extent) {
    return fmt::format("direct_sum: {} has {} rows but there are {} targets (target_ids.extent(0)); allocate at "
                       "least as many",
                       what, extent, n_targets);
  };
  if (target_pos.extent(0) < n_targets) return too_short("target_pos", target_pos.extent(0));
  if (potential.extent(0) < n_targets) return too_short("potential", potential.extent(0));
  if (acceleration.extent(0) < n_targets) return too_short("acceleration", acceleration.extent(0));
  if (sources.num > sources.capacity())
    return fmt::format("direct_sum: sources.num = {} exceeds the capacity {}", sources.num, sources.capacity());
  if (!(eps >= 0 && std::isfinite(eps)))
    return fmt::format("direct_sum: softening length eps = {} must be finite and ≥ 0", eps);
  if (!std::isfinite(G)) return fmt::format("direct_sum: G = {} must be finite", G);
  // Four doubles per target travel in one MPI call, whose counts are int.
  if (n_targets > std::size_t(INT_MAX / 4))
    return fmt::format("direct_sum: {} targets on one rank exceed the MPI count limit {}", n_targets, INT_MAX / 4);
  return {};
}

}  // namespace

void direct_sum(Context const& context, Particles<MemorySpace> const& sources, Vec3View<double> const& target_pos,
                ScalarView<std::uint64_t> const& target_ids, SofteningKind kind, double eps, double G,
                ScalarView<double> const& potential, Vec3View<double> const& acceleration) {
  compat::ScopedRegion region("kfmm::fmm::direct_sum");
  std::size_t const n_targets = target_ids.extent(0);
  agree_on_error(context, check_arguments(sources, target_pos, n_targets, eps, G, potential, acceleration));

  // Target counts of all ranks; every rank sees the same total and fails alike.
  int const local_count = int(n_targets);
  std::vector<int> counts(context.size()), offsets(context.size()), partial_counts(context.size());
  MPI_Allgather(&local_count, 1, MPI_INT, counts.data(), 1, MPI_INT, context.comm());
  long long total = 0;
  for (int r = 0; r < context.size(); ++r) {
    offsets[r] = int(total);
    partial_counts[r] = 4 * counts[r];
    total += counts[r];
  }
  if (4 * total > INT_MAX)
    fail("direct_sum: {} targets over all ranks exceed the MPI count limit {} of the gathered sums; sum over fewer "
         "targets at a time",
         total, INT_MAX / 4);

  // Everyone's targets, gathered on the host.
  auto const local_pos = Kokkos::create_mirror_view_and_copy(HostSpace(), target_pos);
  auto const local_ids = Kokkos::create_mirror_view_and_copy(HostSpace(), target_ids);
  Vec3View<double, HostSpace> all_pos(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fmm::direct_targets"),
                                      std::size_t(total));
  ScalarView<std::uint64_t, HostSpace> all_ids(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fmm::direct_target_ids"), std::size_t(total));
  for (int c = 0; c < 3; ++c)
    MPI_Allgatherv(local_pos.data() + c * local_pos.stride(1), local_count, MPI_DOUBLE,
                   all_pos.data() + c * all_pos.stride(1), counts.data(), offsets.data(), MPI_DOUBLE, context.comm());
  MPI_Allgatherv(local_ids.data(), local_count, MPI_UINT64_T, all_ids.data(), counts.data(), offsets.data(),
                 MPI_UINT64_T, context.comm());
  auto const device_pos = Kokkos::create_mirror_view_and_copy(MemorySpace(), all_pos);
  auto const device_ids = Kokkos::create_mirror_view_and_copy(MemorySpace(), all_ids);

  // This rank's sources acting on all targets, then the sums of all ranks for my targets.
  ExecutionSpace const space;
  PartialSums<MemorySpace> partial(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kfmm::fmm::direct_partial"),
                                   std::size_t(total));
  double const h = softening_h(kind, eps);
  if (kind == SofteningKind::Plummer)
    sum_over_local_sources<SofteningKind::Plummer>(space, sources, device_pos, device_ids, h, G, partial);
  else
    sum_over_local_sources<SofteningKind::Spline>(space, sources, device_pos, device_ids, h, G, partial);
  compat::fence(space, "kfmm::fmm::direct_sum");
  auto const host_partial = Kokkos::create_mirror_view_and_copy(HostSpace(), partial);
  PartialSums<HostSpace> mine(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fmm::direct_mine"), n_targets);
  MPI_Reduce_scatter(host_partial.data(), mine.data(), partial_counts.data(), MPI_DOUBLE, MPI_SUM, context.comm());

  auto const sums = Kokkos::create_mirror_view_and_copy(MemorySpace(), mine);
  Kokkos::parallel_for(
      "kfmm::fmm::direct_sum_unpack", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n_targets),
      KOKKOS_LAMBDA(std::size_t i) {
        potential(i) = sums(i, 0);
        for (int c = 0; c < 3; ++c) acceleration(i, c) = sums(i, 1 + c);
      });
  compat::fence(space, "kfmm::fmm::direct_sum_unpack");
  double const nan = std::numeric_limits<double>::quiet_NaN();
  Kokkos::deep_copy(Kokkos::subview(potential, Kokkos::make_pair(n_targets, potential.extent(0))), nan);
  Kokkos::deep_copy(Kokkos::subview(acceleration, Kokkos::make_pair(n_targets, acceleration.extent(0)), Kokkos::ALL),
                    nan);
}

void direct_sum_all(Context const& context, Particles<MemorySpace> const& particles, SofteningKind kind, double eps,
                    double G, ScalarView<double>& potential, Vec3View<double>& acceleration) {
  potential = ScalarView<double>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fmm::direct_potential"),
                                 particles.capacity());
  acceleration = Vec3View<double>(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fmm::direct_acceleration"), particles.capacity());
  // direct_sum reports num > capacity; the subview must not run past the View first.
  auto const ids = Kokkos::subview(particles.id, Kokkos::make_pair(std::size_t(0), std::min(particles.num, particles.capacity())));
  direct_sum(context, particles, particles.pos, ids, kind, eps, G, potential, acceleration);
}

}  // namespace kfmm
