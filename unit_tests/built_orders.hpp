#pragma once
// Tests of the header-only expansion kernels instantiate them only at the orders this build
// compiled (KFMM_EXPANSION_ORDERS): a build with fewer orders, such as the sanitizer build's one,
// is meant to be quick, and every order a test instantiates is a large share of its compile time.
// Use `if constexpr (kfmm::expansion_order_built(P))` around a call: a discarded branch does not
// instantiate what it calls.
#include <kfmm/fmm/expansion_dispatch.hpp>

#include <string>

namespace kfmm::test_support {

/// Whether every order 1 … 8 is compiled (tests that compare orders need them all).
constexpr bool all_expansion_orders_built() {
  for (int p = min_expansion_order; p <= max_expansion_order; ++p)
    if (!expansion_order_built(p)) return false;
  return true;
}

/// Calls F<P>::run(args...) for every order P this build compiled, in increasing order.
template <template <int> class F, int P = min_expansion_order, class... Args>
void for_each_built_order(Args const&... args) {
  if constexpr (P <= max_expansion_order) {
    if constexpr (expansion_order_built(P)) F<P>::run(args...);
    for_each_built_order<F, P + 1>(args...);
  }
}

/// Why a test that needs expansion order p (0: every order) does not run in this build.
inline std::string not_built_message(int p) {
  std::string const needs = p == 0 ? std::string("every expansion order 1 to 8") : "expansion order " + std::to_string(p);
  return "needs " + needs + "; this build compiles " + built_expansion_orders +
         " (KFMM_EXPANSION_ORDERS, e.g. the sanitizer build); the default build runs it";
}

}  // namespace kfmm::test_support
