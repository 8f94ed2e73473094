// `kfmm forces IN -o OUT [--check N | --check-ids FILE]`: reads particles (any rank count),
// computes FMM potential and acceleration and writes the same particles with
// PartType1/Potential and Acceleration; with --check, also their error against direct summation
// on N targets (or on the particles whose ids FILE lists).
#include "commands.hpp"
#include "fmm_options.hpp"
#include "input_options.hpp"

#include <kfmm/fmm/accuracy.hpp>
#include <kfmm/fmm/solver.hpp>
#include <kfmm/io/particle_file.hpp>

#include <kfmm/core/format.hpp>

#include <mpi.h>

#include <cstdint>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace kfmm::app {

namespace {

struct ForcesOptions {
  std::string input, output;
  std::string file_precision = "float";
  int compression = 0;
  std::uint64_t check = 0;  ///< targets to compare with direct summation (0: none)
  std::string check_ids;    ///< a file listing the targets' ids instead (empty: none)
  std::string duplicate_ids = "reject";
};

// The ids of a --check-ids file: unsigned decimal integers separated by white space; `#` starts
// a comment to the end of its line. Sets `error` (naming the file, line and text) instead.
std::vector<std::uint64_t> read_id_list(std::string const& path, std::string& error) {
  std::vector<std::uint64_t> ids;
  std::ifstream in(path);
  if (!in) {
    error = fmt::format("--check-ids: cannot read the file '{}'", path);
    return ids;
  }
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    std::istringstream words(line.substr(0, line.find('#')));
    std::string word;
    while (words >> word) {
      std::size_t used = 0;
      std::uint64_t id = 0;
      bool ok = word.find_first_not_of("0123456789") == std::string::npos;
      try {
        if (ok) id = std::stoull(word, &used);
      } catch (std::exception const&) {
        ok = false;
      }
      if (!ok || used != word.size()) {
        error = fmt::format("--check-ids: '{}' on line {} of '{}' is not a particle id (an unsigned integer below "
                            "2^64); list one ParticleID per word, '#' for comments",
                            word, number, path);
        return ids;
      }
      ids.push_back(id);
    }
  }
  if (ids.empty()) error = fmt::format("--check-ids: the file '{}' lists no particle ids", path);
  return ids;
}

void compute_forces(Context const& context, ForcesOptions const& options, FMMConfig const& config) {
  // The id list is read on the root (its errors agreed) and broadcast, before the force
  // calculation.
  std::vector<std::uint64_t> check_ids;
  if (!options.check_ids.empty()) {
    std::string error;
    if (context.is_root()) check_ids = read_id_list(options.check_ids, error);
    agree_on_error(context, error);
    std::uint64_t count = check_ids.size();
    MPI_Bcast(&count, 1, MPI_UINT64_T, 0, context.comm());
    check_ids.resize(count);
    MPI_Bcast(check_ids.data(), static_cast<int>(count), MPI_UINT64_T, 0, context.comm());
  }
  SnapshotHeader header;
  auto host = read_particles(context, options.input, &header, nullptr,
                             parse_duplicate_id_policy(options.duplicate_ids));
  auto particles = to_device(host);
  if (!check_ids.empty()) check_target_ids(context, particles, check_ids);
  ForceSolver solver(context, config);
  solver.collect_statistics(true);  // the summary line prints the global pair counts
  solver.compute(particles);
  auto const out = to_host(particles);
  ForceFields fields;
  fields.potential = ScalarView<double, HostSpace>("potential", out.num);
  fields.acceleration = Vec3View<double, HostSpace>("acceleration", out.num);
  Kokkos::deep_copy(fields.potential, Kokkos::subview(solver.potential(), Kokkos::make_pair(std::size_t(0), out.num)));
  Kokkos::deep_copy(fields.acceleration,
                    Kokkos::subview(solver.acceleration(), Kokkos::make_pair(std::size_t(0), out.num), Kokkos::ALL));
  // The names `kfmm run` writes (docs/simulation.md), so that a snapshot's settings are
  // replaced by the ones these forces were computed with.
  header.set_parameter("ExpansionOrder", std::int64_t{config.order});
  header.set_parameter("OpeningAngle", config.theta);
  header.set_parameter("OpeningCriterion", to_string(config.opening));
  header.set_parameter("OpeningTolerance", config.tolerance);
  header.set_parameter("Softening", to_string(config.softening));
  header.set_parameter("SofteningLength", config.softening_length);
  header.set_parameter("FMMLeafSize", std::int64_t{config.leaf_size});
  header.set_parameter("FMMPrecision", to_string(config.precision));
  header.units.G = config.G;
  ParticleFileOptions file;
  file.precision = parse_precision(options.file_precision);
  file.compression = options.compression;
  write_particles(context, options.output, out, header, file, &fields);
  auto const& stats = solver.stats();
  if (context.is_root())
    fmt::print("kfmm forces: {} particles on {} rank(s) in {:.3f} s ({:.3g} particles/s); {} P2P pairs, {} M2L, {} M2P; wrote {}\n",
               out.num_total, context.size(), stats.total_seconds, out.num_total / stats.total_seconds, stats.p2p_pairs,
               stats.m2l, stats.m2p, options.output);
  // The solver's particles are in its own order, its fields aligned with them.
  if (options.check > 0 || !check_ids.empty()) {
    auto const report =
        check_ids.empty()
            ? measure_accuracy(context, particles, solver.potential(), solver.acceleration(), config, options.check)
            : measure_accuracy(context, particles, solver.potential(), solver.acceleration(), config, check_ids);
    if (context.is_root()) fmt::print("  {}\n", describe(report));
  }
}

}  // namespace

void add_forces_command(CLI::App& app, Environment& environment) {
  auto options = std::make_shared<ForcesOptions>();
  auto fmm = std::make_shared<FmmOptions>();
  auto* command = app.add_subcommand("forces", "Compute FMM potential and acceleration of the particles in a file");
  command->add_option("input", options->input, "GADGET-4 HDF5 particle file (or snapdir)")->required();
  command->add_option("-o,--output", options->output, "output file (same particles plus Potential, Acceleration)")
      ->required();
  add_file_precision_option(command, options->file_precision);
  add_compression_option(command, options->compression);
  command->add_option("--check", options->check,
                      "compare the forces of this many targets (chosen by id hash; all when ≥ N) with double-precision "
                      "direct summation and print E, median, 99%, 99.9% and max of the per-particle relative error")
      ->capture_default_str();
  command
      ->add_option("--check-ids", options->check_ids,
                   "like --check, on the particles whose ParticleIDs this text file lists (white-space separated, "
                   "'#' comments), e.g. those GADGET-4's FORCETEST sampled")
      ->excludes("--check");
  add_duplicate_ids_option(command, options->duplicate_ids);
  add_fmm_options(command, fmm);
  command->callback([options, fmm, &environment] {
    FMMConfig config;
    collectively(environment.world(), [&] { config = fmm->resolve(); });
    compute_forces(environment.world(), *options, config);
  });
}

}  // namespace kfmm::app
