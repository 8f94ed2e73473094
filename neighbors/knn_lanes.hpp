#pragma once
/// \file
/// \brief The CPU shape of the kNN scan (core/kernel_shape.hpp): eight queries side by side in
/// the lanes of AVX-512 registers, each candidate point broadcast to all of them and inserted
/// into every lane's sorted list at once by a compare-exchange sweep over its K slots (no
/// branch per slot, no insertion loop per query). The GPU shape (one query per thread,
/// neighbors/knn.cpp) is what CPUs without AVX-512 run.
///
/// A lane's list is right-aligned: its first K − k slots hold −1, which every candidate passes,
/// so slot K − 1 is the k-th neighbour whatever k ≤ K (a register, not an index).
#include <kfmm/core/types.hpp>

#include <cfloat>
#include <cstdint>

#if defined(__AVX512F__) && !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__) && \
    !defined(__SYCL_DEVICE_ONLY__)
#define KFMM_KNN_AVX512 1
#include <immintrin.h>
#endif

namespace kfmm::detail {

/// Queries side by side in the CPU shape (doubles in an AVX-512 register).
inline constexpr int knn_lanes = 8;

#ifdef KFMM_KNN_AVX512

/// \brief One block of knn_lanes queries scans the source leaves of a batch. `d2`, `id`, `mass`:
/// the block's lists, slot j of lane l at [j * stride + l] (right-aligned, inactive lanes all
/// −1); `x`: the queries' positions (inactive lanes a copy of an active one); `active`: lanes
/// holding a query; `first_query`: index of lane 0's query in the source's order when
/// `skip_same_index` (a query never lists itself). A leaf is scanned when its gap to a lane is
/// within that lane's k-th distance (times `slack`); returns the largest k-th distance² of the
/// active lanes afterwards. Distances and gaps are computed as the GPU shape computes them (same
/// operations and contractions), so both shapes find the same lists.
template <int K, bool CarryMass, class Pos, class Ids, class Masses, class TreeT, class Boxes, class Batch>
inline double knn_scan_lanes(double* d2, std::uint64_t* id, double* mass, int stride, double const (&x)[3][knn_lanes],
                             __mmask8 active, int first_query, bool skip_same_index, bool periodic,
                             Kokkos::Array<double, 3> const& length, double slack, Pos const& pos, Ids const& ids,
                             Masses const& masses, TreeT const& tree, Boxes const& box, Batch const& batch,
                             int batched) {
  __m512d list[K];
  __m512i list_id[K];
  __m512d list_mass[CarryMass ? K : 1];
  for (int j = 0; j < K; ++j) {
    list[j] = _mm512_loadu_pd(d2 + j * stride);
    list_id[j] = _mm512_loadu_si512(id + j * stride);
    if constexpr (CarryMass) list_mass[j] = _mm512_loadu_pd(mass + j * stride);
  }
  __m512d const zero = _mm512_setzero_pd();
  __m512d const largest = _mm512_set1_pd(DBL_MAX);
  __m512i const no_id = _mm512_set1_epi64(-1);
  __m512d q[3], len[3];
  for (int a = 0; a < 3; ++a) {
    q[a] = _mm512_loadu_pd(x[a]);
    len[a] = _mm512_set1_pd(length[a]);
  }
  __m512i const lane_query = _mm512_add_epi64(_mm512_set1_epi64(first_query), _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0));
  // The per-axis separation the GPU shape's interval_gap computes (the smallest over images
  // when periodic).
  auto const gap = [&](__m512d xq, double lo, double hi, __m512d l) {
    auto const open = [&](__m512d xs) {
      __m512d const above = _mm512_sub_pd(_mm512_set1_pd(lo), xs), below = _mm512_sub_pd(xs, _mm512_set1_pd(hi));
      __m512d const g = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(above, below, _CMP_GT_OQ), below, above);
      return _mm512_mask_blend_pd(_mm512_cmp_pd_mask(g, zero, _CMP_GT_OQ), zero, g);
    };
    __m512d g = open(xq);
    if (periodic) {
      __m512d const up = open(_mm512_add_pd(xq, l)), down = open(_mm512_sub_pd(xq, l));
      g = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(up, g, _CMP_LT_OQ), g, up);
      g = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(down, g, _CMP_LT_OQ), g, down);
    }
    return g;
  };
  for (int b = 0; b < batched; ++b) {
    __m512d g2 = _mm512_setzero_pd();
    for (int a = 0; a < 3; ++a) {
      __m512d const g = gap(q[a], box(a, b), box(3 + a, b), len[a]);
      g2 = _mm512_fmadd_pd(g, g, g2);
    }
    __m512d const bound = _mm512_mul_pd(list[K - 1], _mm512_set1_pd(slack));
    if (!(_mm512_cmp_pd_mask(g2, bound, _CMP_LE_OQ) & active)) continue;
    int const node = batch(b);
    int const pb = tree.particle_begin(node), pe = tree.particle_end(node);
    for (int i = pb; i < pe; ++i) {
      __m512d d = _mm512_setzero_pd();
      for (int a = 0; a < 3; ++a) {
        __m512d g = _mm512_sub_pd(q[a], _mm512_set1_pd(pos(i, a)));
        if (periodic) {
          __m512d const abs = _mm512_abs_pd(g), image = _mm512_sub_pd(len[a], abs);
          g = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(abs, image, _CMP_LT_OQ), image, abs);
        }
        d = _mm512_fmadd_pd(g, g, d);
      }
      // Far beyond the range of doubles counts as DBL_MAX (as in the GPU shape).
      d = _mm512_min_pd(d, largest);
      // Most candidates are farther than every lane's k-th: one comparison rejects them
      // before the query itself and ties by id are looked at.
      if (!_mm512_cmp_pd_mask(d, list[K - 1], _CMP_LE_OQ)) continue;
      __m512i c = _mm512_set1_epi64(static_cast<long long>(ids(i)));
      if (skip_same_index) {
        __mmask8 const self = _mm512_cmpeq_epi64_mask(lane_query, _mm512_set1_epi64(i));
        d = _mm512_mask_blend_pd(self, d, largest);
        c = _mm512_mask_blend_epi64(self, c, no_id);  // (DBL_MAX, no id) beats no slot
      }
      auto const beats = [&](__m512d dl, __m512i il) {
        __mmask8 const tie = _mm512_cmp_pd_mask(d, dl, _CMP_EQ_OQ);
        return static_cast<__mmask8>(_mm512_cmp_pd_mask(d, dl, _CMP_LT_OQ) | _mm512_mask_cmplt_epu64_mask(tie, c, il));
      };
      if (!beats(list[K - 1], list_id[K - 1])) continue;
      __m512d cm = CarryMass ? _mm512_set1_pd(masses(i)) : zero;
      // Slot j takes the candidate where it beats slot j but not slot j − 1, and slot j − 1's
      // entry where it beats both (a list is sorted, so the slots it beats are a suffix): every
      // slot from the list as it was, no chain of dependent steps from slot to slot.
      __mmask8 beaten[K];
      for (int j = 0; j < K; ++j) beaten[j] = beats(list[j], list_id[j]);
      for (int j = K - 1; j > 0; --j) {
        list[j] = _mm512_mask_blend_pd(beaten[j], list[j], _mm512_mask_blend_pd(beaten[j - 1], d, list[j - 1]));
        list_id[j] =
            _mm512_mask_blend_epi64(beaten[j], list_id[j], _mm512_mask_blend_epi64(beaten[j - 1], c, list_id[j - 1]));
        if constexpr (CarryMass)
          list_mass[j] =
              _mm512_mask_blend_pd(beaten[j], list_mass[j], _mm512_mask_blend_pd(beaten[j - 1], cm, list_mass[j - 1]));
      }
      list[0] = _mm512_mask_blend_pd(beaten[0], list[0], d);
      list_id[0] = _mm512_mask_blend_epi64(beaten[0], list_id[0], c);
      if constexpr (CarryMass) list_mass[0] = _mm512_mask_blend_pd(beaten[0], list_mass[0], cm);
    }
  }
  for (int j = 0; j < K; ++j) {
    _mm512_storeu_pd(d2 + j * stride, list[j]);
    _mm512_storeu_si512(id + j * stride, list_id[j]);
    if constexpr (CarryMass) _mm512_storeu_pd(mass + j * stride, list_mass[j]);
  }
  return _mm512_mask_reduce_max_pd(active, list[K - 1]);
}

#endif

}  // namespace kfmm::detail
