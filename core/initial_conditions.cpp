#include <kfmm/core/error.hpp>
#include <kfmm/core/initial_conditions.hpp>
#include <kfmm/core/random.hpp>

#include <algorithm>
#include <cmath>

namespace kfmm {

namespace {

using HostExecution = Kokkos::DefaultHostExecutionSpace;

constexpr double pi = 3.141592653589793238462643383279502884;

// Speeds of the equilibrium models stay below the escape speed at the centre, √2 (G = M = a = 1);
// 2 leaves headroom for the fixed-point velocity sums.
constexpr double speed_bound = 2.0;

// The fixed-point sums must keep n·bound·scale below 2^62 and resolve at least 2^-20.
constexpr double max_count_times_bound = 4398046511104.0;  // 2^42

/// The first global index of `rank`'s slice: floor(n·rank/nranks) without overflowing n·rank.
std::uint64_t slice_begin(std::uint64_t n, int rank, int nranks) {
  auto const r = std::uint64_t(rank), parts = std::uint64_t(nranks);
  return (n / parts) * r + (n % parts) * r / parts;
}

/// Uniformly random direction scaled to `length`.
void isotropic(CounterRandom& random, double length, double out[3]) {
  double const cos_theta = 2 * random.uniform() - 1;
  double const phi = 2 * pi * random.uniform();
  double const sin_theta = std::sqrt(std::max(0.0, 1 - cos_theta * cos_theta));
  out[0] = length * sin_theta * std::cos(phi);
  out[1] = length * sin_theta * std::sin(phi);
  out[2] = length * cos_theta;
}

// ---- Plummer (Aarseth, Hénon & Wielen 1974), G = M = a = 1 -------------------------------

double plummer_enclosed_mass(double r) { return r * r * r / std::pow(1 + r * r, 1.5); }

void sample_plummer(CounterRandom& random, double truncated_mass, double pos[3], double vel[3]) {
  // Inverse cumulative mass on (0, M(r_t)): a redraw of every radius beyond r_t in one step.
  double const enclosed = random.uniform() * truncated_mass;
  double const r = 1 / std::sqrt(std::pow(enclosed, -2.0 / 3.0) - 1);
  isotropic(random, r, pos);
  // von Neumann rejection from g(q) = q²(1 − q²)^{7/2}, whose maximum 0.0921 is below 0.1.
  double q;
  do {
    q = random.uniform();
  } while (0.1 * random.uniform() >= q * q * std::pow(1 - q * q, 3.5));
  isotropic(random, q * std::sqrt(2.0) * std::pow(1 + r * r, -0.25), vel);
}

// ---- Hernquist (1990), G = M = a = 1 --------------------------------------------------------

double hernquist_enclosed_mass(double r) { return r * r / ((1 + r) * (1 + r)); }

/// 3 asin q + q √(1−q²)(1−2q²)(8q⁴−8q²−3) of Hernquist's eq. 17. Its terms cancel to O(q⁵),
/// so small q uses the series (relative error < 1e-16 for q < 0.1).
double hernquist_bracket(double q) {
  double const q2 = q * q;
  if (q < 0.1) {
    double const series =
        128.0 / 5 + q2 * (-192.0 / 7 + q2 * (16.0 / 3 + q2 * (8.0 / 11 + q2 * (3.0 / 13 + q2 * (0.1 + q2 * 7.0 / 136)))));
    return q2 * q2 * q * series;
  }
  return 3 * std::asin(q) + q * std::sqrt(1 - q2) * (1 - 2 * q2) * (8 * q2 * q2 - 8 * q2 - 3);
}

/// Unnormalised density of x = v / v_escape at radius r: x² f(E), with f from eq. 17 and the
/// binding energy ε = −E = ψ(1 − x²), ψ = 1/(1 + r). 1 − ε is formed without cancellation.
double hernquist_speed_density(double x, double r) {
  double const psi = 1 / (1 + r);
  double const binding = psi * (1 - x * x);
  double const one_minus_binding = r * psi + psi * x * x;
  return x * x * std::pow(one_minus_binding, -2.5) * hernquist_bracket(std::sqrt(binding));
}

/// Bound of hernquist_speed_density over x ∈ (0, 1) at radius r. The density is unimodal in x,
/// so golden-section search finds the peak; the 2 % margin covers its remaining uncertainty.
double hernquist_speed_density_bound(double r) {
  double const ratio = 0.5 * (std::sqrt(5.0) - 1);
  double low = 0, high = 1;
  double a = high - ratio * (high - low), b = low + ratio * (high - low);
  double fa = hernquist_speed_density(a, r), fb = hernquist_speed_density(b, r);
  for (int iteration = 0; iteration < 30; ++iteration) {
    if (fa < fb) {
      low = a;
      a = b;
      fa = fb;
      b = low + ratio * (high - low);
      fb = hernquist_speed_density(b, r);
    } else {
      high = b;
      b = a;
      fb = fa;
      a = high - ratio * (high - low);
      fa = hernquist_speed_density(a, r);
    }
  }
  return 1.02 * std::max(fa, fb);
}

void sample_hernquist(CounterRandom& random, double truncated_mass, double pos[3], double vel[3]) {
  // Inverse cumulative mass M(r) = r²/(1+r)² on (0, M(r_t)): r = √X / (1 − √X).
  double const root = std::sqrt(random.uniform() * truncated_mass);
  double const r = root / (1 - root);
  isotropic(random, r, pos);
  double const bound = hernquist_speed_density_bound(r);
  double x;
  do {
    x = random.uniform();
  } while (bound * random.uniform() >= hernquist_speed_density(x, r));
  isotropic(random, x * std::sqrt(2 / (1 + r)), vel);
}

// ---- Centre-of-mass frame, exact across rank counts ----------------------------------------

/// Power of two s with n·bound·s < 2^62: n terms of |value| ≤ bound, rounded to integers after
/// scaling by s, then sum to less than 2^62 in int64, and the sum is exact in any order.
double fixed_point_scale(std::uint64_t n, double bound) {
  int exponent = 0;
  std::frexp(double(n) * bound, &exponent);  // n·bound < 2^exponent
  return std::ldexp(1.0, 62 - exponent);
}

/// Moves the particles of all ranks to their centre-of-mass frame (equal masses, so the centre
/// of mass is the mean). Positions are within the truncation radius, speeds below speed_bound.
void move_to_centre_of_mass_frame(Particles<HostSpace>& particles, ICOptions const& options,
                                  IntegerAllreduce const& allreduce) {
  double const scale[2] = {fixed_point_scale(options.n_total, options.truncation_radius),
                           fixed_point_scale(options.n_total, speed_bound)};
  Vec3View<double, HostSpace> const fields[2] = {particles.pos, particles.vel};
  std::int64_t sums[6] = {};
  for (int field = 0; field < 2; ++field)
    for (std::size_t i = 0; i < particles.num; ++i)
      for (int c = 0; c < 3; ++c) sums[3 * field + c] += std::llround(fields[field](i, c) * scale[field]);
  allreduce(sums, 6);
  for (int field = 0; field < 2; ++field)
    for (int c = 0; c < 3; ++c) {
      double const mean = double(sums[3 * field + c]) / scale[field] / double(options.n_total);
      for (std::size_t i = 0; i < particles.num; ++i) fields[field](i, c) -= mean;
    }
}

/// Fills positions and velocities of particle `begin + k` from its own random stream.
template <class Sampler>
void sample_particles(Particles<HostSpace> const& particles, std::uint64_t begin, std::uint64_t seed,
                      char const* label, Sampler const& sample) {
  Kokkos::parallel_for(label, Kokkos::RangePolicy<HostExecution>(0, particles.num), [&](std::size_t k) {
    CounterRandom random(seed, RandomStream::Particle, begin + k);
    double pos[3], vel[3];
    sample(random, pos, vel);
    for (int c = 0; c < 3; ++c) {
      particles.pos(k, c) = pos[c];
      particles.vel(k, c) = vel[c];
    }
  });
  HostExecution().fence();
}

bool is_equilibrium_model(ICKind kind) { return kind == ICKind::Plummer || kind == ICKind::Hernquist; }

}  // namespace

ICKind parse_ic_kind(std::string const& name) {
  if (name == "clumps" || name == "gaussian_clumps") return ICKind::GaussianClumps;
  if (name == "plummer") return ICKind::Plummer;
  if (name == "hernquist") return ICKind::Hernquist;
  if (name == "uniform") return ICKind::Uniform;
  fail("unknown initial-condition kind '{}': valid kinds are clumps (or gaussian_clumps), plummer, hernquist, uniform",
       name);
}

std::string to_string(ICKind kind) {
  switch (kind) {
    case ICKind::GaussianClumps: return "clumps";
    case ICKind::Plummer: return "plummer";
    case ICKind::Hernquist: return "hernquist";
    case ICKind::Uniform: return "uniform";
  }
  fail("invalid ICKind value {}", static_cast<int>(kind));
}

void ICOptions::validate() const {
  if (n_total < 1) fail("initial conditions: n_total = 0; generate at least 1 particle");
  if (kind == ICKind::GaussianClumps && clumps < 1)
    fail("initial conditions: clumps = {}; a clumps model needs at least 1 clump", clumps);
  if (is_equilibrium_model(kind)) {
    if (!(truncation_radius > 0 && truncation_radius <= 1e6))
      fail("initial conditions: truncation_radius = {} is outside (0, 1e6]; use a radius in scale lengths, "
           "e.g. 100",
           truncation_radius);
    double const product = double(n_total) * std::max(truncation_radius, speed_bound);
    if (product > max_count_times_bound)
      fail("initial conditions: n_total·truncation_radius = {:g} exceeds 2^42 = {:g}, beyond which the exact "
           "centre-of-mass sum loses resolution; lower n_total or truncation_radius",
           product, max_count_times_bound);
  }
}

std::vector<GaussianClump> gaussian_clumps(ICOptions const& options) {
  std::vector<GaussianClump> clumps(std::size_t(std::max(options.clumps, 0)));
  for (std::size_t k = 0; k < clumps.size(); ++k) {
    CounterRandom random(options.seed, RandomStream::Model, k);
    for (int c = 0; c < 3; ++c) clumps[k].centre[c] = 30 * random.normal();
    for (int c = 0; c < 3; ++c) clumps[k].velocity[c] = -2 * clumps[k].centre[c] + 20 * random.normal();
  }
  return clumps;
}

Particles<HostSpace> generate_initial_conditions(ICOptions const& options, int rank, int nranks,
                                                 IntegerAllreduce const& allreduce) {
  options.validate();
  if (nranks < 1 || rank < 0 || rank >= nranks)
    fail("initial conditions: rank {} of {} ranks is not a valid slice; need 0 ≤ rank < nranks", rank, nranks);
  std::uint64_t const begin = slice_begin(options.n_total, rank, nranks);
  std::uint64_t const end = slice_begin(options.n_total, rank + 1, nranks);

  Particles<HostSpace> particles(end - begin);
  particles.num = end - begin;
  particles.num_total = options.n_total;
  double const mass = 1.0 / double(options.n_total);
  for (std::size_t k = 0; k < particles.num; ++k) {
    particles.mass(k) = mass;
    particles.id(k) = begin + k + 1;
  }

  switch (options.kind) {
    case ICKind::GaussianClumps: {
      auto const clumps = gaussian_clumps(options);
      int const count = options.clumps;
      sample_particles(particles, begin, options.seed, "kfmm::ics::clumps",
                       [&](CounterRandom& random, double pos[3], double vel[3]) {
                         int const k = std::min(int(random.uniform() * count), count - 1);
                         for (int c = 0; c < 3; ++c) pos[c] = clumps[k].centre[c] + random.normal();
                         for (int c = 0; c < 3; ++c) vel[c] = clumps[k].velocity[c] + 20 * random.normal();
                       });
      break;
    }
    case ICKind::Plummer: {
      double const truncated_mass = plummer_enclosed_mass(options.truncation_radius);
      sample_particles(particles, begin, options.seed, "kfmm::ics::plummer",
                       [&](CounterRandom& random, double pos[3], double vel[3]) {
                         sample_plummer(random, truncated_mass, pos, vel);
                       });
      break;
    }
    case ICKind::Hernquist: {
      double const truncated_mass = hernquist_enclosed_mass(options.truncation_radius);
      sample_particles(particles, begin, options.seed, "kfmm::ics::hernquist",
                       [&](CounterRandom& random, double pos[3], double vel[3]) {
                         sample_hernquist(random, truncated_mass, pos, vel);
                       });
      break;
    }
    case ICKind::Uniform:
      sample_particles(particles, begin, options.seed, "kfmm::ics::uniform",
                       [](CounterRandom& random, double pos[3], double vel[3]) {
                         for (int c = 0; c < 3; ++c) pos[c] = random.uniform();
                         for (int c = 0; c < 3; ++c) vel[c] = 0;
                       });
      break;
  }
  if (is_equilibrium_model(options.kind)) move_to_centre_of_mass_frame(particles, options, allreduce);
  return particles;
}

}  // namespace kfmm
