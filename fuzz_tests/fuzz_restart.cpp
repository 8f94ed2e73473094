// Structured fuzzing of read_restart (io/restart.cpp): the input describes the one-rank restart
// file that write_restart would write (rank_0000.h5: attributes and datasets), with items
// dropped, retyped, reshaped or given bad values; it is written with the HDF5 C API and read on
// one rank, with or without a solver. The reader must return a state that keeps its promises
// or throw kfmm::Error.
#include <fmt/format.h>

#include <kfmm/core/error.hpp>
#include <kfmm/io/restart.hpp>

#include "fuzz_common.hpp"

using namespace kfmm;
using namespace kfmm::fuzz;

namespace {

char const* const integrator_names[] = {"dkd", "kdk", "lattice_dkd"};
IntegratorKind const integrators[] = {IntegratorKind::DKD, IntegratorKind::KDK, IntegratorKind::LatticeDKD};

/// An attribute as write_restart writes it (`usual` type, scalar), or mutated.
void attribute(FuzzedDataProvider& in, hid_t file, char const* name, Stored usual, double real, std::int64_t integer,
               std::string const& text = "") {
  int const how = in.ConsumeIntegralInRange<int>(0, 23);
  if (how == 0) return;  // dropped
  Stored const stored = how == 1 ? pick_stored(in) : usual;
  std::vector<hsize_t> dims;
  if (how == 2) dims = {static_cast<hsize_t>(in.ConsumeIntegralInRange<int>(0, 4))};
  Values values;
  values.real = {how == 3 ? interesting_double(in, real) : real};
  switch (how == 4 ? in.ConsumeIntegralInRange<int>(0, 4) : -1) {
    case 0:
      integer = -1;
      break;
    case 1:
      integer = std::int64_t(1) << 32;
      break;
    case 2:
      integer = std::numeric_limits<std::int64_t>::max();
      break;
    case 3:
      integer = std::int64_t(1) << in.ConsumeIntegralInRange<int>(20, 42);
      break;
    case 4:
      integer = in.ConsumeIntegral<std::int64_t>();
      break;
    default:
      break;
  }
  values.integer = {static_cast<std::uint64_t>(integer)};
  std::string const value = how == 5 ? in.ConsumeRandomLengthString(12) : text;
  write_attribute(file, name, stored, dims, values, value, how == 6);
}

void dataset(FuzzedDataProvider& in, hid_t file, char const* name, Stored usual, std::vector<hsize_t> dims,
             double typical, bool ids = false) {
  int const how = in.ConsumeIntegralInRange<int>(0, 23);
  if (how == 0) return;
  Stored const stored = how == 1 ? pick_stored(in) : usual;
  if (how == 2) {
    dims.resize(static_cast<std::size_t>(in.ConsumeIntegralInRange<int>(0, 3)),
                static_cast<hsize_t>(in.ConsumeIntegralInRange<int>(0, 5)));
  }
  if (how == 3 && !dims.empty()) dims.back() = hsize_t(1) << in.ConsumeIntegralInRange<int>(20, 40);
  std::size_t count = 1;
  for (auto d : dims) count = d > (1u << 20) ? (1u << 30) : count * d;
  Values values;
  std::size_t const n = std::max<std::size_t>(1, std::min<std::size_t>(count, 64));
  for (std::size_t i = 0; i < n; ++i) {
    bool const bad = how == 4 && in.ConsumeIntegralInRange<int>(0, 3) == 0;
    values.real.push_back(bad ? interesting_double(in, typical) : typical * (1 + 0.1 * double(i % 7)));
    values.integer.push_back(ids && bad ? in.ConsumeIntegral<std::uint64_t>() : (ids ? i % 5 + 1 : i + 1));
  }
  write_dataset(file, name, stored, dims, values, how != 5, how == 6);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  environment();
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  clear_scratch();
  auto const directory = scratch_directory() / "restart";
  std::filesystem::create_directories(directory);

  int const kind = in.ConsumeIntegralInRange<int>(0, 2);
  int const run_kind = in.ConsumeIntegralInRange<int>(0, 7) == 0 ? in.ConsumeIntegralInRange<int>(0, 2) : kind;
  hsize_t const n = in.ConsumeIntegralInRange<int>(0, 12);
  std::uint64_t const num = in.ConsumeIntegralInRange<int>(0, 15) == 0 ? in.ConsumeIntegralInRange<int>(0, 13) : n;
  hid_t const file = H5Fcreate((directory / "rank_0000.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) return 0;
  attribute(in, file, "format", Stored::String, 0, 0, "kfmm-restart-1");
  attribute(in, file, "integrator", Stored::String, 0, 0, integrator_names[kind]);
  attribute(in, file, "ranks", Stored::I64, 1, 1);
  attribute(in, file, "rank", Stored::I64, 0, 0);
  attribute(in, file, "step", Stored::I64, 7, 7);
  attribute(in, file, "time", Stored::F64, 0.5, 0);
  attribute(in, file, "dt", Stored::F64, 0.01, 0);
  attribute(in, file, "next_output", Stored::I64, 0, 0);
  attribute(in, file, "step_in_interval", Stored::I64, 3, 3);
  attribute(in, file, "initial_energy", Stored::F64, -1.5, 0);
  attribute(in, file, "max_acceleration", Stored::F64, 2.0, 0);
  attribute(in, file, "num", Stored::U64, 0, static_cast<std::int64_t>(num));
  attribute(in, file, "num_total", Stored::U64, 0, static_cast<std::int64_t>(num));
  dataset(in, file, "positions", Stored::F64, {3, n}, 1.0);
  dataset(in, file, "velocities", Stored::F64, {3, n}, 1.0);
  dataset(in, file, "masses", Stored::F64, {n}, 0.25);
  dataset(in, file, "ids", Stored::U64, {n}, 1.0, true);
  if (kind == 1 || in.ConsumeIntegralInRange<int>(0, 7) == 0)
    dataset(in, file, "acceleration", Stored::F64, {3, n}, 1.0);
  if (in.ConsumeBool()) dataset(in, file, "cost_weights", Stored::F64, {n}, 100.0);
  if (in.ConsumeBool()) {
    attribute(in, file, "acceleration_estimate", Stored::I64, 1, 1);
    dataset(in, file, "acceleration_magnitude", Stored::F64, {n}, 2.0);
  }
  // One rank: R − 1 = 0 domain boundaries.
  if (in.ConsumeBool()) dataset(in, file, "domain_splitters", Stored::U64, {0}, 1.0, true);
  H5Fclose(file);

  SimulationConfig config;
  config.integrator = integrators[run_kind];
  config.schedule.start_time = 0;
  config.schedule.output_times = {1.0, 2.0};
  int const use_solver = in.ConsumeIntegralInRange<int>(0, 2);
  static ForceSolver* angle_solver = nullptr;
  static ForceSolver* relative_solver = nullptr;
  if (!angle_solver) {
    FMMConfig fmm;
    angle_solver = new ForceSolver(environment().world(), fmm);  // kept for the whole process
    fmm.opening = OpeningCriterion::Relative;
    relative_solver = new ForceSolver(environment().world(), fmm);
  }
  ForceSolver* solver = use_solver == 0 ? nullptr : use_solver == 1 ? angle_solver : relative_solver;
  config.fmm = use_solver == 2 ? relative_solver->config() : angle_solver->config();

  SimulationState state;
  try {
    state = read_restart(environment().world(), directory.string(), config, solver);
  } catch (Error const&) {
    count_outcome(false);
    return 0;
  }
  count_outcome(true);
  auto const p = to_host(state.particles);
  if (p.num != p.num_total) finding(fmt::format("one rank restarted with {} of {} particles", p.num, p.num_total));
  for (std::size_t i = 0; i < p.num; ++i) {
    for (int k = 0; k < 3; ++k)
      if (!std::isfinite(p.pos(i, k)) || !std::isfinite(p.vel(i, k)))
        finding(fmt::format("particle {} restarted with a non-finite position or velocity", i));
    if (!(p.mass(i) > 0) || !std::isfinite(p.mass(i)))
      finding(fmt::format("particle {} restarted with mass {}", i, p.mass(i)));
  }
  if (!std::isfinite(state.time) || !std::isfinite(state.dt) || state.step < 0 || state.step_in_interval < 0 ||
      state.next_output < 0 || state.next_output > 2 || !std::isfinite(state.initial_energy) ||
      !(state.max_acceleration >= 0) || !std::isfinite(state.max_acceleration))
    finding(fmt::format("restarted state time {} dt {} step {} in interval {} next output {} E0 {} max|a| {}",
                        state.time, state.dt, state.step, state.step_in_interval, state.next_output,
                        state.initial_energy, state.max_acceleration));
  if (config.integrator == IntegratorKind::KDK && state.acceleration.extent(0) < p.num)
    finding("KDK restart without an acceleration per particle");
  return 0;
}
