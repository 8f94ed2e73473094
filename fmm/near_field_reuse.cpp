#include <kfmm/core/binary_search.hpp>
#include <kfmm/core/view_growth.hpp>
#include <kfmm/fmm/near_field_reuse.hpp>

namespace kfmm {

namespace {

// Exclusive prefix sum of values[0, n) in place, values(n) = the total; returns the total.
long long scan_counts(ExecutionSpace const& space, ScalarView<int> const& values, int n, char const* label) {
  long long total = 0;
  Kokkos::parallel_scan(
      label, Kokkos::RangePolicy<ExecutionSpace>(space, 0, n + 1),
      KOKKOS_LAMBDA(int i, long long& sum, bool final) {
        long long const v = i < n ? values(i) : 0;
        if (final) values(i) = static_cast<int>(sum);
        sum += v;
      },
      total);
  return total;
}

// Whether the sorted sources [begin, end) hold b.
KOKKOS_INLINE_FUNCTION bool holds(ScalarView<int> const& sorted, int begin, int end, int b) {
  int const at = lower_bound(sorted, begin, end, b);
  return at < end && sorted(at) == b;
}

// Whether target a's indexed pairs are all in the final lists (found(a) of them), so that its
// kept near field stands for them.
KOKKOS_INLINE_FUNCTION bool reused(ScalarView<int> const& start, ScalarView<int> const& found, int nodes, int a) {
  return a < nodes && start(a + 1) > start(a) && found(a) == start(a + 1) - start(a);
}

}  // namespace

void NearFieldReuse::start(ExecutionSpace const& space, int n) {
  grow_discarding(phi_, std::size_t(n), phi_.label());
  grow_discarding(grad_, std::size_t(n), grad_.label());
  Kokkos::deep_copy(space, Kokkos::subview(phi_, Kokkos::make_pair(0, n)), 0.0);
  Kokkos::deep_copy(space, Kokkos::subview(grad_, Kokkos::make_pair(0, n), Kokkos::ALL), 0.0);
}

void NearFieldReuse::index(ExecutionSpace const& space, PairLists const& estimate, int num_nodes) {
  indexed_ = false;
  nodes_ = num_nodes;
  grow_discarding(start_, std::size_t(num_nodes) + 1, start_.label());
  grow_discarding(found_, std::size_t(num_nodes) + 1, found_.label());
  Kokkos::deep_copy(space, Kokkos::subview(start_, Kokkos::make_pair(0, num_nodes + 1)), 0);
  auto const start = start_;
  auto const target = estimate.target;
  auto const offset = estimate.offset;
  auto const listed = estimate.source;
  Kokkos::parallel_for(
      "kfmm::fmm::reuse::count", Kokkos::RangePolicy<ExecutionSpace>(space, 0, estimate.num_groups),
      KOKKOS_LAMBDA(int g) { Kokkos::atomic_add(&start(target(g)), offset(g + 1) - offset(g)); });
  long long const total = scan_counts(space, start_, num_nodes, "kfmm::fmm::reuse::scan_targets");
  grow_discarding(source_, std::size_t(total) + 1, source_.label());
  auto const cursor = found_;  // free until subtract(): the fill's cursor per target
  Kokkos::deep_copy(space, Kokkos::subview(cursor, Kokkos::make_pair(0, num_nodes)),
                    Kokkos::subview(start_, Kokkos::make_pair(0, num_nodes)));
  auto const source = source_;
  Kokkos::parallel_for(
      "kfmm::fmm::reuse::fill", Kokkos::RangePolicy<ExecutionSpace>(space, 0, estimate.num_groups),
      KOKKOS_LAMBDA(int g) {
        int const a = target(g);
        for (int e = offset(g); e < offset(g + 1); ++e) source(Kokkos::atomic_fetch_add(&cursor(a), 1)) = listed(e);
      });
  // A leaf has tens of near sources: insertion sort.
  Kokkos::parallel_for(
      "kfmm::fmm::reuse::sort", Kokkos::RangePolicy<ExecutionSpace>(space, 0, num_nodes), KOKKOS_LAMBDA(int a) {
        for (int i = start(a) + 1; i < start(a + 1); ++i) {
          int const v = source(i);
          int j = i;
          for (; j > start(a) && source(j - 1) > v; --j) source(j) = source(j - 1);
          source(j) = v;
        }
      });
  space.fence();
  indexed_ = true;
}

std::uint64_t NearFieldReuse::subtract(ExecutionSpace const& space, Tree<> const& tree, TargetParticles const& targets,
                                       PairLists const& full, PairLists& rest) {
  int const nodes = nodes_;
  int const groups = full.num_groups;
  auto const start = start_;
  auto const sorted = source_;
  auto const found = found_;
  Kokkos::deep_copy(space, Kokkos::subview(found, Kokkos::make_pair(0, nodes)), 0);
  grow_discarding(hit_, std::size_t(full.num_entries) + 1, hit_.label());
  grow_discarding(kept_, std::size_t(groups) + 1, kept_.label());
  auto const hit = hit_;
  auto const kept = kept_;
  auto const target = full.target;
  auto const offset = full.offset;
  auto const listed = full.source;
  Kokkos::parallel_for(
      "kfmm::fmm::reuse::match", Kokkos::RangePolicy<ExecutionSpace>(space, 0, groups), KOKKOS_LAMBDA(int g) {
        int const a = target(g);
        int matched = 0;
        for (int e = offset(g); e < offset(g + 1); ++e) {
          bool const in = a < nodes && holds(sorted, start(a), start(a + 1), listed(e));
          hit(e) = in ? 1 : 0;
          matched += in ? 1 : 0;
        }
        if (matched > 0) Kokkos::atomic_add(&found(a), matched);
      });
  auto const pbegin = tree.particle_begin;
  auto const pend = tree.particle_end;
  auto const before = targets.before;
  std::uint64_t dropped = 0;
  Kokkos::parallel_reduce(
      "kfmm::fmm::reuse::keep", Kokkos::RangePolicy<ExecutionSpace>(space, 0, groups),
      KOKKOS_LAMBDA(int g, std::uint64_t& pairs) {
        int const a = target(g);
        bool const whole = reused(start, found, nodes, a);
        std::uint64_t const na = whole ? std::uint64_t(before(pend(a)) - before(pbegin(a))) : 0;
        int count = 0;
        for (int e = offset(g); e < offset(g + 1); ++e) {
          if (whole && hit(e)) {
            int const b = listed(e);
            pairs += na * std::uint64_t(pend(b) - pbegin(b)) - (b == a ? na : 0);
          } else {
            ++count;
          }
        }
        kept(g) = count;
      },
      dropped);
  long long const entries = scan_counts(space, kept, groups, "kfmm::fmm::reuse::scan_kept");
  grow_discarding(rest.target, std::size_t(groups) + 1, rest.target.label());
  grow_discarding(rest.offset, std::size_t(groups) + 1, rest.offset.label());
  grow_discarding(rest.source, std::size_t(entries) + 1, rest.source.label());
  auto const rest_target = rest.target;
  auto const rest_offset = rest.offset;
  auto const rest_source = rest.source;
  Kokkos::parallel_for(
      "kfmm::fmm::reuse::rest", Kokkos::RangePolicy<ExecutionSpace>(space, 0, groups + 1), KOKKOS_LAMBDA(int g) {
        rest_offset(g) = kept(g);
        if (g == groups) return;
        int const a = target(g);
        rest_target(g) = a;
        bool const whole = reused(start, found, nodes, a);
        int c = kept(g);
        for (int e = offset(g); e < offset(g + 1); ++e)
          if (!(whole && hit(e))) rest_source(c++) = listed(e);
      });
  space.fence();
  rest.segment_begin = full.segment_begin;
  rest.num_groups = groups;
  rest.num_entries = static_cast<int>(entries);
  return dropped;
}

void NearFieldReuse::add_all(ExecutionSpace const& space, TargetParticles const& targets,
                             ScalarView<double> const& phi, Vec3View<double> const& grad) const {
  auto const index = targets.index;
  auto const near_phi = phi_;
  auto const near_grad = grad_;
  Kokkos::parallel_for(
      "kfmm::fmm::reuse::add_all", Kokkos::RangePolicy<ExecutionSpace>(space, 0, targets.count), KOKKOS_LAMBDA(int k) {
        int const i = index(k);
        phi(i) += near_phi(i);
        for (int d = 0; d < 3; ++d) grad(i, d) += near_grad(i, d);
      });
}

void NearFieldReuse::release() {
  *this = NearFieldReuse();
}

void NearFieldReuse::add_reused(ExecutionSpace const& space, Tree<> const& tree, TargetParticles const& targets,
                                ScalarView<double> const& phi, Vec3View<double> const& grad) const {
  auto const start = start_;
  auto const found = found_;
  auto const pbegin = tree.particle_begin;
  auto const pend = tree.particle_end;
  auto const before = targets.before;
  auto const index = targets.index;
  auto const near_phi = phi_;
  auto const near_grad = grad_;
  int const nodes = nodes_;
  Kokkos::parallel_for(
      "kfmm::fmm::reuse::add", Kokkos::RangePolicy<ExecutionSpace>(space, 0, nodes), KOKKOS_LAMBDA(int a) {
        if (!reused(start, found, nodes, a)) return;
        for (int k = before(pbegin(a)); k < before(pend(a)); ++k) {
          int const i = index(k);
          phi(i) += near_phi(i);
          for (int d = 0; d < 3; ++d) grad(i, d) += near_grad(i, d);
        }
      });
}

}  // namespace kfmm
