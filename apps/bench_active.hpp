#pragma once
// `kfmm bench --active-fraction F`: the cost of ForceSolver::compute_active with a fraction of
// the particles active against a full evaluation, as a block-step integrator calls them.
#include <kfmm/comm/environment.hpp>
#include <kfmm/core/particles.hpp>
#include <kfmm/fmm/config.hpp>

#include <string>

namespace kfmm::app {

struct ActiveBenchOptions {
  double fraction = 0;                ///< of all particles, in (0, 1]
  std::string pick = "acceleration";  ///< "acceleration": the largest |a| (the shortest steps); "random"
  int repeat = 3;
  bool json = false;
};

/// Times, `repeat` times interleaved, a drift of every particle followed by a full evaluation
/// (compute_active with every particle active, which rebuilds the tree and keeps the plan) and
/// a drift followed by compute_active with the picked fraction active; prints the mean seconds
/// of both (slowest rank), their ratio and the active call's phases. Collective.
void bench_active_forces(Environment const& environment, Particles<MemorySpace>& particles, FMMConfig const& config,
                         ActiveBenchOptions const& options, std::string const& source);

}  // namespace kfmm::app
