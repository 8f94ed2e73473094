#pragma once
/// \file
/// \brief Two floats in the 64 bits of one double, bit for bit (callable on any device).
///
/// Rows of mixed data travel between ranks as doubles (node rows: geometry, coefficients, cell
/// codes). A single-precision expansion's coefficients are floats: packed two to a double they
/// travel at their own precision, in half the bytes, and come back with the same bits. A packed
/// double is only moved, never computed with; it is a NaN or an infinity only when its second
/// float is one.
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

/// `first` in the low 32 bits, `second` in the high 32 bits of a double.
KOKKOS_INLINE_FUNCTION double pack_float_pair(float first, float second) {
  std::uint64_t const bits =
      std::uint64_t(bit_copy<std::uint32_t>(first)) | std::uint64_t(bit_copy<std::uint32_t>(second)) << 32;
  return bit_copy<double>(bits);
}

/// The float of pack_float_pair's low (`second_half` false) or high half.
KOKKOS_INLINE_FUNCTION float unpack_float(double packed, bool second_half) {
  std::uint64_t const bits = bit_copy<std::uint64_t>(packed);
  return bit_copy<float>(std::uint32_t(second_half ? bits >> 32 : bits & 0xffffffffu));
}

}  // namespace kfmm
