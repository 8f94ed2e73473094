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
    case StepMode::Hierarchical: {
      if (!(eta > 0) || !std::isfinite(eta))
        fail("schedule: hierarchical step factor eta {} must be finite and > 0 (GADGET's 0.025 is a common choice)", eta);
      if (!(dt_max > 0) || !std::isfinite(dt_max))
        fail("schedule: hierarchical steps need a finite block length dt_max > 0 (the longest particle step), got {}",
             dt_max);
      if (!(dt_min >= 0) || !(dt_min <= dt_max))
        fail("schedule: smallest time step dt_min = {} must be ≥ 0 and ≤ dt_max = {}", dt_min, dt_max);
      if (max_rungs < 0 || max_rungs > max_rung_limit)
        fail("schedule: max_rungs = {} must be in [0, {}] (the smallest step is dt_max / 2^max_rungs)", max_rungs,
             max_rung_limit);
      double previous_output = start_time;
      for (double t : output_times) {
        double const blocks = std::ceil((t - previous_output) / dt_max);
        if (!(blocks <= max_blocks_per_interval))
          fail("schedule: the interval from {} to output {} needs {:g} blocks of dt_max = {}, more than {:g}; use a "
               "larger dt_max",
               previous_output, t, blocks, dt_max, max_blocks_per_interval);
        previous_output = t;
      }
      break;
    }
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
    case StepMode::Hierarchical: {  // block ends, as PerOutput's step ends
      long long const blocks = blocks_in_interval(next_output);
      if (step_in_interval + 1 >= blocks) return end;
      return begin + static_cast<double>(step_in_interval + 1) * ((end - begin) / static_cast<double>(blocks));
    }
  }
  return end;
}

long long Schedule::blocks_in_interval(int next_output) const {
  double const length = std::fabs(output_times[next_output] - interval_start(next_output));
  // A length that is a whole number of dt_max up to round-off (0.1 / 0.02 = 5.000000000000001)
  // takes that number of blocks, not one more. validate() bounds the count.
  double const blocks = std::ceil(length / dt_max * (1 - 1e-12));
  return blocks < 1 ? 1 : static_cast<long long>(blocks);
}

double Schedule::step_length(int next_output, double time, double end) const {
  if (mode == StepMode::PerOutput)
    return (output_times[next_output] - interval_start(next_output)) / static_cast<double>(steps_per_output);
  if (mode == StepMode::Hierarchical) return block_length(next_output);
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
  if (name == "hierarchical") return StepMode::Hierarchical;
  fail("unknown step mode '{}': use per_output, fixed, adaptive or hierarchical", name);
}

std::string to_string(StepMode mode) {
  switch (mode) {
    case StepMode::PerOutput: return "per_output";
    case StepMode::Fixed: return "fixed";
    case StepMode::Adaptive: return "adaptive";
    case StepMode::Hierarchical: return "hierarchical";
  }
  return "?";
}

}  // namespace kfmm
