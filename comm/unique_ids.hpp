#pragma once
/// \file
/// \brief Particle ids over all ranks: finding repeated ids, renumbering.
///
/// Ids are how users and kfmm match results to particles (snapshots, restarts, accuracy
/// samples), so files are checked where they enter: each id goes to an owner rank chosen by a
/// hash, the owner sorts what arrived and compares neighbours. The answer (the smallest repeated
/// id and its first two rows in the global order) does not depend on the rank count.
#include <kfmm/comm/context.hpp>
#include <kfmm/comm/exchange_plan.hpp>
#include <kfmm/core/particles.hpp>
#include <kfmm/core/sort.hpp>
#include <kfmm/core/types.hpp>

#include <cstdint>
#include <limits>
#include <string>

namespace kfmm {

/// \brief Repeated ids among the particles of all ranks.
///
/// Rows count the particles of rank 0 first, then rank 1, …, each rank's in local order: for
/// particles read by read_particles() that is the row in the file.
struct IdRepeats {
  std::uint64_t count = 0;  ///< particles whose id a particle of a lower row already has (0: all unique)
  std::uint64_t id = 0;     ///< the smallest repeated id
  std::uint64_t rows[2] = {0, 0};     ///< its first two rows in the global order
  std::uint64_t ranks[2] = {0, 0};    ///< the ranks holding those rows
  std::uint64_t indices[2] = {0, 0};  ///< their local indices there
  explicit operator bool() const { return count > 0; }
};

namespace detail {

/// One particle id and its global row; moved to the id's owner rank.
struct IdRecord {
  std::uint64_t id;
  std::uint64_t row;
};

/// SplitMix64's finaliser: consecutive ids spread evenly over the owner ranks.
KOKKOS_INLINE_FUNCTION std::uint64_t id_hash(std::uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The kernels are free functions: nvcc allows device lambdas only there and in public members.
template <class ExecutionSpace, class Ids, class Owners, class Records>
void make_id_records(ExecutionSpace const& space, Ids const& ids, std::size_t n, std::uint64_t first_row,
                     std::uint64_t ranks, Owners const& owners, Records const& records) {
  Kokkos::parallel_for(
      "kfmm::unique_ids::records", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n), KOKKOS_LAMBDA(std::size_t i) {
        std::uint64_t const id = ids(i);
        if (ranks > 1) owners(i) = static_cast<int>(id_hash(id) % ranks);
        records(i) = IdRecord{id, first_row + i};
      });
}

template <class ExecutionSpace, class Records, class Keys>
void id_keys(ExecutionSpace const& space, Records const& records, std::size_t n, Keys const& keys) {
  Kokkos::parallel_for(
      "kfmm::unique_ids::keys", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t k) { keys(k) = records(k).id; });
}

/// Over sorted keys: how many equal their predecessor, and the smallest such key.
template <class ExecutionSpace, class Keys>
void count_repeats(ExecutionSpace const& space, Keys const& keys, std::size_t n, std::uint64_t& count,
                   std::uint64_t& smallest) {
  count = 0;
  smallest = std::numeric_limits<std::uint64_t>::max();
  if (n < 2) return;
  Kokkos::parallel_reduce(
      "kfmm::unique_ids::count", Kokkos::RangePolicy<ExecutionSpace>(space, 1, n),
      KOKKOS_LAMBDA(std::size_t k, std::uint64_t & sum) { sum += keys(k) == keys(k - 1) ? 1 : 0; }, count);
  if (count == 0) return;
  Kokkos::parallel_reduce(
      "kfmm::unique_ids::smallest", Kokkos::RangePolicy<ExecutionSpace>(space, 1, n),
      KOKKOS_LAMBDA(std::size_t k, std::uint64_t & low) {
        if (keys(k) == keys(k - 1) && keys(k) < low) low = keys(k);
      },
      Kokkos::Min<std::uint64_t>(smallest));
}

/// The first position of `key` in the sorted keys.
template <class ExecutionSpace, class Keys>
std::size_t first_position(ExecutionSpace const& space, Keys const& keys, std::size_t n, std::uint64_t key) {
  std::size_t first = n;
  Kokkos::parallel_reduce(
      "kfmm::unique_ids::first", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t k, std::size_t & low) {
        if (keys(k) == key && k < low) low = k;
      },
      Kokkos::Min<std::size_t>(first));
  return first;
}

template <class ExecutionSpace, class Ids>
void set_ids_by_row(ExecutionSpace const& space, Ids const& ids, std::size_t n, std::uint64_t first_id) {
  Kokkos::parallel_for(
      "kfmm::unique_ids::renumber", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t i) { ids(i) = first_id + i; });
}

/// The global row of this rank's first particle (ranks in order). Collective.
std::uint64_t first_global_row(Context const& context, std::size_t n);

/// Agrees on the repeats found by each owner rank: every rank returns the same answer. `first_row`
/// is this rank's first global row (to name the ranks holding the rows). Collective.
IdRepeats agree_on_repeats(Context const& context, std::uint64_t first_row, std::uint64_t count,
                           std::uint64_t smallest, IdRecord const* first_two);

}  // namespace detail

/// \brief Finds ids that occur more than once among `ids[0, n)` of every rank. Collective; every
/// rank gets the same answer, whatever the rank count. Runs in `space` (kernels and the plan in
/// the Views' memory space; two small host copies per rank).
template <class ExecutionSpace, class Memory>
IdRepeats find_repeated_ids(ExecutionSpace const& space, Context const& context,
                            ScalarView<std::uint64_t, Memory> const& ids, std::size_t n) {
  std::string error;
  if (ids.extent(0) < n) error = fmt::format("find_repeated_ids: n = {} exceeds the {} ids given", n, ids.extent(0));
  agree_on_error(context, error);
  auto const alloc = [](char const* label) { return Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)); };
  bool const distributed = context.size() > 1;  // one rank owns every id: no exchange
  Kokkos::View<int*, Memory> owners(alloc("kfmm::unique_ids::owners"), distributed ? n : 0);
  Kokkos::View<detail::IdRecord*, Memory> records(alloc("kfmm::unique_ids::records"), n);
  std::uint64_t const first_row = detail::first_global_row(context, n);
  detail::make_id_records(space, ids, n, first_row, std::uint64_t(context.size()), owners, records);
  space.fence();
  auto arrived = records;
  std::size_t m = n;
  if (distributed) {
    ExchangePlan<Memory> const plan(context, owners, n);
    arrived = plan.exchange(records);
    m = plan.num_import();
  }
  Kokkos::View<std::uint64_t*, Memory> keys(alloc("kfmm::unique_ids::keys"), m);
  Kokkos::View<std::uint64_t*, Memory> order(alloc("kfmm::unique_ids::order"), m);
  detail::id_keys(space, arrived, m, keys);
  // Stable: records of one id stay in arrival order (source rank, then local order), so
  // the first two of the smallest repeated id are its two lowest rows.
  KeySorter<Memory, std::uint64_t>().sort(space, keys, order, m);
  std::uint64_t count = 0, smallest = 0;
  detail::count_repeats(space, keys, m, count, smallest);
  detail::IdRecord first_two[2] = {};
  if (count > 0) {
    std::size_t const at = detail::first_position(space, keys, m, smallest);
    auto const positions = Kokkos::create_mirror_view_and_copy(
        Kokkos::HostSpace(), Kokkos::subview(order, Kokkos::make_pair(at, at + 2)));
    for (int k = 0; k < 2; ++k)
      Kokkos::deep_copy(first_two[k], Kokkos::subview(arrived, std::size_t(positions(k))));
  }
  return detail::agree_on_repeats(context, first_row, count, smallest, first_two);
}

/// find_repeated_ids() over the `num` valid particles.
template <class Memory>
IdRepeats find_repeated_ids(Context const& context, Particles<Memory> const& particles) {
  return find_repeated_ids(typename Memory::execution_space{}, context, particles.id, particles.num);
}

/// \brief Sets every id to its global row + `first_id` (ranks in order, each rank's particles in
/// local order): 1..N by default, as kfmm's generated initial conditions number them. Collective.
template <class Memory>
void renumber_ids(Context const& context, Particles<Memory>& particles, std::uint64_t first_id = 1) {
  std::uint64_t const first = detail::first_global_row(context, particles.num) + first_id;
  detail::set_ids_by_row(typename Memory::execution_space{}, particles.id, particles.num, first);
}

/// What readers do with a file whose ParticleIDs repeat.
enum class DuplicateIdPolicy {
  Reject,    ///< throw kfmm::Error naming the smallest repeated id and its rows (the default)
  Renumber,  ///< replace every id by its row + 1 in the file (1..N), repeated or not
  Keep       ///< keep the ids as they are (tools that only report what a file holds)
};

/// "reject", "renumber" or "keep"; throws kfmm::Error naming the choices otherwise.
DuplicateIdPolicy parse_duplicate_id_policy(std::string const& name);
std::string to_string(DuplicateIdPolicy policy);

/// "id 7 at rows 3 and 12 (and 4 more repeats)": the repeats for an error message.
std::string describe(IdRepeats const& repeats);

}  // namespace kfmm
