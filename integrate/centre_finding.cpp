#include <kfmm/integrate/centre_finding.hpp>

#include <kfmm/core/error.hpp>
#include <kfmm/core/space_copy.hpp>

#include <mpi.h>

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

namespace kfmm {

CentreCadence parse_centre_cadence(std::string const& name) {
  if (name == "none") return CentreCadence::None;
  if (name == "output") return CentreCadence::Output;
  if (name == "step") return CentreCadence::Step;
  fail("unknown centre cadence '{}': use none, output or step", name);
}

std::string to_string(CentreCadence cadence) {
  switch (cadence) {
    case CentreCadence::None: return "none";
    case CentreCadence::Output: return "output";
    case CentreCadence::Step: return "step";
  }
  return "?";
}

void CentreFinding::validate() const {
  if (!(shrink_factor > 0 && shrink_factor < 1))
    fail("shrinking-spheres factor {} must be in (0, 1) (Power et al. 2003 use 0.975)", shrink_factor);
  if (min_particles < 1) fail("shrinking-spheres minimum particle count {} must be ≥ 1", min_particles);
}

namespace {

using CentreRange = Kokkos::RangePolicy<ExecutionSpace>;

/// Particles per block of the sphere sums (serial inside, blocks in order: thread-count independent).
constexpr std::size_t sphere_block_size = 1024;
/// Columns of a sphere sum: mass, m·x (3), count.
constexpr int sphere_columns = 5;

using IndexView = Kokkos::View<std::size_t*, MemorySpace>;

/// Σ over all ranks of (m, m x, count) of the candidates `[0, m)` (indices into the particles)
/// with |x − c| < radius (all of them: radius = ∞).
std::array<double, sphere_columns> sphere_sums(Context const& context, Particles<MemorySpace> const& particles,
                                               IndexView const& candidates, std::size_t m,
                                               std::array<double, 3> const& c, double radius) {
  std::size_t const blocks = (m + sphere_block_size - 1) / sphere_block_size;
  Kokkos::View<double**, Kokkos::LayoutRight, MemorySpace> block_sums("kfmm::integrate::centre::sphere_blocks", blocks,
                                                                       sphere_columns);
  auto pos = particles.pos;
  auto mass = particles.mass;
  double const cx = c[0], cy = c[1], cz = c[2];
  double const r2_max = radius * radius;
  bool const everything = std::isinf(radius);
  Kokkos::parallel_for(
      "kfmm::integrate::centre::sphere_sums", CentreRange(0, blocks), KOKKOS_LAMBDA(std::size_t b) {
        double s[sphere_columns] = {};
        std::size_t const end = (b + 1) * sphere_block_size < m ? (b + 1) * sphere_block_size : m;
        for (std::size_t j = b * sphere_block_size; j < end; ++j) {
          std::size_t const i = candidates(j);
          double const dx = pos(i, 0) - cx, dy = pos(i, 1) - cy, dz = pos(i, 2) - cz;
          if (!everything && !(dx * dx + dy * dy + dz * dz < r2_max)) continue;
          double const w = mass(i);
          s[0] += w;
          s[1] += w * pos(i, 0);
          s[2] += w * pos(i, 1);
          s[3] += w * pos(i, 2);
          s[4] += 1;
        }
        for (int k = 0; k < sphere_columns; ++k) block_sums(b, k) = s[k];
      });
  Kokkos::View<double**, Kokkos::LayoutRight, HostSpace> host("kfmm::integrate::centre::sphere_host", blocks,
                                                              sphere_columns);
  copy_contiguous(ExecutionSpace(), host, block_sums);
  ExecutionSpace().fence();
  double local[sphere_columns] = {};
  for (std::size_t b = 0; b < blocks; ++b)
    for (int k = 0; k < sphere_columns; ++k) local[k] += host(b, k);
  std::vector<double> all(static_cast<std::size_t>(sphere_columns) * context.size());
  MPI_Allgather(local, sphere_columns, MPI_DOUBLE, all.data(), sphere_columns, MPI_DOUBLE, context.comm());
  std::array<double, sphere_columns> total{};
  for (int r = 0; r < context.size(); ++r)
    for (int k = 0; k < sphere_columns; ++k) total[k] += all[static_cast<std::size_t>(r) * sphere_columns + k];
  return total;
}

/// Keeps the candidates `[0, m)` of `from` inside the sphere (c, radius), in order, in `to`;
/// returns their number.
std::size_t keep_inside(Particles<MemorySpace> const& particles, IndexView const& from, std::size_t m,
                        IndexView const& to, std::array<double, 3> const& c, double radius) {
  auto pos = particles.pos;
  double const cx = c[0], cy = c[1], cz = c[2];
  double const r2_max = radius * radius;
  std::size_t kept = 0;
  Kokkos::parallel_scan(
      "kfmm::integrate::centre::keep_inside", CentreRange(0, m),
      KOKKOS_LAMBDA(std::size_t j, std::size_t & offset, bool final) {
        std::size_t const i = from(j);
        double const dx = pos(i, 0) - cx, dy = pos(i, 1) - cy, dz = pos(i, 2) - cz;
        if (dx * dx + dy * dy + dz * dz < r2_max) {
          if (final) to(offset) = i;
          offset += 1;
        }
      },
      kept);
  return kept;
}

/// Largest |x − c| over all ranks (a maximum is exact: no order dependence).
double largest_distance(Context const& context, Particles<MemorySpace> const& particles, std::array<double, 3> const& c) {
  auto pos = particles.pos;
  double const cx = c[0], cy = c[1], cz = c[2];
  double local = 0;
  Kokkos::parallel_reduce(
      "kfmm::integrate::centre::largest_distance", CentreRange(0, particles.num),
      KOKKOS_LAMBDA(std::size_t i, double& largest) {
        double const dx = pos(i, 0) - cx, dy = pos(i, 1) - cy, dz = pos(i, 2) - cz;
        double const r2 = dx * dx + dy * dy + dz * dz;
        if (r2 > largest) largest = r2;
      },
      Kokkos::Max<double>(local));
  double global = 0;
  MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_MAX, context.comm());
  return std::sqrt(global);
}

}  // namespace

PotentialMinimum potential_minimum_centre(Context const& context, Particles<MemorySpace> const& particles,
                                          ScalarView<double> const& potential) {
  std::size_t const n = particles.num;
  auto id = particles.id;
  auto pos = particles.pos;
  double lowest = std::numeric_limits<double>::infinity();
  Kokkos::parallel_reduce(
      "kfmm::integrate::centre::lowest_potential", CentreRange(0, n),
      KOKKOS_LAMBDA(std::size_t i, double& low) {
        if (potential(i) < low) low = potential(i);
      },
      Kokkos::Min<double>(lowest));
  // Ties by id, then the index of that particle: both reductions are exact, so any thread count
  // finds the same particle.
  std::uint64_t lowest_id = std::numeric_limits<std::uint64_t>::max();
  Kokkos::parallel_reduce(
      "kfmm::integrate::centre::lowest_id", CentreRange(0, n),
      KOKKOS_LAMBDA(std::size_t i, std::uint64_t& low) {
        if (potential(i) == lowest && id(i) < low) low = id(i);
      },
      Kokkos::Min<std::uint64_t>(lowest_id));
  std::size_t index = n;
  Kokkos::parallel_reduce(
      "kfmm::integrate::centre::lowest_index", CentreRange(0, n),
      KOKKOS_LAMBDA(std::size_t i, std::size_t& low) {
        if (potential(i) == lowest && id(i) == lowest_id && i < low) low = i;
      },
      Kokkos::Min<std::size_t>(index));
  // Per rank: found, φ, x, y, z (the id travels separately, as an exact uint64).
  double record[5] = {n > 0 && index < n ? 1.0 : 0.0, lowest, 0, 0, 0};
  if (record[0] > 0) {
    Kokkos::View<double[3], MemorySpace> where("kfmm::integrate::centre::where");
    Kokkos::parallel_for(
        "kfmm::integrate::centre::copy_position", CentreRange(0, 1), KOKKOS_LAMBDA(int) {
          for (int d = 0; d < 3; ++d) where(d) = pos(index, d);
        });
    Kokkos::View<double[3], HostSpace> host("kfmm::integrate::centre::where_host");
    copy_contiguous(ExecutionSpace(), host, where);
    ExecutionSpace().fence();
    for (int d = 0; d < 3; ++d) record[2 + d] = host(d);
  }
  std::vector<double> records(static_cast<std::size_t>(5) * context.size());
  std::vector<std::uint64_t> ids(context.size());
  MPI_Allgather(record, 5, MPI_DOUBLE, records.data(), 5, MPI_DOUBLE, context.comm());
  MPI_Allgather(&lowest_id, 1, MPI_UINT64_T, ids.data(), 1, MPI_UINT64_T, context.comm());
  PotentialMinimum best;
  for (int r = 0; r < context.size(); ++r) {
    double const* rec = &records[static_cast<std::size_t>(r) * 5];
    if (rec[0] == 0) continue;
    bool const better = !best.found || rec[1] < best.potential || (rec[1] == best.potential && ids[r] < best.id);
    if (!better) continue;
    best.found = true;
    best.potential = rec[1];
    best.id = ids[r];
    best.position = {rec[2], rec[3], rec[4]};
  }
  return best;
}

ShrinkingSpheres shrinking_spheres_centre(Context const& context, Particles<MemorySpace> const& particles,
                                          double shrink_factor, std::uint64_t min_particles) {
  CentreFinding settings;
  settings.shrink_factor = shrink_factor;
  settings.min_particles = min_particles;
  settings.validate();
  ShrinkingSpheres result;
  std::size_t const n = particles.num;
  // Candidates: the particles of the latest sphere (Power et al. consider only those), so an
  // iteration costs the particles of the previous sphere rather than all of them.
  IndexView candidates(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::integrate::centre::candidates"), n);
  IndexView next(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::integrate::centre::next_candidates"), n);
  Kokkos::parallel_for(
      "kfmm::integrate::centre::all_candidates", CentreRange(0, n), KOKKOS_LAMBDA(std::size_t i) { candidates(i) = i; });
  std::size_t m = n;
  auto const all = sphere_sums(context, particles, candidates, m, {0, 0, 0}, std::numeric_limits<double>::infinity());
  if (!(all[0] > 0)) return result;
  result.centre = {all[1] / all[0], all[2] / all[0], all[3] / all[0]};
  result.count = static_cast<std::uint64_t>(all[4]);
  result.radius = largest_distance(context, particles, result.centre);
  // The radius shrinks geometrically; a bound on the iterations guards against a factor so close
  // to 1 that the loop would take forever (radius below the smallest double spacing).
  for (int iteration = 0; iteration < 100000; ++iteration) {
    double const radius = result.radius * shrink_factor;
    if (!(radius > 0)) break;
    auto const inside = sphere_sums(context, particles, candidates, m, result.centre, radius);
    if (inside[4] < static_cast<double>(min_particles) || !(inside[0] > 0)) break;
    // Every iteration: the candidates must be exactly the particles inside every sphere so far,
    // whatever the rank count (a rank-local shortcut would change the sums).
    m = keep_inside(particles, candidates, m, next, result.centre, radius);
    std::swap(candidates, next);
    result.centre = {inside[1] / inside[0], inside[2] / inside[0], inside[3] / inside[0]};
    result.radius = radius;
    result.count = static_cast<std::uint64_t>(inside[4]);
    result.iterations = iteration + 1;
  }
  return result;
}

}  // namespace kfmm
