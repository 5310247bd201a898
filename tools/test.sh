#!/usr/bin/env bash
# Fresh machine → green tests: installs what is missing (tools/setup.sh), configures, builds and runs
# the whole test suite with ctest. This is the README's test command and what .ci/run calls.
#   MIMIC_BUILD_DIR   build folder (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash tools/setup.sh
build=${MIMIC_BUILD_DIR:-$root/build}
bash tools/configure.sh --suite "$build"  # also resets a reused folder's settings that would drop tests
start=$(date +%s)
cmake --build "$build" -j"$(nproc)"
echo "test.sh: build took $(( $(date +%s) - start )) s" >&2
start=$(date +%s)
ctest --test-dir "$build" --output-on-failure --timeout 900 --no-tests=error  # no tests found is a failure, not a green run
echo "test.sh: tests took $(( $(date +%s) - start )) s" >&2
