#pragma once
// The FMM settings shared by `kfmm forces` and `kfmm bench` (`kfmm run` takes them from YAML).
#include <kfmm/fmm/config.hpp>

#include <kfmm/core/format.hpp>

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

namespace kfmm::app {

/// Command-line spellings of FMMConfig; defaults are FMMConfig's.
struct FmmOptions {
  FMMConfig config;
  std::string kernel = to_string(FMMConfig{}.softening);
  std::string precision = to_string(FMMConfig{}.precision);
  std::string centre = to_string(FMMConfig{}.centre);
  std::string opening = to_string(FMMConfig{}.opening);
  CLI::Option* theta_option = nullptr;  ///< not given: θ of the chosen criterion (default_theta)

  /// The validated configuration.
  FMMConfig resolve() const {
    FMMConfig c = config;
    if (theta_option != nullptr && theta_option->count() == 0) c.theta = default_theta(parse_opening_criterion(opening));
    c.softening = parse_softening_kind(kernel);
    c.precision = parse_precision(precision);
    c.centre = parse_expansion_centre(centre);
    c.opening = parse_opening_criterion(opening);
    c.validate();
    return c;
  }
};

inline void add_fmm_options(CLI::App* command, std::shared_ptr<FmmOptions> const& options) {
  auto& c = options->config;
  command->add_option("--order", c.order, "expansion order p (1…8)")->capture_default_str();
  options->theta_option = command->add_option(
      "--theta", c.theta,
      fmt::format("opening angle θ, 0 < θ < 1.5 (default {} with --mac relative, {} with --mac angle)",
                  default_theta(OpeningCriterion::Relative), default_theta(OpeningCriterion::Angle)));
  command->add_option("--mac", options->opening,
                      "opening criterion: angle, or relative (the angle test and an M2L error bound of --tolerance "
                      "times each target's force)")
      ->capture_default_str()
      ->check(CLI::IsMember({"angle", "relative"}));
  command->add_option("--tolerance", c.tolerance, "α of --mac relative")->capture_default_str();
  command->add_option("--estimate-theta", c.estimate_theta,
                      "θ of the first evaluation that estimates |a| for --mac relative")
      ->capture_default_str();
  command->add_option("--estimate-order", c.estimate_order,
                      "expansion order of that first evaluation (min of it and --order; --order if not compiled)")
      ->capture_default_str();
  command->add_option("--leaf-size", c.leaf_size, "maximum particles per leaf")->capture_default_str();
  command->add_option("--m2p-theta", c.m2p_theta,
                      "--mac relative: a leaf takes a source by M2P, not M2L, where its radius exceeds this times "
                      "their distance and twice the source's radius (0: M2L only)")
      ->capture_default_str();
  command->add_option("--domain-tolerance", c.domain_tolerance,
                      "several ranks: keep the previous domains while the load imbalance is within this (0: new "
                      "domains every evaluation)")
      ->capture_default_str();
  command->add_option("--softening", c.softening_length, "softening length ε (≥ 0)")->capture_default_str();
  command->add_option("--kernel", options->kernel, "softening kernel: plummer or spline")
      ->capture_default_str()
      ->check(CLI::IsMember({"plummer", "spline"}));
  command->add_option("--precision", options->precision, "arithmetic of expansions and kernels: float or double")
      ->capture_default_str()
      ->check(CLI::IsMember({"float", "double"}));
  command->add_option("--centre", options->centre, "expansion centre: mass or geometric")
      ->capture_default_str()
      ->check(CLI::IsMember({"mass", "geometric"}));
  command->add_option("-G", c.G, "gravitational constant")->capture_default_str();
}

}  // namespace kfmm::app
