#!/usr/bin/env bash
# Accuracy and cost of opening-criterion settings on every generated distribution:
#   tools/accuracy_sweep.sh [KFMM_BINARY] -- SETTING...
# Each SETTING is a quoted list of `kfmm bench` options (e.g. "--mac angle --theta 0.75" or
# "--mac relative --tolerance 1e-3"); every setting runs on every kind of KFMM_SWEEP_KINDS.
# Prints one Markdown row per (kind, setting): seconds per evaluation (and of the first, which
# for --mac relative includes estimating |a|), P2P pairs and M2L per particle, force E,
# per-particle p99, p99.9 and max of the relative force error against double direct summation,
# and where the max is (its particle's distance from the centre of mass).
# Environment: KFMM_SWEEP_N (particles, default 20000), KFMM_SWEEP_SAMPLES (targets checked,
# default all), KFMM_SWEEP_KINDS (default: every kind of `kfmm ic`), KFMM_SWEEP_REPEAT (2),
# KFMM_SWEEP_SOFTENING (Plummer ε, 1e-3).
set -euo pipefail
export OMP_PROC_BIND=${OMP_PROC_BIND:-false} OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
KFMM=${1:-build/apps/kfmm}
shift || true
[ "${1:-}" = "--" ] && shift
[ $# -gt 0 ] || { echo "usage: $0 [KFMM_BINARY] -- \"bench options\" ..." >&2; exit 2; }
N=${KFMM_SWEEP_N:-20000}
SAMPLES=${KFMM_SWEEP_SAMPLES:-$N}
KINDS=${KFMM_SWEEP_KINDS:-"uniform plummer clumps hernquist nfw satellites mass_spectrum disk filament"}
REPEAT=${KFMM_SWEEP_REPEAT:-2}
SOFTENING=${KFMM_SWEEP_SOFTENING:-1e-3}
[ -x "$KFMM" ] || { echo "no kfmm binary at '$KFMM'; build it or pass its path" >&2; exit 2; }

printf '| kind | setting | s / evaluation | first s | P2P / particle | M2L / particle | E | p99 | p99.9 | max | max at r |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|\n'
for kind in $KINDS; do
  for setting in "$@"; do
    # shellcheck disable=SC2086  # the setting is a list of options
    json=$("$KFMM" bench --ic "$kind" --n "$N" --samples "$SAMPLES" --repeat "$REPEAT" --softening "$SOFTENING" \
      $setting --json | tail -n 1)
    python3 -c '
import json, sys
r = json.loads(sys.argv[1])
print("| {} | {} | {:.3f} | {:.3f} | {:.0f} | {:.1f} | {:.2e} | {:.2e} | {:.2e} | {:.2e} | {:.3g} |".format(
    sys.argv[2], sys.argv[3], r["seconds"], r["first_seconds"], r["p2p_pairs"] / r["n"], r["m2l"] / r["n"],
    r["force_l2"], r["p99"], r["p999"], r["max"], r["max_radius"]))
' "$json" "$kind" "$setting"
  done
done
