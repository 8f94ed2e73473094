// `kfmm run`: integrate a run file's system in time, writing snapshots, diagnostics, restarts.
#include "commands.hpp"
#include "fof_output.hpp"

#include <kfmm/comm/initial_conditions.hpp>
#include <kfmm/core/error.hpp>
#include <kfmm/fmm/solver.hpp>
#include <kfmm/integrate/simulation.hpp>
#include <kfmm/io/fof_file.hpp>
#include <kfmm/io/particle_file.hpp>
#include <kfmm/neighbors/fof.hpp>
#include <kfmm/neighbors/fof_catalogue.hpp>
#include <kfmm/io/restart.hpp>
#include <kfmm/io/run_file.hpp>

#include <kfmm/core/format.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kfmm::app {

namespace {

struct RunOptions {
  std::string run_file;
  std::string output_directory;
  std::vector<std::string> overrides;  ///< --set key=value
  bool restart = false;
  bool print_default = false;
  bool print_keys_markdown = false;
};

using Clock = std::chrono::steady_clock;

SnapshotHeader snapshot_header(RunSettings const& settings, Context const& context, double time) {
  auto const& simulation = settings.simulation;
  SnapshotHeader header;
  header.time = time;
  header.units = simulation.units;
  header.parameters = {
      {"Integrator", to_string(simulation.integrator)},
      {"ForceMethod", std::string(settings.force_method == ForceMethod::FMM ? "fmm" : "direct")},
      {"ExpansionOrder", std::int64_t(simulation.fmm.order)},
      {"OpeningAngle", simulation.fmm.theta},
      {"OpeningCriterion", to_string(simulation.fmm.opening)},
      {"OpeningTolerance", simulation.fmm.tolerance},
      {"Softening", to_string(simulation.fmm.softening)},
      {"SofteningLength", simulation.fmm.softening_length},
      {"RunFile", settings.source},
  };
  header.config = {{"Ranks", std::int64_t(context.size())}};
  return header;
}

/// Writes a snapshot (with potential and acceleration) at every Output event.
Observer snapshot_observer(Context const& context, RunSettings const& settings) {
  return [&context, &settings](SimulationEvent event, SimulationState const& state) {
    if (event != SimulationEvent::Output) return;
    auto const& output = settings.simulation.output;
    auto const host = to_host(state.particles);
    ForceFields fields;
    auto const valid = Kokkos::make_pair(std::size_t(0), host.num);
    fields.potential = ScalarView<double, HostSpace>("kfmm::app::run::potential", host.num);
    fields.acceleration = Vec3View<double, HostSpace>("kfmm::app::run::acceleration", host.num);
    Kokkos::deep_copy(fields.potential, Kokkos::subview(state.potential, valid));
    // GADGET-4's convention: with an external field the stored potential is the total one.
    if (!settings.simulation.external.empty()) {
      ScalarView<double, HostSpace> external("kfmm::app::run::external_potential", host.num);
      Kokkos::deep_copy(external, Kokkos::subview(state.external_potential, valid));
      for (std::size_t i = 0; i < host.num; ++i) fields.potential(i) += external(i);
    }
    Kokkos::deep_copy(fields.acceleration, Kokkos::subview(state.acceleration, valid, Kokkos::ALL));
    auto const& options = settings.snapshot_options;
    std::string const path = snapshot_path(output.directory, state.output_number(), options.layout);
    auto const start = Clock::now();
    write_particles(context, path, host, snapshot_header(settings, context, state.time), options, &fields);
    double const seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (context.is_root()) {
      // Payload: coordinates, velocities, accelerations, masses and potentials in the stored
      // precision plus 8-byte ids, for every particle.
      double const value_bytes = options.precision == Precision::Double ? 8 : 4;
      double const megabytes = static_cast<double>(state.particles.num_total) * (11 * value_bytes + 8) / 1e6;
      fmt::print("  wrote {} ({:.1f} MB of particle data, compression {}) in {:.2f} s: {:.0f} MB/s\n", path, megabytes,
                 options.compression, seconds, seconds > 0 ? megabytes / seconds : 0.0);
    }
  };
}

/// Writes a friends-of-friends catalogue fof_tab_NNN.hdf5 at every Output event (output.fof).
Observer fof_observer(Context const& context, RunSettings const& settings) {
  return [&context, &settings](SimulationEvent event, SimulationState const& state) {
    if (event != SimulationEvent::Output) return;
    auto const start = Clock::now();
    FoFOptions fof;
    fof.b = settings.fof.b;
    auto const result = friends_of_friends(context, state.particles, fof);
    FoFCatalogueOptions options;
    options.min_members = settings.fof.min_members;
    auto const all = gather_catalogue(context, fof_catalogue(context, state.particles, result.label, options));
    std::string const path = fmt::format("{}/fof_tab_{:03d}.hdf5", settings.simulation.output.directory,
                                         state.output_number());
    write_fof_table(context, path,
                    fof_table(all, state.time, 0, 0, result.linking_length, settings.fof.b, settings.fof.min_members));
    double const seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (context.is_root())
      fmt::print("  wrote {} ({} groups with >= {} members, largest {}) in {:.2f} s\n", path, all.num_total,
                 settings.fof.min_members, all.num > 0 ? all.length(0) : 0, seconds);
  };
}

/// One line per output on rank 0: step, time, dt, energy error, speed, elapsed time and ETA.
Observer progress_observer(Context const& context, SimulationConfig const& config, long long first_step,
                           double first_time) {
  auto const start = Clock::now();
  return [&context, &config, start, first_step, first_time](SimulationEvent event, SimulationState const& state) {
    if (event != SimulationEvent::Output || !context.is_root()) return;
    double const elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    double const steps = static_cast<double>(state.step - first_step);
    double const rate = elapsed > 0 ? steps * static_cast<double>(state.particles.num_total) / elapsed : 0;
    double const end = config.schedule.output_times.back();
    double const done = state.time - first_time;
    double const eta = done > 0 ? elapsed * (end - state.time) / done : 0;
    fmt::print("output {:3d}  step {:6d}  t {:<10.5g} dt {:<10.4g} dE/E {:+.3e}  {:.3e} particles/s  elapsed {:7.1f} s"
               "  ETA {:7.1f} s\n",
               state.output_number(), state.step, state.time, state.dt, state.diagnostics.energy_error, rate, elapsed,
               eta);
    std::fflush(stdout);
  };
}

/// Hierarchical steps: one line per block on rank 0 with its force calls and the particle steps
/// taken on each rung (GADGET's per-bin view: rung r takes 2^r steps per block).
Observer block_observer(Context const& context) {
  return [&context](SimulationEvent event, SimulationState const& state) {
    if (event != SimulationEvent::Step || !state.synchronised() || !context.is_root()) return;
    fmt::print("  block ends at t {:<10.5g} {:5d} force calls, particle steps per rung {}\n", state.time,
               state.last_block.force_calls, format_rung_counts(state.last_block.steps_per_rung));
  };
}

/// The domain phase of the FMM calls (this rank): all, and the calls after the first with their
/// whole force time.
struct DomainTimes {
  double total = 0;
  double later = 0, later_force = 0;
  long long calls = 0;

  void add(ForceStats const& stats) {
    double const t = stats.seconds("domain");
    total += t;
    if (calls++ > 0) {
      later += t;
      later_force += stats.total_seconds;
    }
  }
};

/// The end-of-run report: time per step and per phase (mean over ranks) and the share of the
/// run spent outside the force calculation.
void print_summary(Context const& context, SimulationState const& state, DomainTimes const& domain, double setup,
                   double elapsed, long long steps, SimulationStatus status) {
  double local[6] = {state.times.force, domain.total, state.times.integration, state.times.output, domain.later,
                     domain.later_force};
  double mean[6];
  MPI_Reduce(local, mean, 6, MPI_DOUBLE, MPI_SUM, 0, context.comm());
  if (!context.is_root()) return;
  for (double& t : mean) t /= context.size();
  auto const share = [elapsed](double t) { return elapsed > 0 ? 100 * t / elapsed : 0.0; };
  double const per_step = steps > 0 ? elapsed / static_cast<double>(steps) : 0.0;
  fmt::print("\n{} after {} steps at t = {:.6g} in {:.2f} s: {:.3f} s per step, {:.3e} particle steps/s\n",
             status == SimulationStatus::Finished ? "finished" : "stopped (restart written)", steps, state.time, elapsed,
             per_step, per_step > 0 ? static_cast<double>(state.particles.num_total) / per_step : 0.0);
  fmt::print("time per phase (mean over ranks; setup before the run {:.2f} s):\n", setup);
  fmt::print("  force        {:8.2f} s {:5.1f} %  of which domain decomposition {:.2f} s ({:.1f} %)\n", mean[0],
             share(mean[0]), mean[1], share(mean[1]));
  // The first call sorts particles in file order and has no domains to start from; the later
  // ones are the steady state of a run.
  if (context.size() > 1 && domain.calls > 1 && mean[5] > 0)
    fmt::print("  {:13}after the first force call: domain decomposition {:.4f} s per call, {:.1f} % of their force "
               "time ({} calls)\n",
               "", mean[4] / (domain.calls - 1), 100 * mean[4] / mean[5], domain.calls - 1);
  fmt::print("  integration  {:8.2f} s {:5.1f} %  drifts, kicks, diagnostics\n", mean[2], share(mean[2]));
  fmt::print("  I/O          {:8.2f} s {:5.1f} %  snapshots, restarts, logs\n", mean[3], share(mean[3]));
  fmt::print("  outside the force calculation: {:.1f} % of the run\n", share(elapsed - mean[0]));
  fmt::print("relative energy error at the end: {:+.3e}\n", state.diagnostics.energy_error);
}

void run(Environment& environment, RunOptions const& options) {
  Context const& context = environment.world();
  auto const setup_start = Clock::now();
  if (options.print_default || options.print_keys_markdown) {
    if (context.is_root()) fmt::print("{}", options.print_default ? default_run_file() : run_file_keys_markdown());
    return;
  }
  RunSettings settings;
  collectively(context, [&] {
    settings = options.run_file.empty() ? parse_run_text("", "built-in default", options.overrides)
                                        : read_run_file(options.run_file, options.overrides);
    if (!options.output_directory.empty()) settings.simulation.output.directory = options.output_directory;
  });
  auto const& config = settings.simulation;
  auto const& output = config.output;
  collectively(context, [&] {
    if (context.is_root()) std::filesystem::create_directories(output.directory);
  });
  std::string const restart_path = output.directory + "/restart";

  SnapshotHeader ic_header;
  Particles<HostSpace> initial;
  if (!options.restart)
    initial = settings.ic_file.empty() ? make_initial_conditions(context, settings.ic)
                                       : read_particles(context, settings.ic_file, &ic_header, nullptr,
                                                        settings.ic_duplicate_ids);
  else if (settings.units_from_ic_file)  // only the header: the particles come from the restart
    read_particles(context, settings.ic_file, &ic_header, nullptr, DuplicateIdPolicy::Keep);
  if (settings.units_from_ic_file) {
    settings.simulation.units = ic_header.units;
    settings.simulation.fmm.G = ic_header.units.G;
  }
  // ic.mass, ic.scale_radius, ic.position, ic.velocity: in the run's units, hence after they are known.
  if (!options.restart && (settings.ic_placement.moves() || settings.ic_placement.scales()))
    collectively(context, [&] { place_model(initial, settings.ic_placement, settings.simulation.fmm.G); });

  std::optional<ForceSolver> solver;
  ForceFunction forces;
  ActiveForceFunction active_forces;  // hierarchical steps
  DomainTimes domain;
  if (settings.force_method == ForceMethod::FMM) {
    solver.emplace(context, config.fmm);
    forces = [&solver, &domain, fmm = fmm_forces(*solver)](Particles<MemorySpace>& particles,
                                                                   ScalarView<double>& potential,
                                                                   Vec3View<double>& acceleration) {
      fmm(particles, potential, acceleration);
      domain.add(solver->stats());
    };
    active_forces = [&solver, &domain, fmm = fmm_active_forces(*solver)](
                        Particles<MemorySpace> const& particles, ActiveFlags const& active,
                        ScalarView<double>& potential, Vec3View<double>& acceleration) {
      fmm(particles, active, potential, acceleration);
      domain.add(solver->stats());
    };
  } else {
    forces = direct_forces(context, config.fmm.softening, config.fmm.softening_length, config.fmm.G);
    active_forces = direct_active_forces(context, config.fmm.softening, config.fmm.softening_length, config.fmm.G);
  }
  ForceSolver* const fmm_solver = solver ? &*solver : nullptr;

  SimulationState state;
  if (options.restart)
    state = read_restart(context, restart_path, config, fmm_solver);  // with the saved decomposition weights
  else
    state.particles = to_device(initial);
  if (context.is_root())
    fmt::print("kfmm run: {} particles, {} on {} ranks ({}), {} integrator, {} units (G = {:.6g}), {} outputs to {} "
               "from '{}'\n",
               state.particles.num_total, settings.force_method == ForceMethod::FMM ? "FMM" : "direct summation",
               context.size(), environment.summary(), to_string(config.integrator), config.units.name, config.fmm.G,
               config.schedule.output_times.size(), output.directory, settings.source);

  std::vector<Observer> observers;
  if (!output.diagnostics_file.empty())
    observers.push_back(diagnostics_observer(context, output.directory + "/" + output.diagnostics_file,
                                             options.restart ? state.step : -1));
  // The restart after the snapshot: at an output step it must not get ahead of the snapshot.
  if (output.snapshots) observers.push_back(snapshot_observer(context, settings));
  if (settings.fof.enabled) observers.push_back(fof_observer(context, settings));
  observers.push_back(restart_observer(context, restart_path, config, output.restart_every, fmm_solver));
  observers.push_back(progress_observer(context, config, state.step, state.started ? state.time : config.schedule.start_time));
  if (config.schedule.mode == StepMode::Hierarchical) observers.push_back(block_observer(context));

  long long const first_step = state.step;
  auto const start = Clock::now();
  double const setup = std::chrono::duration<double>(start - setup_start).count();
  SimulationStatus const status =
      simulate(context, state, config, forces, combine(std::move(observers)), active_forces);
  double const elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  print_summary(context, state, domain, setup, elapsed, state.step - first_step, status);
}

}  // namespace

void add_run_command(CLI::App& app, Environment& environment) {
  auto options = std::make_shared<RunOptions>();
  auto* command = app.add_subcommand("run", "Integrate an N-body system in time (YAML run file; none: the built-in "
                                            "default run: 1e5 particles in 20 Gaussian clumps)");
  command->add_option("run_file", options->run_file, "YAML run file (`kfmm run --print-default` shows every key)");
  command->add_option("-o,--output", options->output_directory, "output directory (overrides output.directory)");
  command->add_option("--set", options->overrides,
                      "key=value: set a run-file key over the file's value (repeatable; e.g. --set ic.n=1000 --set "
                      "time.end=0.1)")
      ->allow_extra_args(false);  // one key=value per --set: a run file after it stays the run file
  command->add_flag("--restart", options->restart, "continue from the restart in the output directory");
  command->add_flag("--print-default", options->print_default, "print the default run file (all keys) and exit");
  command->add_flag("--print-keys-markdown", options->print_keys_markdown,
                    "print the table of run-file keys as Markdown (README) and exit");
  command->callback([options, &environment] { run(environment, *options); });
}

}  // namespace kfmm::app
