// Generated initial conditions on the real communicator equal, bit for bit, the 1-rank set.
#include <kfmm/comm/initial_conditions.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace {

using kfmm::ICKind;

/// Gathers one field (`count` values per particle, component-major as in LayoutLeft) to rank 0
/// in global particle order: per component, the slices of all ranks follow one another.
template <class T>
std::vector<T> gather_to_root(kfmm::Context const& context, T const* local, int num, int components,
                              MPI_Datatype type) {
  std::vector<int> counts(context.size()), displacements(context.size(), 0);
  MPI_Gather(&num, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, context.comm());
  int total = 0;
  for (int r = 0; r < context.size(); ++r) {
    displacements[r] = total;
    total += counts[r];
  }
  std::vector<T> all(context.is_root() ? std::size_t(total) * components : 0);
  for (int c = 0; c < components; ++c)
    MPI_Gatherv(local + std::size_t(c) * num, num, type, context.is_root() ? all.data() + std::size_t(c) * total : nullptr,
                counts.data(), displacements.data(), type, 0, context.comm());
  return all;
}

class InitialConditionsOnRanks : public testing::TestWithParam<ICKind> {};

TEST_P(InitialConditionsOnRanks, GatheredSlicesEqualTheOneRankSetBitForBit) {
  kfmm::Context const context;
  kfmm::ICOptions options;
  options.kind = GetParam();
  options.n_total = 1001;
  options.seed = 9;
  auto local = kfmm::make_initial_conditions(context, options);
  EXPECT_EQ(local.num_total, options.n_total);
  local.squeeze();  // component c of pos then starts at c·num
  int const num = int(local.num);
  auto const pos = gather_to_root(context, local.pos.data(), num, 3, MPI_DOUBLE);
  auto const vel = gather_to_root(context, local.vel.data(), num, 3, MPI_DOUBLE);
  auto const mass = gather_to_root(context, local.mass.data(), num, 1, MPI_DOUBLE);
  auto const id = gather_to_root(context, local.id.data(), num, 1, MPI_UINT64_T);
  if (!context.is_root()) return;

  auto const whole = kfmm::generate_initial_conditions(options, 0, 1, [](std::int64_t*, int) {});
  std::size_t const n = whole.num;
  ASSERT_EQ(id.size(), n);
  EXPECT_EQ(std::memcmp(whole.id.data(), id.data(), n * sizeof(std::uint64_t)), 0);
  EXPECT_EQ(std::memcmp(whole.mass.data(), mass.data(), n * sizeof(double)), 0);
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(std::memcmp(&whole.pos(0, c), pos.data() + c * n, n * sizeof(double)), 0) << "position " << c;
    EXPECT_EQ(std::memcmp(&whole.vel(0, c), vel.data() + c * n, n * sizeof(double)), 0) << "velocity " << c;
  }
}

INSTANTIATE_TEST_SUITE_P(InitialConditions, InitialConditionsOnRanks, testing::ValuesIn(kfmm::all_ic_kinds()),
                         [](testing::TestParamInfo<ICKind> const& info) { return kfmm::to_string(info.param); });

TEST(InitialConditionsOnRanks, InvalidOptionsThrowOnEveryRank) {
  kfmm::Context const context;
  kfmm::ICOptions options;
  options.kind = ICKind::Hernquist;
  options.truncation_radius = 0;
  EXPECT_THROW(kfmm::make_initial_conditions(context, options), kfmm::Error);
}

}  // namespace
