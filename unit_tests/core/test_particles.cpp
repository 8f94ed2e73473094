#include <kfmm/core/particles.hpp>
#include <kfmm/core/validate.hpp>

#include <gtest/gtest.h>

#include <cmath>

namespace {

using kfmm::HostSpace;
using kfmm::Particles;

class ParticlesTest : public testing::Test {
 protected:
  // Four valid host particles with ids 10..13.
  Particles<HostSpace> make(std::size_t n = 4) {
    Particles<HostSpace> p(n);
    p.num = p.num_total = n;
    for (std::size_t i = 0; i < n; ++i) {
      for (int k = 0; k < 3; ++k) {
        p.pos(i, k) = double(i) + 0.1 * k;
        p.vel(i, k) = -double(i);
      }
      p.mass(i) = 1.0 / n;
      p.id(i) = 10 + i;
    }
    return p;
  }
};

TEST_F(ParticlesTest, GrowthKeepsContentAndIsAmortised) {
  auto p = make();
  p.reserve(5);
  EXPECT_GE(p.capacity(), 5u);
  p.reserve(800);
  EXPECT_EQ(p.capacity(), 900u);  // an eighth more than asked: a few steps' drift of a rank's share
  p.reserve(850);
  EXPECT_EQ(p.capacity(), 900u);  // within the room: nothing moves
  EXPECT_EQ(p.num, 4u);
  EXPECT_EQ(p.id(3), 13u);
  EXPECT_DOUBLE_EQ(p.pos(2, 1), 2.1);
}

TEST_F(ParticlesTest, PadFillsPaddingAndSqueezeDropsIt) {
  auto p = make();
  p.pad(10);
  EXPECT_EQ(p.capacity(), 10u);
  EXPECT_TRUE(std::isnan(p.pos(7, 0)));
  EXPECT_EQ(p.mass(9), 0.0);
  EXPECT_EQ(p.id(1), 11u);
  p.squeeze();
  EXPECT_EQ(p.capacity(), 4u);
  EXPECT_EQ(p.id(3), 13u);
}

TEST_F(ParticlesTest, DeviceRoundTrip) {
  auto const p = make();
  auto device = kfmm::to_device(p);
  auto back = kfmm::to_host(device);
  ASSERT_EQ(back.num, 4u);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(back.id(i), p.id(i));
}

TEST_F(ParticlesTest, ValidParticlesPass) { EXPECT_EQ(kfmm::find_invalid_particle(make()), ""); }

TEST_F(ParticlesTest, NanPositionIsNamed) {
  auto p = make();
  p.pos(2, 1) = NAN;
  auto const message = kfmm::find_invalid_particle(p, 3);
  EXPECT_NE(message.find("particle 2 (id 12, rank 3)"), std::string::npos) << message;
  EXPECT_NE(message.find("position component y = nan"), std::string::npos) << message;
}

TEST_F(ParticlesTest, InfiniteVelocityIsNamed) {
  auto p = make();
  p.vel(1, 2) = INFINITY;
  EXPECT_NE(kfmm::find_invalid_particle(p).find("velocity component z = inf"), std::string::npos);
}

TEST_F(ParticlesTest, NonPositiveMassIsNamed) {
  auto p = make();
  p.mass(0) = 0.0;
  EXPECT_NE(kfmm::find_invalid_particle(p).find("particle 0 (id 10, rank 0) has mass 0"), std::string::npos);
  p.mass(0) = NAN;
  EXPECT_THROW(kfmm::validate_local(p), kfmm::Error);
}

TEST_F(ParticlesTest, DuplicateIdIsNamed) {
  auto p = make();
  p.id(3) = 11;
  auto const message = kfmm::find_invalid_particle(p);
  EXPECT_NE(message.find("id 11 is used twice on rank 0 (particles 1 and 3)"), std::string::npos) << message;
}

TEST_F(ParticlesTest, NumBeyondCapacityIsNamed) {
  auto p = make();
  p.num = 9;
  EXPECT_NE(kfmm::find_invalid_particle(p).find("num = 9 exceeds the capacity 4"), std::string::npos);
}

}  // namespace
