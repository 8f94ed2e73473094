// Run files: placing the generated model (ic.mass, ic.scale_radius, ic.position, ic.velocity)
// and `kfmm run --set key=value` overrides.
#include <kfmm/core/error.hpp>
#include <kfmm/io/run_file.hpp>

#include <gtest/gtest.h>
#include "run_file_errors.hpp"

#include <array>
#include <string>
#include <vector>

namespace {

using kfmm::test_support::expect_contains;
using kfmm::test_support::run_file_error_of;

std::string override_error_of(std::string const& text, std::vector<std::string> const& overrides) {
  try {
    kfmm::parse_run_text(text, "run.yaml", overrides);
  } catch (kfmm::Error const& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

TEST(RunFilePlacement, PlacementKeysAreRead) {
  auto const defaults = kfmm::parse_run_text("ic: {kind: plummer}\n", "run.yaml");
  EXPECT_FALSE(defaults.ic_placement.moves());
  EXPECT_FALSE(defaults.ic_placement.scales());
  auto const placed = kfmm::parse_run_text(
      "ic: {kind: plummer, mass: 2e8, scale_radius: 0.8, position: [40, 0, -1], velocity: [0, 80, 40.5]}\n"
      "units: {system: astro, mass_in_msol: 1}\n",
      "run.yaml");
  EXPECT_EQ(placed.ic_placement.mass, 2e8);
  EXPECT_EQ(placed.ic_placement.scale_radius, 0.8);
  EXPECT_EQ(placed.ic_placement.position, (std::array<double, 3>{40, 0, -1}));
  EXPECT_EQ(placed.ic_placement.velocity, (std::array<double, 3>{0, 80, 40.5}));
  // Moving (not scaling) also applies to a file's particles and to the clumps.
  auto const file = kfmm::parse_run_text("ic: {kind: file, file: a.hdf5, position: [1, 2, 3]}\n", "run.yaml");
  EXPECT_EQ(file.ic_placement.position, (std::array<double, 3>{1, 2, 3}));
}

TEST(RunFilePlacement, BadPlacementsAreErrorsNamingTheKey) {
  expect_contains(run_file_error_of("ic: {kind: clumps, mass: 2}\n"),
                  {"'ic.mass'", "not to ic.kind clumps", "kpc and km/s"});
  expect_contains(run_file_error_of("ic: {kind: file, file: a.hdf5, scale_radius: 2}\n"),
                  {"'ic.scale_radius'", "2 applies", "not to ic.kind file", "file's units"});
  // The default value (as `kfmm run --print-default` writes it) is no scaling: accepted.
  EXPECT_EQ(kfmm::parse_run_text("ic: {kind: clumps, mass: 1, scale_radius: 1}\n", "run.yaml").ic_placement.mass, 1);
  expect_contains(run_file_error_of("ic: {kind: plummer, position: [1, 2]}\n"),
                  {"'ic.position'", "three finite numbers"});
  expect_contains(run_file_error_of("ic: {kind: plummer, velocity: [1, 2, .nan]}\n"),
                  {"'ic.velocity'", "three finite numbers"});
  expect_contains(run_file_error_of("ic: {kind: plummer, mass: -1}\n"), {"'ic.mass' = -1 is out of range"});
  expect_contains(run_file_error_of("ic: {kind: plummer, scale_radius: 0}\n"),
                  {"'ic.scale_radius' = 0 is out of range"});
}

TEST(RunFilePlacement, OverridesReplaceAndAddKeys) {
  std::string const text = "ic: {kind: plummer, n: 5000}\ntime: {end: 2, outputs: 4}\n";
  auto const settings = kfmm::parse_run_text(
      text, "run.yaml", {"ic.n=300", "time.end=0.5", "ic.position=[1, 2, 3]", "force.theta=0.5", "time.outputs=1"});
  EXPECT_EQ(settings.ic.n_total, 300u);
  EXPECT_EQ(settings.simulation.schedule.output_times, (std::vector<double>{0.5}));
  EXPECT_EQ(settings.ic_placement.position, (std::array<double, 3>{1, 2, 3}));
  EXPECT_EQ(settings.simulation.fmm.theta, 0.5);
  auto const plain = kfmm::parse_run_text(text, "run.yaml");
  EXPECT_EQ(plain.ic.n_total, 5000u);
  // On the built-in default (empty text) too.
  EXPECT_EQ(kfmm::parse_run_text("", "built-in default", {"ic.n=1234"}).ic.n_total, 1234u);
}

TEST(RunFilePlacement, BadOverridesAreErrorsNamingThem) {
  std::string const text = "ic: {kind: plummer}\n";
  expect_contains(override_error_of(text, {"time.end"}), {"--set 'time.end'", "expected key=value"});
  expect_contains(override_error_of(text, {"=3"}), {"expected key=value"});
  expect_contains(override_error_of(text, {"ic.bogus=1"}), {"unknown key 'ic.bogus'"});
  expect_contains(override_error_of(text, {"ic=1"}), {"unknown key 'ic'"});
  expect_contains(override_error_of(text, {"external[].mass=1"}), {"unknown key 'external[].mass'", "file only"});
  expect_contains(override_error_of(text, {"ic.n=[1"}), {"--set 'ic.n=[1'", "not valid YAML"});
  // A value of the wrong type is reported like one in the file, naming the override.
  expect_contains(override_error_of(text, {"ic.n=abc"}), {"'ic.n' must be an integer", "--set ic.n=abc"});
  // No line of the file: the value is not in it.
  auto const range = override_error_of(text, {"ic.mass=-3"});
  expect_contains(range, {"run file 'run.yaml with --set ic.mass=-3': key 'ic.mass' = -3 is out of range"});
  EXPECT_EQ(range.find("line"), std::string::npos) << range;
  expect_contains(override_error_of(text, {"ic.position=[1, x, 3]"}), {"'ic.position' must be a list of numbers"});
  expect_contains(override_error_of(text, {"time.end=-1"}), {"time.end", "later than time.start"});
}

}  // namespace
