#pragma once
// Checks of generated and placed models (core/test_initial_conditions*.cpp,
// integrate/test_model_placement.cpp): one definition, so that the files can share a
// translation unit (the CUDA compile check batches them).
#include <kfmm/core/particles.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace kfmm::test_support {

/// The reduction of a single rank: the local sums are already the global ones.
inline void single_rank_sums(std::int64_t*, int) {}

/// 2K/|W| with W = −Σ_{i<j} G m_i m_j / r_ij (no softening).
inline double virial_ratio(Particles<HostSpace> const& p, double G = 1) {
  double kinetic = 0, potential = 0;
  for (std::size_t i = 0; i < p.num; ++i) {
    kinetic += 0.5 * p.mass(i) * (p.vel(i, 0) * p.vel(i, 0) + p.vel(i, 1) * p.vel(i, 1) + p.vel(i, 2) * p.vel(i, 2));
    for (std::size_t j = i + 1; j < p.num; ++j) {
      double r2 = 0;
      for (int c = 0; c < 3; ++c) r2 += (p.pos(i, c) - p.pos(j, c)) * (p.pos(i, c) - p.pos(j, c));
      potential -= G * p.mass(i) * p.mass(j) / std::sqrt(r2);
    }
  }
  return 2 * kinetic / std::fabs(potential);
}

}  // namespace kfmm::test_support
