#pragma once
/// \file
/// \brief The time-integration loop: global steps, diagnostics, outputs, clean stops on signals.
#include <kfmm/comm/context.hpp>
#include <kfmm/core/particles.hpp>
#include <kfmm/core/units.hpp>
#include <kfmm/fmm/config.hpp>
#include <kfmm/integrate/active_forces.hpp>
#include <kfmm/integrate/block_steps.hpp>
#include <kfmm/integrate/centre_finding.hpp>
#include <kfmm/integrate/diagnostics.hpp>
#include <kfmm/integrate/external_field.hpp>
#include <kfmm/integrate/forces.hpp>
#include <kfmm/integrate/integrator.hpp>
#include <kfmm/integrate/schedule.hpp>

#include <functional>
#include <string>
#include <vector>

namespace kfmm {

/// \brief Where and how often a run writes its files (the writers are observers).
struct OutputSettings {
  std::string directory = "output";
  bool snapshots = true;                            ///< write a snapshot at every output time
  std::string diagnostics_file = "diagnostics.csv";  ///< inside `directory`; empty: none
  long long restart_every = 0;  ///< also write a restart every this many steps (0: only on a stop and at the end)
};

/// \brief Everything that decides how a run integrates (the initial conditions aside).
struct SimulationConfig {
  IntegratorKind integrator = IntegratorKind::DKD;
  LatticeSpacing lattice;  ///< LatticeDKD only
  Schedule schedule;
  FMMConfig fmm;           ///< forces; `softening_length` also sets the adaptive step; `G` also the external field's
  ExternalField external;  ///< added to the forces after every force call (empty: none)
  CentreFinding centres;   ///< centres in the diagnostics
  UnitSystem units;
  OutputSettings output;

  /// Throws kfmm::Error naming the bad setting.
  void validate() const;
};

/// \brief Seconds spent per phase on this rank (force includes the redistribution inside it).
struct PhaseTimes {
  double force = 0;
  double integration = 0;   ///< drifts, kicks, diagnostics
  double output = 0;        ///< observers (snapshots, restarts, logs)
};

/// \brief The complete state of a run: enough to continue it bit for bit (see io/restart.hpp).
struct SimulationState {
  Particles<MemorySpace> particles;
  /// Results of the latest force call, aligned with `particles`. KDK's next step starts with
  /// this acceleration; for DKD they belong to the mid-step positions except at outputs.
  ScalarView<double> potential;
  Vec3View<double> acceleration;
  /// φ_ext of each particle at the latest force call (aligned with `particles`; empty without
  /// an external field). `potential` is the self-gravity part only; `acceleration` has both.
  ScalarView<double> external_potential;
  /// Integrated external centres (SimulationConfig::external), the same on every rank.
  std::vector<CentreState> centres;
  /// Hierarchical steps: each particle's rung (aligned with `particles`; every rung is chosen
  /// afresh at each block start, so at a block end it is still the finished block's);
  /// `acceleration` holds each particle's latest force (inactive particles keep theirs).
  RungView rung;
  /// Hierarchical: ticks (block / 2^max_rungs) done in the current block; 0 at block ends, where
  /// every particle is synchronised. Always 0 in the other modes.
  long long block_tick = 0;
  BlockStatistics block;       ///< hierarchical: the block in progress
  BlockStatistics last_block;  ///< hierarchical: the last completed block
  bool started = false;         ///< false: simulate() begins with the initial force call
  double time = 0;
  long long step = 0;           ///< steps done (hierarchical: sub-steps, one force call each)
  double dt = 0;                ///< length of the last step (hierarchical: of the last sub-step)
  int next_output = 0;          ///< index into Schedule::output_times of the next output
  long long step_in_interval = 0;  ///< steps (hierarchical: blocks) done since the last output
  double initial_energy = 0;    ///< E₀ of the relative energy error
  double max_acceleration = 0;  ///< max |a| of the latest forces (sets the adaptive step)
  Diagnostics diagnostics;      ///< of the latest step
  PhaseTimes times;

  /// Number of the latest output (0 = initial state).
  int output_number() const { return next_output; }
  /// Whether every particle is at `time` (always outside a hierarchical block).
  bool synchronised() const { return block_tick == 0; }
};

/// What just happened when an observer is called.
enum class SimulationEvent {
  Start,   ///< initial forces and diagnostics are known (fresh runs only, not after a restart)
  Step,    ///< a step finished (hierarchical: a sub-step; synchronised() at block ends)
  Output,  ///< the state is at an output time (after Start and after the Step that reached it);
           ///< positions, velocities and forces are synchronised
  Stop,    ///< a signal asked to stop; the run returns after the observers
  Finish   ///< the last output time was reached
};

/// \brief Called on every rank for every event (collective calls inside are allowed).
using Observer = std::function<void(SimulationEvent, SimulationState const&)>;

/// Calls each observer in turn.
Observer combine(std::vector<Observer> observers);

/// How simulate() ended.
enum class SimulationStatus { Finished, Stopped };

/// \brief Integrates `state` to the last output time of `config.schedule` (collective).
///
/// A state with `started == false` gets its initial force call (and, for LatticeDKD, its
/// positions and velocities rounded to the lattice) first. Each step: DKD drift ½dt, force,
/// kick dt, drift ½dt (diagnostics at mid-step with the mid-step velocities v + ½dt·a);
/// KDK kick ½dt, drift dt, force, kick ½dt (diagnostics at the end). DKD and LatticeDKD make
/// one more force call at each output time so that outputs carry synchronised forces. A
/// SIGTERM or SIGINT on any rank ends the run after the current step (status Stopped, after a
/// Stop event, on which the restart observer writes the state). The external field is added
/// after each force call at the time of that call; its integrated centres drift and kick with
/// the particles. The centres of `config.centres` are found at the measurements of the rows
/// they belong to (DKD: at mid-step, or at the output time on output steps).
///
/// StepMode::Hierarchical (KDK only) uses `active_forces` for every force call, `forces` not at
/// all (it may be empty): see docs/simulation.md. At a block start every particle takes the rung
/// of its latest acceleration. Each sub-step: the particles whose step starts
/// get their opening half kick, everyone drifts to the next time at which a step ends, the
/// particles whose step ends there get forces (active_forces; the external field at that time),
/// their closing half kick and a new rung. Particles keep their order and rank for the whole run.
/// Diagnostics, centres and outputs happen at block ends only; a Stop may happen after any
/// sub-step (the restart continues bit for bit).
SimulationStatus simulate(Context const& context, SimulationState& state, SimulationConfig const& config,
                          ForceFunction const& forces, Observer const& observer,
                          ActiveForceFunction const& active_forces = {});

/// \brief Same, starting from `particles` (updated in place, in the order of the last force call).
SimulationStatus simulate(Context const& context, Particles<MemorySpace>& particles, SimulationConfig const& config,
                          ForceFunction const& forces, Observer const& observer,
                          ActiveForceFunction const& active_forces = {});

/// \brief Writes the diagnostics of every Start and synchronised Step event to `path` (CSV, rank 0).
/// `resume_after_step` ≥ 0 continues an existing file (see DiagnosticsLog).
Observer diagnostics_observer(Context const& context, std::string const& path, long long resume_after_step = -1);

}  // namespace kfmm
