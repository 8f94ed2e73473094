#pragma once
/// \file
/// \brief The one place that knows which Kokkos version we compile against (3.4 … 5.x).
///
/// Every spelling that differs between Kokkos 3.4.1 and 5.2.2 goes through this header;
/// no other file may test KOKKOS_VERSION; the version table is in docs/kokkos_compat.md.
#include <Kokkos_Core.hpp>
#include <Kokkos_Sort.hpp>

#include <cstdint>
#include <string>

#define KFMM_KOKKOS_VERSION_GE(M, m, p) (KOKKOS_VERSION >= ((M)*10000 + (m)*100 + (p)))

// Reductions over user structs need a volatile join before Kokkos 3.7.
#if KFMM_KOKKOS_VERSION_GE(3, 7, 0)
#define KFMM_KOKKOS_NEEDS_VOLATILE_JOIN 0
#else
#define KFMM_KOKKOS_NEEDS_VOLATILE_JOIN 1
#endif

namespace kfmm::compat {

/// Host memory for staging device data through MPI: page-locked where the backend has it, so
/// device copies to and from it run at full speed and asynchronously.
#if defined(KOKKOS_HAS_SHARED_HOST_PINNED_SPACE)
using StagingSpace = Kokkos::SharedHostPinnedSpace;
#elif defined(KOKKOS_ENABLE_CUDA)
using StagingSpace = Kokkos::CudaHostPinnedSpace;
#elif defined(KOKKOS_ENABLE_HIP)
using StagingSpace = Kokkos::Experimental::HIPHostPinnedSpace;
#else
using StagingSpace = Kokkos::HostSpace;
#endif

/// Device-callable math; `using` declarations so they cost nothing.
namespace math {
#if KFMM_KOKKOS_VERSION_GE(3, 7, 0)
using Kokkos::exp;
using Kokkos::fabs;
using Kokkos::floor;
using Kokkos::isfinite;
using Kokkos::log;
using Kokkos::pow;
using Kokkos::sqrt;
#else
using Kokkos::Experimental::exp;
using Kokkos::Experimental::fabs;
using Kokkos::Experimental::floor;
using Kokkos::Experimental::isfinite;
using Kokkos::Experimental::log;
using Kokkos::Experimental::pow;
using Kokkos::Experimental::sqrt;
#endif

#if KFMM_KOKKOS_VERSION_GE(4, 1, 0)
using Kokkos::rsqrt;
#else
KOKKOS_INLINE_FUNCTION float rsqrt(float x) { return 1.0f / sqrt(x); }
KOKKOS_INLINE_FUNCTION double rsqrt(double x) { return 1.0 / sqrt(x); }
#endif

/// a·b + c rounded once where the hardware fuses it (GPUs; CPUs compiled with FMA), else a·b
/// rounded then added. Explicit, so that code which must give the same bits in differently
/// shaped kernels (scalar and SIMD lanes) does not depend on where the compiler contracts.
KOKKOS_INLINE_FUNCTION double fused_multiply_add(double a, double b, double c) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__) || defined(__SYCL_DEVICE_ONLY__)
  return ::fma(a, b, c);
#elif defined(__FMA__)
  return __builtin_fma(a, b, c);
#else
  return a * b + c;  // no fused instruction: nothing to contract into
#endif
}

/// Hint that *address will be read soon: random gathers on CPUs keep more misses in flight
/// than the out-of-order window finds alone. No effect on GPUs (their warps hide the latency).
KOKKOS_FORCEINLINE_FUNCTION void prefetch(void const* address) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__) || defined(__SYCL_DEVICE_ONLY__)
  (void)address;
#elif defined(__GNUC__)
  __builtin_prefetch(address);
#else
  (void)address;
#endif
}

template <class T>
KOKKOS_INLINE_FUNCTION constexpr T min(T a, T b) { return b < a ? b : a; }
template <class T>
KOKKOS_INLINE_FUNCTION constexpr T max(T a, T b) { return a < b ? b : a; }
template <class T>
KOKKOS_INLINE_FUNCTION constexpr T pi_v() { return T(3.141592653589793238462643383279502884L); }
}  // namespace math

/// Number of threads (or equivalent) of an execution space instance.
template <class ExecutionSpace>
int concurrency(ExecutionSpace const& space) {
  return space.concurrency();
}

/// Fence one instance with a label where Kokkos supports labels.
template <class ExecutionSpace>
void fence(ExecutionSpace const& space, char const* label) {
#if KFMM_KOKKOS_VERSION_GE(3, 5, 0)
  space.fence(label);
#else
  (void)label;
  space.fence();
#endif
}

/// RAII profiling region (Kokkos::Profiling::ScopedRegion only exists from 4.1).
class ScopedRegion {
 public:
  explicit ScopedRegion(std::string const& name) { Kokkos::Profiling::pushRegion(name); }
  ~ScopedRegion() { Kokkos::Profiling::popRegion(); }
  ScopedRegion(ScopedRegion const&) = delete;
  ScopedRegion& operator=(ScopedRegion const&) = delete;
};

/// Sorts a View of keys in place (ascending).
template <class ExecutionSpace, class View>
void sort(ExecutionSpace const& space, View const& view) {
#if KFMM_KOKKOS_VERSION_GE(3, 6, 0)
  Kokkos::sort(space, view);
#else
  space.fence();
  Kokkos::sort(view);
#endif
}

/// Kokkos version as "major.minor.patch".
inline std::string version_string() {
  return std::to_string(KOKKOS_VERSION / 10000) + "." + std::to_string(KOKKOS_VERSION / 100 % 100) + "." +
         std::to_string(KOKKOS_VERSION % 100);
}

/// Name of the backend of an execution space ("OpenMP", "Cuda", ...).
template <class ExecutionSpace>
char const* backend_name() {
  return ExecutionSpace::name();
}

/// Whether a backend runs on a GPU (then ranks pick devices and GPU checks apply).
template <class ExecutionSpace>
constexpr bool is_gpu_backend() {
#if defined(KOKKOS_ENABLE_CUDA)
  if (std::is_same<ExecutionSpace, Kokkos::Cuda>::value) return true;
#endif
#if defined(KOKKOS_ENABLE_HIP) && KFMM_KOKKOS_VERSION_GE(4, 0, 0)
  if (std::is_same<ExecutionSpace, Kokkos::HIP>::value) return true;
#elif defined(KOKKOS_ENABLE_HIP)
  if (std::is_same<ExecutionSpace, Kokkos::Experimental::HIP>::value) return true;
#endif
#if defined(KOKKOS_ENABLE_SYCL) && KFMM_KOKKOS_VERSION_GE(4, 5, 0)
  if (std::is_same<ExecutionSpace, Kokkos::SYCL>::value) return true;
#elif defined(KOKKOS_ENABLE_SYCL)
  if (std::is_same<ExecutionSpace, Kokkos::Experimental::SYCL>::value) return true;
#endif
  return false;
}

/// Command-line flag that sets the device id Kokkos initialises with.
inline char const* device_id_flag() {
#if KFMM_KOKKOS_VERSION_GE(3, 7, 0)
  return "--kokkos-device-id=";
#else
  return "--kokkos-device=";
#endif
}

}  // namespace kfmm::compat
