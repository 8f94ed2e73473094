#pragma once
/// \file
/// \brief Level-synchronous dual-tree walk producing M2L and P2P interaction lists.
#include <kfmm/core/error.hpp>
#include <kfmm/core/tree.hpp>
#include <kfmm/fmm/node_geometry.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kfmm {

/// \brief Interaction lists grouped by target node: group g has target `target(g)` and the
/// sources `source(offset(g) … offset(g+1))`. Groups come in segments (one per walk level);
/// within a segment every target appears at most once, so a kernel may run over the groups
/// of a segment in parallel and over segments in order: no atomics, fixed summation order.
struct PairLists {
  // Labelled: the lists grow by their own label, and a per-label memory report
  // (MemoryAccounting::current_by_label) should name them.
  ScalarView<int> target{std::string("kfmm::pairs::target"), 0};
  ScalarView<int> offset{std::string("kfmm::pairs::offset"), 0};
  ScalarView<int> source{std::string("kfmm::pairs::source"), 0};
  std::vector<int> segment_begin;  ///< groups of segment s: [segment_begin[s], segment_begin[s+1])
  int num_groups = 0;
  int num_entries = 0;

  int num_segments() const { return segment_begin.empty() ? 0 : static_cast<int>(segment_begin.size()) - 1; }
};

/// \brief What the walk accepts for M2L: a pair (a, b), a ≠ b, at distance d = |c_a − c_b|
/// with ρ = (r_a + r_b)/d < θ, beyond `kernel_reach`, and, where `allowed` is given (the
/// relative criterion, fmm/relative_opening.hpp), with an estimate of the interaction's
/// truncation error at a's farthest particle, per unit G, at most allowed(a) / max(c_a, floor):
///     max_{n=0…p+1} C(p+1, n) T_n r_a^(p+1−n) / d^(p+3),   p = order,
/// the largest term of the degree-(p+1) part of the double expansion, split by the addition
/// theorem into b's degree-n moments and a's radius. T_0 = M_b; T_{p+1} = M_b s_b^(p+1) with
/// s_b b's power radius (NodeGeometry::power_radius, computed with power_exponent = p + 1): a
/// bound, as b's moments of that degree are not kept; and T_n for 1 ≤ n ≤ p is b's harmonic
/// multipole power H_n (NodeGeometry::multipole_power) where the geometry has it, else the bound
/// M_b s_b^n. H_n weighs b's mass by where it lies and how it is arranged (Dehnen 2014): a smooth
/// cell's moments largely cancel, a cell whose mass sits at its edge keeps them. (The largest
/// term, not their sum: measured, the tails of the per-particle errors are the same and
/// smooth distributions cost less; README, "Choosing the defaults".)
/// c_a is the coherence of a's candidate sources at its level (those passing the angle test),
/// weighted by their estimates: the larger of the length of their mean direction and the
/// normalised anisotropy of their mean n nᵀ; 1 when the errors come from one side or one axis
/// and add up at the target, near 0 when they come from all around and cancel.
struct OpeningTest {
  double theta = 0.75;
  /// > 0 (the spline's support 2.8 ε): pairs that may come closer than it stay out of M2L,
  /// where the piecewise kernel's expansion would not converge.
  double kernel_reach = 0;
  int order = 0;                   ///< p of the error estimate
  ScalarView<double> allowed = {};  ///< per target node; empty: the angle test alone
  /// The largest factor by which coherence lets a target's allowance grow is 1/this, > 0;
  /// ≥ 1: none. 0.1 let the errors of isotropic targets add up past E = 3e-4 on 1e6 uniform
  /// particles (README, "Choosing the defaults").
  double coherence_floor = 0.3;
  /// > 0: a leaf target a with radius r_a > m2p_theta · d and r_a > 2 r_b from a source b never
  /// takes b by M2L,
  /// whose error there comes from a's extent and adds up over many small sources (each within
  /// the estimate) to far more than the allowance: b's multipole goes to each of a's particles
  /// (M2P) if b passes the angle test (and the relative estimate without a's extent, and the
  /// kernel's reach) from a's nearest possible particle, at d − r_a; otherwise the pair is opened
  /// (P2P between leaves). 0: no M2P.
  double m2p_theta = 0;
};

/// \brief The dual-tree walk. Starts from (root, root); a pair (a, b) is accepted for M2L when
/// the OpeningTest says so (or for M2P, see OpeningTest::m2p_theta), goes to P2P when both are
/// leaves, and is opened otherwise into
/// children(a) × children(b) (a leaf stands for itself). Pairs whose target is remote or
/// idle (node_idle: no particle whose force is wanted) are dropped. Counting, scanning
/// and filling keep a fixed order, so the lists do not depend on the number of threads.
/// Keeps its scratch Views between calls.
class DualTreeWalk {
 public:
  /// Called before each level with the sources of the pairs about to be opened, so that the
  /// distributed solver can import the children of remote nodes (flag node_unopened). It may
  /// append nodes to the tree and geometry and must clear node_unopened of the nodes it
  /// opened. It returns whether any rank still has pairs to open (the walk is collective).
  /// `error` is non-empty when this rank's walk failed (it then opens nothing more): the
  /// callback must agree it with the other ranks in its collective and throw on every rank.
  using ImportChildren = std::function<bool(ScalarView<int> const& sources, int count, std::string const& error)>;

  /// Lists index their entries with int. A list that would need more entries than the index
  /// limit (INT_MAX; the environment variable KFMM_WALK_INDEX_LIMIT lowers it, a testing hook)
  /// is a kfmm::Error, thrown at once without `import_children` and through its next call
  /// (on every rank) with it.
  void run(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry, OpeningTest const& test,
           int root, PairLists& m2l, PairLists& p2p, PairLists& m2p, ImportChildren const& import_children = {});
  /// Without M2P (test.m2p_theta must be 0).
  void run(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry, OpeningTest const& test,
           int root, PairLists& m2l, PairLists& p2p, ImportChildren const& import_children = {}) {
    if (test.m2p_theta != 0) fail("DualTreeWalk: m2p_theta = {} needs an M2P list", test.m2p_theta);
    run(space, tree, geometry, test, root, m2l, p2p, no_m2p_, import_children);
  }
  /// The angle test alone.
  void run(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry, double theta,
           double kernel_reach, int root, PairLists& m2l, PairLists& p2p, ImportChildren const& import_children = {}) {
    run(space, tree, geometry, OpeningTest{theta, kernel_reach}, root, m2l, p2p, import_children);
  }

  long long index_limit() const { return index_limit_; }

  /// A level's count and fill passes run over chunks of consecutive groups with about this
  /// many candidate pairs each (a group is never split), so that the candidates' scratch is
  /// sized by a chunk rather than by the deepest level. The lists do not depend on it; lowered
  /// by tests to run many chunks (also through the environment variable
  /// KFMM_WALK_CANDIDATE_CHUNK, read when the walk is made, a testing hook). Must be ≥ 1.
  void set_candidate_chunk(long long candidates);
  long long candidate_chunk() const { return candidate_chunk_; }

 private:
  static long long index_limit_from_environment();
  static long long candidate_chunk_from_environment();
  // Splits a level of `groups` groups and `candidates` candidates (candidate_offset_ scanned and
  // closed) into chunks: group[c] … group[c + 1] − 1 with candidates candidate[c] … candidate[c + 1] − 1.
  void chunk_level(ExecutionSpace const& space, long long candidates, int groups, std::vector<int>& group,
                   std::vector<long long>& candidate);

  PairLists open_[2];
  PairLists no_m2p_;  ///< the M2P list of a walk without M2P (stays empty)
  ScalarView<int> counts_[8];
  /// Each candidate pair's PairKind, from the count pass to the fill pass (which then tests
  /// nothing): one byte per candidate, candidates of group g from candidate_offset_(g).
  ScalarView<std::uint8_t> candidate_kind_;
  ScalarView<int> candidate_offset_;
  /// Per group, its sources' children (the candidates of each of its target children), listed
  /// once at the group's first candidate slots by the count pass.
  ScalarView<int> candidate_node_;
  /// Relative criterion with coherence: per candidate, its error estimate over d² (see the
  /// count pass), kept only within one target's count.
  ScalarView<double> candidate_value_;
  /// relative criterion: per source node, C(p+1, n) T_n of the error estimate (n = 0 … p+1),
  /// filled for the nodes a level tests, once per walk (`coefficient_ready_`); p + 2 ≤ 10 terms
  Kokkos::View<double* [10], Kokkos::LayoutRight, MemorySpace> coefficient_{std::string("kfmm::walk::coefficient"), 0};
  ScalarView<int> coefficient_ready_{std::string("kfmm::walk::coefficient_ready"), 0};
  long long index_limit_ = index_limit_from_environment();
  long long candidate_chunk_ = candidate_chunk_from_environment();
  Kokkos::View<long long* [2], Kokkos::LayoutRight, MemorySpace> chunk_bounds_{std::string("kfmm::walk::chunk_bounds"), 0};
};

}  // namespace kfmm
