#pragma once
/// \file
/// \brief SIGTERM/SIGINT turn into a request to stop cleanly at the end of the current step.
#include <kfmm/comm/context.hpp>

#include <csignal>

namespace kfmm {

/// \brief While alive, SIGTERM and SIGINT only set a flag (the previous handlers come back
/// on destruction). Construction clears the flag.
class StopSignalGuard {
 public:
  StopSignalGuard();
  ~StopSignalGuard();
  StopSignalGuard(StopSignalGuard const&) = delete;
  StopSignalGuard& operator=(StopSignalGuard const&) = delete;

  /// Whether a signal arrived on this rank.
  static bool requested_here();
  /// Whether a signal arrived on any rank (MPI_Allreduce, so every rank gets the same answer).
  static bool requested_anywhere(Context const& context);

 private:
  using Handler = void (*)(int);
  Handler previous_term_;
  Handler previous_int_;
};

}  // namespace kfmm
