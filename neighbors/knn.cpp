#include <kfmm/comm/decomposition.hpp>
#include <kfmm/comm/exchange_plan.hpp>
#include <kfmm/core/error.hpp>
#include <kfmm/core/hilbert.hpp>
#include <kfmm/core/huge_pages.hpp>
#include <kfmm/core/kernel_shape.hpp>
#include <kfmm/neighbors/ghost_import.hpp>
#include <kfmm/neighbors/knn.hpp>
#include <kfmm/neighbors/knn_lanes.hpp>
#include <kfmm/neighbors/point_tree.hpp>

#include <cfloat>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

namespace kfmm {

namespace detail {

/// Candidate lists of the queries, one row per query in the caller's (local) order, so that they
/// are the answer once the squared distances become distances: nearest first, ties by id; a
/// slot not filled yet holds distance² DBL_MAX and id 2^64 − 1.
struct KNNLists {
  Kokkos::View<double**, Kokkos::LayoutRight, MemorySpace> d2;
  Kokkos::View<std::uint64_t**, Kokkos::LayoutRight, MemorySpace> id;
  Kokkos::View<double**, Kokkos::LayoutRight, MemorySpace> mass;  ///< (nq, k), or empty: not carried
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
inline constexpr int knn_batch = 16;        // source leaves a query scans per load and store of its list
inline constexpr int knn_group = 64;        // queries that walk together (their lists in team scratch)
inline constexpr std::size_t knn_fast_scratch_bytes = 24 << 10;  // lists up to this in scratch level 0
static_assert(knn_chunk <= 32, "a chunk's candidates are a 32-bit mask");

/// Every slot of every list empty.
void clear_lists(ExecutionSpace const& space, KNNLists const& lists, int k) {
  auto const d2 = lists.d2;
  auto const id = lists.id;
  auto const mass = lists.mass;
  bool const carry_mass = mass.extent(0) > 0;
  Kokkos::parallel_for(
      "kfmm::neighbors::clear_lists", Kokkos::RangePolicy<ExecutionSpace>(space, 0, d2.extent(0)),
      KOKKOS_LAMBDA(std::size_t row) {
        for (int j = 0; j < k; ++j) {
          d2(row, j) = DBL_MAX;
          id(row, j) = ~std::uint64_t(0);
          if (carry_mass) mass(row, j) = 0;
        }
      });
  space.fence();
}

/// Groups of queries that walk together: each leaf of the query tree, cut into runs of at most
/// knn_group queries (oversized leaves of coincident points, leaves larger than knn_group);
/// row g = (leaf node, first query, end of queries), in node order.
using QueryGroups = Kokkos::View<int* [3], Kokkos::LayoutRight, MemorySpace>;
QueryGroups query_groups(ExecutionSpace const& space, Tree<> const& tree) {
  int const nodes = tree.num_nodes;
  ScalarView<std::size_t> slot("kfmm::neighbors::group_slots", nodes + 1);
  Kokkos::parallel_for(
      "kfmm::neighbors::count_groups", Kokkos::RangePolicy<ExecutionSpace>(space, 0, nodes), KOKKOS_LAMBDA(int node) {
        int const size = tree.particle_end(node) - tree.particle_begin(node);
        bool const leaf = tree.child_begin(node) == tree.child_end(node);
        slot(node) = leaf && size > 0 ? (size + knn_group - 1) / knn_group : 0;
      });
  std::size_t const groups = exclusive_scan_in_place(space, slot, nodes + 1);
  QueryGroups result(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::neighbors::query_groups"), groups);
  Kokkos::parallel_for(
      "kfmm::neighbors::list_groups", Kokkos::RangePolicy<ExecutionSpace>(space, 0, nodes), KOKKOS_LAMBDA(int node) {
        int const end = tree.particle_end(node);
        std::size_t g = slot(node);
        for (int b = tree.particle_begin(node); g < slot(node + 1); ++g, b += knn_group) {
          result(g, 0) = node;
          result(g, 1) = b;
          result(g, 2) = end - b < knn_group ? end : b + knn_group;
        }
      });
  space.fence();
  return result;
}

/// Asks the cache for the line at `p`, to be written (CPUs; a no-op on GPUs).
KOKKOS_INLINE_FUNCTION void prefetch_for_write(void const* p) {
#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_prefetch(p, 1, 2);
#else
  (void)p;
#endif
}

/// Position of the lowest set bit of a nonzero mask.
KOKKOS_INLINE_FUNCTION int lowest_set_bit(unsigned mask) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __ffs(mask) - 1;
#elif defined(__GNUC__) || defined(__clang__)
  return __builtin_ctz(mask);
#else
  int b = 0;
  while (!(mask & 1u)) {
    mask >>= 1;
    ++b;
  }
  return b;
#endif
}

using KNNScratch = Kokkos::View<double**, Kokkos::LayoutRight, ExecutionSpace::scratch_memory_space, Kokkos::MemoryUnmanaged>;
using KNNIdScratch =
    Kokkos::View<std::uint64_t**, Kokkos::LayoutRight, ExecutionSpace::scratch_memory_space, Kokkos::MemoryUnmanaged>;
using KNNIntScratch = Kokkos::View<int*, ExecutionSpace::scratch_memory_space, Kokkos::MemoryUnmanaged>;
using KNNGapScratch = Kokkos::View<double*, ExecutionSpace::scratch_memory_space, Kokkos::MemoryUnmanaged>;

/// The descent's team scratch (level 0, taken first): the boxes (lo x, y, z, hi x, y, z) and
/// nodes of a batch of leaves, and the stack of pending nodes with their gaps.
struct KNNDescentScratch {
  KNNScratch box;
  KNNIntScratch batch;
  KNNIntScratch stack_node;
  KNNGapScratch stack_gap;

  static std::size_t bytes() {
    return KNNScratch::shmem_size(6, knn_batch) + KNNIntScratch::shmem_size(knn_batch) +
           KNNIntScratch::shmem_size(knn_stack_size) + KNNGapScratch::shmem_size(knn_stack_size);
  }
  /// Puts the root (gap² `root_gap2`) alone on the stack; returns the stack's height.
  KOKKOS_INLINE_FUNCTION int start(double root_gap2) const {
    stack_node(0) = 0;
    stack_gap(0) = root_gap2;
    return 1;
  }
  template <class Member>
  KOKKOS_INLINE_FUNCTION explicit KNNDescentScratch(Member const& team)
      : box(team.team_scratch(0), 6, knn_batch),
        batch(team.team_scratch(0), knn_batch),
        stack_node(team.team_scratch(0), knn_stack_size),
        stack_gap(team.team_scratch(0), knn_stack_size) {}
};

/// Squared gap between a query group's box [glo, ghi] and node `node`'s box (minimum image
/// when periodic).
KOKKOS_INLINE_FUNCTION double knn_group_gap2(double const (&glo)[3], double const (&ghi)[3], Vec3View<double> const& lo,
                                             Vec3View<double> const& hi, int node, bool periodic,
                                             Kokkos::Array<double, 3> const& length) {
  double g2 = 0;
  for (int a = 0; a < 3; ++a) {
    double const g = intervals_gap(glo[a], ghi[a], lo(node, a), hi(node, a), periodic ? length[a] : 0.0);
    g2 += g * g;
  }
  return g2;
}

/// \brief The descent of a query group (one thread of its team): pops nodes nearest first from
/// the stack (`height` entries), drops those whose gap² to the group (`group_gap2`) exceeds
/// `limit`, pushes the children within it farthest first, and collects up to knn_batch leaves
/// and their boxes in `d`; returns how many. Shared by both shapes.
template <class GapFn>
KOKKOS_INLINE_FUNCTION int knn_next_batch(Tree<> const& tree, Vec3View<double> const& lo, Vec3View<double> const& hi,
                                          GapFn const& group_gap2, double limit, KNNDescentScratch const& d,
                                          int& height) {
  auto const& box = d.box;
  auto const& batch = d.batch;
  auto const& stack_node = d.stack_node;
  auto const& stack_gap = d.stack_gap;
  int count = 0;
  while (height > 0 && count < knn_batch) {
    int const top = --height;
    int const node = stack_node(top);
    if (stack_gap(top) > limit) continue;
    int const cb = tree.child_begin(node), ce = tree.child_end(node);
    if (cb == ce) {
      batch(count) = node;
      for (int a = 0; a < 3; ++a) {
        box(a, count) = lo(node, a);
        box(3 + a, count) = hi(node, a);
      }
      ++count;
      continue;
    }
    // Children within the limit, pushed farthest first so that the nearest pops first.
    int child[8];
    double gap[8];
    int m = 0;
    for (int c = cb; c < ce && m < 8; ++c) {
      int const node_c = tree.child_index(c);
      double const g = group_gap2(node_c);
      if (g > limit) continue;
      int j = m++;
      while (j > 0 && gap[j - 1] < g) {
        gap[j] = gap[j - 1];
        child[j] = child[j - 1];
        --j;
      }
      gap[j] = g;
      child[j] = node_c;
    }
    for (int j = 0; j < m && height < knn_stack_size; ++j) {
      stack_node(height) = child[j];
      stack_gap(height) = gap[j];
      ++height;
    }
  }
  return count;
}

/// Calls f(std::integral_constant<int, K>) with the smallest list capacity K of 8, 16, 32, 64,
/// max_knn_k that holds k (the walks are compiled for these).
template <class F>
void with_list_capacity(int k, F const& f) {
  if (k <= 8) return f(std::integral_constant<int, 8>{});
  if (k <= 16) return f(std::integral_constant<int, 16>{});
  if (k <= 32) return f(std::integral_constant<int, 32>{});
  if (k <= 64) return f(std::integral_constant<int, 64>{});
  f(std::integral_constant<int, max_knn_k>{});
}

/// \brief One query's list of its K best candidates, sorted by (distance², id), in per-thread
/// arrays while a batch of source leaves is scanned. Every slot is kept (empty ones hold
/// DBL_MAX and the largest id, which lose to any candidate), so the list stays sorted in all
/// K slots and the k-th is the bound.
template <int K>
struct KNNList {
  double d2[K];
  std::uint64_t id[K];
  double mass[K];

  /// Inserts a candidate that beats the k-th entry. Small lists: the slot is counted and the
  /// shift done as selections over all K slots (no data-dependent branch, so no misprediction
  /// per insertion; registers can hold the list). Large lists: a shift from the end.
  KOKKOS_INLINE_FUNCTION void insert(double d, std::uint64_t i, double m, int k, bool carry_mass) {
    if constexpr (K <= 16) {
      (void)k;
      int at = 0;
      for (int j = 0; j < K; ++j) at += d2[j] < d || (d2[j] == d && id[j] < i) ? 1 : 0;
      for (int j = K - 1; j > 0; --j) {
        d2[j] = j > at ? d2[j - 1] : j == at ? d : d2[j];
        id[j] = j > at ? id[j - 1] : j == at ? i : id[j];
      }
      d2[0] = at == 0 ? d : d2[0];
      id[0] = at == 0 ? i : id[0];
      if (carry_mass) {
        for (int j = K - 1; j > 0; --j) mass[j] = j > at ? mass[j - 1] : j == at ? m : mass[j];
        mass[0] = at == 0 ? m : mass[0];
      }
    } else {
      int j = k - 1;
      while (j > 0 && (d2[j - 1] > d || (d2[j - 1] == d && id[j - 1] > i))) {
        d2[j] = d2[j - 1];
        id[j] = id[j - 1];
        mass[j] = mass[j - 1];
        --j;
      }
      d2[j] = d;
      id[j] = i;
      mass[j] = m;
    }
  }
};

/// \brief Group by group: the queries of a group (a leaf of `query_tree` or a run of it; a
/// team, its threads take queries) walk `source` together, nearest node to the leaf's box
/// first, pruning nodes farther than the largest k-th candidate distance of the group's
/// queries. Their lists live in team scratch meanwhile and go to their rows once, at the end.
/// The source leaves that pass are collected in batches of knn_batch (their boxes in team
/// scratch); each query then takes a batch with its list in per-thread arrays: the gaps to the
/// batch's boxes in one pass, then each leaf unless its own k-th candidate is nearer than the
/// box; the walk goes on with the new bound. Equal distances are
/// not pruned: a smaller id may win. Without `resume` the lists start empty (else they continue
/// from the rows, e.g. after another tree); `skip_same_index` leaves out source point i for
/// query i (self-query on one tree).
template <int K>
void knn_walk(ExecutionSpace const& space, KNNSource const& source, PointTree const& query_tree,
              QueryGroups const& groups, int k, bool skip_same_index, KNNGeometry const& geometry,
              KNNLists const& lists, bool resume) {
  using Policy = Kokkos::TeamPolicy<ExecutionSpace>;
  using Member = Policy::member_type;
  auto const tree = source.tree.tree;
  auto const pos = source.tree.pos, lo = source.tree.lo, hi = source.tree.hi;
  auto const ids = source.id;
  int const n = source.tree.n;
  auto const qtree = query_tree.tree;
  auto const qpos = query_tree.pos, qlo = query_tree.lo, qhi = query_tree.hi;
  auto const row_of = query_tree.order;
  auto const d2_list = lists.d2;
  auto const id_list = lists.id;
  auto const mass_list = lists.mass;
  auto const masses = source.mass;
  bool const carry_mass = lists.mass.extent(0) > 0;
  bool const periodic = geometry.periodic;
  auto const length = geometry.length;
  int const num_groups = static_cast<int>(groups.extent(0));
  if (n == 0 || num_groups == 0) {
    if (!resume) clear_lists(space, lists, k);
    return;
  }
  // The group's lists in the fast scratch level when they are small (GPU shared memory), else
  // in the large one.
  int const mass_rows = carry_mass ? knn_group : 0;
  std::size_t const list_bytes = KNNScratch::shmem_size(knn_group, K) + KNNIdScratch::shmem_size(knn_group, K) +
                                 KNNScratch::shmem_size(mass_rows, K);
  int const list_level = list_bytes <= knn_fast_scratch_bytes ? 0 : 1;
  // The descent's scratch: leaf boxes and indices of a batch, the stack, its height.
  std::size_t const walk_bytes = KNNDescentScratch::bytes() + KNNIntScratch::shmem_size(1);
  Policy policy(space, num_groups, Kokkos::AUTO);
  policy.set_scratch_size(0, Kokkos::PerTeam(walk_bytes + (list_level == 0 ? list_bytes : 0)));
  if (list_level == 1) policy.set_scratch_size(1, Kokkos::PerTeam(list_bytes));
  Kokkos::parallel_for(
      "kfmm::neighbors::knn_walk", policy, KOKKOS_LAMBDA(Member const& team) {
        int const group = groups(team.league_rank(), 0);
        int const qb = groups(team.league_rank(), 1), qe = groups(team.league_rank(), 2);
        double const glo[3] = {qlo(group, 0), qlo(group, 1), qlo(group, 2)};
        double const ghi[3] = {qhi(group, 0), qhi(group, 1), qhi(group, 2)};
        KNNDescentScratch const descent(team);
        auto const& box = descent.box;
        auto const& batch = descent.batch;
        KNNIntScratch const walk_state(team.team_scratch(0), 1);  // the stack's height
        KNNScratch const list_d2(team.team_scratch(list_level), knn_group, K);
        KNNIdScratch const list_id(team.team_scratch(list_level), knn_group, K);
        KNNScratch const list_mass(team.team_scratch(list_level), mass_rows, K);
        auto const group_gap2 = [&](int node) { return knn_group_gap2(glo, ghi, lo, hi, node, periodic, length); };
        // The group's queries are split among the team's threads at every batch.
        double bound = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, qb, qe),
            [&](int q, double& m) {
              int const slot = q - qb;
              std::size_t const row = row_of(q);
              // The rows are written at the end of the walk, in the caller's order (scattered):
              // asking for them now hides the cache and TLB misses behind the walk.
              prefetch_for_write(&d2_list(row, 0));
              prefetch_for_write(&id_list(row, 0));
              for (int j = 0; j < K; ++j) {
                bool const kept = resume && j < k;
                list_d2(slot, j) = kept ? d2_list(row, j) : DBL_MAX;
                list_id(slot, j) = kept ? id_list(row, j) : ~std::uint64_t(0);
                if (carry_mass) list_mass(slot, j) = kept ? mass_list(row, j) : 0.0;
              }
              double const b = list_d2(slot, k - 1);
              m = b > m ? b : m;
            },
            Kokkos::Max<double>(bound));
        // Box gaps and point distances round differently (contractions, summation order), so a
        // box is pruned only when its gap exceeds the bound by more than that rounding.
        double const slack = 1 + 1e-12;
        // The descent is the same for every query of the group: one thread of the team runs it
        // with its stack in team scratch (no per-thread copy), and hands out batches of leaves.
        Kokkos::single(Kokkos::PerTeam(team), [&] {
          walk_state(0) = descent.start(group_gap2(0));
        });
        while (true) {
          int batched = 0;
          Kokkos::single(
              Kokkos::PerTeam(team),
              [&](int& count) {
                count = knn_next_batch(tree, lo, hi, group_gap2, bound * slack, descent, walk_state(0));
              },
              batched);
          team.team_barrier();
          if (batched == 0) break;
          double new_bound = 0;
          Kokkos::parallel_reduce(
              Kokkos::TeamThreadRange(team, qb, qe),
              [&](int q, double& m) {
                int const slot = q - qb;
                double const x[3] = {qpos(q, 0), qpos(q, 1), qpos(q, 2)};
                KNNList<K> list;
                for (int j = 0; j < K; ++j) {
                  list.d2[j] = list_d2(slot, j);
                  list.id[j] = list_id(slot, j);
                  list.mass[j] = carry_mass ? list_mass(slot, j) : 0.0;
                }
                bool changed = false;
                double worst = list.d2[k - 1];
                double gap2[knn_batch];
                for (int b = 0; b < batched; ++b) {
                  double g2 = 0;
                  for (int a = 0; a < 3; ++a) {
                    double const g = interval_gap(x[a], box(a, b), box(3 + a, b), periodic ? length[a] : 0.0);
                    g2 += g * g;
                  }
                  gap2[b] = g2;
                }
                for (int b = 0; b < batched; ++b) {
                  if (gap2[b] > worst * slack) continue;
                  int const node = batch(b);
                  int const pb = tree.particle_begin(node), pe = tree.particle_end(node);
                  for (int c0 = pb; c0 < pe; c0 += knn_chunk) {
                    // Distances of a chunk and the mask of those that can enter the list (loops
                    // that vectorise), then the few insertions, bit by bit.
                    int const c1 = pe - c0 < knn_chunk ? pe : c0 + knn_chunk;
                    double chunk[knn_chunk];
                    for (int i = c0; i < c1; ++i) {
                      double d2 = 0;
                      for (int a = 0; a < 3; ++a) {
                        double const dx = x[a] - pos(i, a);
                        double const g = periodic ? minimum_image_gap(dx, length[a]) : dx;
                        d2 += g * g;
                      }
                      // Far beyond the range of doubles counts as DBL_MAX, the empty slots' value,
                      // so that such a point still beats an empty slot (by its id).
                      chunk[i - c0] = d2 < DBL_MAX ? d2 : DBL_MAX;
                    }
                    unsigned hits = 0;
                    for (int i = 0; i < c1 - c0; ++i) hits |= (chunk[i] <= worst ? 1u : 0u) << i;
                    while (hits != 0) {
                      int const t = lowest_set_bit(hits);
                      hits &= hits - 1;
                      int const i = c0 + t;
                      double const d2 = chunk[t];
                      if (d2 > worst || (skip_same_index && i == q)) continue;
                      std::uint64_t const id = ids(i);
                      if (d2 == worst && id >= list.id[k - 1]) continue;
                      list.insert(d2, id, carry_mass ? masses(i) : 0.0, k, carry_mass);
                      worst = list.d2[k - 1];
                      changed = true;
                    }
                  }
                }
                if (changed)
                  for (int j = 0; j < K; ++j) {
                    list_d2(slot, j) = list.d2[j];
                    list_id(slot, j) = list.id[j];
                    if (carry_mass) list_mass(slot, j) = list.mass[j];
                  }
                m = worst > m ? worst : m;
              },
              Kokkos::Max<double>(new_bound));
          team.team_barrier();  // the next batch overwrites the boxes
          bound = new_bound;
        }
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, qb, qe), [&](int q) {
          int const slot = q - qb;
          std::size_t const row = row_of(q);
          for (int j = 0; j < k; ++j) {
            d2_list(row, j) = list_d2(slot, j);
            id_list(row, j) = list_id(slot, j);
            if (carry_mass) mass_list(row, j) = list_mass(slot, j);
          }
        });
      });
  space.fence();
}

#ifdef KFMM_KNN_AVX512
/// \brief The CPU shape of knn_walk (neighbors/knn_lanes.hpp): one thread per query group runs
/// the same descent and hands each batch of leaves to blocks of knn_lanes queries, whose lists
/// wait in team scratch between batches, slot-major so that a block's slot is one register.
template <int K, bool CarryMass>
void knn_walk_lanes(ExecutionSpace const& space, KNNSource const& source, PointTree const& query_tree,
                    QueryGroups const& groups, int k, bool skip_same_index, KNNGeometry const& geometry,
                    KNNLists const& lists, bool resume) {
  static_assert(knn_group % knn_lanes == 0, "groups of whole lane blocks");
  using Policy = Kokkos::TeamPolicy<ExecutionSpace>;
  using Member = Policy::member_type;
  auto const tree = source.tree.tree;
  auto const pos = source.tree.pos, lo = source.tree.lo, hi = source.tree.hi;
  auto const ids = source.id;
  auto const masses = source.mass;
  auto const qpos = query_tree.pos, qlo = query_tree.lo, qhi = query_tree.hi;
  auto const row_of = query_tree.order;
  auto const d2_list = lists.d2;
  auto const id_list = lists.id;
  auto const mass_list = lists.mass;
  bool const periodic = geometry.periodic;
  auto const length = geometry.length;
  int const num_groups = static_cast<int>(groups.extent(0));
  if (source.tree.n == 0 || num_groups == 0) {
    if (!resume) clear_lists(space, lists, k);
    return;
  }
  int const mass_slots = CarryMass ? K : 0;
  std::size_t const bytes = KNNDescentScratch::bytes() + KNNScratch::shmem_size(K, knn_group) +
                            KNNIdScratch::shmem_size(K, knn_group) + KNNScratch::shmem_size(mass_slots, knn_group);
  Policy policy(space, num_groups, 1);
  policy.set_scratch_size(0, Kokkos::PerTeam(bytes));
  Kokkos::parallel_for(
      "kfmm::neighbors::knn_walk_lanes", policy, KOKKOS_LAMBDA(Member const& team) {
        int const group = groups(team.league_rank(), 0);
        int const qb = groups(team.league_rank(), 1), qe = groups(team.league_rank(), 2);
        double const glo[3] = {qlo(group, 0), qlo(group, 1), qlo(group, 2)};
        double const ghi[3] = {qhi(group, 0), qhi(group, 1), qhi(group, 2)};
        KNNDescentScratch const descent(team);
        KNNScratch const list_d2(team.team_scratch(0), K, knn_group);  // (slot, query of the group)
        KNNIdScratch const list_id(team.team_scratch(0), K, knn_group);
        KNNScratch const list_mass(team.team_scratch(0), mass_slots, knn_group);
        auto const group_gap2 = [&](int node) { return knn_group_gap2(glo, ghi, lo, hi, node, periodic, length); };
        int const nq = qe - qb;
        int const blocks = (nq + knn_lanes - 1) / knn_lanes;
        int const pad = K - k;  // leading slots every candidate passes (right-aligned lists)
        double bound = 0;
        for (int s = 0; s < blocks * knn_lanes; ++s) {
          bool const real = s < nq;
          std::size_t const row = real ? row_of(qb + s) : 0;
          if (real) {
            // Written at the end, in the caller's (scattered) order: asked for now.
            prefetch_for_write(&d2_list(row, 0));
            prefetch_for_write(&id_list(row, 0));
          }
          for (int j = 0; j < K; ++j) {
            bool const kept = real && resume && j >= pad;
            double const empty = real && j >= pad ? DBL_MAX : -1.0;
            list_d2(j, s) = kept ? d2_list(row, j - pad) : empty;
            list_id(j, s) = kept ? id_list(row, j - pad) : ~std::uint64_t(0);
            if (CarryMass) list_mass(j, s) = kept ? mass_list(row, j - pad) : 0.0;
          }
          if (real) bound = list_d2(K - 1, s) > bound ? list_d2(K - 1, s) : bound;
        }
        double const slack = 1 + 1e-12;  // as in the GPU shape
        int height = descent.start(group_gap2(0));
        while (true) {
          int const batched = knn_next_batch(tree, lo, hi, group_gap2, bound * slack, descent, height);
          if (batched == 0) break;
          double new_bound = 0;
          for (int blk = 0; blk < blocks; ++blk) {
            int const s0 = blk * knn_lanes;
            double x[3][knn_lanes];
            __mmask8 active = 0;
            for (int l = 0; l < knn_lanes; ++l) {
              int const q = s0 + l < nq ? qb + s0 + l : qb;
              if (s0 + l < nq) active = static_cast<__mmask8>(active | (1u << l));
              for (int a = 0; a < 3; ++a) x[a][l] = qpos(q, a);
            }
            double const worst = knn_scan_lanes<K, CarryMass>(
                &list_d2(0, s0), &list_id(0, s0), CarryMass ? &list_mass(0, s0) : nullptr, knn_group, x, active,
                qb + s0, skip_same_index, periodic, length, slack, pos, ids, masses, tree, descent.box, descent.batch,
                batched);
            new_bound = worst > new_bound ? worst : new_bound;
          }
          bound = new_bound;
        }
        for (int s = 0; s < nq; ++s) {
          std::size_t const row = row_of(qb + s);
          for (int j = 0; j < k; ++j) {
            d2_list(row, j) = list_d2(pad + j, s);
            id_list(row, j) = list_id(pad + j, s);
            if (CarryMass) mass_list(row, j) = list_mass(pad + j, s);
          }
        }
      });
  space.fence();
}

/// Runs knn_walk_lanes with the smallest list capacity that holds k and returns true when
/// kernels on ExecSpace take the CPU shape now; else returns false (a template, so that GPU
/// backends never instantiate the lanes).
template <class ExecSpace>
bool knn_walk_in_lanes(ExecSpace const& space, KNNSource const& source, PointTree const& query_tree,
                       QueryGroups const& groups, int k, bool skip_same_index, KNNGeometry const& geometry,
                       KNNLists const& lists, bool resume) {
  if constexpr (gpu_shaped_kernels<ExecSpace>()) {
    return false;
  } else {
    if (use_gpu_shape<ExecSpace>()) return false;
    with_list_capacity(k, [&](auto capacity) {
      constexpr int K = decltype(capacity)::value;
      auto const walk = lists.mass.extent(0) > 0 ? &knn_walk_lanes<K, true> : &knn_walk_lanes<K, false>;
      walk(space, source, query_tree, groups, k, skip_same_index, geometry, lists, resume);
    });
    return true;
  }
}
#endif

/// The walk in the kernel shape of the moment (knn_walk_lanes on CPUs with AVX-512, else
/// knn_walk) with the smallest list capacity that holds k (with_list_capacity).
void knn_walk_any(ExecutionSpace const& space, KNNSource const& source, PointTree const& query_tree,
                  QueryGroups const& groups, int k, bool skip_same_index, KNNGeometry const& geometry,
                  KNNLists const& lists, bool resume) {
#ifdef KFMM_KNN_AVX512
  if (knn_walk_in_lanes(space, source, query_tree, groups, k, skip_same_index, geometry, lists, resume)) return;
#endif
  with_list_capacity(k, [&](auto capacity) {
    knn_walk<decltype(capacity)::value>(space, source, query_tree, groups, k, skip_same_index, geometry, lists, resume);
  });
}

/// Values of the tree's points (ids, masses) in its sorted order.
template <class T>
ScalarView<T> sorted_values(ExecutionSpace const& space, PointTree const& tree, ScalarView<T> const& values) {
  auto const sorted = allocate_large<ScalarView<T>>("kfmm::neighbors::sorted_values", tree.n);
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
  auto const row_of = queries.order;
  double const infinite = std::numeric_limits<double>::infinity();
  Kokkos::parallel_for(
      "kfmm::neighbors::leaf_boxes", Kokkos::RangePolicy<ExecutionSpace>(space, 0, nodes), KOKKOS_LAMBDA(int node) {
        if (tree.child_begin(node) != tree.child_end(node)) return;
        double largest = 0;
        for (int q = tree.particle_begin(node); q < tree.particle_end(node); ++q) {
          double const r2 = d2(row_of(q), k - 1);
          largest = r2 > largest ? r2 : largest;
        }
        largest = largest < DBL_MAX ? largest : infinite;  // a list not full yet
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

/// The lists as the answer: distances rather than their squares, in place.
KNNResult finish_lists(ExecutionSpace const& space, KNNLists const& lists, std::size_t nq, int k) {
  auto const d = lists.d2;
  Kokkos::parallel_for(
      "kfmm::neighbors::knn_distances", Kokkos::RangePolicy<ExecutionSpace>(space, 0, nq), KOKKOS_LAMBDA(std::size_t row) {
        for (int j = 0; j < k; ++j) d(row, j) = compat::math::sqrt(d(row, j));
      });
  space.fence();
  KNNResult r;
  r.num = nq;
  r.distance = lists.d2;
  r.id = lists.id;
  r.mass = lists.mass;
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
      auto const splitters = choose_splitters(space, context, keys, work.num);
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
  lists.d2 = allocate_large<decltype(lists.d2)>("kfmm::knn::distance", nq, k);
  lists.id = allocate_large<decltype(lists.id)>("kfmm::knn::id", nq, k);
  if (options.neighbour_masses) lists.mass = allocate_large<decltype(lists.mass)>("kfmm::knn::mass", nq, k);
  auto const groups = query_groups(space, query_tree.tree);
  knn_walk_any(space, local, query_tree, groups, k, exclude, geometry, lists, false);

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
    knn_walk_any(space, remote, query_tree, groups, k, false, geometry, lists, true);
  }

  KNNResult result = finish_lists(space, lists, nq, k);
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
