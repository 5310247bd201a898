#!/usr/bin/env bash
# Configures a build folder: clang++ + Ninja + ccache when present (clang builds LibTorch code ~1.5x
# faster than g++ here), Release.   tools/configure.sh [--suite] [BUILD_DIR] [extra cmake args...]
# The extra arguments apply to a folder configured before too. --suite adds the settings the whole test suite needs
# (tools/test.sh): tests on, HDF5 and cairo looked for and required — so that a reused build folder configured
# without them (-DMIMIC_BUILD_TESTS=OFF, -DMIMIC_WITH_CAIRO=OFF, ...) does not silently run fewer tests.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
suite=()
if [ "${1:-}" = --suite ]; then
  suite=(-DMIMIC_BUILD_TESTS=ON -DMIMIC_WITH_HDF5=ON -DMIMIC_WITH_CAIRO=ON -DMIMIC_REQUIRE_FULL=ON)
  shift
fi
build=${1:-$root/build}
shift || true
args=(-S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release)
command -v ninja >/dev/null 2>&1 && args+=(-G Ninja)
command -v clang++ >/dev/null 2>&1 && args+=(-DCMAKE_CXX_COMPILER=clang++)
command -v ccache >/dev/null 2>&1 && args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
if [ -f "$build/CMakeCache.txt" ]; then
  cmake "$build" "${suite[@]}" "$@" >/dev/null
else
  cmake "${args[@]}" "${suite[@]}" "$@" >/dev/null
fi
