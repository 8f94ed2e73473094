#pragma once
// Test data onto the device (a View in the library's memory space holding a host vector's
// values) and back.
#include <kfmm/core/types.hpp>

#include <Kokkos_Core.hpp>

#include <string>
#include <vector>

namespace kfmm::test_support {

template <class T>
Kokkos::View<T*, MemorySpace> device_view(std::vector<T> const& values, char const* name = "test") {
  Kokkos::View<T*, MemorySpace> view(std::string(name), values.size());
  Kokkos::deep_copy(view, Kokkos::View<T const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(values.data(), values.size()));
  return view;
}

/// A host copy of a View (of any memory space), to check what arrived.
template <class View>
auto on_host(View const& view) {
  auto host = Kokkos::create_mirror(view);
  Kokkos::deep_copy(host, view);
  return host;
}

}  // namespace kfmm::test_support
