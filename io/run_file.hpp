#pragma once
/// \file
/// \brief YAML run files of `kfmm run`: initial conditions, forces, integrator, schedule, outputs.
#include <kfmm/core/initial_conditions.hpp>
#include <kfmm/integrate/model_placement.hpp>
#include <kfmm/integrate/simulation.hpp>
#include <kfmm/io/particle_file.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kfmm {

/// How forces are computed in a run.
enum class ForceMethod { FMM, Direct };

/// \brief Friends-of-friends catalogues at the outputs (`output.fof*`): open boundaries, linking
/// length b × the mean separation in the particles' bounding box.
struct FoFOutputSettings {
  bool enabled = false;
  double b = 0.2;
  std::uint64_t min_members = 20;
};

/// \brief Everything a run file says, checked and converted.
struct RunSettings {
  std::string source;          ///< the file name (or "built-in default"), for messages
  ICOptions ic;                ///< generated initial conditions (when `ic_file` is empty)
  std::string ic_file;         ///< HDF5 snapshot to start from instead
  /// Mass, size, position and bulk velocity of the initial particles (`ic.mass`,
  /// `ic.scale_radius`, `ic.position`, `ic.velocity`), applied in the run's units.
  ModelPlacement ic_placement;
  /// What reading `ic_file` does with repeated ParticleIDs (`ic.duplicate_ids`).
  DuplicateIdPolicy ic_duplicate_ids = DuplicateIdPolicy::Reject;
  /// `units.system: model` with an IC file: the run takes the units (and G) recorded in the
  /// file (`simulation.units` is plain until the caller read them).
  bool units_from_ic_file = false;
  ForceMethod force_method = ForceMethod::FMM;
  SimulationConfig simulation;
  ParticleFileOptions snapshot_options;
  FoFOutputSettings fof;  ///< fof_tab_NNN.hdf5 at every output when enabled
};

/// \brief Reads a run file. Throws kfmm::Error naming the key, the file and the line for an
/// unknown key, a value of the wrong type, a missing required key or a value out of range.
/// `overrides` are `key=value` settings (`kfmm run --set`) that replace or add keys of the
/// file (see parse_run_text).
RunSettings read_run_file(std::string const& path, std::vector<std::string> const& overrides = {});

/// \brief Parses run-file text; `source` names it in messages. Empty text gives the built-in
/// default run. Each override `key=value` sets a key of the table (`time.end=2`,
/// `ic.position=[1, 0, 0]`; the value is YAML) before the text is checked, as if the file said
/// it; `external[]` entries cannot be overridden. A malformed override or an unknown key is an
/// error naming it.
RunSettings parse_run_text(std::string const& text, std::string const& source,
                           std::vector<std::string> const& overrides = {});

/// The default run as a commented YAML file (every key, its default and meaning).
std::string default_run_file();

/// The table of keys as Markdown (key, type, default, meaning) for the README.
std::string run_file_keys_markdown();

}  // namespace kfmm
