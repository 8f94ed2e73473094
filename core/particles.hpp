#pragma once
/// \file
/// \brief Padded structure-of-arrays particle storage (DESIGN.md §4).
#include <kfmm/core/error.hpp>
#include <kfmm/core/types.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

namespace kfmm {

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

  /// Makes room for at least `n` particles, keeping `[0, num)`. Grows by ≥ 1.5× when it grows.
  void reserve(std::size_t n) {
    if (n <= capacity()) return;
    std::size_t const grown = capacity() + capacity() / 2;
    reallocate(n > grown ? n : grown);
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

  /// Copies particles `[begin, end)` of `other` to `[at, at + end - begin)` of this.
  template <class OtherMemory>
  void copy_range(Particles<OtherMemory> const& other, std::size_t begin, std::size_t end,
                  std::size_t at) const {
    if (end <= begin) return;
    auto const src = Kokkos::make_pair(begin, end);
    auto const dst = Kokkos::make_pair(at, at + (end - begin));
    Kokkos::deep_copy(Kokkos::subview(pos, dst, Kokkos::ALL), Kokkos::subview(other.pos, src, Kokkos::ALL));
    Kokkos::deep_copy(Kokkos::subview(vel, dst, Kokkos::ALL), Kokkos::subview(other.vel, src, Kokkos::ALL));
    Kokkos::deep_copy(Kokkos::subview(mass, dst), Kokkos::subview(other.mass, src));
    Kokkos::deep_copy(Kokkos::subview(id, dst), Kokkos::subview(other.id, src));
  }

 private:
  void reallocate(std::size_t capacity) {
    Kokkos::resize(pos, capacity);
    Kokkos::resize(vel, capacity);
    Kokkos::resize(mass, capacity);
    Kokkos::resize(id, capacity);
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
