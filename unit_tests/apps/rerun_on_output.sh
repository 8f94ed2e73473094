#!/bin/bash
# kfmm commands on files that kfmm commands wrote (which already carry those commands' /Parameters):
# `kfmm forces` on a `kfmm run` snapshot and on its own output, `kfmm knn` on its own output
# (periodic first, then open: the stale box size goes). Each output's parameters are the ones
# of the command that wrote it (read back with `kfmm info`).
source "$(dirname "$(readlink -f "$0")")/cli_test_scratch.sh" "$1"
"$kfmm" run --set ic.n=400 --set time.end=0.01 --set time.outputs=1 --set time.steps_per_output=2 \
  --set force.softening=spline -o run >/dev/null 2>&1 || fail "kfmm run"
snapshot=run/snapshot_001.hdf5
[ -s "$snapshot" ] || fail "no snapshot"
"$kfmm" forces "$snapshot" -o f1.hdf5 --order 4 --theta 0.5 --kernel plummer >/dev/null 2>&1 || fail "forces on a run snapshot"
"$kfmm" forces f1.hdf5 -o f2.hdf5 --order 5 --theta 0.6 >/dev/null 2>&1 || fail "forces on its own output"
info=$("$kfmm" info f2.hdf5 2>&1) || fail "info f2: $info"
grep -q "ExpansionOrder.*5" <<<"$info" || fail "ExpansionOrder is not 5: $info"
grep -q "OpeningAngle.*0.6" <<<"$info" || fail "OpeningAngle is not 0.6: $info"
grep -q "Softening.*plummer" <<<"$info" || fail "Softening is not plummer: $info"
"$kfmm" knn f2.hdf5 --k 3 -o k1.hdf5 --box 1000 >/dev/null 2>&1 || fail "knn periodic"
"$kfmm" knn k1.hdf5 --k 4 -o k2.hdf5 >/dev/null 2>&1 || fail "knn on its own output"
info=$("$kfmm" info k2.hdf5 2>&1) || fail "info k2: $info"
grep -q "KNNNeighbours.*4" <<<"$info" || fail "KNNNeighbours is not 4: $info"
grep -q "KNNBoxSize" <<<"$info" && fail "a stale KNNBoxSize: $info"
echo "rerun_on_output: all checks passed"
