#pragma once
/// \file
/// \brief Shared by the fuzz targets: one-rank MPI + Kokkos set-up, a scratch directory, and
/// writers that turn fuzz bytes into HDF5 objects of a chosen type, shape and content.
#include <fuzzer/FuzzedDataProvider.h>
#include <hdf5.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <kfmm/comm/environment.hpp>
#include <limits>
#include <string>
#include <vector>

namespace kfmm::fuzz {

/// Aborts the fuzzer (a finding) with a message: for results that a reader returned but that
/// break its own promises.
[[noreturn]] inline void finding(std::string const& what) {
  std::fprintf(stderr, "\nkfmm fuzz finding: %s\n", what.c_str());
  std::abort();
}

/// MPI and Kokkos for the whole fuzzing process, never finalised: libFuzzer ends the process
/// itself. One rank, one thread.
inline Environment& environment() {
  static Environment* env = [] {
    setenv("OMP_NUM_THREADS", "1", 1);
    setenv("OMP_PROC_BIND", "false", 1);
    static char name[] = "kfmm_fuzz";
    static char* args[] = {name, nullptr};
    int argc = 1;
    char** argv = args;
    auto* created = new Environment(argc, argv);  // not deleted: see above
    // Open MPI installs its own crash handlers, and libFuzzer leaves a signal alone that already
    // has one: without this, a crash would print Open MPI's trace and leave no reproducer.
    for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) std::signal(sig, SIG_DFL);
    return created;
  }();
  return *env;
}

/// Counts of inputs the reader accepted and rejected (kfmm::Error), printed at exit: a
/// structured target whose inputs are all rejected would test only the first check.
inline void count_outcome(bool accepted) {
  static long counts[2] = {0, 0};
  static bool registered = false;
  if (!registered) {
    registered = true;
    std::atexit([] {
      std::fprintf(stderr, "kfmm fuzz: %ld inputs read, %ld rejected with kfmm::Error\n", counts[1], counts[0]);
    });
  }
  ++counts[accepted ? 1 : 0];
}

/// A directory of this process for the files of one input, emptied before each input.
inline std::filesystem::path scratch_directory() {
  // Never destroyed, so that the exit handler that removes the directory can still name it.
  static std::filesystem::path const* const dir = [] {
    char const* base = std::getenv("TMPDIR");
    auto* path = new std::filesystem::path(std::filesystem::path(base && *base ? base : "/tmp") /
                                           ("kfmm_fuzz_" + std::to_string(getpid())));
    std::filesystem::create_directories(*path);
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(scratch_directory(), ignored);
    });
    return path;
  }();
  return *dir;
}

inline void clear_scratch() {
  for (auto const& entry : std::filesystem::directory_iterator(scratch_directory()))
    std::filesystem::remove_all(entry.path());
}

/// The stored element types the structured targets choose from.
enum class Stored { F32, F64, U32, U64, I32, I64, String };

inline hid_t file_type(Stored stored) {
  switch (stored) {
    case Stored::F32:
      return H5T_IEEE_F32LE;
    case Stored::F64:
      return H5T_IEEE_F64LE;
    case Stored::U32:
      return H5T_STD_U32LE;
    case Stored::U64:
      return H5T_STD_U64LE;
    case Stored::I32:
      return H5T_STD_I32LE;
    case Stored::I64:
      return H5T_STD_I64LE;
    case Stored::String:
      break;
  }
  return H5T_IEEE_F64LE;
}

/// A number that readers must handle: ordinary, zero, negative, huge, NaN, ±inf or raw.
inline double interesting_double(FuzzedDataProvider& in, double typical) {
  switch (in.ConsumeIntegralInRange<int>(0, 9)) {
    case 0:
      return 0.0;
    case 1:
      return -typical;
    case 2:
      return std::numeric_limits<double>::quiet_NaN();
    case 3:
      return std::numeric_limits<double>::infinity();
    case 4:
      return -std::numeric_limits<double>::infinity();
    case 5:
      return 1e300;
    case 6:
      return in.ConsumeFloatingPoint<double>();
    default:
      return typical * (1 + 0.01 * in.ConsumeIntegralInRange<int>(0, 100));
  }
}

/// `value` as an integer where it is one in range, else 0 (a cast would be undefined).
inline std::uint64_t integer_of(double value) {
  return value >= 0 && value < 1.8e19   ? static_cast<std::uint64_t>(value)
         : value < 0 && value > -9.2e18 ? static_cast<std::uint64_t>(static_cast<std::int64_t>(value))
                                        : 0;
}

/// Values of one element type, held as doubles and int64/uint64 so that any stored type can be
/// written from them.
struct Values {
  std::vector<double> real;
  std::vector<std::uint64_t> integer;
};

/// Writes `count` elements of `stored` from `values` (cycled) with HDF5's conversion from the
/// native type, so that out-of-range values reach the file the way another writer could put them.
inline herr_t write_converted(hid_t object, bool attribute, Stored stored, Values const& values, std::size_t count) {
  if (count == 0) return 0;
  bool const is_real = stored == Stored::F32 || stored == Stored::F64;
  if (is_real) {
    std::vector<double> data(count);
    for (std::size_t i = 0; i < count; ++i) data[i] = values.real.empty() ? 0.0 : values.real[i % values.real.size()];
    return attribute ? H5Awrite(object, H5T_NATIVE_DOUBLE, data.data())
                     : H5Dwrite(object, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data());
  }
  std::vector<std::uint64_t> data(count);
  for (std::size_t i = 0; i < count; ++i)
    data[i] = values.integer.empty() ? 0 : values.integer[i % values.integer.size()];
  // Signed stored types get the same bits as int64 (large values become negative ids).
  hid_t const memory = (stored == Stored::I32 || stored == Stored::I64) ? H5T_NATIVE_INT64 : H5T_NATIVE_UINT64;
  return attribute ? H5Awrite(object, memory, data.data())
                   : H5Dwrite(object, memory, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data());
}

inline hid_t string_type(std::size_t size, bool variable) {
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, variable ? H5T_VARIABLE : std::max<std::size_t>(1, size));
  return type;
}

/// Writes attribute `name` on `location`: `dims` empty for a scalar, else a simple dataspace.
inline void write_attribute(hid_t location, char const* name, Stored stored, std::vector<hsize_t> const& dims,
                            Values const& values, std::string const& text = "", bool variable_string = false) {
  hid_t const space =
      dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  std::size_t count = 1;
  for (auto d : dims) count *= d;
  if (stored == Stored::String) {
    hid_t const type = string_type(text.size(), variable_string);
    hid_t const attribute = H5Acreate2(location, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    if (attribute >= 0) {
      if (variable_string) {
        std::vector<char const*> pointers(count, text.c_str());
        if (count > 0) H5Awrite(attribute, type, pointers.data());
      } else {
        std::string padded = text;
        padded.resize(std::max<std::size_t>(1, text.size()));
        std::string all;
        for (std::size_t i = 0; i < count; ++i) all += padded;
        if (count > 0) H5Awrite(attribute, type, all.data());
      }
      H5Aclose(attribute);
    }
    H5Tclose(type);
  } else {
    hid_t const attribute = H5Acreate2(location, name, file_type(stored), space, H5P_DEFAULT, H5P_DEFAULT);
    if (attribute >= 0) {
      write_converted(attribute, true, stored, values, count);
      H5Aclose(attribute);
    }
  }
  H5Sclose(space);
}

/// Writes dataset `name`: `written` false leaves its storage unallocated (a file that declares
/// more rows than it holds); `chunked` stores it compressed in chunks.
inline void write_dataset(hid_t location, char const* name, Stored stored, std::vector<hsize_t> const& dims,
                          Values const& values, bool written, bool chunked) {
  hid_t const space =
      dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  hid_t const creation = H5Pcreate(H5P_DATASET_CREATE);
  std::size_t count = 1;
  bool empty = false;
  for (auto d : dims) {
    count *= d;
    empty = empty || d == 0;
  }
  if (chunked && !dims.empty() && !empty) {
    std::vector<hsize_t> chunk(dims.size());
    for (std::size_t k = 0; k < dims.size(); ++k) chunk[k] = std::min<hsize_t>(dims[k], 64);
    H5Pset_chunk(creation, static_cast<int>(dims.size()), chunk.data());
    H5Pset_deflate(creation, 1);
  }
  hid_t const type = stored == Stored::String ? string_type(8, false) : H5Tcopy(file_type(stored));
  hid_t const dataset = H5Dcreate2(location, name, type, space, H5P_DEFAULT, creation, H5P_DEFAULT);
  if (dataset >= 0) {
    if (written && stored != Stored::String && count <= (1u << 16))
      write_converted(dataset, false, stored, values, count);
    if (written && stored == Stored::String && count <= (1u << 16)) {
      std::string text(8 * count, 'x');
      H5Dwrite(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, text.data());
    }
    H5Dclose(dataset);
  }
  H5Tclose(type);
  H5Pclose(creation);
  H5Sclose(space);
}

inline Stored pick_stored(FuzzedDataProvider& in) { return static_cast<Stored>(in.ConsumeIntegralInRange<int>(0, 6)); }

}  // namespace kfmm::fuzz
