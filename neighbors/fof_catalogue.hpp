#pragma once
/// \file
/// \brief Catalogue of friends-of-friends groups: count, mass, centre of mass, mean velocity,
/// velocity dispersion, half-mass radius and (optionally) the most bound particle of every group
/// with at least `min_members` particles, reduced over all ranks.
#include <kfmm/comm/context.hpp>
#include <kfmm/core/particles.hpp>
#include <kfmm/core/types.hpp>

#include <cstddef>
#include <cstdint>

namespace kfmm {

/// \brief What the catalogue holds.
struct FoFCatalogueOptions {
  /// Groups with fewer particles are left out. Must be ≥ 1.
  std::uint64_t min_members = 20;
  /// > 0: periodic box [0, box_size)³, as given to friends_of_friends(): centres of mass and
  /// radii use minimum-image offsets from the group's smallest-id particle (groups must be
  /// smaller than half the box, as FoF groups at a linking length < box/2 of sane data are).
  double box_size = 0;
  /// Find each group's most bound particle: the smallest ½|v − v̄|² + φ, φ the group's own
  /// potential by direct summation, −G Σ_{j≠i} m_j / √(r² + ε²). Costs Σ N_g² pair terms over the
  /// groups (a group of 10⁴ particles: 10⁸), so groups above `most_bound_max_members` get none.
  bool most_bound = false;
  std::uint64_t most_bound_max_members = 20000;
  double G = 1;
  double softening = 0;  ///< ε of the potential above (Plummer)
};

/// \brief Groups in the global order: by length descending, then label ascending; `number` is a
/// group's place in that order (GADGET-4's group number, GroupNr). friends-of-friends labels are
/// the smallest ParticleID of a group, so the catalogue is the same on any rank count.
template <class Memory = MemorySpace>
struct FoFCatalogue {
  std::size_t num = 0;                ///< groups held by this rank
  std::uint64_t num_total = 0;        ///< groups on all ranks
  std::uint64_t num_members_total = 0;  ///< particles in the groups, all ranks
  ScalarView<std::uint64_t, Memory> number;  ///< place in the global order, 0-based
  ScalarView<std::uint64_t, Memory> label;   ///< smallest ParticleID of the group
  ScalarView<std::uint64_t, Memory> length;  ///< number of particles
  ScalarView<double, Memory> mass;           ///< Σ m
  Vec3View<double, Memory> pos;              ///< centre of mass (wrapped into the box when periodic)
  Vec3View<double, Memory> vel;              ///< mass-weighted mean velocity
  /// One-dimensional mass-weighted dispersion √(Σ m |v − v̄|² / (3 Σ m)).
  ScalarView<double, Memory> velocity_dispersion;
  /// Distance from the centre of mass of the particle (sorted by distance, ties by id) at which
  /// the enclosed mass first reaches half the group's mass.
  ScalarView<double, Memory> half_mass_radius;
  /// Id of the most bound particle; empty View unless asked for; UINT64_MAX for groups above
  /// most_bound_max_members.
  ScalarView<std::uint64_t, Memory> most_bound_id;
};

/// \brief The catalogue of the groups `label` gives the first `num` particles (from
/// friends_of_friends(), aligned with `particles`). Collective.
///
/// Every particle goes, with its label, to the rank that owns its group (a hash of the label,
/// so groups spread evenly over ranks) through one ExchangePlan; there the members of a group
/// are sorted by id and summed in that order, so every value is the same bit for bit on any
/// rank and thread count. Each rank holds the groups it owns, by `number`. When
/// `group_number` is given it receives, aligned with the particles, the number of the
/// particle's group, or −1 for particles in groups below min_members (sent back along the same
/// plan). Bad input (min_members < 1, a negative or non-finite box, softening or G, a label
/// View shorter than the particles) is agreed across ranks and thrown as kfmm::Error.
FoFCatalogue<> fof_catalogue(Context const& context, Particles<> const& particles,
                             ScalarView<std::uint64_t> const& label, FoFCatalogueOptions const& options,
                             ScalarView<std::int64_t>* group_number = nullptr);

/// \brief All groups on rank 0, in the global order (others get an empty catalogue with the
/// totals). Collective.
FoFCatalogue<HostSpace> gather_catalogue(Context const& context, FoFCatalogue<> const& catalogue);

}  // namespace kfmm
