#pragma once
/// \file
/// \brief Export orders lent to ExchangePlans from one pool per memory space and Kokkos
/// session, so that the plans a solver builds at every step (the decomposition's, one per walk
/// level, the answers') take the orders of the plans of earlier steps instead of allocating
/// their own.
#include <kfmm/core/huge_pages.hpp>
#include <kfmm/core/session_scratch.hpp>

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <vector>

namespace kfmm::detail {

/// \brief The pooled orders. One is free when the pool holds its only reference
/// (use_count() == 1): the plan that had it is gone, so plans return nothing explicitly, and a
/// copied plan keeps its order for as long as any copy lives. A plan's kernels run on its
/// execution space instance in order with the next plan's, so an order is lent again as soon as
/// no host object refers to it.
template <class Memory>
struct ExportOrderPool {
  using Order = Kokkos::View<std::size_t*, Memory>;
  /// Orders kept at most; beyond, the smallest free one makes room (or a new one stays unpooled).
  static constexpr std::size_t max_orders = 64;
  std::vector<Order> orders;

  /// A free order of at least n elements (the shortest that fits), else a new one with an
  /// eighth more room, so that a plan whose exports grow a little next step finds it again.
  Order lend(std::size_t n) {
    std::size_t const best = shortest_free(n);
    if (best < orders.size()) return orders[best];
    // Kept for the session: large ones on huge pages before their first touch (allocate_kept).
    Order fresh = allocate_kept<Order>("kfmm::exchange_plan::export_order", n + n / 8);
    if (orders.size() >= max_orders) {
      std::size_t const smallest = shortest_free(0);
      if (smallest < orders.size()) orders.erase(orders.begin() + static_cast<std::ptrdiff_t>(smallest));
    }
    if (orders.size() < max_orders) orders.push_back(fresh);
    return fresh;
  }

  /// Orders lent now (held by a plan as well as by the pool).
  std::size_t lent() const {
    std::size_t count = 0;
    for (auto const& order : orders) count += order.use_count() > 1 ? 1 : 0;
    return count;
  }

 private:
  /// Index of the shortest free order of at least n elements; orders.size() if there is none.
  std::size_t shortest_free(std::size_t n) const {
    std::size_t best = orders.size();
    for (std::size_t i = 0; i < orders.size(); ++i)
      if (orders[i].use_count() == 1 && orders[i].extent(0) >= n &&
          (best == orders.size() || orders[i].extent(0) < orders[best].extent(0)))
        best = i;
    return best;
  }
};

/// The pool of this memory space (released when Kokkos finalizes).
template <class Memory>
ExportOrderPool<Memory>& export_order_pool() {
  return session_scratch<ExportOrderPool<Memory>>();
}

}  // namespace kfmm::detail
