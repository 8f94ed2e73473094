#include <kfmm/core/error.hpp>
#include <kfmm/core/kernel_shape.hpp>
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

/// Sums of every target over the local sources, in source order. CPU shape: a thread per target.
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

/// GPU shape: targets and sources per tile; one thread per target on GPUs.
constexpr int direct_tile = 128;

/// GPU shape: threads per team, a backend resource (results do not depend on it).
constexpr int direct_team_size() { return compat::is_gpu_backend<ExecutionSpace>() ? direct_tile : 1; }

/// \brief The sums of sum_over_local_sources in the GPU shape: a team per block of direct_tile
/// targets; the sources pass through level-0 team scratch direct_tile at a time, and each thread
/// adds a tile to its target's sums (kept in scratch between tiles). Every target sums its
/// sources in source order with the arithmetic of the CPU shape.
template <SofteningKind kind>
void sum_over_local_sources_tiled(ExecutionSpace const& space, Particles<MemorySpace> const& sources,
                                  Vec3View<double> const& target_pos, ScalarView<std::uint64_t> const& target_ids,
                                  double h, double G, PartialSums<MemorySpace> const& partial, int team_size) {
  using Policy = Kokkos::TeamPolicy<ExecutionSpace>;
  using Member = Policy::member_type;
  using Scratch = Kokkos::View<double*, ExecutionSpace::scratch_memory_space, Kokkos::MemoryUnmanaged>;
  using IdScratch = Kokkos::View<std::uint64_t*, ExecutionSpace::scratch_memory_space, Kokkos::MemoryUnmanaged>;
  constexpr int T = direct_tile;
  int const n_targets = int(target_ids.extent(0));
  int const n_sources = int(sources.num);
  if (n_targets == 0) return;
  // Sources x, y, z, m; targets x, y, z; sums φ, a; ids of sources and targets.
  std::size_t const bytes = 11 * Scratch::shmem_size(T) + 2 * IdScratch::shmem_size(T);
  int const threads = team_size > 0 ? team_size : direct_team_size();
  auto const source_pos = sources.pos;
  auto const source_mass = sources.mass;
  auto const source_id = sources.id;
  Kokkos::parallel_for(
      "kfmm::fmm::direct_sum_tiled",
      Policy(space, (n_targets + T - 1) / T, threads).set_scratch_size(0, Kokkos::PerTeam(bytes)),
      KOKKOS_LAMBDA(Member const& team) {
        Scratch sx(team.team_scratch(0), T), sy(team.team_scratch(0), T), sz(team.team_scratch(0), T),
            sm(team.team_scratch(0), T);
        Scratch tx(team.team_scratch(0), T), ty(team.team_scratch(0), T), tz(team.team_scratch(0), T);
        Scratch tp(team.team_scratch(0), T), tax(team.team_scratch(0), T), tay(team.team_scratch(0), T),
            taz(team.team_scratch(0), T);
        IdScratch sid(team.team_scratch(0), T), tid(team.team_scratch(0), T);
        int const t0 = team.league_rank() * T;
        int const nt = compat::math::min(T, n_targets - t0);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nt), [&](int t) {
          tx(t) = target_pos(t0 + t, 0);
          ty(t) = target_pos(t0 + t, 1);
          tz(t) = target_pos(t0 + t, 2);
          tid(t) = target_ids(t0 + t);
          tp(t) = tax(t) = tay(t) = taz(t) = 0;
        });
        for (int s0 = 0; s0 < n_sources; s0 += T) {
          int const ns = compat::math::min(T, n_sources - s0);
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, ns), [&](int j) {
            sx(j) = source_pos(s0 + j, 0);
            sy(j) = source_pos(s0 + j, 1);
            sz(j) = source_pos(s0 + j, 2);
            sm(j) = source_mass(s0 + j);
            sid(j) = source_id(s0 + j);
          });
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nt), [&](int t) {
            double const x = tx(t), y = ty(t), z = tz(t);
            std::uint64_t const id = tid(t);
            double phi = tp(t), ax = tax(t), ay = tay(t), az = taz(t);
            for (int j = 0; j < ns; ++j) {
              if (sid(j) == id) continue;
              double const dx = x - sx(j), dy = y - sy(j), dz = z - sz(j);
              double K, F;
              pair_kernel<kind, double>(dx * dx + dy * dy + dz * dz, h, K, F);
              double const m = sm(j);
              phi -= m * K;
              ax -= m * F * dx;
              ay -= m * F * dy;
              az -= m * F * dz;
            }
            tp(t) = phi;
            tax(t) = ax;
            tay(t) = ay;
            taz(t) = az;
          });
          team.team_barrier();
        }
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nt), [&](int t) {
          partial(t0 + t, 0) = G * tp(t);
          partial(t0 + t, 1) = G * tax(t);
          partial(t0 + t, 2) = G * tay(t);
          partial(t0 + t, 3) = G * taz(t);
        });
      });
}

/// The local sums in the requested shape.
void sum_local(ExecutionSpace const& space, Particles<MemorySpace> const& sources, Vec3View<double> const& target_pos,
               ScalarView<std::uint64_t> const& target_ids, SofteningKind kind, double eps, double G,
               PartialSums<MemorySpace> const& partial, bool gpu_shape, int team_size) {
  double const h = softening_h(kind, eps);
  if (gpu_shape) {
    if (kind == SofteningKind::Plummer)
      sum_over_local_sources_tiled<SofteningKind::Plummer>(space, sources, target_pos, target_ids, h, G, partial,
                                                           team_size);
    else
      sum_over_local_sources_tiled<SofteningKind::Spline>(space, sources, target_pos, target_ids, h, G, partial,
                                                          team_size);
  } else {
    if (kind == SofteningKind::Plummer)
      sum_over_local_sources<SofteningKind::Plummer>(space, sources, target_pos, target_ids, h, G, partial);
    else
      sum_over_local_sources<SofteningKind::Spline>(space, sources, target_pos, target_ids, h, G, partial);
  }
}

/// Potential and acceleration of targets [0, n) from their partial sums.
template <class Sums>
void unpack(ExecutionSpace const& space, Sums const& sums, std::size_t n, ScalarView<double> const& potential,
            Vec3View<double> const& acceleration) {
  Kokkos::parallel_for(
      "kfmm::fmm::direct_sum_unpack", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n), KOKKOS_LAMBDA(std::size_t i) {
        potential(i) = sums(i, 0);
        for (int c = 0; c < 3; ++c) acceleration(i, c) = sums(i, 1 + c);
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
    return fmt::format("direct_sum: {} targets on one rank exceed the MPI count limit {}; sum over fewer targets at a "
                       "time",
                       n_targets, INT_MAX / 4);
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
  sum_local(space, sources, device_pos, device_ids, kind, eps, G, partial, use_gpu_shape<ExecutionSpace>(), 0);
  compat::fence(space, "kfmm::fmm::direct_sum");
  auto const host_partial = Kokkos::create_mirror_view_and_copy(HostSpace(), partial);
  PartialSums<HostSpace> mine(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fmm::direct_mine"), n_targets);
  MPI_Reduce_scatter(host_partial.data(), mine.data(), partial_counts.data(), MPI_DOUBLE, MPI_SUM, context.comm());

  auto const sums = Kokkos::create_mirror_view_and_copy(MemorySpace(), mine);
  unpack(space, sums, n_targets, potential, acceleration);
  compat::fence(space, "kfmm::fmm::direct_sum_unpack");
  double const nan = std::numeric_limits<double>::quiet_NaN();
  Kokkos::deep_copy(Kokkos::subview(potential, Kokkos::make_pair(n_targets, potential.extent(0))), nan);
  Kokkos::deep_copy(Kokkos::subview(acceleration, Kokkos::make_pair(n_targets, acceleration.extent(0)), Kokkos::ALL),
                    nan);
}

namespace detail {

void direct_sum_local(ExecutionSpace const& space, Particles<MemorySpace> const& sources,
                      Vec3View<double> const& target_pos, ScalarView<std::uint64_t> const& target_ids,
                      SofteningKind kind, double eps, double G, ScalarView<double> const& potential,
                      Vec3View<double> const& acceleration, bool gpu_shape, int team_size) {
  std::size_t const n = target_ids.extent(0);
  std::string const problem = check_arguments(sources, target_pos, n, eps, G, potential, acceleration);
  if (!problem.empty()) fail("{}", problem);
  PartialSums<MemorySpace> partial(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kfmm::fmm::direct_partial"),
                                   n);
  sum_local(space, sources, target_pos, target_ids, kind, eps, G, partial, gpu_shape, team_size);
  unpack(space, partial, n, potential, acceleration);
  compat::fence(space, "kfmm::fmm::direct_sum_local");
}

}  // namespace detail

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
