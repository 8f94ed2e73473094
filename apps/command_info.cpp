// `kfmm info`: what a particle file holds (counts, mass, extent, centre of mass, energies,
// units), read and reduced over any number of ranks.
#include "commands.hpp"

#include <kfmm/io/particle_file.hpp>

#include <kfmm/core/format.hpp>

#include <algorithm>
#include <array>
#include <limits>
#include <memory>
#include <string>
#include <variant>

namespace kfmm::app {

namespace {

/// Sums over the local particles, reduced over ranks.
struct FileSummary {
  double mass = 0;
  std::array<double, 3> mass_position{}, momentum{};
  double kinetic = 0, potential = 0;
  std::array<double, 3> low{}, high{};
};

FileSummary summarise(Context const& context, Particles<HostSpace> const& p, ForceFields const& fields) {
  FileSummary s;
  double const inf = std::numeric_limits<double>::infinity();
  s.low = {inf, inf, inf};
  s.high = {-inf, -inf, -inf};
  bool const has_potential = fields.potential.extent(0) > 0;
  for (std::size_t i = 0; i < p.num; ++i) {
    double const m = p.mass(i);
    s.mass += m;
    for (int k = 0; k < 3; ++k) {
      s.mass_position[k] += m * p.pos(i, k);
      s.momentum[k] += m * p.vel(i, k);
      s.kinetic += 0.5 * m * p.vel(i, k) * p.vel(i, k);
      s.low[k] = std::min(s.low[k], p.pos(i, k));
      s.high[k] = std::max(s.high[k], p.pos(i, k));
    }
    if (has_potential) s.potential += 0.5 * m * fields.potential(i);
  }
  std::array<double, 9> sums{s.mass, s.mass_position[0], s.mass_position[1], s.mass_position[2], s.momentum[0],
                             s.momentum[1], s.momentum[2], s.kinetic, s.potential};
  MPI_Allreduce(MPI_IN_PLACE, sums.data(), 9, MPI_DOUBLE, MPI_SUM, context.comm());
  MPI_Allreduce(MPI_IN_PLACE, s.low.data(), 3, MPI_DOUBLE, MPI_MIN, context.comm());
  MPI_Allreduce(MPI_IN_PLACE, s.high.data(), 3, MPI_DOUBLE, MPI_MAX, context.comm());
  s.mass = sums[0];
  for (int k = 0; k < 3; ++k) {
    s.mass_position[k] = sums[1 + k];
    s.momentum[k] = sums[4 + k];
  }
  s.kinetic = sums[7];
  s.potential = sums[8];
  return s;
}

std::string format_value(ParameterValue const& value) {
  return std::visit([](auto const& v) { return fmt::format("{}", v); }, value);
}

void print_info(Context const& context, std::string const& path) {
  SnapshotHeader header;
  ForceFields fields;
  auto const particles = read_particles(context, path, &header, &fields, DuplicateIdPolicy::Keep);
  FileSummary const s = summarise(context, particles, fields);
  IdRepeats const repeats = find_repeated_ids(context, particles);
  if (!context.is_root()) return;
  auto const vec = [](std::array<double, 3> const& v, double scale) {
    return fmt::format("({:.6g}, {:.6g}, {:.6g})", v[0] * scale, v[1] * scale, v[2] * scale);
  };
  double const inverse_mass = s.mass > 0 ? 1 / s.mass : 0;
  fmt::print("file                 {}\n", path);
  fmt::print("particles            {}\n", particles.num_total);
  fmt::print("time                 {:.9g} (redshift {:.6g}, box size {:.6g})\n", header.time, header.redshift,
             header.box_size);
  fmt::print("units                {}: length {:.9g} cm, mass {:.9g} g, velocity {:.9g} cm/s, G = {:.9g}\n",
             header.units.name, header.units.length_in_cm, header.units.mass_in_g, header.units.velocity_in_cm_per_s,
             header.units.G);
  fmt::print("total mass           {:.9g}\n", s.mass);
  fmt::print("particle ids         {}\n", repeats ? "REPEATED: " + describe(repeats) +
                                                      " (forces and run reject the file unless told to renumber)"
                                                : std::string("unique"));
  if (particles.num_total > 0) {
    fmt::print("bounding box         {} .. {}\n", vec(s.low, 1), vec(s.high, 1));
    fmt::print("centre of mass       {}\n", vec(s.mass_position, inverse_mass));
    fmt::print("mean velocity        {} (mass-weighted)\n", vec(s.momentum, inverse_mass));
  }
  fmt::print("kinetic energy       {:.9g}\n", s.kinetic);
  if (fields.potential.extent(0) > 0 || particles.num_total == 0)
    fmt::print("potential energy     {:.9g} (1/2 sum m phi)\n", s.potential);
  else
    fmt::print("potential energy     not in the file (no /PartType1/Potential)\n");
  fmt::print("acceleration         {}\n", fields.acceleration.extent(0) > 0 ? "present" : "not in the file");
  for (auto const& [name, value] : header.parameters)
    fmt::print("parameter            {} = {}\n", name, format_value(value));
  for (auto const& [name, value] : header.config)
    fmt::print("config               {} = {}\n", name, format_value(value));
}

}  // namespace

void add_info_command(CLI::App& app, Environment& environment) {
  auto path = std::make_shared<std::string>();
  auto* command = app.add_subcommand("info", "Summarise a GADGET-4 HDF5 particle file (any rank count)");
  command->add_option("file", *path, "snapshot_NNN.hdf5, a snapdir_NNN directory or one file of it")->required();
  command->callback([path, &environment] { print_info(environment.world(), *path); });
}

}  // namespace kfmm::app
