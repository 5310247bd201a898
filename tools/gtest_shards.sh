#!/usr/bin/env bash
# Runs a GoogleTest binary's tests in a few processes per core, each pinned to its core, instead of one process per
# test (what ctest does with the tests gtest_discover_tests lists). tools/test.sh and tools/sanitize.sh run
# mimic_tests this way; `ctest -R NAME` still runs one test alone.
# Why: a process that loads LibTorch takes about 0.8 s before main (its operator registry and 289 shared libraries,
# measured 2026-11-29 with a program that links only libtorch_cpu and libc10; about three times that under ASan), so
# 422 test processes spent about 6 minutes starting. Why pinned: two tests side by side on two cores, each with
# OpenMP's two spinning threads, slowed each other many times over (an unpinned `ctest -j2` ran gpt2-mini's 83-s
# perplexity test for over 6 minutes); pinned, a shard and the mimic processes its tests start see one core
# (available_cores reads the affinity), so nothing waits on a thread that has no core.
#   tools/gtest_shards.sh BINARY [GTEST_FILTER]
#   MIMIC_SHARDS          processes (default: four per core this process may use)
#   MIMIC_SHARD_TIMEOUT   seconds a shard may run before it is stopped and fails (default 3600; one that ignores
#                         SIGTERM is killed 10 s later)
# Prints the output of each test that failed, the end of a shard's output when it ended without gtest's summary (a
# crash: its last "[ RUN ]" line names the test), and a summary line; exits non-zero when a shard fails (its exit code,
# or a "[  FAILED  ]" line whatever the exit code), is stopped,
# when no test ran at all (a filter that matches nothing is a failure, not a green run), or when the shards ran
# fewer or more tests than the binary lists.
set -euo pipefail
binary=$1
filter=${2:-*}
[ -x "$binary" ] || { echo "gtest_shards.sh: no test binary at $binary" >&2; exit 1; }

# the cores this process may use, from its affinity list ("0-3,6")
cpus=()
if command -v taskset >/dev/null 2>&1; then
  list=$(taskset -pc $$ | sed 's/.*: *//')
  IFS=, read -ra ranges <<< "$list"
  for r in "${ranges[@]}"; do
    if [[ $r == *-* ]]; then for ((c = ${r%-*}; c <= ${r#*-}; ++c)); do cpus+=("$c"); done; else cpus+=("$r"); fi
  done
fi
workers=${#cpus[@]}
[ "$workers" -ge 1 ] || workers=1
shards=${MIMIC_SHARDS:-$((4 * workers))}
[ "$shards" -ge 1 ] 2>/dev/null || shards=1
timeout_s=${MIMIC_SHARD_TIMEOUT:-3600}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
start=$(date +%s)
# One worker per core, pinned to it, takes the next shard from a queue until none is left: gtest deals the tests to
# shards by their index, so shards differ in length (the first 2-shard run: 491 s and 833 s); four shards a core
# even that out for the cost of a few more starts.
echo 0 > "$logs/next"
worker() {
  local pin=() i
  [ ${#cpus[@]} -gt 0 ] && pin=(taskset -c "${cpus[$1]}")
  while true; do
    i=$(flock "$logs/next" bash -c 'i=$(cat "$1"); echo $((i + 1)) > "$1"; echo "$i"' _ "$logs/next")
    [ "$i" -lt "$shards" ] || return 0
    rc=0
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout -k 10 "$timeout_s" "${pin[@]}" "$binary" "--gtest_filter=$filter" > "$logs/$i.log" 2>&1 || rc=$?
    echo "$rc" > "$logs/$i.rc"
  done
}
for ((w = 0; w < workers; ++w)); do worker "$w" & done
wait
status=0
ran=0
for ((i = 0; i < shards; ++i)); do
  rc=$(cat "$logs/$i.rc" 2>/dev/null || echo missing)
  n=$(sed -n 's/^\[==========\] \([0-9]*\) tests\? from .* ran\..*/\1/p' "$logs/$i.log" 2>/dev/null | tail -n 1)
  ran=$((ran + ${n:-0}))
  # a shard fails on its exit code, a missing summary, or a failed test it printed (whatever it then exited with)
  if [ "$rc" != 0 ] || [ -z "$n" ] || grep -q '^\[  FAILED  \]' "$logs/$i.log"; then
    status=1
    echo "== shard $i of $shards: exit $rc" >&2
    [ "$rc" = 124 ] && echo "gtest_shards.sh: shard $i stopped after ${timeout_s} s" >&2
    # each failed test's output, from its [ RUN ] line to its [ FAILED ] line
    awk '/^\[ RUN      \]/ { buf = "" } { buf = buf $0 "\n" } /^\[  FAILED  \] .*\([0-9]+ ms\)$/ { printf "%s", buf }' "$logs/$i.log" >&2
    if [ -z "$n" ]; then echo "(the shard ended without gtest's summary; its last lines:)" >&2; tail -n 60 "$logs/$i.log" >&2; fi
  else
    grep -E '^\[  SKIPPED \] [A-Za-z0-9_/]+\.[A-Za-z0-9_/]+$' "$logs/$i.log" >&2 || true  # the names of skipped tests
  fi
done
if [ "$ran" -eq 0 ]; then
  echo "gtest_shards.sh: no test of $binary ran (filter '$filter')" >&2
  status=1
fi
# every listed test ran once: the shards' summaries add up to the binary's own list (a shard's exit code and summary
# alone would pass a run whose sharding dropped tests)
listed=$("$binary" "--gtest_filter=$filter" --gtest_list_tests 2>/dev/null | grep -v '^  DISABLED_' | grep -c '^  [^ ]' || true)
if [ "$status" -eq 0 ] && [ "$ran" -ne "$listed" ]; then
  echo "gtest_shards.sh: the shards ran $ran tests, $(basename "$binary") lists $listed for filter '$filter'" >&2
  status=1
fi
echo "gtest_shards.sh: $ran tests of $(basename "$binary") in $shards processes on $workers cores, $(( $(date +%s) - start )) s" >&2
exit $status
