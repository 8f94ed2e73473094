#pragma once
/// \file
/// \brief What the relative opening criterion (OpeningCriterion::Relative) allows each target
/// node: the largest M2L force error, per unit G, that the walk may accept for its particles.
#include <kfmm/core/tree.hpp>
#include <kfmm/core/types.hpp>
#include <kfmm/fmm/node_geometry.hpp>

namespace kfmm {

/// \brief For every local node of `tree` (the nodes of its levels): `factor` times the smallest
/// `magnitude(i)` of its particles, where magnitude (aligned with the sorted local particles)
/// is |a| of an earlier evaluation (and factor = α/G). Leaves take the minimum over their
/// particles (+∞ when empty), inner nodes over their children that are not remote (a shared
/// cell gets the minimum over this rank's particles; DistributedTree::combine_shared_minimum
/// makes it global). Every other node up to `num_nodes` (remote, imported) gets 0: never a
/// target. Grows `allowed` to at least `num_nodes` entries.
void relative_opening_allowance(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry,
                                ScalarView<double> const& magnitude, double factor, int num_nodes,
                                ScalarView<double>& allowed);

}  // namespace kfmm
