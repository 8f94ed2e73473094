#include <kfmm/io/restart.hpp>

#include <kfmm/comm/unique_ids.hpp>

#include <kfmm/core/error.hpp>
#include <kfmm/core/fault_injection.hpp>
#include <kfmm/io/hdf5_handle.hpp>

#include <kfmm/core/format.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace kfmm {

namespace fs = std::filesystem;
using io_detail::check;
using io_detail::checked;
using io_detail::Hdf5Handle;

namespace {

constexpr char const* format_name = "kfmm-restart-1";

std::string rank_file(std::string const& directory, int rank) {
  return fmt::format("{}/rank_{:04d}.h5", directory, rank);
}

template <class T>
hid_t memory_type() {
  if constexpr (std::is_same_v<T, double>) return H5T_NATIVE_DOUBLE;
  if constexpr (std::is_same_v<T, std::int64_t>) return H5T_NATIVE_INT64;
  if constexpr (std::is_same_v<T, std::uint64_t>) return H5T_NATIVE_UINT64;
}

template <class T>
void write_attribute(hid_t file, char const* name, T value) {
  auto space = checked(H5Screate(H5S_SCALAR), H5Sclose, "create a dataspace");
  auto attribute = checked(H5Acreate2(file, name, memory_type<T>(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
                           fmt::format("create attribute {}", name));
  check(H5Awrite(attribute.get(), memory_type<T>(), &value), fmt::format("write attribute {}", name));
}

void write_string_attribute(hid_t file, char const* name, std::string const& value) {
  auto type = checked(H5Tcopy(H5T_C_S1), H5Tclose, "copy the string type");
  check(H5Tset_size(type.get(), value.size() + 1), "size a string type");
  auto space = checked(H5Screate(H5S_SCALAR), H5Sclose, "create a dataspace");
  auto attribute = checked(H5Acreate2(file, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
                           fmt::format("create attribute {}", name));
  check(H5Awrite(attribute.get(), type.get(), value.c_str()), fmt::format("write attribute {}", name));
}

/// The stored type class that each C++ type of a restart item must have: HDF5 would convert a
/// real to an integer by truncation and a negative integer to an unsigned one by clipping.
template <class T>
char const* check_stored_type(hid_t type, char const* what, char const* name, std::string const& path) {
  H5T_class_t const type_class = H5Tget_class(type);
  bool const ok = std::is_same_v<T, double> ? type_class == H5T_FLOAT
                  : std::is_same_v<T, std::int64_t>
                      ? type_class == H5T_INTEGER
                      : type_class == H5T_INTEGER && H5Tget_sign(type) == H5T_SGN_NONE;
  char const* const expected = std::is_same_v<T, double>         ? "floating point"
                               : std::is_same_v<T, std::int64_t> ? "integer"
                                                                 : "unsigned integer";
  if (!ok)
    fail("restart file '{}': {} '{}' is not of {} type (HDF5 type class {}); it was not written by kfmm", path, what,
         name, expected, static_cast<int>(type_class));
  return expected;
}

/// Attributes of a restart are single values: an array would overflow the variable read into.
void check_single_value(hid_t attribute, char const* name, std::string const& path) {
  auto space = checked(H5Aget_space(attribute), H5Sclose, "get a dataspace");
  hssize_t const points = H5Sget_simple_extent_npoints(space.get());
  if (points != 1)
    fail("restart file '{}': attribute '{}' has {} values, expected 1; it was not written by kfmm", path, name, points);
}

template <class T>
T read_attribute(hid_t file, char const* name, std::string const& path) {
  if (H5Aexists(file, name) <= 0) fail("restart file '{}' has no attribute '{}'; it is not a kfmm restart file", path, name);
  auto attribute = checked(H5Aopen(file, name, H5P_DEFAULT), H5Aclose, fmt::format("open attribute {}", name));
  check_single_value(attribute.get(), name, path);
  auto stored = checked(H5Aget_type(attribute.get()), H5Tclose, "get an attribute type");
  check_stored_type<T>(stored.get(), "attribute", name, path);
  T value{};
  check(H5Aread(attribute.get(), memory_type<T>(), &value), fmt::format("read attribute {} of '{}'", name, path));
  return value;
}

std::string read_string_attribute(hid_t file, char const* name, std::string const& path) {
  if (H5Aexists(file, name) <= 0) fail("restart file '{}' has no attribute '{}'; it is not a kfmm restart file", path, name);
  auto attribute = checked(H5Aopen(file, name, H5P_DEFAULT), H5Aclose, fmt::format("open attribute {}", name));
  check_single_value(attribute.get(), name, path);
  auto stored = checked(H5Aget_type(attribute.get()), H5Tclose, "get an attribute type");
  if (H5Tget_class(stored.get()) != H5T_STRING || H5Tis_variable_str(stored.get()) > 0)
    fail("restart file '{}': attribute '{}' is not a fixed-length string; it was not written by kfmm", path, name);
  std::vector<char> text(H5Tget_size(stored.get()) + 1, '\0');
  auto type = checked(H5Tcopy(H5T_C_S1), H5Tclose, "copy the string type");
  check(H5Tset_size(type.get(), text.size()), "size a string type");
  check(H5Aread(attribute.get(), type.get(), text.data()), fmt::format("read attribute {} of '{}'", name, path));
  return std::string(text.data());
}

/// Writes a host View's memory as a dataset of shape `dims` (a LayoutLeft (n, 3) View is (3, n)).
template <class T>
void write_dataset(hid_t file, char const* name, T const* data, std::vector<hsize_t> const& dims) {
  auto space = checked(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose,
                       "create a dataspace");
  auto dataset = checked(H5Dcreate2(file, name, memory_type<T>(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                         H5Dclose, fmt::format("create dataset {}", name));
  hsize_t count = 1;
  for (auto d : dims) count *= d;
  if (count > 0) check(H5Dwrite(dataset.get(), memory_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data),
                       fmt::format("write dataset {}", name));
}

/// Checks that dataset `name` exists with shape `dims`, type T's class and all of its data
/// written (a declared shape without storage would make the reader allocate for nothing).
template <class T>
void check_dataset(hid_t file, char const* name, std::vector<hsize_t> const& dims, std::string const& path) {
  if (H5Lexists(file, name, H5P_DEFAULT) <= 0) fail("restart file '{}' has no dataset '{}'", path, name);
  auto dataset = checked(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose, fmt::format("open dataset {}", name));
  auto space = checked(H5Dget_space(dataset.get()), H5Sclose, "get a dataspace");
  std::vector<hsize_t> stored(dims.size());
  if (H5Sget_simple_extent_ndims(space.get()) != static_cast<int>(dims.size()) ||
      H5Sget_simple_extent_dims(space.get(), stored.data(), nullptr) < 0 || stored != dims) {
    std::string expected;
    for (auto d : dims) expected += (expected.empty() ? "" : ", ") + std::to_string(d);
    fail("restart file '{}': dataset '{}' does not have the expected shape ({}) for the 'num' attribute's count", path,
         name, expected);
  }
  auto type = checked(H5Dget_type(dataset.get()), H5Tclose, "get a dataset type");
  check_stored_type<T>(type.get(), "dataset", name, path);
  hsize_t count = 1;
  for (auto d : dims) count *= d;
  if (count > 0 && io_detail::stored_extent(dataset.get()) != io_detail::Stored::All)
    fail("restart file '{}': dataset '{}' was created but not (fully) written; the restart is incomplete", path, name);
}

template <class T>
void read_dataset(hid_t file, char const* name, T* data, std::vector<hsize_t> const& dims, std::string const& path) {
  check_dataset<T>(file, name, dims, path);
  auto dataset = checked(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose, fmt::format("open dataset {}", name));
  hsize_t count = 1;
  for (auto d : dims) count *= d;
  if (count > 0) check(H5Dread(dataset.get(), memory_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data),
                       fmt::format("read dataset {} of '{}'", name, path));
}

/// The first of `count` values that is not finite (or, with `positive`, not > 0); count if none.
std::size_t first_bad(double const* values, std::size_t count, bool positive) {
  for (std::size_t i = 0; i < count; ++i)
    if (!std::isfinite(values[i]) || (positive && !(values[i] > 0))) return i;
  return count;
}

void write_rank_file(std::string const& file_path, Context const& context, SimulationState const& state,
                     SimulationConfig const& config, ForceSolver const* solver) {
  auto file = checked(H5Fcreate(file_path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose,
                      fmt::format("create restart file '{}'", file_path));
  hid_t const f = file.get();
  write_string_attribute(f, "format", format_name);
  write_string_attribute(f, "integrator", to_string(config.integrator));
  write_attribute<std::int64_t>(f, "ranks", context.size());
  write_attribute<std::int64_t>(f, "rank", context.rank());
  write_attribute<std::int64_t>(f, "step", state.step);
  write_attribute<double>(f, "time", state.time);
  write_attribute<double>(f, "dt", state.dt);
  write_attribute<std::int64_t>(f, "next_output", state.next_output);
  write_attribute<std::int64_t>(f, "step_in_interval", state.step_in_interval);
  write_attribute<double>(f, "initial_energy", state.initial_energy);
  write_attribute<double>(f, "max_acceleration", state.max_acceleration);
  write_attribute<std::uint64_t>(f, "num", state.particles.num);
  write_attribute<std::uint64_t>(f, "num_total", state.particles.num_total);

  auto const host = to_host(state.particles);
  hsize_t const n = host.num;
  write_dataset(f, "positions", host.pos.data(), {3, n});
  write_dataset(f, "velocities", host.vel.data(), {3, n});
  write_dataset(f, "masses", host.mass.data(), {n});
  write_dataset(f, "ids", host.id.data(), {n});
  if (config.integrator == IntegratorKind::KDK) {
    // A compact copy of the valid slots: the force View may be longer than num.
    Vec3View<double, HostSpace> acceleration("kfmm::io::restart::acceleration", host.num);
    Kokkos::deep_copy(acceleration,
                      Kokkos::subview(state.acceleration, Kokkos::make_pair(std::size_t(0), host.num), Kokkos::ALL));
    write_dataset(f, "acceleration", acceleration.data(), {3, n});
  }
  // Hierarchical steps: where the block is, every particle's rung and the block's statistics.
  if (config.schedule.mode == StepMode::Hierarchical) {
    write_attribute<std::int64_t>(f, "block_tick", state.block_tick);
    write_attribute<std::int64_t>(f, "max_rungs", config.schedule.max_rungs);
    write_attribute<double>(f, "block_length",
                            state.next_output < static_cast<int>(config.schedule.output_times.size())
                                ? config.schedule.block_length(state.next_output)
                                : 0.0);
    write_attribute<std::int64_t>(f, "block_force_calls", state.block.force_calls);
    std::vector<std::int64_t> rungs(host.num);
    if (host.num > 0) {
      auto const rung = Kokkos::create_mirror_view_and_copy(
          HostSpace(), Kokkos::subview(state.rung, Kokkos::make_pair(std::size_t(0), host.num)));
      for (std::size_t i = 0; i < host.num; ++i) rungs[i] = rung(i);
    }
    write_dataset(f, "rungs", rungs.data(), {n});
    std::vector<std::int64_t> steps(state.block.steps_per_rung.begin(), state.block.steps_per_rung.end());
    steps.resize(config.schedule.max_rungs + 1, 0);
    write_dataset(f, "block_steps_per_rung", steps.data(), {steps.size()});
  }
  // Integrated external centres: position, velocity, acceleration (the same on every rank).
  if (!state.centres.empty()) {
    std::vector<double> centres;
    for (auto const& c : state.centres)
      for (auto const* v : {&c.position, &c.velocity, &c.acceleration}) centres.insert(centres.end(), v->begin(), v->end());
    write_dataset(f, "external_centres", centres.data(), {state.centres.size(), 9});
  }
  // The solver's weights belong to these particles when it was the one that ordered them last.
  if (solver != nullptr && solver->cost_weights().extent(0) == host.num && host.num > 0) {
    auto const weights = Kokkos::create_mirror_view_and_copy(HostSpace(), solver->cost_weights());
    write_dataset(f, "cost_weights", weights.data(), {n});
  }
  // The domain boundaries the next call keeps (FMMConfig::domain_tolerance), the same on every
  // rank: without them the continued run would choose new domains where the uninterrupted one
  // keeps its own, and its per-rank layouts (the snapshots' row order) would differ.
  if (auto const splitters = solver != nullptr ? solver->domain_splitters() : std::vector<std::uint64_t>();
      !splitters.empty())
    write_dataset(f, "domain_splitters", splitters.data(), {splitters.size()});
  // The relative opening criterion's |a| (so that the next call skips its estimating pass, as
  // the uninterrupted run does); an attribute marks it also on a rank without particles.
  if (solver != nullptr && solver->has_acceleration_estimate() && solver->acceleration_estimate().extent(0) == host.num) {
    write_attribute<std::int64_t>(f, "acceleration_estimate", 1);
    if (host.num > 0) {
      auto const estimate = Kokkos::create_mirror_view_and_copy(HostSpace(), solver->acceleration_estimate());
      write_dataset(f, "acceleration_magnitude", estimate.data(), {n});
    }
  }
  file.close(fmt::format("restart file '{}'", file_path));
}

/// The hierarchical steps' part of a restart (rungs, block position, block statistics), checked.
void read_block_state(hid_t f, std::string const& file_path, SimulationConfig const& config,
                      Particles<HostSpace> const& host, SimulationState& state) {
  auto const& schedule = config.schedule;
  bool const hierarchical = schedule.mode == StepMode::Hierarchical;
  bool const has_blocks = H5Aexists(f, "block_tick") > 0;
  if (has_blocks != hierarchical)
    fail("restart file '{}' {} but the run file asks for the {} step mode; restart with the run file that wrote it",
         file_path, has_blocks ? "was written with hierarchical time steps" : "has no hierarchical time steps",
         to_string(schedule.mode));
  if (!hierarchical) return;
  int const max_rungs = schedule.max_rungs;
  state.block_tick = read_attribute<std::int64_t>(f, "block_tick", file_path);
  // Inside a block the tick counts 2^-max_rungs of the block: both must be the run's.
  if (state.block_tick != 0) {
    auto const written_rungs = read_attribute<std::int64_t>(f, "max_rungs", file_path);
    double const written_length = read_attribute<double>(f, "block_length", file_path);
    bool const open_interval = state.next_output < static_cast<int>(schedule.output_times.size());
    if (written_rungs != max_rungs || !open_interval || written_length != schedule.block_length(state.next_output))
      fail("restart file '{}' stopped inside a block of length {} with time.max_rungs = {}, but the run file gives "
           "{} and {}; continue with the run file that wrote it (a restart at an output may change them)",
           file_path, written_length, written_rungs, open_interval ? schedule.block_length(state.next_output) : 0.0,
           max_rungs);
  }
  if (state.block_tick < 0 || state.block_tick >= (1LL << max_rungs))
    fail("restart file '{}': block_tick = {} must be in [0, 2^max_rungs = {}); the file is damaged", file_path,
         state.block_tick, 1LL << max_rungs);
  state.block.force_calls = read_attribute<std::int64_t>(f, "block_force_calls", file_path);
  if (state.block.force_calls < 0)
    fail("restart file '{}': block_force_calls = {} must be ≥ 0; the file is damaged", file_path,
         state.block.force_calls);
  std::size_t const n = host.num;
  std::vector<std::int64_t> rungs(n);
  read_dataset(f, "rungs", rungs.data(), {n}, file_path);
  ScalarView<std::uint8_t, HostSpace> rung("kfmm::io::restart::rung", n);
  for (std::size_t i = 0; i < n; ++i) {
    // At a block start the rungs are chosen afresh; inside a block they must fit max_rungs.
    if (rungs[i] < 0 || rungs[i] > (state.block_tick != 0 ? max_rungs : max_rung_limit))
      fail("restart file '{}': particle id {} is on rung {}, outside [0, time.max_rungs = {}]; the file is damaged",
           file_path, host.id(i), rungs[i], max_rungs);
    rung(i) = static_cast<std::uint8_t>(rungs[i]);
  }
  state.rung = Kokkos::create_mirror_view_and_copy(MemorySpace(), rung);
  std::vector<std::int64_t> steps(max_rungs + 1);
  read_dataset(f, "block_steps_per_rung", steps.data(), {steps.size()}, file_path);
  for (std::size_t r = 0; r < steps.size(); ++r)
    if (steps[r] < 0)
      fail("restart file '{}': block_steps_per_rung[{}] = {} must be ≥ 0; the file is damaged", file_path, r, steps[r]);
  state.block.steps_per_rung.assign(steps.begin(), steps.end());
}

std::string existing_restart(std::string const& path) {
  if (fs::is_directory(path)) return path;
  if (fs::is_directory(path + ".old")) return path + ".old";
  return {};
}

}  // namespace

void write_restart(Context const& context, std::string const& path, SimulationState const& state,
                   SimulationConfig const& config, ForceSolver const* solver) {
  io_detail::silence_hdf5_errors();
  std::string const staging = path + ".tmp";
  collectively(context, [&] {
    if (context.is_root()) {
      fs::remove_all(staging);
      fs::create_directories(staging);
    }
  });
  collectively(context, [&] {
    write_rank_file(rank_file(staging, context.rank()), context, state, config, solver);
    fault_injection::point("restart.rank_written");
  });
  collectively(context, [&] {
    if (!context.is_root()) return;
    // path.old goes only when a complete path replaces it: after a crash in the middle of a
    // swap, path.old is the one restart left and must outlive the next swap's first rename.
    std::string const old = path + ".old";
    if (fs::exists(path)) {
      fs::remove_all(old);
      fs::rename(path, old);
    }
    fault_injection::point("restart.swapping");
    fs::rename(staging, path);
    fault_injection::point("restart.swapped");
    fs::remove_all(old);
  });
}

bool restart_exists(Context const& context, std::string const& path) {
  int found = context.is_root() && !existing_restart(path).empty() ? 1 : 0;
  MPI_Bcast(&found, 1, MPI_INT, 0, context.comm());
  return found != 0;
}

SimulationState read_restart(Context const& context, std::string const& path, SimulationConfig const& config,
                             ForceSolver* solver) {
  io_detail::silence_hdf5_errors();
  SimulationState state;
  std::uint64_t num_total = 0;
  std::vector<std::uint64_t> splitters;
  collectively(context, [&] {
    std::string const directory = existing_restart(path);
    if (directory.empty())
      fail("no restart at '{}' (nor '{}.old'); start the run without --restart first", path, path);
    std::string const file_path = rank_file(directory, context.rank());
    if (!fs::exists(file_path))
      fail("restart file '{}' is missing: the restart was written by fewer ranks than the {} now running; restart "
           "with the same number of ranks",
           file_path, context.size());
    auto file = checked(H5Fopen(file_path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose,
                        fmt::format("open restart file '{}'", file_path));
    hid_t const f = file.get();
    if (read_string_attribute(f, "format", file_path) != format_name)
      fail("'{}' is not a {} file", file_path, format_name);
    auto const ranks = read_attribute<std::int64_t>(f, "ranks", file_path);
    if (ranks != context.size())
      fail("restart '{}' was written by {} ranks but {} are running; restart with {} ranks", directory, ranks,
           context.size(), ranks);
    auto const rank = read_attribute<std::int64_t>(f, "rank", file_path);
    if (rank != context.rank())
      fail("restart file '{}' says it is rank {}'s, not rank {}'s; the files of the restart were mixed up", file_path,
           rank, context.rank());
    std::string const integrator = read_string_attribute(f, "integrator", file_path);
    if (integrator != to_string(config.integrator))
      fail("restart '{}' was written by the {} integrator but the run file asks for {}; use the same integrator",
           directory, integrator, to_string(config.integrator));
    state.started = true;
    state.step = read_attribute<std::int64_t>(f, "step", file_path);
    state.time = read_attribute<double>(f, "time", file_path);
    state.dt = read_attribute<double>(f, "dt", file_path);
    auto const next_output = read_attribute<std::int64_t>(f, "next_output", file_path);
    state.step_in_interval = read_attribute<std::int64_t>(f, "step_in_interval", file_path);
    state.initial_energy = read_attribute<double>(f, "initial_energy", file_path);
    state.max_acceleration = read_attribute<double>(f, "max_acceleration", file_path);
    if (state.step < 0 || state.step_in_interval < 0 || state.step_in_interval > state.step)
      fail("restart file '{}': step {} and step_in_interval {} must satisfy 0 ≤ step_in_interval ≤ step; the file is "
           "damaged",
           file_path, state.step, state.step_in_interval);
    for (auto const& [name, value] : {std::pair<char const*, double>{"time", state.time},
                                      {"dt", state.dt},
                                      {"initial_energy", state.initial_energy}})
      if (!std::isfinite(value))
        fail("restart file '{}': {} = {} is not finite; the file is damaged", file_path, name, value);
    if (!(state.max_acceleration >= 0) || !std::isfinite(state.max_acceleration))
      fail("restart file '{}': max_acceleration = {} must be finite and ≥ 0; the file is damaged", file_path,
           state.max_acceleration);
    auto const& outputs = config.schedule.output_times;
    // Range-checked before narrowing to int: 2^32 would otherwise become output 0.
    state.next_output = next_output >= 0 && next_output <= static_cast<std::int64_t>(outputs.size())
                            ? static_cast<int>(next_output)
                            : -1;
    if (state.next_output < 0 ||
        (state.next_output < static_cast<int>(outputs.size()) && !(state.time < outputs[state.next_output])))
      fail("restart '{}' is at time {} before output {}, which the run file's schedule ({} outputs) does not have; "
           "restart with the run file that wrote it",
           directory, state.time,
           next_output < std::numeric_limits<std::int64_t>::max() ? next_output + 1 : next_output, outputs.size());
    auto const n = static_cast<std::size_t>(read_attribute<std::uint64_t>(f, "num", file_path));
    // Shapes first: `num` sizes the allocations below.
    check_dataset<double>(f, "positions", {3, n}, file_path);
    check_dataset<double>(f, "velocities", {3, n}, file_path);
    check_dataset<double>(f, "masses", {n}, file_path);
    check_dataset<std::uint64_t>(f, "ids", {n}, file_path);
    if (config.integrator == IntegratorKind::KDK) check_dataset<double>(f, "acceleration", {3, n}, file_path);
    Particles<HostSpace> host(n);
    host.num = n;
    host.num_total = static_cast<std::size_t>(read_attribute<std::uint64_t>(f, "num_total", file_path));
    num_total = host.num_total;
    read_dataset(f, "positions", host.pos.data(), {3, n}, file_path);
    read_dataset(f, "velocities", host.vel.data(), {3, n}, file_path);
    read_dataset(f, "masses", host.mass.data(), {n}, file_path);
    read_dataset(f, "ids", host.id.data(), {n}, file_path);
    // The positions and velocities Views hold x, y, z blocks of `n` values (LayoutLeft).
    for (auto const& [name, values, count, positive] :
         {std::tuple<char const*, double const*, std::size_t, bool>{"positions", host.pos.data(), 3 * n, false},
          {"velocities", host.vel.data(), 3 * n, false},
          {"masses", host.mass.data(), n, true}}) {
      std::size_t const bad = first_bad(values, count, positive);
      if (bad < count)
        fail("restart file '{}': dataset '{}' holds {} (particle id {}); {} must be finite{}; the file is damaged",
             file_path, name, values[bad], host.id(bad % n), name, positive ? " and > 0" : "");
    }
    state.particles = to_device(host);
    if (config.integrator == IntegratorKind::KDK) {
      Vec3View<double, HostSpace> acceleration("kfmm::io::restart::acceleration", n);
      read_dataset(f, "acceleration", acceleration.data(), {3, n}, file_path);
      std::size_t const bad = first_bad(acceleration.data(), 3 * n, false);
      if (bad < 3 * n)
        fail("restart file '{}': dataset 'acceleration' holds {} (particle id {}); it must be finite; the file is "
             "damaged",
             file_path, acceleration.data()[bad], host.id(bad % n));
      state.acceleration = Kokkos::create_mirror_view_and_copy(MemorySpace(), acceleration);
    }
    read_block_state(f, file_path, config, host, state);
    auto const centres = static_cast<std::size_t>(config.external.integrated_count());
    bool const has_centres = H5Lexists(f, "external_centres", H5P_DEFAULT) > 0;
    if (has_centres != (centres > 0))
      fail("restart file '{}' {} integrated external centres but the run file has {}; restart with the run file that "
           "wrote it",
           file_path, has_centres ? "has" : "has no", centres);
    if (centres > 0) {
      std::vector<double> values(9 * centres);
      read_dataset(f, "external_centres", values.data(), {centres, 9}, file_path);
      std::size_t const bad = first_bad(values.data(), values.size(), false);
      if (bad < values.size())
        fail("restart file '{}': dataset 'external_centres' holds {} (centre {}); it must be finite; the file is "
             "damaged",
             file_path, values[bad], bad / 9);
      state.centres.resize(centres);
      for (std::size_t k = 0; k < centres; ++k)
        for (int d = 0; d < 3; ++d) {
          state.centres[k].position[d] = values[9 * k + d];
          state.centres[k].velocity[d] = values[9 * k + 3 + d];
          state.centres[k].acceleration[d] = values[9 * k + 6 + d];
        }
    }
    if (solver != nullptr && H5Lexists(f, "cost_weights", H5P_DEFAULT) > 0) {
      ScalarView<double, HostSpace> weights("kfmm::io::restart::cost_weights", n);
      read_dataset(f, "cost_weights", weights.data(), {n}, file_path);
      solver->set_cost_weights(Kokkos::create_mirror_view_and_copy(MemorySpace(), weights), n);
    }
    if (solver != nullptr && H5Lexists(f, "domain_splitters", H5P_DEFAULT) > 0) {
      splitters.resize(std::size_t(context.size()) - 1);
      read_dataset(f, "domain_splitters", splitters.data(), {splitters.size()}, file_path);
    }
    if (solver != nullptr && solver->config().opening == OpeningCriterion::Relative &&
        H5Aexists(f, "acceleration_estimate") > 0) {
      ScalarView<double, HostSpace> estimate("kfmm::io::restart::acceleration_magnitude", n);
      if (n > 0) read_dataset(f, "acceleration_magnitude", estimate.data(), {n}, file_path);
      solver->set_acceleration_estimate(state.particles, Kokkos::create_mirror_view_and_copy(MemorySpace(), estimate));
    }
  });
  // Collective (checks that every rank read the same keys): after the agreed reading.
  if (solver != nullptr) {
    try {
      solver->set_domain_splitters(splitters);
    } catch (Error const& e) {  // thrown on every rank alike
      fail("restart '{}': dataset 'domain_splitters': {}; the restart is damaged: restart from an intact restart",
           path, e.what());
    }
  }
  // Every rank's file must agree with the ranks' particles together.
  std::uint64_t const local = state.particles.num;
  std::uint64_t sum = 0, lowest = 0, highest = 0;
  MPI_Allreduce(&local, &sum, 1, MPI_UINT64_T, MPI_SUM, context.comm());
  MPI_Allreduce(&num_total, &lowest, 1, MPI_UINT64_T, MPI_MIN, context.comm());
  MPI_Allreduce(&num_total, &highest, 1, MPI_UINT64_T, MPI_MAX, context.comm());
  if (lowest != highest || sum != num_total)
    fail("restart '{}': the rank files say num_total = {} (lowest) … {} (highest) but hold {} particles together; "
         "the restart is damaged or its files come from different restarts",
         path, lowest, highest, sum);
  // kfmm writes unique ids, so a repeat means the files were altered or mixed from two runs.
  IdRepeats const repeats = find_repeated_ids(context, state.particles);
  if (repeats)
    agree_on_error(context, context.is_root() ? fmt::format("restart '{}' repeats particle ids ({}; rows count rank "
                                                            "0's particles first); its files were altered or come "
                                                            "from different runs: restart from an intact restart "
                                                            "or from the initial conditions",
                                                            path, describe(repeats))
                                              : std::string());
  return state;
}

Observer restart_observer(Context const& context, std::string const& path, SimulationConfig const& config,
                          long long every_steps, ForceSolver const* solver) {
  return [context, path, config, every_steps, solver](SimulationEvent event, SimulationState const& state) {
    // A step that reaches an output writes its restart at the Output event, after the snapshot
    // writer: a restart ahead of the last snapshot would make a crash in between lose that
    // snapshot for good (the continued run would start after it).
    bool const due = every_steps > 0 && state.step > 0 && state.step % every_steps == 0;
    bool const output_step = state.step_in_interval == 0 && state.synchronised();
    bool const scheduled = due && (event == (output_step ? SimulationEvent::Output : SimulationEvent::Step));
    if (scheduled || event == SimulationEvent::Stop || event == SimulationEvent::Finish)
      write_restart(context, path, state, config, solver);
  };
}

}  // namespace kfmm
