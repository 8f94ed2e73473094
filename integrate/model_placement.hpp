#pragma once
/// \file
/// \brief Placing a generated model in a run: its mass, size, position and bulk velocity (a
/// satellite on an orbit around an external host).
#include <kfmm/core/particles.hpp>

#include <array>

namespace kfmm {

/// \brief How a model generated in G = 1 units (total mass 1, scale radius 1, centre of mass at
/// rest at the origin) enters a run: x → scale_radius·x + position, m → mass·m and
/// v → sqrt(G·mass/scale_radius)·v + velocity, G the run's constant. The scaling keeps the model
/// in equilibrium (every ratio of kinetic to potential energy is unchanged).
struct ModelPlacement {
  double mass = 1;          ///< total mass in run units
  double scale_radius = 1;  ///< length of the model's unit (its scale radius) in run units
  std::array<double, 3> position{0, 0, 0};  ///< added to every position
  std::array<double, 3> velocity{0, 0, 0};  ///< added to every velocity

  /// True when the model is moved (position or velocity not zero).
  bool moves() const;
  /// True when mass or scale_radius differ from 1.
  bool scales() const;
  /// Throws kfmm::Error naming the field and its value: mass and scale_radius finite and > 0,
  /// position and velocity finite.
  void validate() const;
};

/// \brief Applies `placement` to this rank's particles (a local operation: every rank places its
/// own slice the same way). Throws like ModelPlacement::validate, or when G is not finite and > 0.
void place_model(Particles<HostSpace>& particles, ModelPlacement const& placement, double G);

}  // namespace kfmm
