#include <kfmm/io/run_file.hpp>

#include <kfmm/core/error.hpp>
#include <kfmm/integrate/milky_way.hpp>

#include <kfmm/core/format.hpp>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

namespace kfmm {

namespace {

constexpr double none = std::numeric_limits<double>::quiet_NaN();
/// Most outputs a schedule may have: each is a snapshot file, and the list is held in memory.
constexpr long long max_outputs = 1000000;

/// One run-file key. The table below is the only list of keys: the parser, the default file
/// (`kfmm run --print-default`) and the README table (`--print-keys-markdown`) all come from it.
struct Key {
  char const* name;           ///< dotted path: `ic.n` is `n:` inside `ic:`
  char const* type;           ///< int, float, bool, string, float list
  char const* default_value;  ///< YAML text; empty: no default (required when it is used)
  char const* meaning;
  char const* choices = "";   ///< strings only: the allowed values, '|'-separated
  double min = none;          ///< numbers only: inclusive bounds
  double max = none;
};

// clang-format off
Key const keys[] = {
  {"ic.kind", "string", "clumps", "initial conditions: generated model (see the README), or `file` to read ic.file", "clumps|plummer|hernquist|uniform|nfw|satellites|mass_spectrum|disk|filament|file"},
  {"ic.file", "string", "", "GADGET-4 HDF5 snapshot to start from (required when ic.kind is file)"},
  {"ic.duplicate_ids", "string", "reject", "ic.file whose ParticleIDs repeat: reject it (naming the id and its rows), or renumber every particle to its row + 1 (1..N)", "reject|renumber"},
  {"ic.n", "int", "200000", "number of particles (generated models)", "", 2, 1e12},
  {"ic.seed", "int", "42", "random seed of the generated model (same particles on any rank count); an integer 0 … 2⁶⁴ − 1", "", 0, 18446744073709551615.0},
  {"ic.clumps", "int", "20", "number of Gaussian clumps (clumps only)", "", 1, 1e9},
  {"ic.truncation_radius", "float", "100", "plummer, hernquist, nfw (≥ 1), satellites (halo, ≥ 20), mass_spectrum: radii beyond this are redrawn, in scale radii; disk: min(this, 10) disk scale lengths", "", 1e-300, 1e6},
  {"ic.satellites", "int", "5", "satellites: number of dense Plummer satellites, 3 % of the mass each", "", 0, 6},
  {"ic.satellite_scale", "float", "0.02", "satellites: Plummer scale radius of a satellite, in halo scale radii", "", 1e-300, 1},
  {"ic.mass_decades", "float", "6", "mass_spectrum: masses are log-uniform over this many decades", "", 0, 12},
  {"ic.disk_scale_height", "float", "1e-3", "disk: scale height z_d of the sech²(z/z_d) profile, in disk scale lengths", "", 1e-300, 1},
  {"ic.filament_width", "float", "1e-3", "filament: standard deviation of each transverse coordinate", "", 1e-300, 1},
  {"ic.offset", "float", "1e3", "filament: distance of its midpoint from the origin", "", 0, 1e6},
  {"ic.mass", "float", "1", "generated models other than clumps (drawn in G = 1 units with total mass 1): total mass in run units; velocities scale by sqrt(G·mass/scale_radius)", "", 1e-300, 1e300},
  {"ic.scale_radius", "float", "1", "generated models other than clumps: their unit of length (scale radius) in run units", "", 1e-300, 1e300},
  {"ic.position", "float list", "[0, 0, 0]", "[x, y, z] added to every initial position (the models' centre of mass is at the origin): a satellite placed on its orbit"},
  {"ic.velocity", "float list", "[0, 0, 0]", "[v_x, v_y, v_z] added to every initial velocity (bulk motion)"},
  {"force.method", "string", "fmm", "fmm, or direct (O(N²), for small N and checks)", "fmm|direct"},
  {"force.order", "int", "7", "expansion order p (the solver's defaults p 7, mac relative with tolerance 1e-5 and θ 0.95, leaf 160: per-particle p99.9 ≤ 1e-2 on every generated distribution)", "", 1, 8},
  {"force.theta", "float", "", "opening angle θ: accept (r_A + r_B) < θ·|c_A − c_B|; not given, it follows force.mac: 0.95 with mac relative, where it only caps the pairs, 0.75 with mac angle", "", 1e-3, 1.5},
  {"force.mac", "string", "relative", "opening criterion: relative (the angle test and an M2L error bound of tolerance × each target's force), or angle alone (the default with integrator.kind lattice_dkd, which needs forces of the positions alone)", "angle|relative"},
  {"force.tolerance", "float", "1e-5", "α of the relative opening criterion (1e-5 with θ 0.95 meets the accuracy targets on every generated distribution; docs in the README)", "", 1e-12, 1},
  {"force.estimate_theta", "float", "1", "θ of the first evaluation that estimates |a| for the relative criterion", "", 1e-3, 1.5},
  {"force.estimate_order", "int", "3", "expansion order of the first evaluation that estimates |a| for the relative criterion (at most force.order)", "", 1, 8},
  {"force.leaf_size", "int", "160", "largest number of particles in a leaf", "", 1, 1e6},
  {"force.m2p_theta", "float", "0.4", "mac relative: a leaf takes a source by M2P (the source's multipole at each of its particles), not M2L, where the leaf's radius exceeds this times their distance and twice the source's radius (0: M2L only)", "", 0, 0.999},
  {"force.domain_tolerance", "float", "0", "several ranks: keep the previous domains while the most loaded rank's cost is within (1 + this) × the mean (0: new domains every step; the same forces either way; a restart keeps the domains)", "", 0, 10},
  {"force.softening", "string", "plummer", "softening kernel", "plummer|spline"},
  {"force.softening_length", "float", "0.05", "softening length ε (spline: Plummer-equivalent)", "", 0, 1e300},
  {"force.precision", "string", "float", "arithmetic of expansions and kernels", "float|double"},
  {"force.centre", "string", "mass", "expansion centre of a node", "mass|geometric"},
  {"integrator.kind", "string", "dkd", "leapfrog variant (lattice_dkd: exactly reversible)", "dkd|kdk|lattice_dkd"},
  {"integrator.lattice_dx", "float", "1e-4", "lattice_dkd: position lattice spacing", "", 1e-300, 1e300},
  {"integrator.lattice_dv", "float", "1e-4", "lattice_dkd: velocity lattice spacing", "", 1e-300, 1e300},
  {"time.start", "float", "0", "time of the initial conditions", "", -1e300, 1e300},
  {"time.end", "float", "1", "end of the run (the last output)", "", -1e300, 1e300},
  {"time.outputs", "int", "4", "number of evenly spaced outputs after the start (the last at time.end)", "", 1, 1e6},
  {"time.output_times", "float list", "", "explicit output times instead of time.end and time.outputs"},
  {"time.step_mode", "string", "per_output", "per_output: time.steps_per_output equal steps between outputs; fixed: steps of time.dt; adaptive: dt = time.eta·sqrt(ε/|a|max); hierarchical: GADGET-style individual power-of-two steps dt_max/2^rung with Δt = sqrt(2·time.eta·ε/|a|) per particle (kdk only; docs/simulation.md)", "per_output|fixed|adaptive|hierarchical"},
  {"time.steps_per_output", "int", "40", "per_output: steps between two outputs", "", 1, 1e12},
  {"time.dt", "float", "", "fixed: the time step (required for fixed)", "", 1e-300, 1e300},
  {"time.output_every", "int", "0", "fixed: an output every this many steps up to time.end (0: use time.outputs)", "", 0, 1e12},
  {"time.eta", "float", "0.025", "adaptive, hierarchical: accuracy factor η", "", 1e-300, 1e300},
  {"time.dt_max", "float", ".inf", "adaptive: largest time step; hierarchical: largest block length (required, finite: each interval between outputs is cut into the fewest equal blocks no longer than this)", "", 1e-300, std::numeric_limits<double>::infinity()},
  {"time.dt_min", "float", "0", "hierarchical: smallest allowed particle step; a particle that needs less is an error", "", 0, 1e300},
  {"time.max_rungs", "int", "20", "hierarchical: deepest rung; the shortest step is the block length / 2^max_rungs", "", 0, max_rung_limit},
  {"units.system", "string", "model", "model: the units the initial conditions come in (astro for clumps; plain for the other models; those recorded in ic.file); plain: G = 1; astro: kpc, km/s, Msun as scaled below (jz-fmm's UnitConfig)", "model|plain|astro"},
  {"units.length_in_kpc", "float", "1", "astro: length unit in kpc", "", 1e-300, 1e300},
  {"units.velocity_in_kmps", "float", "1", "astro: velocity unit in km/s", "", 1e-300, 1e300},
  {"units.mass_in_msol", "float", "1e10", "astro: mass unit in solar masses (GADGET's 1e10 Msun: the clumps' total mass 1 is 1e10 Msun)", "", 1e-300, 1e300},
  {"output.directory", "string", "output", "directory of snapshots, diagnostics and restarts (-o overrides)"},
  {"output.snapshots", "bool", "true", "write a snapshot at every output time"},
  {"output.layout", "string", "single", "single: one snapshot_NNN.hdf5; per-rank: snapdir_NNN/ with a file per rank", "single|per-rank"},
  {"output.precision", "string", "float", "stored type of coordinates, velocities, masses, forces", "float|double"},
  {"output.compression", "int", "1", "0: contiguous datasets (fastest to write); 1..9: chunked + shuffle + deflate level (1: about 43 % smaller for clumps)", "", 0, 9},
  {"output.diagnostics", "string", "diagnostics.csv", "per-step energies and momenta, inside output.directory (empty: none)"},
  {"output.restart_every", "int", "0", "also write a restart every this many steps (always on SIGTERM/SIGINT and at the end)", "", 0, 1e12},
  {"output.centres", "string", "output", "when the potential-minimum and shrinking-spheres centres go into the diagnostics file: at the start and every output, every step, or never", "none|output|step"},
  {"output.centre_shrink_factor", "float", "0.9", "shrinking spheres: radius factor per iteration (Power et al. 2003: 0.975)", "", 1e-6, 0.999999},
  {"output.centre_min_particles", "int", "1000", "shrinking spheres: stop before a sphere holds fewer particles", "", 1, 1e18},
  {"output.fof", "bool", "false", "friends-of-friends catalogue fof_tab_NNN.hdf5 (GADGET-4 layout, open boundaries) at every output"},
  {"output.fof_b", "float", "0.2", "FoF linking length in mean interparticle separations of the particles' bounding box", "", 1e-300, 1e300},
  {"output.fof_min_members", "int", "20", "smallest group in the FoF catalogues", "", 1, 1e12},
  // `external` is a list of maps (one per potential); these rows document an entry's keys and are
  // read by read_external() (docs/external_potentials.md).
  {"external[].kind", "string", "", "model of this external potential (milky_way_2014: Bovy's MWPotential2014 with a Hernquist bulge, needs astro units)", "point_mass|plummer|hernquist|nfw|miyamoto_nagai|logarithmic|uniform|milky_way_2014"},
  {"external[].mass", "float", "", "point_mass, plummer, hernquist, miyamoto_nagai: mass M", "", 1e-300, 1e300},
  {"external[].softening", "float", "0", "point_mass: Plummer softening ε of φ = −GM/sqrt(r² + ε²)", "", 0, 1e300},
  {"external[].a", "float", "", "hernquist: scale radius a; miyamoto_nagai: disk scale length a (≥ 0)", "", 0, 1e300},
  {"external[].b", "float", "", "plummer: scale radius b; miyamoto_nagai: scale height b", "", 1e-300, 1e300},
  {"external[].density", "float", "", "nfw: characteristic density ρ_s (with scale_radius)", "", 1e-300, 1e300},
  {"external[].scale_radius", "float", "", "nfw: scale radius r_s (with density)", "", 1e-300, 1e300},
  {"external[].m200", "float", "", "nfw: M_200 (with concentration and r200, instead of density and scale_radius)", "", 1e-300, 1e300},
  {"external[].concentration", "float", "", "nfw: concentration c = r_200/r_s", "", 1e-300, 1e300},
  {"external[].r200", "float", "", "nfw: r_200 (radius of mean density 200 ρ_crit)", "", 1e-300, 1e300},
  {"external[].v0", "float", "", "logarithmic: asymptotic circular velocity v_0", "", 1e-300, 1e300},
  {"external[].core_radius", "float", "", "logarithmic: core radius r_c", "", 1e-300, 1e300},
  {"external[].q", "float", "1", "logarithmic: flattening q of the potential (z/q)", "", 1e-300, 1e300},
  {"external[].acceleration", "float list", "", "uniform: the acceleration [g_x, g_y, g_z]"},
  {"external[].centre", "float list", "[0, 0, 0]", "centre [x, y, z] (linear: at t0; integrated: the initial position)"},
  {"external[].velocity", "float list", "[0, 0, 0]", "linear, integrated: centre velocity [v_x, v_y, v_z] (integrated: the initial one)"},
  {"external[].centre_motion", "string", "fixed", "fixed; linear: centre + velocity·(t − t0); integrated: a point of mass M moved by the other external potentials and the particles' pull", "fixed|linear|integrated"},
  {"external[].t0", "float", "", "linear: time at which the centre is at `centre` (default: time.start)", "", -1e300, 1e300},
};
// clang-format on

Key const* find_key(std::string const& name) {
  for (auto const& key : keys)
    if (name == key.name) return &key;
  return nullptr;
}

std::string where(YAML::Node const& node, std::string const& source) {
  auto const mark = node.Mark();
  if (mark.line < 0) return fmt::format("'{}'", source);
  return fmt::format("'{}' line {}", source, mark.line + 1);
}

/// The checked values of one run file.
class Values {
 public:
  Values(YAML::Node const& root, std::string source) : source_(std::move(source)) {
    if (root.IsNull()) return;
    if (!root.IsMap()) fail("run file '{}': expected a map of sections (ic, force, integrator, time, units, output, external)", source_);
    collect(root, "");
  }

  bool given(std::string const& name) const { return given_.count(name) != 0; }

  /// The `external` list (undefined or null when none).
  YAML::Node const& external() const { return external_; }
  std::string const& source() const { return source_; }

  std::string string(std::string const& name) const {
    Key const& key = lookup(name);
    auto const node = node_or_default(key);
    if (!node.IsScalar()) type_error(key, node, "a string");
    std::string const value = node.as<std::string>();
    if (*key.choices) {
      std::string const choices = std::string("|") + key.choices + "|";
      if (choices.find("|" + value + "|") == std::string::npos)
        fail("run file {}: key '{}' = '{}' is not one of {}", where(node, source_), name, value, key.choices);
    }
    return value;
  }

  double number(std::string const& name) const {
    Key const& key = lookup(name);
    auto const node = node_or_default(key);
    double value = 0;
    bool const integer = std::string(key.type) == "int";
    try {
      if (!node.IsScalar()) throw YAML::Exception(node.Mark(), "not a scalar");
      value = integer ? static_cast<double>(node.as<long long>()) : node.as<double>();
    } catch (YAML::Exception const&) {
      type_error(key, node, integer ? "an integer" : "a number");
    }
    check_range(key, node, value);
    return value;
  }

  long long integer(std::string const& name) const { return static_cast<long long>(number(name)); }

  /// An unsigned 64-bit integer read from its digits: through a double (number()) integers above
  /// 2^53 would be rounded, and a seed must be exactly the one written.
  std::uint64_t uint64(std::string const& name) const {
    Key const& key = lookup(name);
    auto const node = node_or_default(key);
    if (!node.IsScalar()) type_error(key, node, "an integer");
    std::string text = node.Scalar();
    if (!text.empty() && text.front() == '+') text.erase(0, 1);
    bool const digits =
        !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) {
      if (!text.empty() && text.front() == '-')
        fail("run file {}: key '{}' = {} is negative; use an integer 0 … {}", where(node, source_), name,
             node.Scalar(), std::numeric_limits<std::uint64_t>::max());
      fail("run file {}: key '{}' must be an integer 0 … {} written in decimal digits, got '{}'", where(node, source_),
           name, std::numeric_limits<std::uint64_t>::max(), node.Scalar());
    }
    errno = 0;
    unsigned long long const value = std::strtoull(text.c_str(), nullptr, 10);
    if (errno == ERANGE || value > std::numeric_limits<std::uint64_t>::max())
      fail("run file {}: key '{}' = {} is out of range [0, {}]; use a smaller integer", where(node, source_), name,
           node.Scalar(), std::numeric_limits<std::uint64_t>::max());
    return static_cast<std::uint64_t>(value);
  }

  bool boolean(std::string const& name) const {
    Key const& key = lookup(name);
    auto const node = node_or_default(key);
    try {
      if (!node.IsScalar()) throw YAML::Exception(node.Mark(), "not a scalar");
      return node.as<bool>();
    } catch (YAML::Exception const&) {
      type_error(key, node, "true or false");
    }
  }

  std::vector<double> numbers(std::string const& name) const {
    Key const& key = lookup(name);
    auto const node = node_or_default(key);
    if (!node.IsSequence()) type_error(key, node, "a list of numbers such as [1, 2, 4]");
    std::vector<double> values;
    for (auto const& item : node) {
      try {
        values.push_back(item.as<double>());
      } catch (YAML::Exception const&) {
        type_error(key, item, "a list of numbers such as [1, 2, 4]");
      }
    }
    return values;
  }

  /// Throws the "missing required key" error for a key without default that is needed.
  void require(std::string const& name, std::string const& because) const {
    if (!given(name)) fail("run file '{}': missing required key '{}' ({})", source_, name, because);
  }

  [[noreturn]] void invalid(std::string const& name, std::string const& problem) const {
    auto const it = given_.find(name);
    fail("run file {}: key '{}': {}", it != given_.end() ? where(it->second, source_) : "'" + source_ + "'", name,
         problem);
  }

 private:
  void collect(YAML::Node const& map, std::string const& prefix) {
    for (auto const& entry : map) {
      // A key that is a list or a map (`[a]: 1`, `? {a: 1}`) names no key of the table.
      if (!entry.first.IsScalar())
        fail("run file {}: a key must be a name such as 'ic' or 'n', not {}", where(entry.first, source_),
             entry.first.IsSequence() ? "a list" : entry.first.IsMap() ? "a map" : "empty");
      std::string const name = prefix + entry.first.Scalar();
      if (name == "external") {  // a list of potentials, read by read_external()
        if (!entry.second.IsSequence() && !entry.second.IsNull())
          fail("run file {}: 'external' must be a list of potentials (- kind: ...), not {}", where(entry.first, source_),
               entry.second.IsMap() ? "a map" : "a value");
        if (external_.IsDefined())
          fail("run file {}: section 'external' is given twice; merge its entries into one list",
               where(entry.first, source_));
        external_ = entry.second;
        continue;
      }
      bool const is_section = std::any_of(std::begin(keys), std::end(keys), [&](Key const& key) {
        return std::string(key.name).rfind(name + ".", 0) == 0;
      });
      if (is_section) {
        if (!entry.second.IsMap() && !entry.second.IsNull())
          fail("run file {}: '{}' must be a section (a map of keys), not a value", where(entry.first, source_), name);
        // YAML forbids repeated keys but yaml-cpp keeps them: one of two values would be ignored.
        if (!sections_.insert(name).second)
          fail("run file {}: section '{}' is given twice; merge its keys into one '{}:'", where(entry.first, source_),
               name, name);
        if (entry.second.IsMap()) collect(entry.second, name + ".");
      } else if (find_key(name)) {
        auto const [it, inserted] = given_.emplace(name, entry.second);
        if (!inserted)
          fail("run file {}: key '{}' is given twice (first at line {}); keep one", where(entry.first, source_), name,
               it->second.Mark().line + 1);
      } else {
        fail("run file {}: unknown key '{}'; `kfmm run --print-default` lists every key", where(entry.first, source_),
             name);
      }
    }
  }

  Key const& lookup(std::string const& name) const {
    Key const* key = find_key(name);
    if (!key) fail("internal: run-file key '{}' is not in the key table", name);
    return *key;
  }

  YAML::Node node_or_default(Key const& key) const {
    auto const it = given_.find(key.name);
    if (it != given_.end()) return it->second;
    if (!*key.default_value) fail("run file '{}': missing required key '{}' ({})", source_, key.name, key.meaning);
    return YAML::Load(key.default_value);
  }

  [[noreturn]] void type_error(Key const& key, YAML::Node const& node, char const* expected) const {
    std::string shown = node.IsScalar()     ? "'" + node.Scalar() + "'"
                        : node.IsSequence() ? "a list"
                        : node.IsMap()      ? "a map"
                                            : "nothing";
    fail("run file {}: key '{}' must be {} ({}), got {}", where(node, source_), key.name, expected, key.type, shown);
  }

  void check_range(Key const& key, YAML::Node const& node, double value) const {
    bool const below = !std::isnan(key.min) && !(value >= key.min);
    bool const above = !std::isnan(key.max) && !(value <= key.max);
    if (below || above)
      fail("run file {}: key '{}' = {} is out of range [{:g}, {:g}]", where(node, source_), key.name, node.Scalar(),
           key.min, key.max);
  }

  std::string source_;
  YAML::Node external_{YAML::NodeType::Undefined};
  std::map<std::string, YAML::Node> given_;
  std::set<std::string> sections_;
};

Schedule read_schedule(Values const& values) {
  Schedule schedule;
  schedule.start_time = values.number("time.start");
  schedule.mode = parse_step_mode(values.string("time.step_mode"));
  double const end = values.number("time.end");
  if (schedule.mode == StepMode::Fixed) {
    values.require("time.dt", "time.step_mode is fixed");
    schedule.dt = values.number("time.dt");
  }
  schedule.steps_per_output = values.integer("time.steps_per_output");
  schedule.eta = values.number("time.eta");
  schedule.dt_max = values.number("time.dt_max");
  schedule.dt_min = values.number("time.dt_min");
  schedule.max_rungs = static_cast<int>(values.integer("time.max_rungs"));
  if (schedule.mode == StepMode::Hierarchical) {
    values.require("time.dt_max", "time.step_mode is hierarchical: the block length");
    if (schedule.dt_min > schedule.dt_max)
      values.invalid("time.dt_min", fmt::format("{} is larger than time.dt_max = {}; give dt_min ≤ dt_max",
                                                schedule.dt_min, schedule.dt_max));
  }
  long long const output_every = values.integer("time.output_every");
  if (values.given("time.output_times")) {
    schedule.output_times = values.numbers("time.output_times");
  } else if (schedule.mode == StepMode::Fixed && output_every > 0) {
    // Outputs on multiples of output_every steps; the end is the last output. Their number is
    // bounded first: a tiny dt would otherwise fill memory with output times.
    double const intervals = (end - schedule.start_time) / (static_cast<double>(output_every) * schedule.dt);
    if (!(intervals < static_cast<double>(max_outputs)))
      values.invalid("time.output_every",
                     fmt::format("an output every {} steps of dt = {} from {} to {} gives {:g} outputs, more than {}; "
                                 "use a larger time.output_every or time.dt",
                                 output_every, schedule.dt, schedule.start_time, end, intervals, max_outputs));
    schedule.output_times.clear();
    for (long long k = 1; k <= max_outputs; ++k) {
      double const t = schedule.start_time + static_cast<double>(k * output_every) * schedule.dt;
      if (t >= end - 1e-6 * schedule.dt) break;
      schedule.output_times.push_back(t);
    }
    schedule.output_times.push_back(end);
  } else {
    if (!(end > schedule.start_time))
      values.invalid("time.end", fmt::format("{} must be later than time.start = {}", end, schedule.start_time));
    schedule.output_times = evenly_spaced_outputs(schedule.start_time, end, static_cast<int>(values.integer("time.outputs")));
  }
  try {
    schedule.validate();
  } catch (Error const& e) {
    values.invalid(values.given("time.output_times") ? "time.output_times" : "time.end", e.what());
  }
  return schedule;
}

/// A `float list` key that must hold three finite numbers.
std::array<double, 3> vector3(Values const& values, std::string const& name) {
  auto const list = values.numbers(name);
  if (list.size() != 3 || !std::all_of(list.begin(), list.end(), [](double v) { return std::isfinite(v); }))
    values.invalid(name, "must be a list of three finite numbers [x, y, z]");
  return {list[0], list[1], list[2]};
}

/// `ic.mass`, `ic.scale_radius`, `ic.position`, `ic.velocity`: where the generated model goes.
ModelPlacement read_placement(Values const& values, std::string const& ic_kind) {
  ModelPlacement placement;
  placement.mass = values.number("ic.mass");
  placement.scale_radius = values.number("ic.scale_radius");
  placement.position = vector3(values, "ic.position");
  placement.velocity = vector3(values, "ic.velocity");
  // The scaling assumes G = 1 units of mass 1 and scale 1: the clumps come in kpc and km/s,
  // and a file's particles in its own units (the default 1, as in the default file, is no scaling).
  for (auto const& [key, value] : {std::pair{"ic.mass", placement.mass}, {"ic.scale_radius", placement.scale_radius}})
    if (value != 1 && (ic_kind == "clumps" || ic_kind == "file"))
      values.invalid(key, fmt::format("{} applies to the models generated in G = 1 units, not to ic.kind {} ({}); "
                                      "leave it out (ic.position and ic.velocity still move the particles)",
                                      value, ic_kind, ic_kind == "file" ? "its particles are in the file's units"
                                                                        : "drawn in kpc and km/s"));
  return placement;
}

/// The keys an external potential of `kind` takes (besides kind, centre, velocity, centre_motion, t0).
std::vector<std::string> external_parameters(std::string const& kind) {
  if (kind == "point_mass") return {"mass", "softening"};
  if (kind == "plummer") return {"mass", "b"};
  if (kind == "hernquist") return {"mass", "a"};
  if (kind == "nfw") return {"density", "scale_radius", "m200", "concentration", "r200"};
  if (kind == "miyamoto_nagai") return {"mass", "a", "b"};
  if (kind == "logarithmic") return {"v0", "core_radius", "q"};
  if (kind == "uniform") return {"acceleration"};
  return {};  // milky_way_2014
}

/// One entry of the `external` list.
class ExternalEntry {
 public:
  ExternalEntry(YAML::Node const& node, std::size_t index, std::string const& source)
      : node_(node), source_(source), label_(fmt::format("external entry {} (line {})", index + 1, node.Mark().line + 1)) {
    if (!node.IsMap())
      fail("run file {}: {} must be a map such as {{kind: hernquist, mass: 1, a: 0.1}}", where(node, source), label_);
    if (!node["kind"]) fail("run file {}: {} has no 'kind'; one of {}", where(node, source), label_, kind_key().choices);
    kind_ = text("kind");  // checked against the kinds
    auto allowed = external_parameters(kind_);
    for (char const* common : {"kind", "centre", "velocity", "centre_motion", "t0"}) allowed.push_back(common);
    for (auto const& item : node) {
      std::string const key = item.first.IsScalar() ? item.first.Scalar() : "?";
      if (!find_key("external[]." + key))
        fail("run file {}: {}: unknown key '{}'; docs/simulation.md lists the keys of an external potential",
             where(item.first, source), label_, key);
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
        fail("run file {}: {}: key '{}' does not apply to kind {}", where(item.first, source), label_, key, kind_);
    }
  }

  std::string const& kind() const { return kind_; }
  std::string const& label() const { return label_; }
  bool has(char const* key) const { return static_cast<bool>(node_[key]); }

  std::string text(char const* key) const {
    auto const value = node_[key];
    if (!value.IsScalar()) fail("run file {}: {}: '{}' must be a string", where(value, source_), label_, key);
    std::string const result = value.Scalar();
    Key const& k = *find_key(std::string("external[].") + key);
    if (*k.choices && (std::string("|") + k.choices + "|").find("|" + result + "|") == std::string::npos)
      fail("run file {}: {}: '{}' = '{}' is not one of {}", where(value, source_), label_, key, result, k.choices);
    return result;
  }

  /// A number; given ranges are checked, the physical limits later by ExternalPotential::validate.
  double number(char const* key) const {
    Key const& k = *find_key(std::string("external[].") + key);
    auto const value = node_[key];
    if (!value) {
      if (!*k.default_value) fail("run file {}: {} ({}) needs '{}': {}", where(node_, source_), label_, kind_, key, k.meaning);
      return std::stod(k.default_value);
    }
    double result = 0;
    try {
      if (!value.IsScalar()) throw YAML::Exception(value.Mark(), "not a scalar");
      result = value.as<double>();
    } catch (YAML::Exception const&) {
      fail("run file {}: {}: '{}' must be a number, got {}", where(value, source_), label_, key,
           value.IsScalar() ? "'" + value.Scalar() + "'" : "a list or map");
    }
    if (!(result >= k.min && result <= k.max))
      fail("run file {}: {}: '{}' = {} is out of range [{:g}, {:g}]{}", where(value, source_), label_, key,
           value.Scalar(), k.min, k.max, result <= 0 && k.min > 0 ? " (it must be > 0)" : "");
    return result;
  }

  std::array<double, 3> vector(char const* key) const {
    auto const value = node_[key];
    if (!value) return {0, 0, 0};
    std::array<double, 3> result{};
    bool ok = value.IsSequence() && value.size() == 3;
    for (std::size_t d = 0; ok && d < 3; ++d) {
      try {
        result[d] = value[d].as<double>();
        ok = std::isfinite(result[d]);
      } catch (YAML::Exception const&) {
        ok = false;
      }
    }
    if (!ok) fail("run file {}: {}: '{}' must be a list of three finite numbers [x, y, z]", where(value, source_), label_, key);
    return result;
  }

 private:
  static Key const& kind_key() { return *find_key("external[].kind"); }
  YAML::Node node_;
  std::string source_;
  std::string label_;
  std::string kind_;
};

/// The `external` list as potentials in `units` (milky_way_2014 expands to its three terms).
ExternalField read_external(Values const& values, UnitSystem const& units, bool units_known, double start_time) {
  ExternalField field;
  auto const& list = values.external();
  if (!list.IsDefined() || list.IsNull()) return field;
  for (std::size_t index = 0; index < list.size(); ++index) {
    ExternalEntry const entry(list[index], index, values.source());
    std::string const& kind = entry.kind();
    std::vector<ExternalPotential> terms;
    if (kind == "milky_way_2014") {
      if (!units_known)
        fail("run file '{}': {}: milky_way_2014 needs the run's units before the initial conditions are read; set "
             "units.system: astro",
             values.source(), entry.label());
      try {
        terms = milky_way_2014(units);
      } catch (Error const& e) {
        fail("run file '{}': {}: {}", values.source(), entry.label(), e.what());
      }
    } else if (kind == "nfw") {
      bool const by_density = entry.has("density") || entry.has("scale_radius");
      bool const by_m200 = entry.has("m200") || entry.has("concentration") || entry.has("r200");
      if (by_density == by_m200)
        fail("run file '{}': {}: nfw takes either density and scale_radius or m200, concentration and r200{}",
             values.source(), entry.label(), by_density ? ", not both" : "");
      terms.push_back(by_density ? nfw_potential(entry.number("density"), entry.number("scale_radius"))
                                 : nfw_potential_m200(entry.number("m200"), entry.number("concentration"),
                                                      entry.number("r200")));
    } else if (kind == "point_mass") {
      terms.push_back(point_mass_potential(entry.number("mass"), entry.number("softening")));
    } else if (kind == "plummer") {
      terms.push_back(plummer_potential(entry.number("mass"), entry.number("b")));
    } else if (kind == "hernquist") {
      terms.push_back(hernquist_potential(entry.number("mass"), entry.number("a")));
    } else if (kind == "miyamoto_nagai") {
      terms.push_back(miyamoto_nagai_potential(entry.number("mass"), entry.number("a"), entry.number("b")));
    } else if (kind == "logarithmic") {
      terms.push_back(logarithmic_potential(entry.number("v0"), entry.number("core_radius"), entry.number("q")));
    } else {  // uniform
      if (!entry.has("acceleration"))
        fail("run file '{}': {} (uniform) needs 'acceleration': [g_x, g_y, g_z]", values.source(), entry.label());
      auto const g = entry.vector("acceleration");
      terms.push_back(uniform_acceleration(g[0], g[1], g[2]));
    }
    CentreMotion const motion = !entry.has("centre_motion")                ? CentreMotion::Fixed
                                : entry.text("centre_motion") == "linear"     ? CentreMotion::Linear
                                : entry.text("centre_motion") == "integrated" ? CentreMotion::Integrated
                                                                              : CentreMotion::Fixed;
    if (entry.has("velocity") && motion == CentreMotion::Fixed)
      fail("run file '{}': {}: 'velocity' needs centre_motion linear or integrated", values.source(), entry.label());
    if (entry.has("t0") && motion != CentreMotion::Linear)
      fail("run file '{}': {}: 't0' applies to centre_motion linear only", values.source(), entry.label());
    if (kind == "milky_way_2014" && motion == CentreMotion::Integrated)
      fail("run file '{}': {}: milky_way_2014 cannot have an integrated centre (three potentials); use fixed or linear",
           values.source(), entry.label());
    auto const centre = entry.vector("centre");
    auto const velocity = entry.vector("velocity");
    double const t0 = entry.has("t0") ? entry.number("t0") : start_time;
    for (auto& term : terms) {
      term.motion = motion;
      for (int d = 0; d < 3; ++d) {
        term.centre[d] = centre[d];
        term.velocity[d] = velocity[d];
      }
      term.t0 = t0;
      try {
        term.validate(kind);
      } catch (Error const& e) {
        fail("run file '{}': {}: {}", values.source(), entry.label(), e.what());
      }
      field.potentials.push_back(term);
    }
  }
  return field;
}

RunSettings settings_from(YAML::Node const& root, std::string const& source) {
  Values const values(root, source);
  RunSettings settings;
  settings.source = source;

  std::string const ic_kind = values.string("ic.kind");
  if (ic_kind == "file") {
    values.require("ic.file", "ic.kind is file");
    settings.ic_file = values.string("ic.file");
    settings.ic_duplicate_ids = parse_duplicate_id_policy(values.string("ic.duplicate_ids"));
  } else {
    settings.ic.kind = parse_ic_kind(ic_kind);
  }
  settings.ic.n_total = static_cast<std::uint64_t>(values.integer("ic.n"));
  settings.ic.seed = values.uint64("ic.seed");
  settings.ic.clumps = static_cast<int>(values.integer("ic.clumps"));
  settings.ic.truncation_radius = values.number("ic.truncation_radius");
  settings.ic.satellites = static_cast<int>(values.integer("ic.satellites"));
  settings.ic.satellite_scale = values.number("ic.satellite_scale");
  settings.ic.mass_decades = values.number("ic.mass_decades");
  settings.ic.disk_scale_height = values.number("ic.disk_scale_height");
  settings.ic.filament_width = values.number("ic.filament_width");
  settings.ic.offset = values.number("ic.offset");
  // Combinations the key ranges cannot express (nfw needs truncation_radius ≥ 1, ...) fail
  // here rather than when the run starts.
  if (ic_kind != "file") {
    try {
      settings.ic.validate();
    } catch (Error const& e) {
      fail("run file '{}': ic: {}", source, e.what());
    }
  }
  settings.ic_placement = read_placement(values, ic_kind);

  auto& simulation = settings.simulation;
  settings.force_method = values.string("force.method") == "direct" ? ForceMethod::Direct : ForceMethod::FMM;
  auto& fmm = simulation.fmm;
  fmm.order = static_cast<int>(values.integer("force.order"));
  // lattice_dkd is exactly reversible only with forces that depend on the positions alone: the
  // relative criterion's depend on the previous step's |a| too, so it defaults to the angle one.
  bool const lattice = values.string("integrator.kind") == "lattice_dkd";
  fmm.opening = values.given("force.mac") || !lattice ? parse_opening_criterion(values.string("force.mac"))
                                                      : OpeningCriterion::Angle;
  if (lattice && settings.force_method == ForceMethod::FMM && fmm.opening == OpeningCriterion::Relative)
    fail("run file '{}': force.mac = relative with integrator.kind = lattice_dkd: the relative criterion's forces "
         "depend on the previous step's |a|, which breaks lattice_dkd's exact reversibility; use force.mac: angle "
         "(the default with lattice_dkd) or integrator.kind: dkd",
         source);
  fmm.theta = values.given("force.theta") ? values.number("force.theta") : default_theta(fmm.opening);
  fmm.leaf_size = static_cast<int>(values.integer("force.leaf_size"));
  fmm.m2p_theta = values.number("force.m2p_theta");
  fmm.domain_tolerance = values.number("force.domain_tolerance");
  fmm.tolerance = values.number("force.tolerance");
  fmm.estimate_theta = values.number("force.estimate_theta");
  fmm.estimate_order = static_cast<int>(values.integer("force.estimate_order"));
  fmm.softening = parse_softening_kind(values.string("force.softening"));
  fmm.softening_length = values.number("force.softening_length");
  fmm.precision = parse_precision(values.string("force.precision"));
  fmm.centre = parse_expansion_centre(values.string("force.centre"));

  simulation.integrator = parse_integrator_kind(values.string("integrator.kind"));
  simulation.lattice.dx = values.number("integrator.lattice_dx");
  simulation.lattice.dv = values.number("integrator.lattice_dv");
  simulation.schedule = read_schedule(values);

  // Clumps are drawn in kpc and km/s (jz-fmm's guide), the equilibrium models in G = 1 units.
  std::string units = values.string("units.system");
  settings.units_from_ic_file = units == "model" && ic_kind == "file";
  if (units == "model") units = ic_kind == "clumps" ? "astro" : "plain";
  simulation.units = units == "astro"
                         ? UnitSystem::astro(values.number("units.length_in_kpc"), values.number("units.velocity_in_kmps"),
                                             values.number("units.mass_in_msol"))
                         : UnitSystem::plain();
  fmm.G = simulation.units.G;
  simulation.external = read_external(values, simulation.units, !settings.units_from_ic_file,
                                      simulation.schedule.start_time);
  simulation.centres.cadence = parse_centre_cadence(values.string("output.centres"));
  simulation.centres.shrink_factor = values.number("output.centre_shrink_factor");
  simulation.centres.min_particles = static_cast<std::uint64_t>(values.integer("output.centre_min_particles"));

  simulation.output.directory = values.string("output.directory");
  simulation.output.snapshots = values.boolean("output.snapshots");
  simulation.output.diagnostics_file = values.string("output.diagnostics");
  simulation.output.restart_every = values.integer("output.restart_every");
  settings.snapshot_options.layout = parse_file_layout(values.string("output.layout"));
  settings.snapshot_options.precision = parse_precision(values.string("output.precision"));
  settings.snapshot_options.compression = static_cast<int>(values.integer("output.compression"));
  settings.fof.enabled = values.boolean("output.fof");
  settings.fof.b = values.number("output.fof_b");
  settings.fof.min_members = static_cast<std::uint64_t>(values.integer("output.fof_min_members"));

  try {
    simulation.validate();
  } catch (Error const& e) {
    fail("run file '{}': {}", source, e.what());
  }
  return settings;
}

/// The keys grouped by section, in table order.
std::vector<std::pair<std::string, std::vector<Key const*>>> sections() {
  std::vector<std::pair<std::string, std::vector<Key const*>>> grouped;
  for (auto const& key : keys) {
    std::string const name = key.name;
    std::string const section = name.substr(0, name.find('.'));
    if (grouped.empty() || grouped.back().first != section) grouped.push_back({section, {}});
    grouped.back().second.push_back(&key);
  }
  return grouped;
}

std::string choices_text(Key const& key) {
  std::string text = key.choices;
  for (auto& c : text)
    if (c == '|') c = ',';
  return text.empty() ? "" : " [" + text + "]";
}

/// A copy of `node` without positions: messages about an override then name no line of the file.
YAML::Node without_marks(YAML::Node const& node) {
  if (node.IsScalar()) return YAML::Node(node.Scalar());
  if (node.IsSequence()) {
    YAML::Node copy(YAML::NodeType::Sequence);
    for (auto const& item : node) copy.push_back(without_marks(item));
    return copy;
  }
  if (node.IsMap()) {
    YAML::Node copy(YAML::NodeType::Map);
    for (auto const& entry : node) copy[without_marks(entry.first)] = without_marks(entry.second);
    return copy;
  }
  return YAML::Node(YAML::NodeType::Null);
}

/// Sets `key=value` (one `kfmm run --set`) in the parsed file `root`, replacing the file's value.
void apply_override(YAML::Node& root, std::string const& setting, std::string const& source) {
  auto const equals = setting.find('=');
  std::string const name = setting.substr(0, equals);
  if (equals == std::string::npos || name.empty())
    fail("--set '{}' for run file '{}': expected key=value such as time.end=2", setting, source);
  auto const dot = name.find('.');
  if (!find_key(name) || dot == std::string::npos || name.rfind("external[]", 0) == 0)
    fail("--set '{}' for run file '{}': unknown key '{}'; `kfmm run --print-default` lists every key (external "
         "potentials are set in the file only)",
         setting, source, name);
  std::string const text = setting.substr(equals + 1);
  YAML::Node value;
  try {
    value = YAML::Load(text);
  } catch (YAML::Exception const& e) {
    fail("--set '{}' for run file '{}': the value '{}' is not valid YAML: {}", setting, source, text, e.msg);
  }
  if (!root.IsDefined() || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) return;  // settings_from() names the problem
  std::string const section = name.substr(0, dot);
  if (!root[section] || root[section].IsNull()) root[section] = YAML::Node(YAML::NodeType::Map);
  if (!root[section].IsMap()) return;  // "'section' must be a section", from settings_from()
  root[section][name.substr(dot + 1)] = without_marks(value);
}

}  // namespace

RunSettings parse_run_text(std::string const& text, std::string const& source,
                           std::vector<std::string> const& overrides) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (YAML::Exception const& e) {
    fail("run file '{}' line {}: not valid YAML: {}", source, e.mark.line + 1, e.msg);
  }
  if (overrides.empty()) return settings_from(root, source);
  std::string label = source + " with";
  for (auto const& setting : overrides) {
    apply_override(root, setting, source);
    label += " --set " + setting;
  }
  return settings_from(root, label);
}

RunSettings read_run_file(std::string const& path, std::vector<std::string> const& overrides) {
  std::ifstream in(path);
  if (!in) fail("cannot read run file '{}'; check the path (`kfmm run --print-default > run.yaml` writes one)", path);
  std::stringstream text;
  text << in.rdbuf();
  return parse_run_text(text.str(), path, overrides);
}

std::string default_run_file() {
  std::string out =
      "# kfmm run file: every key with its default. `kfmm run FILE` reads it; keys left out take\n"
      "# these defaults. Keys without a default are commented out (required only where noted).\n";
  for (auto const& [section, section_keys] : sections()) {
    if (section == "external[]") {  // a list: an example entry, commented out
      out += "\n# External potentials (docs/external_potentials.md): a list of entries such as\n"
             "#   - kind: hernquist\n#     mass: 1\n#     a: 0.1\n# with these keys:\n";
      for (Key const* key : section_keys)
        out += fmt::format("#   {}: {} ({}){}{}\n", std::string(key->name).substr(section.size() + 1), key->meaning,
                           key->type, choices_text(*key),
                           *key->default_value ? fmt::format(", default {}", key->default_value) : "");
      out += "external:\n";
      continue;
    }
    out += fmt::format("\n{}:\n", section);
    for (Key const* key : section_keys) {
      std::string const name = std::string(key->name).substr(section.size() + 1);
      out += fmt::format("  # {} ({}){}\n", key->meaning, key->type, choices_text(*key));
      if (*key->default_value)
        out += fmt::format("  {}: {}\n", name, key->default_value);
      else
        out += fmt::format("  # {}:\n", name);
    }
  }
  return out;
}

std::string run_file_keys_markdown() {
  std::string out = "| key | type | default | meaning |\n|---|---|---|---|\n";
  for (auto const& key : keys) {
    std::string meaning;
    for (char const* c = key.meaning; *c; ++c) meaning += *c == '|' ? std::string("\\|") : std::string(1, *c);
    if (*key.choices) meaning += "; one of" + choices_text(key);
    std::string const default_text = *key.default_value ? fmt::format("`{}`", key.default_value) : "—";
    out += fmt::format("| `{}` | {} | {} | {} |\n", key.name, key.type, default_text, meaning);
  }
  return out;
}

}  // namespace kfmm
