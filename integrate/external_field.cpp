#include <kfmm/integrate/external_field.hpp>

#include <kfmm/core/error.hpp>
#include <kfmm/core/space_copy.hpp>

#include <mpi.h>

namespace kfmm {

namespace {

/// Particles per block of the reaction sums: summed serially inside a block and in block order
/// afterwards, so the sums do not depend on the thread count.
constexpr std::size_t reaction_block_size = 1024;

using ExternalPotentialView = Kokkos::View<ExternalPotential*, MemorySpace>;

/// The placed potentials in device memory.
ExternalPotentialView potentials_to_device(std::vector<ExternalPotential> const& placed) {
  ExternalPotentialView device("kfmm::integrate::external::potentials", placed.size());
  Kokkos::View<ExternalPotential*, HostSpace> host("kfmm::integrate::external::potentials_host", placed.size());
  for (std::size_t k = 0; k < placed.size(); ++k) host(k) = placed[k];
  copy_contiguous(ExecutionSpace(), device, host);
  ExecutionSpace().fence();  // `host` is freed on return
  return device;
}

/// Acceleration of potential `p` (centre already placed) at point x.
std::array<double, 3> field_at(ExternalPotential const& p, double G, std::array<double, 3> const& x, double& phi) {
  double a[3];
  external_field(p, G, x[0] - p.centre[0], x[1] - p.centre[1], x[2] - p.centre[2], phi, a);
  return {a[0], a[1], a[2]};
}

}  // namespace

void drift_centres(std::vector<CentreState>& centres, double factor) {
  for (auto& c : centres)
    for (int d = 0; d < 3; ++d) c.position[d] += factor * c.velocity[d];
}

void kick_centres(std::vector<CentreState>& centres, double factor) {
  for (auto& c : centres)
    for (int d = 0; d < 3; ++d) c.velocity[d] += factor * c.acceleration[d];
}

void ExternalField::validate() const {
  if (potentials.size() > static_cast<std::size_t>(max_external_potentials))
    fail("{} external potentials given; at most {} are supported: combine or drop some", potentials.size(),
         max_external_potentials);
  for (std::size_t k = 0; k < potentials.size(); ++k)
    potentials[k].validate(fmt::format("{} ({})", k, to_string(potentials[k].kind)));
  if (integrated_count() > max_integrated_centres)
    fail("{} external potentials have integrated centres; at most {} are supported", integrated_count(),
         max_integrated_centres);
}

int ExternalField::integrated_count() const {
  int count = 0;
  for (auto const& p : potentials) count += p.motion == CentreMotion::Integrated;
  return count;
}

std::vector<CentreState> ExternalField::initial_centres() const {
  std::vector<CentreState> centres;
  for (auto const& p : potentials)
    if (p.motion == CentreMotion::Integrated) {
      CentreState c;
      for (int d = 0; d < 3; ++d) {
        c.position[d] = p.centre[d];
        c.velocity[d] = p.velocity[d];
      }
      centres.push_back(c);
    }
  return centres;
}

std::vector<ExternalPotential> ExternalField::placed(double time, std::vector<CentreState> const& centres) const {
  if (centres.size() != static_cast<std::size_t>(integrated_count()))
    fail("external field: {} integrated centre states for {} integrated potentials; start from initial_centres()",
         centres.size(), integrated_count());
  std::vector<ExternalPotential> result = potentials;
  std::size_t next = 0;
  for (auto& p : result) {
    auto const c = p.motion == CentreMotion::Integrated ? centres[next++].position : p.centre_at(time);
    for (int d = 0; d < 3; ++d) p.centre[d] = c[d];
  }
  return result;
}

void ExternalField::evaluate(std::array<double, 3> const& x, double time, double G,
                             std::vector<CentreState> const& centres, double& phi,
                             std::array<double, 3>& acceleration) const {
  phi = 0;
  acceleration = {0, 0, 0};
  for (auto const& p : placed(time, centres)) {
    double term = 0;
    auto const a = field_at(p, G, x, term);
    phi += term;
    for (int d = 0; d < 3; ++d) acceleration[d] += a[d];
  }
}

void ExternalField::apply(Context const& context, double time, double G, std::vector<CentreState>& centres,
                          Particles<MemorySpace> const& particles, ScalarView<double>& external_potential,
                          Vec3View<double>& acceleration, ActiveFlags const& active) const {
  auto const terms = placed(time, centres);
  std::size_t const n = particles.num;
  if (external_potential.extent(0) < n)
    external_potential = ScalarView<double>("kfmm::integrate::external::potential", particles.capacity());
  if (acceleration.extent(0) < n)
    fail("external field: the acceleration View holds {} particles, fewer than the {} given", acceleration.extent(0), n);
  auto const device_terms = potentials_to_device(terms);
  int const count = static_cast<int>(terms.size());
  auto pos = particles.pos;
  auto acc = acceleration;
  auto ext = external_potential;
  bool const subset = active.extent(0) > 0;
  if (subset && active.extent(0) < n)
    fail("external field: {} active flags for {} particles; size the flags to the particles", active.extent(0), n);
  Kokkos::parallel_for(
      "kfmm::integrate::external::apply", Kokkos::RangePolicy<ExecutionSpace>(0, n), KOKKOS_LAMBDA(std::size_t i) {
        if (subset && !active(i)) return;
        double phi = 0, a[3] = {0, 0, 0};
        for (int k = 0; k < count; ++k) {
          ExternalPotential const& p = device_terms(k);
          double term, ak[3];
          external_field(p, G, pos(i, 0) - p.centre[0], pos(i, 1) - p.centre[1], pos(i, 2) - p.centre[2], term, ak);
          phi += term;
          for (int d = 0; d < 3; ++d) a[d] += ak[d];
        }
        ext(i) = phi;
        for (int d = 0; d < 3; ++d) acc(i, d) += a[d];
      });

  int const integrated = integrated_count();
  if (integrated == 0) return;

  // The particles' reaction: Σ m_i a_k(x_i − c_k) for each integrated k, in fixed blocks.
  std::size_t const blocks = (n + reaction_block_size - 1) / reaction_block_size;
  int const columns = 3 * integrated;
  Kokkos::View<double**, Kokkos::LayoutRight, MemorySpace> block_sums("kfmm::integrate::external::reaction_blocks",
                                                                       blocks, columns);
  auto mass = particles.mass;
  Kokkos::parallel_for(
      "kfmm::integrate::external::reaction", Kokkos::RangePolicy<ExecutionSpace>(0, blocks),
      KOKKOS_LAMBDA(std::size_t b) {
        double s[3 * max_integrated_centres] = {};
        std::size_t const end = (b + 1) * reaction_block_size < n ? (b + 1) * reaction_block_size : n;
        for (std::size_t i = b * reaction_block_size; i < end; ++i) {
          int j = 0;
          for (int k = 0; k < count; ++k) {
            ExternalPotential const& p = device_terms(k);
            if (p.motion != CentreMotion::Integrated) continue;
            double term, ak[3];
            external_field(p, G, pos(i, 0) - p.centre[0], pos(i, 1) - p.centre[1], pos(i, 2) - p.centre[2], term,
                           ak);
            for (int d = 0; d < 3; ++d) s[3 * j + d] += mass(i) * ak[d];
            ++j;
          }
        }
        for (int c = 0; c < columns; ++c) block_sums(b, c) = s[c];
      });
  Kokkos::View<double**, Kokkos::LayoutRight, HostSpace> host_sums("kfmm::integrate::external::reaction_host", blocks,
                                                                    columns);
  copy_contiguous(ExecutionSpace(), host_sums, block_sums);
  ExecutionSpace().fence();
  std::vector<double> local(columns, 0.0);
  for (std::size_t b = 0; b < blocks; ++b)
    for (int c = 0; c < columns; ++c) local[c] += host_sums(b, c);
  std::vector<double> all(static_cast<std::size_t>(columns) * context.size());
  MPI_Allgather(local.data(), columns, MPI_DOUBLE, all.data(), columns, MPI_DOUBLE, context.comm());
  std::vector<double> pull(columns, 0.0);  // Σ over all particles, ranks in order
  for (int r = 0; r < context.size(); ++r)
    for (int c = 0; c < columns; ++c) pull[c] += all[static_cast<std::size_t>(r) * columns + c];

  // Each integrated centre: the other potentials, symmetrised between integrated pairs, and
  // the reaction −Σ m a_k / M_k.
  std::vector<int> index;  // potential index of integrated centre j
  for (int k = 0; k < count; ++k)
    if (terms[k].motion == CentreMotion::Integrated) index.push_back(k);
  for (int j = 0; j < integrated; ++j) {
    auto const& self = terms[index[j]];
    std::array<double, 3> const c = centres[j].position;
    double const m_self = self.mass();
    std::array<double, 3> a{};
    for (int d = 0; d < 3; ++d) a[d] = -pull[3 * j + d] / m_self;
    for (int k = 0; k < count; ++k) {
      if (k == index[j]) continue;
      auto const& other = terms[k];
      double phi = 0;
      auto const from_other = field_at(other, G, c, phi);
      if (other.motion != CentreMotion::Integrated) {
        for (int d = 0; d < 3; ++d) a[d] += from_other[d];
      } else {
        // −(M_k/M_j) a_j(c_k − c_j): the pull of the other centre's mass in this one's potential.
        std::array<double, 3> const c_other = {other.centre[0], other.centre[1], other.centre[2]};
        auto const on_other = field_at(self, G, c_other, phi);
        for (int d = 0; d < 3; ++d) a[d] += 0.5 * (from_other[d] - other.mass() / m_self * on_other[d]);
      }
    }
    centres[j].acceleration = a;
  }
}

double ExternalField::centres_energy(double time, double G, std::vector<CentreState> const& centres,
                                     double kick) const {
  auto const terms = placed(time, centres);
  double energy = 0;
  std::size_t j = 0;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    if (terms[i].motion != CentreMotion::Integrated) continue;
    auto const& c = centres[j++];
    double const m = terms[i].mass();
    double v2 = 0;
    for (int d = 0; d < 3; ++d) {
      double const v = c.velocity[d] + kick * c.acceleration[d];
      v2 += v * v;
    }
    energy += 0.5 * m * v2;
    for (std::size_t k = 0; k < terms.size(); ++k) {
      if (k == i) continue;
      double phi = 0;
      field_at(terms[k], G, c.position, phi);
      // A pair of integrated centres is met twice (from each side): half each time.
      energy += (terms[k].motion == CentreMotion::Integrated ? 0.5 : 1.0) * m * phi;
    }
  }
  return energy;
}

}  // namespace kfmm
