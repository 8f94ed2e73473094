#pragma once
/// \file
/// \brief What the relative opening criterion (OpeningCriterion::Relative) allows each target
/// node: the largest M2L force error, per unit G, that the walk may accept for its particles.
#include <kfmm/core/tree.hpp>
#include <kfmm/core/types.hpp>
#include <kfmm/fmm/node_geometry.hpp>

namespace kfmm {

/// \brief For every local node of `tree` (the nodes of its levels): `alpha` times the smallest
/// |grad_i| of its particles, where grad (aligned with the sorted local particles) is the
/// acceleration per unit G of a first evaluation. Leaves take the minimum over their
/// particles (+∞ when empty), inner nodes over their children that are not remote (a shared
/// cell gets the minimum over this rank's particles; DistributedTree::combine_shared_minimum
/// makes it global). Every other node up to `num_nodes` (remote, imported) gets 0: never a
/// target. Grows `allowed` to at least `num_nodes` entries.
void relative_opening_allowance(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry,
                                Vec3View<double> const& grad, double alpha, int num_nodes,
                                ScalarView<double>& allowed);

}  // namespace kfmm
