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
          Observer const& observer)
      : context_(context), state_(state), config_(config), forces_(forces), observer_(observer) {}

  void start() {
    if (config_.integrator == IntegratorKind::LatticeDKD) quantize_to_lattice(state_.particles, config_.lattice);
    state_.time = config_.schedule.start_time;
    state_.step = 0;
    state_.dt = 0;
    state_.next_output = 0;
    state_.step_in_interval = 0;
    state_.centres = config_.external.initial_centres();
    compute_forces(state_.time);
    measure_now(0.0, state_.time, config_.centres.cadence != CentreCadence::None);
    state_.initial_energy = state_.diagnostics.total;
    state_.diagnostics.energy_error = 0;
    state_.started = true;
    notify(SimulationEvent::Start);
    notify(SimulationEvent::Output);
  }

  /// One global step; returns whether it reached an output time.
  bool step() {
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
  Observer const& observer_;
};

}  // namespace

SimulationStatus simulate(Context const& context, SimulationState& state, SimulationConfig const& config,
                          ForceFunction const& forces, Observer const& observer) {
  config.validate();
  if (!forces) fail("simulate() needs a force function");
  StopSignalGuard stop_signal;
  Stepper stepper(context, state, config, forces, observer);
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
                          ForceFunction const& forces, Observer const& observer) {
  SimulationState state;
  state.particles = particles;
  SimulationStatus const status = simulate(context, state, config, forces, observer);
  particles = state.particles;
  return status;
}

Observer diagnostics_observer(Context const& context, std::string const& path, long long resume_after_step) {
  auto log = std::make_shared<DiagnosticsLog>(context, path, resume_after_step);
  return [log](SimulationEvent event, SimulationState const& state) {
    if (event == SimulationEvent::Start || event == SimulationEvent::Step)
      log->write(state.step, state.dt, state.diagnostics);
  };
}

}  // namespace kfmm
