#pragma once
/// \file
/// \brief Objects kept for the life of the Kokkos session: scratch Views that every call reuses,
/// so that repeated evaluations allocate nothing, released at Kokkos::finalize so that no View
/// outlives Kokkos.
#include <Kokkos_Core.hpp>

namespace kfmm {

/// The one T of this Kokkos session (per T and `Tag`), value-initialised at first use and reset
/// to T() when Kokkos finalizes. `Tag` tells apart several users of the same type.
template <class T, class Tag = T>
T& session_scratch() {
  static T object{};
  static bool const hooked = [] {
    Kokkos::push_finalize_hook([] { object = T{}; });
    return true;
  }();
  (void)hooked;
  return object;
}

}  // namespace kfmm
