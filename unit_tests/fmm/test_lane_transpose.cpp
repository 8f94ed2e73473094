// transpose_to_lanes: every lane gets its source's coefficients, idle lanes get zeros, for the
// orders M2L uses (including the in-register float × 16 path and its partial last block).
#include <kfmm/fmm/lane_transpose.hpp>
#include <kfmm/fmm/multi_index.hpp>

#include <gtest/gtest.h>

#include <vector>

namespace {

template <int N, int W, class Real>
void expect_transposed(int count) {
  std::vector<std::vector<Real>> rows(W, std::vector<Real>(N));
  Real const* pointers[W];
  for (int l = 0; l < W; ++l) {
    for (int n = 0; n < N; ++n) rows[l][n] = Real(1000 * (l + 1) + n);
    pointers[l] = rows[l].data();
  }
  std::vector<Real> out(N * W, Real(-1));
  kfmm::transpose_to_lanes<N, W>(count, pointers, out.data());
  for (int n = 0; n < N; ++n)
    for (int l = 0; l < W; ++l)
      ASSERT_EQ(out[n * W + l], l < count ? rows[l][n] : Real(0)) << "N " << N << " n " << n << " lane " << l
                                                                  << " count " << count;
}

template <int P>
void expect_all_counts() {
  constexpr int N = kfmm::ncoeff<P>;
  for (int count = 1; count <= 16; ++count) {
    expect_transposed<N, 16, float>(count);
    expect_transposed<N, 8, double>(count < 8 ? count : 8);
  }
}

}  // namespace

TEST(LaneTranspose, EveryOrderEveryCount) {
  expect_all_counts<1>();
  expect_all_counts<2>();
  expect_all_counts<3>();
  expect_all_counts<4>();
  expect_all_counts<5>();
  expect_all_counts<6>();
  expect_all_counts<7>();
  expect_all_counts<8>();
}
