// Run files: defaults, the generated default file, and one message per kind of error.
#include <kfmm/core/error.hpp>
#include <kfmm/io/run_file.hpp>

#include <gtest/gtest.h>
#include "run_file_errors.hpp"

#include <sstream>
#include <string>

namespace {

using kfmm::test_support::expect_contains;
using kfmm::test_support::run_file_error_of;

TEST(RunFile, DefaultFileParsesToTheDefaults) {
  auto const defaults = kfmm::parse_run_text("", "built-in default");
  auto const from_file = kfmm::parse_run_text(kfmm::default_run_file(), "default.yaml");
  EXPECT_EQ(defaults.ic.n_total, 200000u);
  EXPECT_EQ(defaults.ic.kind, kfmm::ICKind::GaussianClumps);
  EXPECT_EQ(defaults.simulation.integrator, kfmm::IntegratorKind::DKD);
  EXPECT_EQ(from_file.ic.n_total, defaults.ic.n_total);
  EXPECT_EQ(from_file.simulation.schedule.output_times, defaults.simulation.schedule.output_times);
  EXPECT_EQ(from_file.simulation.schedule.steps_per_output, defaults.simulation.schedule.steps_per_output);
  EXPECT_EQ(from_file.simulation.fmm.theta, defaults.simulation.fmm.theta);
  EXPECT_EQ(from_file.simulation.fmm.G, defaults.simulation.fmm.G);
  EXPECT_EQ(from_file.simulation.output.directory, defaults.simulation.output.directory);
  EXPECT_EQ(defaults.simulation.schedule.output_times.size(), 4u);
  EXPECT_NE(kfmm::run_file_keys_markdown().find("| `ic.n` | int | `200000` |"), std::string::npos);
  // The clumps are drawn in kpc and km/s: the default run uses astro units with 1e10 Msun.
  EXPECT_EQ(defaults.simulation.units.name, "astro");
  EXPECT_DOUBLE_EQ(defaults.simulation.fmm.G, kfmm::UnitSystem::astro(1, 1, 1e10).G);
}

// The default θ is the relative criterion's cap; `mac: angle` alone takes the angle criterion's
// own θ, so choosing it does not silently run the angle test at the wider cap.
TEST(RunFile, OpeningAngleFollowsTheCriterionUnlessGiven) {
  auto const defaults = kfmm::parse_run_text("", "built-in default");
  EXPECT_EQ(defaults.simulation.fmm.opening, kfmm::OpeningCriterion::Relative);
  EXPECT_EQ(defaults.simulation.fmm.theta, kfmm::default_theta(kfmm::OpeningCriterion::Relative));
  EXPECT_EQ(defaults.simulation.fmm.tolerance, kfmm::FMMConfig{}.tolerance);
  EXPECT_EQ(defaults.simulation.fmm.theta, kfmm::FMMConfig{}.theta);
  auto const angle = kfmm::parse_run_text("force: {mac: angle}\n", "angle.yaml");
  EXPECT_EQ(angle.simulation.fmm.opening, kfmm::OpeningCriterion::Angle);
  EXPECT_EQ(angle.simulation.fmm.theta, 0.75);
  auto const given = kfmm::parse_run_text("force: {mac: angle, theta: 0.6}\n", "given.yaml");
  EXPECT_EQ(given.simulation.fmm.theta, 0.6);
  auto const relative = kfmm::parse_run_text("force: {theta: 0.8}\n", "relative.yaml");
  EXPECT_EQ(relative.simulation.fmm.theta, 0.8);
  // The printed default file leaves θ out, so that a user who edits only its mac gets that
  // criterion's θ (it used to write theta: 0.95, which mac: angle then kept).
  std::string edited = kfmm::default_run_file();
  auto const mac = edited.find("mac: relative");
  ASSERT_NE(mac, std::string::npos) << edited;
  edited.replace(mac, std::string("mac: relative").size(), "mac: angle");
  auto const from_edited = kfmm::parse_run_text(edited, "edited.yaml");
  EXPECT_EQ(from_edited.simulation.fmm.opening, kfmm::OpeningCriterion::Angle);
  EXPECT_EQ(from_edited.simulation.fmm.theta, 0.75);
  // lattice_dkd's exact reversibility needs forces of the positions alone.
  auto const lattice = kfmm::parse_run_text("integrator: {kind: lattice_dkd}\n", "lattice.yaml");
  EXPECT_EQ(lattice.simulation.fmm.opening, kfmm::OpeningCriterion::Angle);
  EXPECT_EQ(lattice.simulation.fmm.theta, 0.75);
  expect_contains(run_file_error_of("integrator: {kind: lattice_dkd}\nforce: {mac: relative}\n"),
                  {"force.mac = relative", "lattice_dkd", "force.mac: angle"});
  auto const direct =
      kfmm::parse_run_text("integrator: {kind: lattice_dkd}\nforce: {mac: relative, method: direct}\n", "direct.yaml");
  EXPECT_EQ(direct.force_method, kfmm::ForceMethod::Direct);
}

TEST(RunFile, ModelUnitsAreThoseOfTheInitialConditions) {
  auto const plummer = kfmm::parse_run_text("ic: {kind: plummer}\n", "run.yaml");
  EXPECT_EQ(plummer.simulation.units.name, "plain");
  EXPECT_EQ(plummer.simulation.fmm.G, 1.0);
  auto const clumps_plain = kfmm::parse_run_text("units: {system: plain}\n", "run.yaml");
  EXPECT_EQ(clumps_plain.simulation.fmm.G, 1.0);
  auto const plummer_astro = kfmm::parse_run_text("ic: {kind: plummer}\nunits: {system: astro, mass_in_msol: 1}\n",
                                                  "run.yaml");
  EXPECT_DOUBLE_EQ(plummer_astro.simulation.fmm.G, 4.30071057317063e-06);
  EXPECT_FALSE(plummer.units_from_ic_file);
  EXPECT_TRUE(kfmm::parse_run_text("ic: {kind: file, file: ics.hdf5}\n", "run.yaml").units_from_ic_file);
  EXPECT_FALSE(
      kfmm::parse_run_text("ic: {kind: file, file: ics.hdf5}\nunits: {system: plain}\n", "run.yaml").units_from_ic_file);
}

TEST(RunFile, DuplicateIdPolicyOfTheInitialConditionsFile) {
  EXPECT_EQ(kfmm::parse_run_text("ic: {kind: file, file: ics.hdf5}\n", "run.yaml").ic_duplicate_ids,
            kfmm::DuplicateIdPolicy::Reject);
  EXPECT_EQ(kfmm::parse_run_text("ic: {kind: file, file: ics.hdf5, duplicate_ids: renumber}\n", "run.yaml")
                .ic_duplicate_ids,
            kfmm::DuplicateIdPolicy::Renumber);
  try {
    kfmm::parse_run_text("ic: {kind: file, file: ics.hdf5, duplicate_ids: keep}\n", "run.yaml");
    ADD_FAILURE() << "keep is for tools that only report, not for runs";
  } catch (kfmm::Error const& e) {
    EXPECT_NE(std::string(e.what()).find("'ic.duplicate_ids' = 'keep' is not one of reject|renumber"),
              std::string::npos)
        << e.what();
  }
}

TEST(RunFile, KeysMarkdownIsAFourColumnTable) {
  std::istringstream table(kfmm::run_file_keys_markdown());
  std::string line;
  int rows = 0;
  while (std::getline(table, line)) {
    int separators = 0;
    for (std::size_t k = 0; k < line.size(); ++k) separators += line[k] == '|' && (k == 0 || line[k - 1] != '\\');
    EXPECT_EQ(separators, 5) << "a '|' in a key's text splits this row: " << line;
    ++rows;
  }
  EXPECT_GT(rows, 30);
}

TEST(RunFile, ReadsSettings) {
  auto const settings = kfmm::parse_run_text(R"(
ic: {kind: plummer, n: 1000}
integrator: {kind: kdk}
time: {step_mode: fixed, dt: 0.01, end: 1.0, output_every: 25}
force: {method: direct, softening: spline}
units: {system: astro, length_in_kpc: 2}
output: {layout: per-rank, precision: double}
)",
                                             "run.yaml");
  EXPECT_EQ(settings.ic.kind, kfmm::ICKind::Plummer);
  EXPECT_EQ(settings.ic.n_total, 1000u);
  EXPECT_EQ(settings.simulation.integrator, kfmm::IntegratorKind::KDK);
  EXPECT_EQ(settings.force_method, kfmm::ForceMethod::Direct);
  EXPECT_EQ(settings.simulation.fmm.softening, kfmm::SofteningKind::Spline);
  auto const& times = settings.simulation.schedule.output_times;
  ASSERT_EQ(times.size(), 4u);
  EXPECT_DOUBLE_EQ(times[0], 0.25);
  EXPECT_EQ(times[3], 1.0);
  EXPECT_EQ(settings.simulation.units.name, "astro");
  EXPECT_DOUBLE_EQ(settings.simulation.fmm.G, settings.simulation.units.G);
  EXPECT_EQ(settings.snapshot_options.layout, kfmm::FileLayout::FilePerRank);
}

TEST(RunFile, ReadsTheOptionsOfEveryGeneratedModel) {
  auto const settings = kfmm::parse_run_text(R"(
ic: {kind: satellites, truncation_radius: 200, satellites: 3, satellite_scale: 0.05, mass_decades: 4,
     disk_scale_height: 0.01, filament_width: 0.002, offset: 500}
)",
                                             "run.yaml");
  EXPECT_EQ(settings.ic.kind, kfmm::ICKind::Satellites);
  EXPECT_EQ(settings.ic.truncation_radius, 200.0);
  EXPECT_EQ(settings.ic.satellites, 3);
  EXPECT_EQ(settings.ic.satellite_scale, 0.05);
  EXPECT_EQ(settings.ic.mass_decades, 4.0);
  EXPECT_EQ(settings.ic.disk_scale_height, 0.01);
  EXPECT_EQ(settings.ic.filament_width, 0.002);
  EXPECT_EQ(settings.ic.offset, 500.0);
  EXPECT_EQ(settings.simulation.units.name, "plain");
  for (auto kind : kfmm::all_ic_kinds())
    EXPECT_EQ(kfmm::parse_run_text("ic: {kind: " + kfmm::to_string(kind) + "}\n", "run.yaml").ic.kind, kind);
  // Defaults are ICOptions's.
  auto const defaults = kfmm::parse_run_text("", "built-in default").ic;
  kfmm::ICOptions const options;
  EXPECT_EQ(defaults.satellites, options.satellites);
  EXPECT_EQ(defaults.satellite_scale, options.satellite_scale);
  EXPECT_EQ(defaults.mass_decades, options.mass_decades);
  EXPECT_EQ(defaults.disk_scale_height, options.disk_scale_height);
  EXPECT_EQ(defaults.filament_width, options.filament_width);
  EXPECT_EQ(defaults.offset, options.offset);
}

TEST(RunFile, InvalidModelOptionsFailWhenTheFileIsRead) {
  expect_contains(run_file_error_of("ic: {kind: nfw, truncation_radius: 0.5}\n"),
                  {"bad.yaml", "truncation_radius = 0.5", "nfw"});
  expect_contains(run_file_error_of("ic:\n  satellites: 7\n"), {"'ic.satellites' = 7", "out of range", "line 2"});
  expect_contains(run_file_error_of("ic: {kind: satellites, truncation_radius: 10}\n"), {"truncation_radius = 10", "20"});
  expect_contains(run_file_error_of("ic: {kind: disk, disk_scale_height: 0}\n"), {"'ic.disk_scale_height' = 0", "out of range"});
  // Options of other kinds are not checked against the model.
  EXPECT_NO_THROW(kfmm::parse_run_text("ic: {kind: plummer, truncation_radius: 0.5}\n", "run.yaml"));
}

TEST(RunFile, UnknownKeyNamesKeyFileAndLine) {
  expect_contains(run_file_error_of("ic:\n  n: 100\n  nn: 5\n"), {"unknown key 'ic.nn'", "bad.yaml", "line 3"});
  expect_contains(run_file_error_of("icc: {n: 100}\n"), {"unknown key 'icc'", "line 1"});
}

TEST(RunFile, WrongTypeNamesKeyAndValue) {
  expect_contains(run_file_error_of("ic:\n  n: many\n"), {"'ic.n'", "integer", "'many'", "bad.yaml", "line 2"});
  expect_contains(run_file_error_of("ic:\n  n: 1.5\n"), {"'ic.n'", "integer"});
  expect_contains(run_file_error_of("output:\n  snapshots: sometimes\n"), {"'output.snapshots'", "true or false"});
  expect_contains(run_file_error_of("time:\n  output_times: 3\n"), {"'time.output_times'", "list"});
  expect_contains(run_file_error_of("ic: 5\n"), {"'ic' must be a section"});
  expect_contains(run_file_error_of("integrator: {kind: rk4}\n"), {"'integrator.kind'", "rk4", "dkd|kdk|lattice_dkd"});
}

TEST(RunFile, MissingRequiredKey) {
  expect_contains(run_file_error_of("ic: {kind: file}\n"), {"missing required key 'ic.file'", "bad.yaml"});
  expect_contains(run_file_error_of("time: {step_mode: fixed}\n"), {"missing required key 'time.dt'"});
}

TEST(RunFile, OutOfRangeValues) {
  expect_contains(run_file_error_of("force:\n  order: 12\n"), {"'force.order' = 12", "out of range", "line 2"});
  expect_contains(run_file_error_of("force: {theta: -1}\n"), {"'force.theta'", "out of range"});
  expect_contains(run_file_error_of("time: {output_times: [1, 0.5]}\n"), {"'time.output_times'", "increasing"});
  expect_contains(run_file_error_of("time: {start: 2, end: 1}\n"), {"'time.end'", "later than time.start"});
}

TEST(RunFile, MissingFileAndBadYaml) {
  expect_contains(run_file_error_of("ic: [1, 2\n"), {"bad.yaml", "not valid YAML"});
  try {
    kfmm::read_run_file("/nonexistent/run.yaml");
    ADD_FAILURE();
  } catch (kfmm::Error const& e) {
    expect_contains(e.what(), {"/nonexistent/run.yaml"});
  }
}

}  // namespace

namespace {

// Found by fuzz_tests/fuzz_run_file: a key that is a list or a map made yaml-cpp's conversion
// to a string throw YAML::TypedBadConversion out of the reader.
TEST(RunFileFuzzFindings, KeyThatIsNotANameIsAnError) {
  expect_contains(run_file_error_of("ic:\n  [n]: 5\n"), {"bad.yaml", "line 2", "a key must be a name", "a list"});
  expect_contains(run_file_error_of("? {ic: 1}\n: 2\n"), {"a key must be a name", "a map"});
}

// Seeds are read from their digits: above 2^53 a double would round them.
TEST(RunFileFuzzFindings, SeedsAreExact64BitIntegers) {
  EXPECT_EQ(kfmm::parse_run_text("ic: {seed: 18446744073709551615}\n", "run.yaml").ic.seed,
            18446744073709551615ull);
  EXPECT_EQ(kfmm::parse_run_text("ic: {seed: 9007199254740993}\n", "run.yaml").ic.seed, 9007199254740993ull);
  EXPECT_EQ(kfmm::parse_run_text("ic: {seed: 0}\n", "run.yaml").ic.seed, 0u);
  expect_contains(run_file_error_of("ic: {seed: -1}\n"), {"bad.yaml", "ic.seed", "-1", "negative", "18446744073709551615"});
  expect_contains(run_file_error_of("ic: {seed: 1.5}\n"), {"ic.seed", "integer", "'1.5'"});
  expect_contains(run_file_error_of("ic: {seed: 1e3}\n"), {"ic.seed", "integer", "'1e3'"});
  expect_contains(run_file_error_of("ic: {seed: 18446744073709551616}\n"), {"ic.seed", "out of range", "18446744073709551615"});
  expect_contains(run_file_error_of("ic: {seed: [1]}\n"), {"ic.seed", "a list"});
}

// Found by fuzz_tests/fuzz_run_file: output counts that fill memory (time.outputs up to 1e9, a
// fixed step with output_every and a tiny dt) are refused before anything is allocated.
TEST(RunFileFuzzFindings, OutputCountsAreBounded) {
  expect_contains(run_file_error_of("time: {outputs: 1000000000}\n"), {"time.outputs", "out of range"});
  expect_contains(run_file_error_of("time: {step_mode: fixed, dt: 1e-300, output_every: 1}\n"),
                  {"time.output_every", "outputs, more than 1000000", "larger time.output_every or time.dt"});
  EXPECT_EQ(kfmm::parse_run_text("time: {outputs: 1000}\n", "run.yaml").simulation.schedule.output_times.size(), 1000u);
}

// yaml-cpp keeps repeated keys; one of the two values used to be ignored without a word.
TEST(RunFileFuzzFindings, RepeatedKeysAndSectionsAreErrors) {
  expect_contains(run_file_error_of("ic:\n  n: 10\n  n: 20\n"), {"line 3", "'ic.n' is given twice", "first at line 2"});
  expect_contains(run_file_error_of("ic: {n: 10}\nic: {seed: 3}\n"), {"line 2", "section 'ic' is given twice"});
}

}  // namespace
