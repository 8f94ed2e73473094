#pragma once
/// \file
/// \brief Internal to the io module: RAII ownership of HDF5 identifiers.
///
/// Includes <hdf5.h>, so only io/*.cpp may include it; no public header does (HDF5 is a
/// private dependency of the kfmm library).
#include <kfmm/core/error.hpp>

#include <hdf5.h>

#include <string_view>
#include <utility>

namespace kfmm::io_detail {

/// \brief Owns one HDF5 identifier (file, group, dataset, dataspace, type, property list or
/// attribute) and closes it with the matching H5?close when it goes out of scope.
class Hdf5Handle {
 public:
  using Closer = herr_t (*)(hid_t);

  Hdf5Handle() = default;
  Hdf5Handle(hid_t id, Closer close) : id_(id), close_(close) {}
  Hdf5Handle(Hdf5Handle&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)), close_(other.close_) {}
  Hdf5Handle& operator=(Hdf5Handle&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
      close_ = other.close_;
    }
    return *this;
  }
  Hdf5Handle(Hdf5Handle const&) = delete;
  Hdf5Handle& operator=(Hdf5Handle const&) = delete;
  ~Hdf5Handle() { reset(); }

  hid_t get() const { return id_; }
  explicit operator bool() const { return id_ >= 0; }

  /// Closes now, ignoring errors (destructor path: an error is already being reported).
  void reset() {
    if (id_ >= 0 && close_) close_(id_);
    id_ = H5I_INVALID_HID;
  }

  /// Closes now and reports a failure (for files: the data reached the disk).
  void close(std::string_view what) {
    hid_t const id = std::exchange(id_, H5I_INVALID_HID);
    if (id >= 0 && close_ && close_(id) < 0) fail("HDF5 could not close {}", what);
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer close_ = nullptr;
};

/// Wraps `id` (from an H5?create/open call) or throws kfmm::Error "could not <what>" if it failed.
inline Hdf5Handle checked(hid_t id, Hdf5Handle::Closer close, std::string_view what) {
  if (id < 0) fail("HDF5 could not {}", what);
  return Hdf5Handle(id, close);
}

/// Throws kfmm::Error "could not <what>" if an HDF5 call returned a negative status.
inline void check(herr_t status, std::string_view what) {
  if (status < 0) fail("HDF5 could not {}", what);
}

/// How much of a dataset's data the file stores.
enum class Stored { None, Some, All };

/// \brief Whether the rows a dataset declares are stored in the file: HDF5 allocates storage on
/// the first write, so a dataset can declare any number of rows without holding them.
/// Contiguous datasets report it directly; chunked ones report "partly" for every compressed
/// dataset (its chunks are smaller than their extent), so their allocated chunks are counted.
inline Stored stored_extent(hid_t dataset) {
  H5D_space_status_t status = H5D_SPACE_STATUS_ERROR;
  if (H5Dget_space_status(dataset, &status) < 0)
    fail("HDF5 could not read a dataset's allocation status");
  if (status == H5D_SPACE_STATUS_ALLOCATED) return Stored::All;
  if (status == H5D_SPACE_STATUS_NOT_ALLOCATED) return Stored::None;
  Hdf5Handle const creation = checked(H5Dget_create_plist(dataset), H5Pclose, "read a dataset's creation properties");
  if (H5Pget_layout(creation.get()) != H5D_CHUNKED) return Stored::Some;
  Hdf5Handle const space = checked(H5Dget_space(dataset), H5Sclose, "read a dataspace");
  int const rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 1 || rank > H5S_MAX_RANK) return Stored::Some;
  hsize_t dims[H5S_MAX_RANK] = {}, chunk[H5S_MAX_RANK] = {};
  if (H5Sget_simple_extent_dims(space.get(), dims, nullptr) < 0 || H5Pget_chunk(creation.get(), rank, chunk) != rank)
    fail("HDF5 could not read a dataset's chunk layout");
  hsize_t expected = 1;
  for (int k = 0; k < rank; ++k) {
    if (chunk[k] == 0) return Stored::Some;
    expected *= (dims[k] + chunk[k] - 1) / chunk[k];
  }
  hsize_t allocated = 0;
  if (H5Dget_num_chunks(dataset, space.get(), &allocated) < 0) fail("HDF5 could not count a dataset's chunks");
  return allocated >= expected ? Stored::All : allocated == 0 ? Stored::None : Stored::Some;
}

/// Turns off HDF5's own error-stack printing so that users see only kfmm's messages.
inline void silence_hdf5_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

}  // namespace kfmm::io_detail
