// `kfmm knn IN -o OUT --k K [--box L | --box LX LY LZ | --periodic] [--density] [--include-self]`: reads
// particles (any rank count), finds each particle's k nearest neighbours among all particles
// and writes the same particles with PartType1/KNNDistance (N, k), KNNIds (N, k) and, with
// --density, Density (cubic-spline SPH estimate with h = the k-th neighbour distance).
#include "commands.hpp"
#include "input_options.hpp"

#include <kfmm/fmm/config.hpp>
#include <kfmm/io/particle_file.hpp>
#include <kfmm/neighbors/knn.hpp>
#include <kfmm/neighbors/knn_density.hpp>

#include <kfmm/core/format.hpp>

#include <Kokkos_Timer.hpp>

#include <vector>

namespace kfmm::app {

namespace {

struct KNNCommandOptions {
  std::string input, output;
  int k = 32;
  std::vector<double> box;
  bool periodic = false;  ///< without --box: the input file's BoxSize
  bool density = false;
  bool include_self = false;
  bool no_neighbours = false;
  int leaf_size = KNNOptions().leaf_size;
  std::string file_precision = "float";
  int compression = 0;
  std::string duplicate_ids = "reject";
};

template <class View>
auto host_copy(View const& view) {
  return Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), view);
}

void run_knn(Context const& context, KNNCommandOptions const& options) {
  KNNOptions knn_options;
  knn_options.k = options.k;
  knn_options.include_self = options.include_self;
  knn_options.leaf_size = options.leaf_size;
  knn_options.neighbour_masses = options.density;
  if (options.box.size() == 1) knn_options.periodic = PeriodicBox::cube(options.box[0]);
  if (options.box.size() == 3) knn_options.periodic = PeriodicBox::box(options.box[0], options.box[1], options.box[2]);
  if (!options.box.empty() && options.box.size() != 1 && options.box.size() != 3)
    fail("--box takes one length (a cube) or three (a rectangular box), not {}", options.box.size());

  SnapshotHeader header;
  auto const host = read_particles(context, options.input, &header, nullptr, parse_duplicate_id_policy(options.duplicate_ids));
  // Every rank reads the same header, so this error is the same on every rank.
  if (options.periodic && options.box.empty()) {
    if (!(header.box_size > 0))
      fail("kfmm knn --periodic: {} has no periodic box (Header/BoxSize = {}); give the box with --box L or --box LX "
           "LY LZ",
           options.input, header.box_size);
    knn_options.periodic = PeriodicBox::cube(header.box_size);
  }
  auto const particles = to_device(host);
  ExecutionSpace const space;
  Kokkos::Timer timer;
  auto const result = knn(space, context, particles, knn_options);
  ScalarView<double> density;
  if (options.density)
    density = knn_density(space, context, result, options.include_self ? ScalarView<double>() : particles.mass);
  space.fence();
  double const seconds = timer.seconds();

  std::size_t const n = host.num, k = static_cast<std::size_t>(options.k);
  ForceFields fields;
  if (!options.no_neighbours) {
    auto const distance = host_copy(result.distance);
    auto const ids = host_copy(result.id);
    ExtraDataset d{"KNNDistance", k, false, std::vector<double>(distance.data(), distance.data() + n * k), {}};
    ExtraDataset i{"KNNIds", k, true, {}, std::vector<std::uint64_t>(ids.data(), ids.data() + n * k)};
    fields.extra.push_back(std::move(d));
    fields.extra.push_back(std::move(i));
  }
  if (options.density) {
    auto const rho = host_copy(density);
    fields.extra.push_back(ExtraDataset{"Density", 1, false, std::vector<double>(rho.data(), rho.data() + n), {}});
  }
  header.set_parameter("KNNNeighbours", std::int64_t{options.k});
  header.set_parameter("KNNIncludeSelf", std::int64_t{options.include_self ? 1 : 0});
  header.erase_parameter("KNNBoxSize");  // from an earlier periodic search of the input
  if (knn_options.periodic.enabled)
    header.set_parameter("KNNBoxSize", fmt::format("{} {} {}", knn_options.periodic.length[0],
                                                             knn_options.periodic.length[1], knn_options.periodic.length[2]));
  ParticleFileOptions file;
  file.precision = parse_precision(options.file_precision);
  file.compression = options.compression;
  write_particles(context, options.output, host, header, file, &fields);
  if (context.is_root())
    fmt::print("kfmm knn: {} particles on {} rank(s), k = {}{} in {:.3f} s ({:.3g} particles/s); wrote {}\n",
               host.num_total, context.size(), options.k, knn_options.periodic.enabled ? " (periodic)" : "", seconds,
               host.num_total / seconds, options.output);
}

}  // namespace

void add_knn_command(CLI::App& app, Environment& environment) {
  auto options = std::make_shared<KNNCommandOptions>();
  auto* command = app.add_subcommand("knn", "Find the k nearest neighbours of every particle in a file");
  command->add_option("input", options->input, "GADGET-4 HDF5 particle file (or snapdir)")->required();
  command
      ->add_option("-o,--output", options->output,
                   "output file: the same particles plus PartType1/KNNDistance (N, k), KNNIds (N, k) and, with "
                   "--density, Density")
      ->required();
  command->add_option("--k", options->k, "neighbours per particle (1..128)")->capture_default_str();
  command->add_option("--box", options->box,
                      "periodic box [0, L)^3 (one length) or [0, LX) x [0, LY) x [0, LZ) (three); minimum-image "
                      "distances; default open")
      ->expected(1, 3);
  command->add_flag("--periodic", options->periodic,
                    "periodic box [0, BoxSize)^3 from the input file's header (--box, when given, takes precedence)");
  command->add_flag("--density", options->density,
                    "also write Density: SPH cubic-spline estimate with h = distance of the k-th neighbour");
  command->add_flag("--density-only", options->no_neighbours, "with --density, write Density but not the neighbour lists");
  command->add_flag("--include-self", options->include_self, "count each particle as its own nearest neighbour");
  command->add_option("--leaf-size", options->leaf_size, "largest leaf of the search trees")->capture_default_str();
  add_file_precision_option(command, options->file_precision);
  add_compression_option(command, options->compression);
  add_duplicate_ids_option(command, options->duplicate_ids);
  command->callback([options, &environment] {
    if (options->no_neighbours && !options->density) fail("--density-only needs --density");
    run_knn(environment.world(), *options);
  });
}

}  // namespace kfmm::app
