#!/bin/bash
# `kfmm forces --check-ids FILE` end to end on 500 uniform particles: the listed particles (ids
# repeated, a comment) are the ones compared; a word that is not an id, an id that no particle
# has, a file without ids and --check together with --check-ids are errors naming the value,
# and the unknown id is found before any output is written.
source "$(dirname "$(readlink -f "$0")")/cli_test_scratch.sh" "$1"
# expect_error MESSAGE ARGS...: the command fails and prints MESSAGE.
expect_error() {
  local message=$1
  shift
  local out
  if out=$("$kfmm" forces ics.hdf5 -o out.hdf5 "$@" 2>&1); then fail "$* succeeded: $out"; fi
  grep -qF -- "$message" <<<"$out" || fail "$*: no '$message' in: $out"
}
"$kfmm" ic uniform --n 500 -o ics.hdf5 >/dev/null || fail "kfmm ic"
printf '# particles to compare\n3 7\n11 7  # 7 again\n' >ids.txt
out=$("$kfmm" forces ics.hdf5 -o out.hdf5 --check-ids ids.txt 2>&1) || fail "--check-ids ids.txt: $out"
grep -q '(3 targets)' <<<"$out" || fail "not 3 targets: $out"
rm -f out.hdf5
printf '3 x7\n' >bad.txt
expect_error "'x7' on line 1 of 'bad.txt' is not a particle id" --check-ids bad.txt
printf '3\n900\n' >unknown.txt
expect_error "1 of the 2 listed target ids are not ids of the particles (the first: 900)" --check-ids unknown.txt
[ -e out.hdf5 ] && fail "out.hdf5 written although an id is unknown"
printf '# nothing\n' >empty.txt
expect_error "lists no particle ids" --check-ids empty.txt
expect_error "excludes" --check-ids ids.txt --check 5
echo "forces_check_ids: all checks passed"
