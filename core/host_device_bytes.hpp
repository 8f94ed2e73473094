#pragma once
/// \file
/// \brief A count of the bytes that cross between host and device memory in kfmm's
/// distributed force path: counted on every backend (on a CPU build the copies are no-ops),
/// so that the traffic a GPU build would make can be measured on a host build. Array copies
/// are counted (message staging without GPU-aware MPI, the top tree's host assembly, splitter
/// samples); scalars and per-rank numbers (reduction results, an exchange plan's R counts) are not.
#include <cstddef>
#include <cstdint>

namespace kfmm {

namespace detail {
inline std::uint64_t host_device_bytes_total = 0;  // host code on the main thread only
}

/// Adds `bytes` copied host → device or device → host.
inline void count_host_device_bytes(std::size_t bytes) { detail::host_device_bytes_total += bytes; }

/// Bytes counted since the process started (take differences around what you measure).
inline std::uint64_t host_device_bytes() { return detail::host_device_bytes_total; }

/// Bytes of a View's span (what a deep_copy of the whole View moves).
template <class View>
std::size_t view_bytes(View const& view) {
  return view.span() * sizeof(typename View::value_type);
}

}  // namespace kfmm
