// Steps without allocations: a ForceSolver that evaluates drifting particles again and again
// keeps its Views between calls and grows them with slack, so after the first calls (which size
// them) a step allocates nothing, counted through Kokkos' allocation callbacks.
#include "drifting_clumps.hpp"
#include <kfmm/comm/exchange_plan.hpp>
#include <kfmm/core/memory_usage.hpp>
#include <kfmm/fmm/expansion_pass.hpp>
#include <kfmm/fmm/solver.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace kfmm;

using test::drift;

using AllocationLog = std::vector<std::pair<std::string, std::uint64_t>>;

class StepAllocationsTest : public testing::Test {
 protected:
  Context world;

  // On several ranks the capacity leaves room for the rank's share to grow when the domains
  // move (redistribute() grows it otherwise, and the results that follow it).
  Particles<MemorySpace> make(std::uint64_t n) {
    auto particles = test::clumps(world, n, 11);
    if (world.size() > 1) particles.reserve(2 * n / world.size());
    return particles;
  }

  // Allocations (label and bytes) of each of `steps` evaluations by `evaluate` of drifting particles.
  template <class Evaluate>
  std::vector<AllocationLog> allocations_per_step(Particles<MemorySpace>& particles, int steps,
                                                  Evaluate const& evaluate) {
    std::vector<AllocationLog> per_step;
    MemoryAccounting accounting;
    for (int step = 0; step < steps; ++step) {
      accounting.clear_allocation_log();
      evaluate();
      per_step.push_back(accounting.allocation_log());
      drift(particles, drift_dt());
    }
    return per_step;
  }

  // One rank: the default run's time step. Several ranks: the same positions again. What
  // crosses rank boundaries depends on where they lie; the drifting clumps here stream apart
  // freely (no forces) and their imports grow by tens of percent per step, beyond any slack.
  double drift_dt() const { return world.size() > 1 ? 0.0 : 0.00625; }

  static std::string describe(AllocationLog const& log) {
    std::string text;
    for (auto const& [label, bytes] : log) text += "\n  " + label + " (" + std::to_string(bytes) + " bytes)";
    return text;
  }

  // The first `sizing` steps size the buffers; every later step allocates nothing, the
  // ExchangePlans' export orders included (lent from export_order_pool()). Prints the counts of
  // each step. On several ranks one step more: the first call's domains balance the particle
  // count, the second's the measured cost, which moves what crosses the boundaries.
  void expect_no_allocations_after(std::vector<AllocationLog> const& per_step, int sizing) {
    EXPECT_FALSE(per_step.front().empty()) << "the first step must allocate (the counting works)";
    bool const several = world.size() > 1;
    if (several) ++sizing;
    for (std::size_t step = 0; step < per_step.size(); ++step) {
      AllocationLog const& made = per_step[step];
      std::printf("rank %d of %d, step %zu: %zu allocations\n", world.rank(), world.size(), step, made.size());
      if (static_cast<int>(step) < sizing) continue;
      EXPECT_TRUE(made.empty()) << "step " << step << " on rank " << world.rank() << " allocated " << made.size()
                                << " Views:" << describe(made);
    }
  }
};

// compute() as simulate() calls it every step: the first call sizes everything.
TEST_F(StepAllocationsTest, ComputeAllocatesNothingAfterTheFirstStep) {
  auto particles = make(12000);
  FMMConfig config;
  config.opening = OpeningCriterion::Angle;  // the relative criterion: the next test
  config.theta = default_theta(OpeningCriterion::Angle);
  ForceSolver solver(world, config);
  auto const per_step = allocations_per_step(particles, 6, [&] { solver.compute(particles); });
  expect_no_allocations_after(per_step, 1);
}

// The same with the relative opening criterion, which carries |a| through the sort. Its first
// call has no |a| yet and estimates it with an angle-criterion evaluation (no multipole powers,
// no carried |a|), so the second call sizes what only the criterion itself uses.
TEST_F(StepAllocationsTest, RelativeCriterionAllocatesNothingAfterTheSecondStep) {
  auto particles = make(12000);
  FMMConfig config;
  config.opening = OpeningCriterion::Relative;
  ForceSolver solver(world, config);
  auto const per_step = allocations_per_step(particles, 6, [&] { solver.compute(particles); });
  expect_no_allocations_after(per_step, 2);
}

// A first relative call estimates |a| at a lower order, with an expansion pass of its own, but
// sums its near field with the solver's pass, so the final evaluation's near field finds its
// scratch grown and touched. Before, the estimate's pass grew a second one: fresh memory, which
// the first call pays for page by page. Counted by the View each shape sizes by what both
// evaluations share: the CPU shape's relative positions (one row per source particle), the
// GPU shape's first group per node. On several ranks the final evaluation imports more leaf
// particles (and nodes) than the estimate and may grow it once more.
TEST_F(StepAllocationsTest, TheFirstRelativeCallGrowsOneNearFieldScratch) {
  auto particles = make(12000);
  FMMConfig config;
  config.opening = OpeningCriterion::Relative;
  ASSERT_LT(config.estimate_order, config.order) << "the estimate must run a pass of its own (the test's premise)";
  ForceSolver solver(world, config);
  MemoryAccounting accounting;
  accounting.clear_allocation_log();
  solver.compute(particles);
  int scratch = 0;
  for (auto const& [label, bytes] : accounting.allocation_log())
    if ((label == "kfmm::fmm::p2p::xm" || label == "kfmm::fmm::p2p::first_group") && bytes > 0) ++scratch;
  if (world.size() == 1)
    EXPECT_EQ(scratch, 1) << describe(accounting.allocation_log());
  else
    EXPECT_LE(scratch, 2) << "rank " << world.rank() << describe(accounting.allocation_log());
}

// A first call on particles in generation order (every rank's slice spread over the whole
// volume) moves most of them: the decomposition's exchange buffers (send and receive slots, at
// least 72 B per row) are released after it, and what the call's later exchanges (near-field and
// multipole imports) grow them to stays below that. Before, the buffers kept at least their
// first-call size for the rest of the run (about a hundred bytes per particle).
TEST_F(StepAllocationsTest, AFirstCallOnScatteredParticlesReleasesItsExchangeBuffers) {
  if (world.size() == 1) GTEST_SKIP() << "one rank exchanges nothing";
  auto particles = test::clumps(world, 80000, 5);
  auto const ids_of = [](Particles<MemorySpace> const& p) {
    auto const host = to_host(p);
    std::vector<std::uint64_t> ids(host.id.data(), host.id.data() + host.num);
    std::sort(ids.begin(), ids.end());
    return ids;
  };
  std::vector<std::uint64_t> const before = ids_of(particles);
  release_exchange_buffers();  // earlier tests of this process may have grown them
  MemoryAccounting accounting;
  ForceSolver solver(world, FMMConfig{});
  solver.compute(particles);
  std::uint64_t buffers = 0;
  for (auto const& [label, bytes] : accounting.current_by_label())
    if (label == "kfmm::exchange_plan::buffer") buffers += bytes;
  std::vector<std::uint64_t> const after = ids_of(particles);
  std::vector<std::uint64_t> stayed;
  std::set_intersection(before.begin(), before.end(), after.begin(), after.end(), std::back_inserter(stayed));
  std::size_t const sent = before.size() - stayed.size(), received = after.size() - stayed.size();
  std::uint64_t const decomposition_bytes = 72 * (sent + received);
  std::printf("rank %d of %d: %zu rows sent, %zu received (≥ %llu bytes of buffers), buffers %llu bytes after\n",
              world.rank(), world.size(), sent, received, static_cast<unsigned long long>(decomposition_bytes),
              static_cast<unsigned long long>(buffers));
  EXPECT_GT(sent, before.size() / 4) << "the first call must move most particles (the test's premise)";
  EXPECT_LT(buffers, decomposition_bytes) << "rank " << world.rank();
}

// The expansion pass's multipoles and locals keep room for half as many nodes again, so a node
// count that drifts up by less than that between steps allocates nothing; beyond it they grow.
TEST_F(StepAllocationsTest, ExpansionPassKeepsRoomForDriftingNodeCounts) {
  auto const pass = make_expansion_pass(7, Precision::Float, SofteningKind::Plummer, 0.001);
  MemoryAccounting accounting;
  pass->reserve_nodes(1000);
  accounting.clear_allocation_log();
  pass->reserve_nodes(1000);
  pass->reserve_nodes(1400);
  EXPECT_TRUE(accounting.allocation_log().empty()) << describe(accounting.allocation_log());
  pass->reserve_nodes(3000);
  EXPECT_EQ(accounting.allocation_log().size(), 2u) << describe(accounting.allocation_log());
}

}  // namespace
