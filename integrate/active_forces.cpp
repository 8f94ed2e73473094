#include <kfmm/integrate/active_forces.hpp>

#include <kfmm/fmm/direct.hpp>
#include <kfmm/fmm/solver.hpp>

#include <string>

namespace kfmm {
namespace detail {

// Views too short for the particles are an error on every rank.
void check_active_views(Context const& context, Particles<MemorySpace> const& particles, ActiveFlags const& active,
                        ScalarView<double> const& potential, Vec3View<double> const& acceleration) {
  collectively(context, [&] {
    std::size_t const n = particles.num;
    if (active.extent(0) < n || potential.extent(0) < n || acceleration.extent(0) < n)
      fail("active forces on rank {}: {} particles but {} active flags, {} potential and {} acceleration rows; "
           "size every View to at least the particle count",
           context.rank(), n, active.extent(0), potential.extent(0), acceleration.extent(0));
  });
}

// The indices of the active particles, in particle order (a deterministic compaction).
Kokkos::View<std::size_t*, MemorySpace> active_indices(ActiveFlags const& active, std::size_t n) {
  Kokkos::View<std::size_t*, MemorySpace> offsets("kfmm::integrate::active_offsets", n + 1);
  Kokkos::parallel_scan(
      "kfmm::integrate::active_offsets", Kokkos::RangePolicy<ExecutionSpace>(ExecutionSpace(), 0, n),
      KOKKOS_LAMBDA(std::size_t i, std::size_t & sum, bool final) {
        if (final) offsets(i) = sum;
        sum += active(i) ? 1 : 0;
        if (final && i + 1 == n) offsets(n) = sum;
      });
  std::size_t count = 0;
  if (n > 0) Kokkos::deep_copy(count, Kokkos::subview(offsets, n));
  Kokkos::View<std::size_t*, MemorySpace> indices("kfmm::integrate::active_indices", count);
  Kokkos::parallel_for(
      "kfmm::integrate::active_indices", Kokkos::RangePolicy<ExecutionSpace>(ExecutionSpace(), 0, n),
      KOKKOS_LAMBDA(std::size_t i) {
        if (active(i)) indices(offsets(i)) = i;
      });
  ExecutionSpace().fence();
  return indices;
}

void direct_active(Context const& context, Particles<MemorySpace> const& particles, ActiveFlags const& active,
                   SofteningKind softening, double eps, double G, ScalarView<double> const& potential,
                   Vec3View<double> const& acceleration) {
  auto const indices = active_indices(active, particles.num);
  std::size_t const count = indices.extent(0);
  Vec3View<double> target_pos("kfmm::integrate::active_pos", count);
  ScalarView<std::uint64_t> target_ids("kfmm::integrate::active_ids", count);
  auto const pos = particles.pos;
  auto const id = particles.id;
  Kokkos::parallel_for(
      "kfmm::integrate::gather_active", Kokkos::RangePolicy<ExecutionSpace>(ExecutionSpace(), 0, count),
      KOKKOS_LAMBDA(std::size_t k) {
        std::size_t const i = indices(k);
        for (int d = 0; d < 3; ++d) target_pos(k, d) = pos(i, d);
        target_ids(k) = id(i);
      });
  ScalarView<double> target_potential("kfmm::integrate::active_potential", count);
  Vec3View<double> target_acceleration("kfmm::integrate::active_acceleration", count);
  direct_sum(context, particles, target_pos, target_ids, softening, eps, G, target_potential, target_acceleration);
  Kokkos::parallel_for(
      "kfmm::integrate::scatter_active", Kokkos::RangePolicy<ExecutionSpace>(ExecutionSpace(), 0, count),
      KOKKOS_LAMBDA(std::size_t k) {
        std::size_t const i = indices(k);
        potential(i) = target_potential(k);
        for (int d = 0; d < 3; ++d) acceleration(i, d) = target_acceleration(k, d);
      });
  ExecutionSpace().fence();
}

}  // namespace detail

ActiveForceFunction fmm_active_forces(ForceSolver& solver) {
  return [&solver](Particles<MemorySpace> const& particles, ActiveFlags const& active, ScalarView<double>& potential,
                   Vec3View<double>& acceleration) {
    solver.compute_active(particles, active, potential, acceleration);
  };
}

ActiveForceFunction direct_active_forces(Context const& context, SofteningKind softening, double softening_length,
                                         double G) {
  return [context, softening, softening_length, G](Particles<MemorySpace> const& particles, ActiveFlags const& active,
                                                   ScalarView<double>& potential, Vec3View<double>& acceleration) {
    detail::check_active_views(context, particles, active, potential, acceleration);
    detail::direct_active(context, particles, active, softening, softening_length, G, potential, acceleration);
  };
}

}  // namespace kfmm
