#include "bench_active.hpp"

#include <kfmm/core/error.hpp>
#include <kfmm/core/kokkos_compat.hpp>
#include <kfmm/fmm/solver.hpp>

#include <kfmm/core/format.hpp>

#include <cmath>
#include <vector>

namespace kfmm::app {

namespace {

// The particles with |a| ≥ threshold (all ranks).
std::uint64_t count_at_least(Context const& context, ScalarView<double> const& magnitude, std::size_t n,
                             double threshold) {
  std::uint64_t local = 0, global = 0;
  Kokkos::parallel_reduce(
      "kfmm::bench::count_at_least", Kokkos::RangePolicy<ExecutionSpace>(0, n),
      KOKKOS_LAMBDA(std::size_t i, std::uint64_t & sum) { sum += magnitude(i) >= threshold ? 1 : 0; }, local);
  MPI_Allreduce(&local, &global, 1, MPI_UINT64_T, MPI_SUM, context.comm());
  return global;
}

}  // namespace

// Public for nvcc (device lambdas): the flags of the picked particles.
ActiveFlags pick_active(Context const& context, Particles<MemorySpace> const& particles,
                        Vec3View<double> const& acceleration, ActiveBenchOptions const& options) {
  std::size_t const n = particles.num;
  ActiveFlags active("kfmm::bench::active", n);
  if (options.pick == "random") {
    auto const id = particles.id;
    double const fraction = options.fraction;
    Kokkos::parallel_for(
        "kfmm::bench::pick_random", Kokkos::RangePolicy<ExecutionSpace>(0, n), KOKKOS_LAMBDA(std::size_t i) {
          std::uint64_t h = id(i) * 0x9E3779B97F4A7C15ull;  // a fixed hash of the id
          h ^= h >> 31;
          h *= 0xBF58476D1CE4E5B9ull;
          h ^= h >> 29;
          active(i) = double(h >> 11) * 0x1.0p-53 < fraction ? 1 : 0;
        });
    return active;
  }
  // The largest |a|: a global threshold by bisection on log |a| (counts by Allreduce).
  ScalarView<double> magnitude("kfmm::bench::magnitude", n);
  Kokkos::parallel_for(
      "kfmm::bench::magnitude", Kokkos::RangePolicy<ExecutionSpace>(0, n), KOKKOS_LAMBDA(std::size_t i) {
        magnitude(i) = compat::math::sqrt(acceleration(i, 0) * acceleration(i, 0) + acceleration(i, 1) * acceleration(i, 1) +
                                 acceleration(i, 2) * acceleration(i, 2));
      });
  double const wanted = options.fraction * double(particles.num_total);
  double low = -300, high = 300;  // log10 |a|
  for (int iteration = 0; iteration < 80; ++iteration) {
    double const middle = 0.5 * (low + high);
    if (double(count_at_least(context, magnitude, n, std::pow(10.0, middle))) > wanted)
      low = middle;
    else
      high = middle;
  }
  double const threshold = std::pow(10.0, high);
  Kokkos::parallel_for(
      "kfmm::bench::pick_largest", Kokkos::RangePolicy<ExecutionSpace>(0, n),
      KOKKOS_LAMBDA(std::size_t i) { active(i) = magnitude(i) >= threshold ? 1 : 0; });
  return active;
}

// x += v dt for every particle (what an integrator does before each force evaluation).
void drift_all(Particles<MemorySpace> const& particles, double dt) {
  auto pos = particles.pos;
  auto const vel = particles.vel;
  Kokkos::parallel_for(
      "kfmm::bench::drift", Kokkos::RangePolicy<ExecutionSpace>(0, particles.num), KOKKOS_LAMBDA(std::size_t i) {
        for (int d = 0; d < 3; ++d) pos(i, d) += vel(i, d) * dt;
      });
}

void bench_active_forces(Environment const& environment, Particles<MemorySpace>& particles, FMMConfig const& config,
                         ActiveBenchOptions const& options, std::string const& source) {
  Context const& context = environment.world();
  if (!(options.fraction > 0 && options.fraction <= 1))
    fail("--active-fraction {} must be in (0, 1]", options.fraction);
  if (options.pick != "acceleration" && options.pick != "random")
    fail("--active-pick '{}' must be acceleration or random", options.pick);
  ForceSolver solver(context, config);
  ScalarView<double> potential("kfmm::bench::potential", particles.num);
  Vec3View<double> acceleration("kfmm::bench::acceleration", particles.num);
  ActiveFlags all("kfmm::bench::all", particles.num);
  Kokkos::deep_copy(all, 1);
  solver.compute_active(particles, all, potential, acceleration);  // warm-up, and |a| for the pick
  ActiveFlags const active = pick_active(context, particles, acceleration, options);
  std::uint64_t local_active = 0, active_total = 0;
  {
    auto const flags = active;
    Kokkos::parallel_reduce(
        "kfmm::bench::count_active", Kokkos::RangePolicy<ExecutionSpace>(0, particles.num),
        KOKKOS_LAMBDA(std::size_t i, std::uint64_t & sum) { sum += flags(i) ? 1 : 0; }, local_active);
    MPI_Allreduce(&local_active, &active_total, 1, MPI_UINT64_T, MPI_SUM, context.comm());
  }
  double const dt = 1e-4;
  double seconds[2] = {0, 0};  // full, active
  std::vector<std::pair<std::string, double>> phases;
  for (int r = 0; r < options.repeat; ++r) {
    for (int kind = 0; kind < 2; ++kind) {
      MPI_Barrier(context.comm());
      Kokkos::Timer timer;
      drift_all(particles, dt);
      solver.compute_active(particles, kind == 0 ? all : active, potential, acceleration);
      Kokkos::fence();
      seconds[kind] += timer.seconds();
      if (kind == 1) {
        if (phases.empty()) phases = solver.stats().phases;
        else
          for (std::size_t p = 0; p < phases.size() && p < solver.stats().phases.size(); ++p)
            phases[p].second += solver.stats().phases[p].second;
      }
    }
  }
  double mean[2] = {seconds[0] / options.repeat, seconds[1] / options.repeat}, slowest[2];
  MPI_Allreduce(mean, slowest, 2, MPI_DOUBLE, MPI_MAX, context.comm());
  if (!context.is_root()) return;
  double const ratio = slowest[1] / slowest[0];
  if (options.json) {
    std::string phase_json;
    for (auto const& [name, total] : phases)
      phase_json += fmt::format("{}\"{}\": {:.6g}", phase_json.empty() ? "" : ", ", name, total / options.repeat);
    fmt::print("{{\"source\": \"{}\", \"n\": {}, \"ranks\": {}, \"threads_per_rank\": {}, \"active\": {}, "
               "\"pick\": \"{}\", \"full_seconds\": {:.6g}, \"active_seconds\": {:.6g}, \"ratio\": {:.4g}, "
               "\"active_phases_rank0\": {{{}}}}}\n",
               source, particles.num_total, context.size(), environment.threads(), active_total, options.pick,
               slowest[0], slowest[1], ratio, phase_json);
    return;
  }
  fmt::print("kfmm bench: {} particles ({}), {} rank(s) × {} thread(s); p = {}, θ = {}, leaf ≤ {}, {}; active: {} "
             "({:.3g} %, {})\n",
             particles.num_total, source, context.size(), environment.threads(), config.order, config.theta,
             config.leaf_size, to_string(config.precision), active_total, 100.0 * active_total / particles.num_total,
             options.pick == "random" ? "random" : "largest |a|");
  fmt::print("  drift + full evaluation   {:.4f} s (mean of {}, slowest rank)\n", slowest[0], options.repeat);
  fmt::print("  drift + active evaluation {:.4f} s = {:.2f} % of the full one\n", slowest[1], 100 * ratio);
  fmt::print("  active call phases (rank 0):\n");
  for (auto const& [name, total] : phases)
    fmt::print("    {:<9} {:8.4f} s\n", name, total / options.repeat);
}

}  // namespace kfmm::app
