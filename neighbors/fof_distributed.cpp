// friends_of_friends() on several ranks: the particles are redistributed by Hilbert key so that
// each rank holds a compact domain, each rank imports the particles of other ranks within the
// linking length of its domain (ghost import), links its own particles and the ghosts, and the
// ranks then agree on the labels of groups that cross domains by exchanging, for every ghost,
// the smallest label its component has here with the ghost's owner, and back, until no label
// changes anywhere.
#include <kfmm/comm/decomposition.hpp>
#include <kfmm/comm/exchange_plan.hpp>
#include <kfmm/comm/global_bounds.hpp>
#include <kfmm/core/binary_search.hpp>
#include <kfmm/core/error.hpp>
#include <kfmm/core/hilbert.hpp>
#include <kfmm/core/sort.hpp>
#include <kfmm/neighbors/fof.hpp>
#include <kfmm/neighbors/ghost_import.hpp>
#include <kfmm/neighbors/union_find.hpp>

#include <mpi.h>

#include <algorithm>
#include <limits>
#include <string>

namespace kfmm {

namespace detail {

/// Bounding boxes of `chunks` runs of consecutive Hilbert-sorted particles, inflated by nothing:
/// the ghost import adds the radius.
Kokkos::View<QueryBox*, MemorySpace> fof_query_boxes(ExecutionSpace const& space, Vec3View<double> const& pos,
                                                     ScalarView<std::uint32_t> const& order, std::size_t n,
                                                     std::size_t chunks, double radius) {
  Kokkos::View<QueryBox*, MemorySpace> boxes("kfmm::fof::query_boxes", chunks);
  Kokkos::parallel_for(
      "kfmm::fof::query_boxes", Kokkos::RangePolicy<ExecutionSpace>(space, 0, chunks), KOKKOS_LAMBDA(std::size_t c) {
        std::size_t const b = c * n / chunks, e = (c + 1) * n / chunks;
        QueryBox box;
        for (int k = 0; k < 3; ++k) {
          box.lo[k] = pos(order(b), k);
          box.hi[k] = box.lo[k];
        }
        for (std::size_t i = b + 1; i < e; ++i)
          for (int k = 0; k < 3; ++k) {
            double const x = pos(order(i), k);
            box.lo[k] = x < box.lo[k] ? x : box.lo[k];
            box.hi[k] = x > box.hi[k] ? x : box.hi[k];
          }
        box.radius = radius;
        boxes(c) = box;
      });
  return boxes;
}

/// Local index of every id in `wanted` among the first n ids of `id` (which must all be there).
/// Returns the number not found.
std::size_t fof_find_ids(ExecutionSpace const& space, ScalarView<std::uint64_t> const& id, std::size_t n,
                         ScalarView<std::uint64_t> const& wanted, std::size_t count, ScalarView<int> const& index) {
  ScalarView<std::uint64_t> sorted(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fof::sorted_ids"), n);
  ScalarView<std::uint32_t> order(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fof::id_order"), n);
  Kokkos::deep_copy(space, sorted, Kokkos::subview(id, Kokkos::make_pair(std::size_t(0), n)));
  KeySorter<MemorySpace, std::uint32_t>().sort(space, sorted, order, n);
  std::size_t missing = 0;
  Kokkos::parallel_reduce(
      "kfmm::fof::find_ids", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count),
      KOKKOS_LAMBDA(std::size_t e, std::size_t & lost) {
        std::uint64_t const key = wanted(e);
        std::size_t const at = lower_bound(sorted, std::size_t(0), n, key);
        if (at < n && sorted(at) == key) {
          index(e) = int(order(at));
        } else {
          index(e) = 0;
          ++lost;
        }
      },
      missing);
  return missing;
}

void fof_distributed(Context const& context, Particles<> const& particles, double linking_length, double box_size,
                     FoFResult& result) {
  ExecutionSpace space;
  std::size_t const n = particles.num;

  // 1. A compact domain per rank: Hilbert keys in the global cube (the periodic box), sample sort.
  Particles<> work;
  work.assign(particles);
  if (box_size > 0) {
    auto const pos = work.pos;
    Kokkos::parallel_for(
        "kfmm::fof::wrap", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n), KOKKOS_LAMBDA(std::size_t i) {
          for (int k = 0; k < 3; ++k) pos(i, k) = wrap_coordinate(pos(i, k), box_size);
        });
  }
  BoundingCube cube{{0, 0, 0}, box_size};
  if (box_size <= 0) {
    double lo[3], hi[3];
    compute_bounds(space, work.pos, n, lo, hi);
    allreduce_bounds(context, lo, hi);
    cube = cube_from_bounds(lo, hi);
  }
  ExchangePlan<MemorySpace> decomposition;
  {
    ScalarView<std::uint64_t> keys(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fof::hilbert_keys"), n);
    compute_keys(space, cube, work.pos, n, keys);
    auto const splitters = choose_splitters(space, context, keys, n);
    auto const destinations = destination_ranks(space, keys, n, splitters);
    redistribute(context, work, Kokkos::View<int const*, MemorySpace>(destinations), &decomposition);
  }
  std::size_t const m = work.num;

  // 2. Ghosts within the linking length of this rank's Hilbert chunks.
  Kokkos::View<QueryBox*, MemorySpace> boxes("kfmm::fof::query_boxes", 0);
  if (m > 0) {
    ScalarView<std::uint64_t> keys(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fof::hilbert_keys"), m);
    ScalarView<std::uint32_t> order(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fof::hilbert_order"), m);
    compute_keys(space, cube, work.pos, m, keys);
    KeySorter<MemorySpace, std::uint32_t>().sort(space, keys, order, m);
    boxes = fof_query_boxes(space, work.pos, order, m, std::min<std::size_t>(64, m), linking_length);
  }
  GhostOptions ghost_options;
  if (box_size > 0) ghost_options.periodic = PeriodicBox::cube(box_size);
  ghost_options.shift_positions = false;  // fof_components folds distances to the minimum image
  auto const ghosts = import_ghosts(space, context, work, boxes, ghost_options);
  std::size_t const g = ghosts.num;
  result.num_ghosts = g;

  // 3. Link own particles and ghosts together; value(rep) = smallest id of the component here.
  std::size_t const all = m + g;
  Vec3View<double> pos(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fof::all_pos"), all);
  ScalarView<std::uint64_t> id(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fof::all_id"), all);
  {
    auto const own_pos = work.pos, ghost_pos = ghosts.pos;
    auto const own_id = work.id, ghost_id = ghosts.id;
    Kokkos::parallel_for(
        "kfmm::fof::combine", Kokkos::RangePolicy<ExecutionSpace>(space, 0, all), KOKKOS_LAMBDA(std::size_t i) {
          for (int k = 0; k < 3; ++k) pos(i, k) = i < m ? own_pos(i, k) : ghost_pos(i - m, k);
          id(i) = i < m ? own_id(i) : ghost_id(i - m);
        });
  }
  ScalarView<int> component(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fof::component"), all);
  ScalarView<std::uint64_t> label(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fof::all_label"), all);
  collectively(context, [&] { fof_components(space, pos, all, linking_length, box_size, component); });
  fof_min_labels(space, component, id, all, label);
  ScalarView<std::uint64_t> value(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fof::value"), all);
  Kokkos::parallel_for(
      "kfmm::fof::values", Kokkos::RangePolicy<ExecutionSpace>(space, 0, all),
      KOKKOS_LAMBDA(std::size_t i) { value(component(i)) = label(i); });

  // 4. Each ghost's owner finds it by id once.
  Kokkos::View<int const*, MemorySpace> const owner_rank = ghosts.rank;
  ExchangePlan<MemorySpace> to_owner(context, owner_rank, g);
  auto const asked = to_owner.exchange(Kokkos::subview(ghosts.id, Kokkos::make_pair(std::size_t(0), g)));
  std::size_t const q = to_owner.num_import();
  ScalarView<int> local(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fof::ghost_local"), q);
  std::size_t const missing = fof_find_ids(space, work.id, m, asked, q, local);
  collectively(context, [&] {
    if (missing > 0)
      fail("friends-of-friends: rank {} was asked for {} ghost id(s) it does not hold (repeated ParticleIDs?)",
           context.rank(), missing);
  });

  // 5. Min-label rounds over the ghosts until no label changes on any rank.
  ScalarView<std::uint64_t> outgoing(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fof::outgoing"), g);
  ScalarView<std::uint64_t> answer(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fof::answer"), q);
  ScalarView<std::uint64_t> incoming(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fof::incoming"), q);
  ScalarView<std::uint64_t> returned(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fof::returned"), g);
  std::uint64_t* const values = value.data();
  while (true) {
    Kokkos::parallel_for(
        "kfmm::fof::ghost_values", Kokkos::RangePolicy<ExecutionSpace>(space, 0, g),
        KOKKOS_LAMBDA(std::size_t k) { outgoing(k) = value(component(m + k)); });
    space.fence();
    to_owner.exchange(outgoing, incoming);
    std::size_t lowered = 0, lowered_back = 0;
    Kokkos::parallel_reduce(
        "kfmm::fof::owner_min", Kokkos::RangePolicy<ExecutionSpace>(space, 0, q),
        KOKKOS_LAMBDA(std::size_t e, std::size_t & count) {
          count += fof_atomic_min(values + component(local(e)), incoming(e)) ? 1 : 0;
        },
        lowered);
    Kokkos::parallel_for(
        "kfmm::fof::owner_values", Kokkos::RangePolicy<ExecutionSpace>(space, 0, q),
        KOKKOS_LAMBDA(std::size_t e) { answer(e) = value(component(local(e))); });
    space.fence();
    to_owner.reverse(answer, returned);
    Kokkos::parallel_reduce(
        "kfmm::fof::holder_min", Kokkos::RangePolicy<ExecutionSpace>(space, 0, g),
        KOKKOS_LAMBDA(std::size_t k, std::size_t & count) {
          count += fof_atomic_min(values + component(m + k), returned(k)) ? 1 : 0;
        },
        lowered_back);
    ++result.merge_rounds;
    int changed = lowered + lowered_back > 0 ? 1 : 0, any = 0;
    MPI_Allreduce(&changed, &any, 1, MPI_INT, MPI_MAX, context.comm());
    if (!any) break;
  }

  // 6. Labels of the own particles, back to the caller's ranks and order.
  ScalarView<std::uint64_t> own_label(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fof::own_label"), m);
  Kokkos::parallel_for(
      "kfmm::fof::own_labels", Kokkos::RangePolicy<ExecutionSpace>(space, 0, m),
      KOKKOS_LAMBDA(std::size_t i) { own_label(i) = value(component(i)); });
  space.fence();
  decomposition.reverse(own_label, result.label);
}

}  // namespace detail

}  // namespace kfmm
