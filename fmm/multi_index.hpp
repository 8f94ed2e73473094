#pragma once
/// \file
/// \brief Graded layout of 3-D multi-indices n = (a, b, c), |n| = a + b + c ≤ P, the
/// compile-time tables built on it and a compile-time unrolled loop.
///
/// Flat order: by degree d = |n|, then a descending, then b descending. The index of n does not
/// depend on P, so the layout of order P is a prefix of the layout of order P + 1.
#include <kfmm/core/kokkos_compat.hpp>

#include <type_traits>
#include <utility>

/// \brief Put before a loop over the W lanes of a batch so that it is vectorised as it stands:
/// GCC would otherwise unroll the short lane loop completely and then vectorise the loop around
/// it over table entries, with gathers.
/// Not under nvcc, whose front end does not know these pragmas (and GPU threads have no lanes).
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && defined(_OPENMP)
#define KFMM_LANE_LOOP _Pragma("omp simd")
#elif defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define KFMM_LANE_LOOP _Pragma("GCC unroll 1")
#else
#define KFMM_LANE_LOOP
#endif

/// \brief Put after the parameter list of a lambda given to static_for() whose body must be
/// inlined: GCC outlines large unrolled bodies, and then their register accumulators live on
/// the stack. Not in AddressSanitizer builds, which check correctness, not speed: there the
/// forced inlining made the expansion passes build 40 % slower.
#if (defined(__GNUC__) || defined(__clang__)) && !defined(__SANITIZE_ADDRESS__)
#define KFMM_INLINE_LAMBDA __attribute__((always_inline))
#else
#define KFMM_INLINE_LAMBDA
#endif

/// \brief 1 while a device compiler compiles the device side of a translation unit (nvcc's
/// __CUDA_ARCH__ pass, HIP, SYCL): there host constexpr tables cannot be read at run-time
/// indices, and the index accessors below compute their values arithmetically instead.
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__) || defined(__SYCL_DEVICE_ONLY__)
#define KFMM_DEVICE_PASS 1
#else
#define KFMM_DEVICE_PASS 0
#endif

namespace kfmm {

/// \brief Number of coefficients of an expansion of order P: multi-indices with |n| ≤ P.
template <int P>
constexpr int ncoeff = (P + 1) * (P + 2) * (P + 3) / 6;

/// \brief Flat index of the multi-index (a, b, c) in the graded layout.
KOKKOS_INLINE_FUNCTION constexpr int flat_index(int a, int b, int c) {
  int const d = a + b + c;
  return d * (d + 1) * (d + 2) / 6 + (d - a) * (d - a + 1) / 2 + (d - a - b);
}

namespace detail {

constexpr double factorial(int n) { return n <= 1 ? 1.0 : n * factorial(n - 1); }

}  // namespace detail

/// \brief Exponents and recurrence data of every multi-index with |n| ≤ P.
template <int P>
struct MultiIndexTable {
  static constexpr int size = ncoeff<P>;
  int e[size][3] = {};      ///< exponents (a, b, c)
  int degree[size] = {};    ///< |n|
  int parent[size] = {};    ///< n − e_axis (unused for n = 0)
  int axis[size] = {};      ///< first axis with a non-zero exponent
  double inv_exp[size] = {};     ///< 1 / n_axis, so that u^n/n! = u^parent/parent! · u_axis/n_axis
  double inv_factorial[size] = {};  ///< 1 / (a! b! c!)

  constexpr MultiIndexTable() {
    for (int d = 0; d <= P; ++d)
      for (int a = d; a >= 0; --a)
        for (int b = d - a; b >= 0; --b) {
          int const c = d - a - b;
          int const i = flat_index(a, b, c);
          e[i][0] = a;
          e[i][1] = b;
          e[i][2] = c;
          degree[i] = d;
          inv_factorial[i] = 1.0 / (detail::factorial(a) * detail::factorial(b) * detail::factorial(c));
          if (d == 0) continue;
          axis[i] = a > 0 ? 0 : (b > 0 ? 1 : 2);
          parent[i] = flat_index(a - (axis[i] == 0), b - (axis[i] == 1), c - (axis[i] == 2));
          inv_exp[i] = 1.0 / e[i][axis[i]];
        }
  }
};

template <int P>
inline constexpr MultiIndexTable<P> multi_index_table{};

/// \brief Degree |n| of the multi-index with flat index i, by arithmetic (device-safe).
KOKKOS_INLINE_FUNCTION constexpr int degree_of(int i) {
  int d = 0;
  while ((d + 1) * (d + 2) * (d + 3) / 6 <= i) ++d;
  return d;
}

/// \brief Exponents (a, b, c) of the multi-index with flat index i, by arithmetic (device-safe):
/// the inverse of flat_index().
KOKKOS_INLINE_FUNCTION constexpr void exponents_of(int i, int& a, int& b, int& c) {
  int const d = degree_of(i);
  int const r = i - d * (d + 1) * (d + 2) / 6;  // (d − a)(d − a + 1)/2 + c
  int t = 0;                                    // t = d − a = b + c
  while ((t + 1) * (t + 2) / 2 <= r) ++t;
  c = r - t * (t + 1) / 2;
  b = t - c;
  a = d - t;
}

/// \brief 1 / (a! b! c!) as multi_index_table's inv_factorial (same double operations).
KOKKOS_INLINE_FUNCTION constexpr double inv_factorial_of(int a, int b, int c) {
  double fa = 1.0, fb = 1.0, fc = 1.0;
  for (int q = 2; q <= a; ++q) fa = q * fa;
  for (int q = 2; q <= b; ++q) fb = q * fb;
  for (int q = 2; q <= c; ++q) fc = q * fc;
  return 1.0 / (fa * fb * fc);
}

namespace detail {
/// Entries of multi_index_table<P> at a run-time index i: the table on the host (the CPU lane
/// loops compile exactly as before), arithmetic in a device pass (see KFMM_DEVICE_PASS).
template <int P>
KOKKOS_INLINE_FUNCTION int table_degree(int i) {
#if KFMM_DEVICE_PASS
  return degree_of(i);
#else
  return multi_index_table<P>.degree[i];
#endif
}

template <int P>
KOKKOS_INLINE_FUNCTION int table_axis(int i) {
#if KFMM_DEVICE_PASS
  int a = 0, b = 0, c = 0;
  exponents_of(i, a, b, c);
  return a > 0 ? 0 : (b > 0 ? 1 : 2);
#else
  return multi_index_table<P>.axis[i];
#endif
}

template <int P>
KOKKOS_INLINE_FUNCTION int table_parent(int i) {
#if KFMM_DEVICE_PASS
  int a = 0, b = 0, c = 0;
  exponents_of(i, a, b, c);
  return a > 0 ? flat_index(a - 1, b, c) : (b > 0 ? flat_index(a, b - 1, c) : flat_index(a, b, c - 1));
#else
  return multi_index_table<P>.parent[i];
#endif
}

template <int P>
KOKKOS_INLINE_FUNCTION double table_inv_exp(int i) {
#if KFMM_DEVICE_PASS
  int a = 0, b = 0, c = 0;
  exponents_of(i, a, b, c);
  return 1.0 / (a > 0 ? a : (b > 0 ? b : c));
#else
  return multi_index_table<P>.inv_exp[i];
#endif
}

template <int P>
KOKKOS_INLINE_FUNCTION double table_inv_factorial(int i) {
#if KFMM_DEVICE_PASS
  int a = 0, b = 0, c = 0;
  exponents_of(i, a, b, c);
  return inv_factorial_of(a, b, c);
#else
  return multi_index_table<P>.inv_factorial[i];
#endif
}
}  // namespace detail

/// \brief The two products of coefficient arrays the translations are made of.
/// Contraction (M2L, L2L): out_k = Σ_{|n| ≤ P−|k|} X_n Y_{k+n}.
/// Convolution (M2M): out_s = Σ_{k ≤ s componentwise} X_k Y_{s−k}.
enum class BlockProduct { contraction, convolution };

namespace detail {
// Whether output `out` takes operand X_x, and the index y of its partner Y_y.
template <int P>
constexpr bool block_entry(BlockProduct kind, int out, int x, int& y) {
  auto const& t = multi_index_table<P>;
  int e[3] = {};
  for (int a = 0; a < 3; ++a) {
    e[a] = kind == BlockProduct::contraction ? t.e[out][a] + t.e[x][a] : t.e[out][a] - t.e[x][a];
    if (e[a] < 0) return false;
  }
  if (e[0] + e[1] + e[2] > P) return false;
  y = flat_index(e[0], e[1], e[2]);
  return true;
}

template <int P>
constexpr int block_size(BlockProduct kind, int first, int count) {
  int size = 0, y = 0;
  for (int x = 0; x < ncoeff<P>; ++x)
    for (int j = 0; j < count; ++j) size += block_entry<P>(kind, first + j, x, y);
  return size;
}
}  // namespace detail

/// \brief The products a block of `count` consecutive outputs first … first + count − 1 takes:
/// entry i adds X_{x[i]} Y_{y[i]} to output first + j[i]. Ordered by x, so that each X_x is
/// loaded once for the whole block, and the block's outputs are independent accumulators.
template <int P, BlockProduct kind, int first, int count>
struct BlockTable {
  static constexpr int size = detail::block_size<P>(kind, first, count);
  int j[size] = {};
  int x[size] = {};
  int y[size] = {};

  constexpr BlockTable() {
    int i = 0, partner = 0;
    for (int xi = 0; xi < ncoeff<P>; ++xi)
      for (int ji = 0; ji < count; ++ji)
        if (detail::block_entry<P>(kind, first + ji, xi, partner)) {
          j[i] = ji;
          x[i] = xi;
          y[i] = partner;
          ++i;
        }
  }
};

template <int P, BlockProduct kind, int first, int count>
inline constexpr BlockTable<P, kind, first, count> block_table{};

/// \brief Calls f(std::integral_constant<int, I>{}) for I = 0 … N−1, unrolled at compile time,
/// so that every array index inside f is a constant and small arrays stay in registers.
namespace detail {
template <class F, int... I>
KOKKOS_FORCEINLINE_FUNCTION void static_for_impl(F& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}
}  // namespace detail

template <int N, class F>
KOKKOS_FORCEINLINE_FUNCTION void static_for(F&& f) {
  detail::static_for_impl(f, std::make_integer_sequence<int, N>{});
}

/// \brief u^n / n! (with_factorial) or u^n for every |n| ≤ P, by one multiplication each.
template <int P, bool with_factorial, class Real>
KOKKOS_FORCEINLINE_FUNCTION void monomials(Real ux, Real uy, Real uz, Real* w) {
  Real const u[3] = {ux, uy, uz};
  w[0] = Real(1);
  static_for<ncoeff<P> - 1>([&](auto J) {
    constexpr int i = decltype(J)::value + 1;
    constexpr int parent = multi_index_table<P>.parent[i];
    constexpr int axis = multi_index_table<P>.axis[i];
    if constexpr (with_factorial) {
      constexpr double inv = multi_index_table<P>.inv_exp[i];
      w[i] = w[parent] * (u[axis] * Real(inv));
    } else {
      w[i] = w[parent] * u[axis];
    }
  });
}

/// \brief monomials() for W independent points at once (lanes): u[n·W + w] = u_w^n (/ n!).
/// Plain loops over the index table, the lane loop innermost so that it vectorises.
template <int P, bool with_factorial, class Real, int W>
KOKKOS_INLINE_FUNCTION void monomials_lanes(Real const* ux, Real const* uy, Real const* uz, Real* w) {
  KFMM_LANE_LOOP
  for (int l = 0; l < W; ++l) w[l] = Real(1);
  for (int i = 1; i < ncoeff<P>; ++i) {
    int const axis = detail::table_axis<P>(i);
    Real const* u = axis == 0 ? ux : (axis == 1 ? uy : uz);
    Real const* parent = w + detail::table_parent<P>(i) * W;
    Real* out = w + i * W;
    if constexpr (with_factorial) {
      Real const inv = Real(detail::table_inv_exp<P>(i));
      KFMM_LANE_LOOP
      for (int l = 0; l < W; ++l) out[l] = parent[l] * (u[l] * inv);
    } else {
      KFMM_LANE_LOOP
      for (int l = 0; l < W; ++l) out[l] = parent[l] * u[l];
    }
  }
}

/// \brief q^0 … q^P.
template <int P, class Real>
KOKKOS_FORCEINLINE_FUNCTION void powers(Real q, Real* out) {
  out[0] = Real(1);
  for (int d = 1; d <= P; ++d) out[d] = out[d - 1] * q;
}

}  // namespace kfmm
