#pragma once
/// \file
/// \brief Which shape the kernels take for an execution space: GPU-shaped (Kokkos teams, one
/// thread per particle or coefficient, tiles in team scratch, no SIMD lanes or intrinsics) or
/// CPU-shaped (one thread per node or leaf, SIMD lanes, AVX-512 where the CPU has it).
///
/// GPU backends (CUDA, HIP, SYCL) always take the GPU shape. A CPU build configured with
/// KFMM_PORTABLE_KERNELS=ON takes it too, so that the unit tests on OpenMP run exactly the
/// kernels a GPU runs (docs/gpu.md). Every shape decision in kfmm goes through this header.
#include <kfmm/build_config.hpp>
#include <kfmm/core/kokkos_compat.hpp>

namespace kfmm {

/// Whether kernels launched on ExecSpace take their GPU shape.
template <class ExecSpace>
constexpr bool gpu_shaped_kernels() {
  return KFMM_PORTABLE_KERNELS != 0 || compat::is_gpu_backend<ExecSpace>();
}

/// Whether CPU intrinsics paths (AVX-512) may be compiled in: never in portable builds, so that
/// a portable build on an AVX-512 machine runs the same arithmetic as a GPU.
#if KFMM_PORTABLE_KERNELS
#define KFMM_ALLOW_CPU_INTRINSICS 0
#else
#define KFMM_ALLOW_CPU_INTRINSICS 1
#endif

}  // namespace kfmm
