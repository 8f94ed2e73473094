#pragma once
// Point sets for the friends-of-friends tests, the same on every rank, with a brute-force
// reference (union-find over all pairs) and helpers that spread the points over the ranks and
// collect per-particle results back in global order.
#include <kfmm/comm/context.hpp>
#include <kfmm/core/particles.hpp>
#include <Kokkos_Core.hpp>

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

namespace kfmm::test_support {

struct PointSet {
  std::vector<double> x;  // 3 per point
  std::vector<double> v;  // 3 per point
  std::vector<double> m;
  std::vector<std::uint64_t> id;
  std::size_t size() const { return m.size(); }
  void add(double px, double py, double pz, std::uint64_t pid, double mass = 1) {
    x.insert(x.end(), {px, py, pz});
    v.insert(v.end(), {std::sin(3.0 * pid), std::cos(5.0 * pid), std::sin(0.7 * pid + 1)});
    m.push_back(mass);
    id.push_back(pid);
  }
};

/// Ids are scrambled (not the row order) so that labels = smallest id is a real test.
inline std::uint64_t scrambled_id(std::size_t i) { return (i * 7919 + 13) % 1000003 + 5; }

inline PointSet uniform_points(std::size_t n, double side, std::uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, side);
  PointSet s;
  for (std::size_t i = 0; i < n; ++i) {
    double const a = u(rng), b = u(rng), c = u(rng);
    s.add(a, b, c, scrambled_id(i), 0.5 + 0.001 * double(i % 7));
  }
  return s;
}

/// `clumps` Gaussian clumps of width `width` in [0, side)³ plus a uniform background.
inline PointSet clumped_points(std::size_t n, int clumps, double side, double width, std::uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, side);
  std::normal_distribution<double> g(0, width);
  std::vector<double> centres;
  for (int c = 0; c < 3 * clumps; ++c) centres.push_back(u(rng));
  PointSet s;
  for (std::size_t i = 0; i < n; ++i) {
    double p[3];
    if (i % 5 == 4) {
      for (double& q : p) q = u(rng);
    } else {
      int const c = int(i % std::size_t(clumps));
      for (int k = 0; k < 3; ++k) p[k] = centres[3 * c + k] + g(rng);
    }
    s.add(p[0], p[1], p[2], scrambled_id(i), 1.0 + 0.25 * double(i % 3));
  }
  return s;
}

/// Wraps every coordinate into [0, box).
inline void wrap(PointSet& s, double box) {
  for (double& q : s.x) {
    q -= box * std::floor(q / box);
    if (q >= box) q = 0;
  }
}

inline double image(double d, double box) { return box > 0 ? d - box * std::floor(d / box + 0.5) : d; }

/// Labels (smallest id of the component) by union-find over all pairs within `link`.
inline std::vector<std::uint64_t> brute_force_labels(PointSet const& s, double link, double box) {
  std::size_t const n = s.size();
  std::vector<std::size_t> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](std::size_t a) {
    while (parent[a] != a) a = parent[a] = parent[parent[a]];
    return a;
  };
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 1; j < n; ++j) {
      double r2 = 0;
      for (int k = 0; k < 3; ++k) {
        double const d = image(s.x[3 * j + k] - s.x[3 * i + k], box);
        r2 += d * d;
      }
      if (r2 <= link * link) {
        std::size_t const a = find(i), b = find(j);
        if (a != b) parent[std::max(a, b)] = std::min(a, b);
      }
    }
  std::vector<std::uint64_t> smallest(n, ~std::uint64_t(0)), label(n);
  for (std::size_t i = 0; i < n; ++i) smallest[find(i)] = std::min(smallest[find(i)], s.id[i]);
  for (std::size_t i = 0; i < n; ++i) label[i] = smallest[find(i)];
  return label;
}

/// How the global points are dealt to ranks.
enum class Deal { Blocks, RoundRobin, AllOnRankZero };

inline std::vector<std::size_t> my_rows(Context const& context, std::size_t n, Deal deal) {
  std::vector<std::size_t> rows;
  int const r = context.rank(), size = context.size();
  for (std::size_t i = 0; i < n; ++i) {
    int owner = 0;
    if (deal == Deal::Blocks) owner = int(i * std::size_t(size) / n);
    if (deal == Deal::RoundRobin) owner = int(i % std::size_t(size));
    if (owner == r) rows.push_back(i);
  }
  return rows;
}

/// This rank's particles (rows of the global set), on the device.
inline Particles<> local_particles(Context const& context, PointSet const& s, std::vector<std::size_t> const& rows) {
  Particles<HostSpace> host(rows.size());
  host.num = rows.size();
  host.num_total = s.size();
  for (std::size_t k = 0; k < rows.size(); ++k) {
    std::size_t const i = rows[k];
    for (int c = 0; c < 3; ++c) {
      host.pos(k, c) = s.x[3 * i + c];
      host.vel(k, c) = s.v[3 * i + c];
    }
    host.mass(k) = s.m[i];
    host.id(k) = s.id[i];
  }
  (void)context;
  return to_device(host);
}

/// Per-particle values of all ranks, placed at their global rows (every rank gets all).
template <class T>
std::vector<T> collect(Context const& context, std::vector<std::size_t> const& rows, std::vector<T> const& mine,
                       std::size_t n) {
  std::vector<std::uint64_t> packed;
  for (std::size_t k = 0; k < rows.size(); ++k) {
    packed.push_back(rows[k]);
    std::uint64_t bits = 0;
    static_assert(sizeof(T) == 8, "8-byte values");
    std::memcpy(&bits, &mine[k], 8);
    packed.push_back(bits);
  }
  int count = int(packed.size());
  std::vector<int> counts(std::size_t(context.size())), offsets(std::size_t(context.size()) + 1, 0);
  MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, context.comm());
  for (int r = 0; r < context.size(); ++r) offsets[std::size_t(r) + 1] = offsets[std::size_t(r)] + counts[std::size_t(r)];
  std::vector<std::uint64_t> all(std::size_t(offsets.back()));
  MPI_Allgatherv(packed.data(), count, MPI_UINT64_T, all.data(), counts.data(), offsets.data(), MPI_UINT64_T,
                 context.comm());
  std::vector<T> out(n);
  for (std::size_t k = 0; k + 1 < all.size(); k += 2) std::memcpy(&out[all[k]], &all[k + 1], 8);
  return out;
}

template <class View>
std::vector<typename View::non_const_value_type> to_vector(View const& view, std::size_t n) {
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), view);
  return std::vector<typename View::non_const_value_type>(host.data(), host.data() + n);
}

}  // namespace kfmm::test_support
