// `kfmm fof IN -o GROUPS [--b 0.2 | --linking-length L] [--min-members 20] [--box L]
// [--most-bound] [--particles-out FILE]`: friends-of-friends groups of the particles in a file
// (any rank count), their catalogue in GADGET-4's fof_tab layout and, optionally, a copy of the
// particles with PartType1/GroupNr.
#include "commands.hpp"
#include "fof_output.hpp"
#include "input_options.hpp"

#include <kfmm/fmm/config.hpp>
#include <kfmm/io/fof_file.hpp>
#include <kfmm/io/particle_file.hpp>
#include <kfmm/neighbors/fof.hpp>
#include <kfmm/neighbors/fof_catalogue.hpp>

#include <kfmm/core/format.hpp>

#include <Kokkos_Timer.hpp>

#include <memory>
#include <string>

namespace kfmm::app {

namespace {

struct FoFCommandOptions {
  std::string input, output, particles_out;
  double b = 0.2;
  double linking_length = 0;
  double box = -1;  ///< < 0: the file's BoxSize
  std::uint64_t min_members = 20;
  bool most_bound = false;
  std::uint64_t most_bound_max = 20000;
  double softening = 0;
  std::string file_precision = "float";
  std::string duplicate_ids = "reject";
};

void run_fof(Context const& context, FoFCommandOptions const& options) {
  SnapshotHeader header;
  auto host = read_particles(context, options.input, &header, nullptr, parse_duplicate_id_policy(options.duplicate_ids));
  auto const particles = to_device(host);
  Kokkos::Timer timer;
  FoFOptions fof;
  fof.b = options.b;
  fof.linking_length = options.linking_length;
  fof.box_size = options.box < 0 ? header.box_size : options.box;
  auto const result = friends_of_friends(context, particles, fof);
  double const fof_seconds = timer.seconds();

  FoFCatalogueOptions catalogue_options;
  catalogue_options.min_members = options.min_members;
  catalogue_options.box_size = fof.box_size;
  catalogue_options.most_bound = options.most_bound;
  catalogue_options.most_bound_max_members = options.most_bound_max;
  catalogue_options.softening = options.softening;
  catalogue_options.G = header.units.G;
  ScalarView<std::int64_t> group_number;
  auto const catalogue = fof_catalogue(context, particles, result.label, catalogue_options,
                                       options.particles_out.empty() ? nullptr : &group_number);
  auto const all = gather_catalogue(context, catalogue);
  double const total_seconds = timer.seconds();

  auto const table = fof_table(all, header.time, header.redshift, fof.box_size, result.linking_length,
                               options.linking_length > 0 ? 0 : options.b, options.min_members);
  write_fof_table(context, options.output, table);

  if (!options.particles_out.empty()) {
    ForceFields fields;
    fields.group_number = ScalarView<std::int64_t, HostSpace>("kfmm::fof::group_number", host.num);
    Kokkos::deep_copy(fields.group_number,
                      Kokkos::subview(group_number, Kokkos::make_pair(std::size_t(0), host.num)));
    header.set_parameter("FOF_LinkingLength", result.linking_length);
    header.set_parameter("FOF_GroupMinLen", std::int64_t(options.min_members));
    ParticleFileOptions file;
    file.precision = parse_precision(options.file_precision);
    write_particles(context, options.particles_out, host, header, file, &fields);
  }
  if (context.is_root()) {
    fmt::print("kfmm fof: {} particles on {} rank(s); linking length {:.6g}{}; {} groups in all, {} with >= {} members "
               "holding {} particles (largest {}); FoF {:.3f} s ({} merge rounds), with catalogue {:.3f} s; wrote {}{}\n",
               host.num_total, context.size(), result.linking_length,
               options.linking_length > 0 ? std::string() : fmt::format(" (b = {})", options.b), result.num_groups,
               all.num_total, options.min_members, all.num_members_total, all.num > 0 ? all.length(0) : 0,
               fof_seconds, result.merge_rounds, total_seconds, options.output,
               options.particles_out.empty() ? std::string() : " and " + options.particles_out);
  }
}

}  // namespace

void add_fof_command(CLI::App& app, Environment& environment) {
  auto options = std::make_shared<FoFCommandOptions>();
  auto* command = app.add_subcommand("fof", "Friends-of-friends groups of the particles in a file and their catalogue");
  command->add_option("input", options->input, "GADGET-4 HDF5 particle file (or snapdir)")->required();
  command->add_option("-o,--output", options->output, "group catalogue (GADGET-4 fof_tab layout)")->required();
  command->add_option("--b", options->b, "linking length in mean interparticle separations (V/N)^(1/3); V is the "
                                         "periodic box's volume or the particles' bounding box's")
      ->capture_default_str();
  command->add_option("--linking-length", options->linking_length,
                      "the linking length itself, in position units (overrides --b)");
  command->add_option("--box", options->box,
                      "periodic box size (0: open boundaries); default: the file's BoxSize (0 there: open)");
  command->add_option("--min-members", options->min_members, "smallest group in the catalogue")->capture_default_str();
  command->add_flag("--most-bound", options->most_bound,
                    "find each group's most bound particle (direct-sum potential within the group: N^2 per group)");
  command->add_option("--most-bound-max", options->most_bound_max, "largest group whose most bound particle is found")
      ->capture_default_str();
  command->add_option("--softening", options->softening, "Plummer softening of the most-bound potential")
      ->capture_default_str();
  command->add_option("--particles-out", options->particles_out,
                      "also write a copy of the particles with PartType1/GroupNr (catalogue number, -1: none)");
  add_file_precision_option(command, options->file_precision, "stored precision of --particles-out");
  add_duplicate_ids_option(command, options->duplicate_ids);
  command->callback([options, &environment] { run_fof(environment.world(), *options); });
}

}  // namespace kfmm::app
