#pragma once
/// \file
/// \brief A Milky-Way-like composite potential with published parameters (docs/external_potentials.md).
#include <kfmm/core/units.hpp>
#include <kfmm/integrate/external_potential.hpp>

#include <vector>

namespace kfmm {

/// \brief MWPotential2014 of Bovy (2015, ApJS 216, 29) with a Hernquist bulge in place of its
/// power-law bulge with exponential cut-off: Miyamoto–Nagai disk (a = 3 kpc, b = 0.28 kpc), NFW
/// halo (r_s = 16 kpc) and Hernquist bulge (a = 0.5 kpc), normalised as Bovy's to 60 %, 35 % and
/// 5 % of the radial force at R_0 = 8 kpc in the plane, where v_c = 220 km/s. Converted to
/// `units`, whose G must be the physical one (astro units); throws kfmm::Error otherwise.
/// The centres are fixed at the origin, the disk in the x-y plane.
std::vector<ExternalPotential> milky_way_2014(UnitSystem const& units);

}  // namespace kfmm
