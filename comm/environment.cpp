#include <kfmm/comm/environment.hpp>
#include <kfmm/core/error.hpp>
#include <kfmm/core/fault_injection.hpp>
#include <kfmm/core/kernel_shape.hpp>
#include <kfmm/core/types.hpp>

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace kfmm {

namespace {

// OpenMP threads call MPI only from the master thread; GPU backends likewise.
constexpr int required_thread_level = MPI_THREAD_FUNNELED;

// GPUs per node: KFMM_NUM_GPUS, else the visible-devices list of the GPU runtime, else one per
// node-local rank (the recommended layout).
int count_gpus(int local_ranks) {
  if (char const* value = std::getenv("KFMM_NUM_GPUS")) return std::max(1, std::atoi(value));
  for (char const* name : {"CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"}) {
    if (char const* value = std::getenv(name)) {
      std::string const list(value);
      if (list.empty()) continue;
      return 1 + static_cast<int>(std::count(list.begin(), list.end(), ','));
    }
  }
  return local_ranks;
}

}  // namespace

int available_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int const n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  unsigned const n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

Environment::Environment(int& argc, char**& argv) {
  if (Kokkos::is_initialized()) fail("kfmm::Environment: Kokkos is already initialised; create exactly one Environment per process, before any Kokkos use");
  // Before MPI: every rank sees the same environment, so a bad value fails all of them alike.
  if (char const* value = std::getenv("KFMM_KERNEL_SHAPE"))
    request_kernel_shape(parse_kernel_shape(value, "KFMM_KERNEL_SHAPE"));
  fault_injection::read_environment();
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = MPI_THREAD_SINGLE;
  if (!initialized) {
    MPI_Init_thread(&argc, &argv, required_thread_level, &provided);
    owns_mpi_ = true;
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < required_thread_level) {
    if (owns_mpi_) MPI_Finalize();
    fail("MPI provides thread level {} but the {} backend needs MPI_THREAD_FUNNELED ({}); use an MPI built with thread support (Open MPI: the default build), or initialise MPI with MPI_Init_thread(MPI_THREAD_FUNNELED) before kfmm",
         provided, compat::backend_name<ExecutionSpace>(), required_thread_level);
  }
  world_ = std::make_unique<Context>(MPI_COMM_WORLD);

  // GPU backends: one device per node-local rank.
  std::vector<std::string> kokkos_args(argv, argv + argc);
  if (compat::is_gpu_backend<ExecutionSpace>()) {
    int const gpus = count_gpus(world_->local_size());
    device_ = world_->local_rank() % gpus;
    kokkos_args.push_back(std::string(compat::device_id_flag()) + std::to_string(device_));
    if (world_->local_size() > gpus)
      warnings_.push_back(fmt::format("{} ranks share {} GPU(s) on a node; run one rank per GPU (mpirun -n <GPUs per node × nodes>) or set KFMM_NUM_GPUS", world_->local_size(), gpus));
  }
  std::vector<char*> args;
  for (auto& a : kokkos_args) args.push_back(a.data());
  int kargc = static_cast<int>(args.size());
  args.push_back(nullptr);
  char** kargv = args.data();
  // Unset OMP_PROC_BIND means no binding in libgomp already; saying so keeps Kokkos' OpenMP
  // backend from printing a warning on stdout, which would corrupt output such as
  // `kfmm run --print-default > run.yaml`. An explicit setting is left alone.
  if (!compat::is_gpu_backend<ExecutionSpace>()) setenv("OMP_PROC_BIND", "false", 0);
  Kokkos::initialize(kargc, kargv);
  threads_ = compat::concurrency(ExecutionSpace());

  if (!compat::is_gpu_backend<ExecutionSpace>()) {
    int const cores = available_cores();
    int node_threads = threads_;
    MPI_Comm node;
    MPI_Comm_split_type(world_->comm(), MPI_COMM_TYPE_SHARED, world_->rank(), MPI_INFO_NULL, &node);
    MPI_Allreduce(&threads_, &node_threads, 1, MPI_INT, MPI_SUM, node);
    MPI_Comm_free(&node);
    // The affinity mask of one rank may be a subset of the node; compare with the node total.
    int const node_cores = static_cast<int>(std::thread::hardware_concurrency());
    if (node_threads > (node_cores > 0 ? node_cores : cores))
      warnings_.push_back(fmt::format("{} ranks × {} threads = {} threads on a node with {} cores; set OMP_NUM_THREADS to at most {} per rank", world_->local_size(), threads_, node_threads, node_cores, std::max(1, node_cores / world_->local_size())));
    else if (threads_ > cores)
      warnings_.push_back(fmt::format("{} threads per rank but the rank may only use {} cores (CPU binding); set OMP_NUM_THREADS={} or bind each rank to more cores (mpirun --bind-to none or --map-by slot:PE={})", threads_, cores, cores, threads_));
  }
}

Environment::~Environment() {
  Kokkos::finalize();
  world_.reset();
  if (owns_mpi_) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
}

std::string Environment::summary() const {
  std::string text = fmt::format("backend {}, {} thread(s) per rank, {} rank(s), {} rank(s) on this node",
                                 compat::backend_name<ExecutionSpace>(), threads_, world_->size(), world_->local_size());
  if (device_ >= 0) text += fmt::format(", rank {} on device {}", world_->rank(), device_);
  if (use_gpu_shape<ExecutionSpace>()) text += ", GPU-shaped kernels";
  return text;
}

}  // namespace kfmm
