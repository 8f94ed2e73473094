// allreduce_bounds: every rank's minimum and maximum against a gather of all ranks' bounds,
// with empty ranks, negative coordinates, signed zeros and values far from the origin.
#include <kfmm/comm/global_bounds.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <vector>

namespace {

using kfmm::Context;

class GlobalBoundsTest : public testing::Test {
 protected:
  Context context;

  // Reference: every rank's six values gathered, then reduced on the host.
  void expect_reduced(double const lo[3], double const hi[3]) const {
    std::vector<double> mine{lo[0], lo[1], lo[2], hi[0], hi[1], hi[2]}, all(6 * std::size_t(context.size()));
    MPI_Allgather(mine.data(), 6, MPI_DOUBLE, all.data(), 6, MPI_DOUBLE, context.comm());
    double expect_lo[3], expect_hi[3];
    for (int k = 0; k < 3; ++k) {
      expect_lo[k] = DBL_MAX;
      expect_hi[k] = -DBL_MAX;
      for (int r = 0; r < context.size(); ++r) {
        expect_lo[k] = std::min(expect_lo[k], all[6 * r + k]);
        expect_hi[k] = std::max(expect_hi[k], all[6 * r + 3 + k]);
      }
    }
    double got_lo[3] = {lo[0], lo[1], lo[2]}, got_hi[3] = {hi[0], hi[1], hi[2]};
    kfmm::allreduce_bounds(context, got_lo, got_hi);
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(got_lo[k], expect_lo[k]) << "axis " << k << " on rank " << context.rank();
      EXPECT_EQ(got_hi[k], expect_hi[k]) << "axis " << k << " on rank " << context.rank();
    }
  }
};

TEST_F(GlobalBoundsTest, MinimumAndMaximumOverRanks) {
  int const r = context.rank();
  double const lo[3] = {-1.5 * r, 2.0 + r, -1e300 / (r + 1)};
  double const hi[3] = {0.25 * r, 3.0 + 2 * r, 1e-300 * (r + 1)};
  expect_reduced(lo, hi);
}

TEST_F(GlobalBoundsTest, EmptyRanksDoNotWidenTheBounds) {
  // Odd ranks hold no particles: compute_bounds gives them +DBL_MAX / −DBL_MAX.
  int const r = context.rank();
  bool const empty = r % 2 == 1;
  double const lo[3] = {empty ? DBL_MAX : -r - 1.0, empty ? DBL_MAX : 5.0, empty ? DBL_MAX : 0.5 * r};
  double const hi[3] = {empty ? -DBL_MAX : r + 1.0, empty ? -DBL_MAX : 6.0, empty ? -DBL_MAX : 0.5 * r + 1};
  expect_reduced(lo, hi);
  double got_lo[3] = {lo[0], lo[1], lo[2]}, got_hi[3] = {hi[0], hi[1], hi[2]};
  kfmm::allreduce_bounds(context, got_lo, got_hi);
  EXPECT_EQ(got_lo[1], 5.0);
  EXPECT_EQ(got_hi[1], 6.0);
}

TEST_F(GlobalBoundsTest, NoParticlesAnywhereKeepsTheEmptyIdentities) {
  double lo[3] = {DBL_MAX, DBL_MAX, DBL_MAX}, hi[3] = {-DBL_MAX, -DBL_MAX, -DBL_MAX};
  kfmm::allreduce_bounds(context, lo, hi);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(lo[k], DBL_MAX);
    EXPECT_EQ(hi[k], -DBL_MAX);
  }
}

TEST_F(GlobalBoundsTest, SignedZerosAndCoincidentBounds) {
  double const lo[3] = {-0.0, 0.0, 7.0}, hi[3] = {0.0, -0.0, 7.0};
  expect_reduced(lo, hi);
}

}  // namespace
