// An application using only the installed kfmm headers and library: forces on a Plummer sphere.
// Checks two physical facts of the result (exits non-zero when one fails):
//  - momentum: Σ m a ≈ 0 (Newton's third law) relative to Σ m |a|;
//  - energy: W = ½ Σ m φ is close to the Plummer value −3π/32 (G = M = a = 1).
#include <kfmm/comm/environment.hpp>
#include <kfmm/comm/initial_conditions.hpp>
#include <kfmm/fmm/solver.hpp>

#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  try {
    kfmm::Environment environment(argc, argv);
    kfmm::Context const& world = environment.world();

    kfmm::ICOptions options;
    options.kind = kfmm::ICKind::Plummer;
    options.n_total = 4000;
    auto particles = kfmm::to_device(kfmm::make_initial_conditions(world, options));

    kfmm::FMMConfig config;  // the defaults a user gets
    kfmm::ForceSolver solver(world, config);
    solver.compute(particles);

    auto const mass = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), particles.mass);
    auto const acc = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), solver.acceleration());
    auto const pot = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), solver.potential());
    // momentum x, y, z; Σ m |a|; Σ m φ; particles
    double sums[6] = {0, 0, 0, 0, 0, 0};
    for (std::size_t i = 0; i < particles.num; ++i) {
      double a2 = 0;
      for (int k = 0; k < 3; ++k) {
        sums[k] += mass(i) * acc(i, k);
        a2 += acc(i, k) * acc(i, k);
      }
      sums[3] += mass(i) * std::sqrt(a2);
      sums[4] += mass(i) * pot(i);
      sums[5] += 1;
    }
    MPI_Allreduce(MPI_IN_PLACE, sums, 6, MPI_DOUBLE, MPI_SUM, world.comm());

    double const momentum = std::sqrt(sums[0] * sums[0] + sums[1] * sums[1] + sums[2] * sums[2]) / sums[3];
    double const w = 0.5 * sums[4];
    double const w_plummer = -3.0 * M_PI / 32.0;
    double const w_error = std::abs(w - w_plummer) / std::abs(w_plummer);
    bool const ok = momentum < 1e-4 && w_error < 0.05 && sums[5] == double(options.n_total);
    if (world.is_root()) {
      std::printf("kfmm_install_app: %d ranks, N = %.0f, |Σ m a| / Σ m|a| = %.2e (limit 1e-4), "
                  "W = %.5f vs Plummer %.5f (relative %.2e, limit 5e-2): %s\n",
                  world.size(), sums[5], momentum, w, w_plummer, w_error, ok ? "ok" : "FAILED");
    }
    return ok ? 0 : 1;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "kfmm_install_app: error: %s\n", e.what());
    return 1;
  }
}
