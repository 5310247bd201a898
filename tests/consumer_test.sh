#!/usr/bin/env bash
# Installs mimic from a build folder into a temporary prefix, builds examples/consumer against it with
# find_package(mimic), and runs it on a fixture model.   consumer_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
args=(-S "$src/examples/consumer" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release)
command -v ninja >/dev/null 2>&1 && args+=(-G Ninja)
command -v clang++ >/dev/null 2>&1 && args+=(-DCMAKE_CXX_COMPILER=clang++)
cmake "${args[@]}" >/dev/null
cmake --build "$work/build" >/dev/null
# the fixture GPT-2 (random weights, real vocabulary size) completed with the real tokenizer files
cp -r "$src/tests/fixtures/models/gpt2-prefixed" "$work/model"
cp "${MIMIC_CACHE:-$HOME/.cache/mimic}"/assets/gpt2/{vocab.json,merges.txt} "$work/model/"
out=$("$work/build/consumer" "$work/model" "Hello world")
echo "$out"
grep -q "^gpt2 tokens=2 hidden=\[1, 2, " <<<"$out"
# the installed CLI runs too
"$work/prefix/bin/mimic" --version
