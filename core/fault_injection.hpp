#pragma once
/// \file
/// \brief Named fault points: a testing facility that makes a process crash (or fail) at an
/// exact moment, e.g. between two ranks' restart files, to test what a killed run leaves.
///
/// `KFMM_FAULT_INJECTION=<point>:<n>[:<rank>[:<action>]][,<rule>...]` acts the n-th time
/// (n ≥ 1, counted per process from its start) the process reaches `point`, on MPI rank
/// `rank` of MPI_COMM_WORLD (omitted or `*`: every rank). Actions: `kill` (default) raises
/// SIGKILL on the process itself — a crash at that moment, nothing flushed, no destructors;
/// `throw` throws kfmm::Error from the point — a failure the code around must handle (inside
/// a collective stage, one rank's failure that the ranks have to agree on). The variable is
/// read once; unset, a point costs one well-predicted branch. A `throw` at a point that one rank
/// reaches outside a collective stage fails that rank alone, as a real error there would.
///
/// Points (see where they are called): `step` (a step computed, before its observers),
/// `snapshot.dataset` (a dataset of the temporary snapshot file written), `snapshot.written`
/// (this rank's part of the temporary snapshot written, before the ranks agree and rank 0
/// renames it), `snapshot.renamed` (after rank 0's rename), `restart.rank_written` (this rank's
/// restart file complete in `restart.tmp`, before the swap), `restart.swapping` (rank 0, the
/// previous restart moved to `restart.old`, the new one not yet in place), `restart.swapped`
/// (rank 0, the new restart in place, `restart.old` not yet removed), `diagnostics.row` (rank 0,
/// a row appended), `diagnostics.resume` (rank 0, the kept rows written to the temporary file,
/// before it replaces the log). The stages of a force evaluation (`throw` there must make every
/// rank throw): `force.refit_positions` (compute_active on a kept plan: new positions packed
/// for their owners), `force.decompose`, `force.sort`, `force.tree`, `force.upward`,
/// `force.top_tree`, `force.top_tree_links`, `force.walk_setup` (growing the multipole powers and
/// result arrays before the walk), `force.walk` (each level), `force.import_nodes` (each level),
/// `force.allowance` (the relative criterion's allowance), `force.import_particles`, `force.m2l`,
/// `force.downward`, `force.p2p`, `force.m2p`, `force.output`, `force.return` (before the results go back to
/// input order).
#include <string>

namespace kfmm::fault_injection {

/// Reads KFMM_FAULT_INJECTION now; kfmm::Environment does, before MPI, so that a bad value fails
/// every rank alike (without it, the first point reached reads it). Throws kfmm::Error naming
/// the variable and the fix for a bad value.
void read_environment();

/// Replaces the rules by those of `spec` (the syntax of KFMM_FAULT_INJECTION; empty: none) and
/// restarts the counts. For tests that inject failures in-process; throws kfmm::Error on a bad spec.
void arm(std::string const& spec);

namespace detail {
extern int mode;  ///< -1: the variable not read yet, 0: no rules, 1: rules
void reached(char const* point);
}  // namespace detail

/// Marks fault point `name` (host code, main thread).
inline void point(char const* name) {
  if (detail::mode != 0) detail::reached(name);
}

}  // namespace kfmm::fault_injection
