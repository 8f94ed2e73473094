#include <kfmm/core/error.hpp>
#include <kfmm/core/memory_usage.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace kfmm {

namespace {

using AllocateCallback = Kokkos_Profiling_allocateDataFunction;
using DeallocateCallback = Kokkos_Profiling_deallocateDataFunction;

struct Allocation {
  std::size_t space;
  std::uint64_t bytes;
  std::string label;
};

// Kokkos' callbacks are plain function pointers without user data, so the counters are global;
// MemoryAccounting allows one instance at a time. Kokkos may allocate from several host
// threads, hence the mutex (allocations are rare next to kernel work).
struct State {
  std::mutex mutex;
  bool active = false;
  AllocateCallback tool_allocate = nullptr;  // callbacks installed before ours (a tool's)
  DeallocateCallback tool_deallocate = nullptr;
  std::vector<MemorySpaceUsage> spaces;
  std::unordered_map<void const*, Allocation> live;
  std::vector<std::pair<std::string, std::uint64_t>> log;  // (label, bytes) per counted allocation
  std::uint64_t current = 0, peak = 0;
};

State& state() {
  static State s;
  return s;
}

std::size_t space_index(State& s, char const* name) {
  std::string const space(name, strnlen(name, sizeof(Kokkos_Profiling_SpaceHandle::name)));
  for (std::size_t i = 0; i < s.spaces.size(); ++i)
    if (s.spaces[i].space == space) return i;
  s.spaces.push_back(MemorySpaceUsage{space, 0, 0, 0});
  return s.spaces.size() - 1;
}

void on_allocate(Kokkos_Profiling_SpaceHandle const handle, char const* label, void const* ptr,
                 std::uint64_t const bytes) {
  State& s = state();
  AllocateCallback tool = nullptr;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    tool = s.tool_allocate;
    if (s.active && ptr != nullptr) {
      std::size_t const index = space_index(s, handle.name);
      auto [it, inserted] = s.live.emplace(ptr, Allocation{index, bytes, label != nullptr ? label : ""});
      if (inserted) {
        MemorySpaceUsage& space = s.spaces[index];
        space.current_bytes += bytes;
        space.peak_bytes = std::max(space.peak_bytes, space.current_bytes);
        ++space.allocations;
        s.log.emplace_back(it->second.label, bytes);
        s.current += bytes;
        s.peak = std::max(s.peak, s.current);
      }
    }
  }
  if (tool != nullptr) tool(handle, label, ptr, bytes);
}

void on_deallocate(Kokkos_Profiling_SpaceHandle const handle, char const* label, void const* ptr,
                   std::uint64_t const bytes) {
  State& s = state();
  DeallocateCallback tool = nullptr;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    tool = s.tool_deallocate;
    auto const it = s.live.find(ptr);
    if (it != s.live.end()) {  // allocations from before the start are not counted
      s.spaces[it->second.space].current_bytes -= it->second.bytes;
      s.current -= it->second.bytes;
      s.live.erase(it);
    }
  }
  if (tool != nullptr) tool(handle, label, ptr, bytes);
}

}  // namespace

MemoryAccounting::MemoryAccounting() {
  if (!Kokkos::is_initialized())
    fail("MemoryAccounting needs an initialised Kokkos (a tool library loaded by Kokkos::initialize would "
         "replace its callbacks): create it after kfmm::Environment");
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.active) fail("only one MemoryAccounting may be active at a time; destroy the other one first");
  auto const callbacks = Kokkos::Tools::Experimental::get_callbacks();
  s.tool_allocate = callbacks.allocate_data;
  s.tool_deallocate = callbacks.deallocate_data;
  s.spaces.clear();
  s.live.clear();
  s.log.clear();
  s.current = s.peak = 0;
  s.active = true;
  Kokkos::Tools::Experimental::set_allocate_data_callback(on_allocate);
  Kokkos::Tools::Experimental::set_deallocate_data_callback(on_deallocate);
}

MemoryAccounting::~MemoryAccounting() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.active = false;
  s.live.clear();
  // Put the previous callbacks back unless someone replaced ours meanwhile (then ours keep
  // forwarding to the tool, counting nothing).
  auto const callbacks = Kokkos::Tools::Experimental::get_callbacks();
  if (callbacks.allocate_data == &on_allocate)
    Kokkos::Tools::Experimental::set_allocate_data_callback(s.tool_allocate);
  if (callbacks.deallocate_data == &on_deallocate)
    Kokkos::Tools::Experimental::set_deallocate_data_callback(s.tool_deallocate);
}

std::vector<MemorySpaceUsage> MemoryAccounting::usage() const {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto spaces = s.spaces;
  std::sort(spaces.begin(), spaces.end(),
            [](MemorySpaceUsage const& a, MemorySpaceUsage const& b) { return a.space < b.space; });
  return spaces;
}

MemorySpaceUsage MemoryAccounting::usage(std::string const& space) const {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  for (auto const& entry : s.spaces)
    if (entry.space == space) return entry;
  return MemorySpaceUsage{space, 0, 0, 0};
}

std::uint64_t MemoryAccounting::current_bytes() const {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.current;
}

std::uint64_t MemoryAccounting::peak_bytes() const {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.peak;
}

void MemoryAccounting::reset_peak() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  for (auto& space : s.spaces) space.peak_bytes = space.current_bytes;
  s.peak = s.current;
}

std::vector<std::pair<std::string, std::uint64_t>> MemoryAccounting::current_by_label() const {
  State& s = state();
  std::unordered_map<std::string, std::uint64_t> bytes;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    for (auto const& entry : s.live) bytes[entry.second.label] += entry.second.bytes;
  }
  std::vector<std::pair<std::string, std::uint64_t>> labels(bytes.begin(), bytes.end());
  std::sort(labels.begin(), labels.end(),
            [](auto const& a, auto const& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
  return labels;
}

std::vector<std::pair<std::string, std::uint64_t>> MemoryAccounting::allocation_log() const {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.log;
}

void MemoryAccounting::clear_allocation_log() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.log.clear();
}

bool MemoryAccounting::tool_chained() const {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.tool_allocate != nullptr || s.tool_deallocate != nullptr;
}

}  // namespace kfmm
