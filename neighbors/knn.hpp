#pragma once
/// \file
/// \brief k nearest neighbours of particles (self-query) or of a separate query set, open or
/// periodic box, on any number of ranks with the same answer.
#include <kfmm/comm/context.hpp>
#include <kfmm/core/particles.hpp>
#include <kfmm/core/types.hpp>
#include <kfmm/neighbors/periodic_box.hpp>

#include <cstddef>
#include <cstdint>

namespace kfmm {

/// Largest k: each query keeps its k best candidates in per-thread arrays (registers or local
/// memory on a GPU), sized by the smallest of 8, 16, 32, 64, 128 that holds k. The arrays hold
/// an insertion list sorted by (distance², id) rather than a bounded max-heap: a heap needs the
/// same k slots, so it would not free registers, and the sorted list gives the pruning bound
/// (the k-th entry) and the final order (ties by id) directly; its O(k) shift is paid only on
/// an insertion, and after the first leaves nearly every scanned point is rejected by the
/// bound before that. Up to k = 8 the list fits registers; beyond, it lives in local memory
/// (cached) on a GPU, 2 KiB per thread at k = 128.
inline constexpr int max_knn_k = 128;

struct KNNOptions {
  int k = 8;
  /// Self-query only: count a particle as its own nearest neighbour (distance 0). Default: it
  /// is excluded (by its position in the particle set, not by id).
  bool include_self = false;
  /// Open boundaries, or a periodic box (minimum-image distances): every particle's (and query's)
  /// extent along an axis must not exceed the box length; positions are wrapped into [0, L).
  PeriodicBox periodic;
  /// Leaf size of the search trees; queries of one leaf share a ghost-import radius.
  int leaf_size = 64;
  /// Also return each neighbour's mass (KNNResult::mass), e.g. for knn_density().
  bool neighbour_masses = false;
};

/// \brief Neighbours of each query, in the caller's order of queries: row i holds the k
/// nearest particles of query i, nearest first, ties broken by smaller id (so the answer does
/// not depend on the rank or thread count).
struct KNNResult {
  Kokkos::View<double**, Kokkos::LayoutRight, MemorySpace> distance;      ///< (num, k)
  Kokkos::View<std::uint64_t**, Kokkos::LayoutRight, MemorySpace> id;     ///< (num, k) particle ids
  Kokkos::View<double**, Kokkos::LayoutRight, MemorySpace> mass;          ///< (num, k) with neighbour_masses
  std::size_t num = 0;
};

/// \brief k nearest neighbours of every particle among the particles of all ranks (self-query):
/// row i is particle i of this rank (the particles stay where they are).
///
/// How: on more than one rank, particles move (copies) to Hilbert domains (sample sort of keys);
/// each rank sorts its particles by key, builds an octree and walks it per query nearest node
/// first, pruned by the current k-th distance. Then each leaf of queries asks, with a radius
/// = the largest k-th distance of its queries (infinite when a query found fewer than k
/// locally), for the particles of other ranks within that radius (import_ghosts), and the
/// walk continues on a tree of those ghosts from the lists found so far; answers go back to
/// the caller's ranks and order. Collective. Errors (agreed across ranks, naming the value):
/// k < 1, k > max_knn_k, k ≥ N (k > N − 1 when excluding self; N = global count), a periodic
/// length that is not finite and positive or smaller than the particles' extent, non-finite
/// positions.
KNNResult knn(ExecutionSpace const& space, Context const& context, Particles<MemorySpace> const& particles,
              KNNOptions const& options);

/// \brief k nearest particles (of all ranks) of each of the first `num_queries` positions of
/// `queries` on this rank; k ≤ N. `include_self` is ignored (no query is a particle).
KNNResult knn(ExecutionSpace const& space, Context const& context, Particles<MemorySpace> const& particles,
              Vec3View<double> const& queries, std::size_t num_queries, KNNOptions const& options);

}  // namespace kfmm
