#!/usr/bin/env bash
# Fresh machine → green tests: installs what is missing (tools/setup.sh), configures, builds and runs
# the whole test suite with ctest. This is the README's test command and what .ci/run calls.
#   MIMIC_BUILD_DIR   build folder (default: build)
#   MIMIC_TEST_HEAVY  1: also the tests labelled heavy (every recipe end to end at a toy size, ~12 minutes on 2 cores),
#                     which the test command leaves out to stay within CI's time; run them when a recipe changes
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
# the library's tests (label gtest) in one process per core (tools/gtest_shards.sh says why), then the others
status=0
bash "$root/tools/gtest_shards.sh" "$build/tests/mimic_tests" || status=1
skip='gtest|heavy'
[ "${MIMIC_TEST_HEAVY:-0}" = 1 ] && skip=gtest
ctest --test-dir "$build" --output-on-failure --timeout 900 --no-tests=error -LE "$skip" || status=1  # none found fails too
echo "test.sh: tests took $(( $(date +%s) - start )) s" >&2
exit $status
