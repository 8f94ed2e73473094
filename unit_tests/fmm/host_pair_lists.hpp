#pragma once
// A walk's pair lists copied to the host, for tests that compare lists entry by entry.
#include <kfmm/fmm/dual_tree_walk.hpp>

#include <vector>

namespace kfmm_test {

struct HostLists {
  std::vector<int> target, offset, source, segment_begin;
  bool operator==(HostLists const& other) const {
    return target == other.target && offset == other.offset && source == other.source &&
           segment_begin == other.segment_begin;
  }
};

inline HostLists to_host(kfmm::PairLists const& lists) {
  auto const target = Kokkos::create_mirror_view_and_copy(kfmm::HostSpace(), lists.target);
  auto const offset = Kokkos::create_mirror_view_and_copy(kfmm::HostSpace(), lists.offset);
  auto const source = Kokkos::create_mirror_view_and_copy(kfmm::HostSpace(), lists.source);
  HostLists h;
  h.target.assign(target.data(), target.data() + lists.num_groups);
  h.offset.assign(offset.data(), offset.data() + lists.num_groups + 1);
  h.source.assign(source.data(), source.data() + lists.num_entries);
  h.segment_begin = lists.segment_begin;
  return h;
}

}  // namespace kfmm_test
