#include <kfmm/core/error.hpp>
#include <kfmm/fmm/config.hpp>
#include <kfmm/fmm/expansion_dispatch.hpp>

#include <cmath>

namespace kfmm {

void FMMConfig::validate() const {
  if (order < min_expansion_order || order > max_expansion_order)
    fail("order = {} is outside {}…{}; choose an expansion order in that range (--order; 4 or 5 is typical)", order,
         min_expansion_order, max_expansion_order);
  require_expansion_order_built(order);
  if (!(theta > 0.0) || !(theta < 1.5))
    fail("theta = {} is outside (0, 1.5); the opening angle must be positive and below 1.5 (--theta; 0.5…0.8 is typical)",
         theta);
  if (leaf_size < 1) fail("leaf_size = {} is invalid; leaves need at least 1 particle (--leaf-size; 16…64 is typical)", leaf_size);
  if (!(domain_tolerance >= 0.0 && domain_tolerance <= 10.0))
    fail("domain_tolerance = {} is outside [0, 10]; it is the load imbalance up to which the previous domains are kept "
         "(--domain-tolerance; 0, the default, re-decomposes every evaluation; 0.05 is typical)",
         domain_tolerance);
  if (!(rebuild_factor >= 1.0) || !std::isfinite(rebuild_factor))
    fail("rebuild_factor = {} is invalid; it must be finite and ≥ 1 (the cost of a refitted active call per target "
         "particle, relative to the full call's, beyond which compute_active builds a new tree; 1.5 is the default)",
         rebuild_factor);
  if (!(softening_length >= 0.0) || !std::isfinite(softening_length))
    fail("softening length = {} is invalid; it must be finite and ≥ 0 (--softening)", softening_length);
  if (opening == OpeningCriterion::Relative) {
    if (!(tolerance > 0.0 && tolerance <= 1.0))
      fail("tolerance = {} is outside (0, 1]; the relative opening criterion bounds each interaction's force error by "
           "tolerance × the target's force (--tolerance; 1e-3 is typical)",
           tolerance);
    if (!(estimate_order >= 1 && estimate_order <= 8))
      fail("estimate_order = {} is outside [1, 8]; it is the expansion order of the first evaluation of the relative "
           "criterion, which only estimates |a| (--estimate-order; 3 is the default)",
           estimate_order);
    if (!(estimate_theta >= theta && estimate_theta < 1.5))
      fail("estimate_theta = {} is outside [theta = {}, 1.5); the first evaluation of the relative criterion only "
           "estimates |a| and must be at least as coarse as theta (--estimate-theta; 1.0 is typical)",
           estimate_theta, theta);
  }
  if (!(m2p_theta >= 0.0 && m2p_theta < 1.0))
    fail("m2p_theta = {} is outside [0, 1); it is the ratio of a leaf's radius to a source's distance beyond "
         "which the source goes to the leaf's particles by M2P (--m2p-theta; 0 turns M2P off, 0.4 is the default)",
         m2p_theta);
  if (!std::isfinite(G)) fail("G = {} is not finite; set the gravitational constant to a finite value (-G)", G);
  if (opening == OpeningCriterion::Relative && G == 0)
    fail("G = 0 makes every |a| zero, so the relative opening criterion would open every cell; set G (-G) or use "
         "the angle criterion (--mac angle)");
}

std::string to_string(Precision precision) { return precision == Precision::Float ? "float" : "double"; }

Precision parse_precision(std::string const& name) {
  if (name == "float") return Precision::Float;
  if (name == "double") return Precision::Double;
  fail("precision '{}' is unknown; use 'float' or 'double'", name);
}

std::string to_string(ExpansionCentre centre) { return centre == ExpansionCentre::CentreOfMass ? "mass" : "geometric"; }

std::string to_string(OpeningCriterion criterion) {
  return criterion == OpeningCriterion::Angle ? "angle" : "relative";
}

OpeningCriterion parse_opening_criterion(std::string const& name) {
  if (name == "angle") return OpeningCriterion::Angle;
  if (name == "relative") return OpeningCriterion::Relative;
  fail("opening criterion '{}' is unknown; use 'angle' ((r_A + r_B) < θ·d) or 'relative' (the angle test and an M2L "
       "error bound relative to each target's force)",
       name);
}

ExpansionCentre parse_expansion_centre(std::string const& name) {
  if (name == "mass") return ExpansionCentre::CentreOfMass;
  if (name == "geometric") return ExpansionCentre::Geometric;
  fail("expansion centre '{}' is unknown; use 'mass' (centre of mass) or 'geometric' (cell centre)", name);
}

}  // namespace kfmm
