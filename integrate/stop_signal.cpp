#include <kfmm/integrate/stop_signal.hpp>

namespace kfmm {

namespace {

volatile std::sig_atomic_t stop_flag = 0;

extern "C" void set_stop_flag(int) { stop_flag = 1; }

}  // namespace

StopSignalGuard::StopSignalGuard() {
  stop_flag = 0;
  previous_term_ = std::signal(SIGTERM, set_stop_flag);
  previous_int_ = std::signal(SIGINT, set_stop_flag);
}

StopSignalGuard::~StopSignalGuard() {
  std::signal(SIGTERM, previous_term_ == SIG_ERR ? SIG_DFL : previous_term_);
  std::signal(SIGINT, previous_int_ == SIG_ERR ? SIG_DFL : previous_int_);
}

bool StopSignalGuard::requested_here() { return stop_flag != 0; }

bool StopSignalGuard::requested_anywhere(Context const& context) {
  int const mine = requested_here() ? 1 : 0;
  int any = 0;
  MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, context.comm());
  return any != 0;
}

}  // namespace kfmm
