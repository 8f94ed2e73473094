// `kfmm ic`: generate initial conditions (the same particles on any rank count) and write them
// as a GADGET-4 HDF5 file.
#include "commands.hpp"

#include <kfmm/comm/initial_conditions.hpp>
#include <kfmm/core/error.hpp>
#include <kfmm/io/particle_file.hpp>

#include <kfmm/core/format.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace kfmm::app {

namespace {

struct IcCommandOptions {
  std::string kind;
  std::uint64_t n = 0;
  std::uint64_t seed = ICOptions{}.seed;
  int clumps = ICOptions{}.clumps;
  std::string output;
  std::string precision = "float";
  int compression = 0;
  std::string layout = "single";
};

void make_ic_file(Context const& context, IcCommandOptions const& options) {
  using Clock = std::chrono::steady_clock;
  auto const start = Clock::now();
  ICOptions ic;
  ic.kind = parse_ic_kind(options.kind);
  ic.n_total = options.n;
  ic.seed = options.seed;
  ic.clumps = options.clumps;
  ParticleFileOptions file;
  file.layout = parse_file_layout(options.layout);
  file.precision = options.precision == "double" ? Precision::Double : Precision::Float;
  file.compression = options.compression;

  auto const particles = make_initial_conditions(context, ic);
  SnapshotHeader header;  // t = 0, G = 1 units
  header.parameters = {{"InitialConditions", to_string(ic.kind)},
                       {"Seed", static_cast<std::int64_t>(ic.seed)},
                       {"NumPart", static_cast<std::int64_t>(ic.n_total)}};
  if (ic.kind == ICKind::GaussianClumps) header.parameters.emplace_back("Clumps", std::int64_t{ic.clumps});
  write_particles(context, options.output, particles, header, file);

  double const seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (context.is_root())
    fmt::print("kfmm ic: wrote {} {} particles (seed {}) to {} ({}, {}, compression {}) on {} rank{} in {:.2f} s\n",
               particles.num_total, to_string(ic.kind), ic.seed, options.output, options.layout, options.precision,
               options.compression, context.size(), context.size() == 1 ? "" : "s", seconds);
}

}  // namespace

void add_ic_command(CLI::App& app, Environment& environment) {
  auto options = std::make_shared<IcCommandOptions>();
  auto* command = app.add_subcommand("ic", "Generate initial conditions and write a GADGET-4 HDF5 file");
  command->add_option("kind", options->kind, "clumps, plummer, hernquist or uniform")->required();
  command->add_option("--n", options->n, "number of particles")->required()->check(CLI::PositiveNumber);
  command->add_option("--seed", options->seed, "random seed (same particles on any rank count)")->capture_default_str();
  command->add_option("--clumps", options->clumps, "number of Gaussian clumps (kind clumps)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("-o,--output", options->output, "output file (or snapdir_NNN directory for --layout per-rank)")
      ->required();
  command->add_option("--precision", options->precision, "stored precision of the floating-point datasets")
      ->capture_default_str()
      ->check(CLI::IsMember({"float", "double"}));
  command->add_option("--compression", options->compression, "0: none; 1..9: shuffle + deflate level")
      ->capture_default_str()
      ->check(CLI::Range(0, 9));
  command->add_option("--layout", options->layout, "single (one file) or per-rank (snapdir with one file per rank)")
      ->capture_default_str()
      ->check(CLI::IsMember({"single", "per-rank"}));
  command->callback([options, &environment] { make_ic_file(environment.world(), *options); });
}

}  // namespace kfmm::app
