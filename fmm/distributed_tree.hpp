#pragma once
/// \file
/// \brief The parts of the force calculation that span ranks: domain decomposition aligned to
/// the global tree, the replicated top tree, pulling remote nodes per walk level, importing
/// remote leaf particles.
///
/// The global tree does not depend on the number of ranks: it is the tree one rank would build.
/// Rank boundaries are moved so that every cell they cut has more than leaf_size particles
/// (cut cells are inner nodes, "shared", replicated on every rank); every other cell lies on
/// one rank. Each rank builds its part, all ranks exchange the children of shared cells, and
/// the walk pulls the children of remote nodes level by level (jz-fmm's scheme, §B.5 of
/// the reference): only what the walk opens travels, in one request/answer round per level.
#include <kfmm/comm/context.hpp>
#include <kfmm/comm/exchange_plan.hpp>
#include <kfmm/core/hilbert.hpp>
#include <kfmm/core/particles.hpp>
#include <kfmm/core/sort.hpp>
#include <kfmm/core/tree.hpp>
#include <kfmm/fmm/dual_tree_walk.hpp>
#include <kfmm/fmm/expansion_pass.hpp>
#include <kfmm/fmm/node_geometry.hpp>
#include <kfmm/fmm/stats.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kfmm {

namespace detail {
/// Node requests in transit: the node's code and the requester's node index (0 where none).
using NodeCodes = Kokkos::View<std::uint64_t* [2], MemorySpace>;
/// Node records in transit, one row each: geometry, multipole coefficients (a float pass's two
/// to a double, core/packed_words.hpp), then the node's code (two 32-bit halves) and the
/// requester's node index, all exact. LayoutRight:
/// the first rows of a longer View are contiguous (what goes to the host is one copy).
using NodeRows = Kokkos::View<double**, Kokkos::LayoutRight, MemorySpace>;
/// Leaf particles in transit: the requester's leaf, x, y, z, m; for a single-precision pass,
/// which reads masses as floats, four columns: the leaf and the float mass share the first
/// (core/packed_words.hpp).
using ParticleRows = Kokkos::View<double**, Kokkos::LayoutRight, MemorySpace>;
}  // namespace detail

/// \brief Distributed state of one ForceSolver; on one rank every call is trivial.
class DistributedTree {
 public:
  /// Splitters from a weighted sample sort, moved so that no cell with ≤ leaf_size particles
  /// is cut; then all particle fields move to their owners, in key order (stable: equal keys
  /// in the order of their source ranks). Afterwards `keys` holds the sorted keys of the owned
  /// particles in `cube`, row for row (the View may be replaced). `carried`, when
  /// given, holds one value per particle that moves with them (replaced by the moved values).
  /// With `keep_tolerance` > 0 the previous splitters are kept while they balance the cost
  /// within it (domains_balance): then only particles that crossed a boundary move. Collective.
  void decompose(ExecutionSpace const& space, Context const& context, BoundingCube const& cube, int leaf_size,
                 Particles<MemorySpace>& particles, ScalarView<std::uint64_t>& keys,
                 ScalarView<double>* carried = nullptr, double keep_tolerance = 0);
  /// The partners and counts of the last decompose()'s plan (input ranks → owners; default on
  /// one rank): results going back to the input ranks answer along it (ExchangePlan::reply_to).
  ExchangePlan<MemorySpace> const& decomposition_partners() const { return decomposition_partners_; }
  /// Whether the last decompose() kept the previous domains.
  bool domains_kept() const { return domains_kept_; }
  /// The R − 1 Hilbert-key boundaries between the ranks' domains after the last decompose()
  /// (empty before it and on one rank): what decompose() keeps with a `keep_tolerance`.
  std::vector<std::uint64_t> const& splitters() const { return splitters_; }
  /// Boundaries for the next decompose() to keep (e.g. splitters() read back from a restart, so
  /// that a continued run keeps the domains the uninterrupted run keeps); the caller checks them.
  void set_splitters(std::vector<std::uint64_t> splitters) { splitters_ = std::move(splitters); }
  /// Whether the current splitters give every rank at most (1 + tolerance) × the mean cost of
  /// the sorted `keys` (with `weights`, or 1 each) of all ranks; a `local_error` of any rank is
  /// agreed in the same Allreduce (of R + 1 numbers). Collective.
  bool domains_balance(ExecutionSpace const& space, Context const& context, ScalarView<std::uint64_t const> const& keys,
                       std::size_t n, Kokkos::View<double const*, MemorySpace> const& weights, double tolerance,
                       std::string const& local_error);
  /// Sorted codes of the cells cut by rank boundaries (empty on one rank).
  ScalarView<std::uint64_t const> forced_split() const { return forced_; }

  /// The local half of assemble_top_tree (this rank's subtree roots packed): the caller runs it
  /// in a stage whose failures it agrees anyway, so the top tree needs no agreement of its own.
  void prepare_top_tree(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry,
                        ExpansionPass const& pass);
  /// Completes the local tree with the replicated top (shared cells and every rank's subtree
  /// roots, packed by prepare_top_tree) and returns the index of the root. A failure on one rank
  /// is agreed in the Allreduce it makes anyway. Collective.
  int assemble_top_tree(ExecutionSpace const& space, Context const& context, ExpansionCentre centre_kind,
                        BoundingCube const& cube, Tree<>& tree, NodeGeometry& geometry, ExpansionPass& pass);
  /// Walk hook: imports the children of the remote nodes among `sources`; returns whether any
  /// rank still has pairs to open. A `walk_error` of this rank, or imports beyond the int node
  /// indices, make every rank throw the agreed kfmm::Error (flagged in the Allreduce each call
  /// makes anyway). Collective.
  bool import_children(ExecutionSpace const& space, Context const& context, ScalarView<int> const& sources,
                       int count, Tree<>& tree, NodeGeometry& geometry, ExpansionPass& pass,
                       std::string const& walk_error = {});
  /// Makes the relative criterion's allowance (fmm/relative_opening.hpp) of the shared cells
  /// global: each rank holds the minimum over its own particles (+∞ without any); afterwards
  /// every rank holds the minimum over all, the value of the one-rank tree. `local_error`: this
  /// rank failed before (e.g. computing the allowance); agreed in the same Allreduce, then every
  /// rank throws it. Collective.
  void combine_shared_minimum(ExecutionSpace const& space, Context const& context,
                              ScalarView<double> const& allowed, std::string const& local_error = {});
  /// Imports the particles of the remote leaves in the P2P lists; returns the source particles
  /// (local ones first). `float_masses`: the pass reads masses as floats, so the imported ones
  /// travel (and arrive) as floats. The remote leaves an earlier import of the same walk's tree
  /// linked lose their particles first (their rows are overwritten), so that only the leaves of
  /// these lists have particles. Collective.
  PassParticles import_leaf_particles(ExecutionSpace const& space, Context const& context, PairLists const& p2p,
                                      Tree<>& tree, Particles<MemorySpace> const& particles, bool float_masses);
  /// Per-particle cost of the last evaluation (owner order), used as weights by decompose().
  void set_costs(ScalarView<double> const& costs, std::size_t n) {
    costs_ = costs;
    cost_count_ = n;
  }

  /// Nodes and leaves this rank counts for the global totals (shared cells on rank 0).
  std::uint64_t owned_nodes(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry,
                            int rank) const;
  std::uint64_t owned_leaves(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry) const;
  /// Communication figures of the last evaluation: this rank's, and the maxima over ranks. Collective.
  void fill_stats(Context const& context, ForceStats& stats) const;
  /// This rank's communication figures of the last evaluation.
  void fill_local_stats(ForceStats& stats) const;

  // Node records in transit; the steps on them launch device kernels, which nvcc allows only
  // in public member functions.
  struct Records;
  Records pack_nodes(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry,
                     ExpansionPass const& pass, std::vector<int> const& nodes);
  int append_nodes(ExecutionSpace const& space, Records const& records, int flags_inner, Tree<>& tree,
                   NodeGeometry& geometry, ExpansionPass& pass);
  /// Rows (detail::NodeRows) of the first `count` nodes of `list` in packed_rows_; `parents`,
  /// when not empty, holds each row's requester node.
  void pack_node_rows(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry,
                      ExpansionPass const& pass, ScalarView<int> const& list, int count,
                      ScalarView<std::uint64_t> const& parents);
  /// Appends the first `count` node rows of `rows` (as pack_node_rows() writes them) as remote
  /// nodes; returns the first index.
  int append_node_rows(ExecutionSpace const& space, detail::NodeRows const& rows, int count, int flags_inner,
                       Tree<>& tree, NodeGeometry& geometry, ExpansionPass& pass);
  /// Local node of each of the first `count` codes (−1 where this rank has no such node), by
  /// binary search in the sorted codes of the local nodes (device-resident), in the first
  /// `count` entries of the returned View (reused by the next call).
  ScalarView<int> find_local_nodes(ExecutionSpace const& space, ScalarView<std::uint64_t const> const& codes,
                                   int count);
  std::vector<int> find_local_nodes(ExecutionSpace const& space, std::vector<std::uint64_t> const& codes);
  /// Sorted unique remote nodes (index ≥ the local nodes) among the first `count` entries of
  /// `nodes` whose flags have all bits of `all_of` and none of `none_of` (a View of exactly
  /// those, reused by the next call).
  ScalarView<int> select_remote(ExecutionSpace const& space, ScalarView<int> const& nodes, int count,
                                ScalarView<int> const& flags, int num_nodes, int all_of, int none_of);
  /// Sends each node of `wanted` (its code) to its owner rank; returns the plan and the requests
  /// as received: (code, the requester's node index) in rows [0, plan.num_import()).
  detail::NodeCodes send_requests(ExecutionSpace const& space, Context const& context, Tree<> const& tree,
                                  ScalarView<int> const& wanted, ExchangePlan<MemorySpace>& plan);
  /// Rank that sent each request row (from the plan's import offsets).
  ScalarView<int> request_sources(ExecutionSpace const& space, ExchangePlan<MemorySpace> const& plan);
  /// Links received rows to their requesters: rows [0, count) carry the requester's node in
  /// `parent`, rows of one parent are consecutive. Writes [begin(parent), end(parent)) =
  /// offset + the parent's row range and clears `clear_flags` of each parent in `flags` (not
  /// read when 0). Returns the number of parents linked.
  static int link_rows(ExecutionSpace const& space, ScalarView<int> const& parent, int count, int offset,
                       ScalarView<int> const& begin, ScalarView<int> const& end, ScalarView<int> const& flags,
                       int clear_flags);

 private:
  void index_local_nodes(ExecutionSpace const& space, Tree<> const& tree);
  // Moves each splitter to the start of the deepest cut cell that would be a leaf and records
  // the cut cells (forced_). Collective.
  void adjust_splitters(ExecutionSpace const& space, Context const& context, ScalarView<std::uint64_t const> const& keys,
                        std::size_t n, int leaf_size);

  std::vector<std::uint64_t> splitters_;
  ScalarView<std::uint64_t> forced_{"kfmm::distributed::forced_split", 0};  ///< the first entries of forced_room_
  ScalarView<std::uint32_t> permutation_{"kfmm::distributed::permutation", 0};
  KeySorter<MemorySpace, std::uint32_t> sorter_;
  ScalarView<double> costs_;
  ExchangePlan<MemorySpace> decomposition_partners_;  ///< counts only: no per-particle order kept
  std::size_t cost_count_ = 0;
  // The local nodes' codes, sorted, and the node of each: code → node lookups on the device.
  ScalarView<std::uint64_t> local_codes_{"kfmm::distributed::local_codes", 0};
  ScalarView<std::uint32_t> local_by_code_{"kfmm::distributed::local_by_code", 0};
  KeySorter<MemorySpace, std::uint32_t> node_sorter_;
  ScalarView<std::uint64_t> splitter_view_{"kfmm::distributed::splitters", 0};  ///< splitters_ on the device
  ScalarView<int> marker_{"kfmm::distributed::marker", 0};  ///< per node, zero between uses
  bool indexed_ = false;                                   ///< prepare_top_tree ran (several ranks)
  std::string pending_error_;  ///< found after a level's exchange; agreed at the next level's Allreduce
  int local_nodes_ = 0;
  int child_used_ = 0;                                   ///< entries of child_index in use
  Vec3View<double> source_pos_{"kfmm::distributed::source_pos", 0};
  ScalarView<double> source_mass_{"kfmm::distributed::source_mass", 0};
  std::uint64_t bytes_sent_ = 0, bytes_received_ = 0;
  std::uint64_t imported_nodes_ = 0, imported_particles_ = 0;
  bool domains_kept_ = false;
  // prepare_top_tree → assemble_top_tree: the shared cells' codes, this rank's subtree roots and
  // their records.
  std::vector<std::uint64_t> top_shared_;
  std::vector<int> top_roots_;
  std::shared_ptr<Records> top_mine_;

  // Work Views kept between calls and grown with slack, so that a step allocates nothing once
  // they fit: each holds one intermediate of one stage (the walk's levels use them in turn).
  ScalarView<std::uint64_t> forced_room_{"kfmm::distributed::forced_split", 0};
  ScalarView<std::uint64_t> splitter_room_{"kfmm::distributed::splitters", 0};
  ScalarView<double> carried_room_{"kfmm::distributed::carried", 0};
  ScalarView<std::uint64_t> import_keys_{"kfmm::distributed::import_keys", 0};  ///< swapped with the caller's keys
  ScalarView<std::uint32_t> arrangement_{"kfmm::distributed::arrangement", 0};
  ScalarView<double> sorted_costs_{"kfmm::distributed::costs", 0};
  ScalarView<double> cumulative_{"kfmm::distributed::cumulative", 0};
  ScalarView<std::uint64_t> bounds_{"kfmm::distributed::bounds", 0};
  ScalarView<double> cost_at_bounds_{"kfmm::distributed::cost_at_bounds", 0};
  ScalarView<std::uint64_t> cut_cells_{"kfmm::distributed::cut_cells", 0};
  ScalarView<std::uint64_t> cut_counts_{"kfmm::distributed::cut_counts", 0};
  ScalarView<int> roots_{"kfmm::distributed::roots", 0};
  ScalarView<int> pack_list_{"kfmm::distributed::pack_list", 0};
  ScalarView<std::uint64_t> codes_{"kfmm::distributed::codes", 0};
  ScalarView<int> found_{"kfmm::distributed::found", 0};
  ScalarView<int> child_parents_{"kfmm::distributed::child_parents", 0};
  ScalarView<int> child_offsets_{"kfmm::distributed::child_offsets", 0};
  ScalarView<int> children_{"kfmm::distributed::children", 0};
  ScalarView<int> shared_nodes_{"kfmm::distributed::shared_nodes", 0};
  ScalarView<int> counted_{"kfmm::distributed::counted", 0};
  ScalarView<double> smallest_{"kfmm::distributed::smallest", 0};
  Kokkos::View<double**, MemorySpace> coefficients_{"kfmm::distributed::coefficients", 0, 0};
  detail::NodeRows packed_rows_{"kfmm::distributed::packed", 0, 0};
  detail::NodeRows received_rows_{"kfmm::distributed::received", 0, 0};
  ScalarView<int> remote_offsets_{"kfmm::distributed::remote_offsets", 0};
  ScalarView<int> selected_{"kfmm::distributed::selected", 0};
  ScalarView<int> owners_{"kfmm::distributed::owners", 0};
  detail::NodeCodes requests_{"kfmm::distributed::requests", 0};
  detail::NodeCodes asked_{"kfmm::distributed::asked", 0};
  ScalarView<std::size_t> import_offsets_{"kfmm::distributed::import_offsets", 0};
  ScalarView<int> request_sources_{"kfmm::distributed::request_sources", 0};
  ScalarView<int> served_{"kfmm::distributed::served", 0};
  ScalarView<int> child_answer_offsets_{"kfmm::distributed::answer_offsets", 0};
  ScalarView<std::size_t> particle_answer_offsets_{"kfmm::distributed::answer_offsets", 0};
  ScalarView<int> to_pack_{"kfmm::distributed::to_pack", 0};
  ScalarView<int> answer_ranks_{"kfmm::distributed::answer_ranks", 0};
  ScalarView<std::uint64_t> requesters_{"kfmm::distributed::parents", 0};
  ScalarView<int> parent_{"kfmm::distributed::parent", 0};
  ScalarView<int> linked_leaves_{"kfmm::distributed::linked_leaves", 0};  ///< remote leaves with particles
  int linked_count_ = 0;
  detail::ParticleRows leaf_rows_{"kfmm::distributed::leaf_particles", 0, 0};
  detail::ParticleRows received_leaf_rows_{"kfmm::distributed::received_particles", 0, 0};
};

}  // namespace kfmm
