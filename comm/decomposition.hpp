#pragma once
/// \file
/// \brief Domain decomposition by weighted sample sort of Hilbert keys: rank r
/// owns the keys in [splitters[r−1], splitters[r]), and redistribute() moves particles there.
#include <kfmm/comm/context.hpp>
#include <kfmm/comm/exchange_plan.hpp>
#include <kfmm/core/binary_search.hpp>
#include <kfmm/core/particles.hpp>
#include <kfmm/core/session_scratch.hpp>
#include <kfmm/core/view_growth.hpp>
#include <kfmm/core/types.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace kfmm {

/// \brief Chooses ranks − 1 splitters that give every rank about the same total weight.
///
/// Each rank sorts its first `n` keys, takes `samples_per_rank` samples at equal quantiles of
/// its weight (each standing for 1/samples_per_rank of the rank's weight), all ranks gather
/// the samples, order them identically and cut them at equal cumulative weight. `weights`
/// holds a non-negative cost per key (e.g. the last step's interactions); an empty View (or
/// weights that sum to 0 over all ranks) means weight 1 per key. The same splitters are
/// returned on every rank, non-decreasing. Equal keys always land on one rank, so particles
/// sharing one position all go to one rank (then the other ranks hold none). Collective; bad
/// input on any rank (a short View, a negative or non-finite weight) makes every rank throw.
/// `local_error`: a failure this rank met just before the call (its keys are then not used),
/// agreed with the input checks, so that a caller's local stage needs no collective of its own.
/// Kernels run on `space` (the instance that wrote `keys` and `weights`).
std::vector<std::uint64_t> choose_splitters(ExecutionSpace const& space, Context const& context,
                                            Kokkos::View<std::uint64_t const*, MemorySpace> const& keys, std::size_t n,
                                            Kokkos::View<double const*, MemorySpace> const& weights = {},
                                            int samples_per_rank = 256, std::string const& local_error = {});

namespace detail {
/// \brief `n` rows of a View of T kept for the Kokkos session (one per T and memory space) and
/// handed out again once no caller holds it any more, so that a decomposition repeated every
/// step allocates nothing; a caller that still holds the last one gets a new View.
struct RecycledRows {};
template <class T, class Memory>
Kokkos::View<T*, Memory> recycled_rows(std::size_t n, std::string const& label) {
  auto& kept = session_scratch<Kokkos::View<T*, Memory>, RecycledRows>();
  auto const rows = Kokkos::make_pair(std::size_t(0), n);
  if (kept.use_count() > 1) return Kokkos::View<T*, Memory>(Kokkos::view_alloc(Kokkos::WithoutInitializing, label), n);
  grow_discarding(kept, n, label, 8);
  return Kokkos::subview(kept, rows);
}
}  // namespace detail

/// \brief The owning rank of each of the first `n` keys: the number of splitters ≤ key.
/// The returned View is reused by a later call once the caller no longer holds it.
template <class ExecutionSpace, class KeyView>
Kokkos::View<int*, typename KeyView::memory_space> destination_ranks(ExecutionSpace const& space,
                                                                    KeyView const& keys, std::size_t n,
                                                                    std::vector<std::uint64_t> const& splitters) {
  using Memory = typename KeyView::memory_space;
  static_assert(std::is_same<typename KeyView::non_const_value_type, std::uint64_t>::value,
                "keys must be std::uint64_t");
  if (keys.extent(0) < n) fail("destination_ranks: n = {} exceeds the {} keys given", n, keys.extent(0));
  auto const bounds = detail::recycled_rows<std::uint64_t, Memory>(splitters.size(), "kfmm::decomposition::splitters");
  // A blocking copy: `bounds` may be in use by a call on another execution space instance.
  Kokkos::deep_copy(bounds, Kokkos::View<std::uint64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                                splitters.data(), splitters.size()));
  count_host_device_bytes(view_bytes(bounds));
  auto const ranks = detail::recycled_rows<int, Memory>(n, "kfmm::decomposition::ranks");
  int const count = static_cast<int>(splitters.size());
  Kokkos::parallel_for(
      "kfmm::decomposition::destination_ranks", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t i) {
        ranks(i) = upper_bound(bounds, 0, count, keys(i));  // the first splitter > key
      });
  return ranks;
}

/// \brief Moves every particle i of this rank to rank `destinations[i]` (−1 drops it) with one
/// ExchangePlan for all fields. Afterwards `num` is the number received, ordered by source
/// rank then by order on the source; the capacity grows when needed and `num_total` is kept.
/// `plan_out`, when given, receives the plan (e.g. to send results back with reverse()).
/// All fields of a particle travel in one record (one message per partner); particles that stay
/// are not copied when they keep their rows and moved in place when they do not. `extra`:
/// per-particle Views (one row per particle) that travel in the same records, grown (keeping
/// their rows) to the rows the exchange needs. Collective.
template <class Memory, class... Extra>
void redistribute(Context const& context, Particles<Memory>& particles,
                  Kokkos::View<int const*, typename Particles<Memory>::memory_space> const& destinations,
                  ExchangePlan<Memory>* plan_out = nullptr, Extra&... extra) {
  ExchangePlan<Memory> plan(context, destinations, particles.num);
  particles.reserve(plan.num_import());
  std::size_t const rows = particles.num > plan.num_import() ? particles.num : plan.num_import();
  (grow_preserving(extra, rows), ...);
  plan.exchange_in_place(particles.pos, particles.vel, particles.mass, particles.id, extra...);
  particles.num = plan.num_import();
  if (plan_out) *plan_out = std::move(plan);
}

}  // namespace kfmm
