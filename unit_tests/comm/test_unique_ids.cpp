// Repeated particle ids over all ranks: the answer against a brute-force count over the global
// id list, the same at every rank count; renumbering; the policy names.
#include <kfmm/comm/unique_ids.hpp>
#include <kfmm/core/error.hpp>

#include "../device_views.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

namespace {

using kfmm::Context;
using kfmm::IdRepeats;

class UniqueIdsTest : public testing::Test {
 protected:
  Context context;

  // Rank r's rows of a global list of n: uneven slices, low ranks may get none.
  std::pair<std::size_t, std::size_t> slice(std::size_t n, std::size_t rank) const {
    std::size_t const ranks = context.size();
    auto const bound = [&](std::size_t r) { return n * r * r / (ranks * ranks); };
    return {bound(rank), bound(rank + 1)};
  }

  IdRepeats find(std::vector<std::uint64_t> const& global) const {
    auto const [begin, end] = slice(global.size(), context.rank());
    std::vector<std::uint64_t> const local(global.begin() + begin, global.begin() + end);
    auto const ids = kfmm::test_support::device_view(local, "ids");
    return kfmm::find_repeated_ids(kfmm::ExecutionSpace(), context, ids, local.size());
  }

  // The answer from all pairs: repeats, the smallest repeated id, its first two rows.
  static IdRepeats brute_force(std::vector<std::uint64_t> const& global) {
    IdRepeats expected;
    std::map<std::uint64_t, std::vector<std::uint64_t>> rows;
    for (std::size_t row = 0; row < global.size(); ++row) rows[global[row]].push_back(row);
    for (auto const& [id, where] : rows) {
      if (where.size() < 2) continue;
      if (expected.count == 0) {
        expected.id = id;
        expected.rows[0] = where[0];
        expected.rows[1] = where[1];
      }
      expected.count += where.size() - 1;
    }
    return expected;
  }

  void check(std::vector<std::uint64_t> const& global) const {
    IdRepeats const found = find(global), expected = brute_force(global);
    EXPECT_EQ(found.count, expected.count);
    if (expected.count == 0) return;
    EXPECT_EQ(found.id, expected.id);
    for (int k = 0; k < 2; ++k) {
      EXPECT_EQ(found.rows[k], expected.rows[k]);
      // the rank and local index name the same row
      EXPECT_EQ(slice(global.size(), found.ranks[k]).first + found.indices[k], found.rows[k]);
    }
  }
};

TEST_F(UniqueIdsTest, UniqueIdsHaveNoRepeats) {
  std::vector<std::uint64_t> ids(1000);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = 1 + 7919 * i;  // not in order of the hash
  check(ids);
  EXPECT_FALSE(find(ids));
  check({});
}

TEST_F(UniqueIdsTest, FindsTheSmallestRepeatAndItsFirstRows) {
  // Repeats within what will be one rank's slice, across slices, three copies, the largest id.
  std::vector<std::uint64_t> ids(997);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = 100 + i;
  std::uint64_t const top = ~std::uint64_t(0);
  ids[996] = top;
  ids[3] = top;
  ids[900] = ids[500];
  ids[950] = ids[500];
  ids[20] = ids[21];
  check(ids);
  IdRepeats const found = find(ids);
  EXPECT_EQ(found.count, 4u);
  EXPECT_EQ(found.id, 121u);
  EXPECT_EQ(found.rows[0], 20u);
  EXPECT_EQ(found.rows[1], 21u);
  EXPECT_EQ(kfmm::describe(found), "id 121 at rows 20 and 21 (4 repeats in all)");
}

TEST_F(UniqueIdsTest, RandomIdsAgreeWithAllPairs) {
  std::mt19937_64 random(12345);
  for (std::uint64_t range : {50ull, 2000ull, 1ull << 40}) {
    std::vector<std::uint64_t> ids(1500);
    for (auto& id : ids) id = random() % range;
    check(ids);
  }
}

TEST_F(UniqueIdsTest, RenumberGivesRowsPlusOne) {
  std::size_t const n = 301;
  auto const [begin, end] = slice(n, context.rank());
  kfmm::Particles<kfmm::MemorySpace> particles(end - begin + 5);  // padding stays untouched
  particles.num = end - begin;
  particles.num_total = n;
  Kokkos::deep_copy(particles.id, 42);
  kfmm::renumber_ids(context, particles);
  auto const ids = Kokkos::create_mirror_view_and_copy(kfmm::HostSpace(), particles.id);
  for (std::size_t i = 0; i < particles.num; ++i) EXPECT_EQ(ids(i), begin + i + 1);
  for (std::size_t i = particles.num; i < ids.extent(0); ++i) EXPECT_EQ(ids(i), 42u);
  EXPECT_FALSE(kfmm::find_repeated_ids(context, particles));
}

TEST(DuplicateIdPolicy, NamesRoundTripAndBadNamesAreErrors) {
  for (auto policy : {kfmm::DuplicateIdPolicy::Reject, kfmm::DuplicateIdPolicy::Renumber,
                      kfmm::DuplicateIdPolicy::Keep})
    EXPECT_EQ(kfmm::parse_duplicate_id_policy(kfmm::to_string(policy)), policy);
  try {
    kfmm::parse_duplicate_id_policy("ignore");
    ADD_FAILURE() << "no error";
  } catch (kfmm::Error const& e) {
    EXPECT_NE(std::string(e.what()).find("'ignore' is not one of reject, renumber, keep"), std::string::npos)
        << e.what();
  }
}

}  // namespace
