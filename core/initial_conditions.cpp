#include <kfmm/core/error.hpp>
#include <kfmm/core/initial_conditions.hpp>
#include <kfmm/core/random.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

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

// ---- Root finding ----------------------------------------------------------------------------

/// Root of an increasing function on [low, high] (value(low) ≤ target ≤ value(high)) by Newton
/// steps from `x`, with a bisection whenever a step leaves the bracket, to double round-off.
/// `evaluate(x, value, slope)` gives the function and its derivative.
template <class Evaluate>
double solve_increasing(Evaluate const& evaluate, double target, double low, double high, double x) {
  for (int iteration = 0; iteration < 200; ++iteration) {
    double value = 0, slope = 0;
    evaluate(x, value, slope);
    if (value == target) return x;
    (value < target ? low : high) = x;
    double next = slope > 0 ? x - (value - target) / slope : 0.5 * (low + high);
    if (!(next > low && next < high)) next = 0.5 * (low + high);
    if (std::fabs(next - x) <= 4 * std::numeric_limits<double>::epsilon() * std::fabs(next) || high - low <= 0)
      return next;
    x = next;
  }
  return x;
}

// ---- NFW (Navarro, Frenk & White 1997), G = 1, scale radius 1, mass 1 within r_t ------------

/// μ(r) = ln(1 + r) − r/(1 + r), the NFW mass within r in units of 4πρ₀a³, as a function of
/// x = ln(1 + r): μ = x − 1 + e^{−x}. Below x = 1 the alternating series Σ_{k≥2} (−x)^k/k!
/// avoids the cancellation of x and 1 − e^{−x}.
double nfw_mu_of_log(double x) {
  if (x < 1) {
    double term = 0.5 * x * x, sum = 0;
    for (int k = 3; k <= 24; ++k) {
      sum += term;
      term *= -x / k;
    }
    return sum + term;
  }
  return x + std::expm1(-x);
}

double nfw_mu(double r) { return nfw_mu_of_log(std::log1p(r)); }

/// The radius that encloses μ = `target` (0 < target ≤ μ(r_t)), solved in x = ln(1 + r).
double nfw_radius(double target, double log_truncation) {
  auto const evaluate = [](double x, double& value, double& slope) {
    value = nfw_mu_of_log(x);
    slope = -std::expm1(-x);
  };
  // μ ≤ x²/2, so √(2μ) is at or below the root: Newton's first step lands on the convex side.
  double const start = std::min(std::sqrt(2 * target), log_truncation);
  return std::expm1(solve_increasing(evaluate, target, 0.0, log_truncation, start));
}

/// \brief Isotropic Jeans velocity dispersion of the truncated NFW model:
/// σ_r²(r) = (1/ρ) ∫_r^{r_t} ρ M(r')/r'² dr' = r(1 + r)² I(r)/μ(r_t), with
/// I(r) = ∫_r^{r_t} μ(r')/(r'³(1 + r')²) dr' tabulated on a grid in s = ln r (5-point
/// Gauss–Legendre per interval) and interpolated by cubic Hermite with the exact slope
/// dI/ds = −g(s), g = μ/(r²(1 + r)²). Depends on the options only: the same table on every rank.
class NfwDispersion {
 public:
  explicit NfwDispersion(double truncation_radius)
      : mu_truncation_(nfw_mu(truncation_radius)), log_max_(std::log(truncation_radius)) {
    int const intervals = int(std::ceil((log_max_ - log_min) * nodes_per_unit));
    step_ = (log_max_ - log_min) / intervals;
    // Gauss–Legendre nodes and weights on [−1, 1], exact for polynomials of degree 9.
    double const a = std::sqrt(5 - 2 * std::sqrt(10.0 / 7)) / 3, b = std::sqrt(5 + 2 * std::sqrt(10.0 / 7)) / 3;
    double const wa = (322 + 13 * std::sqrt(70.0)) / 900, wb = (322 - 13 * std::sqrt(70.0)) / 900;
    double const nodes[5] = {-b, -a, 0, a, b}, weights[5] = {wb, wa, 128.0 / 225, wa, wb};
    integral_.assign(std::size_t(intervals) + 1, 0.0);
    slope_.assign(std::size_t(intervals) + 1, 0.0);
    // Node k is at s = log_max − k·step; the integral grows inwards from I(r_t) = 0.
    for (int k = 0; k <= intervals; ++k) {
      slope_[k] = -integrand(node(k));
      if (k == 0) continue;
      double const middle = node(k) + 0.5 * step_;
      double sum = 0;
      for (int q = 0; q < 5; ++q) sum += weights[q] * integrand(middle + 0.5 * step_ * nodes[q]);
      integral_[k] = integral_[k - 1] + 0.5 * step_ * sum;
    }
  }

  double sigma(double r) const {
    double const s = std::log(r);
    double integral;
    if (s >= log_max_) {
      integral = 0;
    } else if (s <= log_min) {
      // g → 1/2 as r → 0: I grows as −ln(r)/2 below the grid (error of order r_min).
      integral = integral_.back() + 0.5 * (log_min - s);
    } else {
      double const position = (log_max_ - s) / step_;
      std::size_t const k = std::min(std::size_t(position), integral_.size() - 2);
      // Hermite on [node(k + 1), node(k)] in t = (s − node(k + 1))/step.
      double const t = (s - node(int(k) + 1)) / step_;
      double const t2 = t * t, t3 = t2 * t;
      integral = (2 * t3 - 3 * t2 + 1) * integral_[k + 1] + (t3 - 2 * t2 + t) * step_ * slope_[k + 1] +
                 (-2 * t3 + 3 * t2) * integral_[k] + (t3 - t2) * step_ * slope_[k];
    }
    return std::sqrt(std::max(0.0, r * (1 + r) * (1 + r) * integral / mu_truncation_));
  }

  double truncated_mass() const { return mu_truncation_; }

 private:
  static constexpr double log_min = -18.420680743952367;  // ln 1e-8
  static constexpr double nodes_per_unit = 16;

  double node(int k) const { return log_max_ - k * step_; }

  static double integrand(double s) {
    double const r = std::exp(s);
    return nfw_mu(r) / (r * r * (1 + r) * (1 + r));
  }

  double mu_truncation_, log_max_, step_ = 0;
  std::vector<double> integral_, slope_;
};

void sample_nfw(CounterRandom& random, NfwDispersion const& dispersion, double log_truncation, double pos[3],
                double vel[3]) {
  double const r = nfw_radius(random.uniform() * dispersion.truncated_mass(), log_truncation);
  isotropic(random, r, pos);
  double const sigma = dispersion.sigma(r);
  for (int c = 0; c < 3; ++c) vel[c] = sigma * random.normal();
}

// ---- Halo with satellites ----------------------------------------------------------------------

// Mass shares in percent: the halo, each satellite, and the rest for the background.
constexpr int halo_percent = 80;
constexpr int satellite_percent = 3;
constexpr int max_satellites = (100 - halo_percent) / satellite_percent;  // 6: 2 % stays for the background
constexpr double satellite_truncation = 100;  // satellite radii, as the Plummer kind's default
constexpr double satellite_min_radius = 0.5, satellite_max_radius = 20;

/// Mass share of component c (0: halo, 1 … satellites, satellites + 1: background).
double component_fraction(ICOptions const& options, std::size_t c) {
  if (c == 0) return halo_percent / 100.0;
  if (c <= std::size_t(options.satellites)) return satellite_percent / 100.0;
  return (100 - halo_percent - satellite_percent * options.satellites) / 100.0;
}

/// Halo mass within r: 80 % of the total, distributed as the Hernquist model truncated at r_t.
double halo_enclosed_mass(double r, double truncation_radius) {
  return halo_percent / 100.0 * hernquist_enclosed_mass(std::min(r, truncation_radius)) /
         hernquist_enclosed_mass(truncation_radius);
}

// ---- Thin exponential disk, R_d = 1, mass 1 within R_t -----------------------------------------

// Beyond 10 R_d the exponential holds 11·e^−10 = 5e-4 of the mass; a larger cut would add only
// a few stray particles that stretch the root cell of the tree.
constexpr double disk_max_radius = 10;

double disk_radius_limit(ICOptions const& options) { return std::min(options.truncation_radius, disk_max_radius); }

/// Disk mass within cylindrical radius R in units of 2πΣ₀R_d²: 1 − (1 + R)e^{−R}. Below R = 1 the
/// alternating series Σ_{k≥2} (−1)^k (k − 1) R^k / k! avoids the cancellation.
double disk_enclosed(double R) {
  if (R < 1) {
    double term = 0.5 * R * R, sum = 0;
    for (int k = 2; k <= 26; ++k) {
      sum += term;
      term *= -R * k / double((k - 1) * (k + 1));
    }
    return sum + term;
  }
  return 1 - (1 + R) * std::exp(-R);
}

void sample_disk(CounterRandom& random, double radius_limit, double truncated_mass, double scale_height,
                 double pos[3], double vel[3]) {
  auto const evaluate = [](double R, double& value, double& slope) {
    value = disk_enclosed(R);
    slope = R * std::exp(-R);
  };
  double const target = random.uniform() * truncated_mass;
  double const R = solve_increasing(evaluate, target, 0.0, radius_limit, std::min(std::sqrt(2 * target), radius_limit));
  double const phi = 2 * pi * random.uniform();
  // sech²(z/z_d)/(2z_d) has the cumulative distribution (1 + tanh(z/z_d))/2.
  double const z = scale_height * std::atanh(2 * random.uniform() - 1);
  double const cos_phi = std::cos(phi), sin_phi = std::sin(phi);
  pos[0] = R * cos_phi;
  pos[1] = R * sin_phi;
  pos[2] = z;
  // Circular speed of the enclosed disk mass taken as spherical: v² = G M(<R)/R.
  double const speed = std::sqrt(disk_enclosed(R) / truncated_mass / R);
  vel[0] = -speed * sin_phi;
  vel[1] = speed * cos_phi;
  vel[2] = 0;
}

// ---- Filament -----------------------------------------------------------------------------------

// The segment runs along (1, −1, 0)/√2 through offset·(1, 1, 1)/√3; the cross-section axes are
// the radial direction (1, 1, 1)/√3 and (−1, −1, 2)/√6, all three orthonormal.
void sample_filament(CounterRandom& random, double offset, double width, double pos[3]) {
  double const s3 = 1 / std::sqrt(3.0), s2 = 1 / std::sqrt(2.0), s6 = 1 / std::sqrt(6.0);
  double const along[3] = {s2, -s2, 0}, radial[3] = {s3, s3, s3}, across[3] = {-s6, -s6, 2 * s6};
  double const t = random.uniform() - 0.5;
  double const g1 = width * random.normal(), g2 = width * random.normal();
  for (int c = 0; c < 3; ++c) pos[c] = (offset + g1) * radial[c] + t * along[c] + g2 * across[c];
}

// ---- Centre-of-mass frame, exact across rank counts ----------------------------------------

/// Power of two s with n·bound·s < 2^62: n terms of |value| ≤ bound, rounded to integers after
/// scaling by s, then sum to less than 2^62 in int64, and the sum is exact in any order.
double fixed_point_scale(std::uint64_t n, double bound) {
  int exponent = 0;
  std::frexp(double(n) * bound, &exponent);  // n·bound < 2^exponent
  return std::ldexp(1.0, 62 - exponent);
}

bool is_equilibrium_model(ICKind kind) {
  return kind == ICKind::Plummer || kind == ICKind::Hernquist || kind == ICKind::NFW || kind == ICKind::Satellites ||
         kind == ICKind::MassSpectrum || kind == ICKind::Disk;
}

/// Bounds of |position component|, |speed| and centre-of-mass weight of the equilibrium models,
/// which size the fixed-point sums. A few speeds beyond the bound (Gaussian tails of NFW) cost
/// nothing: the sums have a factor 2 of headroom.
struct FrameBounds {
  double position, speed, weight = 1;
};

FrameBounds frame_bounds(ICOptions const& options) {
  double const r_t = options.truncation_radius;
  switch (options.kind) {
    case ICKind::NFW:
      // Escape speed at the centre: |φ(0)| = 1/μ(r_t)·∫₀^{r_t} μ/r² dr + 1/r_t ≤ 1/μ(r_t) + 1/r_t.
      return {r_t, std::max(speed_bound, std::sqrt(2 * (1 / nfw_mu(r_t) + 1 / r_t)))};
    case ICKind::Satellites: {
      // Satellite speeds: the halo's circular speed (< 0.5) plus the internal Plummer speed
      // (< √(2 G m / b)); the weights are the masses.
      double const satellite_speed = std::sqrt(2 * satellite_percent / 100.0 / options.satellite_scale);
      auto const begins = satellite_component_begins(options);
      double weight = 0;
      for (std::size_t c = 0; c + 1 < begins.size(); ++c)
        if (begins[c + 1] > begins[c])
          weight = std::max(weight, component_fraction(options, c) / double(begins[c + 1] - begins[c]));
      return {std::max(r_t, satellite_max_radius + satellite_truncation * options.satellite_scale),
              speed_bound + satellite_speed, weight};
    }
    case ICKind::Disk:
      // |z| ≤ z_d·atanh(1 − 2^-53) < 20 z_d.
      return {std::max(disk_radius_limit(options), 20 * options.disk_scale_height), speed_bound};
    default: return {r_t, speed_bound};
  }
}

/// Moves the particles of all ranks to their centre-of-mass frame, weighting particle k by
/// `weight(k)` (1 for equal masses, where the centre of mass is the mean), and returns the
/// global Σ weight. The 7 sums are fixed point, so every rank count gives the same bits.
double move_to_centre_of_mass_frame(Particles<HostSpace>& particles, ICOptions const& options,
                                    Kokkos::View<double*, HostSpace> const& weight, IntegerAllreduce const& allreduce) {
  FrameBounds const bounds = frame_bounds(options);
  double const scale[2] = {fixed_point_scale(options.n_total, bounds.position * bounds.weight),
                           fixed_point_scale(options.n_total, bounds.speed * bounds.weight)};
  double const weight_scale = fixed_point_scale(options.n_total, bounds.weight);
  Vec3View<double, HostSpace> const fields[2] = {particles.pos, particles.vel};
  std::int64_t sums[7] = {};
  for (int field = 0; field < 2; ++field)
    for (std::size_t i = 0; i < particles.num; ++i)
      for (int c = 0; c < 3; ++c)
        sums[3 * field + c] += std::llround(weight(i) * fields[field](i, c) * scale[field]);
  for (std::size_t i = 0; i < particles.num; ++i) sums[6] += std::llround(weight(i) * weight_scale);
  allreduce(sums, 7);
  double const total_weight = double(sums[6]) / weight_scale;
  for (int field = 0; field < 2; ++field)
    for (int c = 0; c < 3; ++c) {
      double const mean = double(sums[3 * field + c]) / scale[field] / total_weight;
      for (std::size_t i = 0; i < particles.num; ++i) fields[field](i, c) -= mean;
    }
  return total_weight;
}

/// Fills positions, velocities and weights of particle `begin + k` from its own random stream;
/// `sample(i, random, pos, vel, weight)` gets the global index i and a weight preset to 1.
template <class Sampler>
void sample_particles(Particles<HostSpace> const& particles, Kokkos::View<double*, HostSpace> const& weights,
                      std::uint64_t begin, std::uint64_t seed, char const* label, Sampler const& sample) {
  Kokkos::parallel_for(label, Kokkos::RangePolicy<HostExecution>(0, particles.num), [&](std::size_t k) {
    CounterRandom random(seed, RandomStream::Particle, begin + k);
    double pos[3], vel[3], weight = 1;
    sample(begin + k, random, pos, vel, weight);
    for (int c = 0; c < 3; ++c) {
      particles.pos(k, c) = pos[c];
      particles.vel(k, c) = vel[c];
    }
    weights(k) = weight;
  });
  HostExecution().fence();
}

struct KindName {
  ICKind kind;
  char const* name;
};

constexpr KindName kind_names[] = {
    {ICKind::GaussianClumps, "clumps"}, {ICKind::Plummer, "plummer"},
    {ICKind::Hernquist, "hernquist"},   {ICKind::Uniform, "uniform"},
    {ICKind::NFW, "nfw"},               {ICKind::Satellites, "satellites"},
    {ICKind::MassSpectrum, "mass_spectrum"},
    {ICKind::Disk, "disk"},             {ICKind::Filament, "filament"},
};

/// Throws unless low ≤ value ≤ high (or low < value when `open_low`), naming the field.
void check_range(char const* field, double value, double low, double high, bool open_low, char const* fix) {
  bool const inside = (open_low ? value > low : value >= low) && value <= high;
  if (!inside)
    fail("initial conditions: {} = {} is outside {}{:g}, {:g}]; {}", field, value, open_low ? "(" : "[", low, high,
         fix);
}

}  // namespace

ICKind parse_ic_kind(std::string const& name) {
  if (name == "gaussian_clumps") return ICKind::GaussianClumps;
  for (auto const& entry : kind_names)
    if (name == entry.name) return entry.kind;
  fail("unknown initial-condition kind '{}': valid kinds are clumps (or gaussian_clumps), plummer, hernquist, uniform, "
       "nfw, satellites, mass_spectrum, disk, filament",
       name);
}

std::string to_string(ICKind kind) {
  for (auto const& entry : kind_names)
    if (kind == entry.kind) return entry.name;
  fail("invalid ICKind value {}", static_cast<int>(kind));
}

std::vector<ICKind> all_ic_kinds() {
  std::vector<ICKind> kinds;
  for (auto const& entry : kind_names) kinds.push_back(entry.kind);
  return kinds;
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
    if (kind == ICKind::NFW && !(truncation_radius >= 1))
      fail("initial conditions: truncation_radius = {} is below 1 for nfw, which must reach at least its scale "
           "radius 1; use 1 … 1e6 scale radii, e.g. 100",
           truncation_radius);
    if (kind == ICKind::Satellites && !(truncation_radius >= satellite_max_radius))
      fail("initial conditions: truncation_radius = {} is below {:g} for satellites, whose orbits reach {:g} halo "
           "scale radii; use {:g} … 1e6, e.g. 200",
           truncation_radius, satellite_max_radius, satellite_max_radius, satellite_max_radius);
  }
  if (kind == ICKind::Satellites) {
    if (satellites < 0 || satellites > max_satellites)
      fail("initial conditions: satellites = {} is outside [0, {}]: the halo holds {} % of the mass and each "
           "satellite {} %, so at most {} satellites fit in the remaining {} %; use 0 … {} satellites",
           satellites, max_satellites, halo_percent, satellite_percent, max_satellites, 100 - halo_percent,
           max_satellites);
    check_range("satellite_scale", satellite_scale, 0, 1, true,
                "use a Plummer scale radius in halo scale radii, e.g. 0.02");
    if (n_total < 100)
      fail("initial conditions: n_total = {} is below 100 for satellites; every component (halo, satellites, "
           "background with at least 2 % of the mass) needs a particle: use n_total ≥ 100",
           n_total);
  }
  if (kind == ICKind::MassSpectrum)
    check_range("mass_decades", mass_decades, 0, 12, false,
                "use 0 … 12 decades between the lightest and heaviest mass");
  if (kind == ICKind::Disk)
    check_range("disk_scale_height", disk_scale_height, 0, 1, true,
                "use a scale height in disk scale lengths, e.g. 1e-3");
  if (kind == ICKind::Filament) {
    check_range("filament_width", filament_width, 0, 1, true,
                "use a width up to the filament's length 1, e.g. 1e-3");
    check_range("offset", offset, 0, 1e6, false, "use a distance from the origin up to 1e6, e.g. 1e3");
  }
  if (is_equilibrium_model(kind)) {
    FrameBounds const bounds = frame_bounds(*this);
    double const product = double(n_total) * std::max(bounds.position, bounds.speed);
    if (product > max_count_times_bound)
      fail("initial conditions: n_total·max(extent, speed) = {:g} exceeds 2^42 = {:g} (extent {:g}, speed bound {:g}), "
           "beyond which the exact centre-of-mass sum loses resolution; lower n_total or truncation_radius",
           product, max_count_times_bound, bounds.position, bounds.speed);
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

std::vector<HaloSatellite> halo_satellites(ICOptions const& options) {
  std::vector<HaloSatellite> satellites(std::size_t(std::max(options.satellites, 0)));
  for (std::size_t k = 0; k < satellites.size(); ++k) {
    CounterRandom random(options.seed, RandomStream::Model, k);
    double const r = satellite_min_radius * std::pow(satellite_max_radius / satellite_min_radius, random.uniform());
    isotropic(random, r, satellites[k].centre);
    // Orbital plane: a random direction perpendicular to the radius (redrawn if nearly parallel).
    double direction[3], norm = 0;
    do {
      isotropic(random, 1.0, direction);
      double const along = (direction[0] * satellites[k].centre[0] + direction[1] * satellites[k].centre[1] +
                            direction[2] * satellites[k].centre[2]) /
                           r;
      norm = 0;
      for (int c = 0; c < 3; ++c) {
        direction[c] -= along * satellites[k].centre[c] / r;
        norm += direction[c] * direction[c];
      }
      norm = std::sqrt(norm);
    } while (norm < 0.1);
    double const speed = std::sqrt(halo_enclosed_mass(r, options.truncation_radius) / r);
    for (int c = 0; c < 3; ++c) satellites[k].velocity[c] = speed * direction[c] / norm;
  }
  return satellites;
}

std::vector<std::uint64_t> satellite_component_begins(ICOptions const& options) {
  // Cumulative percentages in integers, so the boundaries n·P/100 are exact.
  int const count = std::max(options.satellites, 0);
  std::vector<std::uint64_t> begins;
  auto const boundary = [&](int percent) {
    std::uint64_t const n = options.n_total;
    return n / 100 * std::uint64_t(percent) + n % 100 * std::uint64_t(percent) / 100;
  };
  begins.push_back(0);
  for (int c = 0; c <= count; ++c) begins.push_back(boundary(halo_percent + satellite_percent * c));
  begins.push_back(options.n_total);
  return begins;
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
  for (std::size_t k = 0; k < particles.num; ++k) particles.id(k) = begin + k + 1;
  // Centre-of-mass weights: 1 for equal masses, the masses of Satellites, the unnormalised
  // masses of MassSpectrum.
  Kokkos::View<double*, HostSpace> const weights(Kokkos::view_alloc("kfmm::ics::weights", Kokkos::WithoutInitializing),
                                                  particles.num);
  std::uint64_t const seed = options.seed;

  switch (options.kind) {
    case ICKind::GaussianClumps: {
      auto const clumps = gaussian_clumps(options);
      int const count = options.clumps;
      sample_particles(particles, weights, begin, seed, "kfmm::ics::clumps",
                       [&](std::uint64_t, CounterRandom& random, double pos[3], double vel[3], double&) {
                         int const k = std::min(int(random.uniform() * count), count - 1);
                         for (int c = 0; c < 3; ++c) pos[c] = clumps[k].centre[c] + random.normal();
                         for (int c = 0; c < 3; ++c) vel[c] = clumps[k].velocity[c] + 20 * random.normal();
                       });
      break;
    }
    case ICKind::Plummer: {
      double const truncated_mass = plummer_enclosed_mass(options.truncation_radius);
      sample_particles(particles, weights, begin, seed, "kfmm::ics::plummer",
                       [&](std::uint64_t, CounterRandom& random, double pos[3], double vel[3], double&) {
                         sample_plummer(random, truncated_mass, pos, vel);
                       });
      break;
    }
    case ICKind::Hernquist:
    case ICKind::MassSpectrum: {
      double const truncated_mass = hernquist_enclosed_mass(options.truncation_radius);
      // Masses 10^(−decades·u), drawn after position and velocity: the positions and velocities
      // before the centre-of-mass shift are those of the hernquist kind with the same seed.
      double const decades = options.kind == ICKind::MassSpectrum ? options.mass_decades : 0;
      char const* label = decades > 0 ? "kfmm::ics::mass_spectrum" : "kfmm::ics::hernquist";
      sample_particles(particles, weights, begin, seed, label,
                       [&](std::uint64_t, CounterRandom& random, double pos[3], double vel[3], double& weight) {
                         sample_hernquist(random, truncated_mass, pos, vel);
                         if (decades > 0) weight = std::exp(-decades * std::log(10.0) * random.uniform());
                       });
      break;
    }
    case ICKind::Uniform:
      sample_particles(particles, weights, begin, seed, "kfmm::ics::uniform",
                       [](std::uint64_t, CounterRandom& random, double pos[3], double vel[3], double&) {
                         for (int c = 0; c < 3; ++c) pos[c] = random.uniform();
                         for (int c = 0; c < 3; ++c) vel[c] = 0;
                       });
      break;
    case ICKind::NFW: {
      NfwDispersion const dispersion(options.truncation_radius);
      double const log_truncation = std::log1p(options.truncation_radius);
      sample_particles(particles, weights, begin, seed, "kfmm::ics::nfw",
                       [&](std::uint64_t, CounterRandom& random, double pos[3], double vel[3], double&) {
                         sample_nfw(random, dispersion, log_truncation, pos, vel);
                       });
      break;
    }
    case ICKind::Satellites: {
      auto const satellites = halo_satellites(options);
      auto const begins = satellite_component_begins(options);
      double const r_t = options.truncation_radius, b = options.satellite_scale;
      double const halo_truncated_mass = hernquist_enclosed_mass(r_t);
      double const satellite_truncated_mass = plummer_enclosed_mass(satellite_truncation);
      // Velocities of a halo of mass 0.8 and of satellites of mass m and scale b: G M/a scaling.
      double const halo_speed = std::sqrt(halo_percent / 100.0);
      double const satellite_speed = std::sqrt(satellite_percent / 100.0 / b);
      sample_particles(
          particles, weights, begin, seed, "kfmm::ics::satellites",
          [&](std::uint64_t i, CounterRandom& random, double pos[3], double vel[3], double& weight) {
            std::size_t const c = std::size_t(std::upper_bound(begins.begin(), begins.end(), i) - begins.begin()) - 1;
            weight = component_fraction(options, c) / double(begins[c + 1] - begins[c]);
            if (c == 0) {
              sample_hernquist(random, halo_truncated_mass, pos, vel);
              for (int d = 0; d < 3; ++d) vel[d] *= halo_speed;
            } else if (c <= satellites.size()) {
              HaloSatellite const& satellite = satellites[c - 1];
              sample_plummer(random, satellite_truncated_mass, pos, vel);
              for (int d = 0; d < 3; ++d) {
                pos[d] = satellite.centre[d] + b * pos[d];
                vel[d] = satellite.velocity[d] + satellite_speed * vel[d];
              }
            } else {
              for (int d = 0; d < 3; ++d) pos[d] = r_t * (2 * random.uniform() - 1);
              for (int d = 0; d < 3; ++d) vel[d] = 0;
            }
          });
      break;
    }
    case ICKind::Disk: {
      double const radius_limit = disk_radius_limit(options);
      double const truncated_mass = disk_enclosed(radius_limit);
      double const scale_height = options.disk_scale_height;
      sample_particles(particles, weights, begin, seed, "kfmm::ics::disk",
                       [&](std::uint64_t, CounterRandom& random, double pos[3], double vel[3], double&) {
                         sample_disk(random, radius_limit, truncated_mass, scale_height, pos, vel);
                       });
      break;
    }
    case ICKind::Filament: {
      double const offset = options.offset, width = options.filament_width;
      sample_particles(particles, weights, begin, seed, "kfmm::ics::filament",
                       [&](std::uint64_t, CounterRandom& random, double pos[3], double vel[3], double&) {
                         sample_filament(random, offset, width, pos);
                         for (int c = 0; c < 3; ++c) vel[c] = 0;
                       });
      break;
    }
  }

  double total_weight = double(options.n_total);
  if (is_equilibrium_model(options.kind))
    total_weight = move_to_centre_of_mass_frame(particles, options, weights, allreduce);
  switch (options.kind) {
    case ICKind::Satellites:  // the weights are the masses
      for (std::size_t k = 0; k < particles.num; ++k) particles.mass(k) = weights(k);
      break;
    case ICKind::MassSpectrum:  // the same global Σ weight on every rank count, so masses sum to 1
      for (std::size_t k = 0; k < particles.num; ++k) particles.mass(k) = weights(k) / total_weight;
      break;
    default: {
      double const mass = 1.0 / double(options.n_total);
      for (std::size_t k = 0; k < particles.num; ++k) particles.mass(k) = mass;
    }
  }
  return particles;
}

}  // namespace kfmm
