#include <kfmm/core/binary_search.hpp>
#include <kfmm/core/error.hpp>
#include <kfmm/core/fault_injection.hpp>
#include <kfmm/core/kernel_shape.hpp>
#include <kfmm/core/view_growth.hpp>
#include <kfmm/fmm/dual_tree_walk.hpp>
#include <kfmm/fmm/multi_index.hpp>

#include <kfmm/core/format.hpp>

#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace kfmm {

namespace {

// The walk's lists change length from step to step with the particles: they grow to a quarter
// more than asked, so that the next steps fit. grow_lists keeps the `used` rows (the M2L and P2P
// lists, appended to level by level; what lies beyond is written before it is read);
// grow_scratch keeps nothing (what a level rewrites before it reads: the counts, the
// candidates, the next level's open pairs).
template <class View>
void grow_lists(View& view, std::size_t n, std::size_t used) {
  // + 1024: a list that starts short (M2P) must not grow at every step either.
  if (view.extent(0) < n) grow_appending(view, n + n / 4 + 1024, used);
}
template <class View>
void grow_scratch(View& view, std::size_t n, char const* label) {
  grow_discarding(view, n, label, 4);
}

// Chunk c of a level starts at the first group whose candidates start at or after c · chunk
// (bounds(c, 0)), at candidate bounds(c, 1); bounds(chunks, ·) closes the level.
template <class Bounds>
void find_chunk_bounds(ExecutionSpace const& space, ScalarView<int> const& offset, int groups, int chunks,
                       long long chunk, Bounds const& bounds) {
  Kokkos::parallel_for(
      "kfmm::fmm::walk::chunks", Kokkos::RangePolicy<ExecutionSpace>(space, 0, chunks + 1), KOKKOS_LAMBDA(int c) {
        int const g = c == chunks ? groups : lower_bound(offset, 0, groups, c * chunk);
        bounds(c, 0) = g;
        bounds(c, 1) = offset(g);
      });
}

}  // namespace


namespace {

constexpr int max_children = 8;


// Exclusive scan in place; returns the total (which may exceed the int range: callers check).
long long exclusive_scan(ExecutionSpace const& space, ScalarView<int> const& values, int n, char const* label) {
  long long total = 0;
  Kokkos::parallel_scan(
      label, Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(int i, long long& sum, bool final) {
        long long const v = values(i);
        if (final) values(i) = static_cast<int>(sum);
        sum += v;
      },
      total);
  return total;
}

constexpr int num_lists = 4;  // M2L, P2P, the next level's open pairs, M2P (indexed by PairKind)
char const* const list_names[num_lists] = {"M2L", "P2P", "open-pair", "M2P"};

// How a pair (a, b) is classified.
enum PairKind { pair_m2l = 0, pair_p2p = 1, pair_open = 2, pair_m2p = 3, pair_none = 4 };

// A group of a level's chunk as the count and fill passes see it: its target node, the
// target's children (the root pair: the root itself), where its candidates start in the chunk's
// scratch, and how many each target child has.
struct ChunkGroup {
  int A, na, base, per_child;
};

struct WalkView {
  ScalarView<int> cbegin, cend, cindex, flags;
  Vec3View<double> centre;
  ScalarView<double> radius;
  ScalarView<double> mass;
  ScalarView<double> allowed;  // relative criterion: per target node (empty: angle only)
  ScalarView<double> power_radius;  // relative criterion: per source node
  ScalarView<double> scale;
  Kokkos::View<double**, MemorySpace> multipole_power;  // per source node (may be empty)
  double theta;
  double kernel_reach;  // pairs closer than this (the spline's support h) are never expanded
  int order;
  bool relative;
  bool harmonic;  // multipole_power given
  double coherence_floor;  // OpeningTest::coherence_floor
  double m2p_theta;        // OpeningTest::m2p_theta (0: no M2P)
  static constexpr int max_terms = 10;  // p + 2 for p ≤ 8
  // C(order + 1, n), set on the host: a per-pair update binomial·(q − n)/(n + 1) would put a
  // chain of dependent divisions into every estimate.
  double binomial[max_terms];
  // Per source node, C(q, n) T_n in absolute units (set by set_coefficients for the nodes a
  // level tests): the estimate of a pair is then one product per term.
  Kokkos::View<double* [max_terms], Kokkos::LayoutRight, MemorySpace> coefficient;

  KOKKOS_INLINE_FUNCTION int num_children(int node) const {
    return (flags(node) & node_leaf) ? 1 : cend(node) - cbegin(node);
  }
  KOKKOS_INLINE_FUNCTION int child(int node, int j) const {
    return (flags(node) & node_leaf) ? node : cindex(cbegin(node) + j);
  }
  // What classify() needs of the target side, loaded once for all its candidate sources.
  struct Target {
    int node, flags;
    double x, y, z, radius, allowed;
    double radius_power[max_terms];  // relative criterion: radius^k, k = 0 … p + 1
    double m2p_limit2;  // a leaf: m2p_theta²; otherwise +∞ (never an M2P target)
  };
  KOKKOS_INLINE_FUNCTION Target target(int a) const {
    int const f = flags(a);
    Target t{a,
             f,
             centre(a, 0),
             centre(a, 1),
             centre(a, 2),
             radius(a),
             relative && !(f & (node_remote | node_idle)) ? allowed(a) : 0.0,
             {},
             (f & node_leaf) && m2p_theta > 0 ? m2p_theta * m2p_theta : Kokkos::Experimental::infinity_v<double>};
    if (relative) {
      t.radius_power[0] = 1;
      for (int k = 1; k <= order + 1; ++k) t.radius_power[k] = t.radius_power[k - 1] * t.radius;
    }
    return t;
  }
  // C(q, n) T_n of source node b (q = p + 1): T_0 = M_B, T_n = H_n (B's harmonic multipole
  // power) for 1 ≤ n ≤ p, T_q = M_B s_B^q (s_B its power radius); without powers M_B s_B^n.
  KOKKOS_INLINE_FUNCTION void set_coefficients(int b) const {
    int const q = order + 1;
    double const m = mass(b), s = scale(b), pb = power_radius(b);
    double s_n = 1, pb_n = 1;
    for (int n = 0; n <= q; ++n) {
      double const T = n == 0 || n == q || !harmonic ? m * pb_n : multipole_power(b, n) * s_n;
      coefficient(b, n) = binomial[n] * T;
      s_n *= s;
      pb_n *= pb;
    }
  }
  // The relative criterion's estimate of the M2L error per unit G (OpeningTest): the largest of
  // the terms C(p+1, n) T_n r_a^(p+1−n) / d^(p+1), over d², from 1/d² (and 1/d for odd p + 1).
  // Q = p + 1 is a template argument so that the loops over the terms unroll (no per-term branch
  // on the order).
  template <int Q>
  KOKKOS_INLINE_FUNCTION double error_estimate_over_d2(Target const& a, int b, double inv_d2, double inv_d) const {
    double e = 0;
    for (int n = 0; n <= Q; ++n) {
      double const term = coefficient(b, n) * a.radius_power[Q - n];
      e = term > e ? term : e;
    }
    return e * inverse_power<Q + 2>(inv_d2, inv_d);
  }
  // d^−K from 1/d² and 1/d: (1/d²)^(K/2) by squaring (a chain of K/2 products would be the
  // longest in the estimate), times 1/d for odd K.
  template <int K>
  KOKKOS_INLINE_FUNCTION static double inverse_power(double inv_d2, double inv_d) {
    if constexpr (K == 0)
      return 1.0;
    else if constexpr (K == 1)
      return inv_d;
    else if constexpr (K % 2)
      return inv_d * inverse_power<K - 1>(inv_d2, inv_d);
    else if constexpr (K % 4 == 0) {
      double const half = inverse_power<K / 2>(inv_d2, inv_d);
      return half * half;
    } else {
      return inv_d2 * inverse_power<K - 2>(inv_d2, inv_d);
    }
  }
  // Calls f(std::integral_constant<int, p + 1>) for the order of this walk (1 ≤ p ≤ 8, checked
  // by run()), so that what f instantiates has p + 1 as a compile-time constant.
  template <class F>
  KOKKOS_INLINE_FUNCTION auto with_terms(F const& f) const -> decltype(f(std::integral_constant<int, 9>{})) {
    switch (order + 1) {
      case 2: return f(std::integral_constant<int, 2>{});
      case 3: return f(std::integral_constant<int, 3>{});
      case 4: return f(std::integral_constant<int, 4>{});
      case 5: return f(std::integral_constant<int, 5>{});
      case 6: return f(std::integral_constant<int, 6>{});
      case 7: return f(std::integral_constant<int, 7>{});
      case 8: return f(std::integral_constant<int, 8>{});
      default: return f(std::integral_constant<int, 9>{});
    }
  }
  // The same, for the order of this walk.
  KOKKOS_INLINE_FUNCTION double error_estimate_over_d2(Target const& a, int b, double inv_d2, double inv_d) const {
    return with_terms(
        [&](auto terms) { return error_estimate_over_d2<decltype(terms)::value>(a, b, inv_d2, inv_d); });
  }
  // r = r_a + r_b. Every term is at most M_B ((r_a + r_b)/d)^(p+1) (each source moment is at most
  // M_B r_b^n; the binomial sum), so a pair under that bound passes without the estimate.
  KOKKOS_INLINE_FUNCTION double error_bound(int b, double d2, double r) const {
    double const rho2 = r * r / d2;
    double bound = mass(b);
    for (int k = 2; k <= order + 1; k += 2) bound *= rho2;
    if ((order + 1) % 2) bound *= compat::math::sqrt(rho2);
    return bound;
  }
  KOKKOS_INLINE_FUNCTION bool error_allowed(Target const& a, int b, double d2, double r) const {
    if (!relative) return true;
    if (error_bound(b, d2, r) <= a.allowed * d2) return true;
    double const inv_d2 = 1.0 / d2;
    return error_estimate_over_d2(a, b, inv_d2, compat::math::sqrt(inv_d2)) <= a.allowed;
  }
  // Whether leaf a is too large for an M2L from b: r_a > m2p_theta · d and r_a > 2 r_b. Such a
  // pair's error comes from a's extent and adds up over the many small sources that each pass the
  // estimate (the walk opens b, not the leaf): it goes to M2P if b is an inner node, else to P2P
  // (exact, and about as cheap), or is opened. Pairs of similar size are the ordinary pairs of
  // the walk, few per target, whose errors the estimate bounds: they stay M2L.
  static constexpr double m2p_size_ratio = 2;
  KOKKOS_INLINE_FUNCTION static bool large_target(Target const& a, double d2, double rb) {
    return a.radius * a.radius > a.m2p_limit2 * d2 && a.radius > m2p_size_ratio * rb;
  }
  // For a pair with large_target(a, d²): b's multipole evaluated at each particle of a (M2P)
  // needs b to pass the angle test and the kernel's reach from a's nearest possible particle, at
  // d' = d − r_a. Returns −1 where it does not; else the relative criterion's estimate there,
  // C(p+1, p+1) T_{p+1} / d'^(p+3) (error_estimate_over_d2() without a's extent, compared with
  // the same allowance), or 0 under the angle test alone.
  template <int Q>
  KOKKOS_INLINE_FUNCTION double m2p_estimate(Target const& a, int b, double d2) const {
    double const d = compat::math::sqrt(d2);
    double const near = d - a.radius, rb = radius(b);
    if (!(near > 0) || !(rb < theta * near)) return -1;
    if (kernel_reach != 0.0 && near - rb < kernel_reach) return -1;
    if (!relative) return 0;
    double const inv = 1.0 / near;
    return coefficient(b, Q) * inverse_power<Q + 2>(inv * inv, inv);
  }
  KOKKOS_INLINE_FUNCTION double m2p_estimate(Target const& a, int b, double d2) const {
    return with_terms([&](auto terms) { return m2p_estimate<decltype(terms)::value>(a, b, d2); });
  }
  // What a target's allowance is divided by: max(c, coherence_floor), where c is the coherence of
  // its candidate sources' errors: over the candidates b that pass the angle test, weighted by
  // their error estimates (sums W, D = Σ w n, Q = Σ w n nᵀ with n the unit vector from the target
  // to b), the larger of |mean direction| and the normalised norm of the traceless mean n nᵀ. 1
  // when the errors come from one direction (or one axis), near 0 when from all around, where
  // they cancel at the target instead of adding up. 1 without candidates.
  KOKKOS_INLINE_FUNCTION double coherence(double W, double const* D, double const* Q) const {
    if (!(W > 0)) return 1;
    double const dipole = compat::math::sqrt(D[0] * D[0] + D[1] * D[1] + D[2] * D[2]) / W;
    double q2 = 0;  // ‖mean n nᵀ − I/3‖², 2/3 for a single direction
    for (int k = 0; k < 3; ++k) q2 += (Q[k] / W - 1.0 / 3) * (Q[k] / W - 1.0 / 3);
    for (int k = 3; k < 6; ++k) q2 += 2 * (Q[k] / W) * (Q[k] / W);
    double const quadrupole = compat::math::sqrt(1.5 * q2);
    double c = dipole > quadrupole ? dipole : quadrupole;
    return c > coherence_floor ? c : coherence_floor;
  }
  // Pair kinds counted in registers: n[kind] in memory would chain each update to the last.
  struct KindCounts {
    int m2l = 0, p2p = 0, open = 0, m2p = 0;
    KOKKOS_INLINE_FUNCTION void add(int kind) {
      m2l += kind == pair_m2l;
      p2p += kind == pair_p2p;
      open += kind == pair_open;
      m2p += kind == pair_m2p;
    }
    KOKKOS_INLINE_FUNCTION void add_to(int* n) const {
      n[pair_m2l] += m2l;
      n[pair_p2p] += p2p;
      n[pair_open] += open;
      n[pair_m2p] += m2p;
    }
  };
  // Kinds of candidates that pass the angle test and the kernel's reach under the relative
  // criterion with coherence, while the target's coherence is not known yet: M2L (or, for a
  // large target, M2P) if the error allows it, else what the pair falls back to.
  static constexpr int pending_p2p = 5, pending_open = 6, pending_m2p_p2p = 7, pending_m2p_open = 8;
  // The pending kind of a candidate: M2P with estimate m2p ≥ 0 if a is large for it, else M2L
  // with estimate m2l ≥ 0, else (< 0 both) decided now: P2P between leaves, or opened.
  KOKKOS_INLINE_FUNCTION static int pending_kind(bool leaves, double m2l, double m2p) {
    if (m2p >= 0) return leaves ? pending_m2p_p2p : pending_m2p_open;
    if (m2l >= 0) return leaves ? pending_p2p : pending_open;
    return leaves ? pair_p2p : pair_open;
  }

  // Classifies the candidates of target `a`, the sources node(base … base + count), into
  // kind(c …) in order and adds them to the counts n. With the relative criterion and
  // coherence, one loop tests the angle, computes each candidate's estimate once for both the
  // coherence and the decision and keeps it in value(c …); a second loop decides with the
  // coherent allowance.
  KOKKOS_INLINE_FUNCTION void classify_candidates(Target const& a, ScalarView<int> const& node, int base, int count,
                                                  int c, ScalarView<std::uint8_t> const& kinds,
                                                  ScalarView<double> const& value, int* n) const {
    if (!coherent(a)) {
      KindCounts counts;
      for (int t = 0; t < count; ++t) {
        PairKind const kind = classify(a, node(base + t));
        kinds(c + t) = static_cast<std::uint8_t>(kind);
        counts.add(kind);
      }
      counts.add_to(n);
      return;
    }
    with_terms([&](auto terms) {
      classify_coherent<decltype(terms)::value>(a, node, base, count, c, kinds, value, n);
    });
  }
  // classify_candidates() under the relative criterion with coherence, at Terms = p + 1.
  template <int Terms>
  KOKKOS_INLINE_FUNCTION void classify_coherent(Target const& a, ScalarView<int> const& node, int base, int count,
                                                int c, ScalarView<std::uint8_t> const& kinds,
                                                ScalarView<double> const& value, int* n) const {
    bool const a_leaf = (a.flags & node_leaf) != 0;
    double const theta2 = theta * theta;
    double W = 0, D0 = 0, D1 = 0, D2 = 0, Qxx = 0, Qyy = 0, Qzz = 0, Qxy = 0, Qxz = 0, Qyz = 0;
    for (int t = 0; t < count; ++t) {
      int const b = node(base + t);
      bool const leaves = a_leaf && (flags(b) & node_leaf);
      int kind;
      double const dx = a.x - centre(b, 0), dy = a.y - centre(b, 1), dz = a.z - centre(b, 2);
      double const d2 = dx * dx + dy * dy + dz * dz;
      double const r = a.radius + radius(b);
      bool const large = large_target(a, d2, radius(b));
      double m2l = -1, m2p = -1;
      if (a.node != b && large && !(flags(b) & node_leaf)) m2p = m2p_estimate<Terms>(a, b, d2);
      if (a.node != b && r * r < theta2 * d2) {
        double const inv_d2 = 1.0 / d2;
        double const inv = compat::math::sqrt(inv_d2);
        double const weight = error_estimate_over_d2<Terms>(a, b, inv_d2, inv);
        double const ux = -(dx * inv), uy = -(dy * inv), uz = -(dz * inv);  // from a to b
        W += weight;
        D0 += weight * ux;
        D1 += weight * uy;
        D2 += weight * uz;
        Qxx += weight * ux * ux;
        Qyy += weight * uy * uy;
        Qzz += weight * uz * uz;
        Qxy += weight * ux * uy;
        Qxz += weight * ux * uz;
        Qyz += weight * uy * uz;
        // The spline kernel is piecewise (see classify()).
        if (!large && (kernel_reach == 0.0 || d2 * inv - r >= kernel_reach)) m2l = weight;
      }
      kind = pending_kind(leaves, m2l, m2p);
      value(c + t) = m2p >= 0 ? m2p : m2l;
      kinds(c + t) = static_cast<std::uint8_t>(kind);
    }
    double const D[3] = {D0, D1, D2}, Q[6] = {Qxx, Qyy, Qzz, Qxy, Qxz, Qyz};
    decide_pending(a.allowed / coherence(W, D, Q), c, count, kinds, value, n);
  }
  // The second loop of the coherent classification: decides the pending candidates c … c + count
  // with the coherent allowance and adds every kind to the counts n.
  KOKKOS_INLINE_FUNCTION static void decide_pending(double allowed, int c, int count,
                                                    ScalarView<std::uint8_t> const& kinds,
                                                    ScalarView<double> const& value, int* n) {
    KindCounts counts;
    for (int i = c; i < c + count; ++i) {
      int kind = kinds(i);
      if (kind >= pending_p2p) {
        bool const leaves = kind == pending_p2p || kind == pending_m2p_p2p;
        kind = value(i) <= allowed ? (kind >= pending_m2p_p2p ? pair_m2p : pair_m2l) : leaves ? pair_p2p : pair_open;
        kinds(i) = static_cast<std::uint8_t>(kind);
      }
      counts.add(kind);
    }
    counts.add_to(n);
  }
  // classify_coherent() for L target children of one group at once, a SIMD lane each (the CPU
  // shape): they share their candidates, so each candidate's centre, radius and coefficients
  // are loaded once and the L estimates, weights and coherence sums vectorise without gathers.
  // Lane l is lane_target[l], child `slot[l]` of the group, whose candidates are stored from
  // base + slot[l] · count; lanes ≥ active repeat lane 0 and are not stored. Each lane computes
  // what classify_coherent() computes for its target, in the same order (a candidate that fails
  // the angle test adds zero weight), so the decisions are the same.
  template <int Terms, int L>
  KOKKOS_INLINE_FUNCTION void classify_coherent_lanes(Target const* lane_target, int const* slot, int active,
                                                      ScalarView<int> const& node, int base, int count,
                                                      ScalarView<std::uint8_t> const& kinds,
                                                      ScalarView<double> const& value, int (*n)[num_lists]) const {
    double ax[L], ay[L], az[L], ar[L], rp[Terms + 1][L];
    int an[L];
    bool aleaf[L];
    for (int l = 0; l < L; ++l) {
      Target const& a = lane_target[l < active ? l : 0];
      ax[l] = a.x;
      ay[l] = a.y;
      az[l] = a.z;
      ar[l] = a.radius;
      an[l] = a.node;
      aleaf[l] = (a.flags & node_leaf) != 0;
      for (int k = 0; k <= Terms; ++k) rp[k][l] = a.radius_power[k];
    }
    double const theta2 = theta * theta;
    double W[L] = {}, D0[L] = {}, D1[L] = {}, D2[L] = {}, Qxx[L] = {}, Qyy[L] = {}, Qzz[L] = {}, Qxy[L] = {},
           Qxz[L] = {}, Qyz[L] = {};
    for (int t = 0; t < count; ++t) {
      int const b = node(base + t);
      double const bx = centre(b, 0), by = centre(b, 1), bz = centre(b, 2), rb = radius(b);
      bool const bleaf = (flags(b) & node_leaf) != 0;
      double coef[Terms + 1];
      for (int k = 0; k <= Terms; ++k) coef[k] = coefficient(b, k);
      // Short loops over the lanes, each vectorised as it stands (KFMM_LANE_LOOP).
      double dx[L], dy[L], dz[L], d2[L], r[L], e[L], weight[L];
      KFMM_LANE_LOOP
      for (int l = 0; l < L; ++l) {
        dx[l] = ax[l] - bx;
        dy[l] = ay[l] - by;
        dz[l] = az[l] - bz;
        d2[l] = dx[l] * dx[l] + dy[l] * dy[l] + dz[l] * dz[l];
        r[l] = ar[l] + rb;
        e[l] = 0;
      }
      for (int k = 0; k <= Terms; ++k) {
        KFMM_LANE_LOOP
        for (int l = 0; l < L; ++l) {
          double const term = coef[k] * rp[Terms - k][l];
          e[l] = term > e[l] ? term : e[l];
        }
      }
      KFMM_LANE_LOOP
      for (int l = 0; l < L; ++l) {
        bool const pass = (an[l] != b) & (r[l] * r[l] < theta2 * d2[l]);
        double const inv_d2 = 1.0 / d2[l];  // infinite for coincident centres: such a pair fails
        double const inv = compat::math::sqrt(inv_d2);
        double const w = pass ? e[l] * inverse_power<Terms + 2>(inv_d2, inv) : 0.0;
        double const u = pass ? inv : 0.0;  // zero weight times a finite direction adds nothing
        double const ux = -(dx[l] * u), uy = -(dy[l] * u), uz = -(dz[l] * u);
        W[l] += w;
        D0[l] += w * ux;
        D1[l] += w * uy;
        D2[l] += w * uz;
        Qxx[l] += w * ux * ux;
        Qyy[l] += w * uy * uy;
        Qzz[l] += w * uz * uz;
        Qxy[l] += w * ux * uy;
        Qxz[l] += w * ux * uz;
        Qyz[l] += w * uy * uz;
        bool const pending = pass & ((kernel_reach == 0.0) | (d2[l] * inv - r[l] >= kernel_reach));
        weight[l] = pending ? w : -1.0;  // < 0: not pending (a large target is decided below)
      }
      for (int l = 0; l < active; ++l) {
        bool const leaves = aleaf[l] && bleaf;
        // A large target (rare: leaves in sparse regions next to finer ones) as in classify_coherent().
        double m2l = weight[l], m2p = -1;
        if (large_target(lane_target[l], d2[l], rb)) {
          m2l = -1;
          if (an[l] != b && !bleaf) m2p = m2p_estimate<Terms>(lane_target[l], b, d2[l]);
        }
        kinds(base + slot[l] * count + t) = static_cast<std::uint8_t>(pending_kind(leaves, m2l, m2p));
        value(base + slot[l] * count + t) = m2p >= 0 ? m2p : m2l;
      }
    }
    for (int l = 0; l < active; ++l) {
      double const D[3] = {D0[l], D1[l], D2[l]}, Q[6] = {Qxx[l], Qyy[l], Qzz[l], Qxy[l], Qxz[l], Qyz[l]};
      decide_pending(lane_target[l].allowed / coherence(W[l], D, Q), base + slot[l] * count, count, kinds, value,
                     n[slot[l]]);
    }
  }
  // The CPU shape's count pass for group g (target A with na > 1 children, candidates from
  // base, per_child per child): the children under the coherent relative criterion are
  // classified together, a lane each (classify_coherent_lanes), the others one by one; writes
  // their counts to entries and has (slots g · max_children + j). Returns false, doing nothing,
  // where that does not apply: without the coherent relative criterion, or in the GPU shape,
  // whose kernels never instantiate the lanes.
  template <class ExecSpace>
  KOKKOS_INLINE_FUNCTION bool count_group_in_lanes(int g, int A, bool first, int na, ScalarView<int> const& node,
                                                   int base, int per_child, ScalarView<std::uint8_t> const& kinds,
                                                   ScalarView<double> const& value, ScalarView<int> const* entries,
                                                   ScalarView<int> const* has) const {
    if constexpr (gpu_shaped_kernels<ExecSpace>()) {
      return false;
    } else {
      if (!relative || coherence_floor >= 1) return false;
      int n[max_children][num_lists] = {};
      Target lane_target[max_children];
      int slot[max_children], active = 0;
      for (int j = 0; j < na; ++j) {
        Target const a = target(first ? A : child(A, j));
        if (coherent(a)) {
          lane_target[active] = a;
          slot[active++] = j;
        } else {
          classify_candidates(a, node, base, per_child, base + j * per_child, kinds, value, n[j]);
        }
      }
      if (active > 1) {
        with_terms([&](auto terms) {
          classify_coherent_lanes<decltype(terms)::value, max_children>(lane_target, slot, active, node, base,
                                                                        per_child, kinds, value, n);
        });
      } else if (active == 1) {
        classify_candidates(lane_target[0], node, base, per_child, base + slot[0] * per_child, kinds, value,
                            n[slot[0]]);
      }
      for (int j = 0; j < max_children; ++j) store_counts(entries, has, g, j, n[j]);
      return true;
    }
  }
  // Group g of a level whose chunk's candidates start at c0.
  KOKKOS_INLINE_FUNCTION ChunkGroup chunk_group(ScalarView<int> const& target, ScalarView<int> const& candidate_offset,
                                                bool first, int g, int c0) const {
    int const A = target(g);
    int const na = first ? 1 : num_children(A);
    return {A, na, candidate_offset(g) - c0, (candidate_offset(g + 1) - candidate_offset(g)) / na};
  }
  // Writes the kind counts n of slot g · max_children + j to entries and has (1 if any).
  KOKKOS_INLINE_FUNCTION static void store_counts(ScalarView<int> const* entries, ScalarView<int> const* has, int g,
                                                  int j, int const* n) {
    for (int k = 0; k < num_lists; ++k) {
      entries[k](g * max_children + j) = n[k];
      has[k](g * max_children + j) = n[k] > 0 ? 1 : 0;
    }
  }
  // Whether classify_candidates() takes the coherent path for target a.
  KOKKOS_INLINE_FUNCTION bool coherent(Target const& a) const {
    return relative && coherence_floor < 1 && !(a.flags & (node_remote | node_idle));
  }
  KOKKOS_INLINE_FUNCTION PairKind classify(Target const& a, int b) const {
    if (a.flags & (node_remote | node_idle)) return pair_none;
    int const fb = flags(b);
    if (a.node != b) {
      double const dx = a.x - centre(b, 0), dy = a.y - centre(b, 1), dz = a.z - centre(b, 2);
      double const d2 = dx * dx + dy * dy + dz * dz;
      double const r = a.radius + radius(b);
      // The spline kernel is piecewise: its Taylor series only converges for pairs whose
      // every distance lies beyond the softening support.
      bool const beyond_reach = kernel_reach == 0.0 || compat::math::sqrt(d2) - r >= kernel_reach;
      if (large_target(a, d2, radius(b))) {
        double const e = fb & node_leaf ? -1.0 : m2p_estimate(a, b, d2);
        if (e >= 0 && e <= a.allowed) return pair_m2p;
      } else if (r * r < theta * theta * d2 && beyond_reach && error_allowed(a, b, d2, r)) {
        return pair_m2l;
      }
    }
    if ((a.flags & node_leaf) && (fb & node_leaf)) return pair_p2p;
    return pair_open;
  }
};

}  // namespace

void DualTreeWalk::run(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry,
                       OpeningTest const& test, int root, PairLists& m2l, PairLists& p2p, PairLists& m2p,
                       ImportChildren const& import_children) {
  if (test.allowed.extent(0) > 0 && geometry.power_exponent != test.order + 1)
    fail("DualTreeWalk: the relative criterion at order {} needs the nodes' power radii for exponent {}, "
         "computed for {}; set NodeGeometry::power_exponent before compute_node_geometry",
         test.order, test.order + 1, geometry.power_exponent);
  if (test.allowed.extent(0) > 0 && (test.order < 1 || test.order > 8))
    fail("DualTreeWalk: the relative criterion's estimate supports orders 1…8, got {}", test.order);
  if (test.allowed.extent(0) > 0 && !(test.coherence_floor > 0))
    fail("DualTreeWalk: coherence_floor = {} must be > 0 (≥ 1 turns the coherence off)", test.coherence_floor);
  if (!(test.m2p_theta >= 0))
    fail("DualTreeWalk: m2p_theta = {} must be ≥ 0 (0: no M2P)", test.m2p_theta);
  PairLists* out[num_lists] = {&m2l, &p2p, nullptr, &m2p};
  for (int l : {pair_m2l, pair_p2p, pair_m2p}) {
    out[l]->segment_begin.assign(1, 0);
    out[l]->num_groups = out[l]->num_entries = 0;
    // Room from the first walk on, also for a list that stays empty until a later step (M2P).
    grow_lists(out[l]->target, 1, 0);
    grow_lists(out[l]->offset, 2, 0);
    grow_lists(out[l]->source, 1, 0);
    grow_preserving(out[l]->offset, 1);
  }
  // The first open pair list: (root, root), tested as it is in the first iteration; none
  // without a root (no particles on this rank).
  PairLists* open = &open_[0];
  grow_preserving(open->target, 1);
  grow_preserving(open->offset, 2);
  grow_preserving(open->source, 1);
  open->num_groups = open->num_entries = root >= 0 ? 1 : 0;
  {
    auto target = open->target;
    auto offset = open->offset;
    auto source = open->source;
    Kokkos::parallel_for(
        "kfmm::fmm::walk::start", Kokkos::RangePolicy<ExecutionSpace>(space, 0, 1), KOKKOS_LAMBDA(int) {
          target(0) = root;
          offset(0) = 0;
          offset(1) = root >= 0 ? 1 : 0;
          source(0) = root;
        });
  }
  // A list that would outgrow its int indices is thrown at once by a walk on its own; a
  // distributed walk hands it to the import of the next level, which agrees it across ranks.
  std::string overflow;  // or another failure of this rank's level
  auto const fits = [&](long long needed, char const* what, int level) {
    if (needed <= index_limit_) return true;
    overflow = fmt::format("the dual-tree walk needs {} {} at level {}, more than the 32-bit index limit {}; use "
                           "more MPI ranks or a larger leaf_size",
                           needed, what, level, index_limit_);
    if (!import_children) fail("{}", overflow);
    open->num_groups = open->num_entries = 0;
    return false;
  };
  if (test.allowed.extent(0) > 0) {  // coefficients of this walk's nodes: none yet
    grow_preserving(coefficient_ready_, tree.num_nodes);
    Kokkos::deep_copy(space, coefficient_ready_, 0);
  }
  for (int iteration = 0;; ++iteration) {
    bool const more =
        import_children ? import_children(open->source, open->num_entries, overflow) : open->num_groups > 0;
    if (!more) break;
    // A distributed walk hands a failure of this rank's level to the next import, which agrees
    // it across ranks (a walk on its own throws it at once).
    try {
      fault_injection::point("force.walk");
      // Nodes appended by imports are remote: never targets, their allowance is never read.
      bool const relative = test.allowed.extent(0) > 0;
      auto const& power = geometry.multipole_power;
      bool const harmonic = relative && power.extent(0) > 0;
      if (harmonic && (power.extent(0) < std::size_t(tree.num_nodes) || int(power.extent(1)) != test.order + 1))
        fail("DualTreeWalk: multipole powers for {} nodes of degree ≤ {}, need {} nodes of degree ≤ {}",
             power.extent(0), int(power.extent(1)) - 1, tree.num_nodes, test.order);
      if (relative) grow_preserving(coefficient_, tree.num_nodes);
      WalkView w{tree.child_begin,     tree.child_end,   tree.child_index, geometry.flags,
                       geometry.centre,      geometry.radius,  geometry.mass,    test.allowed,
                       geometry.power_radius, geometry.scale,  power,            test.theta,
                       test.kernel_reach,    test.order,       relative,         harmonic,
                       test.coherence_floor, test.m2p_theta,  {},              coefficient_};
      for (int n = 0, c = 1; n < WalkView::max_terms; ++n) {
        w.binomial[n] = n <= test.order + 1 ? c : 0;
        c = n < test.order + 1 ? c * (test.order + 1 - n) / (n + 1) : 0;
      }
      int const groups = open->num_groups;
      if (!fits(static_cast<long long>(groups) * max_children + 1, "child slots", iteration)) continue;
      auto const target = open->target;
      auto const offset = open->offset;
      auto const source = open->source;
      bool const first = iteration == 0;
      // The candidates of group g: its target children times its sources' children, each
      // classified once by the count pass and stored, so the fill pass only copies.
      grow_scratch(candidate_offset_, groups + 1, "kfmm::walk::candidate_offset");
      auto const candidate_offset = candidate_offset_;
      Kokkos::parallel_for(
          "kfmm::fmm::walk::candidates", Kokkos::RangePolicy<ExecutionSpace>(space, 0, groups), KOKKOS_LAMBDA(int g) {
            int per_child = 0;
            for (int e = offset(g); e < offset(g + 1); ++e) per_child += first ? 1 : w.num_children(source(e));
            candidate_offset(g) = (first ? 1 : w.num_children(target(g))) * per_child;
          });
      long long const candidates =
          exclusive_scan(space, candidate_offset, groups, "kfmm::fmm::walk::scan_candidates");
      if (!fits(candidates + 1, "walk candidates", iteration)) continue;

      Kokkos::deep_copy(space, Kokkos::subview(candidate_offset, groups), static_cast<int>(candidates));
      if (relative) {
        // The estimate's coefficients of the sources this level tests (their powers are set:
        // ImportChildren computed them), each node once per walk.
        grow_preserving(coefficient_ready_, tree.num_nodes);
        auto const ready = coefficient_ready_;
        Kokkos::parallel_for(
            "kfmm::fmm::walk::coefficients", Kokkos::RangePolicy<ExecutionSpace>(space, 0, open->num_entries),
            KOKKOS_LAMBDA(int e) {
              int const B = source(e);
              int const nb = first ? 1 : w.num_children(B);
              for (int jb = 0; jb < nb; ++jb) {
                int const b = first ? B : w.child(B, jb);
                if (ready(b)) continue;
                w.set_coefficients(b);  // racing threads write the same values
                ready(b) = 1;
              }
            });
      }
      // The level in chunks of whole groups, each with about candidate_chunk_ candidates: the
      // candidates' scratch is sized by a chunk, not by the level. Chunks are consecutive
      // groups, so the lists come out as from one pass.
      std::vector<int> chunk_group;
      std::vector<long long> chunk_candidate;
      chunk_level(space, candidates, groups, chunk_group, chunk_candidate);
      PairLists* next = &open_[(iteration + 1) % 2];
      out[2] = next;
      next->num_groups = next->num_entries = 0;
      bool const lanes = !gpu_shaped_kernels<ExecutionSpace>() && !use_gpu_shape<ExecutionSpace>();
      int level_groups[num_lists] = {};  // groups this level adds to each list
      bool fit = true;
      for (std::size_t chunk = 0; chunk + 1 < chunk_group.size() && fit; ++chunk) {
        int const g0 = chunk_group[chunk];
        int const chunk_groups = chunk_group[chunk + 1] - g0;
        int const c0 = static_cast<int>(chunk_candidate[chunk]);
        std::size_t const chunk_candidates = static_cast<std::size_t>(chunk_candidate[chunk + 1] - c0);
        int const slots = chunk_groups * max_children;
        for (auto& c : counts_) grow_scratch(c, slots + 1, "kfmm::walk::counts");
        // counts_[k] for k = kind: entries of that kind per (group, child slot) of the chunk;
        // counts_[num_lists + k]: 1 if that (group, slot) has any entry of kind k (becomes a group).
        ScalarView<int> entries[num_lists], has[num_lists];
        for (int k = 0; k < num_lists; ++k) {
          entries[k] = counts_[k];
          has[k] = counts_[num_lists + k];
        }
        grow_scratch(candidate_kind_, chunk_candidates + 1, "kfmm::walk::candidate_kind");
        auto const candidate_kind = candidate_kind_;
        grow_scratch(candidate_node_, chunk_candidates + 1, "kfmm::walk::candidate_node");
        auto const candidate_node = candidate_node_;
        if (relative) grow_scratch(candidate_value_, chunk_candidates + 1, "kfmm::walk::candidate_value");
        auto const candidate_value = candidate_value_;
        Kokkos::parallel_for(
            "kfmm::fmm::walk::count",
            Kokkos::RangePolicy<ExecutionSpace, Kokkos::Schedule<Kokkos::Dynamic>>(space, 0, chunk_groups),
            KOKKOS_LAMBDA(int i) {
              int const g = g0 + i;
              // The root pair is tested as is; afterwards pairs are opened into their children.
              ChunkGroup const cg = w.chunk_group(target, candidate_offset, first, g, c0);
              int const A = cg.A, na = cg.na, base = cg.base, per_child = cg.per_child;
              // The sources' children, the same for every target child: listed once.
              for (int e = offset(g), t = base; e < offset(g + 1); ++e) {
                int const B = source(e);
                int const nb = first ? 1 : w.num_children(B);
                for (int jb = 0; jb < nb; ++jb) candidate_node(t++) = first ? B : w.child(B, jb);
              }
              if (lanes && na > 1 &&
                  w.count_group_in_lanes<ExecutionSpace>(i, A, first, na, candidate_node, base, per_child,
                                                          candidate_kind, candidate_value, entries, has))
                return;
              for (int j = 0; j < max_children; ++j) {
                int n[num_lists] = {};
                if (j < na)
                  w.classify_candidates(w.target(first ? A : w.child(A, j)), candidate_node, base, per_child,
                                        base + j * per_child, candidate_kind, candidate_value, n);
                WalkView::store_counts(entries, has, i, j, n);
              }
            });
        int entry_base[num_lists], group_base[num_lists], entry_total[num_lists], group_total[num_lists];
        for (int k = 0; k < num_lists && fit; ++k) {
          long long const entries_total = exclusive_scan(space, entries[k], slots, "kfmm::fmm::walk::scan_entries");
          long long const groups_total = exclusive_scan(space, has[k], slots, "kfmm::fmm::walk::scan_groups");
          PairLists const& list = *out[k];
          entry_base[k] = list.num_entries;
          group_base[k] = list.num_groups;
          // + 1: the offsets close with one more entry
          fit = fits(entry_base[k] + entries_total, fmt::format("{} list entries", list_names[k]).c_str(), iteration) &&
                fits(group_base[k] + groups_total + 1, fmt::format("{} list groups", list_names[k]).c_str(), iteration);
          entry_total[k] = static_cast<int>(entries_total);
          group_total[k] = static_cast<int>(groups_total);
        }
        if (!fit) break;
        for (int k : {pair_m2l, pair_p2p, pair_m2p}) {
          PairLists& list = *out[k];
          grow_lists(list.target, group_base[k] + group_total[k], group_base[k]);
          grow_lists(list.offset, group_base[k] + group_total[k] + 1, group_base[k] + 1);
          grow_lists(list.source, entry_base[k] + entry_total[k], entry_base[k]);
        }
        // The next level's open pairs: rewritten from the level's first chunk, appended after.
        if (chunk == 0) {
          grow_scratch(next->target, group_total[2], "kfmm::walk::open_target");
          grow_scratch(next->offset, group_total[2] + 1, "kfmm::walk::open_offset");
          grow_scratch(next->source, entry_total[2], "kfmm::walk::open_source");
        } else {
          grow_lists(next->target, group_base[2] + group_total[2], group_base[2]);
          grow_lists(next->offset, group_base[2] + group_total[2] + 1, group_base[2] + 1);
          grow_lists(next->source, entry_base[2] + entry_total[2], entry_base[2]);
        }
        ScalarView<int> out_target[num_lists] = {m2l.target, p2p.target, next->target, m2p.target};
        ScalarView<int> out_offset[num_lists] = {m2l.offset, p2p.offset, next->offset, m2p.offset};
        ScalarView<int> out_source[num_lists] = {m2l.source, p2p.source, next->source, m2p.source};
        Kokkos::parallel_for(
            "kfmm::fmm::walk::fill",
            Kokkos::RangePolicy<ExecutionSpace, Kokkos::Schedule<Kokkos::Dynamic>>(space, 0, chunk_groups),
            KOKKOS_LAMBDA(int i) {
              ChunkGroup const cg = w.chunk_group(target, candidate_offset, first, g0 + i, c0);
              int const A = cg.A, na = cg.na, base = cg.base, per_child = cg.per_child;
              int c = base;
              for (int j = 0; j < na; ++j) {
                int const slot = i * max_children + j;
                int const a = first ? A : w.child(A, j);
                int cursor[num_lists];
                for (int k = 0; k < num_lists; ++k) {
                  cursor[k] = entry_base[k] + entries[k](slot);
                  bool const is_group = (slot + 1 < slots ? has[k](slot + 1) : group_total[k]) > has[k](slot);
                  if (is_group) {
                    int const group = group_base[k] + has[k](slot);
                    out_target[k](group) = a;
                    out_offset[k](group) = cursor[k];
                  }
                }
                for (int t = 0; t < per_child; ++t) {
                  int const kind = candidate_kind(c++);
                  if (kind != pair_none) out_source[kind](cursor[kind]++) = candidate_node(base + t);
                }
              }
            });
        // Close the offsets of the lists (a later chunk's first group overwrites the same value).
        for (int k = 0; k < num_lists; ++k) {
          int const groups_after = group_base[k] + group_total[k];
          int const entries_after = entry_base[k] + entry_total[k];
          Kokkos::deep_copy(space, Kokkos::subview(out_offset[k], groups_after), entries_after);
          PairLists& list = *out[k];
          list.num_groups = groups_after;
          list.num_entries = entries_after;
          level_groups[k] += group_total[k];
        }
      }
      if (!fit) continue;
      // One segment of M2L, P2P and M2P per level.
      for (int k = 0; k < num_lists; ++k)
        if (k != pair_open && level_groups[k] > 0) out[k]->segment_begin.push_back(out[k]->num_groups);
      open = next;
    } catch (std::exception const& e) {
      if (!import_children) throw;
      overflow = e.what();
      open->num_groups = open->num_entries = 0;
    }
  }
  if (!overflow.empty()) fail("internal error: the import callback did not throw the walk's error: {}", overflow);
}

void DualTreeWalk::set_candidate_chunk(long long candidates) {
  if (candidates < 1) fail("DualTreeWalk: candidate chunk {} must be ≥ 1", candidates);
  candidate_chunk_ = candidates;
}

void DualTreeWalk::chunk_level(ExecutionSpace const& space, long long candidates, int groups, std::vector<int>& group,
                               std::vector<long long>& candidate) {
  group.assign({0, groups});
  candidate.assign({0, candidates});
  if (candidates <= candidate_chunk_ || groups < 2) return;
  long long const chunk = candidate_chunk_;
  int const chunks = static_cast<int>((candidates + chunk - 1) / chunk);
  grow_discarding(chunk_bounds_, std::size_t(chunks) + 1, "kfmm::walk::chunk_bounds");
  auto const bounds = chunk_bounds_;
  find_chunk_bounds(space, candidate_offset_, groups, chunks, chunk, bounds);
  auto const host = Kokkos::create_mirror_view_and_copy(
      Kokkos::HostSpace(), Kokkos::subview(bounds, Kokkos::make_pair(0, chunks + 1), Kokkos::ALL));
  group.clear();
  candidate.clear();
  for (int c = 0; c <= chunks; ++c) {
    int const g = static_cast<int>(host(c, 0));
    if (!group.empty() && g == group.back()) continue;  // an empty chunk: one group spans it
    group.push_back(g);
    candidate.push_back(host(c, 1));
  }
}

namespace {

// A testing hook: the integer in [1, limit] that the environment variable `name` holds, or
// `fallback` when it is unset or empty.
long long hook_from_environment(char const* name, long long fallback, long long limit) {
  char const* text = std::getenv(name);
  if (text == nullptr || *text == 0) return fallback;
  char* end = nullptr;
  long long const value = std::strtoll(text, &end, 10);
  if (*end != 0 || value < 1 || value > limit)
    fail("{} = '{}' must be an integer in [1, {}] (a testing hook; unset it)", name, text, limit);
  return value;
}

}  // namespace

long long DualTreeWalk::candidate_chunk_from_environment() {
  return hook_from_environment("KFMM_WALK_CANDIDATE_CHUNK", 1 << 20, std::numeric_limits<long long>::max());
}

long long DualTreeWalk::index_limit_from_environment() {
  return hook_from_environment("KFMM_WALK_INDEX_LIMIT", std::numeric_limits<int>::max(),
                               std::numeric_limits<int>::max());
}

}  // namespace kfmm
