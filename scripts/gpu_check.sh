#!/usr/bin/env bash
# GPU run kit: on a machine with an NVIDIA GPU and a Kokkos built with CUDA, builds kfmm for it,
# runs the unit tests, times `kfmm bench` at 1e6 and 1e7 particles and prints one summary
# (pass/fail, particles/s, accuracy, peak memory per particle). Not run by CI.
#
#   Kokkos_ROOT=/path/to/kokkos-cuda bash scripts/gpu_check.sh
#
# The other dependencies (MPI, parallel HDF5, yaml-cpp, CLI11, fmt, GoogleTest) must be findable
# by CMake (CMAKE_PREFIX_PATH, modules); scripts/setup.sh installs them on Debian.
# Environment:
#   Kokkos_ROOT          Kokkos installation with KOKKOS_ENABLE_CUDA (required)
#   KFMM_GPU_BUILD_DIR   build directory (default build-gpu/ in the repository)
#   KFMM_GPU_CXX         C++ compiler (default: the one Kokkos was configured with, or its nvcc_wrapper)
#   KFMM_GPU_CMAKE_ARGS  extra CMake arguments, e.g. "-DKFMM_ENABLE_GPU_AWARE_MPI=ON -DCMAKE_PREFIX_PATH=..."
#   KFMM_GPU_JOBS        parallel compile jobs (default: nproc)
#   KFMM_GPU_TARGETS     build targets (default: all; the tests need all)
#   KFMM_GPU_SIZES       particle counts to bench (default "1000000 10000000")
#   KFMM_GPU_MAX_ERROR   largest accepted force error E of the bench (default 1e-3)
#   KFMM_GPU_SKIP_TESTS=1  skip ctest (build and bench only)
# Exit status: 0 when everything passed, 1 when a stage failed, 2 when a prerequisite is missing.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${KFMM_GPU_BUILD_DIR:-$ROOT/build-gpu}
JOBS=${KFMM_GPU_JOBS:-$(nproc 2>/dev/null || echo 4)}
SIZES=${KFMM_GPU_SIZES:-"1000000 10000000"}
MAX_ERROR=${KFMM_GPU_MAX_ERROR:-1e-3}

say() { printf '[gpu_check] %s\n' "$*"; }

# ---------------------------------------------------------------------------------------------
# 1. Prerequisites: every missing one is reported (with its fix) before anything is built.
# ---------------------------------------------------------------------------------------------
MISSING=()
missing() { MISSING+=("$1"); }

GPU_NAME=""
if ! command -v nvidia-smi >/dev/null 2>&1; then
  missing "no NVIDIA GPU: nvidia-smi is not in PATH. Run this on a GPU node (e.g. inside 'srun --gpus=1 --pty bash') with the NVIDIA driver installed, or load the module that provides it (e.g. 'module load cuda')."
else
  gpu_list=$(nvidia-smi --query-gpu=name,memory.total,compute_cap --format=csv,noheader 2>&1)
  status=$?
  if [ $status -ne 0 ] || [ -z "$gpu_list" ]; then
    missing "no NVIDIA GPU: 'nvidia-smi' failed or lists no GPU (exit $status: ${gpu_list:-no output}). Run this on a node with a GPU allocated to the job (e.g. 'srun --gpus=1'), and check CUDA_VISIBLE_DEVICES."
  else
    GPU_NAME=$(head -n1 <<<"$gpu_list")
  fi
fi

KOKKOS_CONFIG_H=""
KOKKOS_CMAKE_DIR=""
if [ -z "${Kokkos_ROOT:-}" ]; then
  missing "no CUDA Kokkos: Kokkos_ROOT is not set. Build Kokkos (>= 3.4) with CUDA, e.g. 'cmake -S kokkos -B build -DKokkos_ENABLE_CUDA=ON -DKokkos_ENABLE_SERIAL=ON -DKokkos_ARCH_HOPPER90=ON -DCMAKE_CXX_STANDARD=17 -DCMAKE_INSTALL_PREFIX=\$HOME/kokkos-cuda' (Kokkos < 4 also needs -DKokkos_ENABLE_CUDA_LAMBDA=ON), install it and 'export Kokkos_ROOT=\$HOME/kokkos-cuda'."
elif [ ! -d "$Kokkos_ROOT" ]; then
  missing "no CUDA Kokkos: Kokkos_ROOT=$Kokkos_ROOT is not a directory. Point it at the installation prefix of a Kokkos built with CUDA (the directory holding include/ and lib/)."
else
  for candidate in "$Kokkos_ROOT/include/KokkosCore_config.h" "$Kokkos_ROOT/include/kokkos/KokkosCore_config.h"; do
    if [ -f "$candidate" ]; then KOKKOS_CONFIG_H=$candidate; break; fi
  done
  for candidate in "$Kokkos_ROOT"/lib/cmake/Kokkos "$Kokkos_ROOT"/lib64/cmake/Kokkos "$Kokkos_ROOT"/lib/*/cmake/Kokkos "$Kokkos_ROOT"/share/cmake/Kokkos; do
    if [ -f "$candidate/KokkosConfig.cmake" ]; then KOKKOS_CMAKE_DIR=$candidate; break; fi
  done
  if [ -z "$KOKKOS_CONFIG_H" ]; then
    missing "no CUDA Kokkos: no KokkosCore_config.h under $Kokkos_ROOT/include. Kokkos_ROOT must be an installed Kokkos (the CMAKE_INSTALL_PREFIX of its build), not its source or build tree."
  elif ! grep -Eq '^[[:space:]]*#[[:space:]]*define[[:space:]]+KOKKOS_ENABLE_CUDA([[:space:]]|$)' "$KOKKOS_CONFIG_H"; then
    backends=$(grep -Eo '^[[:space:]]*#[[:space:]]*define[[:space:]]+KOKKOS_ENABLE_(SERIAL|OPENMP|THREADS|CUDA|HIP|SYCL|HPX|OPENMPTARGET)([[:space:]]|$)' "$KOKKOS_CONFIG_H" |
      awk '{print $NF}' | sed 's/KOKKOS_ENABLE_//' | paste -sd, -)
    missing "no CUDA Kokkos: $KOKKOS_CONFIG_H does not define KOKKOS_ENABLE_CUDA (backends: ${backends:-none found}). Rebuild Kokkos with -DKokkos_ENABLE_CUDA=ON and the GPU's architecture (e.g. -DKokkos_ARCH_HOPPER90=ON) and set Kokkos_ROOT to that installation."
  else
    if grep -Eq 'define[[:space:]]+KOKKOS_VERSION[[:space:]]+3' "$KOKKOS_CONFIG_H" &&
      ! grep -Eq '^[[:space:]]*#[[:space:]]*define[[:space:]]+KOKKOS_ENABLE_CUDA_LAMBDA' "$KOKKOS_CONFIG_H"; then
      missing "Kokkos 3 in $Kokkos_ROOT was built without KOKKOS_ENABLE_CUDA_LAMBDA, which kfmm's device lambdas need: rebuild it with -DKokkos_ENABLE_CUDA_LAMBDA=ON."
    fi
  fi
  if [ -z "$KOKKOS_CMAKE_DIR" ]; then
    missing "no Kokkos CMake package: no KokkosConfig.cmake under $Kokkos_ROOT/lib*/cmake/Kokkos. Install Kokkos with CMake ('cmake --install') so that find_package(Kokkos) works."
  fi
fi

for tool in cmake ctest python3; do
  command -v "$tool" >/dev/null 2>&1 || missing "'$tool' is not in PATH: install it or load its module (cmake >= 3.16; python3 reads the bench's JSON)."
done

if [ ${#MISSING[@]} -gt 0 ]; then
  say "cannot run: ${#MISSING[@]} prerequisite(s) missing" >&2
  for problem in "${MISSING[@]}"; do printf '  - %s\n' "$problem" >&2; done
  exit 2
fi

# The GPU's compute capability should match an architecture Kokkos was built for (else kernels
# fail to launch or run through a JIT of PTX): warn, since a newer GPU may still run.
capability=$(awk -F', *' '{print $3}' <<<"$GPU_NAME" | tr -d '.')
if [ -n "$capability" ] && ! grep -Eq "define[[:space:]]+KOKKOS_ARCH_[A-Z_]*${capability}([[:space:]]|$)" "$KOKKOS_CONFIG_H"; then
  archs=$(grep -Eo 'define[[:space:]]+KOKKOS_ARCH_[A-Z_]+[0-9]+' "$KOKKOS_CONFIG_H" | awk '{print $2}' | paste -sd, -)
  say "warning: the GPU has compute capability ${capability} but Kokkos was built for ${archs:-no listed GPU architecture}; rebuild Kokkos with the matching -DKokkos_ARCH_... if kernels fail"
fi

# ---------------------------------------------------------------------------------------------
# 2. Compiler: what Kokkos was configured with (KokkosConfigCommon.cmake records it); with nvcc
#    as Kokkos' compiler that is Kokkos' nvcc_wrapper.
# ---------------------------------------------------------------------------------------------
cmake_value() {
  sed -n "s/^[[:space:]]*[Ss][Ee][Tt](${1}[[:space:]]\{1,\}\"\{0,1\}\([^\")]*\)\"\{0,1\}).*/\1/p" \
    "$KOKKOS_CMAKE_DIR"/KokkosConfigCommon.cmake 2>/dev/null | head -n1
}
CXX_COMPILER=${KFMM_GPU_CXX:-}
if [ -z "$CXX_COMPILER" ]; then
  kokkos_cxx=$(cmake_value Kokkos_CXX_COMPILER)
  kokkos_cxx_id=$(cmake_value Kokkos_CXX_COMPILER_ID)
  if [ "$kokkos_cxx_id" = NVIDIA ] && [ -x "$Kokkos_ROOT/bin/nvcc_wrapper" ] &&
    { [ -z "$kokkos_cxx" ] || [ ! -x "$kokkos_cxx" ]; }; then
    CXX_COMPILER=$Kokkos_ROOT/bin/nvcc_wrapper
  elif [ -n "$kokkos_cxx" ] && [ -x "$kokkos_cxx" ]; then
    CXX_COMPILER=$kokkos_cxx
  elif [ -x "$Kokkos_ROOT/bin/nvcc_wrapper" ]; then
    CXX_COMPILER=$Kokkos_ROOT/bin/nvcc_wrapper
  else
    say "cannot find the compiler Kokkos was built with ('${kokkos_cxx:-unrecorded}', id '${kokkos_cxx_id:-?}') nor $Kokkos_ROOT/bin/nvcc_wrapper: set KFMM_GPU_CXX to it" >&2
    exit 2
  fi
fi

mkdir -p "$BUILD/gpu_check" || exit 2
LOGS=$BUILD/gpu_check
say "GPU: $GPU_NAME"
say "Kokkos: $Kokkos_ROOT ($(grep -Eo 'define[[:space:]]+KOKKOS_VERSION[[:space:]]+[0-9]+' "$KOKKOS_CONFIG_H" | awk '{print $3}'))"
say "compiler: $CXX_COMPILER; build: $BUILD; logs: $LOGS"

STAGES=()
FAILED=0
# stage NAME LOG COMMAND...: runs a stage with its output in LOG, records the result.
stage() {
  local name=$1 log=$2; shift 2
  local start=$SECONDS
  say "$name ..."
  "$@" >"$log" 2>&1
  local status=$?
  local result=ok
  if [ $status -ne 0 ]; then
    result="FAILED (exit $status, see $log)"
    FAILED=1
    tail -n 20 "$log" | sed 's/^/    | /'
  fi
  STAGES+=("$(printf '%-22s %6ds  %s' "$name" $((SECONDS - start)) "$result")")
  return $status
}

# ---------------------------------------------------------------------------------------------
# 3. Build, test, bench.
# ---------------------------------------------------------------------------------------------
# shellcheck disable=SC2086  # KFMM_GPU_CMAKE_ARGS is a list of arguments
stage configure "$LOGS/configure.log" cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$CXX_COMPILER" -DKokkos_ROOT="$Kokkos_ROOT" -DKFMM_ENABLE_BENCHMARKS=OFF \
  ${KFMM_GPU_CMAKE_ARGS:-}
built=0
targets=()
for target in ${KFMM_GPU_TARGETS:-}; do targets+=(--target "$target"); done
if [ $FAILED -eq 0 ] && stage build "$LOGS/build.log" cmake --build "$BUILD" -j "$JOBS" "${targets[@]}"; then built=1; fi

TESTS="not run"
if [ $built -eq 1 ] && [ "${KFMM_GPU_SKIP_TESTS:-0}" != 1 ]; then
  stage "unit tests" "$LOGS/ctest.log" ctest --test-dir "$BUILD" -LE slow --output-on-failure
  TESTS=$(grep -E 'tests passed|tests failed' "$LOGS/ctest.log" | tail -n1)
  TESTS=${TESTS:-"no ctest summary (see $LOGS/ctest.log)"}
fi

BENCH_LINES=()
if [ $built -eq 1 ]; then
  for n in $SIZES; do
    json=$LOGS/bench_$n.json
    if stage "bench n=$n" "$json" "$BUILD/apps/kfmm" bench --n "$n" --json; then
      line=$(python3 - "$json" "$MAX_ERROR" <<'EOF'
import json, sys
path, max_error = sys.argv[1], float(sys.argv[2])
lines = [l for l in open(path) if l.lstrip().startswith("{")]
r = json.loads(lines[-1])
m = r.get("memory", {})
ok = r["force_l2"] <= max_error
print("{:>10} {:>9.4f} s {:>10.3g}/s  E={:<9.3g} {:>7.0f} B/particle {:>8.1f} MB  {}".format(
    r["n"], r["seconds"], r["particles_per_second"], r["force_l2"],
    m.get("device_bytes_per_particle_max", float("nan")), m.get("device_peak_bytes_max", 0) / 1e6,
    "ok" if ok else "FAILED (E > {:g})".format(max_error)))
sys.exit(0 if ok else 1)
EOF
      ) || FAILED=1
      BENCH_LINES+=("${line:-could not read $json}")
    else
      BENCH_LINES+=("$(printf '%10s  FAILED (see %s)' "$n" "$json")")
    fi
  done
fi

# ---------------------------------------------------------------------------------------------
# 4. Summary.
# ---------------------------------------------------------------------------------------------
printf '\n===== kfmm GPU check =====\n'
printf 'GPU       %s\n' "$GPU_NAME"
printf 'Kokkos    %s\n' "$Kokkos_ROOT"
printf 'commit    %s\n' "$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)"
printf 'stages\n'
printf '  %s\n' "${STAGES[@]}"
printf 'tests     %s\n' "$TESTS"
if [ ${#BENCH_LINES[@]} -gt 0 ]; then
  printf 'bench (defaults: p = 7, relative α = 1e-5, θ = 0.95, float; 1 rank; device space peak memory)\n'
  printf '  %10s %11s %12s  %-11s %18s %11s\n' N time rate accuracy 'memory' 'peak'
  printf '  %s\n' "${BENCH_LINES[@]}"
fi
if [ $FAILED -ne 0 ]; then
  printf 'result    FAIL\n'
  exit 1
fi
printf 'result    PASS\n'
exit 0
