#!/usr/bin/env bash
# Fresh machine → the main job: installs what is missing (tools/setup.sh), builds the `mimic` CLI and
# runs recipes/quickstart.sh. This is the README's first command.
#   MIMIC_BUILD_DIR   build folder (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash tools/setup.sh
build=${MIMIC_BUILD_DIR:-$root/build}
bash tools/configure.sh "$build"
cmake --build "$build" -j"$(nproc)" --target mimic_cli
MIMIC="$build/mimic" bash recipes/quickstart.sh "$@"
