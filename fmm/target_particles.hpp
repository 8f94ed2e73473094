#pragma once
/// \file
/// \brief The particles whose forces a pass computes (all of them, or ForceSolver::compute_active's
/// active ones): a compacted list in particle order that the L2P and P2P kernels walk leaf by
/// leaf, so that a leaf holding one active particle costs one target, not the whole leaf.
#include <kfmm/core/types.hpp>

#include <cstdint>

namespace kfmm {

/// \brief Targets among the first n particles of a pass. `before(i)` (i = 0 … n) counts the
/// targets among particles 0 … i − 1 and `index(k)` is the k-th target, ascending: a leaf
/// holding particles [b, e) has the targets index(before(b)) … index(before(e) − 1), in
/// particle order. A full evaluation lists every particle (index(k) = k) and runs through the
/// same kernels.
struct TargetParticles {
  ScalarView<int> before{"kfmm::fmm::targets_before", 0};
  ScalarView<int> index{"kfmm::fmm::target_index", 0};
  int count = 0;
};

/// \brief Fills `targets` with the particles i < n whose `flags(i)` is nonzero, or with all n
/// when `flags` is empty. Keeps the Views' storage between calls (they only grow).
void select_targets(ExecutionSpace const& space, ScalarView<std::uint8_t> const& flags, int n,
                    TargetParticles& targets);

/// Every one of the first n particles a target.
TargetParticles all_targets(ExecutionSpace const& space, int n);

}  // namespace kfmm
