// Per-particle accuracy of the solver's defaults (the relative opening criterion) against
// direct summation, on every distribution `kfmm ic` makes (cusps, satellites, a mass spectrum,
// a thin disk, a far filament, and uniform, Plummer, clumps): both softening kernels, float and
// double. ctest runs this suite on one rank and on three (fmm.hard.*), not with the other fmm
// runs.
#include <kfmm/comm/initial_conditions.hpp>
#include <kfmm/fmm/accuracy.hpp>
#include <kfmm/fmm/solver.hpp>

#include <gtest/gtest.h>

#include <cstdio>

namespace {

using namespace kfmm;

// The targets the defaults are chosen for (README, "Choosing the defaults").
constexpr double max_force_l2 = 3e-4;
constexpr double max_p99 = 3e-3;
constexpr double max_p999 = 1e-2;

class HardDistributions : public testing::TestWithParam<ICKind> {
 protected:
  Context world;
};

TEST_P(HardDistributions, DefaultsMeetTheTargets) {
  ICOptions options;
  options.kind = GetParam();
  options.n_total = 20000;
  options.seed = 11;
  auto particles = to_device(make_initial_conditions(world, options));
  for (SofteningKind kernel : {SofteningKind::Plummer, SofteningKind::Spline}) {
    for (Precision precision : {Precision::Float, Precision::Double}) {
      FMMConfig config;  // the defaults but for kernel and precision
      config.softening = kernel;
      config.softening_length = 1e-3;
      config.precision = precision;
      ForceSolver solver(world, config);
      solver.compute(particles);
      AccuracyReport const report =
          measure_accuracy(world, particles, solver.potential(), solver.acceleration(), config, 2000);
      std::string const name = fmt::format("{} {} {}", to_string(GetParam()), to_string(kernel), to_string(precision));
      if (world.is_root()) std::printf("%s: %s\n", name.c_str(), describe(report).c_str());
      EXPECT_LE(report.force_l2, max_force_l2) << name;
      EXPECT_LE(report.p99, max_p99) << name;
      EXPECT_LE(report.p999, max_p999) << name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryKind, HardDistributions, testing::ValuesIn(all_ic_kinds()),
                         [](auto const& info) { return to_string(info.param); });

}  // namespace
