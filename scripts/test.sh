#!/usr/bin/env bash
# Sets up everything (scripts/setup.sh) and runs the whole default test suite:
#   1. Release build in build/ (no benchmarks), `ctest -LE 'slow|cuda'`: unit + MPI tests at 1–4 ranks, the
#      same suites with the GPU-shaped kernels on OpenMP (label gpu_shape, KFMM_KERNEL_SHAPE=gpu),
#      the Kokkos 5.2.2 C++20 syntax check, the find_package test of the installed package;
#   2. the CUDA compile check (`ctest -L cuda`): every library, app and unit-test source compiled
#      by nvcc for sm_90 against Kokkos 5.2.2's headers (SKIPPED where nvcc is absent);
#   3. ASan + UBSan build of the test executables in build-sanitizers/ with clang++-14 (expansion
#      order 7; the library instrumented, its expansion passes with ASan only, the tests' own code
#      not: KFMM_SANITIZE_TESTS=OFF; configured for fuzzing too, so the same library serves the
#      fuzz targets of stage 4), their
#      one-rank tests at 2 threads in both kernel shapes (`ctest -L unit -LE 'slow|kokkos5|cuda|hard'
#      -E '[.]np1[.]t1$|install|^apps[.]'`; the compile checks compile nothing sanitizers could see,
#      the accuracy suite on hard distributions runs the code of the fmm suite on more inputs; two
#      of the eight active-particle configurations, as in fmm.gpu_shape.active);
#   4. fuzz (60 s per target): scripts/fuzz.sh 60 builds the libFuzzer targets of fuzz_tests/ in
#      build-sanitizers/ (on the library of stage 3; build-fuzz/ with KFMM_SKIP_SANITIZERS=1) and
#      runs each for 60 s (run files, particle files structured and as raw bytes, restart files);
#      a crash fails the stage and prints its reproducer.
# Builds are incremental: a second run only rebuilds what changed.
# Slow accuracy sweeps stay out (ctest label `slow`): run them with `ctest --test-dir build -L slow`.
# Environment:
#   KFMM_BUILD_DIR, KFMM_SANITIZER_BUILD_DIR, KFMM_FUZZ_BUILD_DIR  build directories (default build/,
#                      build-sanitizers/, build-fuzz/)
#   KFMM_JOBS          parallel compile jobs (default: nproc)
#   KFMM_TEST_TIMEOUT  seconds per ctest test (default 900)
#   KFMM_SKIP_CUDA_CHECK=1, KFMM_SKIP_SANITIZERS=1, KFMM_SKIP_FUZZ=1  leave that stage out
# Exits non-zero if any stage failed.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${KFMM_BUILD_DIR:-$ROOT/build}
SANITIZER_BUILD=${KFMM_SANITIZER_BUILD_DIR:-$ROOT/build-sanitizers}
JOBS=${KFMM_JOBS:-$(nproc)}
TIMEOUT=${KFMM_TEST_TIMEOUT:-900}

SUITE_START=$SECONDS
SUMMARY=()
FAILED=0

log() { printf '\n[kfmm test] %s\n' "$*"; }

# stage NAME COMMAND...: runs a stage, records its wall time and result.
stage() {
  local name=$1; shift
  local start=$SECONDS
  log "== $name"
  "$@"
  local status=$?
  local elapsed=$((SECONDS - start))
  local result=ok
  if [ $status -ne 0 ]; then result="FAILED (exit $status)"; FAILED=1; fi
  SUMMARY+=("$(printf '%-36s %5ds  %s' "$name" "$elapsed" "$result")")
  log "$name: $result in ${elapsed}s"
  return $status
}

finish() {
  log "== summary (total $((SECONDS - SUITE_START))s)"
  printf '  %s\n' "${SUMMARY[@]}"
  if [ $FAILED -ne 0 ]; then
    printf '\n[kfmm test] FAILED\n'
    exit 1
  fi
  printf '\n[kfmm test] all stages passed\n'
  exit 0
}

run_setup() {
  local output
  output=$(bash "$ROOT/scripts/setup.sh") || return 1
  PREFIX_PATH=$(sed -n 's/^KFMM_PREFIX_PATH=//p' <<<"$output" | tail -n1)
  KOKKOS5_INCLUDE=$(sed -n 's/^KFMM_KOKKOS5_INCLUDE=//p' <<<"$output" | tail -n1)
  [ -n "$PREFIX_PATH" ] || { echo "setup.sh printed no KFMM_PREFIX_PATH" >&2; return 1; }
  echo "Kokkos prefix: $PREFIX_PATH"
  echo "Kokkos 5 headers: ${KOKKOS5_INCLUDE:-none}"
}

# configure BUILD_DIR [cmake args...]
# Ninja where available (setup.sh installs it) and the directory is new or already Ninja's:
# unlike Makefiles, it compiles a test file while the library's longest file is still compiling
# instead of waiting for the library to link, which left one core idle for minutes.
configure() {
  local dir=$1; shift
  local generator=()
  if command -v ninja >/dev/null && { [ ! -f "$dir/CMakeCache.txt" ] || grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$dir/CMakeCache.txt"; }; then
    generator=(-G Ninja)
  fi
  cmake -S "$ROOT" -B "$dir" "${generator[@]}" -DCMAKE_PREFIX_PATH="$PREFIX_PATH" -DKFMM_KOKKOS5_INCLUDE="$KOKKOS5_INCLUDE" "$@" \
    >"$dir/configure.log" 2>&1 || { cat "$dir/configure.log"; return 1; }
  echo "configured $dir (log: $dir/configure.log)"
}

# build BUILD_DIR [targets...]
build() {
  local dir=$1; shift
  local targets=()
  [ $# -gt 0 ] && targets=(--target "$@")
  cmake --build "$dir" -j "$JOBS" "${targets[@]}"
}

# run_ctest BUILD_DIR [ctest args...]: prints the failed tests again at the end.
run_ctest() {
  local dir=$1; shift
  ctest --test-dir "$dir" --output-on-failure --timeout "$TIMEOUT" "$@"
  local status=$?
  if [ $status -ne 0 ] && [ -s "$dir/Testing/Temporary/LastTestsFailed.log" ]; then
    echo "failed tests in $dir:"
    sed 's/^/  /' "$dir/Testing/Temporary/LastTestsFailed.log"
  fi
  return $status
}

mkdir -p "$BUILD" "$SANITIZER_BUILD"
stage "setup (scripts/setup.sh)" run_setup || finish

# Without the benchmarks (the Kokkos 5 syntax check compiles them): they are a large share of
# the build and no test runs them.
stage "configure release" configure "$BUILD" -DCMAKE_BUILD_TYPE=Release -DKFMM_ENABLE_BENCHMARKS=OFF || finish
stage "build release" build "$BUILD" || finish
stage "tests release (ctest -LE 'slow|cuda')" run_ctest "$BUILD" -LE 'slow|cuda'

if [ "${KFMM_SKIP_CUDA_CHECK:-0}" != 1 ]; then
  stage "CUDA compile check (ctest -L cuda)" run_ctest "$BUILD" -L cuda
fi

if [ "${KFMM_SKIP_SANITIZERS:-0}" != 1 ]; then
  # -O1 with line tables: readable sanitizer reports, asserts on, a fraction of -O2's compile time.
  # Expansion order 7 (the default) only: each order is a large translation unit of the same
  # templates (the release build tests them all), and the tests instantiate only what is built.
  # The library is instrumented; the test files are not (KFMM_SANITIZE_TESTS=OFF): instrumenting
  # them tripled their compile time, most of this stage, for code that only drives the library.
  # Left out: tests whose point is accuracy at scale or a decomposition over several ranks (this
  # stage runs one rank); they ran the same code paths as the others, at many times the cost.
  # The active-particle cases repeat one pattern over 8 configurations (distribution, precision,
  # criterion); as in fmm.gpu_shape.active, two of them cover both precisions and criteria.
  SANITIZER_EXCLUDE='*DefaultsMeetTheAccuracyTarget*:*InputOrderCallsKeepTheCostWeightsAligned*:*FMMRunKeepsItsCostBalancedDecomposition*'
  for config in ClumpsFloatAngle ClumpsDoubleRelative ClumpsDoubleAngle HernquistFloatRelative HernquistFloatAngle \
      HernquistDoubleRelative; do
    SANITIZER_EXCLUDE="$SANITIZER_EXCLUDE:Cases/ActiveSolverTest.*/$config"
  done

  # clang++-14 with KFMM_ENABLE_FUZZING (ASan + UBSan, plus libFuzzer's coverage feedback): the
  # fuzz stage links its targets against this library instead of building its own. A directory
  # left by a g++ sanitizer build (before this was so) is started afresh: CMake cannot switch it.
  if [ -f "$SANITIZER_BUILD/CMakeCache.txt" ] && ! grep -q '^KFMM_ENABLE_FUZZING:BOOL=ON$' "$SANITIZER_BUILD/CMakeCache.txt"; then
    rm -rf "$SANITIZER_BUILD" && mkdir -p "$SANITIZER_BUILD"
  fi
  if stage "configure sanitizers" configure "$SANITIZER_BUILD" -DKFMM_ENABLE_FUZZING=ON \
      -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14 \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
      -DKFMM_ENABLE_BENCHMARKS=OFF -DKFMM_EXPANSION_ORDERS=7 -DKFMM_SANITIZE_TESTS=OFF \
      -DKFMM_TEST_EXCLUDE="$SANITIZER_EXCLUDE" \
    && stage "build sanitizers" build "$SANITIZER_BUILD" kfmm_test_core kfmm_test_comm kfmm_test_fmm \
         kfmm_test_neighbors kfmm_test_integrate kfmm_test_io; then
    SANITIZER_BUILT=1
    # The tests set ASAN_OPTIONS=detect_leaks=0 themselves (MPI and Kokkos keep allocations
    # to exit); every other report aborts the test. One-rank tests at 2 threads, in both kernel
    # shapes (the 1-thread runs repeat the same code). Only the test executables are built: the
    # CLI's own code is a thin layer over io and fmm, and the install test builds an outside
    # project, which sanitizers have nothing to add to.
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      stage "tests sanitizers (ctest -L unit)" run_ctest "$SANITIZER_BUILD" -L unit -LE 'slow|kokkos5|cuda|hard' \
        -E '[.]np1[.]t1$|install|^apps[.]'
  fi
fi

if [ "${KFMM_SKIP_FUZZ:-0}" != 1 ]; then
  # Includes the build of the fuzz targets (one expansion order, no tests); the setup it runs
  # again returns at once.
  # On the sanitizer stage's library when it was built (only the fuzz targets are compiled).
  FUZZ_BUILD=$ROOT/build-fuzz
  [ "${SANITIZER_BUILT:-0}" = 1 ] && FUZZ_BUILD=$SANITIZER_BUILD
  KFMM_FUZZ_BUILD_DIR=${KFMM_FUZZ_BUILD_DIR:-$FUZZ_BUILD} KFMM_JOBS=$JOBS \
    stage "fuzz (60 s per target)" bash "$ROOT/scripts/fuzz.sh" 60
fi
finish
