// allocate_large: the extents asked for, and the interior of a large host View marked for
// transparent huge pages (VmFlags "hg" in /proc/self/smaps) while small Views are left alone;
// the same for the work Views that grow_preserving / grow_discarding grow from 4 MiB on, and for
// the particles when they grow (a run's first decomposition), and for a key sorter's scratch.
#include <kfmm/core/huge_pages.hpp>
#include <kfmm/core/particles.hpp>
#include <kfmm/core/sort.hpp>
#include <kfmm/core/types.hpp>
#include <kfmm/core/view_growth.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>

namespace {

// VmFlags of the mapping that holds `address`, or "" when it is not found.
std::string mapping_flags(void const* address) {
  std::ifstream smaps("/proc/self/smaps");
  std::uintptr_t const a = reinterpret_cast<std::uintptr_t>(address);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream header(line);
    if (header >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = a >= begin && a < end;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

bool transparent_huge_pages_available() {
  std::ifstream mode("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string text;
  std::getline(mode, text);
  return text.find("[never]") == std::string::npos && !text.empty();
}

class HugePagesTest : public testing::Test {};

TEST_F(HugePagesTest, AllocateLargeGivesTheExtentsAskedFor) {
  auto const v = kfmm::allocate_large<Kokkos::View<double**, Kokkos::LayoutRight, kfmm::MemorySpace>>("large", 5, 7);
  EXPECT_EQ(v.extent(0), 5u);
  EXPECT_EQ(v.extent(1), 7u);
  EXPECT_EQ(v.label(), "large");
  auto const empty = kfmm::allocate_large<kfmm::ScalarView<int>>("empty", 0);
  EXPECT_EQ(empty.extent(0), 0u);
}

TEST_F(HugePagesTest, LargeHostViewsAreMarkedSmallOnesAreNot) {
  if (!std::is_same<kfmm::MemorySpace, Kokkos::HostSpace>::value) GTEST_SKIP() << "device memory is never advised";
  if (!transparent_huge_pages_available()) GTEST_SKIP() << "this kernel offers no transparent huge pages";
  std::size_t const rows = (kfmm::huge_page_min_bytes + (std::size_t(8) << 20)) / sizeof(double);
  auto const large = kfmm::allocate_large<kfmm::ScalarView<double>>("large", rows);
  void const* middle = large.data() + rows / 2;
  EXPECT_NE(mapping_flags(middle).find(" hg"), std::string::npos) << mapping_flags(middle);
  auto const small = kfmm::allocate_large<kfmm::ScalarView<double>>("small", 1000);
  EXPECT_EQ(mapping_flags(small.data()).find(" hg"), std::string::npos) << mapping_flags(small.data());
}

TEST_F(HugePagesTest, GrownKeptHostViewsAreMarkedFromTheirOwnThreshold) {
  if (!std::is_same<kfmm::MemorySpace, Kokkos::HostSpace>::value) GTEST_SKIP() << "device memory is never advised";
  if (!transparent_huge_pages_available()) GTEST_SKIP() << "this kernel offers no transparent huge pages";
  static_assert(kfmm::kept_huge_page_min_bytes < kfmm::huge_page_min_bytes, "kept Views start lower");
  std::size_t const rows = (kfmm::kept_huge_page_min_bytes + (std::size_t(4) << 20)) / sizeof(double);
  kfmm::ScalarView<double> preserved("preserved", 1);
  kfmm::grow_preserving(preserved, rows);
  EXPECT_NE(mapping_flags(preserved.data() + rows / 2).find(" hg"), std::string::npos);
  kfmm::ScalarView<double> discarded;
  kfmm::grow_discarding(discarded, rows, "discarded");
  EXPECT_NE(mapping_flags(discarded.data() + rows / 2).find(" hg"), std::string::npos);
  kfmm::ScalarView<double> appended("appended", 1);
  kfmm::grow_appending(appended, rows, 1);
  EXPECT_NE(mapping_flags(appended.data() + rows / 2).find(" hg"), std::string::npos);
  auto const kept = kfmm::allocate_kept<kfmm::ScalarView<double>>("kept", rows);
  EXPECT_NE(mapping_flags(kept.data() + rows / 2).find(" hg"), std::string::npos);
  kfmm::ScalarView<double> small;
  kfmm::grow_discarding(small, 1000, "small");
  EXPECT_EQ(mapping_flags(small.data()).find(" hg"), std::string::npos);
}

TEST_F(HugePagesTest, GrownParticlesAreMarkedAndKeepTheirRows) {
  if (!std::is_same<kfmm::MemorySpace, Kokkos::HostSpace>::value) GTEST_SKIP() << "device memory is never advised";
  if (!transparent_huge_pages_available()) GTEST_SKIP() << "this kernel offers no transparent huge pages";
  kfmm::Particles<Kokkos::HostSpace> particles(4);
  particles.num = 4;
  for (int i = 0; i < 4; ++i) {
    for (int a = 0; a < 3; ++a) particles.pos(i, a) = i + 0.25 * a;
    particles.mass(i) = 1.0 + i;
    particles.id(i) = 100 + i;
  }
  std::size_t const rows = (kfmm::kept_huge_page_min_bytes + (std::size_t(4) << 20)) / sizeof(double);
  particles.reserve(rows);
  ASSERT_GE(particles.capacity(), rows);
  EXPECT_NE(mapping_flags(particles.pos.data() + 3 * rows / 2).find(" hg"), std::string::npos);
  EXPECT_NE(mapping_flags(particles.mass.data() + rows / 2).find(" hg"), std::string::npos);
  for (int i = 0; i < 4; ++i) {
    for (int a = 0; a < 3; ++a) EXPECT_EQ(particles.pos(i, a), i + 0.25 * a);
    EXPECT_EQ(particles.mass(i), 1.0 + i);
    EXPECT_EQ(particles.id(i), std::uint64_t(100 + i));
  }
  EXPECT_EQ(particles.mass(rows - 1), 0.0);  // new rows value-initialised, as before
}

// A key sorter keeps its scratch between sorts (the solver sorts every step): large host scratch
// goes on huge pages before its first touch. Before, the first sort of a run faulted it in 4 KiB
// at a time.
TEST_F(HugePagesTest, KeySorterScratchIsMarked) {
  if (!std::is_same<kfmm::MemorySpace, Kokkos::HostSpace>::value) GTEST_SKIP() << "device memory is never advised";
  if (!transparent_huge_pages_available()) GTEST_SKIP() << "this kernel offers no transparent huge pages";
  // Beyond glibc's largest mmap threshold (32 MiB): the scratch is a fresh mapping, not heap
  // memory that an earlier test's marked View may have left marked.
  std::size_t const n = (kfmm::huge_page_min_bytes + (std::size_t(8) << 20)) / sizeof(std::uint64_t);
  Kokkos::View<std::uint64_t*, kfmm::MemorySpace> keys("keys", n);
  Kokkos::View<std::uint32_t*, kfmm::MemorySpace> permutation("permutation", n);
  auto host = Kokkos::create_mirror_view(keys);
  std::mt19937_64 random(7);
  for (std::size_t i = 0; i < n; ++i) host(i) = random();
  Kokkos::deep_copy(keys, host);
  kfmm::KeySorter<kfmm::MemorySpace> sorter;
  ASSERT_TRUE(sorter.sort(kfmm::ExecutionSpace(), keys, permutation, n));
  auto const& scratch = sorter.key_scratch();
  ASSERT_GE(scratch.extent(0), n);
  std::string const flags = mapping_flags(scratch.data() + n / 2);
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
}

}  // namespace
