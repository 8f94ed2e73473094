#pragma once
/// \file
/// \brief YAML run files of `kfmm run`: initial conditions, forces, integrator, schedule, outputs.
#include <kfmm/core/initial_conditions.hpp>
#include <kfmm/integrate/simulation.hpp>
#include <kfmm/io/particle_file.hpp>

#include <cstdint>
#include <string>

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
RunSettings read_run_file(std::string const& path);

/// \brief Parses run-file text; `source` names it in messages. Empty text gives the built-in
/// default run.
RunSettings parse_run_text(std::string const& text, std::string const& source);

/// The default run as a commented YAML file (every key, its default and meaning).
std::string default_run_file();

/// The table of keys as Markdown (key, type, default, meaning) for the README.
std::string run_file_keys_markdown();

}  // namespace kfmm
