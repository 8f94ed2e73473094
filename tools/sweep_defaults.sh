#!/usr/bin/env bash
# Error-versus-cost sweep that chose kfmm's FMM defaults (README, "Choosing the defaults").
# Usage: tools/sweep_defaults.sh [KFMM_BINARY] [N] > sweep.jsonl   (one `kfmm bench --json` line per run)
# The grid can be narrowed: ORDERS="5 6" THETAS="0.6 0.65" LEAVES=96 SAMPLES=20000 (SAMPLES ≥ N
# checks every particle against direct summation, as the default accuracy test does).
set -euo pipefail
kfmm=${1:-build/apps/kfmm}
n=${2:-200000}
export OMP_PROC_BIND=${OMP_PROC_BIND:-false} OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
for ic in clumps plummer uniform; do
  for order in ${ORDERS:-4 5 6}; do
    for theta in ${THETAS:-0.5 0.55 0.6 0.65 0.7 0.75}; do
      for leaf in ${LEAVES:-64 96 128}; do
        "$kfmm" bench --ic "$ic" --n "$n" --order "$order" --theta "$theta" --leaf-size "$leaf" \
          --repeat "${REPEAT:-1}" --samples "${SAMPLES:-1000}" --json
      done
    done
  done
done
