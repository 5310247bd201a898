#!/usr/bin/env bash
# Installs mimic from a build folder into a temporary prefix, builds examples/consumer against it with
# find_package(mimic) and mimic::core only, and runs it on a fixture model. Checks that the core-only consumer
# neither needs HDF5/zlib/cairo to configure nor links them, and that the `full` component still gives
# mimic::mimic.   consumer_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# run CMD...: quiet unless it fails
run() {
  if ! "$@" >"$work/log" 2>&1; then
    cat "$work/log" >&2
    echo "consumer_test: failed: $*" >&2
    return 1
  fi
}
cmake --install "$build" --prefix "$work/prefix" >/dev/null
gen=()
command -v ninja >/dev/null 2>&1 && gen+=(-G Ninja)
command -v clang++ >/dev/null 2>&1 && gen+=(-DCMAKE_CXX_COMPILER=clang++)
# refused PREFIX WHAT MESSAGE: configuring the consumer against PREFIX fails, saying MESSAGE (CMake wraps the reason:
# read as one line)
refused() {
  if cmake -S "$src/examples/consumer" -B "$work/refused" -DCMAKE_PREFIX_PATH="$1" "${gen[@]}" >"$work/log" 2>&1; then
    echo "consumer_test: the consumer configured against $2" >&2
    exit 1
  fi
  if ! tr -s ' \n' ' ' <"$work/log" | grep -qF "$3"; then
    cat "$work/log" >&2
    echo "consumer_test: configuring against $2 did not say: $3" >&2
    exit 1
  fi
  rm -rf "$work/refused"
}
# the build folder holds a mimicConfig.cmake but no targets: find_package there says to install first (it failed on
# a raw "include could not find requested file": helper-86's probe)
refused "$build" "the build folder itself" "is a mimic build folder, not an installed mimic: install it first (cmake --install BUILD --prefix P)"
# an install that lost its targets (its config files alone) is not called a build folder
config_dir=$(dirname "$(find "$work/prefix" -name mimicConfig.cmake | head -n 1)")
mkdir -p "$work/broken/lib/cmake/mimic"
cp "$config_dir"/mimicConfig*.cmake "$work/broken/lib/cmake/mimic/"
refused "$work/broken" "an install without its targets" "holds no mimicCoreTargets.cmake: an incomplete mimic install; install it again"
# mimic::core must configure with HDF5, zlib and pkg-config (cairo) made unfindable
no_full_deps=(-DCMAKE_DISABLE_FIND_PACKAGE_HDF5=ON -DCMAKE_DISABLE_FIND_PACKAGE_ZLIB=ON
              -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON)
run cmake -S "$src/examples/consumer" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_BUILD_TYPE=Release "${gen[@]}" "${no_full_deps[@]}"
run cmake --build "$work/build"
# ... and neither its link line nor its binary names libhdf5 or libcairo. (Only direct dependencies: Debian's
# libtorch itself loads both through OpenCV, so `ldd` lists them for any torch program. Torch's link flags end
# in --as-needed, hence the link line is checked as well as the binary's NEEDED entries.)
link_lines=$( { grep -h '^ *LINK_LIBRARIES = ' "$work/build/build.ninja" 2>/dev/null || true
                find "$work/build" -name link.txt -exec cat {} +; } )
if [ -z "$link_lines" ]; then
  echo "consumer_test: found no link line (build.ninja or link.txt) to check" >&2
  exit 1
fi
if grep -Eio '[^ ]*(hdf5|cairo)[^ ]*' <<<"$link_lines"; then
  echo "consumer_test: the mimic::core consumer's link line names HDF5 or cairo (above)" >&2
  exit 1
fi
needed=$(readelf -d "$work/build/consumer" | grep NEEDED)
if grep -Ei 'libhdf5|libcairo' <<<"$needed"; then
  echo "consumer_test: the mimic::core consumer binary needs HDF5 or cairo (above)" >&2
  exit 1
fi
# the fixture GPT-2 (random weights, real vocabulary size) completed with the real tokenizer files
cp -r "$src/tests/fixtures/models/gpt2-prefixed" "$work/model"
cp "${MIMIC_CACHE:-$HOME/.cache/mimic}"/assets/gpt2/{vocab.json,merges.txt} "$work/model/"
out=$("$work/build/consumer" "$work/model" "Hello world")
echo "$out"
grep -q "^gpt2 tokens=2 hidden=\[1, 2, " <<<"$out"

# The components: `full` gives mimic::mimic (configure only), asking for it without HDF5 fails clearly, and
# the default gives mimic::core alone.
mkdir -p "$work/components"
cat >"$work/components/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.19)
project(mimic_components LANGUAGES CXX)
find_package(mimic 0.1 REQUIRED ${MIMIC_COMPONENTS})
foreach(t IN LISTS EXPECT_TARGETS)
  if(NOT TARGET ${t})
    message(FATAL_ERROR "expected target ${t}")
  endif()
endforeach()
foreach(t IN LISTS EXPECT_NO_TARGETS)
  if(TARGET ${t})
    message(FATAL_ERROR "unexpected target ${t}")
  endif()
endforeach()
CMAKE
components() {  # components BUILD_SUBDIR CMAKE_ARGS...
  local dir=$1
  shift
  cmake -S "$work/components" -B "$work/$dir" -DCMAKE_PREFIX_PATH="$work/prefix" "${gen[@]}" "$@"
}
run components c-full "-DMIMIC_COMPONENTS=COMPONENTS;full" "-DEXPECT_TARGETS=mimic::core;mimic::mimic"
run components c-default "-DEXPECT_TARGETS=mimic::core" "-DEXPECT_NO_TARGETS=mimic::mimic" "${no_full_deps[@]}"
if components c-nohdf5 "-DMIMIC_COMPONENTS=COMPONENTS;full" -DCMAKE_DISABLE_FIND_PACKAGE_HDF5=ON \
     >"$work/log" 2>&1; then
  echo "consumer_test: COMPONENTS full configured without HDF5" >&2
  exit 1
fi
if ! grep -q "component 'full' (mimic::mimic) needs: HDF5" "$work/log"; then
  cat "$work/log" >&2
  echo "consumer_test: COMPONENTS full without HDF5 did not say why" >&2
  exit 1
fi
echo "components: full -> mimic::mimic; default -> mimic::core only; full without HDF5 -> refused"

# the installed CLI runs too
"$work/prefix/bin/mimic" --version
