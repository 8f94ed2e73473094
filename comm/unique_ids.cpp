#include <kfmm/comm/unique_ids.hpp>

#include <kfmm/core/format.hpp>

#include <algorithm>
#include <vector>

namespace kfmm {

namespace detail {

std::uint64_t first_global_row(Context const& context, std::size_t n) {
  unsigned long long const local = n;
  unsigned long long before = 0;
  MPI_Exscan(&local, &before, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, context.comm());
  return context.rank() == 0 ? 0 : before;  // MPI leaves rank 0's result undefined
}

IdRepeats agree_on_repeats(Context const& context, std::uint64_t first_row, std::uint64_t count,
                           std::uint64_t smallest, IdRecord const* first_two) {
  IdRepeats repeats;
  unsigned long long const none = std::numeric_limits<std::uint64_t>::max();
  unsigned long long local[2] = {count, count > 0 ? smallest : none};
  unsigned long long total = 0, id = 0;
  MPI_Allreduce(&local[0], &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, context.comm());
  if (total == 0) return repeats;
  MPI_Allreduce(&local[1], &id, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, context.comm());
  // One owner holds every copy of an id: only it contributes where the smallest one lies.
  bool const owner = count > 0 && smallest == id;
  unsigned long long rows[2] = {owner ? first_two[0].row : none, owner ? first_two[1].row : none};
  MPI_Allreduce(MPI_IN_PLACE, rows, 2, MPI_UNSIGNED_LONG_LONG, MPI_MIN, context.comm());
  // The ranks holding those rows: the last rank whose first row is at most the row.
  std::vector<unsigned long long> first_rows(context.size());
  unsigned long long const mine = first_row;
  MPI_Allgather(&mine, 1, MPI_UNSIGNED_LONG_LONG, first_rows.data(), 1, MPI_UNSIGNED_LONG_LONG, context.comm());
  repeats.count = total;
  repeats.id = id;
  for (int k = 0; k < 2; ++k) {
    auto const after = std::upper_bound(first_rows.begin(), first_rows.end(), rows[k]);
    std::size_t const rank = std::size_t(after - first_rows.begin()) - 1;
    repeats.rows[k] = rows[k];
    repeats.ranks[k] = rank;
    repeats.indices[k] = rows[k] - first_rows[rank];
  }
  return repeats;
}

}  // namespace detail

DuplicateIdPolicy parse_duplicate_id_policy(std::string const& name) {
  if (name == "reject") return DuplicateIdPolicy::Reject;
  if (name == "renumber") return DuplicateIdPolicy::Renumber;
  if (name == "keep") return DuplicateIdPolicy::Keep;
  fail("duplicate-id policy '{}' is not one of reject, renumber, keep", name);
}

std::string to_string(DuplicateIdPolicy policy) {
  switch (policy) {
    case DuplicateIdPolicy::Reject: return "reject";
    case DuplicateIdPolicy::Renumber: return "renumber";
    case DuplicateIdPolicy::Keep: return "keep";
  }
  return "unknown";
}

std::string describe(IdRepeats const& repeats) {
  if (!repeats) return "all ids unique";
  std::string text = fmt::format("id {} at rows {} and {}", repeats.id, repeats.rows[0], repeats.rows[1]);
  if (repeats.count > 1) text += fmt::format(" ({} repeats in all)", repeats.count);
  return text;
}

}  // namespace kfmm
