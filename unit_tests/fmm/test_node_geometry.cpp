// compute_node_geometry in both kernel shapes, whatever the build: the GPU shape (a team per
// node, 32 fixed partial sums per leaf) agrees with the CPU shape (a thread per node) to
// round-off and with sums over the particles, and is bit for bit the same for any team size.
#include "sorted_tree.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace {

using kfmm::ExpansionCentre;
using kfmm::HostSpace;

struct HostGeometry {
  std::vector<double> centre, radius, mass, scale;  // centre: 3 per node
  std::vector<int> flags;
};

HostGeometry to_host(kfmm::NodeGeometry const& g, int nodes) {
  auto const centre = Kokkos::create_mirror_view_and_copy(HostSpace(), g.centre);
  auto const radius = Kokkos::create_mirror_view_and_copy(HostSpace(), g.radius);
  auto const mass = Kokkos::create_mirror_view_and_copy(HostSpace(), g.mass);
  auto const scale = Kokkos::create_mirror_view_and_copy(HostSpace(), g.scale);
  auto const flags = Kokkos::create_mirror_view_and_copy(HostSpace(), g.flags);
  HostGeometry h;
  for (int i = 0; i < nodes; ++i) {
    for (int k = 0; k < 3; ++k) h.centre.push_back(centre(i, k));
    h.radius.push_back(radius(i));
    h.mass.push_back(mass(i));
    h.scale.push_back(scale(i));
    h.flags.push_back(flags(i));
  }
  return h;
}

class NodeGeometryShapes : public testing::TestWithParam<ExpansionCentre> {
 protected:
  // A Plummer sphere and 300 coincident particles (an oversized leaf at the deepest level).
  kfmm_test::SortedTree const sorted = kfmm_test::sorted_tree(kfmm_test::plummer_with_a_clump(2500, 300), 64);

  HostGeometry compute(bool gpu_shape, int team_size = 0) const {
    kfmm::NodeGeometry geometry;
    kfmm::compute_node_geometry(kfmm::ExecutionSpace(), sorted.tree, sorted.particles.pos, sorted.particles.mass,
                                GetParam(), sorted.cube, geometry, gpu_shape, team_size);
    return to_host(geometry, sorted.tree.num_nodes);
  }
};

TEST_P(NodeGeometryShapes, GpuShapeMatchesCpuShapeAndTheParticles) {
  auto const cpu = compute(false);
  auto const gpu = compute(true);
  int const nodes = sorted.tree.num_nodes;
  ASSERT_GT(nodes, 50);
  auto const pos = Kokkos::create_mirror_view_and_copy(HostSpace(), sorted.particles.pos);
  auto const mass = Kokkos::create_mirror_view_and_copy(HostSpace(), sorted.particles.mass);
  auto const pbegin = Kokkos::create_mirror_view_and_copy(HostSpace(), sorted.tree.particle_begin);
  auto const pend = Kokkos::create_mirror_view_and_copy(HostSpace(), sorted.tree.particle_end);
  double const size = sorted.cube.size;
  int leaves = 0;
  for (int node = 0; node < nodes; ++node) {
    EXPECT_EQ(gpu.flags[node], cpu.flags[node]) << node;
    EXPECT_EQ(gpu.scale[node], cpu.scale[node]) << node;
    EXPECT_NEAR(gpu.mass[node], cpu.mass[node], 1e-14 * cpu.mass[node]) << node;
    for (int k = 0; k < 3; ++k) EXPECT_NEAR(gpu.centre[3 * node + k], cpu.centre[3 * node + k], 1e-13 * size) << node;
    EXPECT_NEAR(gpu.radius[node], cpu.radius[node], 1e-13 * size) << node;
    if (!(gpu.flags[node] & kfmm::node_leaf)) continue;
    ++leaves;
    // A leaf's sphere holds all its particles; its mass is theirs.
    double m = 0;
    for (int i = pbegin(node); i < pend(node); ++i) {
      m += mass(i);
      double d2 = 0;
      for (int k = 0; k < 3; ++k) d2 += (pos(i, k) - gpu.centre[3 * node + k]) * (pos(i, k) - gpu.centre[3 * node + k]);
      EXPECT_LE(std::sqrt(d2), gpu.radius[node] * (1 + 1e-14)) << node;
    }
    EXPECT_NEAR(gpu.mass[node], m, 1e-13 * m) << node;
  }
  EXPECT_GT(leaves, 10);
}

TEST_P(NodeGeometryShapes, GpuShapeIsTheSameForEveryTeamSize) {
  auto const reference = compute(true, 1);
  int const largest = kfmm::compat::concurrency(kfmm::ExecutionSpace());
  for (int team : {0, 2, 3}) {
    if (team > largest) continue;
    auto const other = compute(true, team);
    EXPECT_EQ(std::memcmp(other.centre.data(), reference.centre.data(), reference.centre.size() * sizeof(double)), 0)
        << "team size " << team;
    EXPECT_EQ(std::memcmp(other.radius.data(), reference.radius.data(), reference.radius.size() * sizeof(double)), 0)
        << "team size " << team;
    EXPECT_EQ(std::memcmp(other.mass.data(), reference.mass.data(), reference.mass.size() * sizeof(double)), 0)
        << "team size " << team;
  }
}

INSTANTIATE_TEST_SUITE_P(Centres, NodeGeometryShapes,
                         testing::Values(ExpansionCentre::CentreOfMass, ExpansionCentre::Geometric),
                         [](testing::TestParamInfo<ExpansionCentre> const& info) {
                           return info.param == ExpansionCentre::Geometric ? "Geometric" : "CentreOfMass";
                         });

}  // namespace
