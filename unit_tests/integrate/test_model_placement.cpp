// Placing a generated model in a run (ic.mass, ic.scale_radius, ic.position, ic.velocity): the
// scaled model keeps its virial ratio, and its mass, centre of mass and bulk velocity are the
// ones asked for.
#include <kfmm/core/error.hpp>
#include <kfmm/core/initial_conditions.hpp>
#include <kfmm/integrate/model_placement.hpp>

#include <gtest/gtest.h>

#include <initial_conditions_checks.hpp>

#include <cmath>
#include <limits>
#include <string>

namespace {

using kfmm::test_support::virial_ratio;

kfmm::Particles<kfmm::HostSpace> plummer(std::uint64_t n) {
  kfmm::ICOptions options;
  options.kind = kfmm::ICKind::Plummer;
  options.n_total = n;
  options.truncation_radius = 20;
  return kfmm::generate_initial_conditions(options, 0, 1, kfmm::test_support::single_rank_sums);
}

TEST(ModelPlacement, ScaledPlummerSphereKeepsItsVirialRatioAndMovesToItsOrbit) {
  auto const model = plummer(400);
  auto placed = plummer(400);
  kfmm::ModelPlacement placement;
  placement.mass = 3e8;
  placement.scale_radius = 0.8;
  placement.position = {40, -1, 2};
  placement.velocity = {0, 80, 40};
  double const G = 4.30071057317063e-06;
  EXPECT_TRUE(placement.moves());
  EXPECT_TRUE(placement.scales());
  kfmm::place_model(placed, placement, G);

  double mass = 0, centre[3] = {0, 0, 0}, bulk[3] = {0, 0, 0};
  for (std::size_t i = 0; i < placed.num; ++i) {
    mass += placed.mass(i);
    for (int d = 0; d < 3; ++d) {
      centre[d] += placed.mass(i) * placed.pos(i, d);
      bulk[d] += placed.mass(i) * placed.vel(i, d);
      EXPECT_DOUBLE_EQ(placed.pos(i, d), 0.8 * model.pos(i, d) + placement.position[d]);
    }
    EXPECT_EQ(placed.id(i), model.id(i));
  }
  EXPECT_NEAR(mass, 3e8, 1e-12 * 3e8);
  for (int d = 0; d < 3; ++d) {
    EXPECT_NEAR(centre[d] / mass, placement.position[d], 1e-9) << d;
    EXPECT_NEAR(bulk[d] / mass, placement.velocity[d], 1e-9) << d;
  }

  // Virial ratio of the model in its own frame: undo the bulk motion before comparing.
  for (std::size_t i = 0; i < placed.num; ++i)
    for (int d = 0; d < 3; ++d) placed.vel(i, d) -= placement.velocity[d];
  double const before = virial_ratio(model, 1.0);
  EXPECT_GT(before, 0.8);  // a Plummer sphere near equilibrium (400 particles: noisy)
  EXPECT_LT(before, 1.2);
  EXPECT_NEAR(virial_ratio(placed, G), before, 1e-12 * before);
}

TEST(ModelPlacement, IdentityLeavesTheModelAlone) {
  auto const model = plummer(50);
  auto placed = plummer(50);
  kfmm::ModelPlacement const identity;
  EXPECT_FALSE(identity.moves());
  EXPECT_FALSE(identity.scales());
  kfmm::place_model(placed, identity, 1.0);
  for (std::size_t i = 0; i < placed.num; ++i) {
    EXPECT_EQ(placed.mass(i), model.mass(i));
    for (int d = 0; d < 3; ++d) {
      EXPECT_EQ(placed.pos(i, d), model.pos(i, d));
      EXPECT_EQ(placed.vel(i, d), model.vel(i, d));
    }
  }
}

std::string placement_error(kfmm::ModelPlacement const& placement, double G = 1) {
  auto particles = plummer(10);
  try {
    kfmm::place_model(particles, placement, G);
  } catch (kfmm::Error const& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

TEST(ModelPlacement, BadValuesAreErrorsNamingThem) {
  double const nan = std::numeric_limits<double>::quiet_NaN();
  kfmm::ModelPlacement p;
  p.mass = 0;
  EXPECT_NE(placement_error(p).find("mass = 0 must be finite and > 0"), std::string::npos) << placement_error(p);
  p = {};
  p.scale_radius = -1;
  EXPECT_NE(placement_error(p).find("scale_radius = -1 must be finite and > 0"), std::string::npos) << placement_error(p);
  p = {};
  p.position[1] = nan;
  EXPECT_NE(placement_error(p).find("position[1] = nan must be finite"), std::string::npos) << placement_error(p);
  p = {};
  p.velocity[2] = std::numeric_limits<double>::infinity();
  EXPECT_NE(placement_error(p).find("velocity[2] = inf must be finite"), std::string::npos) << placement_error(p);
  EXPECT_NE(placement_error({}, 0.0).find("G = 0 must be finite and > 0"), std::string::npos);
}

}  // namespace
