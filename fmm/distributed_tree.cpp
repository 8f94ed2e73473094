#include <kfmm/comm/decomposition.hpp>
#include <kfmm/comm/exchange_plan.hpp>
#include <kfmm/core/error.hpp>
#include <kfmm/core/fault_injection.hpp>
#include <kfmm/core/view_growth.hpp>
#include <kfmm/fmm/distributed_tree.hpp>

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>

namespace kfmm {

namespace {

constexpr int geometry_doubles = 8;  // centre[3], radius, mass, scale, flags, power radius


int owner_of(std::vector<std::uint64_t> const& splitters, std::uint64_t code) {
  std::uint64_t const key = code_first_key(code);
  return static_cast<int>(std::upper_bound(splitters.begin(), splitters.end(), key) - splitters.begin());
}

// Codes of the cells holding both key s − 1 and key s (the cells a boundary at s cuts).
std::vector<std::uint64_t> cut_cells(std::uint64_t s) {
  std::vector<std::uint64_t> cells;
  if (s == 0) return cells;
  for (int level = 0; level <= max_tree_level; ++level) {
    if (cell_code(s - 1, level) != cell_code(s, level)) break;
    cells.push_back(cell_code(s, level));
  }
  return cells;
}

// Sends requests[r] to rank r; every rank answers each code it receives through `serve`, which
// appends records (one code and `doubles_per_record` doubles each) and returns their number.
// Returns the answers in request order (rank by rank), with the record count of each request.
struct Answers {
  std::vector<int> records_per_request;
  std::vector<std::uint64_t> codes;
  std::vector<double> doubles;
};

// All-to-all of variable-length vectors; returns what every rank sent here, by source rank.
// Counts are 64-bit and messages go through exchange_remote_bytes (pieces of at most INT_MAX
// bytes): MPI_Alltoallv's int counts and displacements would overflow on large imports.
template <class T>
std::vector<T> all_to_all(Context const& context, std::vector<std::vector<T>> const& outgoing,
                          std::vector<std::size_t>& incoming_counts, std::uint64_t& bytes_sent,
                          std::uint64_t& bytes_received) {
  int const ranks = context.size(), rank = context.rank();
  detail::MessageCounts counts;
  counts.send_counts.resize(ranks);
  for (int r = 0; r < ranks; ++r) counts.send_counts[r] = outgoing[r].size();
  counts.recv_counts = detail::import_counts(context, counts.send_counts);
  counts.send_offsets = detail::offsets_of(counts.send_counts);
  counts.recv_offsets = detail::offsets_of(counts.recv_counts);
  std::vector<T> send(counts.send_offsets[ranks]), receive(counts.recv_offsets[ranks]);
  for (int r = 0; r < ranks; ++r) std::copy(outgoing[r].begin(), outgoing[r].end(), send.begin() + counts.send_offsets[r]);
  std::copy(outgoing[rank].begin(), outgoing[rank].end(), receive.begin() + counts.recv_offsets[rank]);
  detail::exchange_remote_bytes(context.comm(), rank, counts, sizeof(T), reinterpret_cast<char const*>(send.data()),
                                reinterpret_cast<char*>(receive.data()), std::numeric_limits<int>::max());
  for (int r = 0; r < ranks; ++r) {
    if (r == rank) continue;
    bytes_sent += sizeof(T) * counts.send_counts[r];
    bytes_received += sizeof(T) * counts.recv_counts[r];
  }
  incoming_counts = std::move(counts.recv_counts);
  return receive;
}

// Every rank's records, in rank order, by one Allgather of the counts and one Allgatherv of
// code and doubles packed together (the top tree is replicated: each rank needs every rank's
// roots). The same on every rank, so a too large total fails everywhere alike.
template <class Records>
Records all_gather(Context const& context, Records const& mine, std::uint64_t& bytes_sent, std::uint64_t& bytes_received) {
  int const ranks = context.size();
  std::size_t const per = mine.per_record;
  std::size_t const record_bytes = sizeof(std::uint64_t) + per * sizeof(double);
  std::uint64_t const count = mine.size();
  std::vector<std::uint64_t> counts(ranks);
  MPI_Allgather(&count, 1, MPI_UINT64_T, counts.data(), 1, MPI_UINT64_T, context.comm());
  std::uint64_t const total = std::accumulate(counts.begin(), counts.end(), std::uint64_t(0));
  if (total * record_bytes > std::uint64_t(std::numeric_limits<int>::max()))
    fail("the top tree has {} subtree roots of {} bytes, more than MPI's int count limit of {} bytes in one gather; use "
         "a larger leaf_size or fewer MPI ranks",
         total, record_bytes, std::numeric_limits<int>::max());
  std::vector<int> sizes(ranks), displacements(ranks + 1, 0);
  for (int r = 0; r < ranks; ++r) {
    sizes[r] = static_cast<int>(counts[r] * record_bytes);
    displacements[r + 1] = displacements[r] + sizes[r];
  }
  std::vector<char> send(count * record_bytes), receive(total * record_bytes);
  for (std::size_t i = 0; i < count; ++i) {
    std::memcpy(&send[i * record_bytes], &mine.codes[i], sizeof(std::uint64_t));
    std::memcpy(&send[i * record_bytes + sizeof(std::uint64_t)], &mine.doubles[i * per], per * sizeof(double));
  }
  MPI_Allgatherv(send.data(), static_cast<int>(send.size()), MPI_BYTE, receive.data(), sizes.data(),
                 displacements.data(), MPI_BYTE, context.comm());
  Records all;
  all.per_record = mine.per_record;
  all.codes.resize(total);
  all.doubles.resize(total * per);
  for (std::size_t i = 0; i < total; ++i) {
    std::memcpy(&all.codes[i], &receive[i * record_bytes], sizeof(std::uint64_t));
    std::memcpy(&all.doubles[i * per], &receive[i * record_bytes + sizeof(std::uint64_t)], per * sizeof(double));
  }
  bytes_sent += send.size() * std::uint64_t(ranks - 1);
  bytes_received += receive.size() - send.size();
  return all;
}

Answers ask_owners(Context const& context, std::vector<std::vector<std::uint64_t>> const& requests,
                   int doubles_per_record,
                   std::function<int(std::uint64_t, std::vector<std::uint64_t>&, std::vector<double>&)> const& serve,
                   std::uint64_t& bytes_sent, std::uint64_t& bytes_received) {
  int const ranks = context.size();
  std::vector<std::size_t> incoming;
  std::vector<std::uint64_t> const asked = all_to_all(context, requests, incoming, bytes_sent, bytes_received);
  // Answer rank by rank, request by request.
  std::vector<std::vector<int>> counts(ranks);
  std::vector<std::vector<std::uint64_t>> codes(ranks);
  std::vector<std::vector<double>> doubles(ranks);
  std::size_t at = 0;
  for (int r = 0; r < ranks; ++r)
    for (std::size_t i = 0; i < incoming[r]; ++i) counts[r].push_back(serve(asked[at++], codes[r], doubles[r]));
  Answers answers;
  std::vector<std::size_t> ignored;
  answers.records_per_request = all_to_all(context, counts, ignored, bytes_sent, bytes_received);
  answers.codes = all_to_all(context, codes, ignored, bytes_sent, bytes_received);
  answers.doubles = all_to_all(context, doubles, ignored, bytes_sent, bytes_received);
  if (answers.doubles.size() != answers.codes.size() * static_cast<std::size_t>(doubles_per_record))
    fail("internal error: {} answered records carry {} doubles, expected {} each", answers.codes.size(),
         answers.doubles.size(), doubles_per_record);
  return answers;
}

}  // namespace

// Node records in transit: code, geometry and multipole coefficients.
struct DistributedTree::Records {
  std::vector<std::uint64_t> codes;
  std::vector<double> doubles;  // per record: geometry_doubles, then the coefficients
  int per_record = 0;
  std::size_t size() const { return codes.size(); }
};

DistributedTree::Records DistributedTree::pack_nodes(ExecutionSpace const& space, Tree<> const& tree,
                                                     NodeGeometry const& geometry, ExpansionPass const& pass,
                                                     std::vector<int> const& nodes) const {
  Records records;
  int const coefficients = pass.coefficients_per_node();
  records.per_record = geometry_doubles + coefficients;
  int const count = static_cast<int>(nodes.size());
  if (count == 0) return records;
  ScalarView<int> list("kfmm::distributed::pack_list", count);
  auto list_host = Kokkos::create_mirror_view(list);
  for (int i = 0; i < count; ++i) list_host(i) = nodes[i];
  Kokkos::deep_copy(space, list, list_host);
  Kokkos::View<double**, MemorySpace> packed("kfmm::distributed::packed", count, records.per_record);
  Kokkos::View<double**, MemorySpace> coefficient_view("kfmm::distributed::coefficients", count, coefficients);
  pass.get_multipoles(space, list, count, coefficient_view);
  auto const centre = geometry.centre;
  auto const radius = geometry.radius;
  auto const mass = geometry.mass;
  auto const scale = geometry.scale;
  auto const flags = geometry.flags;
  bool const powered = geometry.power_exponent > 0;
  auto const power_radius = geometry.power_radius;
  Kokkos::parallel_for(
      "kfmm::distributed::pack_nodes", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count), KOKKOS_LAMBDA(int i) {
        int const node = list(i);
        for (int k = 0; k < 3; ++k) packed(i, k) = centre(node, k);
        packed(i, 3) = radius(node);
        packed(i, 4) = mass(node);
        packed(i, 5) = scale(node);
        packed(i, 6) = double(flags(node) & node_leaf);
        packed(i, 7) = powered ? power_radius(node) : 0.0;
        for (int c = 0; c < coefficients; ++c) packed(i, geometry_doubles + c) = coefficient_view(i, c);
      });
  auto const packed_host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), packed);
  auto const code_host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tree.code);
  for (int i = 0; i < count; ++i) {
    records.codes.push_back(code_host(nodes[i]));
    for (int c = 0; c < records.per_record; ++c) records.doubles.push_back(packed_host(i, c));
  }
  return records;
}

int DistributedTree::append_nodes(ExecutionSpace const& space, Records const& records, int flags_inner, Tree<>& tree,
                                  NodeGeometry& geometry, ExpansionPass& pass) {
  int const first = tree.num_nodes;
  int const count = static_cast<int>(records.size());
  if (count == 0) return first;
  std::size_t const total = static_cast<std::size_t>(first) + count;
  tree.reserve(total);
  grow_preserving(geometry.centre, total);
  grow_preserving(geometry.radius, total);
  grow_preserving(geometry.mass, total);
  grow_preserving(geometry.scale, total);
  grow_preserving(geometry.flags, total);
  bool const powered = geometry.power_exponent > 0;
  if (powered) grow_preserving(geometry.power_radius, total);
  pass.reserve_nodes(total);
  Kokkos::View<double**, MemorySpace> packed("kfmm::distributed::unpacked", count, records.per_record);
  Kokkos::View<std::uint64_t*, MemorySpace> codes("kfmm::distributed::unpacked_codes", count);
  {
    auto packed_host = Kokkos::create_mirror_view(packed);
    auto codes_host = Kokkos::create_mirror_view(codes);
    for (int i = 0; i < count; ++i) {
      codes_host(i) = records.codes[i];
      for (int c = 0; c < records.per_record; ++c) packed_host(i, c) = records.doubles[std::size_t(i) * records.per_record + c];
    }
    Kokkos::deep_copy(space, packed, packed_host);
    Kokkos::deep_copy(space, codes, codes_host);
  }
  auto code = tree.code;
  auto pbegin = tree.particle_begin;
  auto pend = tree.particle_end;
  auto cbegin = tree.child_begin;
  auto cend = tree.child_end;
  auto centre = geometry.centre;
  auto radius = geometry.radius;
  auto mass = geometry.mass;
  auto scale = geometry.scale;
  auto flags = geometry.flags;
  auto power_radius = geometry.power_radius;
  Kokkos::parallel_for(
      "kfmm::distributed::append_nodes", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count), KOKKOS_LAMBDA(int i) {
        int const node = first + i;
        code(node) = codes(i);
        pbegin(node) = pend(node) = 0;
        cbegin(node) = cend(node) = 0;
        for (int k = 0; k < 3; ++k) centre(node, k) = packed(i, k);
        radius(node) = packed(i, 3);
        mass(node) = packed(i, 4);
        scale(node) = packed(i, 5);
        bool const leaf = packed(i, 6) != 0.0;
        flags(node) = node_remote | (leaf ? node_leaf : flags_inner);
        if (powered) power_radius(node) = packed(i, 7);
      });
  Kokkos::View<double**, MemorySpace> coefficients("kfmm::distributed::unpacked_coefficients", count,
                                                   records.per_record - geometry_doubles);
  Kokkos::parallel_for(
      "kfmm::distributed::unpack_coefficients", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count),
      KOKKOS_LAMBDA(int i) {
        for (int c = 0; c < int(coefficients.extent(1)); ++c) coefficients(i, c) = packed(i, geometry_doubles + c);
      });
  pass.set_multipoles(space, first, count, coefficients);
  tree.num_nodes = static_cast<int>(total);
  imported_nodes_ += count;
  return first;
}

void DistributedTree::index_local_nodes(Tree<> const& tree) {
  auto const code = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tree.code);
  local_index_.clear();
  local_index_.reserve(tree.num_nodes);
  for (int i = 0; i < tree.num_nodes; ++i) local_index_.emplace(code(i), i);
}

void DistributedTree::decompose(ExecutionSpace const& space, Context const& context, BoundingCube const& cube,
                                int leaf_size, Particles<MemorySpace>& particles, ScalarView<std::uint64_t>& keys,
                                ScalarView<double>* carried, double keep_tolerance) {
  std::size_t const n = particles.num;
  // A failure of the local steps is agreed in choose_splitters' first collective.
  std::string local_error;
  Kokkos::View<double const*, MemorySpace> weights;
  ScalarView<double> sorted_carried;
  try {
    fault_injection::point("force.decompose");
    grow_preserving(keys, n);
    grow_preserving(permutation_, n);
    compute_keys(space, cube, particles.pos, n, keys);
    // Sorting first lets cells be counted by binary search (and the sample sort pick quantiles).
    sorter_.sort(space, keys, permutation_, n);
    sorter_.permute(space, particles, permutation_);
    if (carried != nullptr) {
      sorted_carried = ScalarView<double>("kfmm::distributed::carried", n);
      auto const values = *carried;
      auto const perm = permutation_;
      Kokkos::parallel_for(
          "kfmm::distributed::permute_carried", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
          KOKKOS_LAMBDA(std::size_t i) { sorted_carried(i) = values(perm(i)); });
    }
    if (cost_count_ == n && n > 0) {
      ScalarView<double> sorted_costs("kfmm::distributed::costs", n);
      auto const costs = costs_;
      auto const perm = permutation_;
      Kokkos::parallel_for(
          "kfmm::distributed::permute_costs", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
          KOKKOS_LAMBDA(std::size_t i) { sorted_costs(i) = costs(perm(i)); });
      weights = sorted_costs;
    }
  } catch (std::exception const& e) {
    local_error = e.what();
  }
  ScalarView<std::uint64_t const> const_keys = keys;
  bool const kept = keep_tolerance > 0 && splitters_.size() + 1 == std::size_t(context.size()) &&
                    domains_balance(space, context, const_keys, n, weights, keep_tolerance, local_error);
  domains_kept_ = kept;
  if (!kept) {
    std::size_t const sampled = local_error.empty() ? n : 0;
    splitters_ = choose_splitters(context, Kokkos::subview(const_keys, Kokkos::make_pair(std::size_t(0), sampled)),
                                  sampled, local_error.empty() ? weights : decltype(weights)(), 256, local_error);
  }
  // Kept splitters are adjusted again too: particles moved, and a cut cell that would now be a
  // leaf would make the tree differ from the one-rank tree (and the forces from its forces).
  adjust_splitters(space, context, const_keys, n, leaf_size);
  auto const destinations = destination_ranks(space, keys, n, splitters_);
  ExchangePlan<MemorySpace> plan;
  redistribute(context, particles, destinations, &plan);
  if (carried != nullptr) *carried = plan.exchange(sorted_carried);
  bytes_sent_ = plan.bytes_sent();
  bytes_received_ = plan.bytes_received();
  imported_nodes_ = imported_particles_ = 0;
  cost_count_ = 0;
}

bool DistributedTree::domains_balance(ExecutionSpace const& space, Context const& context,
                                      ScalarView<std::uint64_t const> const& keys, std::size_t n,
                                      Kokkos::View<double const*, MemorySpace> const& weights, double tolerance,
                                      std::string const& local_error) {
  int const ranks = context.size();
  // The cost each rank would hold under the current splitters: keys are sorted, so a rank's
  // share of this rank's particles is a range, its cost a difference of prefix sums.
  std::vector<double> loads(ranks + 1, 0.0);
  if (local_error.empty() && n > 0) {
    bool const weighted = weights.extent(0) >= n;
    ScalarView<double> cumulative(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::distributed::cumulative"),
                                  n + 1);
    Kokkos::parallel_scan(
        "kfmm::distributed::cumulative_cost", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n + 1),
        KOKKOS_LAMBDA(std::size_t i, double& sum, bool final) {
          if (final) cumulative(i) = sum;
          if (i < n) sum += weighted ? weights(i) : 1.0;
        });
    Kokkos::View<std::uint64_t*, MemorySpace> bounds("kfmm::distributed::bounds", ranks - 1);
    Kokkos::deep_copy(space, bounds,
                      Kokkos::View<std::uint64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(splitters_.data(),
                                                                                                  ranks - 1));
    ScalarView<double> at("kfmm::distributed::cost_at_bounds", ranks + 1);
    Kokkos::parallel_for(
        "kfmm::distributed::cost_at_bounds", Kokkos::RangePolicy<ExecutionSpace>(space, 0, ranks + 1),
        KOKKOS_LAMBDA(int r) {
          std::size_t first = 0;  // the first key ≥ the splitter that starts rank r
          if (r == ranks) {
            first = n;
          } else if (r > 0) {
            std::size_t high = n;
            while (first < high) {
              std::size_t const middle = (first + high) / 2;
              if (keys(middle) < bounds(r - 1))
                first = middle + 1;
              else
                high = middle;
            }
          }
          at(r) = cumulative(first);
        });
    auto const at_host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), at);
    for (int r = 0; r < ranks; ++r) loads[r] = at_host(r + 1) - at_host(r);
  }
  loads[ranks] = local_error.empty() ? 0.0 : 1.0;  // failures, agreed in the same step
  MPI_Allreduce(MPI_IN_PLACE, loads.data(), ranks + 1, MPI_DOUBLE, MPI_SUM, context.comm());
  if (loads[ranks] > 0) agree_on_error(context, local_error);
  double const total = std::accumulate(loads.begin(), loads.begin() + ranks, 0.0);
  double const most = *std::max_element(loads.begin(), loads.begin() + ranks);
  return total > 0 && most <= (1.0 + tolerance) * total / ranks;
}

void DistributedTree::adjust_splitters(ExecutionSpace const& space, Context const& context,
                                       ScalarView<std::uint64_t const> const& keys, std::size_t n, int leaf_size) {
  // Global counts of every cell the boundaries cut.
  std::vector<std::uint64_t> cells;
  for (std::uint64_t s : splitters_) {
    auto const cut = cut_cells(s);
    cells.insert(cells.end(), cut.begin(), cut.end());
  }
  auto const keys_host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), keys);
  std::uint64_t const* first_key = keys_host.data();
  std::uint64_t const* last_key = keys_host.data() + n;
  std::vector<std::uint64_t> local_counts(cells.size()), counts(cells.size());
  for (std::size_t c = 0; c < cells.size(); ++c) {
    int const level = code_level(cells[c]);
    std::uint64_t const lo = code_first_key(cells[c]);
    std::uint64_t const span = std::uint64_t(1) << (3 * (max_tree_level - level));
    auto const begin = std::lower_bound(first_key, last_key, lo);
    auto const end = level == 0 ? last_key : std::lower_bound(first_key, last_key, lo + span);
    local_counts[c] = static_cast<std::uint64_t>(end - begin);
  }
  MPI_Allreduce(local_counts.data(), counts.data(), static_cast<int>(cells.size()), MPI_UINT64_T, MPI_SUM,
                context.comm());
  // Move each boundary to the start of the deepest cut cell that would be a leaf.
  std::size_t at = 0;
  std::uint64_t previous = 0;
  for (auto& s : splitters_) {
    auto const cut = cut_cells(s);
    int deepest_inner = -1;
    for (std::size_t l = 0; l < cut.size(); ++l)
      if (counts[at + l] > static_cast<std::uint64_t>(leaf_size)) deepest_inner = static_cast<int>(l);
    if (deepest_inner + 1 < static_cast<int>(cut.size())) s = code_first_key(cut[deepest_inner + 1]);
    at += cut.size();
    s = std::max(s, previous);
    previous = s;
  }
  std::vector<std::uint64_t> forced;
  for (std::uint64_t s : splitters_) {
    auto const cut = cut_cells(s);
    forced.insert(forced.end(), cut.begin(), cut.end());
  }
  std::sort(forced.begin(), forced.end());
  forced.erase(std::unique(forced.begin(), forced.end()), forced.end());
  forced_ = ScalarView<std::uint64_t>("kfmm::distributed::forced_split", forced.size());
  Kokkos::deep_copy(space, forced_,
                    Kokkos::View<std::uint64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(forced.data(), forced.size()));
}

void DistributedTree::prepare_top_tree(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry,
                                       ExpansionPass const& pass) {
  fault_injection::point("force.top_tree");
  local_nodes_ = tree.num_nodes;
  child_used_ = tree.num_nodes;
  index_local_nodes(tree);
  auto const forced_host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), forced_);
  top_shared_.assign(forced_host.data(), forced_host.data() + forced_host.extent(0));
  auto is_shared = [&](std::uint64_t code) { return std::binary_search(top_shared_.begin(), top_shared_.end(), code); };

  // This rank's subtree roots: children of shared cells that are not shared, or the root.
  top_roots_.clear();
  {
    auto const code = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tree.code);
    for (int i = 0; i < tree.num_nodes; ++i) {
      std::uint64_t const c = code(i);
      if (is_shared(c)) continue;
      if (c == 1 || is_shared(c >> 3)) top_roots_.push_back(i);
    }
  }
  top_mine_ = std::make_shared<Records>(pack_nodes(space, tree, geometry, pass, top_roots_));
}

int DistributedTree::assemble_top_tree(ExecutionSpace const& space, Context const& context,
                                       ExpansionCentre centre_kind, BoundingCube const& cube, Tree<>& tree,
                                       NodeGeometry& geometry, ExpansionPass& pass) {
  if (!top_mine_) fail("internal error: assemble_top_tree without prepare_top_tree");
  std::vector<std::uint64_t> const& shared = top_shared_;
  std::vector<int> const& roots = top_roots_;
  Records const mine = std::move(*top_mine_);
  top_mine_.reset();
  Records const all = all_gather(context, mine, bytes_sent_, bytes_received_);  // every rank's subtree roots
  // A failure here is agreed in the Allreduce below, which every rank makes anyway.
  std::string error;
  std::unordered_map<std::uint64_t, int> top_index;
  Records missing;
  int missing_first = 0;
  std::vector<std::pair<int, int>> by_level;  // (level, node)
  std::unordered_map<int, std::uint64_t> shared_code;
  ScalarView<int> list;
  decltype(Kokkos::create_mirror_view(list)) list_host;
  try {
    fault_injection::point("force.top_tree_links");
    // Remote subtree roots and the shared cells without local particles become new nodes.
    Records remote;
    remote.per_record = all.per_record;
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (local_index_.count(all.codes[i])) continue;
      remote.codes.push_back(all.codes[i]);
      remote.doubles.insert(remote.doubles.end(), all.doubles.begin() + i * all.per_record,
                            all.doubles.begin() + (i + 1) * all.per_record);
    }
    std::vector<std::uint64_t> top_codes = all.codes;
    int const remote_first = append_nodes(space, remote, node_unopened, tree, geometry, pass);
    for (std::size_t i = 0; i < remote.size(); ++i) top_index[remote.codes[i]] = remote_first + static_cast<int>(i);
    missing.per_record = all.per_record;
    for (std::uint64_t c : shared) {
      if (local_index_.count(c)) continue;
      missing.codes.push_back(c);
      missing.doubles.resize(missing.doubles.size() + missing.per_record, 0.0);
    }
    // Shared cells without local particles are sources only (node_remote); their data follows below.
    missing_first = append_nodes(space, missing, 0, tree, geometry, pass);
    for (std::size_t i = 0; i < missing.size(); ++i) top_index[missing.codes[i]] = missing_first + static_cast<int>(i);
    {
      auto const code = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tree.code);
      for (int root : roots) top_index[code(root)] = root;
    }
    for (std::uint64_t c : shared)
      if (local_index_.count(c)) top_index[c] = local_index_.at(c);
    top_codes.insert(top_codes.end(), shared.begin(), shared.end());

    // Children lists of the shared cells: every top node one level below, in code order.
    std::sort(top_codes.begin(), top_codes.end());
    top_codes.erase(std::unique(top_codes.begin(), top_codes.end()), top_codes.end());
    // (shared node, its children), found by hashing the parents' codes: both lists grow with R.
    std::vector<std::pair<int, std::vector<int>>> children;
    std::unordered_map<std::uint64_t, std::size_t> slot_of;
    for (std::uint64_t c : shared) {
      slot_of[c] = children.size();
      children.emplace_back(top_index.at(c), std::vector<int>());
    }
    for (std::uint64_t t : top_codes) {
      if (t == 1) continue;
      auto const parent = slot_of.find(t >> 3);
      if (parent != slot_of.end()) children[parent->second].second.push_back(top_index.at(t));
    }
    std::size_t entries = 0;
    for (auto const& [node, kids] : children) entries += kids.size();
    grow_preserving(tree.child_index, child_used_ + entries);
    {
      auto cindex = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tree.child_index);
      auto cbegin = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tree.child_begin);
      auto cend = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tree.child_end);
      for (auto const& [node, kids] : children) {
        cbegin(node) = child_used_;
        for (int k : kids) cindex(child_used_++) = k;
        cend(node) = child_used_;
      }
      Kokkos::deep_copy(space, tree.child_index, cindex);
      Kokkos::deep_copy(space, tree.child_begin, cbegin);
      Kokkos::deep_copy(space, tree.child_end, cend);
    }
    // Geometry and multipoles of the shared cells from their children, deepest first.
    for (std::uint64_t c : shared) {
      by_level.emplace_back(code_level(c), top_index.at(c));
      shared_code[top_index.at(c)] = c;
    }
    std::sort(by_level.begin(), by_level.end(), std::greater<>());
    list = ScalarView<int>("kfmm::distributed::shared_nodes", by_level.size());
    list_host = Kokkos::create_mirror_view(list);
    for (std::size_t i = 0; i < by_level.size();) {
      std::size_t j = i;
      while (j < by_level.size() && by_level[j].first == by_level[i].first) ++j;
      for (std::size_t k = i; k < j; ++k) list_host(k - i) = by_level[k].second;
      Kokkos::deep_copy(space, list, list_host);
      int const level_count = static_cast<int>(j - i);
      update_inner_node_geometry(space, tree, list, level_count, centre_kind, cube, geometry);
      pass.upward_nodes(space, tree, geometry, list, level_count);
      i = j;
    }
  } catch (std::exception const& e) {
    error = e.what();
  }
  auto code_of = [&](int node) { return shared_code.at(node); };
  // Mark the shared cells; those with no particles here are not targets. The lowest rank with
  // particles in a shared cell counts its interactions in the statistics. The reduction runs
  // over `shared` (sorted codes, the same on every rank), not over by_level, whose order follows
  // this rank's node numbering; its last entry is the lowest rank that failed above (size: none).
  int const count = static_cast<int>(shared.size());
  std::vector<int> present(count + 1), counter(count + 1);
  for (int i = 0; i < count; ++i) present[i] = local_index_.count(shared[i]) ? context.rank() : context.size();
  present[count] = error.empty() ? context.size() : context.rank();
  MPI_Allreduce(present.data(), counter.data(), count + 1, MPI_INT, MPI_MIN, context.comm());
  if (counter[count] < context.size()) agree_on_error(context, error);
  for (int i = 0; i < count; ++i) list_host(i) = by_level[i].second;
  Kokkos::deep_copy(space, list, list_host);
  ScalarView<int> counted("kfmm::distributed::counted", count);
  {
    auto counted_host = Kokkos::create_mirror_view(counted);
    for (int i = 0; i < count; ++i) {
      auto const at = std::lower_bound(shared.begin(), shared.end(), code_of(by_level[i].second)) - shared.begin();
      counted_host(i) = counter[at] == context.rank() ? int(node_counted) : 0;
    }
    Kokkos::deep_copy(space, counted, counted_host);
  }
  {
    auto flags = geometry.flags;
    int const first = missing_first;
    int const last = missing_first + static_cast<int>(missing.size());
    Kokkos::parallel_for(
        "kfmm::distributed::mark_shared", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count),
        KOKKOS_LAMBDA(int i) {
          int const node = list(i);
          flags(node) |= node_shared | counted(i) | (node >= first && node < last ? int(node_remote) : 0);
        });
  }
  imported_nodes_ = 0;
  return top_index.count(1) ? top_index.at(1) : 0;
}

bool DistributedTree::import_children(ExecutionSpace const& space, Context const& context,
                                      ScalarView<int> const& sources, int count, Tree<>& tree, NodeGeometry& geometry,
                                      ExpansionPass& pass, std::string const& walk_error) {
  // Nodes are indexed with int: a rank whose imports could outgrow that, or that failed (here
  // or in its walk), says so in the Allreduce that asks whether any rank goes on (2); then every
  // rank throws the agreed error.
  std::string overflow = walk_error;
  // Unique remote nodes whose children are missing.
  std::vector<int> wanted;
  try {
    fault_injection::point("force.import_nodes");
    if (count > 0 && overflow.empty()) {
      auto const source_host = Kokkos::create_mirror_view_and_copy(
          Kokkos::HostSpace(), Kokkos::subview(sources, Kokkos::make_pair(0, count)));
      auto const flags = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), geometry.flags);
      for (int i = 0; i < count; ++i)
        if ((flags(source_host(i)) & node_unopened) && !(flags(source_host(i)) & node_leaf))
          wanted.push_back(source_host(i));
      std::sort(wanted.begin(), wanted.end());
      wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
    }
  } catch (std::exception const& e) {
    if (overflow.empty()) overflow = e.what();
  }
  std::size_t const most_nodes = std::size_t(tree.num_nodes) + 8 * wanted.size();  // at most 8 children per node
  if (overflow.empty() && most_nodes > std::size_t(std::numeric_limits<int>::max()))
    overflow = fmt::format("rank {} would import up to {} tree nodes, more than the int index limit {}; use more MPI "
                           "ranks or a larger leaf_size",
                           context.rank(), most_nodes, std::numeric_limits<int>::max());
  int const local_more = !overflow.empty() ? 2 : count > 0 ? 1 : 0;
  int more = 0;
  MPI_Allreduce(&local_more, &more, 1, MPI_INT, MPI_MAX, context.comm());
  if (more == 2) agree_on_error(context, overflow);
  if (!more) return false;
  auto const code_host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tree.code);
  std::vector<std::vector<std::uint64_t>> requests(context.size());
  std::vector<std::vector<int>> requested_nodes(context.size());
  for (int node : wanted) {
    int const owner = owner_of(splitters_, code_host(node));
    requests[owner].push_back(code_host(node));
    requested_nodes[owner].push_back(node);
  }
  int const per_record = geometry_doubles + pass.coefficients_per_node();
  // Serve: the children of each requested local node.
  auto const cbegin = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tree.child_begin);
  auto const cend = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tree.child_end);
  auto const cindex = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tree.child_index);
  std::vector<int> to_pack;
  auto serve = [&](std::uint64_t code, std::vector<std::uint64_t>&, std::vector<double>&) {
    auto const found = local_index_.find(code);
    if (found == local_index_.end()) return 0;
    int const node = found->second;
    for (int c = cbegin(node); c < cend(node); ++c) to_pack.push_back(cindex(c));
    return cend(node) - cbegin(node);
  };
  // Two steps: collect which children to send, pack them in one kernel, then answer.
  std::vector<std::size_t> incoming;
  std::vector<std::uint64_t> const asked = all_to_all(context, requests, incoming, bytes_sent_, bytes_received_);
  std::vector<std::vector<int>> answer_counts(context.size());
  std::vector<std::size_t> pack_begin(context.size() + 1, 0);
  {
    std::size_t at = 0;
    std::vector<std::uint64_t> unused_codes;
    std::vector<double> unused_doubles;
    for (int r = 0; r < context.size(); ++r) {
      for (std::size_t i = 0; i < incoming[r]; ++i)
        answer_counts[r].push_back(serve(asked[at++], unused_codes, unused_doubles));
      pack_begin[r + 1] = to_pack.size();
    }
  }
  Records const packed = pack_nodes(space, tree, geometry, pass, to_pack);
  std::vector<std::vector<std::uint64_t>> codes_out(context.size());
  std::vector<std::vector<double>> doubles_out(context.size());
  for (int r = 0; r < context.size(); ++r) {
    codes_out[r].assign(packed.codes.begin() + pack_begin[r], packed.codes.begin() + pack_begin[r + 1]);
    doubles_out[r].assign(packed.doubles.begin() + pack_begin[r] * per_record,
                          packed.doubles.begin() + pack_begin[r + 1] * per_record);
  }
  std::vector<std::size_t> ignored;
  std::vector<int> const child_counts = all_to_all(context, answer_counts, ignored, bytes_sent_, bytes_received_);
  Records received;
  received.per_record = per_record;
  received.codes = all_to_all(context, codes_out, ignored, bytes_sent_, bytes_received_);
  received.doubles = all_to_all(context, doubles_out, ignored, bytes_sent_, bytes_received_);
  // Attach the children to the requested nodes (answers come back rank by rank, in request order).
  int const first = append_nodes(space, received, node_unopened, tree, geometry, pass);
  std::size_t total_children = received.size();
  grow_preserving(tree.child_index, child_used_ + total_children);
  auto cindex_new = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tree.child_index);
  auto cbegin_new = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tree.child_begin);
  auto cend_new = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tree.child_end);
  auto flags = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), geometry.flags);
  std::size_t answer = 0;
  int child = first;
  for (int r = 0; r < context.size(); ++r) {
    for (int node : requested_nodes[r]) {
      int const k = child_counts[answer++];
      if (k == 0)
        fail("internal error: rank {} does not know node {} (code {:#x}) that rank {} needs", r, node,
             code_host(node), context.rank());
      cbegin_new(node) = child_used_;
      for (int j = 0; j < k; ++j) cindex_new(child_used_++) = child++;
      cend_new(node) = child_used_;
      flags(node) &= ~node_unopened;
    }
  }
  Kokkos::deep_copy(space, tree.child_index, cindex_new);
  Kokkos::deep_copy(space, tree.child_begin, cbegin_new);
  Kokkos::deep_copy(space, tree.child_end, cend_new);
  Kokkos::deep_copy(space, geometry.flags, flags);
  return true;
}

void DistributedTree::combine_shared_minimum(ExecutionSpace const& space, Context const& context,
                                             ScalarView<double> const& allowed) const {
  if (context.size() == 1) return;
  auto const shared = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), forced_);
  int const count = static_cast<int>(shared.extent(0));
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), allowed);
  std::vector<int> node(count, -1);
  std::vector<double> smallest(count, std::numeric_limits<double>::infinity());
  for (int i = 0; i < count; ++i) {
    auto const found = local_index_.find(shared(i));
    if (found == local_index_.end()) continue;
    node[i] = found->second;
    smallest[i] = host(node[i]);
  }
  // The shared codes are sorted and the same on every rank: one MIN over them.
  MPI_Allreduce(MPI_IN_PLACE, smallest.data(), count, MPI_DOUBLE, MPI_MIN, context.comm());
  for (int i = 0; i < count; ++i)
    if (node[i] >= 0) host(node[i]) = smallest[i];
  Kokkos::deep_copy(space, allowed, host);
  space.fence();
}

PassParticles DistributedTree::import_leaf_particles(ExecutionSpace const& space, Context const& context,
                                                     PairLists const& p2p, Tree<>& tree,
                                                     Particles<MemorySpace> const& particles) {
  int const n = static_cast<int>(particles.num);
  // A failure before the requests go out is agreed after the exchange (this rank asks for and
  // serves nothing meanwhile).
  std::string error;
  std::vector<std::vector<std::uint64_t>> requests(context.size());
  std::vector<std::vector<int>> requested(context.size());
  decltype(Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), particles.pos)) pos;
  decltype(Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), particles.mass)) mass;
  decltype(Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tree.particle_begin)) pbegin, pend;
  try {
    fault_injection::point("force.import_particles");
    std::vector<int> leaves;
    {
      auto const source = Kokkos::create_mirror_view_and_copy(
          Kokkos::HostSpace(), Kokkos::subview(p2p.source, Kokkos::make_pair(0, p2p.num_entries)));
      // Flags live in the geometry; remote leaves are the appended nodes beyond the local ones.
      for (int i = 0; i < p2p.num_entries; ++i)
        if (source(i) >= local_nodes_) leaves.push_back(source(i));
      std::sort(leaves.begin(), leaves.end());
      leaves.erase(std::unique(leaves.begin(), leaves.end()), leaves.end());
    }
    auto const code_host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tree.code);
    for (int leaf : leaves) {
      int const owner = owner_of(splitters_, code_host(leaf));
      requests[owner].push_back(code_host(leaf));
      requested[owner].push_back(leaf);
    }
    pos = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), particles.pos);
    mass = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), particles.mass);
    pbegin = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tree.particle_begin);
    pend = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tree.particle_end);
  } catch (std::exception const& e) {
    error = e.what();
    for (auto& r : requests) r.clear();
    for (auto& r : requested) r.clear();
  }
  Answers const answers = ask_owners(
      context, requests, 4,
      [&](std::uint64_t code, std::vector<std::uint64_t>& codes, std::vector<double>& doubles) {
        auto const found = local_index_.find(code);
        if (!error.empty() || found == local_index_.end()) return 0;
        int const node = found->second;
        for (int i = pbegin(node); i < pend(node); ++i) {
          codes.push_back(code);
          doubles.insert(doubles.end(), {pos(i, 0), pos(i, 1), pos(i, 2), mass(i)});
        }
        return pend(node) - pbegin(node);
      },
      bytes_sent_, bytes_received_);
  // Checked and agreed before the int indices of the near field take the imported particles.
  if (error.empty() && std::size_t(n) + answers.codes.size() > max_rank_particles)
    error = fmt::format("rank {} needs {} particles of other ranks for its near field besides its own {}, more than "
                        "the per-rank limit {} (int indices); use more MPI ranks or a smaller leaf_size",
                        context.rank(), answers.codes.size(), n, max_rank_particles);
  agree_on_error(context, error);
  int const imported = static_cast<int>(answers.codes.size());
  imported_particles_ = imported;
  grow_preserving(source_pos_, n + imported);
  grow_preserving(source_mass_, n + imported);
  Kokkos::deep_copy(space, Kokkos::subview(source_pos_, Kokkos::make_pair(0, n), Kokkos::ALL),
                    Kokkos::subview(particles.pos, Kokkos::make_pair(0, n), Kokkos::ALL));
  Kokkos::deep_copy(space, Kokkos::subview(source_mass_, Kokkos::make_pair(0, n)),
                    Kokkos::subview(particles.mass, Kokkos::make_pair(0, n)));
  auto pos_new = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), source_pos_);
  auto mass_new = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), source_mass_);
  auto pbegin_new = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tree.particle_begin);
  auto pend_new = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tree.particle_end);
  std::size_t answer = 0;
  int at = n;
  for (int r = 0; r < context.size(); ++r) {
    for (int leaf : requested[r]) {
      int const k = answers.records_per_request[answer++];
      pbegin_new(leaf) = at;
      for (int j = 0; j < k; ++j, ++at) {
        for (int d = 0; d < 3; ++d) pos_new(at, d) = answers.doubles[4 * std::size_t(at - n) + d];
        mass_new(at) = answers.doubles[4 * std::size_t(at - n) + 3];
      }
      pend_new(leaf) = at;
    }
  }
  Kokkos::deep_copy(space, source_pos_, pos_new);
  Kokkos::deep_copy(space, source_mass_, mass_new);
  Kokkos::deep_copy(space, tree.particle_begin, pbegin_new);
  Kokkos::deep_copy(space, tree.particle_end, pend_new);
  return PassParticles{source_pos_, source_mass_, n + imported, n};
}

std::uint64_t DistributedTree::owned_nodes(Tree<> const& tree, NodeGeometry const& geometry, int rank) const {
  if (local_index_.empty()) return static_cast<std::uint64_t>(tree.num_nodes);  // one rank
  auto const flags = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), geometry.flags);
  auto const code = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tree.code);
  auto const forced = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), forced_);
  std::uint64_t count = 0;
  for (int i = 0; i < local_nodes_; ++i) {
    bool const shared = std::binary_search(forced.data(), forced.data() + forced.extent(0), code(i));
    if (!shared && !(flags(i) & node_remote)) ++count;
  }
  return count + (rank == 0 ? forced.extent(0) : 0);
}

std::uint64_t DistributedTree::owned_leaves(Tree<> const& tree, NodeGeometry const& geometry) const {
  int const local = local_index_.empty() ? tree.num_nodes : local_nodes_;
  std::uint64_t count = 0;
  auto const flags = geometry.flags;
  Kokkos::parallel_reduce(
      "kfmm::distributed::count_leaves", Kokkos::RangePolicy<ExecutionSpace>(0, local),
      KOKKOS_LAMBDA(int i, std::uint64_t& sum) { sum += (flags(i) & node_leaf) && !(flags(i) & node_remote) ? 1 : 0; },
      count);
  return count;
}

void DistributedTree::fill_local_stats(ForceStats& stats) const {
  stats.bytes_sent = bytes_sent_;
  stats.bytes_received = bytes_received_;
  stats.imported_nodes = imported_nodes_;
  stats.imported_particles = imported_particles_;
}

void DistributedTree::fill_stats(Context const& context, ForceStats& stats) const {
  fill_local_stats(stats);
  MPI_Allreduce(&bytes_sent_, &stats.bytes_sent_max, 1, MPI_UINT64_T, MPI_MAX, context.comm());
  MPI_Allreduce(&bytes_received_, &stats.bytes_received_max, 1, MPI_UINT64_T, MPI_MAX, context.comm());
}

}  // namespace kfmm
