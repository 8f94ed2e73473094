#pragma once
/// \file
/// \brief Ghost import: the particles of other ranks (and, in a periodic box, periodic images)
/// that lie within a radius of boxes of this rank, for neighbour searches (kNN, FoF).
#include <kfmm/comm/context.hpp>
#include <kfmm/core/particles.hpp>
#include <kfmm/core/types.hpp>
#include <kfmm/neighbors/periodic_box.hpp>

#include <cstddef>
#include <cstdint>

namespace kfmm {

/// \brief A query: every particle whose distance to the box [lo, hi] is ≤ radius (radius may be
/// +infinity: everything). lo ≤ hi componentwise; an empty point set's box may be skipped by
/// giving no box at all.
struct QueryBox {
  double lo[3];
  double hi[3];
  double radius;
};

/// \brief Imported particles: copies of particles of other ranks (or periodic images of this
/// rank's), with their origin rank and image (periodic_box.hpp's shift code; 13 = unshifted).
template <class Memory = MemorySpace>
struct Ghosts {
  Vec3View<double, Memory> pos;  ///< shifted by the image when GhostOptions::shift_positions
  Vec3View<double, Memory> vel;
  ScalarView<double, Memory> mass;
  ScalarView<std::uint64_t, Memory> id;
  ScalarView<int, Memory> rank;   ///< origin rank
  ScalarView<int, Memory> image;  ///< image shift code (13 when not periodic)
  std::size_t num = 0;
};

struct GhostOptions {
  /// Open boundaries or a periodic box; periodic positions and query boxes must lie in
  /// [0, L) along every axis (wrap them first).
  PeriodicBox periodic;
  /// true: a ghost's position is its image's (x + s·L), so plain distances are minimum-image
  /// distances, and a particle near several query boxes may come in several images; this
  /// rank's own particles come back as images (s ≠ 0) in a periodic box.
  /// false: positions unshifted, at most one copy per particle, never this rank's own particles
  /// (the caller folds distances to the minimum image itself).
  bool shift_positions = true;
  /// Bounding boxes per rank (of consecutive Hilbert-ordered chunks) used to choose partners.
  int boxes_per_rank = 8;
  /// Leaf size of the tree each rank builds over its particles to answer the requests.
  int leaf_size = 32;
};

/// \brief Imports every particle (of another rank, or a periodic image) within `radius` of one
/// of this rank's query `boxes`: in a periodic box, every particle whose minimum-image
/// distance to some point of a box is ≤ radius comes (its minimum image among the shifts
/// {−1, 0, 1}³ per axis). Duplicates (one particle asked for by several boxes) are removed per
/// (origin rank, image). Ghosts are ordered by origin rank, then by their Hilbert order there.
///
/// How: each rank's particles are sorted by Hilbert key and cut into `boxes_per_rank` chunks
/// whose bounding boxes all ranks gather (MPI_Allgather: 6·boxes_per_rank doubles per rank, so
/// memory and traffic grow with R, and each query box is tested against R·boxes_per_rank
/// boxes: O(boxes·R) work). A box goes only to ranks with a chunk box that meets the box
/// inflated by its radius (in the images it can reach); the receiver walks its tree (leaf
/// size `leaf_size`) for the particles within the radius and replies. Two ExchangePlans
/// (requests, replies), device Views throughout. Collective; bad input on any rank (a box with
/// lo > hi, a negative or NaN radius, a periodic length ≤ 0 or not finite, a periodic particle
/// outside [0, L)) makes every rank throw kfmm::Error naming it.
Ghosts<MemorySpace> import_ghosts(ExecutionSpace const& space, Context const& context,
                                  Particles<MemorySpace> const& local,
                                  Kokkos::View<QueryBox const*, MemorySpace> const& boxes,
                                  GhostOptions const& options = {});

namespace detail {
/// A query box moved into the receiver's frame, with the image it asks for.
struct GhostRequest {
  double lo[3];
  double hi[3];
  double radius;
  int image;
};
}  // namespace detail

}  // namespace kfmm
