#include <kfmm/comm/unique_ids.hpp>

#include <kfmm/core/format.hpp>

namespace kfmm {

namespace detail {

std::uint64_t first_global_row(Context const& context, std::size_t n) {
  unsigned long long const local = n;
  unsigned long long before = 0;
  MPI_Exscan(&local, &before, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, context.comm());
  return context.rank() == 0 ? 0 : before;  // MPI leaves rank 0's result undefined
}

IdRepeats agree_on_repeats(Context const& context, std::uint64_t count, std::uint64_t smallest,
                           IdRecord const* first_two) {
  IdRepeats repeats;
  unsigned long long local[2] = {count, count > 0 ? smallest : std::numeric_limits<std::uint64_t>::max()};
  unsigned long long total = 0, id = 0;
  MPI_Allreduce(&local[0], &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, context.comm());
  if (total == 0) return repeats;
  MPI_Allreduce(&local[1], &id, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, context.comm());
  // One owner holds every copy of an id: only it contributes where the smallest one lies.
  unsigned long long where[6];
  bool const owner = count > 0 && smallest == id;
  for (int k = 0; k < 2; ++k) {
    where[k] = owner ? first_two[k].row : std::numeric_limits<std::uint64_t>::max();
    where[2 + k] = owner ? first_two[k].rank : std::numeric_limits<std::uint64_t>::max();
    where[4 + k] = owner ? first_two[k].index : std::numeric_limits<std::uint64_t>::max();
  }
  MPI_Allreduce(MPI_IN_PLACE, where, 6, MPI_UNSIGNED_LONG_LONG, MPI_MIN, context.comm());
  repeats.count = total;
  repeats.id = id;
  for (int k = 0; k < 2; ++k) {
    repeats.rows[k] = where[k];
    repeats.ranks[k] = where[2 + k];
    repeats.indices[k] = where[4 + k];
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
