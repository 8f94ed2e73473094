// Run files: the `external` list of potentials and the centre-finding keys, and their errors.
#include <kfmm/core/error.hpp>
#include <kfmm/io/run_file.hpp>

#include <gtest/gtest.h>
#include "run_file_errors.hpp"

#include <string>

namespace {

using kfmm::test_support::expect_contains;
using kfmm::test_support::run_file_error_of;

TEST(RunFileExternal, ReadsEveryKindAndTheCentres) {
  auto const settings = kfmm::parse_run_text(R"(ic: {kind: plummer}
time: {start: 0.25}
external:
  - {kind: point_mass, mass: 2, softening: 0.1}
  - {kind: plummer, mass: 1, b: 0.5, centre: [1, 2, 3], velocity: [0, 1, 0], centre_motion: integrated}
  - {kind: hernquist, mass: 3, a: 0.2, centre_motion: linear, velocity: [1, 0, 0], t0: 2}
  - {kind: nfw, density: 0.1, scale_radius: 2}
  - {kind: nfw, m200: 10, concentration: 8, r200: 5}
  - {kind: miyamoto_nagai, mass: 1, a: 3, b: 0.3}
  - {kind: logarithmic, v0: 1, core_radius: 0.1, q: 0.9}
  - {kind: uniform, acceleration: [0, 0, -1], centre_motion: linear}
output: {centres: step, centre_shrink_factor: 0.95, centre_min_particles: 50}
)",
                                             "run.yaml");
  auto const& p = settings.simulation.external.potentials;
  ASSERT_EQ(p.size(), 8u);
  EXPECT_EQ(p[0].kind, kfmm::ExternalKind::PointMass);
  EXPECT_EQ(p[0].param[1], 0.1);
  EXPECT_EQ(p[1].motion, kfmm::CentreMotion::Integrated);
  EXPECT_EQ(p[1].centre[2], 3);
  EXPECT_EQ(p[1].velocity[1], 1);
  EXPECT_EQ(p[2].motion, kfmm::CentreMotion::Linear);
  EXPECT_EQ(p[2].t0, 2);
  EXPECT_EQ(p[7].t0, 0.25);  // default: time.start
  EXPECT_EQ(p[3].kind, kfmm::ExternalKind::NFW);
  EXPECT_NEAR(p[4].param[1], 5.0 / 8.0, 1e-15);
  EXPECT_EQ(p[6].param[2], 0.9);
  EXPECT_EQ(p[7].param[2], -1);
  EXPECT_EQ(settings.simulation.centres.cadence, kfmm::CentreCadence::Step);
  EXPECT_EQ(settings.simulation.centres.shrink_factor, 0.95);
  EXPECT_EQ(settings.simulation.centres.min_particles, 50u);
  // No section: no potentials, centres at outputs.
  auto const none = kfmm::parse_run_text("", "run.yaml");
  EXPECT_TRUE(none.simulation.external.empty());
  EXPECT_EQ(none.simulation.centres.cadence, kfmm::CentreCadence::Output);
}

TEST(RunFileExternal, MilkyWayNeedsAstroUnits) {
  auto const mw = kfmm::parse_run_text("external:\n  - kind: milky_way_2014\n", "run.yaml");  // clumps: astro
  EXPECT_EQ(mw.simulation.external.potentials.size(), 3u);
  expect_contains(run_file_error_of("ic: {kind: plummer}\nexternal:\n  - kind: milky_way_2014\n"),
                  {"bad.yaml", "external entry 1", "use units.system: astro"});
}

TEST(RunFileExternal, BadEntriesNameTheKeyTheValueAndTheLimit) {
  expect_contains(run_file_error_of("external:\n  - {kind: isochrone, mass: 1}\n"),
                  {"bad.yaml' line 2", "external entry 1", "'kind' = 'isochrone' is not one of", "hernquist"});
  expect_contains(run_file_error_of("external:\n  - {kind: hernquist, mass: -1, a: 1}\n"),
                  {"external entry 1", "'mass' = -1 is out of range", "must be > 0"});
  expect_contains(run_file_error_of("external:\n  - {kind: plummer, mass: 1, b: 1}\n  - {kind: plummer, mass: 1, b: 0}\n"),
                  {"external entry 2", "'b' = 0 is out of range"});
  expect_contains(run_file_error_of("external:\n  - {kind: logarithmic, v0: 1, core_radius: 1, q: 0}\n"),
                  {"'q' = 0 is out of range"});
  expect_contains(run_file_error_of("external:\n  - {kind: hernquist, mass: 1}\n"), {"needs 'a'"});
  expect_contains(run_file_error_of("external:\n  - {kind: hernquist, mass: 1, a: 1, b: 2}\n"),
                  {"key 'b' does not apply to kind hernquist"});
  expect_contains(run_file_error_of("external:\n  - {kind: hernquist, mass: 1, a: 1, colour: red}\n"), {"unknown key 'colour'"});
  expect_contains(run_file_error_of("external:\n  - {kind: nfw, density: 1, scale_radius: 1, m200: 3}\n"), {"not both"});
  expect_contains(run_file_error_of("external:\n  - {kind: nfw, density: 1, centre_motion: integrated}\n"), {"scale_radius"});
  expect_contains(run_file_error_of("external:\n  - {kind: nfw, density: 1, scale_radius: 1, centre_motion: integrated}\n"),
                  {"needs a finite mass"});
  expect_contains(run_file_error_of("external:\n  - {kind: hernquist, mass: 1, a: 1, centre: [1, 2]}\n"),
                  {"'centre' must be a list of three finite numbers"});
  expect_contains(run_file_error_of("external:\n  - {kind: hernquist, mass: 1, a: 1, velocity: [1, 2, 3]}\n"),
                  {"'velocity' needs centre_motion linear or integrated"});
  expect_contains(run_file_error_of("external:\n  - {kind: uniform}\n"), {"needs 'acceleration'"});
  expect_contains(run_file_error_of("external:\n  kind: hernquist\n"), {"'external' must be a list"});
  expect_contains(run_file_error_of("external:\n  - hernquist\n"), {"must be a map"});
  expect_contains(run_file_error_of("integrator: {kind: lattice_dkd}\nexternal:\n  - {kind: plummer, mass: 1, b: 1, "
                           "centre_motion: integrated}\n"),
                  {"lattice_dkd"});
  expect_contains(run_file_error_of("output: {centres: sometimes}\n"), {"output.centres", "none|output|step"});
  expect_contains(run_file_error_of("output: {centre_shrink_factor: 1}\n"), {"output.centre_shrink_factor", "out of range"});
}

}  // namespace
