#include <kfmm/integrate/model_placement.hpp>

#include <kfmm/core/error.hpp>

#include <cmath>

namespace kfmm {

bool ModelPlacement::moves() const {
  for (int d = 0; d < 3; ++d)
    if (position[d] != 0 || velocity[d] != 0) return true;
  return false;
}

bool ModelPlacement::scales() const { return mass != 1 || scale_radius != 1; }

void ModelPlacement::validate() const {
  if (!(std::isfinite(mass) && mass > 0))
    fail("model placement: mass = {} must be finite and > 0 (the model's total mass in run units)", mass);
  if (!(std::isfinite(scale_radius) && scale_radius > 0))
    fail("model placement: scale_radius = {} must be finite and > 0 (the model's scale radius in run units)",
         scale_radius);
  for (int d = 0; d < 3; ++d) {
    if (!std::isfinite(position[d]))
      fail("model placement: position[{}] = {} must be finite", d, position[d]);
    if (!std::isfinite(velocity[d]))
      fail("model placement: velocity[{}] = {} must be finite", d, velocity[d]);
  }
}

void place_model(Particles<HostSpace>& particles, ModelPlacement const& placement, double G) {
  placement.validate();
  if (!(std::isfinite(G) && G > 0)) fail("model placement: G = {} must be finite and > 0", G);
  double const length = placement.scale_radius;
  double const speed = std::sqrt(G * placement.mass / placement.scale_radius);
  // Host particles (initial conditions are generated on the host): a plain loop, each particle
  // on its own, so the result does not depend on threads or ranks.
  for (std::size_t i = 0; i < particles.num; ++i) {
    for (int d = 0; d < 3; ++d) {
      particles.pos(i, d) = length * particles.pos(i, d) + placement.position[d];
      particles.vel(i, d) = speed * particles.vel(i, d) + placement.velocity[d];
    }
    particles.mass(i) *= placement.mass;
  }
}

}  // namespace kfmm
