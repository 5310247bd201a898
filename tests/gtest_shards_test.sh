#!/usr/bin/env bash
# tools/gtest_shards.sh judges a run by more than exit codes: fake test binaries (shell scripts speaking gtest's
# sharding variables, --gtest_list_tests and summary lines) that lie in one way each must fail it, and an honest one
# must pass.   gtest_shards_test.sh SOURCE_DIR
set -euo pipefail
shards=$1/tools/gtest_shards.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "gtest_shards_test: $*" >&2; exit 1; }

# fake MODE: lists Suite.A .. Suite.F; each shard runs the tests whose index ≡ GTEST_SHARD_INDEX (mod the total).
# MODE honest | failed-exit-0 (prints one FAILED line, exits 0) | drops (shard 0 runs nothing yet reports success)
fake() {
  cat >"$work/$1" <<SCRIPT
#!/usr/bin/env bash
mode=$1
tests=(A B C D E F)
for a in "\$@"; do
  if [[ \$a == --gtest_list_tests ]]; then echo "Suite."; printf '  %s\n' "\${tests[@]}"; exit 0; fi
done
n=0
for i in "\${!tests[@]}"; do
  (( i % \${GTEST_TOTAL_SHARDS:-1} == \${GTEST_SHARD_INDEX:-0} )) || continue
  [[ \$mode == drops && \${GTEST_SHARD_INDEX:-0} == 0 ]] && continue
  echo "[ RUN      ] Suite.\${tests[\$i]}"
  if [[ \$mode == failed-exit-0 && \${tests[\$i]} == C ]]; then echo "[  FAILED  ] Suite.C (1 ms)"; else echo "[       OK ] Suite.\${tests[\$i]} (1 ms)"; fi
  n=\$((n + 1))
done
echo "[==========] \$n tests from 1 test suite ran. (1 ms total)"
exit 0
SCRIPT
  chmod +x "$work/$1"
}
for mode in honest failed-exit-0 drops; do fake "$mode"; done

MIMIC_SHARDS=3 bash "$shards" "$work/honest" >"$work/honest.log" 2>&1 || { cat "$work/honest.log" >&2; fail "an honest run failed"; }
grep -q "6 tests of honest" "$work/honest.log" || { cat "$work/honest.log" >&2; fail "the honest run did not count 6 tests"; }
if MIMIC_SHARDS=3 bash "$shards" "$work/failed-exit-0" >"$work/f.log" 2>&1; then fail "a FAILED line with exit 0 passed"; fi
grep -q "Suite.C" "$work/f.log" || { cat "$work/f.log" >&2; fail "the failed test's output was not printed"; }
if MIMIC_SHARDS=3 bash "$shards" "$work/drops" >"$work/d.log" 2>&1; then fail "shards that ran 4 of 6 listed tests passed"; fi
grep -q "the shards ran 4 tests, drops lists 6" "$work/d.log" || { cat "$work/d.log" >&2; fail "no line naming the missing tests"; }
echo "gtest_shards_test: ok"
