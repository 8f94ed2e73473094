#pragma once
/// \file
/// \brief The near field of the relative criterion's estimating evaluation, kept for the
/// evaluation that follows it in the same call.
///
/// The estimate walks at θ_e ≥ θ with the angle test alone; the final walk tests the angle at θ
/// and the error bound (and takes M2P only where b's radius < θ (d − r_a), which the angle test
/// at θ_e ≥ 1 accepts). A pair the estimate opens is thus opened by the final walk too, so every
/// leaf pair the estimate sums by P2P is a P2P pair of the final lists as well. Those pairs are
/// summed once: the estimate keeps its near field apart, the final evaluation sums only the rest
/// of its P2P pairs and adds the kept near field. Where rounding at a test's boundary breaks the
/// inclusion for a target leaf (or θ_e < 1), that leaf keeps all its pairs and its kept near
/// field is not used: the decision is per target leaf, from geometry alone, so the results do
/// not depend on the rank or thread count.
#include <kfmm/core/tree.hpp>
#include <kfmm/core/types.hpp>
#include <kfmm/fmm/dual_tree_walk.hpp>
#include <kfmm/fmm/target_particles.hpp>

#include <cstdint>

namespace kfmm {

class NearFieldReuse {
 public:
  /// Zeroed rows [0, n) to add the estimate's near field into (rows of targets only get values).
  void start(ExecutionSpace const& space, int n);
  ScalarView<double> const& phi() const { return phi_; }
  Vec3View<double> const& grad() const { return grad_; }

  /// Indexes the estimate's P2P pairs by target leaf (its sources sorted), for `num_nodes` nodes.
  void index(ExecutionSpace const& space, PairLists const& estimate, int num_nodes);
  /// Whether index() holds pairs for subtract().
  bool indexed() const { return indexed_; }

  /// `rest` = the final walk's P2P lists `full` (same groups and segments) without the indexed
  /// pairs of every target leaf whose indexed pairs all appear in `full`; such leaves are marked
  /// reused. Returns the particle pairs left out, counted as the near field counts them (targets
  /// of the leaf times the source leaf's particles, less the targets themselves in their own leaf).
  std::uint64_t subtract(ExecutionSpace const& space, Tree<> const& tree, TargetParticles const& targets,
                         PairLists const& full, PairLists& rest);

  /// Adds the kept near field to phi and grad for every target (the estimate's own result).
  void add_all(ExecutionSpace const& space, TargetParticles const& targets, ScalarView<double> const& phi,
               Vec3View<double> const& grad) const;
  /// Adds the kept near field to phi and grad for the targets of the reused leaves.
  void add_reused(ExecutionSpace const& space, Tree<> const& tree, TargetParticles const& targets,
                  ScalarView<double> const& phi, Vec3View<double> const& grad) const;

  /// Frees everything (an estimate runs once per run of the same particles).
  void release();

 private:
  ScalarView<double> phi_{"kfmm::reuse::phi", 0};
  Vec3View<double> grad_{"kfmm::reuse::grad", 0};
  ScalarView<int> start_{"kfmm::reuse::start", 0};    ///< per target node: its first indexed source
  ScalarView<int> source_{"kfmm::reuse::source", 0};  ///< indexed sources, sorted per target
  ScalarView<int> found_{"kfmm::reuse::found", 0};    ///< per target node: indexed sources in `full`
  ScalarView<std::uint8_t> hit_{"kfmm::reuse::hit", 0};  ///< per entry of `full`: indexed
  ScalarView<int> kept_{"kfmm::reuse::kept", 0};      ///< per group of `full`: entries kept, scanned
  int nodes_ = 0;
  bool indexed_ = false;
};

}  // namespace kfmm
