#!/usr/bin/env bash
# Builds kfmm's libFuzzer targets (fuzz_tests/) with clang++-14 and runs each for a while:
#   scripts/fuzz.sh [SECONDS_PER_TARGET]      (default 60)
# Targets (run KFMM_JOBS at a time, one core each): fuzz_run_file (YAML run files), fuzz_particle_file (structured GADGET-4 files),
# fuzz_particle_file_bytes (raw bytes as an HDF5 file), fuzz_restart (structured restart files).
# Each must either read its input or throw kfmm::Error; any other exception, a sanitizer report,
# a result that breaks the reader's promises, a timeout (10 s) or more than 2 GiB of memory is
# a crash: the script prints the reproducer's path and exits non-zero. Reproduce one with
#   $BUILD/fuzz_tests/fuzz_<target> <reproducer>
# Runs scripts/setup.sh first (as scripts/test.sh does). The corpora grow in
# $BUILD/fuzz_corpus/<target>/ (seeds written by fuzz_make_seeds and fuzz_tests/corpus/), so a
# second run starts where the last one stopped.
# Environment:
#   KFMM_FUZZ_BUILD_DIR  build directory (default build-fuzz/ in the repository)
#   KFMM_FUZZ_TARGETS    targets to run (default: all four, space-separated names without fuzz_)
#   KFMM_JOBS            parallel compile jobs (default: nproc)
# Leak checking is off (ASAN_OPTIONS=detect_leaks=0): Open MPI and Kokkos keep allocations until
# exit, which LeakSanitizer reports on every run.
# fuzz_particle_file_bytes feeds raw bytes to libhdf5's parser, which crashes on some malformed
# files (docs/fuzzing.md): a crash whose first frame outside libFuzzer, the sanitizers and libc is in
# libhdf5 is reported with its reproducer as that known boundary and does not fail the script;
# that target also runs with allocator_may_return_null=1, so that an impossible size read from a
# corrupt file makes malloc return NULL to libhdf5 as it would without AddressSanitizer.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SECONDS_PER_TARGET=${1:-60}
BUILD=${KFMM_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}
TARGETS=${KFMM_FUZZ_TARGETS:-run_file particle_file particle_file_bytes restart}
JOBS=${KFMM_JOBS:-$(nproc)}

log() { printf '[kfmm fuzz] %s\n' "$*"; }
# shellcheck source=fuzz_first_frame.sh
source "$ROOT/scripts/fuzz_first_frame.sh"
die() { printf '[kfmm fuzz] error: %s\n' "$*" >&2; exit 1; }

[[ "$SECONDS_PER_TARGET" =~ ^[0-9]+$ ]] && [ "$SECONDS_PER_TARGET" -gt 0 ] \
  || die "SECONDS_PER_TARGET must be a positive integer, got '$SECONDS_PER_TARGET'"

output=$(bash "$ROOT/scripts/setup.sh") || die "scripts/setup.sh failed"
PREFIX_PATH=$(sed -n 's/^KFMM_PREFIX_PATH=//p' <<<"$output" | tail -n1)
[ -n "$PREFIX_PATH" ] || die "setup.sh printed no KFMM_PREFIX_PATH"
command -v clang++-14 >/dev/null || die "clang++-14 not found; install clang-14 and libclang-rt-14-dev (scripts/setup.sh does)"

mkdir -p "$BUILD"
BUILD=$(cd "$BUILD" && pwd)  # absolute: reports name the binaries by absolute path
generator=()
if command -v ninja >/dev/null && { [ ! -f "$BUILD/CMakeCache.txt" ] || grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$BUILD/CMakeCache.txt"; }; then
  generator=(-G Ninja)
fi
# One expansion order, no tests or benchmarks, -O1: the readers need none of the rest, and the
# expansion passes are compiled without coverage (fmm/CMakeLists.txt). A directory already
# configured for fuzzing is used as it is: scripts/test.sh builds its sanitizer tests and the
# fuzz targets in one (KFMM_ENABLE_FUZZING implies the sanitizers).
if grep -qs '^KFMM_ENABLE_FUZZING:BOOL=ON$' "$BUILD/CMakeCache.txt"; then
  log "using the fuzz-enabled build in $BUILD as configured"
else
  cmake -S "$ROOT" -B "$BUILD" "${generator[@]}" -DCMAKE_PREFIX_PATH="$PREFIX_PATH" \
    -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14 -DKFMM_ENABLE_FUZZING=ON \
    -DKFMM_ENABLE_TESTS=OFF -DKFMM_ENABLE_BENCHMARKS=OFF -DKFMM_EXPANSION_ORDERS=7 \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    >"$BUILD/configure.log" 2>&1 || { cat "$BUILD/configure.log"; die "configure failed"; }
fi
cmake --build "$BUILD" -j "$JOBS" --target kfmm_fuzz || die "build failed"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_PROC_BIND=false
export ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

CORPUS=$BUILD/fuzz_corpus
SEEDS=$BUILD/fuzz_seeds
rm -rf "$SEEDS"
"$BUILD/fuzz_tests/fuzz_make_seeds" "$SEEDS" >"$BUILD/fuzz_seeds.log" 2>&1 \
  || { cat "$BUILD/fuzz_seeds.log"; die "fuzz_make_seeds failed"; }
cp "$ROOT"/fuzz_tests/corpus/run_file/* "$SEEDS/run_file/"

# fuzz_one TARGET: runs one target; writes its summary line to $BUILD/fuzz_crashes/TARGET/summary
# and exits non-zero if it found a crash outside the known libhdf5 boundary.
fuzz_one() {
  local target=$1
  local binary=$BUILD/fuzz_tests/fuzz_$target
  local summary=$BUILD/fuzz_crashes/$target/summary
  local seeds=()
  [ -d "$SEEDS/$target" ] && seeds=("$SEEDS/$target")
  log "fuzz_$target for ${SECONDS_PER_TARGET}s"
  local run_log=$BUILD/fuzz_crashes/$target/last_run.log
  # The first directory is the corpus that grows; the seed directory is only read.
  local asan=$ASAN_OPTIONS
  [ "$target" = particle_file_bytes ] && asan=$ASAN_OPTIONS:allocator_may_return_null=1
  ASAN_OPTIONS=$asan "$binary" "$CORPUS/$target" "${seeds[@]}" -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 \
    -timeout=10 -artifact_prefix="$BUILD/fuzz_crashes/$target/" -print_final_stats=1 >"$run_log" 2>&1
  local status=$?
  local stats outcomes reproducer first_frame
  stats=$(grep -E '^#[0-9]+' "$run_log" | tail -n1 | sed -E 's/^#([0-9]+)[[:space:]]+[A-Z]+[[:space:]]+(cov: [0-9]+).*/\1 runs, \2/')
  outcomes=$(grep -E '^kfmm fuzz: ' "$run_log" | tail -n1 | sed 's/^kfmm fuzz: //')
  reproducer=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$run_log" | tail -n1)
  first_frame=$(first_user_frame "$binary" "$run_log")
  if [ $status -ne 0 ] && [ "$target" = particle_file_bytes ] && is_libhdf5_frame "$first_frame"; then
    log "fuzz_$target: crash inside libhdf5 on a malformed file (the documented boundary, docs/fuzzing.md):"
    log "  $(sed -E 's/^ *//' <<<"$first_frame")"
    log "  reproducer: ${reproducer:-none written} (log: $run_log)"
    echo "fuzz_$target: libhdf5 crash (known boundary), reproducer ${reproducer:-none} ($stats)" >"$summary"
  elif [ $status -ne 0 ]; then
    tail -n 60 "$run_log"
    log "fuzz_$target FAILED (exit $status); reproducer: ${reproducer:-none written} (log: $run_log)"
    echo "fuzz_$target: FAILED, reproducer ${reproducer:-none} ($stats)" >"$summary"
    return 1
  else
    echo "fuzz_$target: ok, $stats; $outcomes" >"$summary"
  fi
}

# The targets run $JOBS at a time: each libFuzzer process uses one core, and running them one
# after the other left the others idle for the whole stage.
for target in $TARGETS; do
  [ -x "$BUILD/fuzz_tests/fuzz_$target" ] || die "no fuzz target $BUILD/fuzz_tests/fuzz_$target (KFMM_FUZZ_TARGETS='$TARGETS')"
  mkdir -p "$CORPUS/$target" "$BUILD/fuzz_crashes/$target"
  rm -f "$BUILD/fuzz_crashes/$target/summary"
done
FAILED=0
running=0
for target in $TARGETS; do
  if [ $running -ge "$JOBS" ]; then
    wait -n || FAILED=1
    running=$((running - 1))
  fi
  fuzz_one "$target" &
  running=$((running + 1))
done
while [ $running -gt 0 ]; do
  wait -n || FAILED=1
  running=$((running - 1))
done
SUMMARY=()
for target in $TARGETS; do
  if [ -s "$BUILD/fuzz_crashes/$target/summary" ]; then
    SUMMARY+=("$(cat "$BUILD/fuzz_crashes/$target/summary")")
  else
    FAILED=1
    SUMMARY+=("fuzz_$target: no result (its run was interrupted)")
  fi
done

log "summary"
printf '  %s\n' "${SUMMARY[@]}"
[ $FAILED -eq 0 ] || exit 1
