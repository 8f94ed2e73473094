#pragma once
/// \file
/// \brief A sum of external potentials, its moving and integrated centres, and how it acts on the
/// particles and the particles on it (docs/external_potentials.md).
#include <kfmm/comm/context.hpp>
#include <kfmm/core/particles.hpp>
#include <kfmm/integrate/active_forces.hpp>
#include <kfmm/integrate/external_potential.hpp>

#include <array>
#include <vector>

namespace kfmm {

/// Most potentials with integrated centres in one field: the reaction kernel keeps three sums
/// per integrated centre per thread.
inline constexpr int max_integrated_centres = 8;

/// Most potentials in one field.
inline constexpr int max_external_potentials = 64;

/// \brief Position, velocity and latest acceleration of an integrated centre (the same on every rank).
struct CentreState {
  std::array<double, 3> position{};
  std::array<double, 3> velocity{};
  std::array<double, 3> acceleration{};
};

/// pos += factor · vel for every centre.
void drift_centres(std::vector<CentreState>& centres, double factor);
/// vel += factor · acceleration for every centre.
void kick_centres(std::vector<CentreState>& centres, double factor);

/// \brief The sum of several external potentials acting on the particles.
///
/// An integrated centre (CentreMotion::Integrated) is a point of mass M (its model's mass) that
/// feels every other external potential and the reaction of the particles: the particles pull
/// on it with −Σ m_i a_k(x_i − c_k), so total momentum and energy (particles, self-gravity,
/// external field and centres) are conserved when no centre moves on a prescribed line. Two
/// integrated centres pull on each other with the symmetrised force of the interaction energy
/// ½[M_i φ_j(c_i − c_j) + M_j φ_i(c_j − c_i)], exact Newton's third law also for unequal profiles.
struct ExternalField {
  std::vector<ExternalPotential> potentials;

  bool empty() const { return potentials.empty(); }
  /// Each potential's parameters, at most max_external_potentials and max_integrated_centres.
  void validate() const;
  int integrated_count() const;
  /// The integrated centres' initial positions and velocities, in the order of `potentials`.
  std::vector<CentreState> initial_centres() const;
  /// The potentials with their centres at `time` (integrated ones from `centres`).
  std::vector<ExternalPotential> placed(double time, std::vector<CentreState> const& centres) const;

  /// φ and a of the whole field at one point (host; for checks and users).
  void evaluate(std::array<double, 3> const& x, double time, double G, std::vector<CentreState> const& centres,
                double& phi, std::array<double, 3>& acceleration) const;

  /// \brief Adds the field's acceleration to `acceleration`, writes each particle's external
  /// potential to `external_potential` (resized to ≥ particles.num when smaller) and, when there
  /// are integrated centres, sets their accelerations (other potentials + the particles'
  /// reaction, reduced over all ranks in rank order). Collective when integrated centres exist.
  /// With `active` (hierarchical steps), only the rows of the active particles get the field;
  /// the centres still feel every particle (all are at `time`).
  void apply(Context const& context, double time, double G, std::vector<CentreState>& centres,
             Particles<MemorySpace> const& particles, ScalarView<double>& external_potential,
             Vec3View<double>& acceleration, ActiveFlags const& active = {}) const;

  /// ½ Σ M |v + kick·a|² of the integrated centres plus their potential energy in the other
  /// potentials (pairs of integrated centres counted once, see above).
  double centres_energy(double time, double G, std::vector<CentreState> const& centres, double kick) const;
};

}  // namespace kfmm
