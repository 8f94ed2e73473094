#include <kfmm/comm/decomposition.hpp>
#include <kfmm/comm/exchange_plan.hpp>
#include <kfmm/core/error.hpp>
#include <kfmm/core/hilbert.hpp>
#include <kfmm/neighbors/ghost_import.hpp>
#include <kfmm/neighbors/knn.hpp>
#include <kfmm/neighbors/point_tree.hpp>

#include <cfloat>
#include <cmath>
#include <limits>
#include <string>

namespace kfmm {

namespace detail {

/// Candidate lists of the queries (in sorted query order): squared distances, ids, how many.
struct KNNLists {
  Kokkos::View<double**, Kokkos::LayoutRight, MemorySpace> d2;
  Kokkos::View<std::uint64_t**, Kokkos::LayoutRight, MemorySpace> id;
  Kokkos::View<double**, Kokkos::LayoutRight, MemorySpace> mass;  ///< (nq, k), or empty: not carried
  ScalarView<int> count;
};

/// What a walk searches: a tree over particles and their ids in the tree's sorted order.
struct KNNSource {
  PointTree tree;
  ScalarView<std::uint64_t> id;
  ScalarView<double> mass;  ///< in sorted order, when the lists carry masses
};

struct KNNGeometry {
  bool periodic = false;
  Kokkos::Array<double, 3> length{0, 0, 0};
};

inline constexpr int knn_stack_size = 192;  // ≥ 7 pending children per level × 22 levels + 1
inline constexpr int knn_chunk = 16;        // source points whose distances a query computes at once

/// Gap between the intervals [a, b] and [c, d] along an axis, minimum image when `length` > 0.
KOKKOS_INLINE_FUNCTION double intervals_gap(double a, double b, double c, double d, double length) {
  double g = c > b ? c - b : a > d ? a - d : 0;
  if (length > 0 && g > 0) {
    double const up = c > b + length ? c - b - length : a + length > d ? a + length - d : 0;
    double const down = c > b - length ? c - b + length : a - length > d ? a - length - d : 0;
    g = up < g ? up : g;
    g = down < g ? down : g;
  }
  return g;
}

/// Leaf nodes of a tree, in node order.
ScalarView<int> leaf_nodes(ExecutionSpace const& space, Tree<> const& tree) {
  int const nodes = tree.num_nodes;
  ScalarView<std::size_t> slot("kfmm::neighbors::leaf_slots", nodes + 1);
  Kokkos::parallel_for(
      "kfmm::neighbors::mark_leaves", Kokkos::RangePolicy<ExecutionSpace>(space, 0, nodes),
      KOKKOS_LAMBDA(int node) { slot(node) = tree.child_begin(node) == tree.child_end(node) ? 1 : 0; });
  std::size_t const leaves = exclusive_scan_in_place(space, slot, nodes + 1);
  ScalarView<int> result(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::neighbors::leaves"), leaves);
  Kokkos::parallel_for(
      "kfmm::neighbors::list_leaves", Kokkos::RangePolicy<ExecutionSpace>(space, 0, nodes), KOKKOS_LAMBDA(int node) {
        if (tree.child_begin(node) == tree.child_end(node)) result(slot(node)) = node;
      });
  space.fence();
  return result;
}

/// \brief Leaf by leaf: the queries of one leaf of `query_tree` (a team; its threads take
/// queries) walk `source` together, nearest node to the leaf's box first, pruning nodes
/// farther than the largest k-th candidate distance of the leaf's queries; at a source leaf
/// each query scans it unless its own k-th candidate is nearer than the leaf box. Equal
/// distances are not pruned: a smaller id may win. Lists live in `lists` (global memory), so
/// `resume` continues from them; `skip_same_index` leaves out source point i for query i
/// (self-query on one tree).
template <int K>
void knn_walk(ExecutionSpace const& space, KNNSource const& source, PointTree const& query_tree,
              ScalarView<int> const& query_leaves, int k, bool skip_same_index, KNNGeometry const& geometry,
              KNNLists const& lists, bool resume) {
  using Policy = Kokkos::TeamPolicy<ExecutionSpace>;
  using Member = Policy::member_type;
  auto const tree = source.tree.tree;
  auto const pos = source.tree.pos, lo = source.tree.lo, hi = source.tree.hi;
  auto const ids = source.id;
  int const n = source.tree.n;
  auto const qtree = query_tree.tree;
  auto const qpos = query_tree.pos, qlo = query_tree.lo, qhi = query_tree.hi;
  auto const d2_list = lists.d2;
  auto const id_list = lists.id;
  auto const mass_list = lists.mass;
  auto const masses = source.mass;
  bool const carry_mass = lists.mass.extent(0) > 0;
  auto const count_list = lists.count;
  bool const periodic = geometry.periodic;
  auto const length = geometry.length;
  int const leaves = static_cast<int>(query_leaves.extent(0));
  if (!resume) {
    Kokkos::deep_copy(space, count_list, 0);
  }
  if (n == 0 || leaves == 0) return;
  Kokkos::parallel_for(
      "kfmm::neighbors::knn_walk", Policy(space, leaves, Kokkos::AUTO), KOKKOS_LAMBDA(Member const& team) {
        int const group = query_leaves(team.league_rank());
        int const qb = qtree.particle_begin(group), qe = qtree.particle_end(group);
        double const glo[3] = {qlo(group, 0), qlo(group, 1), qlo(group, 2)};
        double const ghi[3] = {qhi(group, 0), qhi(group, 1), qhi(group, 2)};
        auto const group_gap2 = [&](int node) {
          double g2 = 0;
          for (int a = 0; a < 3; ++a) {
            double const g = intervals_gap(glo[a], ghi[a], lo(node, a), hi(node, a), periodic ? length[a] : 0.0);
            g2 += g * g;
          }
          return g2;
        };
        // Every thread of the team runs the same walk (same decisions); queries are split at leaves.
        double bound = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, qb, qe),
            [&](int q, double& m) {
              double const b = count_list(q) < k ? DBL_MAX : d2_list(q, k - 1);
              m = b > m ? b : m;
            },
            Kokkos::Max<double>(bound));
        // Box gaps and point distances round differently (contractions, summation order), so a
        // box is pruned only when its gap exceeds the bound by more than that rounding.
        double const slack = 1 + 1e-12;
        int stack_node[knn_stack_size];
        double stack_gap[knn_stack_size];
        stack_node[0] = 0;
        stack_gap[0] = group_gap2(0);
        int top = 1;
        while (top > 0) {
          --top;
          int const node = stack_node[top];
          if (stack_gap[top] > bound * slack) continue;
          int const cb = tree.child_begin(node), ce = tree.child_end(node);
          if (cb == ce) {
            double const nlo[3] = {lo(node, 0), lo(node, 1), lo(node, 2)};
            double const nhi[3] = {hi(node, 0), hi(node, 1), hi(node, 2)};
            int const pb = tree.particle_begin(node), pe = tree.particle_end(node);
            double new_bound = 0;
            Kokkos::parallel_reduce(
                Kokkos::TeamThreadRange(team, qb, qe),
                [&](int q, double& m) {
                  double const x[3] = {qpos(q, 0), qpos(q, 1), qpos(q, 2)};
                  int count = count_list(q);
                  double worst = count < k ? DBL_MAX : d2_list(q, k - 1);
                  double g2 = 0;
                  for (int a = 0; a < 3; ++a) {
                    double const g = interval_gap(x[a], nlo[a], nhi[a], periodic ? length[a] : 0.0);
                    g2 += g * g;
                  }
                  if (g2 <= worst * slack) {
                    // The list in local arrays while the leaf is scanned (no aliasing with the
                    // source Views, so the compiler keeps it close).
                    double best_d2[K];
                    std::uint64_t best_id[K];
                    double best_mass[K];
                    for (int j = 0; j < count; ++j) {
                      best_d2[j] = d2_list(q, j);
                      best_id[j] = id_list(q, j);
                      if (carry_mass) best_mass[j] = mass_list(q, j);
                    }
                    for (int c0 = pb; c0 < pe; c0 += knn_chunk) {
                    // Distances of a chunk first (a loop that vectorises), then the few insertions.
                    int const c1 = pe - c0 < knn_chunk ? pe : c0 + knn_chunk;
                    double chunk[knn_chunk];
                    for (int i = c0; i < c1; ++i) {
                      double d2 = 0;
                      for (int a = 0; a < 3; ++a) {
                        double const dx = x[a] - pos(i, a);
                        double const g = periodic ? minimum_image_gap(dx, length[a]) : dx;
                        d2 += g * g;
                      }
                      chunk[i - c0] = d2;
                    }
                    for (int i = c0; i < c1; ++i) {
                      double const d2 = chunk[i - c0];
                      if (d2 > worst || (skip_same_index && i == q)) continue;
                      std::uint64_t const id = ids(i);
                      if (count == k && d2 == worst && id >= best_id[k - 1]) continue;
                      int j = count < k ? count : k - 1;
                      while (j > 0 && (best_d2[j - 1] > d2 || (best_d2[j - 1] == d2 && best_id[j - 1] > id))) {
                        best_d2[j] = best_d2[j - 1];
                        best_id[j] = best_id[j - 1];
                        if (carry_mass) best_mass[j] = best_mass[j - 1];
                        --j;
                      }
                      best_d2[j] = d2;
                      best_id[j] = id;
                      if (carry_mass) best_mass[j] = masses(i);
                      if (count < k) ++count;
                      if (count == k) worst = best_d2[k - 1];
                    }
                    }
                    for (int j = 0; j < count; ++j) {
                      d2_list(q, j) = best_d2[j];
                      id_list(q, j) = best_id[j];
                      if (carry_mass) mass_list(q, j) = best_mass[j];
                    }
                    count_list(q) = count;
                  }
                  m = worst > m ? worst : m;
                },
                Kokkos::Max<double>(new_bound));
            bound = new_bound;
          } else {
            // Children within the bound, pushed farthest first so that the nearest pops first.
            int child[8];
            double gap[8];
            int m = 0;
            for (int c = cb; c < ce && m < 8; ++c) {
              int const node_c = tree.child_index(c);
              double const g = group_gap2(node_c);
              if (g > bound * slack) continue;
              int j = m++;
              while (j > 0 && gap[j - 1] < g) {
                gap[j] = gap[j - 1];
                child[j] = child[j - 1];
                --j;
              }
              gap[j] = g;
              child[j] = node_c;
            }
            for (int j = 0; j < m && top < knn_stack_size; ++j) {
              stack_node[top] = child[j];
              stack_gap[top] = gap[j];
              ++top;
            }
          }
        }
      });
  space.fence();
}

/// knn_walk with the smallest list capacity K of 8, 16, 32, 64, 128 that holds k.
void knn_walk_any(ExecutionSpace const& space, KNNSource const& source, PointTree const& query_tree,
                  ScalarView<int> const& query_leaves, int k, bool skip_same_index, KNNGeometry const& geometry,
                  KNNLists const& lists, bool resume) {
  if (k <= 8) return knn_walk<8>(space, source, query_tree, query_leaves, k, skip_same_index, geometry, lists, resume);
  if (k <= 16) return knn_walk<16>(space, source, query_tree, query_leaves, k, skip_same_index, geometry, lists, resume);
  if (k <= 32) return knn_walk<32>(space, source, query_tree, query_leaves, k, skip_same_index, geometry, lists, resume);
  if (k <= 64) return knn_walk<64>(space, source, query_tree, query_leaves, k, skip_same_index, geometry, lists, resume);
  knn_walk<max_knn_k>(space, source, query_tree, query_leaves, k, skip_same_index, geometry, lists, resume);
}

/// Values of the tree's points (ids, masses) in its sorted order.
template <class T>
ScalarView<T> sorted_values(ExecutionSpace const& space, PointTree const& tree, ScalarView<T> const& values) {
  ScalarView<T> sorted(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::neighbors::sorted_values"), tree.n);
  auto const order = tree.order;
  Kokkos::parallel_for(
      "kfmm::neighbors::sorted_values", Kokkos::RangePolicy<ExecutionSpace>(space, 0, tree.n),
      KOKKOS_LAMBDA(int i) { sorted(i) = values(order(i)); });
  return sorted;
}

/// Bounds of `n` positions and the index of the first non-finite one (n when none).
std::size_t scan_positions(ExecutionSpace const& space, Vec3View<double> const& pos, std::size_t n, double lo[3],
                           double hi[3]) {
  std::size_t first = n;
  Kokkos::parallel_reduce(
      "kfmm::neighbors::check_finite", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t i, std::size_t & f) {
        bool const ok = compat::math::isfinite(pos(i, 0)) && compat::math::isfinite(pos(i, 1)) &&
                        compat::math::isfinite(pos(i, 2));
        if (!ok && i < f) f = i;
      },
      Kokkos::Min<std::size_t>(first));
  compute_bounds(space, pos, n, lo, hi);
  return first;
}

/// A copy of the valid particles in one pass (Particles::assign goes through contiguous
/// staging buffers, which only copies between memory spaces need).
Particles<MemorySpace> copy_particles(ExecutionSpace const& space, Particles<MemorySpace> const& from) {
  Particles<MemorySpace> to(from.num);
  to.num = from.num;
  auto const pos = to.pos, vel = to.vel;
  auto const mass = to.mass;
  auto const id = to.id;
  auto const fpos = from.pos, fvel = from.vel;
  auto const fmass = from.mass;
  auto const fid = from.id;
  Kokkos::parallel_for(
      "kfmm::neighbors::copy_particles", Kokkos::RangePolicy<ExecutionSpace>(space, 0, from.num),
      KOKKOS_LAMBDA(std::size_t i) {
        for (int a = 0; a < 3; ++a) {
          pos(i, a) = fpos(i, a);
          vel(i, a) = fvel(i, a);
        }
        mass(i) = fmass(i);
        id(i) = fid(i);
      });
  return to;
}

/// Positions wrapped into the periodic box, in place (on copies: the caller's stay as they are).
void wrap_positions(ExecutionSpace const& space, Vec3View<double> const& pos, std::size_t n, KNNGeometry const& g) {
  if (!g.periodic) return;
  auto const length = g.length;
  Kokkos::parallel_for(
      "kfmm::neighbors::wrap", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n), KOKKOS_LAMBDA(std::size_t i) {
        for (int a = 0; a < 3; ++a) pos(i, a) = wrap_coordinate(pos(i, a), length[a]);
      });
}

/// A copy of the first `n` positions wrapped into the periodic box.
Vec3View<double> wrapped_copy(ExecutionSpace const& space, Vec3View<double> const& from, std::size_t n,
                              KNNGeometry const& g) {
  Vec3View<double> to(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::knn::wrapped"), n);
  Kokkos::parallel_for(
      "kfmm::neighbors::copy_positions", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n), KOKKOS_LAMBDA(std::size_t i) {
        for (int a = 0; a < 3; ++a) to(i, a) = from(i, a);
      });
  wrap_positions(space, to, n, g);
  return to;
}

/// One query box per leaf of the query tree: the leaf's box and the largest k-th distance of
/// its queries (infinite when one has fewer than k), widened by a round-off margin.
Kokkos::View<QueryBox*, MemorySpace> leaf_query_boxes(ExecutionSpace const& space, PointTree const& queries,
                                                      KNNLists const& lists, int k, double margin) {
  int const nodes = queries.tree.num_nodes;
  ScalarView<std::size_t> slot("kfmm::neighbors::leaf_slots", nodes + 1);
  auto const tree = queries.tree;
  Kokkos::parallel_for(
      "kfmm::neighbors::mark_leaves", Kokkos::RangePolicy<ExecutionSpace>(space, 0, nodes),
      KOKKOS_LAMBDA(int node) { slot(node) = tree.child_begin(node) == tree.child_end(node) ? 1 : 0; });
  std::size_t const leaves = exclusive_scan_in_place(space, slot, nodes + 1);
  Kokkos::View<QueryBox*, MemorySpace> boxes(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::neighbors::leaf_boxes"),
                                             leaves);
  auto const lo = queries.lo, hi = queries.hi;
  auto const d2 = lists.d2;
  auto const count = lists.count;
  double const infinite = std::numeric_limits<double>::infinity();
  Kokkos::parallel_for(
      "kfmm::neighbors::leaf_boxes", Kokkos::RangePolicy<ExecutionSpace>(space, 0, nodes), KOKKOS_LAMBDA(int node) {
        if (tree.child_begin(node) != tree.child_end(node)) return;
        double largest = 0;
        for (int q = tree.particle_begin(node); q < tree.particle_end(node); ++q) {
          double const r2 = count(q) < k ? infinite : d2(q, k - 1);
          largest = r2 > largest ? r2 : largest;
        }
        QueryBox b;
        for (int a = 0; a < 3; ++a) {
          b.lo[a] = lo(node, a);
          b.hi[a] = hi(node, a);
        }
        b.radius = largest < infinite ? compat::math::sqrt(largest) * (1 + 1e-12) + margin : infinite;
        boxes(slot(node)) = b;
      });
  space.fence();
  return boxes;
}

/// The lists in the caller's query order (local rows `order`), distances rather than squares.
KNNResult unsorted_result(ExecutionSpace const& space, KNNLists const& lists, ScalarView<std::uint32_t> const& order,
                          int nq, int k) {
  KNNResult r;
  r.num = nq;
  r.distance = decltype(r.distance)(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::knn::distance"), nq, k);
  r.id = decltype(r.id)(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::knn::id"), nq, k);
  bool const carry_mass = lists.mass.extent(0) > 0;
  if (carry_mass) r.mass = decltype(r.mass)(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::knn::mass"), nq, k);
  auto const distance = r.distance;
  auto const id = r.id;
  auto const mass = r.mass;
  auto const d2 = lists.d2;
  auto const ids = lists.id;
  auto const masses = lists.mass;
  Kokkos::parallel_for(
      "kfmm::neighbors::knn_result", Kokkos::RangePolicy<ExecutionSpace>(space, 0, nq), KOKKOS_LAMBDA(int q) {
        std::size_t const row = order(q);
        for (int j = 0; j < k; ++j) {
          distance(row, j) = compat::math::sqrt(d2(q, j));
          id(row, j) = ids(q, j);
          if (carry_mass) mass(row, j) = masses(q, j);
        }
      });
  space.fence();
  return r;
}

KNNResult knn_impl(ExecutionSpace const& space, Context const& context, Particles<MemorySpace> const& particles,
                   Vec3View<double> const* query_pos, std::size_t num_queries, KNNOptions const& options) {
  bool const self = query_pos == nullptr;
  int const k = options.k;
  PeriodicBox const& box = options.periodic;
  KNNGeometry geometry;
  geometry.periodic = box.enabled;
  for (int a = 0; a < 3; ++a) geometry.length[a] = box.length[a];

  // Checks, agreed across ranks (every rank takes part in the reductions first).
  double lo[3], hi[3], qlo[3], qhi[3];
  std::size_t const bad_particle = scan_positions(space, particles.pos, particles.num, lo, hi);
  std::size_t bad_query = num_queries;
  for (int a = 0; a < 3; ++a) {
    qlo[a] = DBL_MAX;
    qhi[a] = -DBL_MAX;
  }
  if (!self) bad_query = scan_positions(space, *query_pos, num_queries, qlo, qhi);
  double glo[6], ghi[6];
  for (int a = 0; a < 3; ++a) {
    glo[a] = lo[a];
    ghi[a] = hi[a];
    glo[3 + a] = std::min(lo[a], qlo[a]);
    ghi[3 + a] = std::max(hi[a], qhi[a]);
  }
  MPI_Allreduce(MPI_IN_PLACE, glo, 6, MPI_DOUBLE, MPI_MIN, context.comm());
  MPI_Allreduce(MPI_IN_PLACE, ghi, 6, MPI_DOUBLE, MPI_MAX, context.comm());
  std::uint64_t total = particles.num;
  MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_UINT64_T, MPI_SUM, context.comm());
  std::string error;
  bool const exclude = self && !options.include_self;
  std::uint64_t const available = exclude && total > 0 ? total - 1 : total;
  if (k < 1)
    error = fmt::format("knn: k = {} is invalid; ask for at least 1 neighbour", k);
  else if (k > max_knn_k)
    error = fmt::format("knn: k = {} exceeds the largest supported k = {} (per-thread neighbour lists); ask for fewer "
                        "neighbours",
                        k, max_knn_k);
  else if (std::uint64_t(k) > available)
    error = exclude ? fmt::format("knn: k = {} exceeds the {} other particles each particle has (N = {}); use k <= {}",
                                  k, available, total, available)
                    : fmt::format("knn: k = {} exceeds the number of particles N = {}; use k <= {}", k, total, total);
  else if (options.leaf_size < 1)
    error = fmt::format("knn: leaf_size = {} must be at least 1", options.leaf_size);
  else if (bad_particle < particles.num)
    error = fmt::format("knn: particle {} on rank {} has a non-finite position", bad_particle, context.rank());
  else if (bad_query < num_queries)
    error = fmt::format("knn: query {} on rank {} has a non-finite position", bad_query, context.rank());
  if (error.empty() && box.enabled)
    for (int a = 0; a < 3 && error.empty(); ++a) {
      double const extent = ghi[3 + a] - glo[3 + a];
      if (!(std::isfinite(box.length[a]) && box.length[a] > 0))
        error = fmt::format("knn: periodic box length {} along {} must be finite and positive", box.length[a], "xyz"[a]);
      else if (extent > box.length[a])
        error = fmt::format("knn: the periodic box length {} along {} is smaller than the extent {} of the {} ({} to "
                            "{}); give a box at least that long, or open boundaries",
                            box.length[a], "xyz"[a], extent, self ? "particles" : "particles and queries", glo[3 + a],
                            ghi[3 + a]);
    }
  agree_on_error(context, error);

  // Working copies only where they differ from the caller's: positions wrapped into the box,
  // particles moved to Hilbert domains on more than one rank.
  bool const moved = context.size() > 1;
  Particles<MemorySpace> work;
  if (moved) {
    work = copy_particles(space, particles);
    wrap_positions(space, work.pos, work.num, geometry);
  } else {
    work = particles;  // shared Views, only read
    if (box.enabled) work.pos = wrapped_copy(space, particles.pos, particles.num, geometry);
  }
  work.num_total = total;
  Vec3View<double> queries;
  std::size_t nq = self ? work.num : num_queries;
  if (!self) queries = box.enabled ? wrapped_copy(space, *query_pos, num_queries, geometry) : *query_pos;
  ExchangePlan<MemorySpace> plan;
  double scale = 1;
  {
    double cube_lo[3], cube_hi[3];
    for (int a = 0; a < 3; ++a) {
      cube_lo[a] = box.enabled ? 0.0 : glo[3 + a];
      cube_hi[a] = box.enabled ? box.length[a] : ghi[3 + a];
      if (!(cube_lo[a] <= cube_hi[a])) cube_lo[a] = cube_hi[a] = 0;  // no particle, no query anywhere
    }
    BoundingCube const cube = cube_from_bounds(cube_lo, cube_hi);
    scale = cube.size;
    if (moved) {
      ScalarView<std::uint64_t> keys(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::knn::keys"), work.num);
      compute_keys(space, cube, work.pos, work.num, keys);
      auto const splitters = choose_splitters(context, keys, work.num);
      auto const destinations = destination_ranks(space, keys, work.num, splitters);
      if (self) {
        redistribute(context, work, destinations, &plan);
      } else {
        redistribute(context, work, destinations);
        ScalarView<std::uint64_t> qkeys(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::knn::query_keys"), nq);
        compute_keys(space, cube, queries, nq, qkeys);
        auto const qdest = destination_ranks(space, qkeys, nq, splitters);
        plan = ExchangePlan<MemorySpace>(context, qdest, nq);
        queries = plan.exchange(queries);
      }
      nq = self ? work.num : plan.num_import();
    }
  }

  // Local walk.
  KNNSource local;
  PointTree query_tree;
  collectively(context, [&] {
    local.tree = build_point_tree(space, work.pos, work.num, options.leaf_size);
    query_tree = self ? local.tree : build_point_tree(space, queries, nq, options.leaf_size);
  });
  local.id = sorted_values(space, local.tree, work.id);
  if (options.neighbour_masses) local.mass = sorted_values(space, local.tree, work.mass);
  KNNLists lists;
  lists.d2 = decltype(lists.d2)(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::knn::d2"), nq, k);
  lists.id = decltype(lists.id)(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::knn::ids"), nq, k);
  lists.count = ScalarView<int>("kfmm::knn::count", nq);
  if (options.neighbour_masses)
    lists.mass = decltype(lists.mass)(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::knn::masses"), nq, k);
  auto const query_leaves = leaf_nodes(space, query_tree.tree);
  knn_walk_any(space, local, query_tree, query_leaves, k, exclude, geometry, lists, false);

  // Particles of other ranks within each query leaf's k-th distance, then the walk goes on.
  if (context.size() > 1) {
    auto const boxes = leaf_query_boxes(space, query_tree, lists, k, 1e-13 * scale);
    GhostOptions ghost_options;
    ghost_options.periodic = box;
    ghost_options.shift_positions = false;  // the walk folds distances to the minimum image
    auto const ghosts = import_ghosts(space, context, work, boxes, ghost_options);
    KNNSource remote;
    collectively(context, [&] { remote.tree = build_point_tree(space, ghosts.pos, ghosts.num, options.leaf_size); });
    remote.id = sorted_values(space, remote.tree, ghosts.id);
    if (options.neighbour_masses) remote.mass = sorted_values(space, remote.tree, ghosts.mass);
    knn_walk_any(space, remote, query_tree, query_leaves, k, false, geometry, lists, true);
  }

  KNNResult result = unsorted_result(space, lists, query_tree.order, int(nq), k);
  if (moved) {
    KNNResult back;
    back.distance = plan.reverse(result.distance);
    back.id = plan.reverse(result.id);
    if (options.neighbour_masses) back.mass = plan.reverse(result.mass);
    back.num = self ? particles.num : num_queries;
    return back;
  }
  return result;
}

}  // namespace detail

KNNResult knn(ExecutionSpace const& space, Context const& context, Particles<MemorySpace> const& particles,
              KNNOptions const& options) {
  return detail::knn_impl(space, context, particles, nullptr, 0, options);
}

KNNResult knn(ExecutionSpace const& space, Context const& context, Particles<MemorySpace> const& particles,
              Vec3View<double> const& queries, std::size_t num_queries, KNNOptions const& options) {
  std::string error;
  if (queries.extent(0) < num_queries)
    error = fmt::format("knn: num_queries = {} exceeds the {} query positions given", num_queries, queries.extent(0));
  agree_on_error(context, error);
  return detail::knn_impl(space, context, particles, &queries, num_queries, options);
}

}  // namespace kfmm
