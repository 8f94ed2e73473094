#include <kfmm/integrate/schedule.hpp>

#include <kfmm/core/error.hpp>

#include <cmath>

namespace kfmm {

void Schedule::validate() const {
  if (!std::isfinite(start_time)) fail("schedule: start time {} is not finite", start_time);
  if (output_times.empty()) fail("schedule: no output times; give at least one (the end time)");
  bool const backward = output_times.front() < start_time;
  double previous = start_time;
  for (std::size_t k = 0; k < output_times.size(); ++k) {
    double const t = output_times[k];
    if (!std::isfinite(t) || t == previous || (t < previous) != backward)
      fail("schedule: output time {} ({}) must be finite and {} than {} (the start time or the previous output); "
           "give strictly {} times",
           k + 1, t, backward ? "earlier" : "later", previous, backward ? "decreasing" : "increasing");
    previous = t;
  }
  if (backward && mode != StepMode::PerOutput)
    fail("schedule: a backward run (outputs before the start time {}) needs the per_output step mode", start_time);
  switch (mode) {
    case StepMode::PerOutput:
      if (steps_per_output < 1) fail("schedule: steps per output {} must be ≥ 1", steps_per_output);
      break;
    case StepMode::Fixed:
      if (!(dt > 0) || !std::isfinite(dt)) fail("schedule: fixed time step {} must be finite and > 0", dt);
      break;
    case StepMode::Adaptive:
      if (!(eta > 0) || !std::isfinite(eta)) fail("schedule: adaptive step factor eta {} must be finite and > 0", eta);
      if (!(dt_max > 0)) fail("schedule: maximum time step {} must be > 0", dt_max);
      break;
  }
}

double Schedule::step_end(int next_output, long long step_in_interval, double time, double adaptive_dt) const {
  double const begin = interval_start(next_output);
  double const end = output_times[next_output];
  // A step that would end within a millionth of a step of the output lands on it instead.
  auto land = [end](double t, double step) { return t >= end - 1e-6 * step ? end : t; };
  switch (mode) {
    case StepMode::PerOutput:
      if (step_in_interval + 1 >= steps_per_output) return end;
      return begin + static_cast<double>(step_in_interval + 1) * ((end - begin) / static_cast<double>(steps_per_output));
    case StepMode::Fixed:
      return land(begin + static_cast<double>(step_in_interval + 1) * dt, dt);
    case StepMode::Adaptive: {
      double const step = std::fmin(adaptive_dt, dt_max);
      return land(time + step, step);
    }
  }
  return end;
}

double Schedule::step_length(int next_output, double time, double end) const {
  if (mode == StepMode::PerOutput)
    return (output_times[next_output] - interval_start(next_output)) / static_cast<double>(steps_per_output);
  return end - time;
}

std::vector<double> evenly_spaced_outputs(double start_time, double end_time, int count) {
  if (count < 1) fail("schedule: output count {} must be ≥ 1", count);
  std::vector<double> times(count);
  for (int k = 0; k < count; ++k)
    times[k] = k + 1 == count ? end_time : start_time + (k + 1) * ((end_time - start_time) / count);
  return times;
}

StepMode parse_step_mode(std::string const& name) {
  if (name == "per_output") return StepMode::PerOutput;
  if (name == "fixed") return StepMode::Fixed;
  if (name == "adaptive") return StepMode::Adaptive;
  fail("unknown step mode '{}': use per_output, fixed or adaptive", name);
}

std::string to_string(StepMode mode) {
  switch (mode) {
    case StepMode::PerOutput: return "per_output";
    case StepMode::Fixed: return "fixed";
    case StepMode::Adaptive: return "adaptive";
  }
  return "?";
}

}  // namespace kfmm
