#include <kfmm/comm/decomposition.hpp>
#include <kfmm/comm/gathered_samples.hpp>

#include <device_views.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

using kfmm::Context;
using Memory = kfmm::MemorySpace;

using kfmm::test_support::device_view;

template <class View>
std::vector<typename View::non_const_value_type> to_vector(View const& view, std::size_t n) {
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), view);
  return std::vector<typename View::non_const_value_type>(host.data(), host.data() + n);
}

class DecompositionTest : public testing::Test {
 protected:
  Context context;
  int rank = context.rank();
  int ranks = context.size();

  // After decompose(): this rank's particles with their keys and weights, and the splitters.
  std::vector<std::uint64_t> splitters, keys_here, ids_here;
  std::vector<double> weights_here;
  std::uint64_t global_count = 0;

  // Decomposes particles with the given keys (and weights, unless empty); particle ids are
  // global indices, so the multiset of ids can be checked afterwards.
  void decompose(std::vector<std::uint64_t> const& keys, std::vector<double> const& weights = {}) {
    std::uint64_t const n = keys.size();
    std::uint64_t first = 0;
    MPI_Exscan(&n, &first, 1, MPI_UINT64_T, MPI_SUM, context.comm());
    if (rank == 0) first = 0;
    MPI_Allreduce(&n, &global_count, 1, MPI_UINT64_T, MPI_SUM, context.comm());
    kfmm::Particles<kfmm::HostSpace> host(n);
    host.num = n;
    host.num_total = global_count;
    for (std::size_t i = 0; i < n; ++i) {
      for (int k = 0; k < 3; ++k) host.pos(i, k) = double(first + i) + k, host.vel(i, k) = -double(first + i);
      host.mass(i) = 1.0;
      host.id(i) = first + i;
    }
    auto particles = kfmm::to_device<Memory>(host);
    auto const key_view = device_view(keys, "keys");
    auto const weight_view = weights.empty() ? Kokkos::View<double*, Memory>() : device_view(weights, "weights");
    splitters = kfmm::choose_splitters(kfmm::ExecutionSpace(), context, key_view, n, weight_view);
    ASSERT_EQ(splitters.size(), std::size_t(ranks - 1));
    EXPECT_TRUE(std::is_sorted(splitters.begin(), splitters.end()));
    auto const destinations = kfmm::destination_ranks(kfmm::ExecutionSpace(), key_view, n, splitters);
    kfmm::ExchangePlan<Memory> plan;
    kfmm::redistribute(context, particles, destinations, &plan);
    EXPECT_EQ(particles.num, plan.num_import());
    EXPECT_EQ(particles.num_total, global_count);
    keys_here = to_vector(plan.exchange(key_view), particles.num);
    if (!weights.empty()) weights_here = to_vector(plan.exchange(weight_view), particles.num);
    auto const back = kfmm::to_host(particles);
    ids_here.assign(back.id.data(), back.id.data() + back.num);
    for (std::size_t i = 0; i < back.num; ++i) {  // fields travelled with their particle
      ASSERT_EQ(back.pos(i, 2), double(back.id(i)) + 2);
      ASSERT_EQ(back.vel(i, 0), -double(back.id(i)));
    }
  }

  void expect_ids_unchanged() const {
    int const count = static_cast<int>(ids_here.size());
    std::vector<int> counts(ranks), offsets(ranks + 1, 0);
    MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, context.comm());
    std::partial_sum(counts.begin(), counts.end(), offsets.begin() + 1);
    std::vector<std::uint64_t> all(offsets.back());
    MPI_Allgatherv(ids_here.data(), count, MPI_UINT64_T, all.data(), counts.data(), offsets.data(), MPI_UINT64_T,
                   context.comm());
    std::sort(all.begin(), all.end());
    std::vector<std::uint64_t> expected(global_count);
    std::iota(expected.begin(), expected.end(), std::uint64_t(0));
    EXPECT_EQ(all, expected);
  }

  void expect_keys_in_own_range() const {
    for (std::uint64_t key : keys_here) {
      if (rank > 0) {
        ASSERT_GE(key, splitters[rank - 1]);
      }
      if (rank < ranks - 1) {
        ASSERT_LT(key, splitters[rank]);
      }
    }
  }

  // Largest relative deviation of the ranks' sums of `value` from their mean.
  double imbalance(double value) const {
    std::vector<double> all(ranks);
    MPI_Allgather(&value, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, context.comm());
    double const mean = std::accumulate(all.begin(), all.end(), 0.0) / ranks;
    double worst = 0;
    for (double v : all) worst = std::max(worst, std::abs(v - mean) / mean);
    return worst;
  }
};

std::vector<std::uint64_t> uniform_keys(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<std::uint64_t> keys(n);
  for (auto& key : keys) key = random() >> 1;
  return keys;
}

TEST_F(DecompositionTest, UniformKeysAreBalanced) {
  std::size_t const total = 100000;
  std::size_t const n = total / ranks + (std::size_t(rank) < total % ranks);
  decompose(uniform_keys(n, 100 + rank));
  expect_ids_unchanged();
  expect_keys_in_own_range();
  EXPECT_LT(imbalance(double(keys_here.size())), 0.1);
}

TEST_F(DecompositionTest, WeightsShiftTheBalance) {
  // Keys in the lower half of the key space weigh 10: work, not particles, is balanced.
  std::size_t const n = 40000 / ranks;
  auto const keys = uniform_keys(n, 200 + rank);
  std::vector<double> weights(n);
  for (std::size_t i = 0; i < n; ++i) weights[i] = keys[i] < (std::uint64_t(1) << 62) ? 10.0 : 1.0;
  decompose(keys, weights);
  expect_ids_unchanged();
  expect_keys_in_own_range();
  EXPECT_LT(imbalance(std::accumulate(weights_here.begin(), weights_here.end(), 0.0)), 0.1);
  if (ranks > 1) {  // the heavy half is spread over more ranks, so rank 0 holds fewer particles
    double const mean_count = double(n * ranks) / ranks;
    if (rank == 0) {
      EXPECT_LT(double(keys_here.size()), 0.8 * mean_count);
    }
  }
}

// Presorted keys (as the solver passes them) skip the internal sort; the splitters must be the
// same as for the same keys and weights in any order.
TEST_F(DecompositionTest, PresortedKeysGiveTheSameSplitters) {
  std::size_t const n = 30000 / ranks;
  auto keys = uniform_keys(n, 300 + rank);
  std::vector<double> weights(n);
  for (std::size_t i = 0; i < n; ++i) weights[i] = 1.0 + double(keys[i] % 7);
  auto const shuffled = kfmm::choose_splitters(kfmm::ExecutionSpace(), context, device_view(keys, "keys"), n, device_view(weights, "weights"));
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t(0));
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return keys[a] < keys[b]; });
  std::vector<std::uint64_t> sorted_keys(n);
  std::vector<double> sorted_weights(n);
  for (std::size_t i = 0; i < n; ++i) sorted_keys[i] = keys[order[i]], sorted_weights[i] = weights[order[i]];
  auto const presorted =
      kfmm::choose_splitters(kfmm::ExecutionSpace(), context, device_view(sorted_keys, "keys"), n, device_view(sorted_weights, "weights"));
  EXPECT_EQ(presorted, shuffled);
}

// The weighted samples are the keys at equal quantiles of each rank's weight: with integer
// weights every prefix sum is exact, so the splitters must equal those of a plain host
// reference (a prefix sum per key, then the documented cut), also where a quantile falls
// inside a block of keys summed together and for a key count that is not a multiple of it.
TEST_F(DecompositionTest, WeightedSamplesAreTheExactQuantiles) {
  std::size_t const n = 20011 + 97 * std::size_t(rank);
  auto keys = uniform_keys(n, 500 + rank);
  std::sort(keys.begin(), keys.end());
  std::mt19937_64 random(600 + rank);
  std::vector<double> weights(n);
  for (auto& w : weights) w = double(random() % 10);  // zeros too
  auto const splitters = kfmm::choose_splitters(kfmm::ExecutionSpace(), context, device_view(keys, "keys"), n,
                                                device_view(weights, "weights"), 256);

  int const count = 256;
  std::vector<double> cumulative(n);
  std::partial_sum(weights.begin(), weights.end(), cumulative.begin());
  double const total = cumulative.back();
  std::vector<std::uint64_t> mine(count);
  for (int s = 0; s < count; ++s) {
    double const target = (double(s) + 0.5) * total / double(count);
    std::size_t i = 0;
    while (i < n - 1 && !(cumulative[i] > target)) ++i;
    mine[s] = keys[i];
  }
  std::vector<std::uint64_t> all_keys(std::size_t(count) * ranks);
  std::vector<double> each(ranks);
  double const weight_each = total / count;
  MPI_Allgather(mine.data(), count, MPI_UINT64_T, all_keys.data(), count, MPI_UINT64_T, context.comm());
  MPI_Allgather(&weight_each, 1, MPI_DOUBLE, each.data(), 1, MPI_DOUBLE, context.comm());
  std::vector<kfmm::GatheredSample> samples;
  std::vector<std::size_t> offsets;
  for (int r = 0; r < ranks; ++r) {
    offsets.push_back(samples.size());
    for (int s = 0; s < count; ++s) samples.emplace_back(all_keys[std::size_t(r) * count + s], each[r]);
  }
  offsets.push_back(samples.size());
  kfmm::order_gathered_samples(samples, offsets);
  double sample_total = 0;
  for (auto const& sample : samples) sample_total += sample.second;
  std::vector<std::uint64_t> expected(ranks - 1, samples.back().first);
  double before = 0;
  int next = 1;
  for (auto const& sample : samples) {
    while (next < ranks && before >= sample_total * next / ranks) expected[next++ - 1] = sample.first;
    before += sample.second;
  }
  EXPECT_EQ(splitters, expected);
}

TEST_F(DecompositionTest, AllParticlesStartingOnOneRank) {
  decompose(rank == 0 ? uniform_keys(20000, 7) : std::vector<std::uint64_t>());
  expect_ids_unchanged();
  expect_keys_in_own_range();
  EXPECT_LT(imbalance(double(keys_here.size())), 0.1);
}

TEST_F(DecompositionTest, FewerParticlesThanRanks) {
  decompose(rank == 0 ? std::vector<std::uint64_t>{5, 1u << 20} : std::vector<std::uint64_t>());
  expect_ids_unchanged();
  expect_keys_in_own_range();
}

TEST_F(DecompositionTest, NoParticlesAnywhere) {
  decompose({});
  expect_ids_unchanged();
  EXPECT_TRUE(keys_here.empty());
}

// All particles at one point share one key: they all go to one rank (the last), which is
// accepted; nothing may crash or lose particles.
TEST_F(DecompositionTest, IdenticalKeysGoToOneRank) {
  decompose(std::vector<std::uint64_t>(500, 42));
  expect_ids_unchanged();
  expect_keys_in_own_range();
  EXPECT_EQ(keys_here.size(), rank == ranks - 1 ? std::size_t(500 * ranks) : std::size_t(0));
}

TEST_F(DecompositionTest, DestinationsFollowTheSplitters) {
  std::vector<std::uint64_t> const splitters{10, 20, 20, 30};
  auto const keys = device_view(std::vector<std::uint64_t>{0, 9, 10, 19, 20, 29, 30, ~std::uint64_t(0)}, "keys");
  auto const ranks_of = to_vector(kfmm::destination_ranks(kfmm::ExecutionSpace(), keys, 8, splitters), 8);
  EXPECT_EQ(ranks_of, (std::vector<int>{0, 0, 1, 1, 3, 3, 4, 4}));
}

TEST_F(DecompositionTest, NegativeWeightThrowsOnEveryRank) {
  std::vector<std::uint64_t> keys{1, 2, 3};
  std::vector<double> weights{1, 1, 1};
  if (rank == ranks - 1) weights[1] = -2;
  try {
    kfmm::choose_splitters(kfmm::ExecutionSpace(), context, device_view(keys, "keys"), 3, device_view(weights, "weights"));
    FAIL() << "expected kfmm::Error";
  } catch (kfmm::Error const& e) {
    EXPECT_NE(std::string(e.what()).find("key 1 has weight -2"), std::string::npos) << e.what();
  }
}

}  // namespace
