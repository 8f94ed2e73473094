#!/usr/bin/env bash
# Installs everything kfmm needs on a fresh Debian 12 machine (run as root) and builds
# Kokkos 3.4.1 + Kokkos Kernels 3.4.1 (Serial + OpenMP) from Debian's Trilinos source tarball.
#
# Idempotent: a second run checks stamps and returns in seconds.
# Environment:
#   KFMM_DEPS      where downloads and the Kokkos install live   (default: ~/.cache/kfmm)
#   Kokkos_ROOT    use this Kokkos (any backend) instead of building one
#   KFMM_SKIP_APT  set to 1 to skip the Debian packages (when they are known to be there)
#   KFMM_DEBIAN_ARCHIVE  the Debian archive's base address (default: read from apt's configuration)
# Prints, on its last two lines, the CMake prefix path to use ("KFMM_PREFIX_PATH=...") and the
# Kokkos 5.2.2 headers of the C++20 syntax check ("KFMM_KOKKOS5_INCLUDE=...").
set -euo pipefail

DEPS=${KFMM_DEPS:-$HOME/.cache/kfmm}
PREFIX=$DEPS/kokkos-3.4.1
TARBALL_PATH=pool/main/t/trilinos/trilinos_13.2.0.orig.tar.gz
TARBALL_SHA256=0ddb47784ba7b8a6b9a07a4822b33be508feb4ccd54301b2a5d10c9e54524b90
TRILINOS_TOP=Trilinos-trilinos-release-13-2-0
KOKKOS5_DEB_PATH=pool/main/k/kokkos/libkokkos-dev_5.2.2-2_amd64.deb

log() { printf '[kfmm setup] %s\n' "$*" >&2; }
die() { printf '[kfmm setup] error: %s\n' "$*" >&2; exit 1; }

APT_PACKAGES=(build-essential cmake ninja-build curl ca-certificates
  libopenmpi-dev openmpi-bin libhdf5-openmpi-dev hdf5-tools
  libyaml-cpp-dev libcli11-dev libfmt-dev
  googletest libgtest-dev libbenchmark-dev
  python3 python3-h5py python3-matplotlib python3-numpy
  clang-14 libclang-rt-14-dev libomp-14-dev)  # libFuzzer + sanitizers for scripts/fuzz.sh; OpenMP for Kokkos under clang

install_packages() {
  [ "${KFMM_SKIP_APT:-0}" = 1 ] && return
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && { log "Debian packages: all present"; return; }
  [ "$(id -u)" = 0 ] || die "missing Debian packages (${missing[*]}); run this script as root or install them with apt-get"
  log "installing Debian packages: ${missing[*]}"
  apt-get update -qq || die "apt-get update failed; check the network and /etc/apt/sources.list.d/"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install failed for: ${missing[*]}"
}

# The Debian archive's base address, read from the machine's apt configuration
# (deb822 .sources files first, then one-line sources.list entries).
debian_archive() {
  if [ -n "${KFMM_DEBIAN_ARCHIVE:-}" ]; then printf '%s' "${KFMM_DEBIAN_ARCHIVE%/}"; return; fi
  local uri=""
  if compgen -G "/etc/apt/sources.list.d/*.sources" >/dev/null; then
    uri=$(awk 'tolower($1)=="uris:" {print $2}' /etc/apt/sources.list.d/*.sources | grep -v security | grep -i debian | head -n1 || true)
  fi
  if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
    uri=$(awk '$1=="deb" {for (i=2;i<=NF;i++) if ($i ~ /^(https?|ftp):/) {print $i; break}}' /etc/apt/sources.list | grep -v security | head -n1 || true)
  fi
  [ -n "$uri" ] || die "cannot find a Debian archive in /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list; set KFMM_DEBIAN_ARCHIVE to its base address"
  printf '%s' "${uri%/}"
}

# download URL-path DEST [SHA256]: fetch once into the cache, verify the hash if given.
download() {
  local path=$1 dest=$2 sha=${3:-}
  if [ -f "$dest" ] && { [ -z "$sha" ] || echo "$sha  $dest" | sha256sum -c --status; }; then return 0; fi
  local url; url="$(debian_archive)/$path"
  log "downloading $path"
  curl -fsSL --retry 3 --connect-timeout 20 -o "$dest.part" "$url" \
    || { rm -f "$dest.part"; return 1; }
  if [ -n "$sha" ] && ! echo "$sha  $dest.part" | sha256sum -c --status; then
    rm -f "$dest.part"
    die "checksum mismatch for $path (expected sha256 $sha); the archive served a different file"
  fi
  mv "$dest.part" "$dest"
}

build_kokkos() {
  if [ -n "${Kokkos_ROOT:-}" ]; then
    log "using the Kokkos at Kokkos_ROOT=$Kokkos_ROOT (not building one)"
    PREFIX=$Kokkos_ROOT
    return
  fi
  if [ -f "$PREFIX/.kfmm-stamp" ]; then log "Kokkos 3.4.1: cached in $PREFIX"; return; fi
  mkdir -p "$DEPS"
  local tarball=$DEPS/trilinos_13.2.0.orig.tar.gz
  download "$TARBALL_PATH" "$tarball" "$TARBALL_SHA256" \
    || die "could not download $TARBALL_PATH from the Debian archive; check the network or put the file (sha256 $TARBALL_SHA256) at $tarball"
  local src=$DEPS/src
  rm -rf "$src" && mkdir -p "$src"
  log "extracting packages/kokkos and packages/kokkos-kernels"
  tar -xzf "$tarball" -C "$src" "$TRILINOS_TOP/packages/kokkos" "$TRILINOS_TOP/packages/kokkos-kernels"
  local jobs; jobs=$(nproc)
  log "building Kokkos 3.4.1 (Serial + OpenMP)"
  cmake -S "$src/$TRILINOS_TOP/packages/kokkos" -B "$src/build-kokkos" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$PREFIX" -DCMAKE_CXX_STANDARD=17 -DBUILD_SHARED_LIBS=ON \
    -DKokkos_ENABLE_SERIAL=ON -DKokkos_ENABLE_OPENMP=ON >"$src/kokkos.log" 2>&1 \
    || die "Kokkos configure failed; see $src/kokkos.log"
  cmake --build "$src/build-kokkos" -j "$jobs" >>"$src/kokkos.log" 2>&1 || die "Kokkos build failed; see $src/kokkos.log"
  cmake --install "$src/build-kokkos" >>"$src/kokkos.log" 2>&1
  log "building Kokkos Kernels 3.4.1"
  cmake -S "$src/$TRILINOS_TOP/packages/kokkos-kernels" -B "$src/build-kk" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$PREFIX" -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_CXX_STANDARD=17 -DBUILD_SHARED_LIBS=ON \
    -DKokkosKernels_INST_DOUBLE=OFF -DKokkosKernels_INST_ORDINAL_INT=OFF -DKokkosKernels_INST_OFFSET_INT=OFF \
    -DKokkosKernels_INST_OFFSET_SIZE_T=OFF -DKokkosKernels_INST_LAYOUTLEFT=OFF >"$src/kk.log" 2>&1 \
    || die "Kokkos Kernels configure failed; see $src/kk.log"
  cmake --build "$src/build-kk" -j "$jobs" >>"$src/kk.log" 2>&1 || die "Kokkos Kernels build failed; see $src/kk.log"
  cmake --install "$src/build-kk" >>"$src/kk.log" 2>&1
  rm -rf "$src"
  touch "$PREFIX/.kfmm-stamp"
}

# Headers of Debian's Kokkos 5.2.2 for the C++20 syntax check; optional (the check says "skipped").
fetch_kokkos5_headers() {
  local dir=$DEPS/kokkos-5.2.2
  [ -f "$dir/.kfmm-stamp" ] && return
  local deb=$DEPS/libkokkos-dev_5.2.2-2_amd64.deb
  if download "$KOKKOS5_DEB_PATH" "$deb"; then
    rm -rf "$dir" && mkdir -p "$dir"
    dpkg-deb -x "$deb" "$dir" && touch "$dir/.kfmm-stamp"
  else
    log "Kokkos 5.2.2 headers not available from the archive; the C++20 syntax check will report skipped"
    mkdir -p "$dir" && echo "the Debian archive did not serve $KOKKOS5_DEB_PATH" > "$dir/unavailable"
  fi
}

install_packages
build_kokkos
fetch_kokkos5_headers
echo "KFMM_PREFIX_PATH=$PREFIX"
echo "KFMM_KOKKOS5_INCLUDE=$DEPS/kokkos-5.2.2/usr/include/kokkos"
