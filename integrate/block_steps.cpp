#include <kfmm/integrate/block_steps.hpp>

#include <kfmm/core/error.hpp>
#include <kfmm/core/format.hpp>

#include <mpi.h>

#include <cmath>

namespace kfmm {

namespace {

using Range = Kokkos::RangePolicy<ExecutionSpace>;

/// The rung that the criterion gives particle i, synchronised at `tick`; −1 when it needs a step
/// that the settings do not allow.
KOKKOS_INLINE_FUNCTION int new_rung(Vec3View<double> const& acceleration, std::size_t i, int current, long long tick,
                                    RungCriterion const& c) {
  using compat::math::sqrt;
  double a2 = 0;
  for (int d = 0; d < 3; ++d) a2 += acceleration(i, d) * acceleration(i, d);
  int const wanted = rung_for_step(gadget_time_step(c.eta, c.softening_length, sqrt(a2)), c.block_length, c.max_rungs,
                                   c.dt_min);
  return wanted < 0 ? -1 : synchronised_rung(wanted, current, tick, c.max_rungs);
}

/// The error of the `count` particles (over all ranks) whose steps are too short; this rank's
/// part names its lowest-id offender, or is empty when it has none.
std::string rung_overflow_message(Particles<MemorySpace> const& particles, Vec3View<double> const& acceleration,
                                  ActiveFlags const& active, long long tick, RungCriterion const& c, RungView const& rung,
                                  long long local, long long count) {
  if (local == 0) return {};
  using MinId = Kokkos::MinLoc<std::uint64_t, std::size_t>;
  MinId::value_type worst;
  auto const id = particles.id;
  Kokkos::parallel_reduce(
      "kfmm::integrate::block_steps::first_overflow", Range(ExecutionSpace(), 0, particles.num),
      KOKKOS_LAMBDA(std::size_t i, MinId::value_type & best) {
        if (!active(i) || new_rung(acceleration, i, rung(i), tick, c) >= 0) return;
        if (id(i) < best.val) {
          best.val = id(i);
          best.loc = i;
        }
      },
      MinId(worst));
  std::size_t const i = worst.loc;
  double x[3], a[3];
  for (int d = 0; d < 3; ++d) {
    Kokkos::deep_copy(x[d], Kokkos::subview(particles.pos, i, d));
    Kokkos::deep_copy(a[d], Kokkos::subview(acceleration, i, d));
  }
  double const magnitude = std::sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2]);
  double const wanted = gadget_time_step(c.eta, c.softening_length, magnitude);
  return fmt::format("hierarchical steps: {} particles need a time step below the smallest allowed, max(dt_min = {:g}, "
                     "block {:g} / 2^max_rungs = 2^{}) = {:g}; e.g. particle id {} at ({:g}, {:g}, {:g}) with |a| = {:g} "
                     "needs sqrt(2·eta·eps/|a|) = {:g}. Raise time.max_rungs, lower time.dt_min or time.dt_max, or "
                     "raise eta or the softening length",
                     count, c.dt_min, c.block_length, c.max_rungs,
                     std::fmax(c.dt_min, std::ldexp(c.block_length, -c.max_rungs)), worst.val, x[0], x[1], x[2],
                     magnitude, wanted);
}

}  // namespace

void mark_active(RungView const& rung, std::size_t n, long long tick, int max_rungs, ActiveFlags const& active) {
  Kokkos::parallel_for(
      "kfmm::integrate::block_steps::mark_active", Range(ExecutionSpace(), 0, n), KOKKOS_LAMBDA(std::size_t i) {
        active(i) = tick % rung_ticks(rung(i), max_rungs) == 0 ? 1 : 0;
      });
  ExecutionSpace().fence();
}

void assign_rungs(Context const& context, Particles<MemorySpace> const& particles, Vec3View<double> const& acceleration,
                  ActiveFlags const& active, long long tick, RungCriterion const& criterion, RungView& rung) {
  std::size_t const n = particles.num;
  if (rung.extent(0) < n) {
    RungView grown("kfmm::integrate::rung", particles.capacity());
    if (rung.extent(0) > 0)
      Kokkos::deep_copy(Kokkos::subview(grown, Kokkos::make_pair(std::size_t(0), rung.extent(0))), rung);
    rung = grown;
  }
  auto const rungs = rung;
  RungCriterion const c = criterion;
  long long local = 0;
  Kokkos::parallel_reduce(
      "kfmm::integrate::block_steps::assign_rungs", Range(ExecutionSpace(), 0, n),
      KOKKOS_LAMBDA(std::size_t i, long long& bad) {
        if (!active(i)) return;
        int const r = new_rung(acceleration, i, rungs(i), tick, c);
        if (r < 0)
          ++bad;
        else
          rungs(i) = static_cast<std::uint8_t>(r);
      },
      local);
  long long count = 0;
  MPI_Allreduce(&local, &count, 1, MPI_LONG_LONG, MPI_SUM, context.comm());
  if (count == 0) return;
  std::string error;
  try {
    error = rung_overflow_message(particles, acceleration, active, tick, c, rung, local, count);
  } catch (std::exception const& e) {
    error = e.what();
  }
  agree_on_error(context, error);
}

void half_kick_active(Particles<MemorySpace>& particles, Vec3View<double> const& acceleration, RungView const& rung,
                      ActiveFlags const& active, double block_length) {
  auto const vel = particles.vel;
  Kokkos::parallel_for(
      "kfmm::integrate::block_steps::half_kick", Range(ExecutionSpace(), 0, particles.num),
      KOKKOS_LAMBDA(std::size_t i) {
        if (!active(i)) return;
        // The same factor as a global step's kick(½dt) for rung 0: 0.5 · (B / 2^r), then · a.
        double const factor = 0.5 * (block_length / static_cast<double>(1LL << rung(i)));
        for (int d = 0; d < 3; ++d) vel(i, d) += factor * acceleration(i, d);
      });
  ExecutionSpace().fence();
}

void rung_histogram(Context const& context, RungView const& rung, ActiveFlags const& active, std::size_t n,
                    int max_rungs, std::vector<long long>& all, std::vector<long long>& active_counts) {
  int const bins = max_rungs + 1;
  Kokkos::View<long long*, MemorySpace> counts("kfmm::integrate::block_steps::rung_counts", 2 * bins);
  Kokkos::parallel_for(
      "kfmm::integrate::block_steps::rung_histogram", Range(ExecutionSpace(), 0, n), KOKKOS_LAMBDA(std::size_t i) {
        Kokkos::atomic_add(&counts(rung(i)), 1LL);  // integer sums: the order does not matter
        if (active(i)) Kokkos::atomic_add(&counts(bins + rung(i)), 1LL);
      });
  auto const host = Kokkos::create_mirror_view_and_copy(HostSpace(), counts);
  std::vector<long long> local(host.data(), host.data() + 2 * bins), global(2 * bins);
  MPI_Allreduce(local.data(), global.data(), 2 * bins, MPI_LONG_LONG, MPI_SUM, context.comm());
  all.assign(global.begin(), global.begin() + bins);
  active_counts.assign(global.begin() + bins, global.end());
}

std::string format_rung_counts(std::vector<long long> const& counts) {
  std::string text;
  for (std::size_t r = 0; r < counts.size(); ++r)
    if (counts[r] != 0) text += fmt::format("{}r{}:{}", text.empty() ? "" : " ", r, counts[r]);
  return text.empty() ? "none" : text;
}

}  // namespace kfmm
