#pragma once
/// \file
/// \brief Which shape the kernels take for an execution space: GPU-shaped (Kokkos teams, one
/// thread per particle or coefficient, tiles in team scratch, no SIMD lanes or intrinsics) or
/// CPU-shaped (one thread per node or leaf, SIMD lanes, AVX-512 where the CPU has it).
///
/// GPU backends (CUDA, HIP, SYCL) always take the GPU shape; their CPU-shaped branches are not
/// even compiled. CPU backends take the CPU shape unless the GPU shape is requested at run time
/// (KFMM_KERNEL_SHAPE=gpu in the environment, read by kfmm::Environment, or
/// request_kernel_shape()): then the unit tests on OpenMP run exactly the kernels a GPU runs
/// (docs/gpu.md). Every shape decision in kfmm goes through this header.
#include <kfmm/core/kokkos_compat.hpp>

#include <string_view>

namespace kfmm {

/// The two shapes of kfmm's kernels.
enum class KernelShape { Cpu, Gpu };

/// Whether ExecSpace takes the GPU shape whatever is requested (GPU backends).
template <class ExecSpace>
constexpr bool gpu_shaped_kernels() {
  return compat::is_gpu_backend<ExecSpace>();
}

/// The shape requested for CPU backends in this process (KernelShape::Cpu unless changed).
KernelShape requested_kernel_shape();

/// Requests `shape` for the kernels that CPU backends launch from now on (process-wide; call it
/// between evaluations, not during one). GPU backends ignore it.
void request_kernel_shape(KernelShape shape);

/// Parses "cpu" or "gpu"; throws kfmm::Error naming `text`, where it came from (`origin`) and
/// the accepted values otherwise.
KernelShape parse_kernel_shape(std::string_view text, std::string_view origin);

/// "cpu" or "gpu".
char const* to_string(KernelShape shape);

/// Requests a shape for the lifetime of the object, then restores the one before (tests).
class ScopedKernelShape {
 public:
  explicit ScopedKernelShape(KernelShape shape) : previous_(requested_kernel_shape()) { request_kernel_shape(shape); }
  ~ScopedKernelShape() { request_kernel_shape(previous_); }
  ScopedKernelShape(ScopedKernelShape const&) = delete;
  ScopedKernelShape& operator=(ScopedKernelShape const&) = delete;

 private:
  KernelShape previous_;
};

/// Whether kernels launched on ExecSpace take their GPU shape now.
template <class ExecSpace>
bool use_gpu_shape() {
  if constexpr (gpu_shaped_kernels<ExecSpace>())
    return true;
  else
    return requested_kernel_shape() == KernelShape::Gpu;
}

}  // namespace kfmm
