#include <kfmm/io/particle_file.hpp>

#include <kfmm/core/error.hpp>
#include <kfmm/core/fault_injection.hpp>
#include <kfmm/io/hdf5_handle.hpp>

#include <kfmm/core/format.hpp>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <type_traits>

namespace kfmm {
namespace {

namespace fs = std::filesystem;
using io_detail::check;
using io_detail::checked;
using io_detail::Hdf5Handle;

constexpr char const* particle_group = "PartType1";
constexpr int particle_type = 1;  // GADGET-4 type index of our (collisionless) particles
constexpr double gadget_G_cgs = 6.6738e-8;
constexpr char const* unit_parameter_names[] = {"UnitLength_in_cm", "UnitMass_in_g", "UnitVelocity_in_cm_per_s",
                                                "GravityConstantInternal"};

// ---------------------------------------------------------------- attributes

Hdf5Handle scalar_space() { return checked(H5Screate(H5S_SCALAR), H5Sclose, "create a scalar dataspace"); }

Hdf5Handle vector_space(hsize_t n) { return checked(H5Screate_simple(1, &n, nullptr), H5Sclose, "create a dataspace"); }

void write_attribute(hid_t location, char const* name, hid_t file_type, hid_t memory_type, void const* data,
                     hsize_t count = 0) {
  Hdf5Handle const space = count == 0 ? scalar_space() : vector_space(count);
  Hdf5Handle const attribute = checked(H5Acreate2(location, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                                       H5Aclose, fmt::format("create attribute {}", name));
  check(H5Awrite(attribute.get(), memory_type, data), fmt::format("write attribute {}", name));
}

void write_double(hid_t location, char const* name, double value) {
  write_attribute(location, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value);
}

void write_string(hid_t location, char const* name, std::string const& value) {
  Hdf5Handle const type = checked(H5Tcopy(H5T_C_S1), H5Tclose, "copy the string type");
  check(H5Tset_size(type.get(), std::max<std::size_t>(1, value.size())), "set a string size");
  check(H5Tset_strpad(type.get(), H5T_STR_NULLTERM), "set the string padding");
  std::string padded = value;
  padded.resize(std::max<std::size_t>(1, value.size()), '\0');
  write_attribute(location, name, type.get(), type.get(), padded.data());
}

void write_value(hid_t location, std::string const& name, ParameterValue const& value) {
  if (auto const* integer = std::get_if<std::int64_t>(&value)) {
    bool const fits = *integer >= std::numeric_limits<std::int32_t>::min() &&
                      *integer <= std::numeric_limits<std::int32_t>::max();
    if (fits) {
      std::int32_t const narrow = static_cast<std::int32_t>(*integer);
      write_attribute(location, name.c_str(), H5T_STD_I32LE, H5T_NATIVE_INT32, &narrow);
    } else {
      write_attribute(location, name.c_str(), H5T_STD_I64LE, H5T_NATIVE_INT64, integer);
    }
  } else if (auto const* real = std::get_if<double>(&value)) {
    write_double(location, name.c_str(), *real);
  } else {
    write_string(location, name.c_str(), std::get<std::string>(value));
  }
}

/// Reads any numeric or string attribute as a ParameterValue.
ParameterValue read_value(hid_t attribute, std::string const& name, std::string const& path) {
  // One value is read into one variable: an array attribute would overflow it.
  Hdf5Handle const space = checked(H5Aget_space(attribute), H5Sclose, "read an attribute dataspace");
  hssize_t const points = H5Sget_simple_extent_npoints(space.get());
  if (points != 1)
    fail("particle file {}: attribute {} has {} values; kfmm reads only single-valued attributes there (remove it "
         "or store one value)",
         path, name, points);
  Hdf5Handle const type = checked(H5Aget_type(attribute), H5Tclose, "read an attribute type");
  switch (H5Tget_class(type.get())) {
    case H5T_INTEGER: {
      std::int64_t value = 0;
      check(H5Aread(attribute, H5T_NATIVE_INT64, &value), fmt::format("read attribute {}", name));
      return value;
    }
    case H5T_FLOAT: {
      double value = 0;
      check(H5Aread(attribute, H5T_NATIVE_DOUBLE, &value), fmt::format("read attribute {}", name));
      return value;
    }
    case H5T_STRING: {
      if (H5Tis_variable_str(type.get()) > 0) {
        Hdf5Handle const memory = checked(H5Tcopy(H5T_C_S1), H5Tclose, "copy the string type");
        check(H5Tset_size(memory.get(), H5T_VARIABLE), "set a string size");
        char* text = nullptr;
        check(H5Aread(attribute, memory.get(), &text), fmt::format("read attribute {}", name));
        std::string value = text ? text : "";
        H5free_memory(text);
        return value;
      }
      std::string value(H5Tget_size(type.get()), '\0');
      check(H5Aread(attribute, type.get(), value.data()), fmt::format("read attribute {}", name));
      value.resize(value.find('\0') == std::string::npos ? value.size() : value.find('\0'));
      return value;
    }
    default:
      fail("particle file {}: attribute {} has an HDF5 type kfmm does not read (expected integer, float or string)",
           path, name);
  }
}

/// All attributes of `location`, in name order.
std::vector<std::pair<std::string, ParameterValue>> read_all_attributes(hid_t location, std::string const& path,
                                                                         std::string const& group) {
  // The C callback only collects names: exceptions must not cross HDF5's C frames.
  std::vector<std::string> names;
  auto const collect = [](hid_t, char const* name, H5A_info_t const*, void* data) -> herr_t {
    static_cast<std::vector<std::string>*>(data)->emplace_back(name);
    return 0;
  };
  hsize_t position = 0;
  check(H5Aiterate2(location, H5_INDEX_NAME, H5_ITER_INC, &position, collect, &names), "iterate over attributes");
  std::vector<std::pair<std::string, ParameterValue>> values;
  for (auto const& name : names) {
    Hdf5Handle const attribute =
        checked(H5Aopen(location, name.c_str(), H5P_DEFAULT), H5Aclose, fmt::format("open attribute {}", name));
    values.emplace_back(name, read_value(attribute.get(), group + "/" + name, path));
  }
  return values;
}

// ---------------------------------------------------------------- units

/// GADGET-4's unit metadata of one dataset: dimension exponents of length, mass, velocity.
struct Dimension {
  double length = 0, mass = 0, velocity = 0;
};

constexpr Dimension position_dimension{1, 0, 0};
constexpr Dimension velocity_dimension{0, 0, 1};
constexpr Dimension mass_dimension{0, 1, 0};
constexpr Dimension potential_dimension{0, 0, 2};
constexpr Dimension acceleration_dimension{-1, 0, 2};

void write_unit_attributes(hid_t dataset, Dimension const& dimension, UnitSystem const& units) {
  // Non-comoving runs: GADGET-4 writes a_scaling = h_scaling = 0.
  write_double(dataset, "a_scaling", 0.0);
  write_double(dataset, "h_scaling", 0.0);
  write_double(dataset, "length_scaling", dimension.length);
  write_double(dataset, "mass_scaling", dimension.mass);
  write_double(dataset, "velocity_scaling", dimension.velocity);
  write_double(dataset, "to_cgs", std::pow(units.length_in_cm, dimension.length) *
                                      std::pow(units.mass_in_g, dimension.mass) *
                                      std::pow(units.velocity_in_cm_per_s, dimension.velocity));
}

// ---------------------------------------------------------------- paths

/// "snapdir_007" -> "snapshot_007"; any other directory name is used as is.
std::string file_stem_of_directory(fs::path const& directory) {
  std::string const name = directory.filename().string();
  std::string const prefix = "snapdir_";
  if (name.compare(0, prefix.size(), prefix) == 0) return "snapshot_" + name.substr(prefix.size());
  return name;
}

fs::path member_file(fs::path const& directory, std::string const& stem, int index) {
  return directory / fmt::format("{}.{}.hdf5", stem, index);
}

/// A path without trailing separators, so that filename() names the last component.
fs::path normalised(std::string const& path) {
  fs::path p(path);
  if (!p.has_filename()) p = p.parent_path();
  return p;
}

// ---------------------------------------------------------------- writing

/// Which rows of one file this rank writes.
struct FileSlice {
  std::uint64_t file_count = 0;   // particles in this file
  std::uint64_t first_row = 0;    // of this rank's particles in the file
  bool collective = false;        // several ranks share the file (MPI-IO)
  int files_per_snapshot = 1;
};

class SnapshotFileWriter {
 public:
  SnapshotFileWriter(hid_t file, FileSlice const& slice, ParticleFileOptions const& options, UnitSystem const& units,
                     std::size_t local_count)
      : file_(file), slice_(slice), options_(options), units_(units), local_(local_count) {
    transfer_ = checked(H5Pcreate(H5P_DATASET_XFER), H5Pclose, "create a transfer property list");
    if (slice.collective) check(H5Pset_dxpl_mpio(transfer_.get(), H5FD_MPIO_COLLECTIVE), "select collective MPI-IO");
  }

  void write_header(SnapshotHeader const& header, std::uint64_t total) {
    Hdf5Handle const group = make_group("Header");
    std::array<std::uint64_t, 6> this_file{}, all{};
    this_file[particle_type] = slice_.file_count;
    all[particle_type] = total;
    std::array<double, 6> const mass_table{};  // masses are always in /PartType1/Masses
    write_attribute(group.get(), "NumPart_ThisFile", H5T_STD_U64LE, H5T_NATIVE_UINT64, this_file.data(), 6);
    write_attribute(group.get(), "NumPart_Total", H5T_STD_U64LE, H5T_NATIVE_UINT64, all.data(), 6);
    write_attribute(group.get(), "MassTable", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, mass_table.data(), 6);
    write_double(group.get(), "Time", header.time);
    write_double(group.get(), "Redshift", header.redshift);
    write_double(group.get(), "BoxSize", header.box_size);
    std::int32_t const files = slice_.files_per_snapshot;
    write_attribute(group.get(), "NumFilesPerSnapshot", H5T_STD_I32LE, H5T_NATIVE_INT32, &files);

    Hdf5Handle const parameters = make_group("Parameters");
    write_double(parameters.get(), "UnitLength_in_cm", header.units.length_in_cm);
    write_double(parameters.get(), "UnitMass_in_g", header.units.mass_in_g);
    write_double(parameters.get(), "UnitVelocity_in_cm_per_s", header.units.velocity_in_cm_per_s);
    write_double(parameters.get(), "GravityConstantInternal", header.units.G);
    for (auto const& [name, value] : header.parameters) {
      if (std::find(std::begin(unit_parameter_names), std::end(unit_parameter_names), name) !=
          std::end(unit_parameter_names))
        fail("parameter {} is written from SnapshotHeader::units; remove it from SnapshotHeader::parameters", name);
      if (H5Aexists(parameters.get(), name.c_str()) > 0)
        fail("parameter {} appears twice in SnapshotHeader::parameters; set it with SnapshotHeader::set_parameter",
             name);
      write_value(parameters.get(), name, value);
    }
    Hdf5Handle const config = make_group("Config");
    for (auto const& [name, value] : header.config) write_value(config.get(), name, value);

    Hdf5Handle const units = make_group("Units");
    write_string(units.get(), "Name", header.units.name);
    write_double(units.get(), "UnitLength_in_cm", header.units.length_in_cm);
    write_double(units.get(), "UnitMass_in_g", header.units.mass_in_g);
    write_double(units.get(), "UnitVelocity_in_cm_per_s", header.units.velocity_in_cm_per_s);
    write_double(units.get(), "UnitTime_in_s", header.units.time_in_s());
    write_double(units.get(), "GravityConstantInternal", header.units.G);
  }

  void write_particles(Particles<HostSpace> const& p, ForceFields const* fields) {
    if (slice_.file_count == 0) return;  // GADGET-4 writes PartType<k> only for types with particles
    particles_ = make_group(particle_group);
    if (options_.precision == Precision::Float)
      write_fields<float>(p, fields);
    else
      write_fields<double>(p, fields);
    particles_.reset();
  }

 private:
  template <class Value>
  void write_fields(Particles<HostSpace> const& p, ForceFields const* fields) {
    write_vectors<Value>("Coordinates", p.pos, position_dimension);
    write_vectors<Value>("Velocities", p.vel, velocity_dimension);
    write_rows("ParticleIDs", H5T_STD_U64LE, H5T_NATIVE_UINT64, 1, p.id.data(), nullptr);
    fault_injection::point("snapshot.dataset");
    write_scalars<Value>("Masses", p.mass, mass_dimension);
    if (fields && fields->potential.extent(0) > 0)
      write_scalars<Value>("Potential", fields->potential, potential_dimension);
    if (fields && fields->acceleration.extent(0) > 0)
      write_vectors<Value>("Acceleration", fields->acceleration, acceleration_dimension);
    if (fields)
      for (auto const& extra : fields->extra) {
        if (extra.integer) {
          write_rows(extra.name.c_str(), H5T_STD_U64LE, H5T_NATIVE_UINT64, extra.columns, extra.integers.data(), nullptr);
        } else {
          std::vector<Value> rows(extra.values.begin(), extra.values.end());
          write_rows(extra.name.c_str(), file_type<Value>(), memory_type<Value>(), extra.columns, rows.data(), nullptr);
        }
        fault_injection::point("snapshot.dataset");
      }
    if (fields && fields->group_number.extent(0) > 0) {
      write_rows("GroupNr", H5T_STD_I64LE, H5T_NATIVE_INT64, 1, fields->group_number.data(), nullptr);
      fault_injection::point("snapshot.dataset");
    }
  }

  Hdf5Handle make_group(char const* name) const {
    return checked(H5Gcreate2(file_, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
                   fmt::format("create group /{}", name));
  }

  // Values are converted to the stored precision here, not by HDF5: HDF5 1.10 cannot convert
  // types in collective writes of filtered (compressed) datasets.
  template <class Value>
  void write_vectors(char const* name, Vec3View<double, HostSpace> const& view, Dimension const& dimension) {
    // LayoutLeft (x contiguous) to the file's row-major (N, 3).
    std::vector<Value> rows(3 * local_);
    for (std::size_t i = 0; i < local_; ++i)
      for (int k = 0; k < 3; ++k) rows[3 * i + k] = static_cast<Value>(view(i, k));
    write_rows(name, file_type<Value>(), memory_type<Value>(), 3, rows.data(), &dimension);
    fault_injection::point("snapshot.dataset");
  }

  template <class Value>
  void write_scalars(char const* name, ScalarView<double, HostSpace> const& view, Dimension const& dimension) {
    std::vector<Value> rows(view.data(), view.data() + local_);
    write_rows(name, file_type<Value>(), memory_type<Value>(), 1, rows.data(), &dimension);
    fault_injection::point("snapshot.dataset");
  }

  template <class Value>
  static hid_t file_type() {
    return std::is_same_v<Value, float> ? H5T_IEEE_F32LE : H5T_IEEE_F64LE;
  }
  template <class Value>
  static hid_t memory_type() {
    return std::is_same_v<Value, float> ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE;
  }

  /// Creates dataset `name` of shape (file_count[, components]) and writes this rank's rows.
  void write_rows(char const* name, hid_t file_type, hid_t memory_type, hsize_t components, void const* data,
                  Dimension const* dimension) {
    int const rank = components == 1 ? 1 : 2;
    std::array<hsize_t, 2> const dims{slice_.file_count, components};
    Hdf5Handle const file_space = checked(H5Screate_simple(rank, dims.data(), nullptr), H5Sclose,
                                          fmt::format("create the dataspace of {}", name));
    Hdf5Handle const creation = checked(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "create a dataset property list");
    if (options_.compression > 0) {
      // Filters need chunks; collective writes of filtered datasets need HDF5 >= 1.10.2.
      std::array<hsize_t, 2> const chunk{std::min<hsize_t>(slice_.file_count, 65536), components};
      check(H5Pset_chunk(creation.get(), rank, chunk.data()), fmt::format("chunk {}", name));
      check(H5Pset_shuffle(creation.get()), fmt::format("set the shuffle filter of {}", name));
      check(H5Pset_deflate(creation.get(), static_cast<unsigned>(options_.compression)),
            fmt::format("set the deflate filter of {}", name));
    }
    Hdf5Handle const dataset = checked(H5Dcreate2(particles_.get(), name, file_type, file_space.get(), H5P_DEFAULT,
                                                  creation.get(), H5P_DEFAULT),
                                       H5Dclose, fmt::format("create dataset /{}/{}", particle_group, name));
    std::array<hsize_t, 2> const start{slice_.first_row, 0};
    std::array<hsize_t, 2> const count{local_, components};
    Hdf5Handle const memory_space = checked(H5Screate_simple(rank, count.data(), nullptr), H5Sclose,
                                            fmt::format("create the memory dataspace of {}", name));
    if (local_ > 0) {
      check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
            fmt::format("select this rank's rows of {}", name));
    } else {  // ranks without particles still take part in the collective write
      check(H5Sselect_none(file_space.get()), "select no rows");
      check(H5Sselect_none(memory_space.get()), "select no rows");
    }
    double const dummy = 0;
    check(H5Dwrite(dataset.get(), memory_type, memory_space.get(), file_space.get(), transfer_.get(),
                   local_ > 0 ? data : &dummy),
          fmt::format("write dataset /{}/{}", particle_group, name));
    if (dimension) write_unit_attributes(dataset.get(), *dimension, units_);
  }

  hid_t file_;
  FileSlice slice_;
  ParticleFileOptions options_;
  UnitSystem units_;
  std::size_t local_;
  Hdf5Handle transfer_;
  Hdf5Handle particles_;
};

void check_write_input(Particles<HostSpace> const& particles, ParticleFileOptions const& options,
                       ForceFields const* fields) {
  if (options.compression < 0 || options.compression > 9)
    fail("compression level {} is out of range; use 0 (none) or 1..9 (deflate level)", options.compression);
  if (options.compression > 0 && H5Zfilter_avail(H5Z_FILTER_DEFLATE) <= 0)
    fail("this HDF5 library has no deflate filter; write with compression 0");
  if (particles.num > particles.capacity())
    fail("particles.num = {} exceeds their capacity {}", particles.num, particles.capacity());
  if (!fields) return;
  if (fields->potential.extent(0) > 0 && fields->potential.extent(0) < particles.num)
    fail("ForceFields::potential has {} entries for {} particles; give one per particle or none",
         fields->potential.extent(0), particles.num);
  if (fields->acceleration.extent(0) > 0 && fields->acceleration.extent(0) < particles.num)
    fail("ForceFields::acceleration has {} entries for {} particles; give one per particle or none",
         fields->acceleration.extent(0), particles.num);
  for (auto const& extra : fields->extra) {
    std::size_t const given = extra.integer ? extra.integers.size() : extra.values.size();
    if (extra.columns < 1 || given != extra.columns * particles.num)
      fail("extra dataset {} has {} values for {} particles x {} columns; give columns >= 1 values per particle",
           extra.name, given, particles.num, extra.columns);
  }
  if (fields->group_number.extent(0) > 0 && fields->group_number.extent(0) < particles.num)
    fail("ForceFields::group_number has {} entries for {} particles; give one per particle or none",
         fields->group_number.extent(0), particles.num);
}

/// Presence flags must agree: a dataset is written by all ranks or none.
bool present_on_any_rank(Context const& context, bool present) {
  int mine = present ? 1 : 0, any = 0;
  MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, context.comm());
  return any != 0;
}

void write_one_file(fs::path const& file_path, MPI_Comm comm, FileSlice const& slice,
                    Particles<HostSpace> const& particles, SnapshotHeader const& header,
                    ParticleFileOptions const& options, ForceFields const* fields, std::uint64_t total) {
  Hdf5Handle const access = checked(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "create a file access property list");
  if (slice.collective) check(H5Pset_fapl_mpio(access.get(), comm, MPI_INFO_NULL), "select the MPI-IO driver");
  Hdf5Handle file = checked(H5Fcreate(file_path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get()), H5Fclose,
                            fmt::format("create file {}", file_path.string()));
  {
    SnapshotFileWriter writer(file.get(), slice, options, header.units, particles.num);
    writer.write_header(header, total);
    writer.write_particles(particles, fields);
  }
  file.close(file_path.string());
}

// ---------------------------------------------------------------- reading

struct FileInfo {
  std::string path;
  std::uint64_t count = 0;  // NumPart_ThisFile[1]
  std::uint64_t total = 0;  // NumPart_Total[1]
  double table_mass = 0;    // MassTable[1]
  int files_per_snapshot = 1;
};

Hdf5Handle open_file(std::string const& path) {
  if (!fs::exists(path)) fail("particle file {} does not exist; check the path", path);
  if (H5Fis_hdf5(path.c_str()) <= 0) fail("particle file {} is not an HDF5 file", path);
  return checked(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose, fmt::format("open file {}", path));
}

Hdf5Handle open_group(hid_t file, std::string const& path, char const* name) {
  if (H5Lexists(file, name, H5P_DEFAULT) <= 0)
    fail("particle file {} has no group /{}; is it a GADGET-4 (format 3) snapshot?", path, name);
  return checked(H5Gopen2(file, name, H5P_DEFAULT), H5Gclose, fmt::format("open group /{} in {}", name, path));
}

/// Reads a numeric attribute of `count` values (1 for scalars) as `memory_type`.
void read_attribute(hid_t group, std::string const& path, std::string const& where, char const* name,
                    hid_t memory_type, void* data, hssize_t count) {
  if (H5Aexists(group, name) <= 0) fail("particle file {}: {} has no attribute {}", path, where, name);
  Hdf5Handle const attribute = checked(H5Aopen(group, name, H5P_DEFAULT), H5Aclose, fmt::format("open {}", name));
  Hdf5Handle const space = checked(H5Aget_space(attribute.get()), H5Sclose, "read an attribute dataspace");
  hssize_t const points = H5Sget_simple_extent_npoints(space.get());
  if (points != count)
    fail("particle file {}: attribute {}/{} has {} values, expected {}", path, where, name, points, count);
  check(H5Aread(attribute.get(), memory_type, data), fmt::format("read attribute {}/{} of {}", where, name, path));
}

FileInfo read_file_info(std::string const& path) {
  Hdf5Handle const file = open_file(path);
  Hdf5Handle const header = open_group(file.get(), path, "Header");
  FileInfo info;
  info.path = path;
  std::array<std::uint64_t, 6> this_file{}, total{};
  std::array<double, 6> mass_table{};
  read_attribute(header.get(), path, "/Header", "NumPart_ThisFile", H5T_NATIVE_UINT64, this_file.data(), 6);
  read_attribute(header.get(), path, "/Header", "NumPart_Total", H5T_NATIVE_UINT64, total.data(), 6);
  read_attribute(header.get(), path, "/Header", "MassTable", H5T_NATIVE_DOUBLE, mass_table.data(), 6);
  std::int32_t files = 1;
  if (H5Aexists(header.get(), "NumFilesPerSnapshot") > 0)
    read_attribute(header.get(), path, "/Header", "NumFilesPerSnapshot", H5T_NATIVE_INT32, &files, 1);
  for (int type = 0; type < 6; ++type)
    if (type != particle_type && total[type] != 0)
      fail("particle file {}: NumPart_Total[{}] = {}; kfmm reads only type {} (PartType1) particles", path, type,
           total[type], particle_type);
  info.count = this_file[particle_type];
  info.total = total[particle_type];
  info.table_mass = mass_table[particle_type];
  info.files_per_snapshot = files;
  return info;
}

/// The files of the snapshot at `path`: itself, or every member of its multi-file set.
std::vector<FileInfo> find_snapshot_files(std::string const& path) {
  fs::path const given = normalised(path);
  fs::path first;
  std::string stem;
  if (fs::is_directory(given)) {
    for (auto const& entry : fs::directory_iterator(given)) {
      std::string const name = entry.path().filename().string();
      std::string const suffix = ".0.hdf5";
      if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        first = entry.path();
        stem = name.substr(0, name.size() - suffix.size());
      }
    }
    if (first.empty())
      fail("directory {} holds no file NAME.0.hdf5 of a multi-file snapshot; pass the snapshot file instead", path);
  } else {
    first = given;
  }
  std::vector<FileInfo> files{read_file_info(first.string())};
  if (files.front().files_per_snapshot <= 1) return files;
  if (stem.empty()) {
    // NAME.i.hdf5 -> NAME
    std::string const name = first.filename().string();
    std::size_t const dot_hdf5 = name.rfind(".hdf5");
    std::size_t const dot_index = dot_hdf5 == std::string::npos ? dot_hdf5 : name.rfind('.', dot_hdf5 - 1);
    if (dot_index == std::string::npos || dot_index == 0)
      fail("particle file {} says NumFilesPerSnapshot = {} but its name is not NAME.i.hdf5", path,
           files.front().files_per_snapshot);
    stem = name.substr(0, dot_index);
  }
  fs::path const directory = first.parent_path();
  int const count = files.front().files_per_snapshot;
  files.clear();
  for (int i = 0; i < count; ++i) {
    files.push_back(read_file_info(member_file(directory, stem, i).string()));
    if (files.back().files_per_snapshot != count)
      fail("particle file {} says NumFilesPerSnapshot = {}, but {} says {}", files.back().path,
           files.back().files_per_snapshot, files.front().path, count);
  }
  return files;
}

/// Checks that `/PartType1/name` exists with shape (count[, components]); false if absent and optional.
bool check_dataset(hid_t group, FileInfo const& info, char const* name, hsize_t components, bool required) {
  if (H5Lexists(group, name, H5P_DEFAULT) <= 0) {
    if (required) fail("particle file {} has no dataset /{}/{}", info.path, particle_group, name);
    return false;
  }
  Hdf5Handle const dataset = checked(H5Dopen2(group, name, H5P_DEFAULT), H5Dclose,
                                     fmt::format("open dataset /{}/{} in {}", particle_group, name, info.path));
  Hdf5Handle const space = checked(H5Dget_space(dataset.get()), H5Sclose, "read a dataspace");
  int const rank = H5Sget_simple_extent_ndims(space.get());
  std::array<hsize_t, 2> dims{0, 0};
  if (rank >= 1 && rank <= 2) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  int const expected_rank = components == 1 ? 1 : 2;
  bool const shape_ok = rank == expected_rank && dims[0] == info.count && (rank == 1 || dims[1] == components);
  if (!shape_ok) {
    std::string const shape = rank == 1   ? fmt::format("({})", dims[0])
                              : rank == 2 ? fmt::format("({}, {})", dims[0], dims[1])
                                          : fmt::format("rank {}", rank);
    std::string const expected = components == 1 ? fmt::format("({})", info.count)
                                                 : fmt::format("({}, {})", info.count, components);
    fail("particle file {}: dataset /{}/{} has shape {}, expected {} (NumPart_ThisFile[1] = {})", info.path,
         particle_group, name, shape, expected, info.count);
  }
  Hdf5Handle const type = checked(H5Dget_type(dataset.get()), H5Tclose, "read a dataset type");
  H5T_class_t const type_class = H5Tget_class(type.get());
  bool const integer = std::string(name) == "ParticleIDs";
  if (type_class != (integer ? H5T_INTEGER : H5T_FLOAT))
    fail("particle file {}: dataset /{}/{} has type class {}, expected {}", info.path, particle_group, name,
         static_cast<int>(type_class), integer ? "integer" : "floating point");
  // The shape may declare rows that were never written (HDF5 allocates storage on the first
  // write): reading them would allocate memory for fill values, however large the count.
  if (info.count > 0) {
    io_detail::Stored const stored = io_detail::stored_extent(dataset.get());
    if (stored != io_detail::Stored::All)
      fail("particle file {}: dataset /{}/{} declares {} rows but stores {} of them (created, not {}written); "
           "write the file again",
           info.path, particle_group, name, info.count, stored == io_detail::Stored::None ? "none" : "only some",
           stored == io_detail::Stored::None ? "" : "fully ");
  }
  return true;
}

/// Whether /PartType1/ParticleIDs is a signed integer type (whose negative values are no ids).
bool signed_ids(hid_t group) {
  Hdf5Handle const dataset = checked(H5Dopen2(group, "ParticleIDs", H5P_DEFAULT), H5Dclose, "open ParticleIDs");
  Hdf5Handle const type = checked(H5Dget_type(dataset.get()), H5Tclose, "read a dataset type");
  return H5Tget_sign(type.get()) == H5T_SGN_2;
}

/// Reads rows [first, first + rows) of a dataset into `out` (row-major, `components` per row).
void read_rows(hid_t group, FileInfo const& info, char const* name, hid_t memory_type, hsize_t components,
               hsize_t first, hsize_t rows, void* out) {
  Hdf5Handle const dataset = checked(H5Dopen2(group, name, H5P_DEFAULT), H5Dclose,
                                     fmt::format("open dataset /{}/{} in {}", particle_group, name, info.path));
  Hdf5Handle const file_space = checked(H5Dget_space(dataset.get()), H5Sclose, "read a dataspace");
  int const rank = components == 1 ? 1 : 2;
  std::array<hsize_t, 2> const start{first, 0}, count{rows, components};
  check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
        "select rows");
  Hdf5Handle const memory_space = checked(H5Screate_simple(rank, count.data(), nullptr), H5Sclose,
                                          "create a memory dataspace");
  check(H5Dread(dataset.get(), memory_type, memory_space.get(), file_space.get(), H5P_DEFAULT, out),
        fmt::format("read dataset /{}/{} of {}", particle_group, name, info.path));
}

struct DatasetPresence {
  bool masses = false, potential = false, acceleration = false;
};

/// Per file: whether its ParticleIDs are stored signed (read as int64, negatives rejected).
using SignedIds = std::vector<bool>;

/// Checks every file's structure (all ranks see the same files, so all reach the same verdict).
DatasetPresence check_structure(std::vector<FileInfo> const& files, SignedIds& signed_ids_of) {
  std::uint64_t sum = 0;
  signed_ids_of.assign(files.size(), false);
  for (auto const& info : files) {
    if (sum + info.count < sum)
      fail("particle file {}: NumPart_ThisFile[1] = {} makes the files hold more than 2^64 particles", info.path,
           info.count);
    sum += info.count;
    if (info.total != files.front().total)
      fail("particle file {} says NumPart_Total[1] = {}, but {} says {}", info.path, info.total, files.front().path,
           files.front().total);
  }
  if (sum != files.front().total)
    fail("particle file {}: NumPart_Total[1] = {} but the files hold {} particles (sum of NumPart_ThisFile[1])",
         files.front().path, files.front().total, sum);
  std::optional<DatasetPresence> presence;
  for (std::size_t f = 0; f < files.size(); ++f) {
    FileInfo const& info = files[f];
    if (info.count == 0) continue;
    Hdf5Handle const file = open_file(info.path);
    Hdf5Handle const group = open_group(file.get(), info.path, particle_group);
    check_dataset(group.get(), info, "Coordinates", 3, true);
    check_dataset(group.get(), info, "Velocities", 3, true);
    check_dataset(group.get(), info, "ParticleIDs", 1, true);
    signed_ids_of[f] = signed_ids(group.get());
    DatasetPresence here;
    here.masses = check_dataset(group.get(), info, "Masses", 1, false);
    here.potential = check_dataset(group.get(), info, "Potential", 1, false);
    here.acceleration = check_dataset(group.get(), info, "Acceleration", 3, false);
    if (!here.masses && !(info.table_mass > 0))
      fail("particle file {} has no dataset /{}/Masses and /Header MassTable[1] = {}; one of them must give the masses",
           info.path, particle_group, info.table_mass);
    if (presence && (presence->potential != here.potential || presence->acceleration != here.acceleration))
      fail("particle file {} differs from the other files of its snapshot in having Potential/Acceleration",
           info.path);
    presence = here;
  }
  return presence.value_or(DatasetPresence{});
}

/// Copies row-major (n, 3) rows into a LayoutLeft view starting at `at`.
void scatter_rows(std::vector<double> const& rows, Vec3View<double, HostSpace> const& view, std::size_t at) {
  for (std::size_t i = 0; i < rows.size() / 3; ++i)
    for (int k = 0; k < 3; ++k) view(at + i, k) = rows[3 * i + k];
}

void read_local_slice(std::vector<FileInfo> const& files, DatasetPresence const& presence,
                      SignedIds const& signed_ids_of, std::uint64_t begin, Particles<HostSpace>& particles,
                      ForceFields* fields) {
  std::uint64_t file_begin = 0;
  std::uint64_t const end = begin + particles.num;
  for (std::size_t f = 0; f < files.size(); ++f) {
    FileInfo const& info = files[f];
    std::uint64_t const file_end = file_begin + info.count;
    std::uint64_t const lo = std::max(begin, file_begin), hi = std::min(end, file_end);
    if (lo < hi) {
      hsize_t const first = lo - file_begin, rows = hi - lo;
      std::size_t const at = lo - begin;
      Hdf5Handle const file = open_file(info.path);
      Hdf5Handle const group = open_group(file.get(), info.path, particle_group);
      std::vector<double> buffer(3 * rows);
      read_rows(group.get(), info, "Coordinates", H5T_NATIVE_DOUBLE, 3, first, rows, buffer.data());
      scatter_rows(buffer, particles.pos, at);
      read_rows(group.get(), info, "Velocities", H5T_NATIVE_DOUBLE, 3, first, rows, buffer.data());
      scatter_rows(buffer, particles.vel, at);
      if (signed_ids_of[f]) {
        // HDF5 would clip negative values to id 0 when converting to unsigned.
        std::vector<std::int64_t> ids(rows);
        read_rows(group.get(), info, "ParticleIDs", H5T_NATIVE_INT64, 1, first, rows, ids.data());
        for (std::size_t i = 0; i < rows; ++i) {
          if (ids[i] < 0)
            fail("particle file {}: /{}/ParticleIDs holds the negative id {} (row {} of the file); ids must be "
                 "≥ 0",
                 info.path, particle_group, ids[i], first + i);
          particles.id(at + i) = static_cast<std::uint64_t>(ids[i]);
        }
      } else {
        read_rows(group.get(), info, "ParticleIDs", H5T_NATIVE_UINT64, 1, first, rows, particles.id.data() + at);
      }
      if (presence.masses)
        read_rows(group.get(), info, "Masses", H5T_NATIVE_DOUBLE, 1, first, rows, particles.mass.data() + at);
      else
        for (std::size_t i = 0; i < rows; ++i) particles.mass(at + i) = info.table_mass;
      if (fields && presence.potential)
        read_rows(group.get(), info, "Potential", H5T_NATIVE_DOUBLE, 1, first, rows, fields->potential.data() + at);
      if (fields && presence.acceleration) {
        read_rows(group.get(), info, "Acceleration", H5T_NATIVE_DOUBLE, 3, first, rows, buffer.data());
        scatter_rows(buffer, fields->acceleration, at);
      }
    }
    file_begin = file_end;
  }
}

/// The file holding global particle `index` (for error messages).
std::string const& file_of(std::vector<FileInfo> const& files, std::uint64_t index) {
  for (auto const& info : files) {
    if (index < info.count) return info.path;
    index -= info.count;
  }
  return files.back().path;
}

void check_values(std::vector<FileInfo> const& files, Particles<HostSpace> const& p, std::uint64_t begin) {
  for (std::size_t i = 0; i < p.num; ++i) {
    auto const finite = [&](Vec3View<double, HostSpace> const& v) {
      return std::isfinite(v(i, 0)) && std::isfinite(v(i, 1)) && std::isfinite(v(i, 2));
    };
    char const* bad = !finite(p.pos) ? "Coordinates" : !finite(p.vel) ? "Velocities" : nullptr;
    if (bad) {
      auto const& v = std::string(bad) == "Coordinates" ? p.pos : p.vel;
      fail("particle file {}: /{}/{} of particle id {} (row {} of the snapshot) is ({}, {}, {}), not finite",
           file_of(files, begin + i), particle_group, bad, p.id(i), begin + i, v(i, 0), v(i, 1), v(i, 2));
    }
    if (!(p.mass(i) > 0) || !std::isfinite(p.mass(i)))
      fail("particle file {}: mass of particle id {} (row {} of the snapshot) is {}; masses must be positive and "
           "finite",
           file_of(files, begin + i), p.id(i), begin + i, p.mass(i));
  }
}

// Rows are the global particle order, which read_particles makes the file order.
void apply_duplicate_id_policy(Context const& context, std::string const& path, Particles<HostSpace>& particles,
                               DuplicateIdPolicy policy) {
  if (policy == DuplicateIdPolicy::Keep) return;
  if (policy == DuplicateIdPolicy::Renumber) return renumber_ids(context, particles);
  IdRepeats const repeats = find_repeated_ids(context, particles);
  if (!repeats) return;
  std::string const message = fmt::format(
      "particle file {}: /{}/ParticleIDs repeats ids: {}; ids must be unique (they match results to particles). Fix "
      "the file, or have kfmm replace every id by its row + 1 (1..N): `--duplicate-ids renumber` on the command "
      "line, `ic.duplicate_ids: renumber` in a run file, DuplicateIdPolicy::Renumber in the library",
      path, particle_group, describe(repeats));
  agree_on_error(context, context.is_root() ? message : std::string());
}

void read_header(std::string const& path, SnapshotHeader& header) {
  Hdf5Handle const file = open_file(path);
  Hdf5Handle const group = open_group(file.get(), path, "Header");
  read_attribute(group.get(), path, "/Header", "Time", H5T_NATIVE_DOUBLE, &header.time, 1);
  header.redshift = header.box_size = 0;
  if (H5Aexists(group.get(), "Redshift") > 0)
    read_attribute(group.get(), path, "/Header", "Redshift", H5T_NATIVE_DOUBLE, &header.redshift, 1);
  if (H5Aexists(group.get(), "BoxSize") > 0)
    read_attribute(group.get(), path, "/Header", "BoxSize", H5T_NATIVE_DOUBLE, &header.box_size, 1);
  for (auto const& [name, value] : {std::pair<char const*, double>{"Time", header.time}, {"Redshift", header.redshift},
                                    {"BoxSize", header.box_size}})
    if (!std::isfinite(value))
      fail("particle file {}: /Header {} = {} is not finite; fix the attribute", path, name, value);
  if (header.box_size < 0)
    fail("particle file {}: /Header BoxSize = {} is negative; use 0 (not periodic) or the box length", path,
         header.box_size);

  header.parameters.clear();
  header.config.clear();
  std::map<std::string, double> unit_values;
  if (H5Lexists(file.get(), "Parameters", H5P_DEFAULT) > 0) {
    Hdf5Handle const parameters = open_group(file.get(), path, "Parameters");
    for (auto& [name, value] : read_all_attributes(parameters.get(), path, "/Parameters")) {
      bool const is_unit = std::find(std::begin(unit_parameter_names), std::end(unit_parameter_names), name) !=
                           std::end(unit_parameter_names);
      if (!is_unit) {
        header.parameters.emplace_back(name, std::move(value));
      } else if (auto const* real = std::get_if<double>(&value)) {
        unit_values[name] = *real;
      } else if (auto const* integer = std::get_if<std::int64_t>(&value)) {
        unit_values[name] = static_cast<double>(*integer);
      }
    }
  }
  if (H5Lexists(file.get(), "Config", H5P_DEFAULT) > 0) {
    Hdf5Handle const config = open_group(file.get(), path, "Config");
    header.config = read_all_attributes(config.get(), path, "/Config");
  }
  auto const unit = [&](char const* name) {
    double const value = unit_values.count(name) ? unit_values[name] : 1.0;
    if (!(value > 0) || !std::isfinite(value))
      fail("particle file {}: /Parameters {} = {}; a unit must be finite and > 0 (fix or remove the attribute)", path,
           name, value);
    return value;
  };
  UnitSystem& units = header.units;
  units.length_in_cm = unit("UnitLength_in_cm");
  units.mass_in_g = unit("UnitMass_in_g");
  units.velocity_in_cm_per_s = unit("UnitVelocity_in_cm_per_s");
  double const G = unit_values.count("GravityConstantInternal") ? unit_values["GravityConstantInternal"] : 0.0;
  // GADGET-4: GravityConstantInternal = 0 means "derive G from the unit system".
  units.G = G != 0 ? G
                   : gadget_G_cgs * units.mass_in_g / (units.length_in_cm * units.velocity_in_cm_per_s *
                                                        units.velocity_in_cm_per_s);
  if (!(units.G > 0) || !std::isfinite(units.G))
    fail("particle file {}: the gravitational constant is {} in the file's units ({}); it must be finite and > 0: fix "
         "/Parameters GravityConstantInternal or the unit attributes",
         path, units.G,
         G != 0 ? "GravityConstantInternal" : "derived from UnitLength_in_cm, UnitMass_in_g, UnitVelocity_in_cm_per_s");
  units.name = "gadget";
  if (H5Lexists(file.get(), "Units", H5P_DEFAULT) > 0) {
    Hdf5Handle const group_units = open_group(file.get(), path, "Units");
    if (H5Aexists(group_units.get(), "Name") > 0) {
      Hdf5Handle const attribute = checked(H5Aopen(group_units.get(), "Name", H5P_DEFAULT), H5Aclose, "open Name");
      ParameterValue const name = read_value(attribute.get(), "/Units/Name", path);
      if (auto const* text = std::get_if<std::string>(&name)) units.name = *text;
    }
  }
}

/// Removes `final_path.tmp-*`: what a killed writer of the same snapshot left (its token is
/// another process id, so nothing else would ever remove it).
void remove_stale_temporaries(fs::path const& final_path) {
  fs::path const parent = final_path.has_parent_path() ? final_path.parent_path() : fs::path(".");
  std::string const prefix = final_path.filename().string() + ".tmp-";
  for (auto const& entry : fs::directory_iterator(parent))
    if (entry.path().filename().string().rfind(prefix, 0) == 0) fs::remove_all(entry.path());
}

}  // namespace

FileLayout parse_file_layout(std::string const& name) {
  if (name == "single") return FileLayout::SingleFile;
  if (name == "per-rank") return FileLayout::FilePerRank;
  fail("unknown file layout '{}'; use 'single' (one snapshot_NNN.hdf5) or 'per-rank' (snapdir_NNN/)", name);
}

std::string snapshot_path(std::string const& directory, int number, FileLayout layout) {
  if (number < 0) fail("snapshot number {} is negative; numbers start at 0", number);
  std::string const name = layout == FileLayout::SingleFile ? fmt::format("snapshot_{:03d}.hdf5", number)
                                                            : fmt::format("snapdir_{:03d}", number);
  return (fs::path(directory) / name).string();
}

void write_particles(Context const& context, std::string const& path, Particles<HostSpace> const& particles,
                     SnapshotHeader const& header, ParticleFileOptions const& options, ForceFields const* fields) {
  io_detail::silence_hdf5_errors();
  collectively(context, [&] { check_write_input(particles, options, fields); });
  // Global counts and this rank's first row.
  std::uint64_t const local = particles.num;
  std::uint64_t offset = 0, total = 0;
  MPI_Exscan(&local, &offset, 1, MPI_UINT64_T, MPI_SUM, context.comm());
  if (context.rank() == 0) offset = 0;
  MPI_Allreduce(&local, &total, 1, MPI_UINT64_T, MPI_SUM, context.comm());
  collectively(context, [&] {
    if (particles.num_total != total)
      fail("particles.num_total = {} on rank {} but the ranks hold {} particles together; set num_total to the "
           "global count", particles.num_total, context.rank(), total);
  });
  // A dataset present on some ranks only would make the collective writes disagree.
  ForceFields present_fields;
  bool const any_potential = present_on_any_rank(context, fields && fields->potential.extent(0) > 0);
  bool const any_acceleration = present_on_any_rank(context, fields && fields->acceleration.extent(0) > 0);
  bool const any_group = present_on_any_rank(context, fields && fields->group_number.extent(0) > 0);
  collectively(context, [&] {
    bool const mine_potential = fields && fields->potential.extent(0) > 0;
    bool const mine_acceleration = fields && fields->acceleration.extent(0) > 0;
    bool const mine_group = fields && fields->group_number.extent(0) > 0;
    if ((any_potential && !mine_potential && local > 0) || (any_acceleration && !mine_acceleration && local > 0) ||
        (any_group && !mine_group && local > 0))
      fail("ForceFields are given on some ranks only; give potential/acceleration/group_number on every rank or on "
           "none");
  });
  if (fields) present_fields = *fields;
  if (any_potential && present_fields.potential.extent(0) == 0)  // empty ranks: a 1-slot placeholder, no rows written
    present_fields.potential = ScalarView<double, HostSpace>("kfmm::io::placeholder", 1);
  if (any_acceleration && present_fields.acceleration.extent(0) == 0)
    present_fields.acceleration = Vec3View<double, HostSpace>("kfmm::io::placeholder", 1);
  if (any_group && present_fields.group_number.extent(0) == 0)
    present_fields.group_number = ScalarView<std::int64_t, HostSpace>("kfmm::io::placeholder", 1);

  fs::path const final_path = normalised(path);
  long long token = static_cast<long long>(getpid());
  MPI_Bcast(&token, 1, MPI_LONG_LONG, 0, context.comm());
  fs::path const temporary = final_path.string() + fmt::format(".tmp-{}", token);

  collectively(context, [&] {
    if (context.rank() != 0) return;
    if (final_path.has_parent_path()) fs::create_directories(final_path.parent_path());
    remove_stale_temporaries(final_path);
    if (options.layout == FileLayout::FilePerRank) {
      fs::remove_all(temporary);
      fs::create_directory(temporary);
    }
  });

  std::string error;
  try {
    if (options.layout == FileLayout::SingleFile) {
      FileSlice const slice{total, offset, true, 1};
      write_one_file(temporary, context.comm(), slice, particles, header, options, &present_fields, total);
    } else {
      FileSlice const slice{local, 0, false, context.size()};
      write_one_file(member_file(temporary, file_stem_of_directory(final_path), context.rank()), MPI_COMM_SELF, slice,
                     particles, header, options, &present_fields, total);
    }
  } catch (std::exception const& e) {
    error = fmt::format("writing {}: {}", final_path.string(), e.what());
  }
  fault_injection::point("snapshot.written");
  // Every rank must know the outcome before rank 0 renames or removes anything.
  int const failed_here = error.empty() ? 0 : 1;
  int failed_anywhere = 0;
  MPI_Allreduce(&failed_here, &failed_anywhere, 1, MPI_INT, MPI_MAX, context.comm());
  std::string rename_error;
  if (context.rank() == 0) {
    std::error_code ignored;
    if (failed_anywhere) {
      fs::remove_all(temporary, ignored);
    } else {
      try {
        if (fs::is_directory(temporary) && fs::exists(final_path)) fs::remove_all(final_path);
        fs::rename(temporary, final_path);
      } catch (std::exception const& e) {
        rename_error = fmt::format("could not rename {} to {}: {}", temporary.string(), final_path.string(), e.what());
        fs::remove_all(temporary, ignored);
      }
    }
  }
  fault_injection::point("snapshot.renamed");
  agree_on_error(context, error);
  agree_on_error(context, rename_error);
}

Particles<HostSpace> read_particles(Context const& context, std::string const& path, SnapshotHeader* header,
                                    ForceFields* fields, DuplicateIdPolicy ids) {
  io_detail::silence_hdf5_errors();
  std::vector<FileInfo> files;
  DatasetPresence presence;
  SignedIds signed_ids_of;
  collectively(context, [&] {
    files = find_snapshot_files(path);
    presence = check_structure(files, signed_ids_of);
    if (header) read_header(files.front().path, *header);
  });
  std::uint64_t const n = files.front().total;
  std::uint64_t const ranks = context.size(), rank = context.rank();
  std::uint64_t const begin = n * rank / ranks, end = n * (rank + 1) / ranks;
  Particles<HostSpace> particles;
  // An allocation failure (a file larger than this rank's memory) is an error on every rank.
  collectively(context, [&] { particles = Particles<HostSpace>(end - begin); });
  particles.num = end - begin;
  particles.num_total = n;
  if (fields) {
    fields->potential = presence.potential ? ScalarView<double, HostSpace>("kfmm::io::potential", particles.num)
                                           : ScalarView<double, HostSpace>();
    fields->acceleration = presence.acceleration
                               ? Vec3View<double, HostSpace>("kfmm::io::acceleration", particles.num)
                               : Vec3View<double, HostSpace>();
  }
  collectively(context, [&] {
    read_local_slice(files, presence, signed_ids_of, begin, particles, fields);
    check_values(files, particles, begin);
  });
  apply_duplicate_id_policy(context, path, particles, ids);
  return particles;
}

}  // namespace kfmm
