#pragma once
/// \file
/// \brief fmt for every kfmm file: include this instead of <fmt/format.h>.
///
/// fmt 9 turns its constexpr off under nvcc (FMT_USE_CONSTEXPR 0), which leaves constexpr and
/// consteval functions calling non-constexpr helpers: nvcc's front end then rejects every
/// compile-time checked format string and g++ (as nvcc's host compiler, C++20) rejects fmt's own
/// headers. nvcc 11+ handles fmt's relaxed constexpr, so turn it back on.
#if defined(__NVCC__) && !defined(FMT_USE_CONSTEXPR)
#define FMT_USE_CONSTEXPR 1
#endif
#include <fmt/format.h>
