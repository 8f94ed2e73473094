// The decomposition repeated every step (sample sort, destinations, the particles' exchange)
// allocates nothing once its Views are sized: counted through Kokkos' allocation callbacks
// over steps whose keys drift a little, as a simulation's do.
#include <kfmm/comm/decomposition.hpp>
#include <kfmm/core/memory_usage.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

using kfmm::Context;
using Memory = kfmm::MemorySpace;
using Log = std::vector<std::pair<std::string, std::uint64_t>>;

// Allocations that belong to another part: the growth of the particles' capacity
// (Particles::reserve grows by an eighth when a rank receives more than it holds, so it settles
// after a few steps but is not bounded by a fixed count). The plans' export orders are counted:
// they are lent from export_order_pool().
bool counted(std::string const& label) { return label.rfind("kfmm::particles::", 0) != 0; }

class DecompositionAllocationsTest : public testing::Test {
 protected:
  Context context;
  int rank = context.rank();
  int ranks = context.size();
};

TEST_F(DecompositionAllocationsTest, RepeatedStepsAllocateNothingAfterTheFirst) {
  std::size_t const n = 6000;
  std::mt19937_64 random(1234 + rank);
  // Keys are the particles' ids, so that the keys after an exchange are those of the particles
  // received; positions carry the key too, to check that the fields travel together.
  std::vector<std::uint64_t> keys(n);
  for (auto& key : keys) key = (random() >> 20) + 1000000;  // drifts stay positive
  std::sort(keys.begin(), keys.end());
  kfmm::Particles<kfmm::HostSpace> host(n);
  host.num = n;
  std::uint64_t total = n * std::uint64_t(ranks);
  host.num_total = total;
  for (std::size_t i = 0; i < n; ++i) {
    host.id(i) = keys[i];
    for (int k = 0; k < 3; ++k) host.pos(i, k) = double(keys[i] % 1000003) + k, host.vel(i, k) = 0;
    host.mass(i) = 1;
  }
  auto particles = kfmm::to_device<Memory>(host);
  Kokkos::View<double*, Memory> weights("weights", 4 * n);
  auto weights_host = Kokkos::create_mirror_view(weights);
  auto ids_host = Kokkos::create_mirror_view(particles.id);

  kfmm::MemoryAccounting accounting;
  {  // The counting works (the first step may allocate nothing: earlier tests of this process
     // can have sized the session's scratch and left free export orders in the pool).
    Kokkos::View<int*, Memory> canary("kfmm::test::canary", 1);
    ASSERT_FALSE(accounting.allocation_log().empty()) << "the allocation callbacks count nothing";
  }
  int const steps = 6, sizing = 2;
  std::vector<std::size_t> per_step;
  for (int step = 0; step < steps; ++step) {
    std::size_t const here = particles.num;
    Kokkos::View<std::uint64_t const*, Memory> const step_keys = particles.id;
    Kokkos::View<double const*, Memory> const step_weights = weights;
    accounting.clear_allocation_log();
    {
      auto const splitters = kfmm::choose_splitters(kfmm::ExecutionSpace(), context, step_keys, here, step_weights);
      auto const destinations = kfmm::destination_ranks(kfmm::ExecutionSpace(), step_keys, here, splitters);
      kfmm::ExchangePlan<Memory> plan;
      kfmm::redistribute(context, particles, Kokkos::View<int const*, Memory>(destinations), &plan);
    }
    Log const log = accounting.allocation_log();
    std::size_t count = 0;
    std::string text;
    for (auto const& [label, bytes] : log) {
      if (counted(label)) ++count;
      text += "\n  " + label + " (" + std::to_string(bytes) + " bytes)" + (counted(label) ? "" : " [not counted]");
    }
    per_step.push_back(count);
    if (step >= sizing) EXPECT_EQ(count, 0u) << "step " << step << " on rank " << rank << " allocated:" << text;
    if (step + 1 == steps) std::cout << "rank " << rank << ", last step's allocations:" << (text.empty() ? " none" : text) << "\n";

    // Drift: keys move a little (some cross into a neighbour's domain), stay sorted on each
    // rank as the solver leaves them, and the weights change.
    if (ids_host.extent(0) < particles.id.extent(0)) ids_host = Kokkos::create_mirror_view(particles.id);
    Kokkos::deep_copy(Kokkos::subview(ids_host, Kokkos::make_pair(std::size_t(0), particles.num)),
                      Kokkos::subview(particles.id, Kokkos::make_pair(std::size_t(0), particles.num)));
    std::vector<std::uint64_t> moved(ids_host.data(), ids_host.data() + particles.num);
    for (auto& key : moved) key += (random() % 2001) * 64 - 64000;
    std::sort(moved.begin(), moved.end());
    ASSERT_LE(moved.size(), weights_host.extent(0));
    for (std::size_t i = 0; i < moved.size(); ++i) {
      ids_host(i) = moved[i];
      weights_host(i) = 1.0 + double(moved[i] % 7) + step;
    }
    Kokkos::deep_copy(Kokkos::subview(particles.id, Kokkos::make_pair(std::size_t(0), moved.size())),
                      Kokkos::subview(ids_host, Kokkos::make_pair(std::size_t(0), moved.size())));
    Kokkos::deep_copy(weights, weights_host);
  }
  std::uint64_t held = particles.num, all = 0;
  MPI_Allreduce(&held, &all, 1, MPI_UINT64_T, MPI_SUM, context.comm());
  EXPECT_EQ(all, total);
  std::string counts;
  for (std::size_t c : per_step) counts += " " + std::to_string(c);
  std::cout << "rank " << rank << ": decomposition allocations per step:" << counts << "\n";
}

}  // namespace
