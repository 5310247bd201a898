#!/usr/bin/env bash
# Build.TheTestCommandRestoresSettingsThatDropTests: tools/test.sh reuses its build folder; a folder configured
# earlier without tests or without cairo (cached settings) must not turn the README's test command into a green run
# of fewer tests. tools/configure.sh --suite, which test.sh calls, sets them back; and where the full library cannot
# be built, it refuses in one line naming what is missing instead of configuring a smaller suite.
#   reused_build_test.sh SOURCE_DIR
set -euo pipefail
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cache() { grep -m1 "^$1:" "$work/b/CMakeCache.txt" | cut -d= -f2; }
# a folder configured to drop tests
bash "$src/tools/configure.sh" "$work/b" -DMIMIC_BUILD_TESTS=OFF -DMIMIC_WITH_CAIRO=OFF -DMIMIC_USE_PCH=OFF
[ "$(cache MIMIC_BUILD_TESTS)" = OFF ] && [ "$(cache MIMIC_WITH_CAIRO)" = OFF ] ||
  { echo "reused_build_test: the first configuration did not take"; exit 1; }
[ ! -f "$work/b/tests/CTestTestfile.cmake" ] || { echo "reused_build_test: tests configured though off"; exit 1; }
# reused by the test command's configuration
bash "$src/tools/configure.sh" --suite "$work/b"
[ "$(cache MIMIC_BUILD_TESTS)" = ON ] && [ "$(cache MIMIC_WITH_CAIRO)" = ON ] ||
  { echo "reused_build_test: --suite kept MIMIC_BUILD_TESTS=$(cache MIMIC_BUILD_TESTS) MIMIC_WITH_CAIRO=$(cache MIMIC_WITH_CAIRO)"; exit 1; }
for t in Fuzz.ReplaysTheCorpusOf_config Recipes.QuickstartEndToEndAtToySize Recipes.EveryOtherRecipeEndToEndAtToySize Install.ConsumerExampleBuilds; do
  grep -q "$t" "$work/b/tests/CTestTestfile.cmake" || { echo "reused_build_test: $t is not among the configured tests"; exit 1; }
done
# without cairo the suite's configuration refuses, naming it
if bash "$src/tools/configure.sh" --suite "$work/c" -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON -DMIMIC_USE_PCH=OFF 2>"$work/err"; then
  echo "reused_build_test: --suite configured a build without cairo"; exit 1
fi
grep -q "the whole test suite needs cairo" "$work/err" || { cat "$work/err"; echo "reused_build_test: no line naming cairo"; exit 1; }
echo "reused_build_test: ok"
