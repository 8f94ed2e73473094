#include <kfmm/neighbors/fof_catalogue.hpp>

#include <kfmm/comm/exchange_plan.hpp>
#include <kfmm/core/error.hpp>
#include <kfmm/core/kokkos_compat.hpp>
#include <kfmm/core/sort.hpp>

#include <mpi.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace kfmm {

namespace detail {

/// Owner rank of a group: a mix of its label, so that groups spread evenly over the ranks.
KOKKOS_INLINE_FUNCTION int fof_owner(std::uint64_t label, int ranks) {
  std::uint64_t z = label + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return int(z % std::uint64_t(ranks));
}

KOKKOS_INLINE_FUNCTION double fof_image(double d, double box) {
  return box > 0 ? d - box * compat::math::floor(d / box + 0.5) : d;
}

/// Stable order of rows by (primary, secondary): order(k) is the row at place k.
ScalarView<std::uint32_t> fof_order_by(ExecutionSpace const& space, ScalarView<std::uint64_t> const& primary,
                                       ScalarView<std::uint64_t> const& secondary, std::size_t n) {
  KeySorter<MemorySpace, std::uint32_t> sorter;
  ScalarView<std::uint64_t> keys(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fof_catalogue::keys"), n);
  ScalarView<std::uint32_t> first(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fof_catalogue::first"), n);
  ScalarView<std::uint32_t> second(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fof_catalogue::second"), n);
  ScalarView<std::uint32_t> order(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fof_catalogue::order"), n);
  Kokkos::deep_copy(space, keys, Kokkos::subview(secondary, Kokkos::make_pair(std::size_t(0), n)));
  sorter.sort(space, keys, first, n);
  Kokkos::parallel_for(
      "kfmm::fof_catalogue::primary_keys", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t i) { keys(i) = primary(first(i)); });
  sorter.sort(space, keys, second, n);
  Kokkos::parallel_for(
      "kfmm::fof_catalogue::compose", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t i) { order(i) = first(second(i)); });
  space.fence();
  return order;
}

template <class View>
View fof_gather(ExecutionSpace const& space, View const& source, ScalarView<std::uint32_t> const& order,
                std::size_t n) {
  View target(Kokkos::view_alloc(Kokkos::WithoutInitializing, source.label()), n);
  std::size_t const width = detail::columns(source);
  Kokkos::parallel_for(
      "kfmm::fof_catalogue::gather", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n), KOKKOS_LAMBDA(std::size_t i) {
        for (std::size_t c = 0; c < width; ++c) element(target, i, c) = element(source, order(i), c);
      });
  return target;
}

/// Rows (particles at their group's owner), sorted by (label, id).
struct FoFRows {
  std::size_t n = 0;
  ScalarView<std::uint64_t> label, id;
  Vec3View<double> pos, vel;
  ScalarView<double> mass;
};

/// Runs of equal labels: begin(s) first row of run s, begin(count) = n. Returns the count.
std::size_t fof_runs(ExecutionSpace const& space, ScalarView<std::uint64_t> const& label, std::size_t n,
                     ScalarView<std::uint64_t>& begin) {
  std::size_t count = 0;
  Kokkos::parallel_reduce(
      "kfmm::fof_catalogue::count_runs", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t i, std::size_t & sum) { sum += (i == 0 || label(i) != label(i - 1)) ? 1 : 0; }, count);
  begin = ScalarView<std::uint64_t>("kfmm::fof_catalogue::run_begin", count + 1);
  auto const first = begin;
  Kokkos::parallel_scan(
      "kfmm::fof_catalogue::runs", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t i, std::size_t & index, bool final) {
        if (i == 0 || label(i) != label(i - 1)) {
          if (final) first(index) = i;
          ++index;
        }
      });
  Kokkos::deep_copy(space, Kokkos::subview(begin, count), std::uint64_t(n));
  return count;
}

/// Runs with at least min_members rows, in run order: run(g) for group g. Returns their count.
std::size_t fof_select_groups(ExecutionSpace const& space, ScalarView<std::uint64_t> const& begin, std::size_t runs,
                              std::uint64_t min_members, ScalarView<std::uint64_t>& run) {
  std::size_t count = 0;
  Kokkos::parallel_reduce(
      "kfmm::fof_catalogue::count_groups", Kokkos::RangePolicy<ExecutionSpace>(space, 0, runs),
      KOKKOS_LAMBDA(std::size_t s, std::size_t & sum) { sum += begin(s + 1) - begin(s) >= min_members ? 1 : 0; }, count);
  run = ScalarView<std::uint64_t>("kfmm::fof_catalogue::group_run", count);
  auto const selected = run;
  Kokkos::parallel_scan(
      "kfmm::fof_catalogue::groups", Kokkos::RangePolicy<ExecutionSpace>(space, 0, runs),
      KOKKOS_LAMBDA(std::size_t s, std::size_t & index, bool final) {
        if (begin(s + 1) - begin(s) >= min_members) {
          if (final) selected(index) = s;
          ++index;
        }
      });
  space.fence();
  return count;
}

/// Sums of each group in id order; distances of its rows from the centre; row_group(i) = g.
void fof_group_sums(ExecutionSpace const& space, FoFRows const& rows, ScalarView<std::uint64_t> const& begin,
                    ScalarView<std::uint64_t> const& run, std::size_t groups, double box, FoFCatalogue<>& cat,
                    ScalarView<double> const& distance, ScalarView<std::uint64_t> const& row_group) {
  auto const pos = rows.pos, vel = rows.vel;
  auto const mass = rows.mass;
  auto const label = rows.label;
  auto const c_label = cat.label, c_length = cat.length;
  auto const c_mass = cat.mass, c_disp = cat.velocity_dispersion;
  auto const c_pos = cat.pos, c_vel = cat.vel;
  Kokkos::parallel_for(
      "kfmm::fof_catalogue::group_sums",
      Kokkos::RangePolicy<ExecutionSpace, Kokkos::Schedule<Kokkos::Dynamic>>(space, 0, groups),
      KOKKOS_LAMBDA(std::size_t g) {
        std::uint64_t const b = begin(run(g)), e = begin(run(g) + 1);
        double total = 0, offset[3] = {0, 0, 0}, momentum[3] = {0, 0, 0};
        for (std::uint64_t i = b; i < e; ++i) {
          total += mass(i);
          for (int k = 0; k < 3; ++k) {
            offset[k] += mass(i) * fof_image(pos(i, k) - pos(b, k), box);
            momentum[k] += mass(i) * vel(i, k);
          }
        }
        double centre[3], mean[3];
        for (int k = 0; k < 3; ++k) {
          centre[k] = pos(b, k) + offset[k] / total;
          if (box > 0) {
            centre[k] -= box * compat::math::floor(centre[k] / box);
            if (!(centre[k] < box)) centre[k] = 0;
          }
          mean[k] = momentum[k] / total;
        }
        double spread = 0;
        for (std::uint64_t i = b; i < e; ++i) {
          double r2 = 0;
          for (int k = 0; k < 3; ++k) {
            double const dv = vel(i, k) - mean[k];
            spread += mass(i) * dv * dv;
            double const dx = fof_image(pos(i, k) - centre[k], box);
            r2 += dx * dx;
          }
          distance(i) = compat::math::sqrt(r2);
          row_group(i) = g;
        }
        c_label(g) = label(b);
        c_length(g) = e - b;
        c_mass(g) = total;
        c_disp(g) = compat::math::sqrt(spread / (3 * total));
        for (int k = 0; k < 3; ++k) {
          c_pos(g, k) = centre[k];
          c_vel(g, k) = mean[k];
        }
      });
}

/// Half-mass radii: rows ordered by (group, distance, id) in `order`; group g's rows start at
/// first(g).
void fof_half_mass(ExecutionSpace const& space, FoFRows const& rows, ScalarView<double> const& distance,
                   ScalarView<std::uint32_t> const& order, ScalarView<std::uint64_t> const& first, std::size_t groups,
                   FoFCatalogue<>& cat) {
  auto const mass = rows.mass;
  auto const c_length = cat.length;
  auto const c_mass = cat.mass, radius = cat.half_mass_radius;
  Kokkos::parallel_for(
      "kfmm::fof_catalogue::half_mass",
      Kokkos::RangePolicy<ExecutionSpace, Kokkos::Schedule<Kokkos::Dynamic>>(space, 0, groups),
      KOKKOS_LAMBDA(std::size_t g) {
        double const half = 0.5 * c_mass(g);
        double enclosed = 0, r = 0;
        for (std::uint64_t k = first(g); k < first(g) + c_length(g); ++k) {
          enclosed += mass(order(k));
          r = distance(order(k));
          if (enclosed >= half) break;
        }
        radius(g) = r;
      });
}

/// Binding energy ½|v − v̄|² + φ of every row of a group with at most `largest` members (others
/// +inf), φ by direct summation over the group.
void fof_binding_energy(ExecutionSpace const& space, FoFRows const& rows, ScalarView<std::uint64_t> const& begin,
                        ScalarView<std::uint64_t> const& run, ScalarView<std::uint64_t> const& row_group,
                        std::size_t groups, FoFCatalogueOptions const& options, FoFCatalogue<> const& cat,
                        ScalarView<double> const& energy) {
  auto const pos = rows.pos, vel = rows.vel;
  auto const mass = rows.mass;
  auto const c_vel = cat.vel;
  double const box = options.box_size, G = options.G, eps2 = options.softening * options.softening;
  std::uint64_t const largest = options.most_bound_max_members;
  double const inf = std::numeric_limits<double>::infinity();
  Kokkos::parallel_for(
      "kfmm::fof_catalogue::binding_energy",
      Kokkos::RangePolicy<ExecutionSpace, Kokkos::Schedule<Kokkos::Dynamic>>(space, 0, rows.n),
      KOKKOS_LAMBDA(std::size_t i) {
        std::uint64_t const g = row_group(i);
        if (g >= groups) return;
        std::uint64_t const b = begin(run(g)), e = begin(run(g) + 1);
        if (e - b > largest) {
          energy(i) = inf;
          return;
        }
        double phi = 0;
        for (std::uint64_t j = b; j < e; ++j) {
          if (j == i) continue;
          double r2 = eps2;
          for (int k = 0; k < 3; ++k) {
            double const d = fof_image(pos(j, k) - pos(i, k), box);
            r2 += d * d;
          }
          phi -= mass(j) / compat::math::sqrt(r2);
        }
        double kinetic = 0;
        for (int k = 0; k < 3; ++k) {
          double const dv = vel(i, k) - c_vel(g, k);
          kinetic += 0.5 * dv * dv;
        }
        energy(i) = kinetic + G * phi;
      });
}

void fof_most_bound(ExecutionSpace const& space, FoFRows const& rows, ScalarView<std::uint64_t> const& begin,
                    ScalarView<std::uint64_t> const& run, std::size_t groups, std::uint64_t largest,
                    ScalarView<double> const& energy, ScalarView<std::uint64_t> const& most_bound) {
  auto const id = rows.id;
  Kokkos::parallel_for(
      "kfmm::fof_catalogue::most_bound", Kokkos::RangePolicy<ExecutionSpace>(space, 0, groups),
      KOKKOS_LAMBDA(std::size_t g) {
        std::uint64_t const b = begin(run(g)), e = begin(run(g) + 1);
        if (e - b > largest) {
          most_bound(g) = ~std::uint64_t(0);
          return;
        }
        std::uint64_t best = b;  // rows are in id order: the first minimum has the smallest id
        for (std::uint64_t i = b + 1; i < e; ++i)
          if (energy(i) < energy(best)) best = i;
        most_bound(g) = id(best);
      });
}

/// Numbers of the groups in the global order (length descending, label ascending), computed on
/// rank 0 from every owner's (length, label) and sent back.
void fof_number_groups(ExecutionSpace const& space, Context const& context, FoFCatalogue<>& cat) {
  Kokkos::View<int*, MemorySpace> to_root("kfmm::fof_catalogue::to_root", cat.num);  // zero: rank 0
  ExchangePlan<MemorySpace> plan(context, to_root, cat.num);
  auto const length = plan.exchange(cat.length);
  auto const label = plan.exchange(cat.label);
  std::size_t const m = plan.num_import();
  ScalarView<std::uint64_t> descending("kfmm::fof_catalogue::descending", m);
  Kokkos::parallel_for(
      "kfmm::fof_catalogue::descending", Kokkos::RangePolicy<ExecutionSpace>(space, 0, m),
      KOKKOS_LAMBDA(std::size_t i) { descending(i) = ~length(i); });
  auto const order = fof_order_by(space, descending, label, m);
  ScalarView<std::uint64_t> number("kfmm::fof_catalogue::number", m);
  Kokkos::parallel_for(
      "kfmm::fof_catalogue::number", Kokkos::RangePolicy<ExecutionSpace>(space, 0, m),
      KOKKOS_LAMBDA(std::size_t k) { number(order(k)) = k; });
  space.fence();
  cat.number = plan.reverse(number);
}

}  // namespace detail

FoFCatalogue<> fof_catalogue(Context const& context, Particles<> const& particles,
                             ScalarView<std::uint64_t> const& label, FoFCatalogueOptions const& options,
                             ScalarView<std::int64_t>* group_number) {
  ExecutionSpace space;
  std::size_t const n = particles.num;
  collectively(context, [&] {
    if (options.min_members < 1)
      fail("FoF catalogue: min_members = {} must be >= 1 (groups with fewer particles are left out; 20 is usual)",
           options.min_members);
    if (!std::isfinite(options.box_size) || options.box_size < 0)
      fail("FoF catalogue: box size {} must be finite and >= 0 (0: open boundaries)", options.box_size);
    if (!std::isfinite(options.softening) || options.softening < 0)
      fail("FoF catalogue: softening {} must be finite and >= 0", options.softening);
    if (!std::isfinite(options.G) || options.G <= 0) fail("FoF catalogue: G = {} must be finite and > 0", options.G);
    if (label.extent(0) < n)
      fail("FoF catalogue: {} labels for {} particles; pass the labels friends_of_friends() returned", label.extent(0),
           n);
  });

  // Every particle to its group's owner.
  int const ranks = context.size();
  Kokkos::View<int*, MemorySpace> owner(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fof_catalogue::owner"),
                                        n);
  Kokkos::parallel_for(
      "kfmm::fof_catalogue::owners", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t i) { owner(i) = detail::fof_owner(label(i), ranks); });
  space.fence();
  ExchangePlan<MemorySpace> plan(context, owner, n);
  auto const in_label = plan.exchange(Kokkos::subview(label, Kokkos::make_pair(std::size_t(0), n)));
  auto const in_id = plan.exchange(Kokkos::subview(particles.id, Kokkos::make_pair(std::size_t(0), n)));
  std::size_t const m = plan.num_import();
  if (m > std::size_t(std::numeric_limits<std::uint32_t>::max()))
    fail("FoF catalogue: {} particles arrived at rank {}, more than 2^32 - 1; use more ranks", m, context.rank());
  auto const order = detail::fof_order_by(space, in_label, in_id, m);

  detail::FoFRows rows;
  rows.n = m;
  rows.label = detail::fof_gather(space, in_label, order, m);
  rows.id = detail::fof_gather(space, in_id, order, m);
  {
    auto const range = Kokkos::make_pair(std::size_t(0), n);
    Vec3View<double> pos(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fof_catalogue::pos"), m);
    Vec3View<double> vel(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fof_catalogue::vel"), m);
    ScalarView<double> mass(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::fof_catalogue::mass"), m);
    plan.exchange(Kokkos::subview(particles.pos, range, Kokkos::ALL), pos);
    plan.exchange(Kokkos::subview(particles.vel, range, Kokkos::ALL), vel);
    plan.exchange(Kokkos::subview(particles.mass, range), mass);
    rows.pos = detail::fof_gather(space, pos, order, m);
    rows.vel = detail::fof_gather(space, vel, order, m);
    rows.mass = detail::fof_gather(space, mass, order, m);
  }

  ScalarView<std::uint64_t> begin, run;
  std::size_t const runs = detail::fof_runs(space, rows.label, m, begin);
  std::size_t const groups = detail::fof_select_groups(space, begin, runs, options.min_members, run);

  FoFCatalogue<> cat;
  cat.num = groups;
  cat.label = ScalarView<std::uint64_t>("kfmm::fof_catalogue::label", groups);
  cat.length = ScalarView<std::uint64_t>("kfmm::fof_catalogue::length", groups);
  cat.mass = ScalarView<double>("kfmm::fof_catalogue::mass", groups);
  cat.pos = Vec3View<double>("kfmm::fof_catalogue::pos", groups);
  cat.vel = Vec3View<double>("kfmm::fof_catalogue::vel", groups);
  cat.velocity_dispersion = ScalarView<double>("kfmm::fof_catalogue::velocity_dispersion", groups);
  cat.half_mass_radius = ScalarView<double>("kfmm::fof_catalogue::half_mass_radius", groups);
  ScalarView<double> distance("kfmm::fof_catalogue::distance", m);
  ScalarView<std::uint64_t> row_group("kfmm::fof_catalogue::row_group", m);
  Kokkos::deep_copy(space, row_group, std::uint64_t(groups));  // rows of smaller groups sort last
  detail::fof_group_sums(space, rows, begin, run, groups, options.box_size, cat, distance, row_group);

  // Half-mass radii: rows by (group, distance); the stable sort keeps id order among ties.
  {
    ScalarView<std::uint64_t> distance_bits("kfmm::fof_catalogue::distance_bits", m);
    Kokkos::parallel_for(
        "kfmm::fof_catalogue::distance_bits", Kokkos::RangePolicy<ExecutionSpace>(space, 0, m),
        KOKKOS_LAMBDA(std::size_t i) {
          double const d = distance(i);  // ≥ 0: its bits order like the value
          std::uint64_t bits;
          memcpy(&bits, &d, sizeof bits);
          distance_bits(i) = bits;
        });
    auto const by_distance = detail::fof_order_by(space, row_group, distance_bits, m);
    ScalarView<std::uint64_t> first("kfmm::fof_catalogue::group_first", groups);
    auto const length = cat.length;
    Kokkos::parallel_scan(
        "kfmm::fof_catalogue::group_first", Kokkos::RangePolicy<ExecutionSpace>(space, 0, groups),
        KOKKOS_LAMBDA(std::size_t g, std::uint64_t & offset, bool final) {
          if (final) first(g) = offset;
          offset += length(g);
        });
    detail::fof_half_mass(space, rows, distance, by_distance, first, groups, cat);
  }
  if (options.most_bound) {
    ScalarView<double> energy("kfmm::fof_catalogue::energy", m);
    detail::fof_binding_energy(space, rows, begin, run, row_group, groups, options, cat, energy);
    cat.most_bound_id = ScalarView<std::uint64_t>("kfmm::fof_catalogue::most_bound_id", groups);
    detail::fof_most_bound(space, rows, begin, run, groups, options.most_bound_max_members, energy, cat.most_bound_id);
  }
  space.fence();

  detail::fof_number_groups(space, context, cat);
  std::uint64_t local[2] = {groups, 0}, total[2] = {0, 0};
  {
    auto const length = cat.length;
    Kokkos::parallel_reduce(
        "kfmm::fof_catalogue::members", Kokkos::RangePolicy<ExecutionSpace>(space, 0, groups),
        KOKKOS_LAMBDA(std::size_t g, std::uint64_t & sum) { sum += length(g); }, local[1]);
  }
  MPI_Allreduce(local, total, 2, MPI_UINT64_T, MPI_SUM, context.comm());
  cat.num_total = total[0];
  cat.num_members_total = total[1];

  // This rank's groups in number order.
  {
    auto const by_number = detail::fof_order_by(space, cat.number, cat.number, groups);
    cat.number = detail::fof_gather(space, cat.number, by_number, groups);
    cat.label = detail::fof_gather(space, cat.label, by_number, groups);
    cat.length = detail::fof_gather(space, cat.length, by_number, groups);
    cat.mass = detail::fof_gather(space, cat.mass, by_number, groups);
    cat.pos = detail::fof_gather(space, cat.pos, by_number, groups);
    cat.vel = detail::fof_gather(space, cat.vel, by_number, groups);
    cat.velocity_dispersion = detail::fof_gather(space, cat.velocity_dispersion, by_number, groups);
    cat.half_mass_radius = detail::fof_gather(space, cat.half_mass_radius, by_number, groups);
    if (options.most_bound) cat.most_bound_id = detail::fof_gather(space, cat.most_bound_id, by_number, groups);
    // Rows point at their group's place in the old order; map them to numbers below.
    if (group_number) {
      ScalarView<std::int64_t> row_number("kfmm::fof_catalogue::row_number", m);
      auto const numbers = cat.number;
      ScalarView<std::int64_t> old_number("kfmm::fof_catalogue::old_number", groups);
      Kokkos::parallel_for(
          "kfmm::fof_catalogue::old_number", Kokkos::RangePolicy<ExecutionSpace>(space, 0, groups),
          KOKKOS_LAMBDA(std::size_t k) { old_number(by_number(k)) = std::int64_t(numbers(k)); });
      Kokkos::parallel_for(
          "kfmm::fof_catalogue::row_number", Kokkos::RangePolicy<ExecutionSpace>(space, 0, m),
          KOKKOS_LAMBDA(std::size_t k) {
            std::uint64_t const g = row_group(k);
            row_number(order(k)) = g < groups ? old_number(g) : -1;
          });
      space.fence();
      *group_number = plan.reverse(row_number);
    }
  }
  space.fence();
  return cat;
}

FoFCatalogue<HostSpace> gather_catalogue(Context const& context, FoFCatalogue<> const& cat) {
  Kokkos::View<int*, MemorySpace> to_root("kfmm::fof_catalogue::to_root", cat.num);
  ExchangePlan<MemorySpace> plan(context, to_root, cat.num);
  std::size_t const m = plan.num_import();
  bool const most_bound = cat.most_bound_id.extent(0) == cat.num && cat.num > 0;
  int has = most_bound ? 1 : 0, any = 0;
  MPI_Allreduce(&has, &any, 1, MPI_INT, MPI_MAX, context.comm());

  auto const number = Kokkos::create_mirror_view_and_copy(HostSpace(), plan.exchange(cat.number));
  auto const label = Kokkos::create_mirror_view_and_copy(HostSpace(), plan.exchange(cat.label));
  auto const length = Kokkos::create_mirror_view_and_copy(HostSpace(), plan.exchange(cat.length));
  auto const mass = Kokkos::create_mirror_view_and_copy(HostSpace(), plan.exchange(cat.mass));
  auto const pos = Kokkos::create_mirror_view_and_copy(HostSpace(), plan.exchange(cat.pos));
  auto const vel = Kokkos::create_mirror_view_and_copy(HostSpace(), plan.exchange(cat.vel));
  auto const disp = Kokkos::create_mirror_view_and_copy(HostSpace(), plan.exchange(cat.velocity_dispersion));
  auto const radius = Kokkos::create_mirror_view_and_copy(HostSpace(), plan.exchange(cat.half_mass_radius));
  ScalarView<std::uint64_t> bound_device;
  if (any) {
    ScalarView<std::uint64_t> source = cat.most_bound_id;
    if (source.extent(0) < cat.num) source = ScalarView<std::uint64_t>("kfmm::fof_catalogue::most_bound_id", cat.num);
    bound_device = plan.exchange(source);
  }
  auto const bound = Kokkos::create_mirror_view_and_copy(HostSpace(), bound_device);

  FoFCatalogue<HostSpace> out;
  out.num = m;
  out.num_total = cat.num_total;
  out.num_members_total = cat.num_members_total;
  out.number = ScalarView<std::uint64_t, HostSpace>("number", m);
  out.label = ScalarView<std::uint64_t, HostSpace>("label", m);
  out.length = ScalarView<std::uint64_t, HostSpace>("length", m);
  out.mass = ScalarView<double, HostSpace>("mass", m);
  out.pos = Vec3View<double, HostSpace>("pos", m);
  out.vel = Vec3View<double, HostSpace>("vel", m);
  out.velocity_dispersion = ScalarView<double, HostSpace>("velocity_dispersion", m);
  out.half_mass_radius = ScalarView<double, HostSpace>("half_mass_radius", m);
  if (any) out.most_bound_id = ScalarView<std::uint64_t, HostSpace>("most_bound_id", m);
  for (std::size_t i = 0; i < m; ++i) {
    std::size_t const k = number(i);
    if (k >= m) fail("FoF catalogue: group number {} out of range [0, {}) at rank 0", k, m);
    out.number(k) = k;
    out.label(k) = label(i);
    out.length(k) = length(i);
    out.mass(k) = mass(i);
    for (int c = 0; c < 3; ++c) {
      out.pos(k, c) = pos(i, c);
      out.vel(k, c) = vel(i, c);
    }
    out.velocity_dispersion(k) = disp(i);
    out.half_mass_radius(k) = radius(i);
    if (any) out.most_bound_id(k) = bound(i);
  }
  return out;
}

}  // namespace kfmm
