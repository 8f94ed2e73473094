#pragma once
/// \file
/// \brief Settings of the force calculation.
#include <kfmm/core/types.hpp>
#include <kfmm/fmm/softening.hpp>

#include <string>

namespace kfmm {

/// Where expansions of a node are centred.
enum class ExpansionCentre { CentreOfMass, Geometric };

/// How the dual-tree walk decides that a node pair (target A, source B) is far enough apart
/// for M2L; closer pairs are opened (or summed directly when both are leaves).
enum class OpeningCriterion {
  /// Geometric: (r_A + r_B) < θ·d, with d = |c_A − c_B|.
  Angle,
  /// The angle test and an estimate of the M2L force error relative to the targets' own
  /// forces: G·E_AB ≤ α·min_{i∈A} |a_i| / c_A (GADGET-4's relative criterion), where E_AB is the
  /// largest term of the degree-(p+1) truncation from B's harmonic multipole powers and A's
  /// radius (Dehnen 2014) and c_A ∈ [0.3, 1] how much the errors of A's candidate sources come
  /// from one side (OpeningTest in fmm/dual_tree_walk.hpp). |a_i| is the previous call's for the
  /// same particles, else it comes from a first, cheaper evaluation with the angle criterion in
  /// the same call.
  Relative
};

/// The opening angle each criterion was tuned with (README, "Choosing the defaults"): under
/// Relative the angle test only caps the pairs and the error test decides, so θ is wider; the
/// angle criterion alone needs 0.75 for its accuracy targets.
constexpr double default_theta(OpeningCriterion criterion) {
  return criterion == OpeningCriterion::Angle ? 0.75 : 0.95;
}

/// \brief FMM settings. Defaults are chosen by measurement (README, "Choosing the defaults").
/// Choosing OpeningCriterion::Angle, set theta too (default_theta(Angle)): the default θ is the
/// relative criterion's cap.
struct FMMConfig {
  int order = 7;                     ///< expansion order p, 1…8
  /// opening angle: accept (r_A + r_B) < θ |c_A − c_B|, 0 < θ < 1.5
  double theta = default_theta(OpeningCriterion::Relative);
  OpeningCriterion opening = OpeningCriterion::Relative;
  double tolerance = 1e-5;           ///< α of OpeningCriterion::Relative, 0 < α ≤ 1
  double estimate_theta = 1.0;       ///< θ of the first (estimating) evaluation of Relative, θ ≤ it < 1.5
  /// Expansion order of the estimating evaluation, 1 … 8: min(it, order) when compiled
  /// (KFMM_EXPANSION_ORDERS), else order. |a| is needed to a few per cent only.
  int estimate_order = 3;
  int leaf_size = 160;               ///< leaves are the largest cells with ≤ leaf_size particles
  /// A leaf takes a source by M2P (its multipole at each of the leaf's particles), not M2L, where
  /// the leaf's radius exceeds this times their distance and twice the source's radius
  /// (OpeningTest::m2p_theta): the local
  /// expansion of a large sparse leaf next to finer cells gathers errors from its extent that add
  /// up over many sources. Relative criterion only (the angle criterion's θ bounds r_a/d and its
  /// symmetric pairs conserve momentum to round-off). 0 ≤ it < 1; 0: M2L only.
  double m2p_theta = 0.4;
  /// Several ranks: the previous step's splitters are kept (moved only off cells that became
  /// leaves) while the most loaded rank's cost (last evaluation's per-particle costs, particles
  /// where they are now) stays within (1 + this) × the mean: no sample sort, and only particles
  /// that crossed a boundary move. 0 (default): new splitters at every evaluation. Forces are the
  /// same; which rank holds which particle differs from a run with 0 (so do per-rank snapshot
  /// layouts). Restart files carry the kept splitters (ForceSolver::domain_splitters), so a
  /// continued run keeps the layouts of the uninterrupted one.
  double domain_tolerance = 0;
  /// ForceSolver::compute_active refits the tree of the last full call to the drifted particles
  /// until a refitted call costs more than this factor times the full call per particle of its
  /// target leaves (P2P pairs plus M2L in the cost model's pairs); the next call builds a new
  /// tree. ≥ 1; large values refit longer (cells stretched by drift open more often).
  double rebuild_factor = 1.5;
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
std::string to_string(OpeningCriterion criterion);
OpeningCriterion parse_opening_criterion(std::string const& name);  ///< "angle" | "relative"
ExpansionCentre parse_expansion_centre(std::string const& name);  ///< "mass" | "geometric"

}  // namespace kfmm
