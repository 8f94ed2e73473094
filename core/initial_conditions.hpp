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
  Uniform          ///< uniform in the unit cube [0, 1)^3, at rest
};

/// "clumps" (or "gaussian_clumps"), "plummer", "hernquist", "uniform"; throws kfmm::Error
/// naming the valid kinds otherwise.
ICKind parse_ic_kind(std::string const& name);
/// The canonical name ("clumps", "plummer", "hernquist", "uniform"), accepted by parse_ic_kind.
std::string to_string(ICKind kind);

/// \brief What to generate.
struct ICOptions {
  ICKind kind = ICKind::GaussianClumps;
  std::uint64_t n_total = 100000;  ///< global particle count
  std::uint64_t seed = 42;
  int clumps = 20;                 ///< Gaussian clumps only
  double truncation_radius = 100;  ///< Plummer and Hernquist: radii beyond this are redrawn

  /// Throws kfmm::Error naming the bad field, its value and the allowed range:
  /// n_total ≥ 1, clumps ≥ 1, 0 < truncation_radius ≤ 1e6 and n_total·truncation_radius ≤ 2^42
  /// (the fixed-point centre-of-mass sum must resolve 2^-20 of a length unit).
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

/// Sums integers over all ranks in place (MPI_SUM on int64 from the comm layer; identity on one rank).
using IntegerAllreduce = std::function<void(std::int64_t* values, int count)>;

/// \brief Generates this rank's contiguous slice `[n·rank/nranks, n·(rank+1)/nranks)` of the
/// global particle set. Particle `i` (global index) is drawn from a counter-based generator
/// keyed by (seed, i), so the same options give the same particles on any number of ranks.
/// Ids are `i + 1`; masses are equal and sum to 1. Equilibrium models are moved to their
/// centre-of-mass frame with sums reduced through `allreduce` in fixed point, which is exact
/// and therefore independent of the rank count. `num_total` is set to `n_total`.
///
/// `allreduce` is called exactly once, with 6 values (Σx, Σy, Σz, Σvx, Σvy, Σvz of this slice
/// in fixed point), by Plummer and Hernquist only; every rank must pass the same options.
/// Radii beyond the truncation radius are redrawn by drawing the cumulative mass uniformly
/// from (0, M(truncation_radius)), which gives the same truncated distribution as rejection.
/// Velocities follow the untruncated model while the masses 1/N put all the mass inside the
/// truncation radius, so 2K/|W| = M(truncation_radius): 0.99985 for Plummer and 0.980 for
/// Hernquist at the default radius 100.
Particles<HostSpace> generate_initial_conditions(ICOptions const& options, int rank, int nranks,
                                                 IntegerAllreduce const& allreduce);

}  // namespace kfmm
