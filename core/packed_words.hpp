#pragma once
/// \file
/// \brief Two 32-bit words (floats or integers) in the 64 bits of one double, bit for bit
/// (callable on any device).
///
/// Rows of mixed data travel between ranks as doubles (node rows: geometry, coefficients, cell
/// codes; leaf particles: requester, position, mass). A single-precision pass reads
/// coefficients and masses as floats: packed two to a double (or a float beside a 32-bit
/// index) they travel at their own precision in half the bytes and come back with the same
/// bits. A packed double is only moved, never computed with; whether its bits form a NaN does
/// not matter.
#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace kfmm {

/// The object representation of `from` as a `To` of the same size (std::bit_cast for device
/// code; memcpy is a device builtin, as in Kokkos::bit_cast).
template <class To, class From>
KOKKOS_INLINE_FUNCTION To bit_copy(From const& from) {
  static_assert(sizeof(To) == sizeof(From), "bit_copy needs types of the same size");
  static_assert(std::is_trivially_copyable<To>::value && std::is_trivially_copyable<From>::value,
                "bit_copy needs trivially copyable types");
  To to;
  memcpy(static_cast<void*>(&to), static_cast<void const*>(&from), sizeof(To));
  return to;
}

/// `low` in the low 32 bits, `high` in the high 32 bits of a double.
KOKKOS_INLINE_FUNCTION double pack_words(std::uint32_t low, std::uint32_t high) {
  return bit_copy<double>(std::uint64_t(low) | std::uint64_t(high) << 32);
}

/// The low (`high_half` false) or high word of pack_words.
KOKKOS_INLINE_FUNCTION std::uint32_t unpack_word(double packed, bool high_half) {
  std::uint64_t const bits = bit_copy<std::uint64_t>(packed);
  return std::uint32_t(high_half ? bits >> 32 : bits & 0xffffffffu);
}

/// `first` in the low, `second` in the high half of a double.
KOKKOS_INLINE_FUNCTION double pack_float_pair(float first, float second) {
  return pack_words(bit_copy<std::uint32_t>(first), bit_copy<std::uint32_t>(second));
}

/// The float of pack_float_pair's low (`second_half` false) or high half.
KOKKOS_INLINE_FUNCTION float unpack_float(double packed, bool second_half) {
  return bit_copy<float>(unpack_word(packed, second_half));
}

}  // namespace kfmm
