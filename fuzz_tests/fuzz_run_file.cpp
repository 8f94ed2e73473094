// Fuzzing of the run-file parser (io/run_file.cpp): every text must parse into settings that
// pass the reader's own validation, or throw kfmm::Error. Any other exception escapes and
// crashes the fuzzer: it is a reader bug (YAML::Exception, std::bad_alloc, ...).
#include <fmt/format.h>

#include <kfmm/core/error.hpp>
#include <kfmm/io/run_file.hpp>

#include "fuzz_common.hpp"

using namespace kfmm;
using namespace kfmm::fuzz;

namespace {

void check_settings(RunSettings const& s) {
  try {
    s.simulation.validate();
    if (s.ic_file.empty()) s.ic.validate();
  } catch (Error const& e) {
    finding(fmt::format("parsed settings fail their own validation: {}", e.what()));
  }
  auto const& fmm = s.simulation.fmm;
  if (fmm.order < 1 || fmm.order > 8) finding(fmt::format("order {}", fmm.order));
  if (!(fmm.theta > 0) || !(fmm.leaf_size >= 1) || !(fmm.softening_length >= 0) || !std::isfinite(fmm.G) ||
      !(fmm.G > 0))
    finding("force settings out of range");
  if (s.ic.n_total < 2 && s.ic_file.empty()) finding(fmt::format("ic.n = {}", s.ic.n_total));
  if (s.snapshot_options.compression < 0 || s.snapshot_options.compression > 9) finding("compression out of range");
  if (s.simulation.schedule.output_times.size() > 1000000) finding("more than a million outputs were accepted");
  if (s.simulation.output.restart_every < 0) finding("negative restart cadence");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  environment();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  std::string const text(reinterpret_cast<char const*>(data), size);
  RunSettings settings;
  try {
    settings = parse_run_text(text, "fuzz.yaml");
  } catch (Error const&) {
    count_outcome(false);
    return 0;
  }
  count_outcome(true);
  check_settings(settings);
  // Parsing is a function of the text alone.
  RunSettings const again = parse_run_text(text, "fuzz.yaml");
  if (again.ic.seed != settings.ic.seed || again.ic.n_total != settings.ic.n_total)
    finding("the same text parsed twice gave different settings");
  return 0;
}
