#include <kfmm/core/particles.hpp>
#include <kfmm/core/space_copy.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

namespace {

using kfmm::HostSpace;
using kfmm::Particles;

// Records every copy_contiguous() while a test runs.
class SpaceCopyTest : public testing::Test {
 protected:
  struct Copy {
    std::size_t bytes;
    bool contiguous;
  };
  static std::vector<Copy>& copies() {
    static std::vector<Copy> log;
    return log;
  }
  void SetUp() override {
    copies().clear();
    kfmm::detail::space_copy_observer = [](std::size_t bytes, bool contiguous) {
      copies().push_back({bytes, contiguous});
    };
  }
  void TearDown() override { kfmm::detail::space_copy_observer = nullptr; }

  // n valid host particles in a larger capacity (padding as after redistribution).
  static Particles<HostSpace> padded(std::size_t n, std::size_t capacity) {
    Particles<HostSpace> p(n);
    p.num = p.num_total = n;
    for (std::size_t i = 0; i < n; ++i) {
      for (int k = 0; k < 3; ++k) {
        p.pos(i, k) = double(i) + 0.25 * k;
        p.vel(i, k) = -double(i) - 0.5 * k;
      }
      p.mass(i) = 1.0 + double(i);
      p.id(i) = 100 + i;
    }
    p.pad(capacity);
    return p;
  }
};

// The copies between spaces of padded particles (to_device, to_host, assign, copy_range) are
// all contiguous spans, which a GPU build needs: the (range, ALL) slices of padded LayoutLeft
// Views that copy_range used to copy directly are not.
TEST_F(SpaceCopyTest, PaddedParticlesCrossSpacesInContiguousSpans) {
  auto const host = padded(5, 9);
  auto device = kfmm::to_device(host);
  device.pad(13);  // capacity > num on the device side too
  auto back = kfmm::to_host(device);
  Particles<kfmm::MemorySpace> part(12);
  part.copy_range(host, 1, 4, 6);

  ASSERT_FALSE(copies().empty()) << "no copy went through copy_contiguous";
  for (auto const& c : copies()) EXPECT_TRUE(c.contiguous);
  ASSERT_EQ(back.num, 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(back.id(i), host.id(i));
    EXPECT_EQ(back.mass(i), host.mass(i));
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(back.pos(i, k), host.pos(i, k));
      EXPECT_EQ(back.vel(i, k), host.vel(i, k));
    }
  }
  part.num = 12;
  auto const part_host = kfmm::to_host(part);
  for (std::size_t j = 0; j < 3; ++j) EXPECT_EQ(part_host.id(6 + j), host.id(1 + j));
}

TEST_F(SpaceCopyTest, CopyRangeMovesTheRightRows) {
  auto const host = padded(6, 10);
  Particles<HostSpace> target(8);
  target.num = 8;
  target.copy_range(host, 2, 5, 4);
  for (std::size_t j = 0; j < 3; ++j) {
    EXPECT_EQ(target.id(4 + j), host.id(2 + j));
    for (int k = 0; k < 3; ++k) EXPECT_EQ(target.pos(4 + j, k), host.pos(2 + j, k));
  }
}

TEST_F(SpaceCopyTest, RejectsNonContiguousSlices) {
  kfmm::Vec3View<double, HostSpace> a("a", 10), b("b", 10);
  auto const range = Kokkos::make_pair(std::size_t(2), std::size_t(5));
  auto const slice_a = Kokkos::subview(a, range, Kokkos::ALL);
  auto const slice_b = Kokkos::subview(b, range, Kokkos::ALL);
  EXPECT_THROW(kfmm::copy_contiguous(Kokkos::DefaultHostExecutionSpace(), slice_a, slice_b), kfmm::Error);
  EXPECT_NO_THROW(kfmm::copy_contiguous(Kokkos::DefaultHostExecutionSpace(), a, b));
  kfmm::ScalarView<double, HostSpace> c("c", 4);
  EXPECT_THROW(kfmm::copy_contiguous(Kokkos::DefaultHostExecutionSpace(), c, kfmm::ScalarView<double, HostSpace>("d", 5)),
               kfmm::Error);
}

TEST_F(SpaceCopyTest, CopyRangeOutOfRangeIsAnError) {
  auto const host = padded(4, 4);
  Particles<HostSpace> target(3);
  EXPECT_THROW(target.copy_range(host, 0, 4, 0), kfmm::Error);
}

}  // namespace
