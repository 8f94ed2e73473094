#pragma once
/// \file
/// \brief An MPI communicator with the facts every algorithm asks for.
#include <mpi.h>

#include <memory>
#include <string>

namespace kfmm {

/// \brief A communicator and this process's place in it (rank, size, rank on the node).
///
/// kfmm works on its own duplicate of the caller's communicator (MPI_Comm_dup), so that its
/// messages never match the caller's, whatever their tags, also while the caller has
/// receives pending. Copies share the duplicate; the last one frees it (not after
/// MPI_Finalize).
class Context {
 public:
  /// Duplicates `comm` (MPI must be initialised; collective over `comm`) and computes the
  /// node-local rank once.
  explicit Context(MPI_Comm comm = MPI_COMM_WORLD);

  /// kfmm's duplicate of the communicator given to the constructor.
  MPI_Comm comm() const { return *comm_; }
  /// 0, 1, 2, … at successive calls, shared by copies: the same on every rank as long as the
  /// ranks call it collectively (sparse exchanges alternate their tags by it, so that a rank one
  /// round ahead cannot be mistaken for the current round).
  unsigned long long next_round() const { return (*rounds_)++; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  /// Rank among the processes sharing this node (MPI_COMM_TYPE_SHARED).
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  bool is_root() const { return rank_ == 0; }

 private:
  std::shared_ptr<MPI_Comm const> comm_;
  std::shared_ptr<unsigned long long> rounds_ = std::make_shared<unsigned long long>(0);
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
};

/// \brief Agrees on an error across all ranks before anyone throws, so that no rank is left
/// waiting in a collective. Every rank calls it; `local_error` is empty where all is well.
/// If any rank reports an error, every rank throws kfmm::Error with the message of the lowest
/// failing rank (prefixed with that rank). Collective over `context`.
void agree_on_error(Context const& context, std::string const& local_error);

/// Calls `body`; a kfmm::Error (or std::exception) it throws is agreed across ranks as above.
template <class Body>
void collectively(Context const& context, Body&& body) {
  std::string error;
  try {
    body();
  } catch (std::exception const& e) {
    error = e.what();
  }
  agree_on_error(context, error);
}

}  // namespace kfmm
