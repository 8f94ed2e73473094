#pragma once
/// \file
/// \brief Settings of the force calculation.
#include <kfmm/core/types.hpp>
#include <kfmm/fmm/softening.hpp>

#include <string>

namespace kfmm {

/// Where expansions of a node are centred.
enum class ExpansionCentre { CentreOfMass, Geometric };

/// \brief FMM settings. Defaults are chosen by measurement (README, "Choosing the defaults").
struct FMMConfig {
  int order = 7;                     ///< expansion order p, 1…8
  double theta = 0.75;               ///< opening angle: accept (r_A + r_B) < θ |c_A − c_B|, 0 < θ < 1.5
  int leaf_size = 160;               ///< leaves are the largest cells with ≤ leaf_size particles
  SofteningKind softening = SofteningKind::Plummer;
  double softening_length = 1e-3;    ///< ε ≥ 0 (Plummer ε; spline: Plummer-equivalent ε, h = 2.8 ε)
  Precision precision = Precision::Float;  ///< arithmetic of expansions and kernels
  ExpansionCentre centre = ExpansionCentre::CentreOfMass;
  double G = 1.0;                    ///< gravitational constant in simulation units

  /// Throws kfmm::Error naming the bad field, its value and the allowed range.
  void validate() const;
};

std::string to_string(Precision precision);
Precision parse_precision(std::string const& name);  ///< "float" | "double"
std::string to_string(ExpansionCentre centre);
ExpansionCentre parse_expansion_centre(std::string const& name);  ///< "mass" | "geometric"

}  // namespace kfmm
