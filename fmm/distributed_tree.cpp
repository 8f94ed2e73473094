#include <kfmm/comm/decomposition.hpp>
#include <kfmm/comm/exchange_plan.hpp>
#include <kfmm/core/binary_search.hpp>
#include <kfmm/core/error.hpp>
#include <kfmm/core/fault_injection.hpp>
#include <kfmm/core/host_device_bytes.hpp>
#include <kfmm/core/packed_words.hpp>
#include <kfmm/core/view_growth.hpp>
#include <kfmm/fmm/distributed_tree.hpp>

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <unordered_map>

namespace kfmm {

using detail::NodeCodes;
using detail::NodeRows;
using detail::ParticleRows;

namespace {

constexpr int geometry_doubles = 8;  // centre[3], radius, mass, scale, flags, power radius


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

// Position of `code` among the first `n` sorted `codes` mapped through `nodes`, or −1.
template <class Codes, class Nodes>
KOKKOS_INLINE_FUNCTION int lookup_code(Codes const& codes, Nodes const& nodes, int n, std::uint64_t code) {
  int const at = lower_bound(codes, 0, n, code);
  return at < n && codes(at) == code ? static_cast<int>(nodes(at)) : -1;
}

// Whether `code` is among the sorted `codes`.
template <class Codes>
KOKKOS_INLINE_FUNCTION bool contains_code(Codes const& codes, std::uint64_t code) {
  int const n = static_cast<int>(codes.extent(0));
  int const at = lower_bound(codes, 0, n, code);
  return at < n && codes(at) == code;
}

// Rank whose key range holds the first key of the cell `code` (upper bound among the splitters).
template <class Splitters>
KOKKOS_INLINE_FUNCTION int owner_rank(Splitters const& splitters, std::uint64_t code) {
  return upper_bound(splitters, 0, static_cast<int>(splitters.extent(0)), code_first_key(code));
}

// Makes a work View hold at least `rows` rows (of `width` columns where it has two run-time
// extents), dropping its content when it grows: to twice that, as what crosses rank boundaries
// varies with the walk level and jumps from step to step when the domains move (these Views
// hold imports and requests, a small part of a rank's memory).
template <class View>
void grow_work(View& view, std::size_t rows, std::size_t width = 0) {
  constexpr bool wide = View::rank_dynamic == 2;
  if (view.extent(0) >= rows && (!wide || view.extent(1) == width)) return;
  std::string const label = view.label();
  std::size_t const grown = std::max(2 * rows + 64, view.extent(0) + view.extent(0) / 2);
  view = View();  // freed first (when nothing else holds it): the peak stays one View
  if constexpr (wide)
    view = View(Kokkos::view_alloc(Kokkos::WithoutInitializing, label), grown, width);
  else
    view = View(Kokkos::view_alloc(Kokkos::WithoutInitializing, label), grown);
}

// A small host list into the first entries of `room` (grown when short); returns those entries.
template <class T>
ScalarView<T> upload(ExecutionSpace const& space, std::vector<T> const& values, ScalarView<T>& room) {
  grow_work(room, values.size());
  ScalarView<T> const front = Kokkos::subview(room, Kokkos::make_pair(std::size_t(0), values.size()));
  Kokkos::deep_copy(space, front,
                    Kokkos::View<T const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(values.data(), values.size()));
  count_host_device_bytes(values.size() * sizeof(T));
  return front;
}

// The first `count` entries of `view` into `host`.
template <class T, class View>
void download(ExecutionSpace const& space, View const& view, std::size_t count, std::vector<T>& host) {
  host.resize(count);
  Kokkos::deep_copy(space, Kokkos::View<T*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(host.data(), count),
                    Kokkos::subview(view, Kokkos::make_pair(std::size_t(0), count)));
  count_host_device_bytes(count * sizeof(T));
  space.fence();
}

// Child lists of `nodes` (host, small: the shared cells): node nodes[k] gets the children
// children[offsets[k], offsets[k + 1]) at child_index[first_entry + offsets[k] ...).
// The three lists travel in the work Views `node_room`, `offset_room` and `child_room`.
void set_child_lists(ExecutionSpace const& space, Tree<>& tree, std::vector<int> const& nodes,
                     std::vector<int> const& offsets, std::vector<int> const& children, int first_entry,
                     ScalarView<int>& node_room, ScalarView<int>& offset_room, ScalarView<int>& child_room) {
  auto const node_view = upload(space, nodes, node_room);
  auto const offset_view = upload(space, offsets, offset_room);
  auto const child_view = upload(space, children, child_room);
  auto const cbegin = tree.child_begin;
  auto const cend = tree.child_end;
  auto const cindex = tree.child_index;
  Kokkos::parallel_for(
      "kfmm::distributed::set_child_lists", Kokkos::RangePolicy<ExecutionSpace>(space, 0, nodes.size()),
      KOKKOS_LAMBDA(std::size_t k) {
        int const node = node_view(k);
        cbegin(node) = first_entry + offset_view(k);
        cend(node) = first_entry + offset_view(k + 1);
        for (int c = offset_view(k); c < offset_view(k + 1); ++c) cindex(first_entry + c) = child_view(c);
      });
  space.fence();
}

// How many of the sorted `keys[0, n)` fall in each cell of `cells` (a range each, by binary search).
// The cells and their counts travel in the work Views `cell_room` and `count_room`.
std::vector<std::uint64_t> count_keys_in_cells(ExecutionSpace const& space, ScalarView<std::uint64_t const> const& keys,
                                               std::size_t n, std::vector<std::uint64_t> const& cells,
                                               ScalarView<std::uint64_t>& cell_room,
                                               ScalarView<std::uint64_t>& count_room) {
  std::vector<std::uint64_t> counts(cells.size());
  if (cells.empty()) return counts;
  auto const cell_view = upload(space, cells, cell_room);
  grow_work(count_room, cells.size());
  auto const count_view = count_room;
  Kokkos::parallel_for(
      "kfmm::distributed::count_cut_cells", Kokkos::RangePolicy<ExecutionSpace>(space, 0, cells.size()),
      KOKKOS_LAMBDA(std::size_t c) {
        int const level = code_level(cell_view(c));
        std::uint64_t const low = code_first_key(cell_view(c));
        std::uint64_t const span = std::uint64_t(1) << (3 * (max_tree_level - level));
        std::size_t const begin = lower_bound(keys, std::size_t(0), n, low);
        std::size_t const end = level == 0 ? n : lower_bound(keys, begin, n, low + span);
        count_view(c) = end - begin;
      });
  download(space, count_view, cells.size(), counts);
  return counts;
}

// For each request row i (its code in asked(i, 0)): the local node with that code in served(i)
// (−1 where none) and the exclusive prefix sums of end(node) − begin(node) in offsets (the
// answer rows each request gets); returns their total.
template <class Offset, class Ranges>
Offset count_answers(ExecutionSpace const& space, NodeCodes const& asked, int num_asked,
                     ScalarView<std::uint64_t> const& sorted, ScalarView<std::uint32_t> const& by_code, int local,
                     Ranges const& begin, Ranges const& end, ScalarView<int> const& served,
                     ScalarView<Offset> const& offsets) {
  Offset total = 0;
  Kokkos::parallel_scan(
      "kfmm::distributed::count_answers", Kokkos::RangePolicy<ExecutionSpace>(space, 0, num_asked + 1),
      KOKKOS_LAMBDA(int i, Offset& sum, bool final) {
        if (final) offsets(i) = sum;
        if (i == num_asked) return;
        int const node = lookup_code(sorted, by_code, local, asked(i, 0));
        if (final) served(i) = node;
        sum += node >= 0 ? Offset(end(node) - begin(node)) : Offset(0);
      },
      total);
  return total;
}

}  // namespace

// Node records in transit: code, geometry and multipole coefficients.
struct DistributedTree::Records {
  std::vector<std::uint64_t> codes;
  std::vector<double> doubles;  // per record: geometry_doubles, then the coefficient columns
  int per_record = 0;
  std::size_t size() const { return codes.size(); }
};

namespace {

// Columns of a node row (detail::NodeRows) after the geometry and the coefficients: the code's
// high and low 32 bits, then the requester's node.
constexpr int address_columns = 3;

// Columns of a node row that hold the coefficients: a float pass's travel two to a double
// (core/packed_words.hpp), at their own precision in half the bytes; a double pass's one each.
int coefficient_columns(ExpansionPass const& pass) {
  int const coefficients = pass.coefficients_per_node();
  return pass.single_precision() ? (coefficients + 1) / 2 : coefficients;
}

template <class Rows>
KOKKOS_INLINE_FUNCTION std::uint64_t row_code(Rows const& rows, int i, int address) {
  return std::uint64_t(rows(i, address)) << 32 | std::uint64_t(rows(i, address + 1));
}

}  // namespace

void DistributedTree::pack_node_rows(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry,
                                     ExpansionPass const& pass, ScalarView<int> const& list, int count,
                                     ScalarView<std::uint64_t> const& parents) {
  int const coefficients = pass.coefficients_per_node();
  bool const paired = pass.single_precision();
  int const address = geometry_doubles + coefficient_columns(pass);
  grow_work(packed_rows_, count, address + address_columns);
  if (count == 0) return;
  grow_work(coefficients_, count, coefficients);
  auto const coefficient_view = coefficients_;
  pass.get_multipoles(space, list, count, coefficient_view);
  auto const code = tree.code;
  auto const centre = geometry.centre;
  auto const radius = geometry.radius;
  auto const mass = geometry.mass;
  auto const scale = geometry.scale;
  auto const flags = geometry.flags;
  bool const powered = geometry.power_exponent > 0;
  auto const power_radius = geometry.power_radius;
  bool const addressed = parents.extent(0) > 0;
  auto const packed = packed_rows_;
  Kokkos::parallel_for(
      "kfmm::distributed::pack_nodes", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count), KOKKOS_LAMBDA(int i) {
        int const node = list(i);
        for (int k = 0; k < 3; ++k) packed(i, k) = centre(node, k);
        packed(i, 3) = radius(node);
        packed(i, 4) = mass(node);
        packed(i, 5) = scale(node);
        packed(i, 6) = double(flags(node) & node_leaf);
        packed(i, 7) = powered ? power_radius(node) : 0.0;
        if (paired)  // the doubles hold floats exactly
          for (int c = 0; 2 * c < coefficients; ++c)
            packed(i, geometry_doubles + c) =
                pack_float_pair(float(coefficient_view(i, 2 * c)),
                                2 * c + 1 < coefficients ? float(coefficient_view(i, 2 * c + 1)) : 0.0f);
        else
          for (int c = 0; c < coefficients; ++c) packed(i, geometry_doubles + c) = coefficient_view(i, c);
        packed(i, address) = double(code(node) >> 32);
        packed(i, address + 1) = double(code(node) & 0xffffffffu);
        packed(i, address + 2) = addressed ? double(parents(i)) : 0.0;
      });
}

DistributedTree::Records DistributedTree::pack_nodes(ExecutionSpace const& space, Tree<> const& tree,
                                                     NodeGeometry const& geometry, ExpansionPass const& pass,
                                                     std::vector<int> const& nodes) {
  // Host records for the top tree (a few nodes per rank); the walk's imports stay on the device.
  Records records;
  records.per_record = geometry_doubles + coefficient_columns(pass);
  int const count = static_cast<int>(nodes.size());
  if (count == 0) return records;
  pack_node_rows(space, tree, geometry, pass, upload(space, nodes, pack_list_), count, {});
  int const width = records.per_record + address_columns;
  std::vector<double> host;
  download(space, Kokkos::View<double*, MemorySpace, Kokkos::MemoryUnmanaged>(packed_rows_.data(), packed_rows_.span()),
           std::size_t(count) * width, host);
  for (int i = 0; i < count; ++i) {
    double const* row = &host[std::size_t(i) * width];
    records.codes.push_back(std::uint64_t(row[records.per_record]) << 32 | std::uint64_t(row[records.per_record + 1]));
    records.doubles.insert(records.doubles.end(), row, row + records.per_record);
  }
  return records;
}

int DistributedTree::append_nodes(ExecutionSpace const& space, Records const& records, int flags_inner, Tree<>& tree,
                                  NodeGeometry& geometry, ExpansionPass& pass) {
  int const count = static_cast<int>(records.size());
  if (count == 0) return tree.num_nodes;
  int const per = records.per_record;
  int const width = per + address_columns;
  std::vector<double> host(std::size_t(count) * width);
  for (int i = 0; i < count; ++i) {
    double* row = &host[std::size_t(i) * width];
    std::copy_n(&records.doubles[std::size_t(i) * per], per, row);
    row[per] = double(records.codes[i] >> 32);
    row[per + 1] = double(records.codes[i] & 0xffffffffu);
    row[per + 2] = 0.0;
  }
  grow_work(received_rows_, count, width);
  Kokkos::deep_copy(space, Kokkos::View<double*, MemorySpace, Kokkos::MemoryUnmanaged>(received_rows_.data(), host.size()),
                    Kokkos::View<double const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(host.data(), host.size()));
  count_host_device_bytes(host.size() * sizeof(double));
  space.fence();  // `host` goes out of scope
  return append_node_rows(space, received_rows_, count, flags_inner, tree, geometry, pass);
}

int DistributedTree::append_node_rows(ExecutionSpace const& space, NodeRows const& rows, int count, int flags_inner,
                                      Tree<>& tree, NodeGeometry& geometry, ExpansionPass& pass) {
  int const first = tree.num_nodes;
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
  int const coefficient_count = pass.coefficients_per_node();
  bool const paired = pass.single_precision();
  int const address = geometry_doubles + coefficient_columns(pass);
  grow_work(coefficients_, count, coefficient_count);
  auto const coefficients = coefficients_;
  Kokkos::parallel_for(
      "kfmm::distributed::append_nodes", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count), KOKKOS_LAMBDA(int i) {
        int const node = first + i;
        code(node) = row_code(rows, i, address);
        pbegin(node) = pend(node) = 0;
        cbegin(node) = cend(node) = 0;
        for (int k = 0; k < 3; ++k) centre(node, k) = rows(i, k);
        radius(node) = rows(i, 3);
        mass(node) = rows(i, 4);
        scale(node) = rows(i, 5);
        bool const leaf = rows(i, 6) != 0.0;
        flags(node) = node_remote | (leaf ? node_leaf : flags_inner);
        if (powered) power_radius(node) = rows(i, 7);
        for (int c = 0; c < coefficient_count; ++c)
          coefficients(i, c) = paired ? double(unpack_float(rows(i, geometry_doubles + c / 2), c % 2 == 1))
                                      : rows(i, geometry_doubles + c);
      });
  pass.set_multipoles(space, first, count, coefficients);
  tree.num_nodes = static_cast<int>(total);
  imported_nodes_ += count;
  return first;
}

void DistributedTree::index_local_nodes(ExecutionSpace const& space, Tree<> const& tree) {
  std::size_t const n = static_cast<std::size_t>(tree.num_nodes);
  local_nodes_ = tree.num_nodes;
  grow_preserving(local_codes_, n);
  grow_preserving(local_by_code_, n);
  Kokkos::deep_copy(space, Kokkos::subview(local_codes_, Kokkos::make_pair(std::size_t(0), n)),
                    Kokkos::subview(tree.code, Kokkos::make_pair(std::size_t(0), n)));
  node_sorter_.sort(space, local_codes_, local_by_code_, n);
  indexed_ = true;
}

ScalarView<int> DistributedTree::find_local_nodes(ExecutionSpace const& space,
                                                  ScalarView<std::uint64_t const> const& codes, int count) {
  grow_work(found_, std::size_t(count));
  auto const nodes = found_;
  auto const sorted = local_codes_;
  auto const by_code = local_by_code_;
  int const local = indexed_ ? local_nodes_ : 0;
  Kokkos::parallel_for(
      "kfmm::distributed::find_local_nodes", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count),
      KOKKOS_LAMBDA(int i) { nodes(i) = lookup_code(sorted, by_code, local, codes(i)); });
  return nodes;
}

std::vector<int> DistributedTree::find_local_nodes(ExecutionSpace const& space,
                                                   std::vector<std::uint64_t> const& codes) {
  auto const found = find_local_nodes(space, upload(space, codes, codes_), static_cast<int>(codes.size()));
  std::vector<int> host;
  download(space, found, codes.size(), host);
  return host;
}

ScalarView<int> DistributedTree::select_remote(ExecutionSpace const& space, ScalarView<int> const& nodes, int count,
                                               ScalarView<int> const& flags, int num_nodes, int all_of, int none_of) {
  // Mark, then collect in node order: sorted and unique without a sort.
  grow_preserving(marker_, static_cast<std::size_t>(num_nodes));
  auto const marker = marker_;
  int const local = local_nodes_;
  bool const filtered = all_of != 0 || none_of != 0;
  Kokkos::parallel_for(
      "kfmm::distributed::mark_remote", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count), KOKKOS_LAMBDA(int i) {
        int const node = nodes(i);
        if (node < local) return;
        if (filtered && ((flags(node) & all_of) != all_of || (flags(node) & none_of) != 0)) return;
        Kokkos::atomic_exchange(&marker(node), 1);
      });
  int const range = num_nodes - local;
  grow_work(remote_offsets_, std::size_t(range) + 1);
  auto const offsets = remote_offsets_;
  Kokkos::parallel_scan(
      "kfmm::distributed::count_remote", Kokkos::RangePolicy<ExecutionSpace>(space, 0, range + 1),
      KOKKOS_LAMBDA(int i, int& sum, bool final) {
        if (final) offsets(i) = sum;
        if (i < range) sum += marker(local + i);
      });
  int total = 0;
  Kokkos::deep_copy(space, total, Kokkos::subview(offsets, range));
  space.fence();
  grow_work(selected_, std::size_t(total));
  auto const selected = selected_;
  Kokkos::parallel_for(
      "kfmm::distributed::collect_remote", Kokkos::RangePolicy<ExecutionSpace>(space, 0, range), KOKKOS_LAMBDA(int i) {
        if (offsets(i + 1) == offsets(i)) return;
        selected(offsets(i)) = local + i;
        marker(local + i) = 0;
      });
  return Kokkos::subview(selected, Kokkos::make_pair(0, total));
}

NodeCodes DistributedTree::send_requests(ExecutionSpace const& space, Context const& context, Tree<> const& tree,
                                         ScalarView<int> const& wanted, ExchangePlan<MemorySpace>& plan) {
  int const count = static_cast<int>(wanted.extent(0));
  grow_work(owners_, std::size_t(count));
  grow_work(requests_, std::size_t(count));
  auto const destinations = owners_;
  auto const requests = requests_;
  auto const code = tree.code;
  auto const splitters = splitter_view_;
  Kokkos::parallel_for(
      "kfmm::distributed::address_requests", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count), KOKKOS_LAMBDA(int i) {
        int const node = wanted(i);
        destinations(i) = owner_rank(splitters, code(node));
        requests(i, 0) = code(node);
        requests(i, 1) = static_cast<std::uint64_t>(node);
      });
  space.fence();
  // One message per owner asked: its count travels with the requests.
  plan = ExchangePlan<MemorySpace>::send_once(
      context, destinations, count, requests,
      [this](std::size_t rows) {
        grow_work(asked_, rows);
        return asked_;
      },
      pending_error_);
  bytes_sent_ += plan.bytes_sent();
  bytes_received_ += plan.bytes_received();
  return asked_;
}

ScalarView<int> DistributedTree::request_sources(ExecutionSpace const& space, ExchangePlan<MemorySpace> const& plan) {
  std::vector<std::size_t> const& offsets = plan.import_offsets();
  auto const offset_view = upload(space, offsets, import_offsets_);
  int const ranks = static_cast<int>(offsets.size()) - 1;
  std::size_t const count = plan.num_import();
  grow_work(request_sources_, count);
  auto const sources = request_sources_;
  Kokkos::parallel_for(
      "kfmm::distributed::request_sources", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count),
      KOKKOS_LAMBDA(std::size_t i) {
        sources(i) = upper_bound(offset_view, 1, ranks, i) - 1;  // the last rank r with offsets(r) ≤ i
      });
  return sources;
}

int DistributedTree::link_rows(ExecutionSpace const& space, ScalarView<int> const& parent, int count, int offset,
                               ScalarView<int> const& begin, ScalarView<int> const& end, ScalarView<int> const& flags,
                               int clear_flags) {
  int linked = 0;
  Kokkos::parallel_reduce(
      "kfmm::distributed::link_rows", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count),
      KOKKOS_LAMBDA(int i, int& groups) {
        int const p = parent(i);
        if (i == 0 || parent(i - 1) != p) {
          begin(p) = offset + i;
          if (clear_flags != 0) flags(p) &= ~clear_flags;
          ++groups;
        }
        if (i + 1 == count || parent(i + 1) != p) end(p) = offset + i + 1;
      },
      linked);
  return linked;
}

void DistributedTree::decompose(ExecutionSpace const& space, Context const& context, BoundingCube const& cube,
                                int leaf_size, Particles<MemorySpace>& particles, ScalarView<std::uint64_t>& keys,
                                ScalarView<double>* carried, double keep_tolerance) {
  std::size_t const n = particles.num;
  // A failure of the local steps is agreed in choose_splitters' first collective.
  std::string local_error;
  Kokkos::View<double const*, MemorySpace> weights;
  try {
    fault_injection::point("force.decompose");
    grow_preserving(keys, n);
    grow_preserving(permutation_, n);
    compute_keys(space, cube, particles.pos, n, keys);
    // Sorting first lets cells be counted by binary search (and the sample sort pick quantiles).
    // Particles that come in the key order of the last call (the common case: compute() leaves
    // them sorted on their owners) need no permutation.
    // The sorted copies below are sized by the capacity whether or not this call needs them:
    // a later call that sorts then allocates nothing.
    if (carried != nullptr) {
      grow_preserving(*carried, particles.capacity());
      grow_preserving(carried_room_, particles.capacity());
    }
    grow_preserving(sorted_costs_, particles.capacity());
    // The particles stay where they are: the exchange below reads them through the sort's
    // permutation (rows of the sorted keys), and arranges what stays and what arrives in one pass.
    bool const moved = sorter_.sort(space, keys, permutation_, n);
    if (cost_count_ == n && n > 0 && !moved) {
      weights = costs_;
    } else if (cost_count_ == n && n > 0) {
      auto const sorted_costs = sorted_costs_;
      auto const costs = costs_;
      auto const perm = permutation_;
      Kokkos::parallel_for(
          "kfmm::distributed::permute_costs", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
          KOKKOS_LAMBDA(std::size_t i) { sorted_costs(i) = costs(perm(i)); });
      weights = Kokkos::subview(sorted_costs, Kokkos::make_pair(std::size_t(0), n));
    }
    // A permutation that scatters the rows (a first call, particles in file order) is applied
    // first, cache-blocked on CPUs; the exchange then reads the rows in order.
    if (moved && sorter_.permutes_blocked(space, permutation_, n)) {
      sorter_.permute(space, particles, permutation_);
      if (carried != nullptr) {
        auto const values = *carried;
        auto const sorted = carried_room_;
        auto const perm = permutation_;
        Kokkos::parallel_for(
            "kfmm::distributed::permute_carried", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
            KOKKOS_LAMBDA(std::size_t i) { sorted(i) = values(perm(i)); });
        std::swap(*carried, carried_room_);
      }
      detail::radix_iota(space, permutation_, n);
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
    splitters_ = choose_splitters(space, context, Kokkos::subview(const_keys, Kokkos::make_pair(std::size_t(0), sampled)),
                                  sampled, local_error.empty() ? weights : decltype(weights)(), 256, local_error);
  }
  // Kept splitters are adjusted again too: particles moved, and a cut cell that would now be a
  // leaf would make the tree differ from the one-rank tree (and the forces from its forces).
  adjust_splitters(space, context, const_keys, n, leaf_size);
  auto const destinations = destination_ranks(space, keys, n, splitters_);
  // The keys travel with the particles and arrive sorted: the local sort that follows finds
  // nothing to do.
  ExchangePlan<MemorySpace> plan(context, destinations, n);
  std::size_t const imported = plan.num_import();
  std::size_t const rows = std::max(n, imported);
  particles.reserve(rows);
  // Sized by the capacity: a later call allocates nothing.
  std::size_t const room = particles.capacity();
  if (carried != nullptr) grow_preserving(*carried, room);
  grow_appending(import_keys_, room, 0);
  grow_appending(arrangement_, room, 0);
  // The cost weights were read by the splitter choice: their View is the arrangement's scratch.
  grow_appending(sorted_costs_, room, 0);
  auto const arrange = [&] {
    // Stable: equal keys keep the import order (source rank, then order on the source).
    sorter_.sort(space, import_keys_, arrangement_, imported);
    space.fence();
    return arrangement_;
  };
  if (carried != nullptr)
    plan.exchange_arranged(permutation_, keys, import_keys_, arrange, sorted_costs_, particles.pos, particles.vel,
                           particles.mass, particles.id, *carried);
  else
    plan.exchange_arranged(permutation_, keys, import_keys_, arrange, sorted_costs_, particles.pos, particles.vel,
                           particles.mass, particles.id);
  particles.num = imported;
  std::swap(keys, import_keys_);
  // A call that moved a large share of the particles (the first, on particles in file order)
  // leaves exchange buffers of about a hundred bytes per particle, which later steps, moving a
  // few percent, never need again: released (the next exchanges allocate their own size).
  int const self = context.rank();
  std::size_t const sent = plan.num_export() - plan.export_counts()[self];
  std::size_t const received = imported - plan.import_counts()[self];
  if (4 * std::max(sent, received) > std::max(n, imported)) release_exchange_buffers();
  decomposition_partners_ = plan.counts_only();
  bytes_sent_ = plan.bytes_sent();
  bytes_received_ = plan.bytes_received();
  imported_nodes_ = imported_particles_ = 0;
  cost_count_ = 0;
  splitter_view_ = upload(space, splitters_, splitter_room_);
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
    grow_work(cumulative_, n + 1);
    auto const cumulative = cumulative_;
    Kokkos::parallel_scan(
        "kfmm::distributed::cumulative_cost", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n + 1),
        KOKKOS_LAMBDA(std::size_t i, double& sum, bool final) {
          if (final) cumulative(i) = sum;
          if (i < n) sum += weighted ? weights(i) : 1.0;
        });
    auto const bounds = upload(space, splitters_, bounds_);
    grow_work(cost_at_bounds_, std::size_t(ranks) + 1);
    auto const at = cost_at_bounds_;
    Kokkos::parallel_for(
        "kfmm::distributed::cost_at_bounds", Kokkos::RangePolicy<ExecutionSpace>(space, 0, ranks + 1),
        KOKKOS_LAMBDA(int r) {
          // The first key ≥ the splitter that starts rank r.
          std::size_t const first =
              r == ranks ? n : r == 0 ? std::size_t(0) : lower_bound(keys, std::size_t(0), n, bounds(r - 1));
          at(r) = cumulative(first);
        });
    std::vector<double> at_host;
    download(space, at, std::size_t(ranks) + 1, at_host);
    for (int r = 0; r < ranks; ++r) loads[r] = at_host[r + 1] - at_host[r];
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
  // Cells are few (depth × R); each one's local count is a range of the sorted keys.
  std::vector<std::uint64_t> const local_counts = count_keys_in_cells(space, keys, n, cells, cut_cells_, cut_counts_);
  std::vector<std::uint64_t> counts(cells.size());
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
  forced_ = upload(space, forced, forced_room_);
}

void DistributedTree::prepare_top_tree(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry,
                                       ExpansionPass const& pass) {
  fault_injection::point("force.top_tree");
  child_used_ = tree.num_nodes;
  index_local_nodes(space, tree);
  download(space, forced_, forced_.extent(0), top_shared_);

  // This rank's subtree roots: children of shared cells that are not shared, or the root.
  int const n = tree.num_nodes;
  auto const code = tree.code;
  auto const forced = forced_;
  grow_work(roots_, std::size_t(n));
  auto const roots = roots_;
  int count = 0;
  Kokkos::parallel_scan(
      "kfmm::distributed::subtree_roots", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(int i, int& sum, bool final) {
        std::uint64_t const c = code(i);
        if (contains_code(forced, c) || !(c == 1 || contains_code(forced, c >> 3))) return;
        if (final) roots(sum) = i;
        ++sum;
      },
      count);
  download(space, roots, std::size_t(count), top_roots_);
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
  std::vector<int> shared_local;  // the local node of each shared cell, −1 where none
  std::vector<int> list_host;
  try {
    fault_injection::point("force.top_tree_links");
    std::vector<int> const all_local = find_local_nodes(space, all.codes);
    shared_local = find_local_nodes(space, shared);
    // Remote subtree roots and the shared cells without local particles become new nodes.
    Records remote;
    remote.per_record = all.per_record;
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (all_local[i] >= 0) continue;
      remote.codes.push_back(all.codes[i]);
      remote.doubles.insert(remote.doubles.end(), all.doubles.begin() + i * all.per_record,
                            all.doubles.begin() + (i + 1) * all.per_record);
    }
    std::vector<std::uint64_t> top_codes = all.codes;
    int const remote_first = append_nodes(space, remote, node_unopened, tree, geometry, pass);
    for (std::size_t i = 0; i < remote.size(); ++i) top_index[remote.codes[i]] = remote_first + static_cast<int>(i);
    missing.per_record = all.per_record;
    for (std::size_t k = 0; k < shared.size(); ++k) {
      if (shared_local[k] >= 0) continue;
      missing.codes.push_back(shared[k]);
      missing.doubles.resize(missing.doubles.size() + missing.per_record, 0.0);
    }
    // Shared cells without local particles are sources only (node_remote); their data follows below.
    missing_first = append_nodes(space, missing, 0, tree, geometry, pass);
    for (std::size_t i = 0; i < missing.size(); ++i) top_index[missing.codes[i]] = missing_first + static_cast<int>(i);
    for (std::size_t k = 0; k < roots.size(); ++k) top_index[mine.codes[k]] = roots[k];  // packed in roots' order
    for (std::size_t k = 0; k < shared.size(); ++k)
      if (shared_local[k] >= 0) top_index[shared[k]] = shared_local[k];
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
    std::vector<int> parents, offsets{0}, kids;
    for (auto const& [node, list_of_kids] : children) {
      parents.push_back(node);
      kids.insert(kids.end(), list_of_kids.begin(), list_of_kids.end());
      offsets.push_back(static_cast<int>(kids.size()));
    }
    grow_preserving(tree.child_index, child_used_ + kids.size());
    set_child_lists(space, tree, parents, offsets, kids, child_used_, child_parents_, child_offsets_, children_);
    child_used_ += static_cast<int>(kids.size());
    // Geometry and multipoles of the shared cells from their children, deepest first.
    for (std::uint64_t c : shared) {
      by_level.emplace_back(code_level(c), top_index.at(c));
      shared_code[top_index.at(c)] = c;
    }
    std::sort(by_level.begin(), by_level.end(), std::greater<>());
    for (std::size_t i = 0; i < by_level.size();) {
      std::size_t j = i;
      while (j < by_level.size() && by_level[j].first == by_level[i].first) ++j;
      list_host.clear();
      for (std::size_t k = i; k < j; ++k) list_host.push_back(by_level[k].second);
      auto const list = upload(space, list_host, shared_nodes_);
      space.fence();  // this level's kernels read the list before the next level's replaces it
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
  for (int i = 0; i < count; ++i)
    present[i] = std::size_t(i) < shared_local.size() && shared_local[i] >= 0 ? context.rank() : context.size();
  present[count] = error.empty() ? context.size() : context.rank();
  MPI_Allreduce(present.data(), counter.data(), count + 1, MPI_INT, MPI_MIN, context.comm());
  if (counter[count] < context.size()) agree_on_error(context, error);
  list_host.resize(count);
  std::vector<int> counted_host(count);
  for (int i = 0; i < count; ++i) {
    list_host[i] = by_level[i].second;
    auto const at = std::lower_bound(shared.begin(), shared.end(), code_of(by_level[i].second)) - shared.begin();
    counted_host[i] = counter[at] == context.rank() ? int(node_counted) : 0;
  }
  auto const list = upload(space, list_host, shared_nodes_);
  auto const counted = upload(space, counted_host, counted_);
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
  linked_count_ = 0;  // a new top tree: no remote leaf has particles
  return top_index.count(1) ? top_index.at(1) : 0;
}

bool DistributedTree::import_children(ExecutionSpace const& space, Context const& context,
                                      ScalarView<int> const& sources, int count, Tree<>& tree, NodeGeometry& geometry,
                                      ExpansionPass& pass, std::string const& walk_error) {
  // Nodes are indexed with int: a rank whose imports could outgrow that, or that failed (here,
  // in its walk, or in the previous level's exchange), says so in the Allreduce that asks
  // whether any rank goes on (2); then every rank throws the agreed error.
  std::string overflow = walk_error.empty() ? pending_error_ : walk_error;
  pending_error_.clear();
  // Unique remote nodes whose children are missing, in node order.
  ScalarView<int> wanted;
  try {
    fault_injection::point("force.import_nodes");
    if (count > 0 && overflow.empty())
      wanted = select_remote(space, sources, count, geometry.flags, tree.num_nodes, node_unopened, node_leaf);
  } catch (std::exception const& e) {
    if (overflow.empty()) overflow = e.what();
    wanted = ScalarView<int>();
  }
  int const num_wanted = static_cast<int>(wanted.extent(0));
  std::size_t const most_nodes = std::size_t(tree.num_nodes) + 8 * std::size_t(num_wanted);  // ≤ 8 children each
  if (overflow.empty() && most_nodes > std::size_t(std::numeric_limits<int>::max()))
    overflow = fmt::format("rank {} would import up to {} tree nodes, more than the int index limit {}; use more MPI "
                           "ranks or a larger leaf_size",
                           context.rank(), most_nodes, std::numeric_limits<int>::max());
  int const local_more = !overflow.empty() ? 2 : count > 0 ? 1 : 0;
  int more = 0;
  MPI_Allreduce(&local_more, &more, 1, MPI_INT, MPI_MAX, context.comm());
  if (more == 2) agree_on_error(context, overflow);
  if (!more) return false;

  // Requests to the owners (code, requesting node), answered with the children's rows; both
  // directions are plans on device Views, sparse: partners only.
  ExchangePlan<MemorySpace> ask;
  NodeCodes const asked = send_requests(space, context, tree, wanted, ask);
  int const num_asked = static_cast<int>(ask.num_import());
  auto const requester = request_sources(space, ask);
  auto const sorted = local_codes_;
  auto const by_code = local_by_code_;
  int const local = local_nodes_;
  auto const cbegin = tree.child_begin;
  auto const cend = tree.child_end;
  auto const cindex = tree.child_index;
  grow_work(served_, std::size_t(num_asked));
  grow_work(child_answer_offsets_, std::size_t(num_asked) + 1);
  auto const served = served_;
  auto const offsets = child_answer_offsets_;
  int const total = count_answers(space, asked, num_asked, sorted, by_code, local, cbegin, cend, served, offsets);
  grow_work(to_pack_, std::size_t(total));
  grow_work(answer_ranks_, std::size_t(total));
  grow_work(requesters_, std::size_t(total));
  auto const to_pack = to_pack_;
  auto const destinations = answer_ranks_;
  auto const parents = requesters_;
  Kokkos::parallel_for(
      "kfmm::distributed::list_children", Kokkos::RangePolicy<ExecutionSpace>(space, 0, num_asked),
      KOKKOS_LAMBDA(int i) {
        int const node = served(i);
        if (node < 0) return;
        for (int c = cbegin(node), at = offsets(i); c < cend(node); ++c, ++at) {
          to_pack(at) = cindex(c);
          destinations(at) = requester(i);
          parents(at) = asked(i, 1);
        }
      });
  // One message per partner: the code and the requester's node ride in the rows' last columns.
  pack_node_rows(space, tree, geometry, pass, to_pack, total, parents);
  int const address = static_cast<int>(packed_rows_.extent(1)) - address_columns;
  space.fence();
  // The answers go to exactly the ranks that asked: no consensus, and one message (possibly
  // empty) to each, its count travelling with the rows.
  std::size_t const columns = packed_rows_.extent(1);
  auto const answer = ExchangePlan<MemorySpace>::reply_once(
      context, ask, destinations, total, packed_rows_,
      [this, columns](std::size_t rows) {
        grow_work(received_rows_, rows, columns);
        return received_rows_;
      },
      pending_error_);
  bytes_sent_ += answer.bytes_sent();
  bytes_received_ += answer.bytes_received();

  // Attach the children to the requested nodes: the answers to one request arrive together.
  int const received = static_cast<int>(answer.num_import());
  auto const received_rows = received_rows_;
  int const first = append_node_rows(space, received_rows, received, node_unopened, tree, geometry, pass);
  grow_preserving(tree.child_index, std::size_t(child_used_) + received);
  auto const child_index = tree.child_index;
  int const base = child_used_;
  grow_work(parent_, std::size_t(received));
  auto const parent = parent_;
  Kokkos::parallel_for(
      "kfmm::distributed::child_entries", Kokkos::RangePolicy<ExecutionSpace>(space, 0, received), KOKKOS_LAMBDA(int i) {
        child_index(base + i) = first + i;
        parent(i) = static_cast<int>(received_rows(i, address + 2));
      });
  int const linked = link_rows(space, parent, received, base, tree.child_begin, tree.child_end, geometry.flags,
                               node_unopened);
  child_used_ += received;
  if (linked != num_wanted && pending_error_.empty())
    pending_error_ = fmt::format("internal error: rank {} asked other ranks for the children of {} tree nodes and got "
                                 "them for {}",
                                 context.rank(), num_wanted, linked);
  return true;
}

void DistributedTree::combine_shared_minimum(ExecutionSpace const& space, Context const& context,
                                             ScalarView<double> const& allowed, std::string const& local_error) {
  if (context.size() == 1) {
    if (!local_error.empty()) fail("{}", local_error);
    return;
  }
  int const count = static_cast<int>(forced_.extent(0));
  double const none = std::numeric_limits<double>::infinity();
  // One more entry after the shared cells' minima: −1 where this rank failed before.
  std::vector<double> host(count + 1, none);
  host[count] = local_error.empty() ? 0.0 : -1.0;
  ScalarView<int> node;
  ScalarView<double> smallest;
  if (local_error.empty()) {
    node = find_local_nodes(space, forced_, count);
    grow_work(smallest_, std::size_t(count));
    smallest = Kokkos::subview(smallest_, Kokkos::make_pair(0, count));
    Kokkos::parallel_for(
        "kfmm::distributed::shared_allowance", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count),
        KOKKOS_LAMBDA(int i) { smallest(i) = node(i) >= 0 ? allowed(node(i)) : none; });
    Kokkos::deep_copy(space, Kokkos::View<double*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(host.data(), count),
                      smallest);
  }
  // The shared codes are sorted and the same on every rank: one MIN over them.
  MPI_Allreduce(MPI_IN_PLACE, host.data(), count + 1, MPI_DOUBLE, MPI_MIN, context.comm());
  if (host[count] < 0) agree_on_error(context, local_error);
  Kokkos::deep_copy(space, smallest, Kokkos::View<double const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(host.data(), count));
  count_host_device_bytes(2 * view_bytes(smallest));
  Kokkos::parallel_for(
      "kfmm::distributed::shared_allowance_back", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count),
      KOKKOS_LAMBDA(int i) {
        if (node(i) >= 0) allowed(node(i)) = smallest(i);
      });
  space.fence();
}

PassParticles DistributedTree::import_leaf_particles(ExecutionSpace const& space, Context const& context,
                                                     PairLists const& p2p, Tree<>& tree,
                                                     Particles<MemorySpace> const& particles, bool float_masses) {
  int const n = static_cast<int>(particles.num);
  // A failure before the requests go out is agreed after the exchange (this rank asks for
  // nothing meanwhile, and answers what it can).
  std::string error = pending_error_;
  pending_error_.clear();
  ScalarView<int> wanted;
  try {
    // The leaves of an earlier import (the estimating walk's) would otherwise keep rows that
    // this import overwrites, and the near field's packing reads every leaf's rows.
    if (linked_count_ > 0) {
      auto const linked = linked_leaves_;
      auto const begin = tree.particle_begin;
      auto const end = tree.particle_end;
      Kokkos::parallel_for(
          "kfmm::distributed::unlink_leaves", Kokkos::RangePolicy<ExecutionSpace>(space, 0, linked_count_),
          KOKKOS_LAMBDA(int i) { begin(linked(i)) = end(linked(i)) = 0; });
      linked_count_ = 0;
    }
    fault_injection::point("force.import_particles");
    if (error.empty()) wanted = select_remote(space, p2p.source, p2p.num_entries, ScalarView<int>(), tree.num_nodes, 0, 0);
  } catch (std::exception const& e) {
    error = e.what();
    wanted = ScalarView<int>();
  }
  int const num_wanted = static_cast<int>(wanted.extent(0));
  ExchangePlan<MemorySpace> ask;
  NodeCodes const asked = send_requests(space, context, tree, wanted, ask);
  if (error.empty()) error = pending_error_;
  pending_error_.clear();
  // Serve: (requesting leaf, x, y, z, m) for each particle of each requested local leaf, or
  // (requesting leaf and float mass in one double, x, y, z).
  int const num_asked = static_cast<int>(ask.num_import());
  auto const requester = request_sources(space, ask);
  auto const sorted = local_codes_;
  auto const by_code = local_by_code_;
  int const local = local_nodes_;
  auto const pbegin = tree.particle_begin;
  auto const pend = tree.particle_end;
  auto const pos = particles.pos;
  auto const mass = particles.mass;
  grow_work(served_, std::size_t(num_asked));
  grow_work(particle_answer_offsets_, std::size_t(num_asked) + 1);
  auto const served = served_;
  auto const offsets = particle_answer_offsets_;
  std::size_t const total =
      count_answers(space, asked, num_asked, sorted, by_code, local, pbegin, pend, served, offsets);
  int const width = float_masses ? 4 : 5;
  grow_work(leaf_rows_, total, width);
  grow_work(answer_ranks_, total);
  auto const rows = leaf_rows_;
  auto const destinations = answer_ranks_;
  Kokkos::parallel_for(
      "kfmm::distributed::pack_leaf_particles", Kokkos::RangePolicy<ExecutionSpace>(space, 0, num_asked),
      KOKKOS_LAMBDA(int i) {
        int const node = served(i);
        if (node < 0) return;
        std::size_t at = offsets(i);
        for (int p = pbegin(node); p < pend(node); ++p, ++at) {
          if (float_masses)
            rows(at, 0) = pack_words(std::uint32_t(asked(i, 1)), bit_copy<std::uint32_t>(float(mass(p))));
          else
            rows(at, 0) = double(asked(i, 1));
          for (int d = 0; d < 3; ++d) rows(at, 1 + d) = pos(p, d);
          if (!float_masses) rows(at, 4) = mass(p);
          destinations(at) = requester(i);
        }
      });
  space.fence();
  auto const answer = ExchangePlan<MemorySpace>::reply_once(
      context, ask, destinations, total, rows,
      [this, width](std::size_t count) {
        grow_work(received_leaf_rows_, count, width);
        return received_leaf_rows_;
      },
      error);
  auto const received_rows = received_leaf_rows_;
  bytes_sent_ += answer.bytes_sent();
  bytes_received_ += answer.bytes_received();
  std::size_t const received = answer.num_import();
  // Checked and agreed before the int indices of the near field take the imported particles.
  try {
    if (error.empty() && std::size_t(n) + received > max_rank_particles)
      error = fmt::format("rank {} needs {} particles of other ranks for its near field besides its own {}, more than "
                          "the per-rank limit {} (int indices); use more MPI ranks or a smaller leaf_size",
                          context.rank(), received, n, max_rank_particles);
    if (error.empty()) {
      int const imported = static_cast<int>(received);
      grow_preserving(source_pos_, std::size_t(n) + imported);
      grow_preserving(source_mass_, std::size_t(n) + imported);
      Kokkos::deep_copy(space, Kokkos::subview(source_pos_, Kokkos::make_pair(0, n), Kokkos::ALL),
                        Kokkos::subview(particles.pos, Kokkos::make_pair(0, n), Kokkos::ALL));
      Kokkos::deep_copy(space, Kokkos::subview(source_mass_, Kokkos::make_pair(0, n)),
                        Kokkos::subview(particles.mass, Kokkos::make_pair(0, n)));
      auto const source_pos = source_pos_;
      auto const source_mass = source_mass_;
      grow_work(parent_, std::size_t(imported));
      auto const parent = parent_;
      Kokkos::parallel_for(
          "kfmm::distributed::unpack_leaf_particles", Kokkos::RangePolicy<ExecutionSpace>(space, 0, imported),
          KOKKOS_LAMBDA(int i) {
            double const first = received_rows(i, 0);
            parent(i) = float_masses ? static_cast<int>(unpack_word(first, false)) : static_cast<int>(first);
            for (int d = 0; d < 3; ++d) source_pos(n + i, d) = received_rows(i, 1 + d);
            source_mass(n + i) =
                float_masses ? double(bit_copy<float>(unpack_word(first, true))) : received_rows(i, 4);
          });
      int const linked =
          link_rows(space, parent, imported, n, tree.particle_begin, tree.particle_end, ScalarView<int>(), 0);
      if (linked != num_wanted)
        error = fmt::format("internal error: rank {} asked other ranks for the particles of {} leaves and got them "
                            "for {}",
                            context.rank(), num_wanted, linked);
      grow_preserving(linked_leaves_, std::size_t(num_wanted));
      if (num_wanted > 0)
        Kokkos::deep_copy(space, Kokkos::subview(linked_leaves_, Kokkos::make_pair(0, num_wanted)),
                          Kokkos::subview(wanted, Kokkos::make_pair(0, num_wanted)));
      linked_count_ = num_wanted;
      imported_particles_ = received;
    }
  } catch (std::exception const& e) {
    if (error.empty()) error = e.what();
  }
  agree_on_error(context, error);
  return PassParticles{source_pos_, source_mass_, n + static_cast<int>(received), n};
}

std::uint64_t DistributedTree::owned_nodes(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry,
                                           int rank) const {
  if (!indexed_) return static_cast<std::uint64_t>(tree.num_nodes);  // one rank
  auto const flags = geometry.flags;
  auto const code = tree.code;
  auto const forced = forced_;
  std::uint64_t count = 0;
  Kokkos::parallel_reduce(
      "kfmm::distributed::count_owned_nodes", Kokkos::RangePolicy<ExecutionSpace>(space, 0, local_nodes_),
      KOKKOS_LAMBDA(int i, std::uint64_t& sum) {
        sum += !contains_code(forced, code(i)) && !(flags(i) & node_remote) ? 1 : 0;
      },
      count);
  return count + (rank == 0 ? forced_.extent(0) : 0);
}

std::uint64_t DistributedTree::owned_leaves(ExecutionSpace const& space, Tree<> const& tree,
                                            NodeGeometry const& geometry) const {
  int const local = indexed_ ? local_nodes_ : tree.num_nodes;
  std::uint64_t count = 0;
  auto const flags = geometry.flags;
  Kokkos::parallel_reduce(
      "kfmm::distributed::count_leaves", Kokkos::RangePolicy<ExecutionSpace>(space, 0, local),
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
