#include <kfmm/comm/exchange_plan.hpp>
#include <kfmm/core/error.hpp>
#include <kfmm/core/sort.hpp>
#include <kfmm/neighbors/ghost_import.hpp>
#include <kfmm/neighbors/point_tree.hpp>

#include <cfloat>
#include <cmath>
#include <string>
#include <vector>

namespace kfmm {

namespace detail {

/// Index of the first box that is not a valid query (lo > hi, NaN, negative or NaN radius), or n.
std::size_t first_bad_box(ExecutionSpace const& space, Kokkos::View<QueryBox const*, MemorySpace> const& boxes) {
  std::size_t const n = boxes.extent(0);
  std::size_t first = n;
  Kokkos::parallel_reduce(
      "kfmm::neighbors::check_boxes", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t i, std::size_t & f) {
        QueryBox const& b = boxes(i);
        bool ok = b.radius >= 0;
        for (int k = 0; k < 3; ++k) ok = ok && b.lo[k] <= b.hi[k];
        if (!ok && i < f) f = i;
      },
      Kokkos::Min<std::size_t>(first));
  return first;
}

/// Index of the first of `n` positions outside [0, L) of a periodic box, or n.
std::size_t first_outside_box(ExecutionSpace const& space, Vec3View<double> const& pos, std::size_t n,
                              PeriodicBox const& box) {
  std::size_t first = n;
  double const lx = box.length[0], ly = box.length[1], lz = box.length[2];
  Kokkos::parallel_reduce(
      "kfmm::neighbors::check_inside", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t i, std::size_t & f) {
        bool const ok = pos(i, 0) >= 0 && pos(i, 0) < lx && pos(i, 1) >= 0 && pos(i, 1) < ly && pos(i, 2) >= 0 &&
                        pos(i, 2) < lz;
        if (!ok && i < f) f = i;
      },
      Kokkos::Min<std::size_t>(first));
  return first;
}

/// Bounding boxes (lo[3], hi[3] per chunk) of `chunks` consecutive equal chunks of the sorted
/// points; empty chunks get an empty box (lo = +DBL_MAX, hi = −DBL_MAX).
std::vector<double> chunk_boxes(ExecutionSpace const& space, PointTree const& t, int chunks) {
  constexpr int parts = 64;  // sub-blocks per chunk, so that the scan is parallel
  std::size_t const n = t.n;
  int const count = chunks * parts;
  Kokkos::View<double*, MemorySpace> part_boxes(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::neighbors::part_boxes"),
                                                std::size_t(count) * 6);
  auto const pos = t.pos;
  Kokkos::parallel_for(
      "kfmm::neighbors::chunk_boxes", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count), KOKKOS_LAMBDA(int p) {
        int const chunk = p / parts, part = p % parts;
        std::size_t const cb = n * chunk / chunks, ce = n * (chunk + 1) / chunks;
        std::size_t const b = cb + (ce - cb) * part / parts, e = cb + (ce - cb) * (part + 1) / parts;
        double l[3] = {DBL_MAX, DBL_MAX, DBL_MAX}, h[3] = {-DBL_MAX, -DBL_MAX, -DBL_MAX};
        for (std::size_t i = b; i < e; ++i)
          for (int k = 0; k < 3; ++k) {
            double const x = pos(i, k);
            l[k] = x < l[k] ? x : l[k];
            h[k] = x > h[k] ? x : h[k];
          }
        for (int k = 0; k < 3; ++k) {
          part_boxes(6 * std::size_t(p) + k) = l[k];
          part_boxes(6 * std::size_t(p) + 3 + k) = h[k];
        }
      });
  auto const host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), part_boxes);
  std::vector<double> result(std::size_t(chunks) * 6);
  for (int c = 0; c < chunks; ++c) {
    for (int k = 0; k < 3; ++k) {
      result[6 * c + k] = DBL_MAX;
      result[6 * c + 3 + k] = -DBL_MAX;
    }
    for (int p = c * parts; p < (c + 1) * parts; ++p)
      for (int k = 0; k < 3; ++k) {
        result[6 * c + k] = std::min(result[6 * c + k], host(6 * p + k));
        result[6 * c + 3 + k] = std::max(result[6 * c + 3 + k], host(6 * p + 3 + k));
      }
  }
  return result;
}

/// Calls visit(rank, image) for every (rank, image) whose particles may lie within the box's
/// radius: rank_boxes holds, per rank, its union box then its chunk
/// boxes (6 doubles each, `per_rank` boxes after the union).
template <class RankBoxes, class Visit>
KOKKOS_INLINE_FUNCTION void for_each_partner(QueryBox const& box, RankBoxes const& rank_boxes, int ranks, int per_rank,
                                             int self, bool skip_self, bool periodic, double const* length,
                                             Visit const& visit) {
  int smin[3], smax[3];
  for (int k = 0; k < 3; ++k) {
    smin[k] = periodic && box.lo[k] - box.radius < 0 ? -1 : 0;
    smax[k] = periodic && box.hi[k] + box.radius >= length[k] ? 1 : 0;
  }
  for (int r = 0; r < ranks; ++r) {
    if (skip_self && r == self) continue;
    std::size_t const base = std::size_t(r) * (per_rank + 1) * 6;
    for (int sz = smin[2]; sz <= smax[2]; ++sz)
      for (int sy = smin[1]; sy <= smax[1]; ++sy)
        for (int sx = smin[0]; sx <= smax[0]; ++sx) {
          int const image = (sx + 1) + 3 * (sy + 1) + 9 * (sz + 1);
          if (r == self && image == unshifted_image) continue;
          int const s[3] = {sx, sy, sz};
          double lo[3], hi[3];
          for (int k = 0; k < 3; ++k) {
            double const shift = periodic ? s[k] * length[k] : 0.0;
            lo[k] = box.lo[k] - box.radius - shift;
            hi[k] = box.hi[k] + box.radius - shift;
          }
          auto const meets = [&](std::size_t b) {
            for (int k = 0; k < 3; ++k)
              if (hi[k] < rank_boxes(b + k) || rank_boxes(b + 3 + k) < lo[k]) return false;
            return true;
          };
          if (!meets(base)) continue;
          bool any = false;
          for (int c = 1; c <= per_rank && !any; ++c) any = meets(base + 6 * std::size_t(c));
          if (any) visit(r, image);
        }
  }
}

/// Squared distance between the box [lo, hi] and the point or box [plo, phi].
KOKKOS_INLINE_FUNCTION double box_gap2(double const* lo, double const* hi, double const* plo, double const* phi) {
  double d2 = 0;
  for (int k = 0; k < 3; ++k) {
    double const g = phi[k] < lo[k] ? lo[k] - phi[k] : plo[k] > hi[k] ? plo[k] - hi[k] : 0;
    d2 += g * g;
  }
  return d2;
}

inline constexpr int tree_stack_size = 192;  // ≥ 7 per level × 22 levels + 1

/// Calls found(sorted point) for every point of the tree within the request's radius of its box.
template <class Found>
KOKKOS_INLINE_FUNCTION void for_each_point_in_range(GhostRequest const& q, Tree<> const& tree,
                                                    Vec3View<double> const& pos, Vec3View<double> const& lo,
                                                    Vec3View<double> const& hi, int n, Found const& found) {
  if (n == 0) return;
  double const r2 = q.radius * q.radius;
  int stack[tree_stack_size];
  int top = 0;
  stack[top++] = 0;
  while (top > 0) {
    int const node = stack[--top];
    double const nlo[3] = {lo(node, 0), lo(node, 1), lo(node, 2)};
    double const nhi[3] = {hi(node, 0), hi(node, 1), hi(node, 2)};
    if (box_gap2(q.lo, q.hi, nlo, nhi) > r2) continue;
    if (tree.child_begin(node) == tree.child_end(node)) {
      for (int i = tree.particle_begin(node); i < tree.particle_end(node); ++i) {
        double const p[3] = {pos(i, 0), pos(i, 1), pos(i, 2)};
        if (box_gap2(q.lo, q.hi, p, p) <= r2) found(i);
      }
    } else {
      for (int c = tree.child_begin(node); c < tree.child_end(node); ++c) stack[top++] = tree.child_index(c);
    }
  }
}

/// The requests of this rank's boxes: destination rank and request (box in the receiver's frame).
void make_requests(ExecutionSpace const& space, Context const& context,
                   Kokkos::View<QueryBox const*, MemorySpace> const& boxes,
                   Kokkos::View<double*, MemorySpace> const& rank_boxes, int per_rank, GhostOptions const& options,
                   ScalarView<int>& destinations, Kokkos::View<GhostRequest*, MemorySpace>& requests) {
  std::size_t const n = boxes.extent(0);
  int const ranks = context.size(), self = context.rank();
  bool const skip_self = !options.shift_positions || !options.periodic.enabled;
  bool const periodic = options.periodic.enabled;
  Kokkos::Array<double, 3> length{options.periodic.length[0], options.periodic.length[1], options.periodic.length[2]};
  ScalarView<std::size_t> offsets("kfmm::neighbors::request_offsets", n + 1);
  Kokkos::parallel_for(
      "kfmm::neighbors::count_requests", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n), KOKKOS_LAMBDA(std::size_t i) {
        std::size_t count = 0;
        for_each_partner(boxes(i), rank_boxes, ranks, per_rank, self, skip_self, periodic, length.data(),
                         [&](int, int) { ++count; });
        offsets(i) = count;
      });
  std::size_t const total = exclusive_scan_in_place(space, offsets, n + 1);
  destinations = ScalarView<int>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::neighbors::request_ranks"), total);
  requests = Kokkos::View<GhostRequest*, MemorySpace>(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::neighbors::requests"), total);
  auto const dest = destinations;
  auto const req = requests;
  Kokkos::parallel_for(
      "kfmm::neighbors::fill_requests", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n), KOKKOS_LAMBDA(std::size_t i) {
        std::size_t slot = offsets(i);
        QueryBox const box = boxes(i);
        for_each_partner(box, rank_boxes, ranks, per_rank, self, skip_self, periodic, length.data(),
                         [&](int r, int image) {
                           GhostRequest q;
                           for (int k = 0; k < 3; ++k) {
                             // The box in the receiver's frame: the image x + s·L lies in the
                             // box exactly when x lies in the box shifted by −s·L.
                             double const shift = periodic ? image_shift(image, k) * length[k] : 0.0;
                             q.lo[k] = box.lo[k] - shift;
                             q.hi[k] = box.hi[k] - shift;
                           }
                           q.radius = box.radius;
                           q.image = image;
                           dest(slot) = r;
                           req(slot) = q;
                           ++slot;
                         });
      });
  space.fence();
}

/// Result keys (source rank << 36 | image << 31 | sorted point) of the received requests,
/// sorted and without repeats.
ScalarView<std::uint64_t> answer_requests(ExecutionSpace const& space, PointTree const& t,
                                          Kokkos::View<GhostRequest*, MemorySpace> const& received,
                                          ScalarView<int> const& source, bool keep_image) {
  std::size_t const n = received.extent(0);
  ScalarView<std::size_t> offsets("kfmm::neighbors::answer_offsets", n + 1);
  auto const tree = t.tree;
  auto const pos = t.pos, lo = t.lo, hi = t.hi;
  int const points = t.n;
  Kokkos::parallel_for(
      "kfmm::neighbors::count_answers", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n), KOKKOS_LAMBDA(std::size_t j) {
        std::size_t count = 0;
        for_each_point_in_range(received(j), tree, pos, lo, hi, points, [&](int) { ++count; });
        offsets(j) = count;
      });
  std::size_t const total = exclusive_scan_in_place(space, offsets, n + 1);
  if (total > std::size_t(UINT32_MAX))
    fail("ghost import: {} (point, request) matches on one rank exceed the 32-bit sort index; use smaller radii or "
         "more MPI ranks",
         total);
  ScalarView<std::uint64_t> keys(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::neighbors::answer_keys"), total);
  Kokkos::parallel_for(
      "kfmm::neighbors::fill_answers", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n), KOKKOS_LAMBDA(std::size_t j) {
        std::size_t slot = offsets(j);
        std::uint64_t const image = keep_image ? std::uint64_t(received(j).image) : 0;
        std::uint64_t const prefix = (std::uint64_t(source(j)) << 36) | (image << 31);
        for_each_point_in_range(received(j), tree, pos, lo, hi, points,
                                [&](int i) { keys(slot++) = prefix | std::uint64_t(i); });
      });
  ScalarView<std::uint32_t> permutation(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::neighbors::answer_perm"),
                                        total);
  KeySorter<MemorySpace, std::uint32_t>().sort(space, keys, permutation, total);
  ScalarView<std::size_t> unique("kfmm::neighbors::answer_unique", total + 1);
  Kokkos::parallel_for(
      "kfmm::neighbors::mark_unique", Kokkos::RangePolicy<ExecutionSpace>(space, 0, total),
      KOKKOS_LAMBDA(std::size_t i) { unique(i) = (i == 0 || keys(i) != keys(i - 1)) ? 1 : 0; });
  std::size_t const count = exclusive_scan_in_place(space, unique, total + 1);
  ScalarView<std::uint64_t> result(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::neighbors::answers"), count);
  Kokkos::parallel_for(
      "kfmm::neighbors::compact_answers", Kokkos::RangePolicy<ExecutionSpace>(space, 0, total),
      KOKKOS_LAMBDA(std::size_t i) {
        if (i == 0 || keys(i) != keys(i - 1)) result(unique(i)) = keys(i);
      });
  space.fence();
  return result;
}

/// One entry per element: the rank each block of `offsets` (ranks + 1 entries) came from.
ScalarView<int> ranks_of_blocks(std::vector<std::size_t> const& offsets, char const* label) {
  std::vector<int> ranks(offsets.back());
  for (std::size_t r = 0; r + 1 < offsets.size(); ++r)
    for (std::size_t i = offsets[r]; i < offsets[r + 1]; ++i) ranks[i] = static_cast<int>(r);
  ScalarView<int> view(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), ranks.size());
  Kokkos::deep_copy(view, Kokkos::View<int const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(ranks.data(), ranks.size()));
  return view;
}

/// The reply payload of each answer key: destination, (shifted) position, velocity, mass, id, image.
void pack_replies(ExecutionSpace const& space, PointTree const& t, Particles<MemorySpace> const& local,
                  ScalarView<std::uint64_t> const& answers, GhostOptions const& options, ScalarView<int> const& dest,
                  Ghosts<MemorySpace>& out) {
  std::size_t const n = answers.extent(0);
  auto alloc = [](char const* label) { return Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)); };
  out.pos = Vec3View<double>(alloc("kfmm::neighbors::reply_pos"), n);
  out.vel = Vec3View<double>(alloc("kfmm::neighbors::reply_vel"), n);
  out.mass = ScalarView<double>(alloc("kfmm::neighbors::reply_mass"), n);
  out.id = ScalarView<std::uint64_t>(alloc("kfmm::neighbors::reply_id"), n);
  out.image = ScalarView<int>(alloc("kfmm::neighbors::reply_image"), n);
  auto const pos = out.pos, vel = out.vel;
  auto const mass = out.mass;
  auto const id = out.id;
  auto const image = out.image;
  auto const sorted = t.pos;
  auto const order = t.order;
  auto const lpos = local.pos, lvel = local.vel;
  auto const lmass = local.mass;
  auto const lid = local.id;
  bool const shift = options.shift_positions && options.periodic.enabled;
  Kokkos::Array<double, 3> length{options.periodic.length[0], options.periodic.length[1], options.periodic.length[2]};
  Kokkos::parallel_for(
      "kfmm::neighbors::pack_replies", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n), KOKKOS_LAMBDA(std::size_t u) {
        std::uint64_t const key = answers(u);
        int const i = static_cast<int>(key & ((std::uint64_t(1) << 31) - 1));
        int const code = shift ? static_cast<int>((key >> 31) & 31) : unshifted_image;
        std::size_t const original = order(i);
        dest(u) = static_cast<int>(key >> 36);
        for (int k = 0; k < 3; ++k) {
          pos(u, k) = shift ? sorted(i, k) + image_shift(code, k) * length[k] : lpos(original, k);
          vel(u, k) = lvel(original, k);
        }
        mass(u) = lmass(original);
        id(u) = lid(original);
        image(u) = code;
      });
  space.fence();
}

}  // namespace detail

Ghosts<MemorySpace> import_ghosts(ExecutionSpace const& space, Context const& context,
                                  Particles<MemorySpace> const& local,
                                  Kokkos::View<QueryBox const*, MemorySpace> const& boxes, GhostOptions const& options) {
  std::string error;
  PeriodicBox const& periodic = options.periodic;
  if (options.boxes_per_rank < 1 || options.boxes_per_rank > 4096)
    error = fmt::format("ghost import: boxes_per_rank = {} must be in [1, 4096]", options.boxes_per_rank);
  else if (options.leaf_size < 1)
    error = fmt::format("ghost import: leaf_size = {} must be at least 1", options.leaf_size);
  else if (context.size() >= (1 << 28))
    error = fmt::format("ghost import: {} ranks exceed the 2^28 its result keys can name", context.size());
  if (error.empty() && periodic.enabled)
    for (int k = 0; k < 3; ++k)
      if (!(std::isfinite(periodic.length[k]) && periodic.length[k] > 0)) {
        error = fmt::format("ghost import: periodic box length {} along {} must be finite and positive",
                            periodic.length[k], "xyz"[k]);
        break;
      }
  if (error.empty()) {
    std::size_t const bad = detail::first_bad_box(space, boxes);
    if (bad < boxes.extent(0)) {
      Kokkos::View<QueryBox*, Kokkos::HostSpace> one("kfmm::neighbors::bad_box", 1);
      Kokkos::deep_copy(one, Kokkos::subview(boxes, Kokkos::make_pair(bad, bad + 1)));
      QueryBox const b = one(0);
      error = fmt::format("ghost import: query box {} = [{}, {}, {}]..[{}, {}, {}] with radius {} is invalid; it needs "
                          "lo <= hi and a radius >= 0",
                          bad, b.lo[0], b.lo[1], b.lo[2], b.hi[0], b.hi[1], b.hi[2], b.radius);
    }
  }
  if (error.empty() && periodic.enabled) {
    std::size_t const bad = detail::first_outside_box(space, local.pos, local.num, periodic);
    if (bad < local.num) {
      double p[3];
      for (int k = 0; k < 3; ++k) {
        Kokkos::View<double*, Kokkos::HostSpace> one("kfmm::neighbors::bad_position", 1);
        Kokkos::deep_copy(one, Kokkos::subview(local.pos, Kokkos::make_pair(bad, bad + 1), k));
        p[k] = one(0);
      }
      error = fmt::format("ghost import: particle {} at ({}, {}, {}) lies outside the periodic box [0, {}) x [0, {}) x "
                          "[0, {}); wrap positions into the box first",
                          bad, p[0], p[1], p[2], periodic.length[0], periodic.length[1], periodic.length[2]);
    }
  }
  PointTree tree;
  if (error.empty()) {
    try {
      tree = build_point_tree(space, local.pos, local.num, options.leaf_size);
    } catch (std::exception const& e) {
      error = e.what();
    }
  }
  agree_on_error(context, error);

  // Every rank's union box and chunk boxes.
  int const per_rank = options.boxes_per_rank;
  std::vector<double> mine = detail::chunk_boxes(space, tree, per_rank);
  std::vector<double> with_union(6 * std::size_t(per_rank + 1));
  for (int k = 0; k < 3; ++k) {
    with_union[k] = DBL_MAX;
    with_union[3 + k] = -DBL_MAX;
  }
  for (int c = 0; c < per_rank; ++c)
    for (int k = 0; k < 3; ++k) {
      with_union[6 * (c + 1) + k] = mine[6 * c + k];
      with_union[6 * (c + 1) + 3 + k] = mine[6 * c + 3 + k];
      with_union[k] = std::min(with_union[k], mine[6 * c + k]);
      with_union[3 + k] = std::max(with_union[3 + k], mine[6 * c + 3 + k]);
    }
  std::vector<double> all(with_union.size() * context.size());
  MPI_Allgather(with_union.data(), static_cast<int>(with_union.size()), MPI_DOUBLE, all.data(),
                static_cast<int>(with_union.size()), MPI_DOUBLE, context.comm());
  Kokkos::View<double*, MemorySpace> rank_boxes(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::neighbors::rank_boxes"),
                                                all.size());
  Kokkos::deep_copy(rank_boxes, Kokkos::View<double const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(all.data(), all.size()));

  // Requests out, answers back.
  ScalarView<int> destinations;
  Kokkos::View<detail::GhostRequest*, MemorySpace> requests;
  detail::make_requests(space, context, boxes, rank_boxes, per_rank, options, destinations, requests);
  // The requests go once: one message per owner asked, its count inside (a bad destination,
  // a programming error, agreed right after).
  std::string request_error;
  Kokkos::View<detail::GhostRequest*, MemorySpace> received;
  ExchangePlan<MemorySpace> const request_plan = ExchangePlan<MemorySpace>::send_once(
      context, destinations, destinations.extent(0), requests,
      [&received](std::size_t count) {
        received = Kokkos::View<detail::GhostRequest*, MemorySpace>("kfmm::neighbors::received_requests", count);
        return received;
      },
      request_error);
  agree_on_error(context, request_error);
  auto const source = detail::ranks_of_blocks(request_plan.import_offsets(), "kfmm::neighbors::request_sources");
  ScalarView<std::uint64_t> answers;
  collectively(context, [&] {
    answers = detail::answer_requests(space, tree, received, source, options.shift_positions && periodic.enabled);
  });

  Ghosts<MemorySpace> packed;
  ScalarView<int> reply_ranks(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::neighbors::reply_ranks"),
                              answers.extent(0));
  detail::pack_replies(space, tree, local, answers, options, reply_ranks, packed);
  // The answers go to the ranks that asked: their counts between those partners, no consensus.
  auto const reply_plan = ExchangePlan<MemorySpace>::reply_to(context, request_plan, reply_ranks, reply_ranks.extent(0));
  Ghosts<MemorySpace> ghosts;
  ghosts.pos = reply_plan.exchange(packed.pos);
  ghosts.vel = reply_plan.exchange(packed.vel);
  ghosts.mass = reply_plan.exchange(packed.mass);
  ghosts.id = reply_plan.exchange(packed.id);
  ghosts.image = reply_plan.exchange(packed.image);
  ghosts.rank = detail::ranks_of_blocks(reply_plan.import_offsets(), "kfmm::neighbors::ghost_ranks");
  ghosts.num = reply_plan.num_import();
  return ghosts;
}

}  // namespace kfmm
