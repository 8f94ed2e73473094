#pragma once
/// \file
/// \brief What one force evaluation cost: per-phase times, interaction counts, communication.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kfmm {

/// \brief Figures of the last ForceSolver call. Times in seconds (this rank); counts global
/// unless named `local_`.
struct ForceStats {
  /// (phase name, seconds) in execution order: "domain", "keys", "sort", "tree", "upward",
  /// "exchange", "walk", "m2l", "downward", "p2p", "m2p", "output".
  std::vector<std::pair<std::string, double>> phases;
  double total_seconds = 0;

  std::uint64_t p2p_pairs = 0;       ///< particle–particle interactions
  std::uint64_t m2l = 0;             ///< node–node (M2L) interactions
  std::uint64_t m2p = 0;             ///< node–particle (M2P) interactions
  std::uint64_t nodes = 0;           ///< nodes of the global tree
  std::uint64_t leaves = 0;

  // Distributed figures (all ranks' min / mean / max where it says so).
  std::uint64_t particles_min = 0, particles_max = 0;
  double particles_mean = 0;
  double cost_imbalance = 1;         ///< max / mean of the measured per-rank cost
  bool domains_kept = false;         ///< the previous domains were kept (FMMConfig::domain_tolerance)
  bool tree_refitted = false;        ///< compute_active refitted the last full call's tree (FMMConfig::rebuild_factor)
  std::uint64_t bytes_sent = 0, bytes_received = 0;        ///< this rank
  std::uint64_t bytes_sent_max = 0, bytes_received_max = 0;  ///< over ranks
  std::uint64_t imported_nodes = 0, imported_particles = 0;  ///< this rank
  /// Array bytes this rank copied between host and device memory in the call, counted on every
  /// backend: what a GPU build without GPU-aware MPI moves (core/host_device_bytes.hpp).
  std::uint64_t host_device_bytes = 0;

  double seconds(std::string const& phase) const {
    for (auto const& [name, t] : phases)
      if (name == phase) return t;
    return 0;
  }
};

}  // namespace kfmm
