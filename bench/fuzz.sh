#!/usr/bin/env bash
# Builds the libFuzzer targets of bench/fuzz/ (clang, -fsanitize=fuzzer,address,undefined over the whole library;
# LibTorch, HDF5 and the other libraries linked as Debian ships them) and runs each one, then prints per target
# the executions and libFuzzer's final coverage (cov: edges, ft: features).
#   bench/fuzz.sh [-t SECONDS | -r RUNS] [TARGET...]     default: 60 s per target, every target
#   MIMIC_FUZZ_DIR   build folder (default: build-fuzz); its corpus/<target>/ keeps what a run found for the next
#   MIMIC_FUZZ_ARGS  more libFuzzer flags (e.g. "-jobs=2 -workers=2")
# A finding stops that target: libFuzzer writes the input as crash-* / leak-* / timeout-* / oom-* in the build
# folder's findings/<target>/ and the script exits non-zero at the end. Replay one with
#   build-fuzz/bench/fuzz/fuzz_<target> FILE
# Seeds: bench/fuzz/corpus/<target>/ (python3 bench/fuzz/make_corpus.py writes them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MIMIC_FUZZ_DIR:-$root/build-fuzz}
limit=(-max_total_time=60)
while getopts "t:r:" opt; do
  case $opt in
    t) limit=(-max_total_time="$OPTARG") ;;
    r) limit=(-runs="$OPTARG") ;;
    *) echo "usage: bench/fuzz.sh [-t SECONDS | -r RUNS] [TARGET...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in "$root"/bench/fuzz/fuzz_*.cpp; do n=$(basename "$f" .cpp); targets+=("${n#fuzz_}"); done
fi

bash "$root/tools/configure.sh" "$build" -DMIMIC_FUZZ=ON -DMIMIC_BUILD_TESTS=OFF
cmake --build "$build" -j"${MIMIC_JOBS:-$(nproc)}" --target "${targets[@]/#/fuzz_}"

# LibTorch and HDF5 keep one-time allocations (thread pools, type registries) that LeakSanitizer reports as leaks
# of the first input; they are suppressed by library, so a leak in mimic's code still fails (bench/fuzz/lsan.supp).
export LSAN_OPTIONS="suppressions=$root/bench/fuzz/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export OMP_NUM_THREADS=1  # one thread per process: the inputs are tiny, and a fuzzer's run stays comparable

status=0
summary=()
for t in "${targets[@]}"; do
  bin="$build/bench/fuzz/fuzz_$t"
  corpus="$build/corpus/$t"
  findings="$build/findings/$t"
  mkdir -p "$corpus" "$findings"
  log="$build/fuzz-$t.log"
  echo "== fuzz_$t (${limit[*]})" >&2
  set +e
  # -timeout: an input that takes 10 s is a hang; -rss_limit_mb / -malloc_limit_mb: more than 2 GB is unbounded
  # allocation (the inputs are a few KB). The seeds are read from the repository, new inputs go to $corpus.
  # shellcheck disable=SC2086
  "$bin" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -max_len=8192 -print_final_stats=1 \
    -artifact_prefix="$findings/" ${MIMIC_FUZZ_ARGS:-} "$corpus" "$root/bench/fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | awk '{s+=$1} END {print s+0}')
  cov=$(grep -E '^#[0-9]+.*(DONE|cov:)' "$log" | tail -1 | sed -E 's/.*cov: ([0-9]+) ft: ([0-9]+).*/cov \1 ft \2/')
  line=$(printf '%-20s %12s execs  %-22s %s' "$t" "$execs" "$cov" "$([ $rc -eq 0 ] && echo ok || echo "FINDING (rc $rc, see $log)")")
  summary+=("$line")
  echo "$line" >&2
  [ $rc -eq 0 ] || status=1
done
echo
echo "target                     executions  coverage (libFuzzer's final cov/ft)"
printf '%s\n' "${summary[@]}"
exit $status
