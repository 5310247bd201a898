#!/usr/bin/env bash
# A machine with LibTorch and a compiler but without HDF5, zlib and cairo (and then one with HDF5 and zlib but
# without cairo, below): configures mimic with those made
# unfindable, checks that the configuration says what it leaves out and drops the full library and its four
# commands, then compiles the CLI's units that change in such a build (mimic.cpp, cmd_bench.cpp,
# cmd_missing.cpp) and links nothing. The whole core-only build (every core room, the CLI, the core tests) is
# what tools/gpu-check.sh builds on a GPU machine, which has none of the three.
#   without_full_test.sh SOURCE_DIR CXX_COMPILER
set -euo pipefail
src=$1
cxx=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gen=()
command -v ninja >/dev/null 2>&1 && gen+=(-G Ninja)
if ! cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" "${gen[@]}" \
    -DMIMIC_USE_PCH=OFF -DCMAKE_DISABLE_FIND_PACKAGE_HDF5=ON -DCMAKE_DISABLE_FIND_PACKAGE_ZLIB=ON \
    -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON >"$work/log" 2>&1; then
  cat "$work/log" >&2
  echo "without_full_test: configure failed" >&2
  exit 1
fi
grep -q "mimic: without the full library; missing: HDF5 with its C++ API" "$work/log" ||
  { cat "$work/log" >&2; echo "without_full_test: no warning naming HDF5" >&2; exit 1; }
grep -q "cairo (Debian: libcairo2-dev)" "$work/log" ||
  { cat "$work/log" >&2; echo "without_full_test: no warning naming cairo" >&2; exit 1; }
cd "$work/build"
command -v ninja >/dev/null 2>&1 || { echo "without_full_test: needs ninja to list the build's objects" >&2; exit 1; }
targets=$(ninja -t targets all)
# the full library is not part of this build; the stand-ins are
if grep -qE '(^|/)libmimic\.a:' <<<"$targets"; then
  echo "without_full_test: the full library is still a target" >&2; exit 1
fi
objs=$(grep -oE 'CMakeFiles/mimic_cli\.dir/tools/[a-z_]+\.cpp\.o' <<<"$targets" | sort -u || true)
[ -n "$objs" ] || { echo "without_full_test: the CLI has no objects" >&2; exit 1; }
for unit in cmd_record cmd_distill cmd_convert cmd_report; do
  if grep -q "/$unit.cpp.o" <<<"$objs"; then echo "without_full_test: $unit.cpp is still compiled" >&2; exit 1; fi
done
for unit in mimic cmd_bench cmd_missing; do
  grep -q "/$unit.cpp.o" <<<"$objs" || { echo "without_full_test: $unit.cpp is not compiled" >&2; exit 1; }
  cmake --build . --target "CMakeFiles/mimic_cli.dir/tools/$unit.cpp.o" >"$work/log" 2>&1 ||
    { cat "$work/log" >&2; echo "without_full_test: $unit.cpp does not compile without the full library" >&2; exit 1; }
done
echo "without_full_test: configured without HDF5/zlib/cairo; mimic.cpp, cmd_bench.cpp, cmd_missing.cpp compile"

# With HDF5 and zlib but without cairo (the GPU machines so far): record, distill and convert build, report alone is
# left out — its room from the library, its command from the CLI, replaced by the stand-in that names cairo.
cd "$work"
if ! cmake -S "$src" -B "$work/nocairo" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" "${gen[@]}" \
    -DMIMIC_USE_PCH=OFF -DMIMIC_WITH_CAIRO=OFF >"$work/log" 2>&1; then
  cat "$work/log" >&2; echo "without_full_test: configure without cairo failed" >&2; exit 1
fi
grep -q "mimic: without report; missing: cairo (Debian: libcairo2-dev)" "$work/log" ||
  { cat "$work/log" >&2; echo "without_full_test: no line saying report is left out for cairo" >&2; exit 1; }
if grep -q "without the full library" "$work/log"; then
  cat "$work/log" >&2; echo "without_full_test: the full library was dropped for cairo alone" >&2; exit 1
fi
cd "$work/nocairo"
targets=$(ninja -t targets all)
grep -qE '(^|/)libmimic\.a:' <<<"$targets" || { echo "without_full_test: no full library without cairo" >&2; exit 1; }
if grep -qE 'src/report/[a-z_]+\.cpp\.o' <<<"$targets"; then echo "without_full_test: the report room is still compiled" >&2; exit 1; fi
grep -qE 'src/distill/distill\.cpp\.o' <<<"$targets" || { echo "without_full_test: distill is not compiled" >&2; exit 1; }
objs=$(grep -oE 'CMakeFiles/mimic_cli\.dir/tools/[a-z_]+\.cpp\.o' <<<"$targets" | sort -u || true)
if grep -q "/cmd_report.cpp.o" <<<"$objs"; then echo "without_full_test: cmd_report.cpp is still compiled" >&2; exit 1; fi
for unit in cmd_record cmd_distill cmd_convert; do
  grep -q "/$unit.cpp.o" <<<"$objs" || { echo "without_full_test: $unit.cpp is not compiled without cairo" >&2; exit 1; }
done
cmake --build . --target "CMakeFiles/mimic_cli.dir/tools/cmd_missing.cpp.o" >"$work/log" 2>&1 ||
  { cat "$work/log" >&2; echo "without_full_test: cmd_missing.cpp does not compile without cairo" >&2; exit 1; }
echo "without_full_test: configured without cairo; record, distill, convert stay, report is left out"
