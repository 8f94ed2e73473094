#pragma once
/// \file
/// \brief Leapfrog integrators with global steps: DKD, KDK and the exactly reversible lattice DKD.
#include <kfmm/core/particles.hpp>

#include <string>

namespace kfmm {

/// \brief Which leapfrog (jz-fmm's DKDConfig, KDKConfig, DKDLatticeConfig).
enum class IntegratorKind {
  DKD,        ///< drift ½dt, force, kick dt, drift ½dt: one force call per step
  KDK,        ///< kick ½dt with the stored acceleration, drift dt, force, kick ½dt
  /// DKD on integer lattices of spacing dx, dv: exactly reversible with forces of the positions
  /// alone (FMM: OpeningCriterion::Angle; the relative criterion also reads the last |a|)
  LatticeDKD
};

IntegratorKind parse_integrator_kind(std::string const& name);  ///< "dkd" | "kdk" | "lattice_dkd"
std::string to_string(IntegratorKind kind);

/// \brief Lattice spacings of LatticeDKD (jz-fmm's defaults).
///
/// A position is the integer n_x = x/dx, a velocity n_v = v/dv (int64). Between steps they are
/// kept as the doubles n·dx and n·dv, from which rint(x/dx) recovers n exactly while
/// |n| ≤ 2^50; so the state survives reordering, redistribution and restart files unchanged.
struct LatticeSpacing {
  double dx = 1e-4;
  double dv = 1e-4;
};

/// Largest lattice coordinate |n| whose double n·dx maps back to n exactly.
inline constexpr double lattice_coordinate_limit = 1125899906842624.0;  // 2^50

/// pos += factor · vel for the valid particles.
void drift(Particles<MemorySpace>& particles, double factor);

/// vel += factor · acceleration for the valid particles.
void kick(Particles<MemorySpace>& particles, Vec3View<double> const& acceleration, double factor);

/// Rounds positions and velocities to the nearest lattice points (idempotent).
void quantize_to_lattice(Particles<MemorySpace>& particles, LatticeSpacing const& lattice);

/// \brief n_x += rint(n_v · ½dt·dv/dx). Rounding is symmetric (rint(−y) = −rint(y)), so a
/// drift with −dt undoes one with dt bit for bit. Returns the largest |n_x| on this rank, which
/// the caller checks (collectively) against lattice_coordinate_limit.
double lattice_drift(Particles<MemorySpace>& particles, LatticeSpacing const& lattice, double dt);

/// \brief n_v += rint(dt · a / dv); reversible under dt → −dt for the same accelerations.
void lattice_kick(Particles<MemorySpace>& particles, Vec3View<double> const& acceleration,
                  LatticeSpacing const& lattice, double dt);

}  // namespace kfmm
