#!/usr/bin/env bash
# Configures a build folder: clang++ + Ninja + ccache when present (clang builds LibTorch code ~1.5x
# faster than g++ here), Release.   tools/configure.sh [BUILD_DIR] [extra cmake args...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
shift || true
args=(-S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release)
command -v ninja >/dev/null 2>&1 && args+=(-G Ninja)
command -v clang++ >/dev/null 2>&1 && args+=(-DCMAKE_CXX_COMPILER=clang++)
command -v ccache >/dev/null 2>&1 && args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
if [ -f "$build/CMakeCache.txt" ]; then
  cmake "$build" >/dev/null
else
  cmake "${args[@]}" "$@" >/dev/null
fi
