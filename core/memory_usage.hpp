#pragma once
/// \file
/// \brief Current and peak bytes of Kokkos allocations (Views, kokkos_malloc, Kokkos' own
/// scratch) per memory space, counted through Kokkos' allocate/deallocate data callbacks.
///
/// `kfmm bench` uses it to report the memory per particle that sizes a run on a GPU. Host-side
/// code only: the callbacks run on the host, where Kokkos allocates.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kfmm {

/// Bytes of one memory space, as Kokkos names it ("Host", "Cuda", "CudaHostPinned", ...).
struct MemorySpaceUsage {
  std::string space;
  std::uint64_t current_bytes = 0;  ///< allocated now (and counted)
  std::uint64_t peak_bytes = 0;     ///< largest current_bytes since start or reset_peak()
  std::uint64_t allocations = 0;    ///< allocations counted since start
};

/// \brief While alive, counts every Kokkos allocation and deallocation (requires
/// Kokkos::initialize first; at most one instance at a time).
///
/// Sizes are what Kokkos reports to tools: the logical bytes of a View, without Kokkos'
/// allocation header. Memory freed while accounting is on but allocated before it started is
/// not subtracted (each allocation is matched by its address), so the counts never go negative.
///
/// Kokkos Tools: a tool library loaded through KOKKOS_TOOLS_LIBS (Kokkos ≥ 4) or
/// KOKKOS_PROFILE_LIBRARY (3.x) has installed its callbacks in Kokkos::initialize. They are
/// kept: this class's callbacks call the tool's after counting, so the tool sees every event it
/// would have seen, and the destructor puts the tool's callbacks back. tool_chained() says
/// whether that happened. Installing callbacks makes Kokkos believe a tool is loaded, which
/// adds a few function calls per kernel launch (no fences).
class MemoryAccounting {
 public:
  /// Starts counting; throws kfmm::Error when Kokkos is not initialised or another
  /// MemoryAccounting is active.
  MemoryAccounting();
  /// Stops counting and restores the callbacks that were installed before.
  ~MemoryAccounting();
  MemoryAccounting(MemoryAccounting const&) = delete;
  MemoryAccounting& operator=(MemoryAccounting const&) = delete;

  /// Per memory space, ordered by name; spaces appear once something was allocated in them.
  std::vector<MemorySpaceUsage> usage() const;
  /// Usage of one space (all zero when nothing was allocated there).
  MemorySpaceUsage usage(std::string const& space) const;
  /// Sum over spaces of current bytes.
  std::uint64_t current_bytes() const;
  /// Largest sum over spaces of current bytes (not the sum of the per-space peaks).
  std::uint64_t peak_bytes() const;
  /// Sets every peak to the current value: the next peak is measured from here.
  void reset_peak();
  /// Bytes allocated now per allocation label (Views of one name add up), largest first.
  std::vector<std::pair<std::string, std::uint64_t>> current_by_label() const;
  /// Whether a Kokkos Tools library's allocation callbacks were installed and are still called.
  bool tool_chained() const;
  /// \brief Every allocation (label, bytes) counted since the start or the last
  /// clear_allocation_log(), in the order Kokkos made them: shows what a step allocates.
  std::vector<std::pair<std::string, std::uint64_t>> allocation_log() const;
  void clear_allocation_log();
};

}  // namespace kfmm
