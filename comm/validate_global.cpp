#include <kfmm/comm/exchange_plan.hpp>
#include <kfmm/comm/validate_global.hpp>
#include <kfmm/core/validate.hpp>

#include <kfmm/core/format.hpp>

#include <algorithm>
#include <string>
#include <tuple>

namespace kfmm {

namespace {

// Where one particle id lives.
struct IdRecord {
  std::uint64_t id;
  std::uint64_t index;
  int rank;
};

// splitmix64's finaliser: spreads consecutive ids evenly over the owner ranks.
std::uint64_t mix(std::uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::string check_num_total(Context const& context, Particles<HostSpace> const& particles) {
  unsigned long long const local = particles.num;
  unsigned long long total = 0;
  MPI_Allreduce(&local, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, context.comm());
  if (particles.num_total == total) return {};
  return fmt::format("num_total = {} on rank {} but the ranks hold {} particles in all; set num_total to {}",
                     particles.num_total, context.rank(), total, total);
}

// Sends every id to the rank mix(id) % ranks, which looks for ids that arrive twice.
std::string find_id_on_two_ranks(Context const& context, Particles<HostSpace> const& particles) {
  std::size_t const n = particles.num;
  Kokkos::View<int*, HostSpace> owners(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::validate::owners"), n);
  Kokkos::View<IdRecord*, HostSpace> records(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::validate::id_records"), n);
  for (std::size_t i = 0; i < n; ++i) {
    owners(i) = static_cast<int>(mix(particles.id(i)) % std::uint64_t(context.size()));
    records(i) = IdRecord{particles.id(i), i, context.rank()};
  }
  ExchangePlan<HostSpace> const plan(context, owners, n);
  auto const received = plan.exchange(records);
  std::vector<IdRecord> arrived(received.data(), received.data() + plan.num_import());
  auto const key = [](IdRecord const& r) { return std::make_tuple(r.id, r.rank, r.index); };
  std::sort(arrived.begin(), arrived.end(), [&](IdRecord const& a, IdRecord const& b) { return key(a) < key(b); });
  for (std::size_t k = 1; k < arrived.size(); ++k) {
    IdRecord const& a = arrived[k - 1];
    IdRecord const& b = arrived[k];
    if (a.id == b.id)
      return fmt::format("id {} is used on rank {} (particle {}) and on rank {} (particle {}); particle ids must be "
                         "unique across ranks",
                         a.id, a.rank, a.index, b.rank, b.index);
  }
  return {};
}

}  // namespace

void validate_global(Context const& context, Particles<HostSpace> const& particles) {
  agree_on_error(context, find_invalid_particle(particles, context.rank()));
  agree_on_error(context, check_num_total(context, particles));
  agree_on_error(context, find_id_on_two_ranks(context, particles));
}

}  // namespace kfmm
