#pragma once
/// \file
/// \brief Restart files: the complete state of a run, to continue it bit for bit.
#include <kfmm/comm/context.hpp>
#include <kfmm/fmm/solver.hpp>
#include <kfmm/integrate/simulation.hpp>

#include <string>

namespace kfmm {

/// \brief Writes `state` to the directory `path`, one HDF5 file per rank (`rank_NNNN.h5`:
/// particles in their current local order, time, step, dt, output position, E₀, max |a|,
/// the integrator, for KDK the stored acceleration, for hierarchical steps each particle's rung,
/// the position in the block and the block's statistics, and, given the run's `solver`, its cost
/// weights, so that the continued run keeps the same domain decomposition). LatticeDKD's integer coordinates
/// are the stored positions and velocities divided by dx, dv (exact, see LatticeSpacing).
///
/// The files go to `path.tmp` first; once every rank wrote its file, rank 0 swaps the
/// directories (`path` → `path.old`, `path.tmp` → `path`, then removes `path.old`), so a crash
/// at any moment leaves a complete restart under `path` or `path.old` (`path` only ever appears
/// complete; `path.old` is removed only once a new `path` is in place; a stale `path.tmp` is
/// ignored and replaced by the next write). Collective; errors are agreed across ranks and
/// thrown as kfmm::Error.
void write_restart(Context const& context, std::string const& path, SimulationState const& state,
                   SimulationConfig const& config, ForceSolver const* solver = nullptr);

/// \brief Reads a restart written by the same number of ranks (`path`, or `path.old` when a
/// crash interrupted the directory swap; `path` when both exist: it is the newer, and complete).
/// Throws kfmm::Error (on every rank) naming the file for a missing restart, another rank count,
/// another integrator, another step mode (hierarchical or not), or a schedule that the state does
/// not fit (its time beyond the next output; inside a hierarchical block, another max_rungs or
/// block length). Given a `solver`, hands it the saved cost
/// weights (if the restart has them) for its next decomposition. Collective.
SimulationState read_restart(Context const& context, std::string const& path, SimulationConfig const& config,
                             ForceSolver* solver = nullptr);

/// Whether a restart (complete, at `path` or `path.old`) exists; the same answer on every rank.
bool restart_exists(Context const& context, std::string const& path);

/// \brief Writes a restart to `path` every `every_steps` steps (0: never on a schedule), at a
/// Stop and at the Finish of a run; with the cost weights of `solver` when given. At a step that
/// reaches an output the restart waits for the Output event: combine() it after the snapshot
/// writer, so that a restart is never ahead of the snapshots on disk.
Observer restart_observer(Context const& context, std::string const& path, SimulationConfig const& config,
                          long long every_steps, ForceSolver const* solver = nullptr);

}  // namespace kfmm
