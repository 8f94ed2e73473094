// `kfmm ic`: generate initial conditions (the same particles on any rank count) and write them
// as a GADGET-4 HDF5 file.
#include "commands.hpp"
#include "input_options.hpp"

#include <kfmm/comm/initial_conditions.hpp>
#include <kfmm/core/error.hpp>
#include <kfmm/io/particle_file.hpp>

#include <kfmm/core/format.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kfmm::app {

namespace {

struct IcCommandOptions {
  std::string kind;
  std::uint64_t n = 0;
  std::uint64_t seed = ICOptions{}.seed;
  int clumps = ICOptions{}.clumps;
  double truncation_radius = ICOptions{}.truncation_radius;
  int satellites = ICOptions{}.satellites;
  double satellite_scale = ICOptions{}.satellite_scale;
  double mass_decades = ICOptions{}.mass_decades;
  double disk_scale_height = ICOptions{}.disk_scale_height;
  double filament_width = ICOptions{}.filament_width;
  double offset = ICOptions{}.offset;
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
  ic.truncation_radius = options.truncation_radius;
  ic.satellites = options.satellites;
  ic.satellite_scale = options.satellite_scale;
  ic.mass_decades = options.mass_decades;
  ic.disk_scale_height = options.disk_scale_height;
  ic.filament_width = options.filament_width;
  ic.offset = options.offset;
  ParticleFileOptions file;
  file.layout = parse_file_layout(options.layout);
  file.precision = options.precision == "double" ? Precision::Double : Precision::Float;
  file.compression = options.compression;

  auto const particles = make_initial_conditions(context, ic);
  // The options the kind uses, so that the file tells how to reproduce it.
  std::vector<std::pair<std::string, ParameterValue>> model_parameters;
  switch (ic.kind) {
    case ICKind::GaussianClumps: model_parameters = {{"Clumps", std::int64_t{ic.clumps}}}; break;
    case ICKind::Plummer:
    case ICKind::Hernquist:
    case ICKind::NFW: model_parameters = {{"TruncationRadius", ic.truncation_radius}}; break;
    case ICKind::Disk:
      model_parameters = {{"TruncationRadius", ic.truncation_radius}, {"DiskScaleHeight", ic.disk_scale_height}};
      break;
    case ICKind::Satellites:
      model_parameters = {{"TruncationRadius", ic.truncation_radius},
                          {"Satellites", std::int64_t{ic.satellites}},
                          {"SatelliteScale", ic.satellite_scale}};
      break;
    case ICKind::MassSpectrum:
      model_parameters = {{"TruncationRadius", ic.truncation_radius}, {"MassDecades", ic.mass_decades}};
      break;
    case ICKind::Filament:
      model_parameters = {{"FilamentWidth", ic.filament_width}, {"Offset", ic.offset}};
      break;
    case ICKind::Uniform: break;
  }
  SnapshotHeader header;  // t = 0, G = 1 units
  header.parameters = {{"InitialConditions", to_string(ic.kind)},
                       {"Seed", static_cast<std::int64_t>(ic.seed)},
                       {"NumPart", static_cast<std::int64_t>(ic.n_total)}};
  header.parameters.insert(header.parameters.end(), model_parameters.begin(), model_parameters.end());
  write_particles(context, options.output, particles, header, file);

  double const seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (context.is_root())
    fmt::print("kfmm ic: wrote {} {} particles (seed {}) to {} ({}, {}, compression {}) on {} rank{} in {:.2f} s\n",
               particles.num_total, to_string(ic.kind), ic.seed, options.output, options.layout, options.precision,
               options.compression, context.size(), context.size() == 1 ? "" : "s", seconds);
}

std::string kind_help() {
  std::string names;
  for (ICKind kind : all_ic_kinds()) names += (names.empty() ? "" : ", ") + to_string(kind);
  return names + " (see the README)";
}

}  // namespace

void add_ic_command(CLI::App& app, Environment& environment) {
  auto options = std::make_shared<IcCommandOptions>();
  auto* command = app.add_subcommand("ic", "Generate initial conditions and write a GADGET-4 HDF5 file");
  command->add_option("kind", options->kind, kind_help())->required();
  command->add_option("--n", options->n, "number of particles")->required()->check(CLI::PositiveNumber);
  command->add_option("--seed", options->seed, "random seed (same particles on any rank count)")->capture_default_str();
  command->add_option("--clumps", options->clumps, "number of Gaussian clumps (kind clumps)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--truncation-radius", options->truncation_radius,
                      "plummer, hernquist, nfw, satellites (halo), mass_spectrum: radii beyond this are redrawn, in "
                      "scale radii; disk: min(this, 10) disk scale lengths")
      ->capture_default_str();
  command->add_option("--satellites", options->satellites,
                      "satellites: number of satellites, 3 % of the mass each (0 … 6)")
      ->capture_default_str();
  command->add_option("--satellite-scale", options->satellite_scale,
                      "satellites: Plummer scale radius of a satellite, in halo scale radii")
      ->capture_default_str();
  command->add_option("--mass-decades", options->mass_decades, "mass_spectrum: decades spanned by the masses (0 … 12)")
      ->capture_default_str();
  command->add_option("--disk-scale-height", options->disk_scale_height,
                      "disk: scale height z_d of the sech² profile, in disk scale lengths")
      ->capture_default_str();
  command->add_option("--filament-width", options->filament_width,
                      "filament: standard deviation of each transverse coordinate")
      ->capture_default_str();
  command->add_option("--offset", options->offset, "filament: distance of its midpoint from the origin")
      ->capture_default_str();
  command->add_option("-o,--output", options->output, "output file (or snapdir_NNN directory for --layout per-rank)")
      ->required();
  command->add_option("--precision", options->precision, "stored precision of the floating-point datasets")
      ->capture_default_str()
      ->check(CLI::IsMember({"float", "double"}));
  add_compression_option(command, options->compression);
  command->add_option("--layout", options->layout, "single (one file) or per-rank (snapdir with one file per rank)")
      ->capture_default_str()
      ->check(CLI::IsMember({"single", "per-rank"}));
  command->callback([options, &environment] { make_ic_file(environment.world(), *options); });
}

}  // namespace kfmm::app
