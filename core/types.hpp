#pragma once
/// \file
/// \brief Basic types shared by every module.
#include <kfmm/core/kokkos_compat.hpp>

#include <cstdint>

namespace kfmm {

using ExecutionSpace = Kokkos::DefaultExecutionSpace;
using MemorySpace = ExecutionSpace::memory_space;
using HostSpace = Kokkos::HostSpace;

/// Three components of position-like data, stored x contiguous across particles.
template <class T, class Memory = MemorySpace>
using Vec3View = Kokkos::View<T* [3], Kokkos::LayoutLeft, Memory>;
template <class T, class Memory = MemorySpace>
using ScalarView = Kokkos::View<T*, Memory>;

/// Floating-point precision of expansions and kernels (positions are always double).
enum class Precision { Float, Double };

}  // namespace kfmm
