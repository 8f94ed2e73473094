#include <kfmm/comm/context.hpp>
#include <kfmm/core/error.hpp>

#include <vector>

namespace kfmm {

namespace {

void free_communicator(MPI_Comm* comm) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(comm);
  delete comm;
}

}  // namespace

Context::Context(MPI_Comm comm) {
  auto* own = new MPI_Comm(MPI_COMM_NULL);
  MPI_Comm_dup(comm, own);
  comm_ = std::shared_ptr<MPI_Comm const>(own, [](MPI_Comm const* c) { free_communicator(const_cast<MPI_Comm*>(c)); });
  MPI_Comm_rank(*own, &rank_);
  MPI_Comm_size(*own, &size_);
  MPI_Comm node;
  MPI_Comm_split_type(*own, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
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
