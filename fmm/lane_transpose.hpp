#pragma once
/// \file
/// \brief Moving W source rows into lanes: out[n·W + l] = rows[l][n] for n < N, l < count,
/// and 0 for the idle lanes l ≥ count. M2L calls it for every batch of 16 sources; as plain
/// element copies it was two thirds of M2L's time on AVX-512 CPUs (1344 scalar stores per
/// batch at p = 6; gathers were no faster), so float × 16 lanes has an in-register 16 × 16
/// transpose there. The result is the same bits either way: it only moves values.
#include <kfmm/core/kokkos_compat.hpp>

#include <type_traits>

#if defined(__AVX512F__) && !defined(__CUDA_ARCH__) && \
    !defined(__HIP_DEVICE_COMPILE__) && !defined(__SYCL_DEVICE_ONLY__)
#define KFMM_LANE_TRANSPOSE_AVX512 1
#include <immintrin.h>
#endif

namespace kfmm {

/// Element by element: any Real, any W, any backend.
template <int N, int W, class Real>
KOKKOS_INLINE_FUNCTION void transpose_to_lanes_portable(int count, Real const* const* rows, Real* out) {
  for (int l = 0; l < W; ++l)
    for (int n = 0; n < N; ++n) out[n * W + l] = l < count ? rows[l][n] : Real(0);
}

#ifdef KFMM_LANE_TRANSPOSE_AVX512
/// 16 rows of 16 floats (v[l] = row l) into 16 columns (v[n] = element n of every row), in
/// four rounds of two-register shuffles.
inline void transpose_16x16(__m512 v[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {  // interleave 32-bit elements of row pairs
    t[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
  }
  for (int i = 0; i < 16; i += 4)  // then 64-bit pairs of rows 4 apart
    for (int j = 0; j < 2; ++j) {
      __m512d const a = _mm512_castps_pd(t[i + j]), b = _mm512_castps_pd(t[i + j + 2]);
      v[i + j] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
      v[i + j + 2] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    }
  for (int i = 0; i < 16; i += 8)  // then 128-bit blocks of rows 4 apart
    for (int j = 0; j < 4; ++j) {
      t[i + j] = _mm512_shuffle_f32x4(v[i + j], v[i + j + 4], 0x88);
      t[i + j + 4] = _mm512_shuffle_f32x4(v[i + j], v[i + j + 4], 0xdd);
    }
  for (int j = 0; j < 8; ++j) {  // then 128-bit blocks of rows 8 apart
    v[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
    v[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd);
  }
}

/// Output order of transpose_16x16: register k holds column transposed_column[k].
inline constexpr int transposed_column[16] = {0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15};
#endif

/// \brief out[n·W + l] = rows[l][n] (n < N, l < count), 0 in idle lanes; `rows` holds count
/// valid pointers to N contiguous values each.
template <int N, int W, class Real>
KOKKOS_INLINE_FUNCTION void transpose_to_lanes(int count, Real const* const* rows, Real* out) {
#ifdef KFMM_LANE_TRANSPOSE_AVX512
  if constexpr (std::is_same<Real, float>::value && W == 16) {
    for (int first = 0; first < N; first += 16) {
      int const width = N - first < 16 ? N - first : 16;
      __mmask16 const mask = static_cast<__mmask16>((1u << width) - 1u);
      __m512 v[16];
      for (int l = 0; l < 16; ++l)
        v[l] = l >= count    ? _mm512_setzero_ps()
               : width == 16 ? _mm512_loadu_ps(rows[l] + first)
                             : _mm512_maskz_loadu_ps(mask, rows[l] + first);
      transpose_16x16(v);
      for (int k = 0; k < 16; ++k) {
        int const n = first + transposed_column[k];
        if (n < N) _mm512_storeu_ps(out + n * 16, v[k]);
      }
    }
    return;
  }
#endif
  transpose_to_lanes_portable<N, W>(count, rows, out);
}

}  // namespace kfmm
