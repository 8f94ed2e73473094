#include <kfmm/comm/decomposition.hpp>
#include <kfmm/comm/gathered_samples.hpp>
#include <kfmm/core/binary_search.hpp>
#include <kfmm/core/sort.hpp>
#include <kfmm/core/session_scratch.hpp>
#include <kfmm/core/space_copy.hpp>
#include <kfmm/core/view_growth.hpp>

#include <kfmm/core/format.hpp>

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>

namespace kfmm {

namespace {

// This rank's samples: `count` keys at equal quantiles of its weight, each standing for
// local_weight / count. With unit weights the quantiles are plain ranks in key order.
struct LocalSamples {
  std::vector<std::uint64_t> keys;
  double weight_each = 0;
};

// Weights are summed in blocks of this many keys, each block in key order by one thread. The
// quantiles need the prefix sum only at the samples: a search over the block prefixes and a
// walk inside one block find them, so no pass writes a prefix sum per key, and the sums do
// not depend on the thread count.
constexpr std::size_t weight_block = 256;

// Work Views of the sample sort, kept for the Kokkos session and grown with slack, so that a
// decomposition repeated every step allocates nothing once they are sized.
struct SampleScratch {
  Kokkos::View<std::uint64_t*, MemorySpace> sorted;
  Kokkos::View<std::size_t*, MemorySpace> permutation;
  Kokkos::View<double*, MemorySpace> block_weight;  // per block, then the exclusive prefix (blocks + 1)
  Kokkos::View<std::size_t*, MemorySpace> block_descents;
  Kokkos::View<std::size_t*, MemorySpace> block_bad;  // the first bad weight of the block, else n
  Kokkos::View<std::uint64_t*, MemorySpace> picked;
  Kokkos::View<std::uint64_t*, Kokkos::HostSpace> picked_host;
  KeySorter<MemorySpace, std::size_t> sorter;
};

SampleScratch& sample_scratch() { return session_scratch<SampleScratch>(); }

// One pass over the keys in blocks: per block the descents (keys below their predecessor,
// when `count_descents`), the first weight that is negative or not finite, and the weight of
// its keys in order (row i of the weights is `permutation(i)` unless `presorted`). Weights are
// read only when given.
void weigh_blocks(ExecutionSpace const& space, Kokkos::View<std::uint64_t const*, MemorySpace> const& keys,
                  std::size_t n, Kokkos::View<double const*, MemorySpace> const& weights,
                  Kokkos::View<std::size_t*, MemorySpace> const& permutation, bool presorted, bool count_descents,
                  SampleScratch const& scratch) {
  std::size_t const blocks = (n + weight_block - 1) / weight_block;
  bool const weighted = weights.extent(0) > 0;
  auto const block_weight = scratch.block_weight;
  auto const block_descents = scratch.block_descents;
  auto const block_bad = scratch.block_bad;
  Kokkos::parallel_for(
      "kfmm::decomposition::weigh_blocks", Kokkos::RangePolicy<ExecutionSpace>(space, 0, blocks),
      KOKKOS_LAMBDA(std::size_t b) {
        std::size_t const begin = b * weight_block;
        std::size_t const end = begin + weight_block < n ? begin + weight_block : n;
        std::size_t descents = 0, bad = n;
        double sum = 0;
        for (std::size_t i = begin; i < end; ++i) {
          if (count_descents && i > 0 && keys(i) < keys(i - 1)) ++descents;
          if (weighted) {
            double const w = weights(presorted ? i : permutation(i));
            if ((!(w >= 0) || !compat::math::isfinite(w)) && bad == n) bad = i;
            sum += w;
          }
        }
        block_descents(b) = descents;
        block_bad(b) = bad;
        block_weight(b) = sum;
      });
}

// Checks the weights (an error names the first bad one) and takes the samples.
LocalSamples sample_local_keys(ExecutionSpace const& space, Kokkos::View<std::uint64_t const*, MemorySpace> const& keys,
                               std::size_t n, Kokkos::View<double const*, MemorySpace> const& weights, bool unit_weights,
                               int samples_per_rank, double& local_weight, std::string& error) {
  SampleScratch& scratch = sample_scratch();
  std::size_t const blocks = (n + weight_block - 1) / weight_block;
  grow_preserving(scratch.block_weight, blocks + 1);
  grow_preserving(scratch.block_descents, std::max<std::size_t>(blocks, 1));
  grow_preserving(scratch.block_bad, std::max<std::size_t>(blocks, 1));
  // The caller has often sorted the keys already (the solver's decomposition does): then they
  // are used as they are instead of being copied and sorted again. The weights are checked in
  // the same pass, in the caller's order.
  Kokkos::View<double const*, MemorySpace> const given =
      unit_weights ? Kokkos::View<double const*, MemorySpace>() : weights;
  weigh_blocks(space, keys, n, given, {}, true, true, scratch);
  std::size_t descents = 0, first_bad = n;
  auto const block_descents = scratch.block_descents;
  auto const block_bad = scratch.block_bad;
  Kokkos::parallel_reduce(
      "kfmm::decomposition::count_descents", Kokkos::RangePolicy<ExecutionSpace>(space, 0, blocks),
      KOKKOS_LAMBDA(std::size_t b, std::size_t & count) { count += block_descents(b); }, descents);
  if (given.extent(0) > 0) {
    Kokkos::parallel_reduce(
        "kfmm::decomposition::first_bad_weight", Kokkos::RangePolicy<ExecutionSpace>(space, 0, blocks),
        KOKKOS_LAMBDA(std::size_t b, std::size_t & bad) {
          if (block_bad(b) < bad) bad = block_bad(b);
        },
        Kokkos::Min<std::size_t>(first_bad));
    if (first_bad < n) {
      double bad_weight = 0;
      Kokkos::deep_copy(space, Kokkos::View<double, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(&bad_weight),
                        Kokkos::subview(weights, first_bad));
      space.fence();
      error = fmt::format("choose_splitters: key {} has weight {}; weights must be finite and non-negative", first_bad,
                          bad_weight);
      return {};
    }
  }
  bool const presorted = descents == 0;
  Kokkos::View<std::uint64_t const*, MemorySpace> sorted = Kokkos::subview(keys, Kokkos::make_pair(std::size_t(0), n));
  Kokkos::View<std::size_t*, MemorySpace> permutation;
  if (!presorted) {
    grow_preserving(scratch.sorted, n);
    grow_preserving(scratch.permutation, n);
    auto const copy = Kokkos::subview(scratch.sorted, Kokkos::make_pair(std::size_t(0), n));
    Kokkos::deep_copy(space, copy, sorted);
    scratch.sorter.sort(space, scratch.sorted, scratch.permutation, n);
    permutation = scratch.permutation;
    sorted = copy;
    if (!unit_weights) weigh_blocks(space, sorted, n, weights, permutation, false, false, scratch);
  }

  // Unit weights: the quantiles are ranks. Otherwise block_weight(b) becomes the weight of the
  // sorted keys before block b.
  auto const prefix = scratch.block_weight;
  if (unit_weights) {
    local_weight = double(n);
  } else {
    local_weight = 0;
    Kokkos::parallel_scan(
        "kfmm::decomposition::block_prefix", Kokkos::RangePolicy<ExecutionSpace>(space, 0, blocks + 1),
        KOKKOS_LAMBDA(std::size_t b, double& partial, bool final) {
          double const w = b < blocks ? prefix(b) : 0.0;
          if (final) prefix(b) = partial;
          partial += w;
        },
        local_weight);
  }
  space.fence();

  LocalSamples samples;
  if (n == 0 || !(local_weight > 0)) return samples;
  std::size_t const count = std::min<std::size_t>(n, std::size_t(samples_per_rank));
  samples.weight_each = local_weight / double(count);
  grow_preserving(scratch.picked, count);
  auto const picked = scratch.picked;
  double const total = local_weight;
  Kokkos::parallel_for(
      "kfmm::decomposition::pick_samples", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count),
      KOKKOS_LAMBDA(std::size_t s) {
        double const target = (double(s) + 0.5) * total / double(count);
        // About the first i < n − 1 whose keys [0, i] weigh more than the target (else n − 1);
        // with unit weights exactly that, i = floor(target).
        std::size_t const last = n - 1;
        std::size_t i = last;
        if (unit_weights) {
          i = target < double(last) ? static_cast<std::size_t>(target) : last;
        } else {
          // The block whose keys take the prefix past the target, then the key inside it (the
          // last of the block if the walk's rounding never passes the target).
          std::size_t const b = upper_bound(prefix, std::size_t(1), blocks + 1, target) - 1;
          if (b < blocks) {
            std::size_t const begin = b * weight_block;
            std::size_t const end = begin + weight_block < n ? begin + weight_block : n;
            double sum = prefix(b);
            i = end - 1;
            for (std::size_t k = begin; k < end; ++k) {
              sum += weights(presorted ? k : permutation(k));
              if (sum > target) {
                i = k;
                break;
              }
            }
            if (i > last) i = last;
          }
        }
        picked(s) = sorted(i);
      });
  if (scratch.picked_host.extent(0) < count)
    scratch.picked_host = Kokkos::View<std::uint64_t*, Kokkos::HostSpace>(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, "kfmm::decomposition::samples_host"), scratch.picked.extent(0));
  auto const range = Kokkos::make_pair(std::size_t(0), count);
  copy_contiguous(space, Kokkos::subview(scratch.picked_host, range), Kokkos::subview(picked, range));
  space.fence();
  count_host_device_bytes(count * sizeof(std::uint64_t));
  samples.keys.assign(scratch.picked_host.data(), scratch.picked_host.data() + count);
  return samples;
}

// The checks that need no pass over the keys (the weights are checked by sample_local_keys).
std::string check_input(Kokkos::View<std::uint64_t const*, MemorySpace> const& keys, std::size_t n,
                        Kokkos::View<double const*, MemorySpace> const& weights, int samples_per_rank) {
  if (samples_per_rank < 1)
    return fmt::format("choose_splitters: samples_per_rank = {} must be at least 1", samples_per_rank);
  if (keys.extent(0) < n) return fmt::format("choose_splitters: n = {} exceeds the {} keys given", n, keys.extent(0));
  if (weights.extent(0) > 0 && weights.extent(0) < n)
    return fmt::format("choose_splitters: {} weights given for n = {} keys; give one weight per key or none",
                       weights.extent(0), n);
  return {};
}

}  // namespace

std::vector<std::uint64_t> choose_splitters(ExecutionSpace const& space, Context const& context,
                                            Kokkos::View<std::uint64_t const*, MemorySpace> const& keys, std::size_t n,
                                            Kokkos::View<double const*, MemorySpace> const& weights,
                                            int samples_per_rank, std::string const& local_error) {
  // A failure (this rank's or its input's) rides on the first gather: the common path makes
  // two collectives, the gather of the per-rank numbers and that of the samples.
  std::string error = !local_error.empty() ? local_error : check_input(keys, n, weights, samples_per_rank);
  int const ranks = context.size();
  bool unit_weights = weights.extent(0) == 0;
  double local_weight = 0;
  LocalSamples local;
  if (error.empty())
    local = sample_local_keys(space, keys, n, weights, unit_weights, samples_per_rank, local_weight, error);
  // Per rank: failed, its weight, its number of samples and the weight each stands for.
  auto const gather_numbers = [&] {
    double const mine[4] = {error.empty() ? 0.0 : 1.0, local_weight, double(local.keys.size()), local.weight_each};
    std::vector<double> all(4 * std::size_t(ranks));
    MPI_Allgather(mine, 4, MPI_DOUBLE, all.data(), 4, MPI_DOUBLE, context.comm());
    return all;
  };
  std::vector<double> numbers = gather_numbers();
  double failed = 0, total_weight = 0;
  for (int r = 0; r < ranks; ++r) failed += numbers[4 * r], total_weight += numbers[4 * r + 1];
  if (failed > 0) agree_on_error(context, error);
  if (!unit_weights && !(total_weight > 0)) {
    unit_weights = true;
    std::string unused;  // unit weights have nothing to check
    local = sample_local_keys(space, keys, n, weights, unit_weights, samples_per_rank, local_weight, unused);
    numbers = gather_numbers();
  }

  int const count = static_cast<int>(local.keys.size());
  std::vector<int> counts(ranks), displacements(ranks + 1, 0);
  std::vector<double> all_weights(ranks);
  for (int r = 0; r < ranks; ++r) counts[r] = static_cast<int>(numbers[4 * r + 2]), all_weights[r] = numbers[4 * r + 3];
  std::partial_sum(counts.begin(), counts.end(), displacements.begin() + 1);
  std::vector<std::uint64_t> all_keys(displacements.back());
  MPI_Allgatherv(local.keys.data(), count, MPI_UINT64_T, all_keys.data(), counts.data(), displacements.data(),
                 MPI_UINT64_T, context.comm());

  // Every rank holds the same samples and orders them the same way (key, then source rank).
  std::vector<GatheredSample> samples;
  samples.reserve(all_keys.size());
  for (int r = 0; r < ranks; ++r)
    for (int s = displacements[r]; s < displacements[r + 1]; ++s) samples.emplace_back(all_keys[s], all_weights[r]);
  order_gathered_samples(samples, std::vector<std::size_t>(displacements.begin(), displacements.end()));
  double sample_total = 0;
  for (auto const& sample : samples) sample_total += sample.second;

  // Splitter r−1 is the first sample whose preceding weight reaches r/ranks of the total.
  std::vector<std::uint64_t> splitters(ranks - 1, samples.empty() ? 0 : samples.back().first);
  double before = 0;
  int next = 1;
  for (auto const& sample : samples) {
    while (next < ranks && before >= sample_total * next / ranks) splitters[next++ - 1] = sample.first;
    before += sample.second;
  }
  return splitters;
}

}  // namespace kfmm
