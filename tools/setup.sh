#!/usr/bin/env bash
# Installs everything mimic needs on a bare Debian 12 machine and fetches its assets.
# Non-interactive and idempotent: packages already present are not reinstalled, verified assets are
# not fetched again. Needs root (or sudo) only when a package is missing.
#   tools/setup.sh            packages + assets
#   tools/setup.sh --assets   assets only
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# Build and run-time packages. libopenblas0-openmp is named explicitly: with --no-install-recommends
# libtorch would otherwise run on the reference BLAS (measured 60x slower), and the pthread OpenBLAS
# fights LibTorch's OpenMP threads. python3-torch/-numpy/-h5py serve the test-fixture generators only.
# libcairo2-dev + fonts-dejavu-core draw the figures of `mimic report`; chromium (headless) only checks in a
# test that its report.html renders (122 MB download, ~35 s to install). libgloo-dev: the Gloo headers LibTorch's
# ProcessGroupGloo.hpp includes (distributed training, src/distributed/). libclang-rt-dev: clang's sanitizer and
# libFuzzer runtimes (only recommended by clang, so --no-install-recommends leaves them out; tools/sanitize.sh, run by
# .ci/run, and bench/fuzz.sh link them).
PACKAGES=(
  build-essential cmake ninja-build clang libclang-rt-dev ccache pkg-config git ca-certificates
  libtorch-dev libgloo-dev libopenblas0-openmp libhdf5-dev libeigen3-dev libcli11-dev libgtest-dev nlohmann-json3-dev
  libcairo2-dev fonts-dejavu-core chromium
  nodejs npm jq
  python3-torch python3-numpy python3-h5py hdf5-tools
)

missing=()
for p in "${PACKAGES[@]}"; do
  # nodejs may come from another source with npm bundled: accept a working npm instead of the package
  if [ "$p" = npm ] && command -v npm >/dev/null 2>&1; then continue; fi
  if [ "$p" = nodejs ] && command -v node >/dev/null 2>&1; then continue; fi
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ "${1:-}" != "--assets" ] && [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Make sure the OpenMP OpenBLAS is the BLAS in use (another BLAS may have been installed earlier).
if command -v update-alternatives >/dev/null 2>&1; then
  blas=/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3
  if [ -e "$blas" ] && [ "$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3)" != "$blas" ]; then
    ${SUDO:-} update-alternatives --set libblas.so.3-x86_64-linux-gnu "$blas" >/dev/null || true
    ${SUDO:-} update-alternatives --set liblapack.so.3-x86_64-linux-gnu \
      /usr/lib/x86_64-linux-gnu/openblas-openmp/liblapack.so.3 >/dev/null || true
  fi
fi

node "$here/fetch-assets.mjs"
