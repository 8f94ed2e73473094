#!/usr/bin/env bash
# Sets up everything (scripts/setup.sh), builds the `kfmm` tool (Release, build/) and runs a
# simulation on 2 MPI ranks in the current directory:
#   bash scripts/run.sh                 # the built-in default simulation
#   bash scripts/run.sh my_run.yaml     # any `kfmm run` arguments are passed through
# Environment:
#   KFMM_RANKS       MPI ranks (default 2)
#   OMP_NUM_THREADS  threads per rank (default: cores / ranks, at least 1)
#   KFMM_BUILD_DIR   build directory (default build/ in the repository)
#   KFMM_JOBS        parallel compile jobs (default: nproc)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${KFMM_BUILD_DIR:-$ROOT/build}
JOBS=${KFMM_JOBS:-$(nproc)}
RANKS=${KFMM_RANKS:-2}

log() { printf '[kfmm run] %s\n' "$*" >&2; }

start=$SECONDS
setup_output=$(bash "$ROOT/scripts/setup.sh")
prefix_path=$(sed -n 's/^KFMM_PREFIX_PATH=//p' <<<"$setup_output" | tail -n1)
kokkos5_include=$(sed -n 's/^KFMM_KOKKOS5_INCLUDE=//p' <<<"$setup_output" | tail -n1)
log "setup done in $((SECONDS - start))s"

start=$SECONDS
mkdir -p "$BUILD"
# The same configuration as scripts/test.sh, so that the two share one build.
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix_path" \
  -DKFMM_KOKKOS5_INCLUDE="$kokkos5_include" >"$BUILD/configure.log" 2>&1 \
  || { cat "$BUILD/configure.log" >&2; exit 1; }
cmake --build "$BUILD" -j "$JOBS" --target kfmm_app
log "build done in $((SECONDS - start))s"

# Open MPI refuses root unless told; CI machines and containers run as root.
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
cores=$(nproc)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( cores / RANKS > 0 ? cores / RANKS : 1 ))}
export OMP_PROC_BIND=${OMP_PROC_BIND:-false}
log "running: mpirun -n $RANKS $BUILD/apps/kfmm run $* (OMP_NUM_THREADS=$OMP_NUM_THREADS per rank)"
start=$SECONDS
status=0
# No core binding: each rank's OpenMP threads may use all cores it is given.
mpirun -n "$RANKS" --oversubscribe --bind-to none "$BUILD/apps/kfmm" run "$@" || status=$?
log "kfmm run finished in $((SECONDS - start))s (exit $status)"
exit $status
