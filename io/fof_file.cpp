#include <kfmm/io/fof_file.hpp>

#include "hdf5_handle.hpp"

#include <kfmm/core/error.hpp>

#include <unistd.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <vector>

namespace kfmm {

namespace {

namespace fs = std::filesystem;
using io_detail::check;
using io_detail::checked;
using io_detail::Hdf5Handle;

template <class T>
void attribute(hid_t location, char const* name, hid_t file_type, hid_t memory_type, T value) {
  Hdf5Handle const space = checked(H5Screate(H5S_SCALAR), H5Sclose, "create a scalar dataspace");
  Hdf5Handle const a = checked(H5Acreate2(location, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
                               fmt::format("create attribute {}", name));
  check(H5Awrite(a.get(), memory_type, &value), fmt::format("write attribute {}", name));
}

void int64_attribute(hid_t location, char const* name, std::int64_t value) {
  attribute(location, name, H5T_STD_I64LE, H5T_NATIVE_INT64, value);
}
void double_attribute(hid_t location, char const* name, double value) {
  attribute(location, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, value);
}

void dataset(hid_t group, char const* name, hid_t file_type, hid_t memory_type, std::size_t rows, hsize_t columns,
             void const* data) {
  int const rank = columns == 1 ? 1 : 2;
  std::array<hsize_t, 2> const dims{rows, columns};
  Hdf5Handle const space = checked(H5Screate_simple(rank, dims.data(), nullptr), H5Sclose,
                                   fmt::format("create the dataspace of {}", name));
  Hdf5Handle const d = checked(H5Dcreate2(group, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                               H5Dclose, fmt::format("create dataset /Group/{}", name));
  if (rows > 0) check(H5Dwrite(d.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), fmt::format("write {}", name));
}

void write_file(fs::path const& path, FoFTable const& t) {
  std::size_t const n = t.length.size();
  if (t.min_id.size() != n || t.mass.size() != n || t.pos.size() != 3 * n || t.vel.size() != 3 * n ||
      t.velocity_dispersion.size() != n || t.half_mass_radius.size() != n ||
      (!t.most_bound_id.empty() && t.most_bound_id.size() != n))
    fail("write_fof_table: the table's columns disagree in length ({} groups)", n);
  std::vector<std::int32_t> length(n), length_type(6 * n, 0);
  std::vector<double> mass_type(6 * n, 0);
  for (std::size_t g = 0; g < n; ++g) {
    if (t.length[g] > std::uint64_t(std::numeric_limits<std::int32_t>::max()))
      fail("write_fof_table: group {} has {} members; GroupLen holds at most 2^31 - 1", g, t.length[g]);
    length[g] = std::int32_t(t.length[g]);
    length_type[6 * g + 1] = length[g];
    mass_type[6 * g + 1] = t.mass[g];
  }
  io_detail::silence_hdf5_errors();
  Hdf5Handle file = checked(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose,
                            fmt::format("create file {}", path.string()));
  {
    Hdf5Handle const header = checked(H5Gcreate2(file.get(), "Header", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                                      H5Gclose, "create group /Header");
    int64_attribute(header.get(), "Ngroups_ThisFile", std::int64_t(n));
    int64_attribute(header.get(), "Ngroups_Total", std::int64_t(n));
    int64_attribute(header.get(), "Nids_ThisFile", std::int64_t(t.num_members_total));
    int64_attribute(header.get(), "Nids_Total", std::int64_t(t.num_members_total));
    int64_attribute(header.get(), "Nsubhalos_ThisFile", 0);
    int64_attribute(header.get(), "Nsubhalos_Total", 0);
    int64_attribute(header.get(), "NumFiles", 1);
    double_attribute(header.get(), "Time", t.time);
    double_attribute(header.get(), "Redshift", t.redshift);
    double_attribute(header.get(), "BoxSize", t.box_size);
    Hdf5Handle const parameters = checked(H5Gcreate2(file.get(), "Parameters", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                                          H5Gclose, "create group /Parameters");
    double_attribute(parameters.get(), "FOF_LinkingLength", t.linking_length);
    double_attribute(parameters.get(), "FOF_LinkingParameter", t.b);
    int64_attribute(parameters.get(), "FOF_GroupMinLen", std::int64_t(t.min_members));
    Hdf5Handle const group = checked(H5Gcreate2(file.get(), "Group", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
                                     "create group /Group");
    hid_t const g = group.get();
    dataset(g, "GroupLen", H5T_STD_I32LE, H5T_NATIVE_INT32, n, 1, length.data());
    dataset(g, "GroupLenType", H5T_STD_I32LE, H5T_NATIVE_INT32, n, 6, length_type.data());
    dataset(g, "GroupMass", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, n, 1, t.mass.data());
    dataset(g, "GroupMassType", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, n, 6, mass_type.data());
    dataset(g, "GroupPos", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, n, 3, t.pos.data());
    dataset(g, "GroupVel", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, n, 3, t.vel.data());
    dataset(g, "GroupMinID", H5T_STD_U64LE, H5T_NATIVE_UINT64, n, 1, t.min_id.data());
    dataset(g, "GroupVelDisp", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, n, 1, t.velocity_dispersion.data());
    dataset(g, "GroupHalfmassRad", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, n, 1, t.half_mass_radius.data());
    if (!t.most_bound_id.empty())
      dataset(g, "GroupMostBoundID", H5T_STD_U64LE, H5T_NATIVE_UINT64, n, 1, t.most_bound_id.data());
  }
  file.close(fmt::format("file {}", path.string()));
}

}  // namespace

void write_fof_table(Context const& context, std::string const& path, FoFTable const& table) {
  long long token = static_cast<long long>(getpid());
  MPI_Bcast(&token, 1, MPI_LONG_LONG, 0, context.comm());
  collectively(context, [&] {
    if (!context.is_root()) return;
    fs::path const final_path(path);
    fs::path const temporary = final_path.string() + fmt::format(".tmp-{}", token);
    try {
      if (final_path.has_parent_path()) fs::create_directories(final_path.parent_path());
      write_file(temporary, table);
      fs::rename(temporary, final_path);
    } catch (...) {
      std::error_code ignored;
      fs::remove(temporary, ignored);
      throw;
    }
  });
}

}  // namespace kfmm
