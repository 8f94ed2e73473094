#include <kfmm/comm/context.hpp>
#include <kfmm/core/error.hpp>

#include <vector>

namespace kfmm {

Context::Context(MPI_Comm comm) : comm_(comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  MPI_Comm node;
  MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local_rank_);
  MPI_Comm_size(node, &local_size_);
  MPI_Comm_free(&node);
}

void agree_on_error(Context const& context, std::string const& local_error) {
  int const mine = local_error.empty() ? context.size() : context.rank();
  int first = context.size();
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, context.comm());
  if (first == context.size()) return;
  int length = first == context.rank() ? static_cast<int>(local_error.size()) : 0;
  MPI_Bcast(&length, 1, MPI_INT, first, context.comm());
  std::vector<char> text(local_error.begin(), local_error.end());
  text.resize(length);
  MPI_Bcast(text.data(), length, MPI_CHAR, first, context.comm());
  std::string message(text.begin(), text.end());
  if (context.size() > 1) message = "rank " + std::to_string(first) + ": " + message;
  throw Error(message);
}

}  // namespace kfmm
