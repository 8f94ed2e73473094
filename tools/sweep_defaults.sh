#!/usr/bin/env bash
# Error-versus-cost sweep that chose kfmm's FMM defaults (README, "Choosing the defaults").
# Usage: tools/sweep_defaults.sh [KFMM_BINARY] [N] > sweep.jsonl   (one `kfmm bench --json` line per run)
set -euo pipefail
kfmm=${1:-build/apps/kfmm}
n=${2:-200000}
export OMP_PROC_BIND=${OMP_PROC_BIND:-false} OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
for ic in clumps plummer uniform; do
  for order in 3 4 5 6; do
    for theta in 0.4 0.5 0.6 0.7; do
      for leaf in 32 64; do
        "$kfmm" bench --ic "$ic" --n "$n" --order "$order" --theta "$theta" --leaf-size "$leaf" \
          --repeat "${REPEAT:-1}" --samples "${SAMPLES:-1000}" --json
      done
    done
  done
done
