#pragma once
/// \file
/// \brief GADGET-4 (format 3) HDF5 particle files: snapshots and initial conditions,
/// written and read collectively with parallel HDF5.
#include <kfmm/comm/context.hpp>
#include <kfmm/comm/unique_ids.hpp>
#include <kfmm/core/particles.hpp>
#include <kfmm/core/types.hpp>
#include <kfmm/core/units.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace kfmm {

/// \brief How a snapshot is split into files.
enum class FileLayout {
  SingleFile,  ///< `snapshot_NNN.hdf5`, every rank writes its slice collectively (MPI-IO)
  FilePerRank  ///< `snapdir_NNN/snapshot_NNN.i.hdf5`, one file per rank i (NumFilesPerSnapshot = ranks)
};

/// "single" or "per-rank"; throws kfmm::Error naming the valid layouts otherwise.
FileLayout parse_file_layout(std::string const& name);

/// \brief How particle files are written.
struct ParticleFileOptions {
  FileLayout layout = FileLayout::SingleFile;
  /// Stored type of Coordinates, Velocities, Masses, Potential, Acceleration (GADGET-4 writes
  /// float32; Double keeps positions bit-exact). ParticleIDs are always uint64.
  Precision precision = Precision::Float;
  /// 0: contiguous datasets (GADGET-4's default); 1..9: chunked + shuffle + deflate at that level.
  int compression = 0;
};

/// A `/Parameters` or `/Config` attribute value: integers are stored as int32 when they fit
/// (as GADGET-4 does) else int64, reals as float64, strings as fixed-length ASCII.
using ParameterValue = std::variant<std::int64_t, double, std::string>;

/// \brief Everything in a snapshot besides the particles. Must be the same on every rank.
struct SnapshotHeader {
  double time = 0;
  double redshift = 0;
  double box_size = 0;  ///< 0: not periodic
  /// Written as /Parameters UnitLength_in_cm, UnitMass_in_g, UnitVelocity_in_cm_per_s,
  /// GravityConstantInternal and as a /Units group (with the name). When reading a file
  /// without GravityConstantInternal (or 0, GADGET-4's "compute it"), G follows from the
  /// units and G = 6.6738e-8 cgs (GADGET-4's value).
  UnitSystem units;
  /// Extra /Parameters attributes (run settings); reading returns all but the unit ones.
  std::vector<std::pair<std::string, ParameterValue>> parameters;
  /// /Config attributes.
  std::vector<std::pair<std::string, ParameterValue>> config;

  /// Sets the /Parameters attribute `name`, replacing the one read from a file (a file written
  /// by a kfmm command already carries that command's parameters; HDF5 names are unique).
  void set_parameter(std::string const& name, ParameterValue value) {
    for (auto& entry : parameters)
      if (entry.first == name) {
        entry.second = std::move(value);
        return;
      }
    parameters.emplace_back(name, std::move(value));
  }
  /// Removes the /Parameters attribute `name` if present (a setting the output does not have).
  void erase_parameter(std::string const& name) {
    for (auto it = parameters.begin(); it != parameters.end(); ++it)
      if (it->first == name) {
        parameters.erase(it);
        return;
      }
  }
};

/// \brief Optional per-particle results, aligned with the particles (same local order).
/// Empty Views mean "not present".
/// \brief A per-particle dataset of /PartType1 beyond the standard ones (e.g. KNNDistance):
/// `columns` values per local particle, row-major; `values` are stored in the file precision,
/// `integers` (used when `integer`) as uint64. Every rank lists the same datasets in the same order.
struct ExtraDataset {
  std::string name;
  std::size_t columns = 1;
  bool integer = false;
  std::vector<double> values;
  std::vector<std::uint64_t> integers;
};

struct ForceFields {
  ScalarView<double, HostSpace> potential;
  Vec3View<double, HostSpace> acceleration;
  std::vector<ExtraDataset> extra;  ///< written after the standard datasets, by write_particles only
  /// Friends-of-friends group number (GADGET-4's `GroupNr`, int64; −1: in no catalogued group).
  /// Written only, never read back.
  ScalarView<std::int64_t, HostSpace> group_number;
};

/// \brief Writes the particles of every rank as one GADGET-4 snapshot. Collective.
///
/// Layout (all in group /PartType1): Coordinates (N,3), Velocities (N,3), ParticleIDs (N,
/// uint64), Masses (N), and Potential (N) / Acceleration (N,3) / GroupNr (N, int64) when `fields` has them, each
/// unit-carrying dataset with GADGET-4's six float64 unit attributes. Masses are always written
/// and /Header MassTable is all zeros (GADGET readers accept per-particle masses for any type).
/// Particles are stored in rank order, each rank's in its local order (owner order); readers
/// sort by ParticleIDs when they need to. A global count of 0 writes no /PartType1 group.
///
/// The snapshot is first written under a temporary name (`path.tmp-<pid>`) and renamed on rank
/// 0 once every rank succeeded, replacing any earlier file of that name; on failure the
/// temporary is removed and an existing file at `path` is untouched. Temporaries of `path` that
/// a killed run left (`path.tmp-<other pid>`) are removed first. For FilePerRank `path` is
/// the directory (`…/snapdir_NNN`) and the files inside are `snapshot_NNN.i.hdf5` (the name
/// after "snapdir_"; any other directory name `D` gives `D.i.hdf5`). Missing parent
/// directories are created. Errors on any rank are agreed across ranks and thrown as kfmm::Error.
///
/// Fault point `snapshot.dataset` (core/fault_injection.hpp) follows each dataset written.
void write_particles(Context const& context, std::string const& path, Particles<HostSpace> const& particles,
                     SnapshotHeader const& header, ParticleFileOptions const& options,
                     ForceFields const* fields = nullptr);

/// \brief Reads a GADGET-4 format-3 HDF5 file, or a multi-file set (pass the `snapdir_NNN`
/// directory or any one `….i.hdf5` file of it), with any number of ranks. Collective.
///
/// Rank r gets the contiguous slice `[N·r/R, N·(r+1)/R)` of the global particle order (files in
/// index order, particles in file order); `num_total` = N. Accepts float32 or float64
/// Coordinates/Velocities/Masses, uint32 or uint64 ParticleIDs, and masses given only by
/// /Header MassTable[1] (no Masses dataset). If `header` is given it receives time, redshift,
/// box size, units, parameters and config. If `fields` is given, its Views receive the
/// Potential / Acceleration datasets when the file has them and are left empty otherwise.
///
/// Throws kfmm::Error (the same on every rank) naming the file and the dataset for: a missing
/// file or not an HDF5 file, a missing group, dataset or attribute, a wrong shape, counts that
/// disagree with NumPart_Total, non-finite coordinates or velocities (naming the particle id),
/// non-positive masses.
///
/// ParticleIDs that repeat (on one rank or across ranks) are handled by `ids`: Reject (the
/// default) throws naming the smallest repeated id, its first two rows in the file and the fix;
/// Renumber replaces every id by its row + 1; Keep leaves them (for tools that only report).
Particles<HostSpace> read_particles(Context const& context, std::string const& path,
                                    SnapshotHeader* header = nullptr, ForceFields* fields = nullptr,
                                    DuplicateIdPolicy ids = DuplicateIdPolicy::Reject);

/// \brief Where snapshot `number` lives in `directory`: `directory/snapshot_007.hdf5`
/// (SingleFile) or the directory `directory/snapdir_007` (FilePerRank). At least 3 digits.
std::string snapshot_path(std::string const& directory, int number, FileLayout layout);

}  // namespace kfmm
