#pragma once
/// \file
/// \brief Copies between memory spaces that a GPU build can perform: Kokkos copies between host
/// and device memory only spans that are contiguous in both Views ("no available copy
/// mechanism" otherwise), so a copy of a (range, ALL) slice of a padded LayoutLeft View works on
/// a CPU build and throws on a GPU. Every cross-space copy in kfmm goes through copy_contiguous(),
/// which checks contiguity on every backend, so the CPU tests catch what a GPU would refuse.
#include <kfmm/core/error.hpp>
#include <kfmm/core/kokkos_compat.hpp>

#include <cstddef>

namespace kfmm {

namespace detail {
/// Test hook: called for every copy_contiguous() with its size in bytes and whether both spans
/// are contiguous (unit tests check that copies a GPU build makes across spaces are possible).
inline void (*space_copy_observer)(std::size_t bytes, bool contiguous) = nullptr;
}  // namespace detail

/// \brief deep_copy(space, dst, src) of two Views with the same extents whose spans are
/// contiguous; throws kfmm::Error otherwise (on every backend, also where Kokkos could copy).
template <class ExecutionSpace, class Dst, class Src>
void copy_contiguous(ExecutionSpace const& space, Dst const& dst, Src const& src) {
  static_assert(unsigned(Dst::rank) == unsigned(Src::rank), "copy_contiguous: the Views must have the same rank");
  bool const contiguous = dst.span_is_contiguous() && src.span_is_contiguous() && dst.span() == dst.size() &&
                          src.span() == src.size();
  if (detail::space_copy_observer) detail::space_copy_observer(src.size() * sizeof(typename Src::value_type), contiguous);
  for (unsigned r = 0; r < unsigned(Dst::rank); ++r)
    if (dst.extent(r) != src.extent(r))
      fail("copy_contiguous: extent {} of '{}' is {} but of '{}' is {}; copy Views of equal shape", r, dst.label(),
           dst.extent(r), src.label(), src.extent(r));
  if (!contiguous)
    fail("copy_contiguous: '{}' or '{}' is not one contiguous span; GPU builds cannot copy such slices between "
         "memory spaces: copy whole Views or stage the slice through a contiguous View",
         dst.label(), src.label());
  Kokkos::deep_copy(space, dst, src);
}

}  // namespace kfmm
