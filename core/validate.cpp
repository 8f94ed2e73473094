#include <kfmm/core/validate.hpp>

#include <kfmm/core/format.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace kfmm {

std::string find_invalid_particle(Particles<HostSpace> const& p, int rank) {
  if (p.num > p.capacity())
    return fmt::format("rank {}: num = {} exceeds the capacity {}; call reserve()/resize() before setting num", rank,
                       p.num, p.capacity());
  auto where = [&](std::size_t i) { return fmt::format("particle {} (id {}, rank {})", i, p.id(i), rank); };
  for (std::size_t i = 0; i < p.num; ++i) {
    for (int k = 0; k < 3; ++k) {
      if (!std::isfinite(p.pos(i, k)))
        return fmt::format("{} has a non-finite position component {} = {}; every position must be finite", where(i),
                           "xyz"[k], p.pos(i, k));
      if (!std::isfinite(p.vel(i, k)))
        return fmt::format("{} has a non-finite velocity component {} = {}; every velocity must be finite", where(i),
                           "xyz"[k], p.vel(i, k));
    }
    if (!(p.mass(i) > 0.0) || !std::isfinite(p.mass(i)))
      return fmt::format("{} has mass {}; masses must be positive and finite", where(i), p.mass(i));
  }
  std::vector<std::size_t> order(p.num);
  std::iota(order.begin(), order.end(), std::size_t(0));
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return p.id(a) < p.id(b); });
  for (std::size_t k = 1; k < order.size(); ++k)
    if (p.id(order[k]) == p.id(order[k - 1]))
      return fmt::format("id {} is used twice on rank {} (particles {} and {}); particle ids must be unique",
                         p.id(order[k]), rank, std::min(order[k - 1], order[k]), std::max(order[k - 1], order[k]));
  return {};
}

void validate_local(Particles<HostSpace> const& particles, int rank) {
  std::string const message = find_invalid_particle(particles, rank);
  if (!message.empty()) throw Error(message);
}

}  // namespace kfmm
