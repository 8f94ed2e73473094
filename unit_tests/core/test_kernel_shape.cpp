// The run-time kernel shape: parsing (KFMM_KERNEL_SHAPE), requests, and what CPU and GPU
// backends make of them.
#include <kfmm/core/error.hpp>
#include <kfmm/core/kernel_shape.hpp>
#include <kfmm/core/types.hpp>

#include <gtest/gtest.h>

#include <string>

namespace {

using kfmm::KernelShape;

TEST(KernelShape, ParsesBothNames) {
  EXPECT_EQ(kfmm::parse_kernel_shape("cpu", "test"), KernelShape::Cpu);
  EXPECT_EQ(kfmm::parse_kernel_shape("gpu", "test"), KernelShape::Gpu);
  EXPECT_STREQ(kfmm::to_string(KernelShape::Cpu), "cpu");
  EXPECT_STREQ(kfmm::to_string(KernelShape::Gpu), "gpu");
}

TEST(KernelShape, RejectsOtherNamesNamingTheValueAndTheChoices) {
  for (char const* bad : {"GPU", "", "cuda", "gpu "}) {
    try {
      kfmm::parse_kernel_shape(bad, "KFMM_KERNEL_SHAPE");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (kfmm::Error const& e) {
      std::string const what = e.what();
      EXPECT_NE(what.find("KFMM_KERNEL_SHAPE = '" + std::string(bad) + "'"), std::string::npos) << what;
      EXPECT_NE(what.find("'cpu'"), std::string::npos) << what;
      EXPECT_NE(what.find("'gpu'"), std::string::npos) << what;
    }
  }
}

TEST(KernelShape, ScopedRequestIsFollowedAndRestored) {
  KernelShape const before = kfmm::requested_kernel_shape();
  for (KernelShape shape : {KernelShape::Cpu, KernelShape::Gpu}) {
    {
      kfmm::ScopedKernelShape const scope(shape);
      EXPECT_EQ(kfmm::requested_kernel_shape(), shape);
      // GPU backends take the GPU shape whatever is requested; CPU backends follow the request.
      bool const expected = kfmm::gpu_shaped_kernels<kfmm::ExecutionSpace>() || shape == KernelShape::Gpu;
      EXPECT_EQ(kfmm::use_gpu_shape<kfmm::ExecutionSpace>(), expected);
      EXPECT_EQ(kfmm::use_gpu_shape<Kokkos::DefaultHostExecutionSpace>(), shape == KernelShape::Gpu);
    }
    EXPECT_EQ(kfmm::requested_kernel_shape(), before);
  }
}

}  // namespace
