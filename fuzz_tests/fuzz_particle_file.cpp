// Structured fuzzing of read_particles (io/particle_file.cpp): the input describes a GADGET-4
// snapshot (one or two files; which groups, attributes and datasets exist, their types, shapes
// and values), which is written with the HDF5 C API and read back. The reader must return
// particles that keep its promises or throw kfmm::Error. Mutated HDF5 bytes mostly test
// libhdf5's own parser (fuzz_particle_file_bytes does that); this target reaches kfmm's checks.
#include <fmt/format.h>

#include <array>
#include <kfmm/core/error.hpp>
#include <kfmm/io/particle_file.hpp>

#include "fuzz_common.hpp"

using namespace kfmm;
using namespace kfmm::fuzz;

namespace {

/// Row counts that matter: small, zero, off by one, and large ones stored without data.
hsize_t pick_rows(FuzzedDataProvider& in, hsize_t n) {
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 0:
      return 0;
    case 1:
      return n + 1;
    case 2:
      return n > 0 ? n - 1 : 0;
    case 3:
      return hsize_t(1) << in.ConsumeIntegralInRange<int>(20, 40);
    default:
      return n;
  }
}

std::uint64_t interesting_count(FuzzedDataProvider& in, std::uint64_t n) {
  switch (in.ConsumeIntegralInRange<int>(0, 9)) {
    case 0:
      return 0;
    case 1:
      return n + 1;
    case 2:
      return n - 1;  // wraps for n = 0
    case 3:
      return std::numeric_limits<std::uint64_t>::max();
    case 4:
      return std::uint64_t(1) << in.ConsumeIntegralInRange<int>(31, 63);
    case 5:
      return in.ConsumeIntegral<std::uint64_t>();
    default:
      return n;
  }
}

/// An attribute of 6 values (or a wrong count, type or a missing one).
void header_array(FuzzedDataProvider& in, hid_t header, char const* name, Values const& values, Stored usual) {
  int const shape = in.ConsumeIntegralInRange<int>(0, 15);
  if (shape == 0) return;  // missing
  Stored const stored = shape == 1 ? pick_stored(in) : usual;
  std::vector<hsize_t> dims{6};
  if (shape == 2) dims = {};
  if (shape == 3) dims = {static_cast<hsize_t>(in.ConsumeIntegralInRange<int>(0, 8))};
  if (shape == 4) dims = {2, 3};
  write_attribute(header, name, stored, dims, values, "text", in.ConsumeBool());
}

/// A scalar attribute, usually of `usual`, sometimes another type, an array or absent.
void scalar_attribute(FuzzedDataProvider& in, hid_t location, char const* name, double typical) {
  int const shape = in.ConsumeIntegralInRange<int>(0, 9);
  if (shape == 0) return;
  Values values;
  values.real = {interesting_double(in, typical), interesting_double(in, typical)};
  values.integer = {integer_of(values.real[0]), in.ConsumeIntegral<std::uint64_t>()};
  Stored const stored = shape == 1 ? pick_stored(in) : Stored::F64;
  std::vector<hsize_t> dims;
  if (shape == 2) dims = {static_cast<hsize_t>(in.ConsumeIntegralInRange<int>(0, 3))};
  write_attribute(location, name, stored, dims, values, in.ConsumeRandomLengthString(16), in.ConsumeBool());
}

/// Per-particle values of a dataset: finite ones with some bad ones and duplicates mixed in.
Values particle_values(FuzzedDataProvider& in, std::size_t count, double typical, bool ids) {
  Values values;
  std::size_t const n = std::max<std::size_t>(1, std::min<std::size_t>(count, 64));
  for (std::size_t i = 0; i < n; ++i) {
    bool const bad = in.ConsumeIntegralInRange<int>(0, 15) == 0;
    values.real.push_back(bad ? interesting_double(in, typical) : typical * (1 + 0.1 * double(i)));
    std::uint64_t id = i + 1;
    if (ids && bad) id = in.ConsumeBool() ? in.ConsumeIntegral<std::uint64_t>() : 1;  // huge, negative or duplicate
    values.integer.push_back(id);
  }
  return values;
}

void particle_dataset(FuzzedDataProvider& in, hid_t group, char const* name, hsize_t n, int components, Stored usual,
                      double typical, bool optional) {
  int const presence = in.ConsumeIntegralInRange<int>(0, 15);
  if (presence == 0 || (optional && presence < 4)) return;
  Stored const stored = presence == 1 ? pick_stored(in) : usual;
  hsize_t const rows = presence == 2 ? pick_rows(in, n) : n;
  std::vector<hsize_t> dims;
  switch (presence == 3 ? in.ConsumeIntegralInRange<int>(0, 3) : (components == 1 ? 1 : 2)) {
    case 0:
      break;  // scalar
    case 1:
      dims = {rows};
      break;
    case 2:
      dims = {rows, static_cast<hsize_t>(presence == 3 ? in.ConsumeIntegralInRange<int>(0, 4) : components)};
      break;
    default:
      dims = {rows, static_cast<hsize_t>(components), 2};
      break;
  }
  std::size_t count = 1;
  for (auto d : dims) count = d > (1u << 20) ? (1u << 30) : count * d;
  bool const written = in.ConsumeIntegralInRange<int>(0, 15) != 0;
  write_dataset(group, name, stored, dims, particle_values(in, count, typical, std::string(name) == "ParticleIDs"),
                written, in.ConsumeBool());
}

/// One file of the snapshot with `n` particles of its own and `total` in all, `files` files.
void write_file(FuzzedDataProvider& in, std::string const& path, std::uint64_t n, std::uint64_t total, int files) {
  hid_t const file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) return;
  if (in.ConsumeIntegralInRange<int>(0, 31) != 0) {
    hid_t const header = H5Gcreate2(file, "Header", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    Values this_file, all, masses;
    for (int type = 0; type < 6; ++type) {
      bool const mutate = in.ConsumeIntegralInRange<int>(0, 7) == 0;
      this_file.integer.push_back(type == 1 ? (mutate ? interesting_count(in, n) : n) : (mutate ? 1 : 0));
      all.integer.push_back(type == 1 ? (mutate ? interesting_count(in, total) : total) : (mutate ? 1 : 0));
      masses.real.push_back(type == 1 && in.ConsumeBool() ? interesting_double(in, 0.5) : 0.0);
      this_file.real.push_back(static_cast<double>(this_file.integer.back()));
      all.real.push_back(static_cast<double>(all.integer.back()));
      masses.integer.push_back(integer_of(masses.real.back()));
    }
    header_array(in, header, "NumPart_ThisFile", this_file, Stored::U64);
    header_array(in, header, "NumPart_Total", all, Stored::U64);
    header_array(in, header, "MassTable", masses, Stored::F64);
    if (files > 1 || in.ConsumeIntegralInRange<int>(0, 3) == 0) {
      Values count;
      count.integer = {static_cast<std::uint64_t>(in.ConsumeBool() ? files : in.ConsumeIntegralInRange<int>(-2, 3))};
      count.real = {static_cast<double>(files)};
      write_attribute(header, "NumFilesPerSnapshot",
                      in.ConsumeIntegralInRange<int>(0, 7) == 0 ? pick_stored(in) : Stored::I32, {}, count);
    }
    scalar_attribute(in, header, "Time", 0.5);
    if (in.ConsumeBool()) scalar_attribute(in, header, "Redshift", 0.0);
    if (in.ConsumeBool()) scalar_attribute(in, header, "BoxSize", 10.0);
    H5Gclose(header);
  }
  if (in.ConsumeBool()) {
    hid_t const parameters = H5Gcreate2(file, "Parameters", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    scalar_attribute(in, parameters, "UnitLength_in_cm", 3.085678e21);
    scalar_attribute(in, parameters, "UnitMass_in_g", 1.989e43);
    scalar_attribute(in, parameters, "UnitVelocity_in_cm_per_s", 1e5);
    scalar_attribute(in, parameters, "GravityConstantInternal", 43007.1);
    int const extra = in.ConsumeIntegralInRange<int>(0, 3);
    for (int k = 0; k < extra; ++k) scalar_attribute(in, parameters, fmt::format("Extra{}", k).c_str(), 7);
    H5Gclose(parameters);
  }
  if (in.ConsumeBool()) {
    hid_t const config = H5Gcreate2(file, "Config", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int const extra = in.ConsumeIntegralInRange<int>(0, 3);
    for (int k = 0; k < extra; ++k) scalar_attribute(in, config, fmt::format("Option{}", k).c_str(), 1);
    H5Gclose(config);
  }
  if (in.ConsumeBool()) {
    hid_t const units = H5Gcreate2(file, "Units", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    Values none;
    int const shape = in.ConsumeIntegralInRange<int>(0, 4);
    if (shape > 0)
      write_attribute(units, "Name", shape == 1 ? pick_stored(in) : Stored::String,
                      shape == 2 ? std::vector<hsize_t>{2} : std::vector<hsize_t>{}, none,
                      in.ConsumeRandomLengthString(24), in.ConsumeBool());
    H5Gclose(units);
  }
  if (in.ConsumeIntegralInRange<int>(0, 15) != 0) {
    hid_t const group = H5Gcreate2(file, "PartType1", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    particle_dataset(in, group, "Coordinates", n, 3, in.ConsumeBool() ? Stored::F32 : Stored::F64, 1.0, false);
    particle_dataset(in, group, "Velocities", n, 3, in.ConsumeBool() ? Stored::F32 : Stored::F64, 1.0, false);
    particle_dataset(in, group, "ParticleIDs", n, 1, in.ConsumeBool() ? Stored::U32 : Stored::U64, 1.0, false);
    particle_dataset(in, group, "Masses", n, 1, Stored::F32, 0.5, in.ConsumeBool());
    particle_dataset(in, group, "Potential", n, 1, Stored::F32, -1.0, true);
    particle_dataset(in, group, "Acceleration", n, 3, Stored::F32, 1.0, true);
    H5Gclose(group);
  }
  H5Fclose(file);
}

void check_result(Particles<HostSpace> const& p, SnapshotHeader const* header, ForceFields const* fields) {
  if (p.num != p.num_total) finding(fmt::format("one rank read {} of {} particles", p.num, p.num_total));
  for (std::size_t i = 0; i < p.num; ++i) {
    for (int k = 0; k < 3; ++k)
      if (!std::isfinite(p.pos(i, k)) || !std::isfinite(p.vel(i, k)))
        finding(fmt::format("particle {} has a non-finite coordinate or velocity", i));
    if (!(p.mass(i) > 0) || !std::isfinite(p.mass(i))) finding(fmt::format("particle {} has mass {}", i, p.mass(i)));
  }
  if (header) {
    auto const& u = header->units;
    for (double v : {u.length_in_cm, u.mass_in_g, u.velocity_in_cm_per_s, u.G})
      if (!(v > 0) || !std::isfinite(v)) finding(fmt::format("units read as {}", v));
    if (!std::isfinite(header->time) || !std::isfinite(header->redshift) || !(header->box_size >= 0) ||
        !std::isfinite(header->box_size))
      finding(fmt::format("header time {} redshift {} box {}", header->time, header->redshift, header->box_size));
  }
  if (fields) {
    if (fields->potential.extent(0) != 0 && fields->potential.extent(0) != p.num) finding("potential not per particle");
    if (fields->acceleration.extent(0) != 0 && fields->acceleration.extent(0) != p.num)
      finding("acceleration not per particle");
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  environment();
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  clear_scratch();
  auto const dir = scratch_directory();
  int const files = in.ConsumeIntegralInRange<int>(0, 7) == 0 ? 2 : 1;
  std::uint64_t const n0 = in.ConsumeIntegralInRange<int>(0, 20);
  std::uint64_t const n1 = files > 1 ? in.ConsumeIntegralInRange<int>(0, 20) : 0;
  std::string path;
  if (files == 1) {
    path = (dir / "snapshot_000.hdf5").string();
    write_file(in, path, n0, n0, 1);
  } else {
    auto const snapdir = dir / "snapdir_000";
    std::filesystem::create_directories(snapdir);
    write_file(in, (snapdir / "snapshot_000.0.hdf5").string(), n0, n0 + n1, 2);
    if (in.ConsumeIntegralInRange<int>(0, 15) != 0)
      write_file(in, (snapdir / "snapshot_000.1.hdf5").string(), n1, n0 + n1, 2);
    path = in.ConsumeBool() ? snapdir.string() : (snapdir / "snapshot_000.0.hdf5").string();
  }
  bool const want_header = in.ConsumeBool(), want_fields = in.ConsumeBool();
  SnapshotHeader header;
  ForceFields fields;
  Particles<HostSpace> particles;
  try {
    particles =
        read_particles(environment().world(), path, want_header ? &header : nullptr, want_fields ? &fields : nullptr);
  } catch (Error const&) {
    count_outcome(false);
    return 0;
  }
  count_outcome(true);
  check_result(particles, want_header ? &header : nullptr, want_fields ? &fields : nullptr);
  return 0;
}
