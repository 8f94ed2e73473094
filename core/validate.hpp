#pragma once
/// \file
/// \brief Checks of particle data that name the offending particle and value.
#include <kfmm/core/particles.hpp>

#include <string>

namespace kfmm {

/// \brief Checks the local particles: `num <= capacity`, finite positions and velocities,
/// positive finite masses, no id twice on this rank. Returns an empty string when all is
/// well, else a message naming the first bad particle (index, id, `rank`) and its value.
/// Collective checks (ids unique across ranks, `num_total`) live in comm/validate_global.hpp.
std::string find_invalid_particle(Particles<HostSpace> const& particles, int rank = 0);

/// Throws kfmm::Error with the message of find_invalid_particle when it is not empty.
void validate_local(Particles<HostSpace> const& particles, int rank = 0);

}  // namespace kfmm
