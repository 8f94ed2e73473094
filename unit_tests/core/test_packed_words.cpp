// Two 32-bit words in one double and back, bit for bit, in a kernel of the execution space:
// floats (ordinary values, signed zeros, subnormals, the extremes, infinities and NaNs with
// payloads in either half: a packed double is then a NaN itself, and must still come back
// unchanged after a copy through a View, as rows do between ranks) and integers beside floats
// (a leaf index and a mass).
#include <kfmm/core/packed_words.hpp>
#include <kfmm/core/types.hpp>

#include "../device_views.hpp"

#include <gtest/gtest.h>

#include <cfloat>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace kfmm_test {

std::uint32_t bits_of(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

float float_of(std::uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

// Packs pairs (firsts[i], seconds[i]) into a View of doubles, copies that View (the way a row
// travels) and unpacks both halves, all on the execution space.
void round_trip_on_device(std::vector<float> const& firsts, std::vector<float> const& seconds,
                          std::vector<std::uint64_t>& packed_bits, std::vector<float>& first_back,
                          std::vector<float>& second_back) {
  using kfmm::ScalarView;
  using kfmm::test_support::device_view;
  using kfmm::test_support::on_host;
  std::size_t const n = firsts.size();
  auto const a = device_view(firsts, "first");
  auto const b = device_view(seconds, "second");
  ScalarView<float> a_back("first_back", n), b_back("second_back", n);
  ScalarView<double> packed("packed", n), copied("copied", n);
  Kokkos::parallel_for(
      "kfmm_test::pack_float_pairs", Kokkos::RangePolicy<kfmm::ExecutionSpace>(0, n),
      KOKKOS_LAMBDA(std::size_t i) { packed(i) = kfmm::pack_float_pair(a(i), b(i)); });
  Kokkos::deep_copy(copied, packed);
  Kokkos::parallel_for(
      "kfmm_test::unpack_float_pairs", Kokkos::RangePolicy<kfmm::ExecutionSpace>(0, n), KOKKOS_LAMBDA(std::size_t i) {
        a_back(i) = kfmm::unpack_float(copied(i), false);
        b_back(i) = kfmm::unpack_float(copied(i), true);
      });
  auto const hp = on_host(copied);
  auto const ha_back = on_host(a_back);
  auto const hb_back = on_host(b_back);
  packed_bits.resize(n);
  for (std::size_t i = 0; i < n; ++i) std::memcpy(&packed_bits[i], &hp(i), sizeof(double));
  first_back.assign(ha_back.data(), ha_back.data() + n);
  second_back.assign(hb_back.data(), hb_back.data() + n);
}

TEST(PackedWords, FloatPairsKeepEveryBit) {
  float const inf = std::numeric_limits<float>::infinity();
  std::vector<float> const values{0.0f,
                                  -0.0f,
                                  1.0f,
                                  -3.25f,
                                  FLT_MIN,
                                  std::numeric_limits<float>::denorm_min(),
                                  -std::numeric_limits<float>::denorm_min(),
                                  FLT_MAX,
                                  -FLT_MAX,
                                  inf,
                                  -inf,
                                  float_of(0x7fc00001u),   // quiet NaN with a payload
                                  float_of(0x7f800001u),   // signalling NaN pattern
                                  float_of(0xffbfffffu),   // negative signalling NaN pattern
                                  1.17549421e-38f};
  std::vector<float> firsts, seconds;
  for (float x : values)
    for (float y : values) {
      firsts.push_back(x);
      seconds.push_back(y);
    }
  std::vector<std::uint64_t> packed;
  std::vector<float> first_back, second_back;
  round_trip_on_device(firsts, seconds, packed, first_back, second_back);
  for (std::size_t i = 0; i < firsts.size(); ++i) {
    EXPECT_EQ(bits_of(first_back[i]), bits_of(firsts[i])) << "pair " << i;
    EXPECT_EQ(bits_of(second_back[i]), bits_of(seconds[i])) << "pair " << i;
    // The layout: the first float in the low half.
    EXPECT_EQ(packed[i], std::uint64_t(bits_of(firsts[i])) | std::uint64_t(bits_of(seconds[i])) << 32) << "pair " << i;
  }
}

// (index, float) pairs as the leaf particle rows carry them: pack_words of an index and a
// float's bits, read back as the index and the float.
void index_and_float_on_device(std::vector<std::uint32_t> const& indices, std::vector<float> const& values,
                               std::vector<std::uint32_t>& indices_back, std::vector<float>& values_back) {
  using kfmm::ScalarView;
  using kfmm::test_support::on_host;
  std::size_t const n = indices.size();
  auto const index = kfmm::test_support::device_view(indices, "index");
  auto const value = kfmm::test_support::device_view(values, "value");
  ScalarView<std::uint32_t> index_back("index_back", n);
  ScalarView<float> value_back("value_back", n);
  ScalarView<double> packed("packed", n);
  Kokkos::parallel_for(
      "kfmm_test::pack_index_and_float", Kokkos::RangePolicy<kfmm::ExecutionSpace>(0, n), KOKKOS_LAMBDA(std::size_t i) {
        packed(i) = kfmm::pack_words(index(i), kfmm::bit_copy<std::uint32_t>(value(i)));
      });
  Kokkos::parallel_for(
      "kfmm_test::unpack_index_and_float", Kokkos::RangePolicy<kfmm::ExecutionSpace>(0, n),
      KOKKOS_LAMBDA(std::size_t i) {
        index_back(i) = kfmm::unpack_word(packed(i), false);
        value_back(i) = kfmm::bit_copy<float>(kfmm::unpack_word(packed(i), true));
      });
  auto const hib = on_host(index_back);
  auto const hvb = on_host(value_back);
  indices_back.assign(hib.data(), hib.data() + n);
  values_back.assign(hvb.data(), hvb.data() + n);
}

TEST(PackedWords, IndexBesideFloat) {
  std::vector<std::uint32_t> const indices{0u, 1u, 12345u, 0x7fffffffu, 0x80000000u, 0xffffffffu};
  std::vector<float> const values{1.0f / 3, -0.0f, FLT_MIN, FLT_MAX, std::numeric_limits<float>::denorm_min(), 2.5e-7f};
  std::vector<std::uint32_t> indices_back;
  std::vector<float> values_back;
  index_and_float_on_device(indices, values, indices_back, values_back);
  for (std::size_t i = 0; i < indices.size(); ++i) {
    EXPECT_EQ(indices_back[i], indices[i]) << "row " << i;
    EXPECT_EQ(bits_of(values_back[i]), bits_of(values[i])) << "row " << i;
  }
}

}  // namespace kfmm_test
