#pragma once
/// \file
/// \brief Deterministic initial conditions, independent of the number of ranks.
#include <kfmm/core/particles.hpp>

#include <cstdint>
#include <functional>
#include <string>

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
std::string to_string(ICKind kind);

/// \brief What to generate.
struct ICOptions {
  ICKind kind = ICKind::GaussianClumps;
  std::uint64_t n_total = 100000;  ///< global particle count
  std::uint64_t seed = 42;
  int clumps = 20;                 ///< Gaussian clumps only
  double truncation_radius = 100;  ///< Plummer and Hernquist: radii beyond this are redrawn
};

/// Sums integers over all ranks in place (MPI_SUM on int64 from the comm layer; identity on one rank).
using IntegerAllreduce = std::function<void(std::int64_t* values, int count)>;

/// \brief Generates this rank's contiguous slice `[n·rank/nranks, n·(rank+1)/nranks)` of the
/// global particle set. Particle `i` (global index) is drawn from a counter-based generator
/// keyed by (seed, i), so the same options give the same particles on any number of ranks.
/// Ids are `i + 1`; masses are equal and sum to 1. Equilibrium models are moved to their
/// centre-of-mass frame with sums reduced through `allreduce` in fixed point, which is exact
/// and therefore independent of the rank count. `num_total` is set to `n_total`.
Particles<HostSpace> generate_initial_conditions(ICOptions const& options, int rank, int nranks,
                                                 IntegerAllreduce const& allreduce);

}  // namespace kfmm
