#include <kfmm/core/error.hpp>
#include <kfmm/core/kernel_shape.hpp>

#include <atomic>
#include <string>

namespace kfmm {

namespace {
// Atomic so that a request from one thread is seen by kernels launched from another.
std::atomic<KernelShape> requested{KernelShape::Cpu};
}  // namespace

KernelShape requested_kernel_shape() { return requested.load(std::memory_order_relaxed); }

void request_kernel_shape(KernelShape shape) { requested.store(shape, std::memory_order_relaxed); }

KernelShape parse_kernel_shape(std::string_view text, std::string_view origin) {
  if (text == "cpu") return KernelShape::Cpu;
  if (text == "gpu") return KernelShape::Gpu;
  fail("{} = '{}' is not a kernel shape: use 'cpu' (the default on CPU backends: SIMD lanes, one thread per node) "
       "or 'gpu' (the team kernels a GPU runs, here on the CPU, for testing them)",
       origin, std::string(text));
}

char const* to_string(KernelShape shape) { return shape == KernelShape::Gpu ? "gpu" : "cpu"; }

}  // namespace kfmm
