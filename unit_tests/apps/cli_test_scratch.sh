# Sourced by the CLI test scripts: `kfmm` = the binary given as the script's first argument, a
# scratch directory (removed on exit) as the working directory, and fail().
set -u
kfmm=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
fail() { echo "FAILED: $*"; exit 1; }
