#include <kfmm/integrate/simulation.hpp>

#include <kfmm/core/error.hpp>
#include <kfmm/core/fault_injection.hpp>
#include <kfmm/integrate/stop_signal.hpp>

#include <chrono>
#include <cmath>
#include <memory>

namespace kfmm {

void SimulationConfig::validate() const {
  schedule.validate();
  if (integrator == IntegratorKind::LatticeDKD &&
      !(lattice.dx > 0 && lattice.dv > 0 && std::isfinite(lattice.dx) && std::isfinite(lattice.dv)))
    fail("lattice spacings dx = {}, dv = {} must be finite and > 0", lattice.dx, lattice.dv);
  if (schedule.mode == StepMode::Adaptive && !(fmm.softening_length > 0))
    fail("the adaptive time step η·sqrt(ε/|a|max) needs a softening length ε > 0, got {}; set one or use a fixed "
         "step",
         fmm.softening_length);
  if (schedule.mode == StepMode::Hierarchical) {
    if (integrator != IntegratorKind::KDK)
      fail("hierarchical time steps are kick-drift-kick: set the integrator to kdk (got {})", to_string(integrator));
    if (!(fmm.softening_length > 0))
      fail("the hierarchical step criterion sqrt(2·eta·ε/|a|) needs a softening length ε > 0, got {}; set one",
           fmm.softening_length);
  }
  if (output.restart_every < 0) fail("restart cadence {} must be ≥ 0 steps", output.restart_every);
  external.validate();
  centres.validate();
  if (integrator == IntegratorKind::LatticeDKD && external.integrated_count() > 0)
    fail("{} external potentials have integrated centres, which lattice_dkd cannot keep on its lattice (they would "
         "break its exact reversibility); use dkd or kdk, or move the centres on lines (centre_motion: linear)",
         external.integrated_count());
}

Observer combine(std::vector<Observer> observers) {
  return [observers = std::move(observers)](SimulationEvent event, SimulationState const& state) {
    for (auto const& observer : observers)
      if (observer) observer(event, state);
  };
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// One run of simulate(): the pieces every step needs.
class Stepper {
 public:
  Stepper(Context const& context, SimulationState& state, SimulationConfig const& config, ForceFunction const& forces,
          ActiveForceFunction const& active_forces, Observer const& observer)
      : context_(context),
        state_(state),
        config_(config),
        forces_(forces),
        active_forces_(active_forces),
        observer_(observer),
        hierarchical_(config.schedule.mode == StepMode::Hierarchical) {}

  void start() {
    if (config_.integrator == IntegratorKind::LatticeDKD) quantize_to_lattice(state_.particles, config_.lattice);
    state_.time = config_.schedule.start_time;
    state_.step = 0;
    state_.dt = 0;
    state_.next_output = 0;
    state_.step_in_interval = 0;
    state_.block_tick = 0;
    state_.centres = config_.external.initial_centres();
    if (hierarchical_) {  // every particle active; rungs are chosen at the first block start
      state_.block = BlockStatistics{0, std::vector<long long>(config_.schedule.max_rungs + 1, 0)};
      state_.last_block = state_.block;
      prepare_views();
      timed_integration([&] { Kokkos::deep_copy(active_, std::uint8_t(1)); });
      compute_active_forces(state_.time);
    } else {
      compute_forces(state_.time);
    }
    measure_now(0.0, state_.time, config_.centres.cadence != CentreCadence::None);
    state_.initial_energy = state_.diagnostics.total;
    state_.diagnostics.energy_error = 0;
    state_.started = true;
    notify(SimulationEvent::Start);
    notify(SimulationEvent::Output);
  }

  /// One global step (hierarchical: one sub-step); returns whether it reached an output time.
  bool step() {
    if (hierarchical_) return hierarchical_step();
    auto const& schedule = config_.schedule;
    double const adaptive_dt =
        schedule.mode == StepMode::Adaptive
            ? (state_.max_acceleration > 0
                   ? schedule.eta * std::sqrt(config_.fmm.softening_length / state_.max_acceleration)
                   : schedule.dt_max)
            : 0.0;
    double const t0 = state_.time;
    double const t1 = schedule.step_end(state_.next_output, state_.step_in_interval, t0, adaptive_dt);
    double const dt = schedule.step_length(state_.next_output, t0, t1);
    auto& particles = state_.particles;
    auto& centres = state_.centres;
    bool const output = t1 == schedule.output_times[state_.next_output];
    bool const every_step = config_.centres.cadence == CentreCadence::Step;
    bool const at_output = output && config_.centres.cadence != CentreCadence::None;
    switch (config_.integrator) {
      case IntegratorKind::DKD:
        timed_integration([&] {
          drift(particles, 0.5 * dt);
          drift_centres(centres, 0.5 * dt);
        });
        compute_forces(t0 + 0.5 * dt);
        timed_integration([&] {
          measure_now(0.5 * dt, t0 + 0.5 * dt, every_step && !output);
          kick(particles, state_.acceleration, dt);
          kick_centres(centres, dt);
          drift(particles, 0.5 * dt);
          drift_centres(centres, 0.5 * dt);
        });
        break;
      case IntegratorKind::KDK:
        timed_integration([&] {
          kick(particles, state_.acceleration, 0.5 * dt);
          kick_centres(centres, 0.5 * dt);
          drift(particles, dt);
          drift_centres(centres, dt);
        });
        compute_forces(t1);
        timed_integration([&] {
          kick(particles, state_.acceleration, 0.5 * dt);
          kick_centres(centres, 0.5 * dt);
          measure_now(0.0, t1, every_step || at_output);
        });
        break;
      case IntegratorKind::LatticeDKD:  // no integrated centres (validate())
        timed_integration([&] { check_lattice_range(lattice_drift(particles, config_.lattice, dt)); });
        compute_forces(t0 + 0.5 * dt);
        timed_integration([&] {
          measure_now(0.5 * dt, t0 + 0.5 * dt, every_step && !output);
          lattice_kick(particles, state_.acceleration, config_.lattice, dt);
          check_lattice_range(lattice_drift(particles, config_.lattice, dt));
        });
        break;
    }
    state_.time = t1;
    state_.dt = dt;
    ++state_.step;
    ++state_.step_in_interval;
    if (output) {
      if (config_.integrator != IntegratorKind::KDK) {
        compute_forces(t1);
        timed_integration([&] { measure_now(0.0, t1, at_output); });
      }
      ++state_.next_output;
      state_.step_in_interval = 0;
    }
    state_.diagnostics.energy_error = (state_.diagnostics.total - state_.initial_energy) /
                                      std::fabs(state_.initial_energy);
    return output;
  }

  bool finished() const {
    return state_.next_output >= static_cast<int>(config_.schedule.output_times.size());
  }

  void notify(SimulationEvent event) {
    if (!observer_) return;
    auto const start = Clock::now();
    observer_(event, state_);
    state_.times.output += seconds_since(start);
  }

 private:
  /// One sub-step of a block (see simulate()); returns whether it reached an output time.
  bool hierarchical_step() {
    auto& s = state_;
    auto const& schedule = config_.schedule;
    auto& particles = s.particles;
    std::size_t const n = particles.num;
    int const max_rungs = schedule.max_rungs;
    long long const ticks = 1LL << max_rungs;
    double const length = schedule.block_length(s.next_output);
    double const tick_length = length / static_cast<double>(ticks);  // exact: a power of two
    prepare_views();
    if (s.block_tick == 0) {
      // A block starts: every particle is synchronised and takes the rung its latest force asks
      // for, free of the previous block's. (Here rather than at the previous block end, so that
      // a run continued with more outputs takes the next interval's block length.)
      s.block = BlockStatistics{0, std::vector<long long>(max_rungs + 1, 0)};
      timed_integration([&] {
        Kokkos::deep_copy(active_, std::uint8_t(1));
        assign_rungs(context_, particles, s.acceleration, active_, 0, criterion(s.next_output), s.rung);
      });
    }
    // Who starts a step now, and the deepest occupied rung: the next time at which a step ends.
    std::vector<long long> on_rung, starting;
    timed_integration([&] {
      mark_active(s.rung, n, s.block_tick, max_rungs, active_);
      rung_histogram(context_, s.rung, active_, n, max_rungs, on_rung, starting);
    });
    int deepest = 0;
    for (int r = 0; r <= max_rungs; ++r)
      if (on_rung[r] > 0) deepest = r;
    long long const next_tick = next_boundary(s.block_tick, deepest, max_rungs);
    bool const block_end = next_tick == ticks;
    // Drifts of (ticks) · tick_length: a whole block is exactly `length`, as a global step's dt.
    double const gap = static_cast<double>(next_tick - s.block_tick) * tick_length;
    double const block_start =
        s.step_in_interval == 0 ? schedule.interval_start(s.next_output)
                                : schedule.step_end(s.next_output, s.step_in_interval - 1, s.time, 0.0);
    double const t1 = block_end ? schedule.step_end(s.next_output, s.step_in_interval, s.time, 0.0)
                                : block_start + static_cast<double>(next_tick) * tick_length;
    s.block.force_calls += 1;
    for (int r = 0; r <= max_rungs; ++r) s.block.steps_per_rung[r] += starting[r];
    auto& centres = s.centres;
    timed_integration([&] {
      half_kick_active(particles, s.acceleration, s.rung, active_, length);  // opening kicks
      kick_centres(centres, 0.5 * gap);
      drift(particles, gap);
      drift_centres(centres, gap);
      mark_active(s.rung, n, next_tick, max_rungs, active_);  // whose steps end at t1
    });
    compute_active_forces(t1);
    timed_integration([&] {
      half_kick_active(particles, s.acceleration, s.rung, active_, length);  // closing kicks
      kick_centres(centres, 0.5 * gap);
      if (!block_end) assign_rungs(context_, particles, s.acceleration, active_, next_tick, criterion(s.next_output), s.rung);
    });
    s.time = t1;
    s.dt = gap;
    ++s.step;
    s.block_tick = block_end ? 0 : next_tick;
    if (!block_end) return false;

    s.last_block = s.block;
    ++s.step_in_interval;
    bool const output = s.step_in_interval == schedule.blocks_in_interval(s.next_output);
    bool const find_centres = config_.centres.cadence == CentreCadence::Step ||
                              (output && config_.centres.cadence != CentreCadence::None);
    timed_integration([&] { measure_now(0.0, t1, find_centres); });
    if (output) {
      ++s.next_output;
      s.step_in_interval = 0;
    }
    s.diagnostics.energy_error = (s.diagnostics.total - s.initial_energy) / std::fabs(s.initial_energy);
    return output;
  }

  RungCriterion criterion(int next_output) const {
    auto const& schedule = config_.schedule;
    return {schedule.eta, config_.fmm.softening_length, schedule.block_length(next_output), schedule.dt_min,
            schedule.max_rungs};
  }

  /// Hierarchical: force rows and flags for every particle (a restart brings none of the potentials).
  void prepare_views() {
    auto& s = state_;
    std::size_t const n = s.particles.num;
    if (s.block_tick != 0 && s.rung.extent(0) < n)
      fail("hierarchical steps: the state has {} rungs for {} particles; continue from a restart written with "
           "time.step_mode hierarchical",
           s.rung.extent(0), n);
    if (s.potential.extent(0) < n) Kokkos::resize(s.potential, n);
    if (s.acceleration.extent(0) < n) Kokkos::resize(s.acceleration, n);
    if (active_.extent(0) < n) active_ = ActiveFlags("kfmm::integrate::active", n);
  }

  /// Hierarchical: forces on the particles flagged in active_ at `time`, then the external field.
  void compute_active_forces(double time) {
    auto const start = Clock::now();
    active_forces_(state_.particles, active_, state_.potential, state_.acceleration);
    state_.times.force += seconds_since(start);
    if (!config_.external.empty())
      timed_integration([&] {
        config_.external.apply(context_, time, config_.fmm.G, state_.centres, state_.particles,
                               state_.external_potential, state_.acceleration, active_);
      });
  }

  /// Forces at `time` (the particles' time): self-gravity, then the external field.
  void compute_forces(double time) {
    auto const start = Clock::now();
    forces_(state_.particles, state_.potential, state_.acceleration);
    state_.times.force += seconds_since(start);
    if (!config_.external.empty())
      timed_integration([&] {
        config_.external.apply(context_, time, config_.fmm.G, state_.centres, state_.particles,
                               state_.external_potential, state_.acceleration);
      });
  }

  template <class Body>
  void timed_integration(Body&& body) {
    auto const start = Clock::now();
    body();
    Kokkos::fence();
    state_.times.integration += seconds_since(start);
  }

  /// The diagnostics at `time` (velocities v + kick_factor·a), with the centres when `find_centres`.
  void measure_now(double kick_factor, double time, bool find_centres) {
    auto& d = state_.diagnostics;
    d = measure(context_, state_.particles, state_.potential, state_.acceleration, kick_factor,
                config_.external.empty() ? ScalarView<double>() : state_.external_potential);
    if (!state_.centres.empty()) {
      d.centres = config_.external.centres_energy(time, config_.fmm.G, state_.centres, kick_factor);
      d.total += d.centres;
    }
    d.time = time;
    state_.max_acceleration = d.max_acceleration;
    if (find_centres) {
      auto const minimum = potential_minimum_centre(context_, state_.particles, state_.potential);
      auto const spheres = shrinking_spheres_centre(context_, state_.particles, config_.centres.shrink_factor,
                                                    config_.centres.min_particles);
      d.has_centres = minimum.found;
      d.centre_potential_minimum = minimum.position;
      d.centre_shrinking_spheres = spheres.centre;
    }
  }

  void check_lattice_range(double largest_coordinate) const {
    std::string error;
    if (!(largest_coordinate <= lattice_coordinate_limit))
      error = fmt::format("a lattice coordinate reached {:g} lattice units (limit 2^50 = {:g}) at step {}; use a "
                          "coarser lattice (integrator lattice_dx = {:g})",
                          largest_coordinate, lattice_coordinate_limit, state_.step + 1, config_.lattice.dx);
    agree_on_error(context_, error);
  }

  Context const& context_;
  SimulationState& state_;
  SimulationConfig const& config_;
  ForceFunction const& forces_;
  ActiveForceFunction const& active_forces_;
  Observer const& observer_;
  bool const hierarchical_;
  ActiveFlags active_;  ///< hierarchical: the particles of the current force call / kick
};

}  // namespace

SimulationStatus simulate(Context const& context, SimulationState& state, SimulationConfig const& config,
                          ForceFunction const& forces, Observer const& observer,
                          ActiveForceFunction const& active_forces) {
  config.validate();
  if (config.schedule.mode == StepMode::Hierarchical) {
    if (!active_forces)
      fail("hierarchical time steps need an active-particle force function (fmm_active_forces or "
           "direct_active_forces)");
  } else if (!forces) {
    fail("simulate() needs a force function");
  }
  StopSignalGuard stop_signal;
  Stepper stepper(context, state, config, forces, active_forces, observer);
  if (!state.started) stepper.start();
  while (!stepper.finished()) {
    bool const output = stepper.step();
    fault_injection::point("step");
    stepper.notify(SimulationEvent::Step);
    if (output) stepper.notify(SimulationEvent::Output);
    if (StopSignalGuard::requested_anywhere(context) && !stepper.finished()) {
      stepper.notify(SimulationEvent::Stop);
      return SimulationStatus::Stopped;
    }
  }
  stepper.notify(SimulationEvent::Finish);
  return SimulationStatus::Finished;
}

SimulationStatus simulate(Context const& context, Particles<MemorySpace>& particles, SimulationConfig const& config,
                          ForceFunction const& forces, Observer const& observer,
                          ActiveForceFunction const& active_forces) {
  SimulationState state;
  state.particles = particles;
  SimulationStatus const status = simulate(context, state, config, forces, observer, active_forces);
  particles = state.particles;
  return status;
}

Observer diagnostics_observer(Context const& context, std::string const& path, long long resume_after_step) {
  auto log = std::make_shared<DiagnosticsLog>(context, path, resume_after_step);
  return [log](SimulationEvent event, SimulationState const& state) {
    if (event == SimulationEvent::Start || (event == SimulationEvent::Step && state.synchronised()))
      log->write(state.step, state.dt, state.diagnostics);
  };
}

}  // namespace kfmm
