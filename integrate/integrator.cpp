#include <kfmm/integrate/integrator.hpp>

#include <kfmm/core/error.hpp>

namespace kfmm {

IntegratorKind parse_integrator_kind(std::string const& name) {
  if (name == "dkd") return IntegratorKind::DKD;
  if (name == "kdk") return IntegratorKind::KDK;
  if (name == "lattice_dkd") return IntegratorKind::LatticeDKD;
  fail("unknown integrator '{}': use dkd, kdk or lattice_dkd", name);
}

std::string to_string(IntegratorKind kind) {
  switch (kind) {
    case IntegratorKind::DKD: return "dkd";
    case IntegratorKind::KDK: return "kdk";
    case IntegratorKind::LatticeDKD: return "lattice_dkd";
  }
  return "?";
}

namespace {

using Range = Kokkos::RangePolicy<ExecutionSpace>;

/// Round to nearest, halves away from zero: odd (r(−y) = −r(y)), which reversibility needs.
KOKKOS_INLINE_FUNCTION double symmetric_round(double y) {
  using compat::math::floor;
  return y < 0 ? -floor(-y + 0.5) : floor(y + 0.5);
}

}  // namespace

void drift(Particles<MemorySpace>& particles, double factor) {
  auto pos = particles.pos;
  auto vel = particles.vel;
  Kokkos::parallel_for(
      "kfmm::integrate::drift", Range(0, particles.num), KOKKOS_LAMBDA(std::size_t i) {
        for (int d = 0; d < 3; ++d) pos(i, d) += factor * vel(i, d);
      });
}

void kick(Particles<MemorySpace>& particles, Vec3View<double> const& acceleration, double factor) {
  auto vel = particles.vel;
  Kokkos::parallel_for(
      "kfmm::integrate::kick", Range(0, particles.num), KOKKOS_LAMBDA(std::size_t i) {
        for (int d = 0; d < 3; ++d) vel(i, d) += factor * acceleration(i, d);
      });
}

void quantize_to_lattice(Particles<MemorySpace>& particles, LatticeSpacing const& lattice) {
  auto pos = particles.pos;
  auto vel = particles.vel;
  double const dx = lattice.dx, dv = lattice.dv;
  Kokkos::parallel_for(
      "kfmm::integrate::quantize_to_lattice", Range(0, particles.num), KOKKOS_LAMBDA(std::size_t i) {
        for (int d = 0; d < 3; ++d) {
          pos(i, d) = symmetric_round(pos(i, d) / dx) * dx;
          vel(i, d) = symmetric_round(vel(i, d) / dv) * dv;
        }
      });
}

double lattice_drift(Particles<MemorySpace>& particles, LatticeSpacing const& lattice, double dt) {
  auto pos = particles.pos;
  auto vel = particles.vel;
  double const dx = lattice.dx, dv = lattice.dv;
  // (½dt)·dv/dx changes sign exactly with dt, so the increments of dt and −dt cancel exactly.
  double const lattice_factor = 0.5 * dt * dv / dx;
  double largest = 0;
  Kokkos::parallel_reduce(
      "kfmm::integrate::lattice_drift", Range(0, particles.num),
      KOKKOS_LAMBDA(std::size_t i, double& local_largest) {
        for (int d = 0; d < 3; ++d) {
          auto const nv = static_cast<std::int64_t>(symmetric_round(vel(i, d) / dv));
          auto nx = static_cast<std::int64_t>(symmetric_round(pos(i, d) / dx));
          nx += static_cast<std::int64_t>(symmetric_round(static_cast<double>(nv) * lattice_factor));
          pos(i, d) = static_cast<double>(nx) * dx;
          double const magnitude = nx < 0 ? -static_cast<double>(nx) : static_cast<double>(nx);
          if (magnitude > local_largest) local_largest = magnitude;
        }
      },
      Kokkos::Max<double>(largest));
  return largest;
}

void lattice_kick(Particles<MemorySpace>& particles, Vec3View<double> const& acceleration,
                  LatticeSpacing const& lattice, double dt) {
  auto vel = particles.vel;
  double const dv = lattice.dv;
  Kokkos::parallel_for(
      "kfmm::integrate::lattice_kick", Range(0, particles.num), KOKKOS_LAMBDA(std::size_t i) {
        for (int d = 0; d < 3; ++d) {
          auto nv = static_cast<std::int64_t>(symmetric_round(vel(i, d) / dv));
          nv += static_cast<std::int64_t>(symmetric_round(dt * acceleration(i, d) / dv));
          vel(i, d) = static_cast<double>(nv) * dv;
        }
      });
}

}  // namespace kfmm
