#pragma once
/// \file
/// \brief Deterministic initial conditions, independent of the number of ranks.
#include <kfmm/core/particles.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kfmm {

/// Kinds of generated initial conditions.
enum class ICKind {
  GaussianClumps,  ///< jz-fmm multi-GPU guide: clumps at 30·N(0,1), particles at centre + N(0,1)
  Plummer,         ///< Plummer sphere in virial equilibrium, G = M = a = 1
  Hernquist,       ///< Hernquist sphere in equilibrium (isotropic DF), G = M = a = 1
  Uniform,         ///< uniform in the unit cube [0, 1)^3, at rest
  // Distributions that stress the opening criterion (cusps, substructure, mass ratios, thin
  // and far-away structures); all in G = 1 units with total mass 1.
  /// NFW cusp ρ ∝ 1/(r(1 + r)²), scale radius 1, cut at truncation_radius (≥ 1); isotropic
  /// Gaussian velocities with the Jeans dispersion of the truncated model (σ → 0 at the cut).
  NFW,
  /// Hernquist halo (80 % of the mass, cut at truncation_radius ≥ 20, velocities of a Hernquist
  /// model of mass 0.8) + `satellites` Plummer spheres (3 % each, scale satellite_scale, cut at
  /// 100 of their scale radii) on circular orbits in the halo (halo_satellites) + a uniform
  /// background at rest (the rest of the mass) in the cube of side 2·truncation_radius.
  Satellites,
  /// Hernquist positions and velocities, masses log-uniform over `mass_decades` decades.
  MassSpectrum,
  /// Thin exponential disk Σ ∝ e^{−R}, R_d = 1, cut at R = min(truncation_radius, 10), vertical
  /// profile sech²(z/z_d)/(2z_d) with z_d = disk_scale_height. Circular velocities in the plane
  /// from the enclosed disk mass taken as spherical: v² = G M(<R)/R (an approximation for
  /// force tests: the thin disk's own circular speed differs from it by up to about 15 %).
  Disk,
  /// Straight segment of length 1 along (1, −1, 0)/√2, its midpoint at distance `offset` along
  /// (1, 1, 1)/√3, each transverse coordinate N(0, filament_width²); at rest.
  Filament
};

/// "clumps" (or "gaussian_clumps"), "plummer", "hernquist", "uniform", "nfw", "satellites",
/// "mass_spectrum", "disk", "filament"; throws kfmm::Error naming the valid kinds otherwise.
ICKind parse_ic_kind(std::string const& name);
/// The canonical name (as listed for parse_ic_kind, "clumps" for GaussianClumps).
std::string to_string(ICKind kind);
/// Every kind, in declaration order (for help texts and tests).
std::vector<ICKind> all_ic_kinds();

/// \brief What to generate.
struct ICOptions {
  ICKind kind = ICKind::GaussianClumps;
  std::uint64_t n_total = 100000;  ///< global particle count
  std::uint64_t seed = 42;
  int clumps = 20;                 ///< Gaussian clumps only
  /// In scale radii; radii beyond it are redrawn. Plummer, Hernquist, NFW, the halo of
  /// Satellites, MassSpectrum; Disk uses min(truncation_radius, 10) disk scale lengths.
  double truncation_radius = 100;
  int satellites = 5;              ///< Satellites: number of satellites, 3 % of the mass each
  double satellite_scale = 0.02;   ///< Satellites: Plummer scale radius of a satellite, in halo scale radii
  double mass_decades = 6;         ///< MassSpectrum: masses span 10^mass_decades
  double disk_scale_height = 1e-3; ///< Disk: z_d of the sech²(z/z_d) profile, in disk scale lengths
  double filament_width = 1e-3;    ///< Filament: standard deviation of each transverse coordinate
  double offset = 1e3;             ///< Filament: distance of its midpoint from the origin

  /// Throws kfmm::Error naming the bad field, its value, the allowed range and the fix:
  /// n_total ≥ 1, clumps ≥ 1; for the models moved to their centre-of-mass frame
  /// 0 < truncation_radius ≤ 1e6 (NFW: ≥ 1, Satellites: ≥ 20, the outermost satellite orbit)
  /// and n_total·max(position bound, speed bound) ≤ 2^42 (the fixed-point centre-of-mass sum
  /// must resolve 2^-20 of a length unit). Satellites: 0 ≤ satellites ≤ 6 (6·3 % of the
  /// mass leaves 2 % for the background), 0 < satellite_scale ≤ 1, n_total ≥ 100 (a particle
  /// for every component). MassSpectrum: 0 ≤ mass_decades ≤ 12. Disk: 0 < disk_scale_height
  /// ≤ 1. Filament: 0 < filament_width ≤ 1 and 0 ≤ offset ≤ 1e6. Fields of other kinds are
  /// not checked.
  void validate() const;
};

/// \brief One Gaussian clump of ICKind::GaussianClumps.
struct GaussianClump {
  double centre[3];    ///< 30·N(0,1) per axis
  double velocity[3];  ///< bulk velocity −2·centre + 20·N(0,1) per axis
};

/// The clumps of `options` (`options.clumps` of them), drawn from the seed alone: the same on
/// every rank. Particles of GaussianClumps sit at centre + N(0,1) and move at velocity + 20·N(0,1).
std::vector<GaussianClump> gaussian_clumps(ICOptions const& options);

/// \brief One satellite of ICKind::Satellites, in the halo frame (before the whole model is
/// moved to its centre-of-mass frame, which shifts every particle by the same amount).
struct HaloSatellite {
  double centre[3];    ///< isotropic direction, halo radius log-uniform in [0.5, 20]
  double velocity[3];  ///< circular velocity of the halo alone at the centre, random orbital plane
};

/// The satellites of `options` (`options.satellites` of them), drawn from the seed alone: the
/// same on every rank.
std::vector<HaloSatellite> halo_satellites(ICOptions const& options);

/// \brief The contiguous global index ranges of the components of ICKind::Satellites:
/// particles [begin[c], begin[c + 1]) belong to component c = 0 (halo), 1 … satellites (one
/// per satellite), satellites + 1 (background). Sizes are n_total·(80, 3, …, 3, 20 − 3·satellites)/100
/// rounded down at the boundaries, so membership depends on the index alone.
std::vector<std::uint64_t> satellite_component_begins(ICOptions const& options);

/// Sums integers over all ranks in place (MPI_SUM on int64 from the comm layer; identity on one rank).
using IntegerAllreduce = std::function<void(std::int64_t* values, int count)>;

/// \brief Generates this rank's contiguous slice `[n·rank/nranks, n·(rank+1)/nranks)` of the
/// global particle set. Particle `i` (global index) is drawn from a counter-based generator
/// keyed by (seed, i), so the same options give the same particles on any number of ranks.
/// Ids are `i + 1`; masses sum to 1: equal (1/n_total) except for Satellites (each component
/// shares its mass fraction equally among its particles) and MassSpectrum (each particle draws
/// its weight, normalised by the global sum). The equilibrium models (Plummer, Hernquist, NFW,
/// Satellites, MassSpectrum, Disk) are moved to their mass-weighted centre-of-mass frame with
/// sums reduced through `allreduce` in fixed point, which is exact and therefore independent of
/// the rank count. `num_total` is set to `n_total`.
///
/// `allreduce` is called exactly once, by the equilibrium models only, with 7 values: Σwx, Σwy,
/// Σwz, Σwvx, Σwvy, Σwvz and Σw of this slice in fixed point, with weights w = 1 for equal
/// masses, the mass for Satellites and the unnormalised weight for MassSpectrum (whose
/// normalising sum is therefore the same on any rank count). Every rank must pass the same
/// options. Radii beyond the truncation radius are redrawn by drawing the cumulative mass
/// uniformly from (0, M(truncation_radius)), which gives the same truncated distribution as
/// rejection. Plummer and Hernquist velocities follow the untruncated model while all the mass
/// is inside the truncation radius, so 2K/|W| = M(truncation_radius): 0.99985 for Plummer and
/// 0.980 for Hernquist at the default radius 100. NFW velocities solve the Jeans equation of
/// the truncated model.
Particles<HostSpace> generate_initial_conditions(ICOptions const& options, int rank, int nranks,
                                                 IntegerAllreduce const& allreduce);

}  // namespace kfmm
