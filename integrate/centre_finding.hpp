#pragma once
/// \file
/// \brief Centres of a particle system: the potential minimum (most bound particle) and the
/// shrinking-spheres centre of mass (Power et al. 2003), reduced over all ranks.
#include <kfmm/comm/context.hpp>
#include <kfmm/core/particles.hpp>

#include <array>
#include <cstdint>
#include <string>

namespace kfmm {

/// When simulate() finds the centres for the diagnostics.
enum class CentreCadence {
  None,    ///< never (the diagnostics columns stay empty)
  Output,  ///< at the start and at every output time
  Step     ///< after every step
};

CentreCadence parse_centre_cadence(std::string const& name);  ///< "none" | "output" | "step"
std::string to_string(CentreCadence cadence);

/// \brief Settings of the centre finders.
struct CentreFinding {
  CentreCadence cadence = CentreCadence::Output;
  double shrink_factor = 0.9;       ///< radius factor per shrinking-spheres iteration, in (0, 1)
  std::uint64_t min_particles = 1000;  ///< stop before a sphere would hold fewer particles (≥ 1)

  /// Throws kfmm::Error naming the bad setting.
  void validate() const;
};

/// The particle with the lowest potential (ties: the lowest id). Same on every rank.
struct PotentialMinimum {
  std::array<double, 3> position{};
  double potential = 0;
  std::uint64_t id = 0;
  bool found = false;  ///< false when there are no particles
};

/// \brief Finds the particle of lowest `potential` over all ranks (potential aligned with
/// `particles`; ties broken by the lowest id, so the answer does not depend on the thread or
/// rank count for the same potentials). Collective.
PotentialMinimum potential_minimum_centre(Context const& context, Particles<MemorySpace> const& particles,
                                          ScalarView<double> const& potential);

/// Result of the shrinking-spheres iteration.
struct ShrinkingSpheres {
  std::array<double, 3> centre{};
  double radius = 0;           ///< of the last sphere used
  std::uint64_t count = 0;     ///< particles in it
  int iterations = 0;
};

/// \brief Power et al. (2003): start from the centre of mass of all particles and the radius
/// that holds them all; repeatedly shrink the radius by `shrink_factor` and move the centre to
/// the centre of mass of the particles inside, considering only the particles of the previous
/// sphere (as Power et al. do); stop when the next sphere would hold fewer than
/// `min_particles` (the result is the centre of the last sphere that held enough). Sums run
/// over fixed blocks and then over the ranks in rank order (thread-count independent; other
/// rank counts agree to round-off). Collective.
ShrinkingSpheres shrinking_spheres_centre(Context const& context, Particles<MemorySpace> const& particles,
                                          double shrink_factor, std::uint64_t min_particles);

}  // namespace kfmm
