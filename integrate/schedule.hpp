#pragma once
/// \file
/// \brief When the global steps and the outputs happen.
#include <limits>
#include <string>
#include <vector>

namespace kfmm {

/// How each interval between outputs is cut into steps.
enum class StepMode {
  PerOutput,  ///< `steps_per_output` equal steps per interval (jz-fmm's simulate_with_outputs)
  Fixed,      ///< steps of `dt`; the last step of an interval is shortened to land on the output
  Adaptive,   ///< dt = η·sqrt(ε/|a|max) from the latest forces, ≤ dt_max, capped by the next output
  Hierarchical  ///< blocks of ≤ dt_max, each particle on a power-of-two rung (integrate/block_steps.hpp)
};

/// \brief Output times and step sizes of a run. Outputs are numbered from 0 (the initial state);
/// output k ≥ 1 happens at `output_times[k − 1]`, and the run ends at the last one. Decreasing
/// output times integrate backwards in time (per_output mode only), which with LatticeDKD
/// retraces a forward run exactly.
struct Schedule {
  double start_time = 0;
  std::vector<double> output_times = {1.0};  ///< strictly monotonic, starting after start_time
  StepMode mode = StepMode::PerOutput;
  long long steps_per_output = 20;            ///< PerOutput
  double dt = 0.01;                           ///< Fixed
  double eta = 0.025;                         ///< Adaptive, Hierarchical (Δt = sqrt(2ηε/|a|))
  double dt_max = std::numeric_limits<double>::infinity();  ///< Adaptive; Hierarchical: largest block length
  double dt_min = 0;                          ///< Hierarchical: smallest allowed particle step
  int max_rungs = 20;                         ///< Hierarchical: deepest rung (step = block / 2^max_rungs)

  /// Throws kfmm::Error naming the bad field, its value and the rule it breaks.
  void validate() const;

  /// \brief End time of the next step. The run is in the interval ending at
  /// `output_times[next_output]`, `step_in_interval` steps after its start, at `time`;
  /// `adaptive_dt` is the step that the forces ask for (Adaptive only). Times are computed
  /// from the interval start where the mode allows it, so they do not accumulate round-off.
  double step_end(int next_output, long long step_in_interval, double time, double adaptive_dt) const;

  /// \brief Length of the step from `time` to `end` (= step_end(...)) that the integrator
  /// applies. PerOutput: the same (output − interval start) / steps_per_output for every step
  /// of the interval, although the end times are rounded; a backward interval then takes
  /// exactly the negated steps of the forward one, which LatticeDKD needs to retrace a run
  /// bit for bit. Other modes: end − time.
  double step_length(int next_output, double time, double end) const;

  /// \brief Hierarchical: the number of equal blocks of the interval ending at
  /// output_times[next_output]: the fewest blocks no longer than dt_max, so they land on the output.
  long long blocks_in_interval(int next_output) const;
  /// Hierarchical: the length of those blocks (rung 0's step).
  double block_length(int next_output) const {
    return (output_times[next_output] - interval_start(next_output)) / static_cast<double>(blocks_in_interval(next_output));
  }

  /// Start of the interval that ends at output_times[next_output].
  double interval_start(int next_output) const {
    return next_output == 0 ? start_time : output_times[next_output - 1];
  }
};

/// Evenly spaced output times: `count` outputs from start to end (the last at `end_time`).
std::vector<double> evenly_spaced_outputs(double start_time, double end_time, int count);

/// Deepest rung a hierarchical schedule may ask for (its sub-step times are integers of 2^-rung blocks).
inline constexpr int max_rung_limit = 40;
/// Most blocks between two outputs (the block count is held in a long long and times in doubles).
inline constexpr double max_blocks_per_interval = 1e12;

StepMode parse_step_mode(std::string const& name);  ///< "per_output" | "fixed" | "adaptive" | "hierarchical"
std::string to_string(StepMode mode);

}  // namespace kfmm
