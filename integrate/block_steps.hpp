#pragma once
/// \file
/// \brief Hierarchical (power-of-two, GADGET-style) time steps: rungs, their synchronisation, and
/// the per-rung kicks (docs/simulation.md, "Hierarchical time steps").
///
/// A block of length B (Schedule::block_length) is cut into 2^R ticks (R = max_rungs). A particle
/// on rung r takes steps of B / 2^r, i.e. 2^(R − r) ticks, starting at multiples of that; it is
/// active (its step ends and the next begins) at the ticks that are such multiples.
#include <kfmm/comm/context.hpp>
#include <kfmm/core/particles.hpp>
#include <kfmm/integrate/active_forces.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kfmm {

/// Per-particle rung, aligned with the particles.
using RungView = ScalarView<std::uint8_t>;

/// GADGET's step criterion Δt = sqrt(2 η ε / |a|) (IEEE +inf for a = 0: rung 0).
KOKKOS_INLINE_FUNCTION double gadget_time_step(double eta, double softening_length, double acceleration_magnitude) {
  using compat::math::sqrt;
  return sqrt(2 * eta * softening_length / acceleration_magnitude);
}

/// \brief The smallest rung r with block_length / 2^r ≤ `wanted`; −1 when that is deeper than
/// `max_rungs` or its step is below `dt_min` (or `wanted` is NaN).
KOKKOS_INLINE_FUNCTION int rung_for_step(double wanted, double block_length, int max_rungs, double dt_min) {
  if (!(wanted >= 0)) return -1;
  int r = 0;
  double step = block_length;
  while (step > wanted) {
    if (r == max_rungs) return -1;
    step *= 0.5;  // exact: steps are block_length / 2^r
    ++r;
  }
  return step < dt_min ? -1 : r;
}

/// Ticks of a step on `rung` (2^(max_rungs − rung)).
KOKKOS_INLINE_FUNCTION long long rung_ticks(int rung, int max_rungs) { return 1LL << (max_rungs - rung); }

/// \brief The rung a particle whose step ends at `tick` takes when the criterion asks for
/// `wanted` and it was on `current`: a shorter step at once; a longer one only as far as that
/// rung is synchronised at `tick` (tick a multiple of its step), so rungs stay aligned.
KOKKOS_INLINE_FUNCTION int synchronised_rung(int wanted, int current, long long tick, int max_rungs) {
  int r = wanted;
  while (r < current && tick % rung_ticks(r, max_rungs) != 0) ++r;
  return r;
}

/// The next tick after `tick` at which a particle on `deepest` (the deepest occupied rung) is active.
inline long long next_boundary(long long tick, int deepest, int max_rungs) {
  long long const step = rung_ticks(deepest, max_rungs);
  return (tick / step + 1) * step;
}

/// \brief What the hierarchical steps of one block did (the same on every rank): force calls
/// (one per sub-step) and particle steps per rung (GADGET's per-bin activity).
struct BlockStatistics {
  long long force_calls = 0;
  std::vector<long long> steps_per_rung;  ///< max_rungs + 1 entries
};

/// Parameters of the rung criterion.
struct RungCriterion {
  double eta = 0.025;
  double softening_length = 0;
  double block_length = 1;
  double dt_min = 0;
  int max_rungs = 0;
};

/// active(i) = 1 for the particles on a rung whose step ends at `tick` (tick in [0, 2^max_rungs]).
void mark_active(RungView const& rung, std::size_t n, long long tick, int max_rungs, ActiveFlags const& active);

/// \brief New rungs of the active particles at `tick` from their accelerations (the criterion, then
/// synchronised_rung(); pass tick 0 at a block start: every rung is free). A particle that needs
/// a step below dt_min or deeper than max_rungs is an error on every rank naming how many do, one
/// of them (its id, position, |a|, Δt) and the settings to change. `rung` grows (new rows 0)
/// when shorter than the particles. Collective.
void assign_rungs(Context const& context, Particles<MemorySpace> const& particles, Vec3View<double> const& acceleration,
                  ActiveFlags const& active, long long tick, RungCriterion const& criterion, RungView& rung);

/// vel += ½ (block_length / 2^rung) · a for the active particles (a half kick of their own step).
void half_kick_active(Particles<MemorySpace>& particles, Vec3View<double> const& acceleration, RungView const& rung,
                      ActiveFlags const& active, double block_length);

/// \brief Global particle counts per rung: all particles (`all`) and the active ones (`active`),
/// max_rungs + 1 entries each, the same on every rank. Collective.
void rung_histogram(Context const& context, RungView const& rung, ActiveFlags const& active, std::size_t n,
                    int max_rungs, std::vector<long long>& all, std::vector<long long>& active_counts);

/// "r0:n0 r1:n1 ..." of the nonzero entries (log lines).
std::string format_rung_counts(std::vector<long long> const& counts);

}  // namespace kfmm
