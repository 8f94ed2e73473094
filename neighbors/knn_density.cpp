#include <kfmm/core/error.hpp>
#include <kfmm/neighbors/knn_density.hpp>

#include <string>

namespace kfmm {

ScalarView<double> knn_density(ExecutionSpace const& space, Context const& context, KNNResult const& result,
                               ScalarView<double> const& self_mass) {
  std::size_t const n = result.num;
  std::string error;
  bool const with_self = self_mass.extent(0) > 0;
  if (n > 0 && result.mass.extent(0) < n)
    error = "knn_density: the kNN result has no neighbour masses; run knn with KNNOptions::neighbour_masses = true";
  else if (with_self && self_mass.extent(0) < n)
    error = fmt::format("knn_density: self_mass has {} entries for {} rows", self_mass.extent(0), n);
  agree_on_error(context, error);
  ScalarView<double> density(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::knn::density"), n);
  int const k = n > 0 ? static_cast<int>(result.distance.extent(1)) : 0;
  auto const distance = result.distance;
  auto const mass = result.mass;
  std::size_t first_zero = n;
  Kokkos::parallel_reduce(
      "kfmm::neighbors::knn_density", Kokkos::RangePolicy<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t i, std::size_t & zero) {
        double const h = distance(i, k - 1);
        if (!(h > 0)) {
          zero = i < zero ? i : zero;
          density(i) = 0;
          return;
        }
        double rho = with_self ? self_mass(i) * cubic_spline_kernel(0, h) : 0.0;
        for (int j = 0; j < k; ++j) rho += mass(i, j) * cubic_spline_kernel(distance(i, j), h);
        density(i) = rho;
      },
      Kokkos::Min<std::size_t>(first_zero));
  if (first_zero < n)
    error = fmt::format("knn_density: row {} on rank {} has its k-th neighbour at distance 0 (more than k coincident "
                        "particles), so its density is undefined; use a larger k",
                        first_zero, context.rank());
  agree_on_error(context, error);
  return density;
}

}  // namespace kfmm
