#pragma once
/// \file
/// \brief Padded structure-of-arrays particle storage.
#include <kfmm/core/error.hpp>
#include <kfmm/core/space_copy.hpp>
#include <kfmm/core/types.hpp>
#include <kfmm/core/view_growth.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

namespace kfmm {

namespace detail {
/// Kernels on the particle fields, outside any class: nvcc allows device lambdas only in free
/// functions and public member functions.
template <class View>
using CompactRows = Kokkos::View<typename View::non_const_data_type, Kokkos::LayoutLeft, typename View::memory_space>;

/// A contiguous View of `count` rows shaped like `View` (rank 1, (n, 3) or (n, k)).
template <class View>
CompactRows<View> allocate_compact_rows(std::size_t count, std::size_t width) {
  auto const alloc = Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::particles::rows");
  if constexpr (CompactRows<View>::rank_dynamic == 2) {
    return CompactRows<View>(alloc, count, width);
  } else {
    (void)width;
    return CompactRows<View>(alloc, count);
  }
}

/// Rows [first, first + count) of a rank-1 or (n, k) View into a new contiguous View (in the
/// View's space); scatter_rows() is the way back.
template <class View>
CompactRows<View> gather_rows(View const& view, std::size_t first, std::size_t count) {
  using Exec = typename View::memory_space::execution_space;
  std::size_t const width = View::rank == 1 ? 1 : view.extent(View::rank - 1);
  auto const rows = allocate_compact_rows<View>(count, width);
  if constexpr (View::rank == 1) {
    Kokkos::parallel_for("kfmm::particles::gather_rows", Kokkos::RangePolicy<Exec>(0, count),
                         KOKKOS_LAMBDA(std::size_t i) { rows(i) = view(first + i); });
  } else {
    Kokkos::parallel_for(
        "kfmm::particles::gather_rows", Kokkos::RangePolicy<Exec>(0, count), KOKKOS_LAMBDA(std::size_t i) {
          for (std::size_t k = 0; k < width; ++k) rows(i, k) = view(first + i, k);
        });
  }
  Exec().fence();  // the copy to another space may run on another execution space
  return rows;
}

template <class View, class Rows>
void scatter_rows(Rows const& rows, View const& view, std::size_t first, std::size_t count) {
  using Exec = typename View::memory_space::execution_space;
  if constexpr (View::rank == 1) {
    Kokkos::parallel_for("kfmm::particles::scatter_rows", Kokkos::RangePolicy<Exec>(0, count),
                         KOKKOS_LAMBDA(std::size_t i) { view(first + i) = rows(i); });
  } else {
    std::size_t const width = view.extent(1);
    Kokkos::parallel_for(
        "kfmm::particles::scatter_rows", Kokkos::RangePolicy<Exec>(0, count), KOKKOS_LAMBDA(std::size_t i) {
          for (std::size_t k = 0; k < width; ++k) view(first + i, k) = rows(i, k);
        });
  }
  Exec().fence();
}

/// Rows [from, from + count) of `src` into rows [to, to + count) of `dst`, in any two memory
/// spaces: gathered into a contiguous View, copied as one span, scattered.
template <class Src, class Dst>
void copy_rows(Src const& src, std::size_t from, Dst const& dst, std::size_t to, std::size_t count) {
  auto const packed = gather_rows(src, from, count);
  auto const moved = allocate_compact_rows<Dst>(count, Dst::rank == 1 ? 1 : dst.extent(Dst::rank - 1));
  copy_contiguous(typename Dst::memory_space::execution_space(), moved, packed);
  scatter_rows(moved, dst, to, count);
}
}  // namespace detail

/// \brief Particles of one rank in structure-of-arrays Views.
///
/// `num` entries are valid local particles; entries `[num, capacity())` are padding and are
/// never read as particles. `num_total` is the global count, the same on every rank.
/// Capacity grows on demand by at least half its size (amortised), never truncates.
template <class Memory = MemorySpace>
struct Particles {
  using memory_space = Memory;

  Vec3View<double, Memory> pos;
  Vec3View<double, Memory> vel;
  ScalarView<double, Memory> mass;
  ScalarView<std::uint64_t, Memory> id;
  std::size_t num = 0;
  std::size_t num_total = 0;

  Particles() : Particles(0) {}
  /// Allocates `capacity` slots with `num = num_total = 0`.
  explicit Particles(std::size_t capacity)
      : pos(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::particles::pos"), capacity),
        vel(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::particles::vel"), capacity),
        mass(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::particles::mass"), capacity),
        id(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::particles::id"), capacity) {}

  std::size_t capacity() const { return mass.extent(0); }

  /// \brief Makes room for at least `n` particles, keeping `[0, num)`; when it grows, to n and an
  /// eighth more. The decomposition calls it when a rank receives more than it holds: the share
  /// of a rank moves by a few percent between steps, and every particle-sized View of the solver
  /// is sized by this capacity, so on a GPU the room is paid many times over.
  void reserve(std::size_t n) {
    if (n <= capacity()) return;
    reallocate(n + n / 8);
  }

  /// Sets the number of valid local particles, growing the capacity when needed.
  void resize(std::size_t n) {
    reserve(n);
    num = n;
  }

  /// Ensures at least `capacity` slots and fills the padding (positions NaN, mass 0).
  void pad(std::size_t capacity) {
    if (capacity > this->capacity()) reallocate(capacity);
    fill_padding();
  }

  /// Drops all padding: capacity becomes `num`.
  void squeeze() {
    if (capacity() != num) reallocate(num);
  }

  /// Fills `[num, capacity)` with recognisable padding values.
  void fill_padding() const {
    if (num >= capacity()) return;
    auto const range = Kokkos::make_pair(num, capacity());
    double const nan = std::numeric_limits<double>::quiet_NaN();
    Kokkos::deep_copy(Kokkos::subview(pos, range, Kokkos::ALL), nan);
    Kokkos::deep_copy(Kokkos::subview(vel, range, Kokkos::ALL), nan);
    Kokkos::deep_copy(Kokkos::subview(mass, range), 0.0);
    Kokkos::deep_copy(Kokkos::subview(id, range), std::uint64_t(0));
  }

  /// Copies the valid particles of `other` (any memory space) into this, resizing to fit.
  template <class OtherMemory>
  void assign(Particles<OtherMemory> const& other) {
    resize(other.num);
    num_total = other.num_total;
    copy_range(other, 0, other.num, 0);
  }

  /// \brief Copies particles `[begin, end)` of `other` to `[at, at + end - begin)` of this.
  /// The rows go through contiguous buffers (detail::copy_rows), so the copy works between
  /// host and device memory for padded particles too, and CPU builds run the same path.
  template <class OtherMemory>
  void copy_range(Particles<OtherMemory> const& other, std::size_t begin, std::size_t end, std::size_t at) const {
    if (end <= begin) return;
    std::size_t const count = end - begin;
    if (at + count > capacity() || end > other.capacity())
      fail("Particles::copy_range: rows [{}, {}) of {} into [{}, {}) of {}: out of range; reserve room first", begin,
           end, other.capacity(), at, at + count, capacity());
    detail::copy_rows(other.pos, begin, pos, at, count);
    detail::copy_rows(other.vel, begin, vel, at, count);
    detail::copy_rows(other.mass, begin, mass, at, count);
    detail::copy_rows(other.id, begin, id, at, count);
  }

 private:
  void reallocate(std::size_t capacity) {
    resize_kept(pos, capacity);
    resize_kept(vel, capacity);
    resize_kept(mass, capacity);
    resize_kept(id, capacity);
  }
};

/// A host copy (separate allocation) of the valid particles.
template <class Memory>
Particles<HostSpace> to_host(Particles<Memory> const& particles) {
  Particles<HostSpace> host(particles.num);
  host.assign(particles);
  return host;
}

/// A device copy of host particles.
template <class Memory = MemorySpace>
Particles<Memory> to_device(Particles<HostSpace> const& particles) {
  Particles<Memory> device(particles.num);
  device.assign(particles);
  return device;
}

}  // namespace kfmm
