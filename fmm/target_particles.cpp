#include <kfmm/core/view_growth.hpp>
#include <kfmm/fmm/target_particles.hpp>

namespace kfmm {

void select_targets(ExecutionSpace const& space, ScalarView<std::uint8_t> const& flags, int n,
                    TargetParticles& targets) {
  grow_preserving(targets.before, std::size_t(n) + 1);
  grow_preserving(targets.index, std::size_t(n));
  auto const before = targets.before;
  auto const index = targets.index;
  bool const all = flags.extent(0) == 0;
  int count = 0;
  // One scan: the prefix count and the compaction (deterministic: the k-th target is the k-th
  // flagged particle whatever the thread count).
  Kokkos::parallel_scan(
      "kfmm::fmm::select_targets", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n + 1),
      KOKKOS_LAMBDA(int i, int& sum, bool final) {
        bool const target = i < n && (all || flags(i) != 0);
        if (final) {
          before(i) = sum;
          if (target) index(sum) = i;
        }
        sum += target ? 1 : 0;
      },
      count);
  targets.count = count;
}

TargetParticles all_targets(ExecutionSpace const& space, int n) {
  TargetParticles targets;
  select_targets(space, ScalarView<std::uint8_t>{}, n, targets);
  return targets;
}

}  // namespace kfmm
