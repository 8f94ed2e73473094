#pragma once
/// \file
/// \brief RAII set-up of MPI and Kokkos in the right order, with checks of the execution setup.
#include <kfmm/comm/context.hpp>

#include <memory>
#include <string>
#include <vector>

namespace kfmm {

/// \brief Initialises MPI (unless the application already did) and then Kokkos; finalises
/// them in reverse order. On GPU backends each rank picks the device `local_rank % devices`.
///
/// Refuses setups that cannot work (throws kfmm::Error): an MPI without the thread support the
/// backend needs, a second Environment, a KFMM_KERNEL_SHAPE other than `cpu` or `gpu` (which
/// requests that kernel shape on CPU backends, core/kernel_shape.hpp). Warns about setups that will be slow: several ranks
/// sharing one GPU, OpenMP threads of the ranks on a node oversubscribing its cores.
class Environment {
 public:
  Environment(int& argc, char**& argv);
  ~Environment();
  Environment(Environment const&) = delete;
  Environment& operator=(Environment const&) = delete;

  /// The world communicator.
  Context const& world() const { return *world_; }
  /// Backend, threads per rank, ranks, ranks per node and (GPU) the device of this rank.
  std::string summary() const;
  /// Slow-setup warnings of this rank, each naming its fix (empty when all is well).
  std::vector<std::string> const& warnings() const { return warnings_; }
  /// Threads (or GPU concurrency) of the default execution space on this rank.
  int threads() const { return threads_; }
  /// Device id of this rank on GPU backends, -1 on host backends.
  int device() const { return device_; }

 private:
  bool owns_mpi_ = false;
  std::unique_ptr<Context> world_;
  std::vector<std::string> warnings_;
  int threads_ = 1;
  int device_ = -1;
};

/// Cores this process may run on (its CPU affinity mask), at least 1.
int available_cores();

}  // namespace kfmm
