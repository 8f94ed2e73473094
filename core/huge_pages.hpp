#pragma once
/// \file
/// \brief Large host allocations backed by transparent huge pages where the kernel offers them.
///
/// Memory a View touches for the first time costs a page fault per 4 KiB page; on virtual
/// machines a fault costs microseconds, so filling a fresh result of a few hundred MB can take
/// longer than computing it. A 2 MiB page needs one fault for 512 of those. With the kernel's
/// transparent huge pages in `madvise` mode (a common default), only ranges marked with
/// MADV_HUGEPAGE get them; this marks the 2 MiB-aligned interior of a large host View before
/// its first touch. Device memory, small Views and systems without the call are left alone.
#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace kfmm {

/// Views smaller than this keep ordinary pages: glibc serves them from its heap once it has
/// freed one of their size (its mapping threshold adapts up to 32 MiB), so their pages are
/// reused from call to call without faults, and huge pages there only cost compaction. Beyond,
/// every allocation is a fresh mapping that faults page by page.
inline constexpr std::size_t huge_page_min_bytes = std::size_t(32) << 20;

/// Work Views kept from call to call (core/view_growth.hpp) are allocated only when they grow,
/// so marking them costs nothing later; from this size on they hold at least one whole 2 MiB page.
inline constexpr std::size_t kept_huge_page_min_bytes = std::size_t(4) << 20;

/// Marks the whole 2 MiB pages inside [data, data + bytes) for transparent huge pages; a
/// no-op below `min_bytes` or where madvise(MADV_HUGEPAGE) does not exist. Only advice:
/// failure changes nothing but speed, so it is ignored.
inline void advise_huge_pages(void* data, std::size_t bytes, std::size_t min_bytes = huge_page_min_bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (data == nullptr || bytes < min_bytes) return;
  std::uintptr_t const huge = std::uintptr_t(2) << 20;
  std::uintptr_t const begin = (reinterpret_cast<std::uintptr_t>(data) + huge - 1) & ~(huge - 1);
  std::uintptr_t const end = (reinterpret_cast<std::uintptr_t>(data) + bytes) & ~(huge - 1);
  if (end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)data;
  (void)bytes;
  (void)min_bytes;
#endif
}

/// The same for a View in host memory (Kokkos::HostSpace); other memory spaces are left alone.
template <class View>
void advise_huge_pages(View const& view, std::size_t min_bytes = huge_page_min_bytes) {
  if constexpr (std::is_same<typename View::memory_space, Kokkos::HostSpace>::value)
    advise_huge_pages(static_cast<void*>(view.data()), view.span() * sizeof(typename View::value_type), min_bytes);
  else
    (void)min_bytes;
}

/// \brief A View of the given extents, not initialised, its 2 MiB pages marked for huge pages
/// from `min_bytes` on (see advise_huge_pages).
template <class View, class... Extents>
View allocate_on_huge_pages(std::size_t min_bytes, std::string const& label, Extents... extents) {
  View view(Kokkos::view_alloc(Kokkos::WithoutInitializing, label), extents...);
  advise_huge_pages(view, min_bytes);
  return view;
}

/// \brief A View of the given extents, not initialised, on huge pages where possible (see
/// advise_huge_pages): for large results and scratch that are written before they are read.
template <class View, class... Extents>
View allocate_large(std::string const& label, Extents... extents) {
  return allocate_on_huge_pages<View>(huge_page_min_bytes, label, extents...);
}

/// \brief The same for a View kept from call to call and filled before it is read (the
/// threshold kept_huge_page_min_bytes: it is allocated once, not per call).
template <class View, class... Extents>
View allocate_kept(std::string const& label, Extents... extents) {
  return allocate_on_huge_pages<View>(kept_huge_page_min_bytes, label, extents...);
}

}  // namespace kfmm
