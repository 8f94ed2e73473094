#pragma once
/// \file
/// \brief Friends-of-friends groups: particles closer than a linking length are friends, groups
/// are the connected components of the friendship graph. Labels are the smallest ParticleID of
/// each group, so they do not depend on the rank count, the thread count or the particle order.
#include <kfmm/comm/context.hpp>
#include <kfmm/core/particles.hpp>
#include <kfmm/core/types.hpp>

#include <cstddef>
#include <cstdint>

namespace kfmm {

/// \brief Settings of a friends-of-friends search.
struct FoFOptions {
  /// Linking parameter: the linking length is b × the mean interparticle separation (V/N)^(1/3),
  /// V = box_size³ when periodic, else the volume of the global bounding box of the particles
  /// (its extents, not a cube). Must be > 0.
  double b = 0.2;
  /// > 0: the linking length itself, in position units (b is then ignored). Use it for open
  /// boundaries where the bounding box is a poor volume (flat or very elongated sets).
  double linking_length = 0;
  /// > 0: periodic box [0, box_size)³ (minimum-image distances; positions are wrapped); 0: open.
  double box_size = 0;
};

/// \brief Friends-of-friends labels of a rank's particles.
struct FoFResult {
  /// label(i) = smallest ParticleID in the group of local particle i (the group of an isolated
  /// particle is itself), aligned with the particles given (first `num` rows).
  ScalarView<std::uint64_t> label;
  double linking_length = 0;     ///< the linking length used
  std::uint64_t num_groups = 0;  ///< groups over all ranks, isolated particles included
  int merge_rounds = 0;          ///< rounds of the cross-rank label exchange (0 on one rank)
  std::uint64_t num_ghosts = 0;  ///< particles of other ranks imported by this rank
};

/// \brief The linking length `options` ask for with `num_total` particles whose global bounds
/// are [lo, hi]. Throws kfmm::Error naming the value for b ≤ 0, a non-finite or negative
/// linking length, a periodic box smaller than the particles' extent, a linking length of half
/// the periodic box or more, and a degenerate bounding box (zero volume) with b.
double fof_linking_length(FoFOptions const& options, std::uint64_t num_total, double const lo[3], double const hi[3]);

/// \brief Friends-of-friends over all ranks. Collective; every rank may hold any particles
/// (no decomposition needed): each rank links its own particles and copies (ghosts) of other
/// ranks' particles within the linking length of its bounding box, then the ranks exchange the
/// labels of ghosts with their owners until no label changes (agreed with an Allreduce), so
/// groups spanning several ranks get one label. ParticleIDs must be unique (ghosts are matched
/// to their owners by id; read_particles() rejects repeated ids by default). Input errors (see fof_linking_length, and
/// non-finite positions) are agreed across ranks and thrown as kfmm::Error on every rank.
FoFResult friends_of_friends(Context const& context, Particles<> const& particles, FoFOptions const& options);

/// \brief Union-find of `n` points on one rank: component(i) is the index of one point of i's
/// component, the same for all its points (its representative), for points in [0, n) of `pos` within `linking_length` of each
/// other (minimum image in [0, box_size)³ when box_size > 0). Building block of
/// friends_of_friends(); public so that tests and the distributed merge can use it.
///
/// How: the points' fine cells (edge l/√3 for linking length l from the points' lower bounds;
/// in a periodic box the edge between l/2 and l/√3 that tiles it), eight to a link cell (edge ≥
/// l) and 2^k per axis to a coarse cell (a dense grid of at most max(2^18, n) cells), are sorted
/// by a key that puts the row-major index of their coarse cell above their Morton code inside it;
/// a fine cell whose points' bounding box has a diagonal ≤ the linking length is linked as a
/// whole. Pairs of fine cells (each pair once) are tested first by their bounding boxes (only
/// cells of two or more points store one), then point by point until one link is found when
/// both cells are linked as a whole. The candidates of a cell are the fine cells of the coarse
/// cells its box reaches where those hold few (sparse regions), else those of the 27 link cells
/// (edge ≥ linking length) around its own, found once per link cell by binary search inside
/// their coarse cell. Links are made by a lock-free union-find (hooking the larger root under
/// the smaller with compare-and-swap), so the components do not depend on the order in which
/// threads find links.
void fof_components(ExecutionSpace const& space, Vec3View<double> const& pos, std::size_t n, double linking_length,
                    double box_size, ScalarView<int> const& component);

/// \brief fof_components() followed by fof_min_labels() in one pass, without the component
/// View: label(i) = the smallest id(j) over the points j linked to i.
void fof_labels(ExecutionSpace const& space, Vec3View<double> const& pos, ScalarView<std::uint64_t> const& id,
                std::size_t n, double linking_length, double box_size, ScalarView<std::uint64_t> const& label);

/// \brief label(i) = smallest id(j) over the points j with component(j) == component(i), for
/// components as fof_components() returns them.
void fof_min_labels(ExecutionSpace const& space, ScalarView<int> const& component, ScalarView<std::uint64_t> const& id,
                    std::size_t n, ScalarView<std::uint64_t> const& label);

namespace detail {
/// friends_of_friends() on more than one rank (fof_distributed.cpp): decomposition by Hilbert
/// key, ghost import, local linking, then min-label rounds over the ghosts until no label changes.
void fof_distributed(Context const& context, Particles<> const& particles, double linking_length, double box_size,
                     FoFResult& result);
}  // namespace detail

}  // namespace kfmm
