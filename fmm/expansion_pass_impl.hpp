#pragma once
/// \file
/// \brief ExpansionPass for a compile-time order P, arithmetic type Real and kernel; included
/// by the per-order translation units expansion_pass_pN.cpp (one per order keeps builds parallel).
#include <kfmm/core/huge_pages.hpp>
#include <kfmm/core/kernel_shape.hpp>
#include <kfmm/core/view_growth.hpp>
#include <kfmm/fmm/expansion.hpp>
#include <kfmm/fmm/expansion_pass.hpp>
#include <kfmm/fmm/expansion_teams.hpp>
#include <kfmm/fmm/multipole_power.hpp>
#include <kfmm/fmm/p2p.hpp>

#include <type_traits>

namespace kfmm::detail {

/// The particles of a leaf in order: particle k is k (P2M).
struct EveryParticle {
  KOKKOS_INLINE_FUNCTION int operator()(int k) const { return k; }
};

/// Scaled offsets u = (x − c)/s (inv = 1/s) of the particles particle(first) … particle(first +
/// count − 1) of a leaf (`particle`: EveryParticle, or a TargetParticles::index), one per lane;
/// idle lanes l ≥ count repeat the first particle, so they stay finite and the caller gives
/// them no weight (P2M) or does not store them (L2P).
template <class Real, int W, class Particle>
KOKKOS_INLINE_FUNCTION void gather_scaled_offsets(Vec3View<double> const& pos, Vec3View<double> const& centre,
                                                  int node, double inv, Particle const& particle, int first,
                                                  int count, Real* ux, Real* uy, Real* uz) {
  for (int l = 0; l < W; ++l) {
    int const i = particle(first + (l < count ? l : 0));
    ux[l] = Real((pos(i, 0) - centre(node, 0)) * inv);
    uy[l] = Real((pos(i, 1) - centre(node, 1)) * inv);
    uz[l] = Real((pos(i, 2) - centre(node, 2)) * inv);
  }
}

/// P2M at a leaf from its particles, M2M at an inner node from its children.
template <class Real, int P>
struct UpwardFunctor {
  static constexpr int N = ncoeff<P>;
  Kokkos::View<Real* [N], Kokkos::LayoutRight, MemorySpace> M;
  Vec3View<double> pos;
  ScalarView<double> mass;
  ScalarView<int> pbegin, pend, cbegin, cend, cindex;
  Vec3View<double> centre;
  ScalarView<double> scale;

  KOKKOS_INLINE_FUNCTION void operator()(int node) const {
    Real acc[N];
    for (int n = 0; n < N; ++n) acc[n] = 0;
    double const s = scale(node);
    if (cbegin(node) == cend(node)) {
      // W particles at a time, one per lane (idle lanes have mass 0); lanes summed at the end.
      constexpr int W = particle_lanes<ExecutionSpace, Real>;
      double const inv = 1.0 / s;
      Real lanes[N * W] = {};
      for (int first = pbegin(node); first < pend(node); first += W) {
        int const count = compat::math::min(W, pend(node) - first);
        Real m[W], ux[W], uy[W], uz[W];
        for (int l = 0; l < W; ++l) m[l] = l < count ? Real(mass(first + l)) : Real(0);
        gather_scaled_offsets<Real, W>(pos, centre, node, inv, EveryParticle{}, first, count, ux, uy, uz);
        p2m_lanes<P, Real, W>(m, ux, uy, uz, lanes);
      }
      for (int n = 0; n < N; ++n)
        for (int l = 0; l < W; ++l) acc[n] += lanes[n * W + l];
    } else {
      // The children one per lane (idle lanes: no moments, the node's own centre and scale).
      constexpr int W = child_lanes;
      Real lanes[N * W] = {};
      for (int first = cbegin(node); first < cend(node); first += W) {
        int const count = compat::math::min(W, cend(node) - first);
        Real const* moments[W];
        Real s_child[W], dx[W], dy[W], dz[W];
        for (int l = 0; l < W; ++l) {
          int const child = l < count ? cindex(first + l) : node;
          moments[l] = &M(child, 0);
          s_child[l] = Real(scale(child));
          dx[l] = Real(centre(child, 0) - centre(node, 0));
          dy[l] = Real(centre(child, 1) - centre(node, 1));
          dz[l] = Real(centre(child, 2) - centre(node, 2));
        }
        m2m_lanes<P, Real, W>(count, moments, s_child, dx, dy, dz, Real(s), lanes);
      }
      for (int n = 0; n < N; ++n)
        for (int l = 0; l < W; ++l) acc[n] += lanes[n * W + l];
    }
    for (int n = 0; n < N; ++n) M(node, n) = acc[n];
  }
};

template <class Real, int P, SofteningKind kind>
class ExpansionPassImpl final : public ExpansionPass {
  static constexpr int N = ncoeff<P>;
  using Coefficients = Kokkos::View<Real* [N], Kokkos::LayoutRight, MemorySpace>;

 public:
  explicit ExpansionPassImpl(double softening_length)
      : h_(static_cast<Real>(kind == SofteningKind::Spline ? 2.8 * softening_length : softening_length)) {}

  int coefficients_per_node() const override { return N; }
  bool single_precision() const override { return std::is_same<Real, float>::value; }

  void reserve_nodes(std::size_t count) override { reserve(count, true); }

  void upward(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry,
              PassParticles const& particles) override {
    reserve(tree.num_nodes, false);  // every node's multipole is assigned below
    if (use_teams()) {
      for (int level = tree.num_levels() - 1; level >= 0; --level)
        upward_teams<Real, P>(space, multipole_, tree, geometry, particles.pos, particles.mass, ScalarView<int>{},
                              tree.level_offset[level], tree.level_offset[level + 1] - tree.level_offset[level]);
      return;
    }
    if constexpr (!gpu_shaped_kernels<ExecutionSpace>()) upward_lanes(space, tree, geometry, particles);
  }

  /// CPU shape of upward(): one thread per node, SIMD lanes over particles or children.
  void upward_lanes(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry,
                    PassParticles const& particles) {
    auto const functor = upward_functor(tree, geometry, particles);
    for (int level = tree.num_levels() - 1; level >= 0; --level)
      Kokkos::parallel_for(
          "kfmm::fmm::upward",
          Kokkos::RangePolicy<ExecutionSpace>(space, tree.level_offset[level], tree.level_offset[level + 1]), functor);
  }

  void upward_nodes(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry,
                    ScalarView<int> const& nodes, int count) override {
    reserve_nodes(tree.num_nodes);
    if (use_teams()) {
      upward_teams<Real, P>(space, multipole_, tree, geometry, Vec3View<double>{}, ScalarView<double>{}, nodes, 0,
                            count);
      return;
    }
    if constexpr (!gpu_shaped_kernels<ExecutionSpace>()) {
      auto const functor = upward_functor(tree, geometry, PassParticles{});
      Kokkos::parallel_for(
          "kfmm::fmm::upward_nodes", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count),
          KOKKOS_LAMBDA(int i) { functor(nodes(i)); });
    }
  }

  void get_multipoles(ExecutionSpace const& space, ScalarView<int> const& nodes, int count,
                      Kokkos::View<double**, MemorySpace> const& out) const override {
    auto const M = multipole_;
    Kokkos::parallel_for(
        "kfmm::fmm::get_multipoles", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count), KOKKOS_LAMBDA(int i) {
          for (int n = 0; n < N; ++n) out(i, n) = M(nodes(i), n);
        });
  }

  void set_multipoles(ExecutionSpace const& space, int first, int count,
                      Kokkos::View<double**, MemorySpace> const& in) override {
    reserve_nodes(first + count);
    auto M = multipole_;
    Kokkos::parallel_for(
        "kfmm::fmm::set_multipoles", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count), KOKKOS_LAMBDA(int i) {
          for (int n = 0; n < N; ++n) M(first + i, n) = Real(in(i, n));
        });
  }

  void multipole_powers(ExecutionSpace const& space, int first, int count,
                        Kokkos::View<double**, MemorySpace> const& out) const override {
    powers_of_nodes(space, "kfmm::fmm::multipole_powers", {}, first, count, out);
  }

  void multipole_powers_of(ExecutionSpace const& space, ScalarView<int> const& nodes, int count,
                           Kokkos::View<double**, MemorySpace> const& out) const override {
    powers_of_nodes(space, "kfmm::fmm::multipole_powers_of", nodes, 0, count, out);
  }

  // The multipole powers of the nodes first … first + count − 1 (`nodes` empty) or nodes(0 …
  // count − 1): L nodes per thread, one per SIMD lane in the CPU shape (L = 8), one thread per
  // node in the GPU shape (L = 1); the same bits either way (harmonic_power_lanes). Idle lanes
  // repeat the block's first node and are not stored. Public only because nvcc forbids extended
  // lambdas in private member functions.
  void powers_of_nodes(ExecutionSpace const& space, char const* label, ScalarView<int> const& nodes, int first,
                       int count, Kokkos::View<double**, MemorySpace> const& out) const {
    if constexpr (!gpu_shaped_kernels<ExecutionSpace>()) {
      if (!use_teams()) return powers_in_blocks<8>(space, label, nodes, first, count, out);
    }
    powers_in_blocks<1>(space, label, nodes, first, count, out);
  }
  template <int L>
  void powers_in_blocks(ExecutionSpace const& space, char const* label, ScalarView<int> const& nodes, int first,
                        int count, Kokkos::View<double**, MemorySpace> const& out) const {
    auto const M = multipole_;
    bool const listed = nodes.extent(0) > 0;
    Kokkos::parallel_for(
        label, Kokkos::RangePolicy<ExecutionSpace>(space, 0, (count + L - 1) / L), KOKKOS_LAMBDA(int block) {
          int const begin = block * L;
          int const active = count - begin < L ? count - begin : L;
          int node[L];
          Real const* lane[L];
          for (int l = 0; l < L; ++l) {
            int const i = begin + (l < active ? l : 0);
            node[l] = listed ? nodes(i) : first + i;
            lane[l] = &M(node[l], 0);
          }
          double H[P + 1][L];
          harmonic_power_lanes<P, L, Real>(lane, H);
          for (int l = 0; l < active; ++l)
            for (int n = 0; n <= P; ++n) out(node[l], n) = H[n][l];
        });
  }

  void translate(ExecutionSpace const& space, NodeGeometry const& geometry, PairLists const& m2l) override {
    Kokkos::deep_copy(space, local_, Real(0));
    if (use_teams())
      m2l_teams<Real, P, kind>(space, multipole_, local_, geometry, m2l, h_);
    else if constexpr (!gpu_shaped_kernels<ExecutionSpace>())
      translate_m2l(space, geometry, m2l);
  }

  void evaluate_locals(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry,
                       PassParticles const& particles, TargetParticles const& targets, ScalarView<double> const& phi,
                       Vec3View<double> const& grad) override {
    if (use_teams()) {
      for (int level = 0; level + 1 < tree.num_levels(); ++level)
        l2l_teams<Real, P>(space, local_, tree, geometry, tree.level_offset[level],
                           tree.level_offset[level + 1] - tree.level_offset[level]);
      l2p_teams<Real, P>(space, local_, tree, geometry, particles.pos, targets, phi, grad);
    } else if constexpr (!gpu_shaped_kernels<ExecutionSpace>()) {
      downward(space, tree, geometry);
      evaluate_at_particles(space, tree, geometry, particles, targets, phi, grad);
    }
  }

  void add_near_field(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry,
                      PairLists const& p2p, PassParticles const& particles, TargetParticles const& targets,
                      ScalarView<double> const& phi, Vec3View<double> const& grad) override {
    pairs_ = near_field<Real, kind>(space, tree, geometry, p2p, particles, targets, h_, phi, grad, near_);
  }

  std::uint64_t p2p_pairs() const override { return pairs_; }
  std::uint64_t m2p_evaluations() const override { return m2p_evaluations_; }

  void add_multipoles_at_particles(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry,
                                   PairLists const& m2p, PassParticles const& particles,
                                   TargetParticles const& targets, ScalarView<double> const& phi,
                                   Vec3View<double> const& grad) override {
    m2p_evaluations_ = 0;
    if (m2p.num_groups == 0) return;
    auto const target = m2p.target;
    auto const offset = m2p.offset;
    auto const pbegin = tree.particle_begin;
    auto const pend = tree.particle_end;
    auto const before = targets.before;
    std::uint64_t evaluations = 0;
    Kokkos::parallel_reduce(
        "kfmm::fmm::m2p_count", Kokkos::RangePolicy<ExecutionSpace>(space, 0, m2p.num_groups),
        KOKKOS_LAMBDA(int g, std::uint64_t& sum) {
          int const a = target(g);
          sum += std::uint64_t(before(pend(a)) - before(pbegin(a))) * std::uint64_t(offset(g + 1) - offset(g));
        },
        evaluations);
    m2p_evaluations_ = evaluations;
    if (use_teams())
      m2p_teams<Real, P, kind>(space, multipole_, geometry, tree, particles.pos, targets, m2p, h_, phi, grad);
    else if constexpr (!gpu_shaped_kernels<ExecutionSpace>())
      multipoles_at_particles(space, tree, geometry, m2p, particles, targets, phi, grad);
  }

  // M2P in the CPU shape: a thread per group of one list segment (its targets are unique, so no
  // two threads write the same particle), the leaf's targets W at a time in SIMD lanes, the
  // sources in list order (deterministic). Public only because nvcc forbids extended lambdas in
  // private member functions.
  void multipoles_at_particles(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry,
                               PairLists const& lists, PassParticles const& particles,
                               TargetParticles const& targets, ScalarView<double> const& phi,
                               Vec3View<double> const& grad) const {
    auto const M = multipole_;
    auto const centre = geometry.centre;
    auto const scale = geometry.scale;
    auto const pos = particles.pos;
    auto const pbegin = tree.particle_begin;
    auto const pend = tree.particle_end;
    auto const before = targets.before;
    auto const index = targets.index;
    auto const target = lists.target;
    auto const offset = lists.offset;
    auto const source = lists.source;
    Real const h = h_;
    for (int s = 0; s < lists.num_segments(); ++s) {
      int const first_group = lists.segment_begin[s];
      int const groups = lists.segment_begin[s + 1] - first_group;
      Kokkos::parallel_for(
          "kfmm::fmm::m2p",
          Kokkos::RangePolicy<ExecutionSpace, Kokkos::Schedule<Kokkos::Dynamic>>(space, first_group,
                                                                                  first_group + groups),
          KOKKOS_LAMBDA(int g) {
            int const a = target(g);
            int const begin = before(pbegin(a)), end = before(pend(a));
            constexpr int W = particle_lanes<ExecutionSpace, Real>;
            for (int first = begin; first < end; first += W) {
              int const count = compat::math::min(W, end - first);
              int particle[W];
              for (int l = 0; l < W; ++l) particle[l] = index(first + (l < count ? l : 0));
              Real p[W] = {}, gx[W] = {}, gy[W] = {}, gz[W] = {};
              for (int e = offset(g); e < offset(g + 1); ++e) {
                int const b = source(e);
                Real dx[W], dy[W], dz[W];
                for (int l = 0; l < W; ++l) {
                  dx[l] = Real(pos(particle[l], 0) - centre(b, 0));
                  dy[l] = Real(pos(particle[l], 1) - centre(b, 1));
                  dz[l] = Real(pos(particle[l], 2) - centre(b, 2));
                }
                m2p_lanes<kind, P, Real, W>(&M(b, 0), Real(scale(b)), dx, dy, dz, h, p, gx, gy, gz);
              }
              for (int l = 0; l < count; ++l) {
                int const i = particle[l];
                phi(i) += p[l];
                grad(i, 0) += gx[l];
                grad(i, 1) += gy[l];
                grad(i, 2) += gz[l];
              }
            }
          });
    }
  }

  // The CPU shape of the kernels (one thread per node, SIMD lanes). Public only because nvcc
  // forbids extended lambdas in private member functions; compiled only where the CPU shape is
  // in use (never for GPU backends).
  void translate_m2l(ExecutionSpace const& space, NodeGeometry const& geometry, PairLists const& lists) {
    auto const M = multipole_;
    auto L = local_;
    auto const centre = geometry.centre;
    auto const scale = geometry.scale;
    auto const target = lists.target;
    auto const offset = lists.offset;
    auto const source = lists.source;
    Real const h = h_;
    for (int s = 0; s < lists.num_segments(); ++s) {
      Kokkos::parallel_for(
          "kfmm::fmm::m2l",
          Kokkos::RangePolicy<ExecutionSpace, Kokkos::Schedule<Kokkos::Dynamic>>(space, lists.segment_begin[s],
                                                                                  lists.segment_begin[s + 1]),
          KOKKOS_LAMBDA(int g) {
            // Sources go through m2l_lanes W at a time, one per SIMD lane; the lanes of the
            // local expansion are summed in a fixed order at the end (deterministic).
            constexpr int W = m2l_width<Real>;
            int const a = target(g);
            Real const sa = Real(scale(a));
            Real lanes[N * W] = {};
            Real const* moments[W];
            Real source_scale[W], dx[W], dy[W], dz[W];
            int count = 0;
            for (int e = offset(g); e < offset(g + 1); ++e) {
              int const b = source(e);
              moments[count] = &M(b, 0);
              source_scale[count] = Real(scale(b));
              dx[count] = Real(centre(a, 0) - centre(b, 0));
              dy[count] = Real(centre(a, 1) - centre(b, 1));
              dz[count] = Real(centre(a, 2) - centre(b, 2));
              if (++count == W) {
                m2l_lanes<kind, P, Real, W>(W, moments, source_scale, dx, dy, dz, h, sa, lanes);
                count = 0;
              }
            }
            if (count > 0) m2l_lanes<kind, P, Real, W>(count, moments, source_scale, dx, dy, dz, h, sa, lanes);
            for (int n = 0; n < N; ++n) {
              Real sum = L(a, n);
              for (int l = 0; l < W; ++l) sum += lanes[n * W + l];
              L(a, n) = sum;
            }
          });
    }
  }

  void downward(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry) {
    auto L = local_;
    auto const centre = geometry.centre;
    auto const scale = geometry.scale;
    auto const cbegin = tree.child_begin;
    auto const cend = tree.child_end;
    auto const cindex = tree.child_index;
    auto const flags = geometry.flags;
    for (int level = 0; level + 1 < tree.num_levels(); ++level) {
      Kokkos::parallel_for(
          "kfmm::fmm::l2l",
          Kokkos::RangePolicy<ExecutionSpace>(space, tree.level_offset[level], tree.level_offset[level + 1]),
          KOKKOS_LAMBDA(int node) {
            // The children one per lane, all of an octree node's at once (idle lanes take the
            // node itself: zero offset, finite scale; they are not stored).
            constexpr int W = child_lanes;
            for (int first = cbegin(node); first < cend(node); first += W) {
              int const count = compat::math::min(W, cend(node) - first);
              Real dx[W], dy[W], dz[W], s_child[W];
              for (int l = 0; l < W; ++l) {
                int const child = l < count ? cindex(first + l) : node;
                dx[l] = Real(centre(child, 0) - centre(node, 0));
                dy[l] = Real(centre(child, 1) - centre(node, 1));
                dz[l] = Real(centre(child, 2) - centre(node, 2));
                s_child[l] = Real(scale(child));
              }
              Real lanes[N * W] = {};
              l2l_lanes<P, Real, W>(&L(node, 0), Real(scale(node)), dx, dy, dz, s_child, lanes);
              for (int l = 0; l < count; ++l) {
                int const child = cindex(first + l);
                if (flags(child) & (node_remote | node_idle)) continue;
                for (int n = 0; n < N; ++n) L(child, n) += lanes[n * W + l];
              }
            }
          });
    }
  }

  void evaluate_at_particles(ExecutionSpace const& space, Tree<> const& tree, NodeGeometry const& geometry,
                             PassParticles const& particles, TargetParticles const& targets,
                             ScalarView<double> const& phi, Vec3View<double> const& grad) {
    auto const L = local_;
    auto const centre = geometry.centre;
    auto const scale = geometry.scale;
    auto const pos = particles.pos;
    auto const pbegin = tree.particle_begin;
    auto const pend = tree.particle_end;
    auto const cbegin = tree.child_begin;
    auto const cend = tree.child_end;
    auto const flags = geometry.flags;
    auto const before = targets.before;
    auto const index = targets.index;
    Kokkos::parallel_for(
        "kfmm::fmm::l2p", Kokkos::RangePolicy<ExecutionSpace, Kokkos::Schedule<Kokkos::Dynamic>>(space, 0, tree.num_nodes),
        KOKKOS_LAMBDA(int node) {
          if (cbegin(node) != cend(node) || (flags(node) & (node_remote | node_idle))) return;
          double const s = scale(node);
          double const inv = 1.0 / s;
          // The leaf's targets, W at a time, one per lane.
          constexpr int W = particle_lanes<ExecutionSpace, Real>;
          int const last = before(pend(node));
          for (int first = before(pbegin(node)); first < last; first += W) {
            int const count = compat::math::min(W, last - first);
            Real ux[W], uy[W], uz[W], p[W], gx[W], gy[W], gz[W];
            gather_scaled_offsets<Real, W>(pos, centre, node, inv, index, first, count, ux, uy, uz);
            l2p_lanes<P, Real, W>(&L(node, 0), Real(s), ux, uy, uz, p, gx, gy, gz);
            for (int l = 0; l < count; ++l) {
              int const i = index(first + l);
              phi(i) = p[l];
              grad(i, 0) = gx[l];
              grad(i, 1) = gy[l];
              grad(i, 2) = gz[l];
            }
          }
        });
  }

 private:
  /// Room for `count` nodes and half as many again (imported nodes, counts drifting up between
  /// steps); `keep`: the multipoles already computed stay (new rows are zero), else nothing is
  /// copied or filled. translate() zeroes the locals before M2L adds to them, so they are never kept.
  void reserve(std::size_t count, bool keep) {
    if (multipole_.extent(0) >= count) return;
    if (keep)
      grow_preserving(multipole_, count + count / 2);
    else
      grow_appending(multipole_, count + count / 2, 0);
    local_ = Coefficients();
    local_ = allocate_kept<Coefficients>("kfmm::fmm::locals", multipole_.extent(0));
  }

  /// The shape of each call follows the process-wide request (core/kernel_shape.hpp); the
  /// CPU-shaped branches are not even instantiated where gpu_shaped_kernels() holds.
  bool use_teams() const { return use_gpu_shape<ExecutionSpace>(); }

  UpwardFunctor<Real, P> upward_functor(Tree<> const& tree, NodeGeometry const& geometry,
                                        PassParticles const& particles) const {
    return UpwardFunctor<Real, P>{multipole_,        particles.pos,    particles.mass,   tree.particle_begin,
                                  tree.particle_end, tree.child_begin, tree.child_end,   tree.child_index,
                                  geometry.centre,   geometry.scale};
  }

  Real h_;
  Coefficients multipole_{"kfmm::fmm::multipoles", 0};
  Coefficients local_{"kfmm::fmm::locals", 0};
  NearFieldScratch<Real> near_;
  std::uint64_t pairs_ = 0;
  std::uint64_t m2p_evaluations_ = 0;
};

/// Makes the pass of order P for a precision and kernel chosen at run time.
template <int P>
std::unique_ptr<ExpansionPass> make_pass_of_order(Precision precision, SofteningKind kind, double softening_length) {
  if (precision == Precision::Float) {
    if (kind == SofteningKind::Plummer)
      return std::make_unique<ExpansionPassImpl<float, P, SofteningKind::Plummer>>(softening_length);
    return std::make_unique<ExpansionPassImpl<float, P, SofteningKind::Spline>>(softening_length);
  }
  if (kind == SofteningKind::Plummer)
    return std::make_unique<ExpansionPassImpl<double, P, SofteningKind::Plummer>>(softening_length);
  return std::make_unique<ExpansionPassImpl<double, P, SofteningKind::Spline>>(softening_length);
}

}  // namespace kfmm::detail
