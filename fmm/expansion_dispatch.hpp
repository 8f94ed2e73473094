#pragma once
/// \file
/// \brief Runtime choice of the compile-time expansion order P.
#include <kfmm/build_config.hpp>
#include <kfmm/core/error.hpp>

#include <utility>

namespace kfmm {

/// Expansion orders that kfmm instantiates.
inline constexpr int min_expansion_order = 1;
inline constexpr int max_expansion_order = 8;

/// Whether this build compiled the expansion passes of order p (CMake KFMM_EXPANSION_ORDERS;
/// the header-only expansion kernels exist at every order 1 … 8).
constexpr bool expansion_order_built(int p) {
  return p >= min_expansion_order && p <= max_expansion_order && ((KFMM_EXPANSION_ORDER_MASK >> p) & 1) != 0;
}

/// The compiled orders as text ("1 2 3 4 5 6 7 8"), for messages.
inline constexpr char const* built_expansion_orders = KFMM_EXPANSION_ORDERS_TEXT;

/// Throws kfmm::Error naming p, the compiled orders and the fix unless expansion_order_built(p).
inline void require_expansion_order_built(int p) {
  if (!expansion_order_built(p))
    fail("expansion order p = {} is not compiled into this kfmm (built with KFMM_EXPANSION_ORDERS = {}); choose one "
         "of those orders, or reconfigure kfmm with -DKFMM_EXPANSION_ORDERS including {}",
         p, built_expansion_orders, p);
}

/// \brief Calls F<p>::run(args...) for the runtime order p (1 … 8) and returns its result.
/// Throws kfmm::Error for any other p.
template <template <int> class F, class... Args>
decltype(auto) dispatch_order(int p, Args&&... args) {
  switch (p) {
    case 1: return F<1>::run(std::forward<Args>(args)...);
    case 2: return F<2>::run(std::forward<Args>(args)...);
    case 3: return F<3>::run(std::forward<Args>(args)...);
    case 4: return F<4>::run(std::forward<Args>(args)...);
    case 5: return F<5>::run(std::forward<Args>(args)...);
    case 6: return F<6>::run(std::forward<Args>(args)...);
    case 7: return F<7>::run(std::forward<Args>(args)...);
    case 8: return F<8>::run(std::forward<Args>(args)...);
    default:
      fail("expansion order p = {} is not supported: kfmm instantiates orders {} to {}; choose p in that range "
           "(higher p is more accurate and slower; 4 or 5 is typical)",
           p, min_expansion_order, max_expansion_order);
  }
}

}  // namespace kfmm
