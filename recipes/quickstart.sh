#!/usr/bin/env bash
# mimic quickstart, on the embedded models (examples/models/).
# What runs today: the teacher side of the pipeline. gpt2-mini's perplexity on the test split of the
# public-domain corpora, the bert-mini classifiers on their test sets, and `record`: gpt2-mini's per-layer
# attention (q, k, v, outputs, softmax weights) written to HDF5, the input of distillation. The
# distill → convert → finetune → eval → report stages join this script as they land (see the issues).
#   MIMIC=path/to/mimic  OUT=out/quickstart  THREADS=N  bash recipes/quickstart.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
MIMIC=${MIMIC:-$root/build/mimic}
OUT=${OUT:-$root/out/quickstart}
THREADS=${THREADS:-$(nproc)}
common=(--threads "$THREADS" --seed 1)
mkdir -p "$OUT"

declare -a rows
timed() {  # timed LABEL COMMAND...: runs COMMAND, remembers its wall time
  local label=$1; shift
  local t0=$(date +%s)
  "$@"
  rows+=("$(printf '%-36s %5d s' "$label" $(( $(date +%s) - t0 )))")
}
field() { printf "%.${3:-3}f" "$(sed -n "s/.*\"$1\": *\([0-9.e+-]*\).*/\1/p" "$2" | head -1)"; }

echo "== system"
"$MIMIC" info --system | head -4

echo "== the embedded models"
for m in gpt2-mini bert-mini-spam; do "$MIMIC" info "$m" | head -6; done

echo "== gpt2-mini: perplexity on the test split (State of the Union + Moby Dick, held-out documents)"
timed "eval gpt2-mini (test split)" \
  sh -c '"$0" eval --model gpt2-mini --data all --split test --json "$@" > "'"$OUT"'/gpt2-mini-test.json"' "$MIMIC" "${common[@]}"
echo "perplexity $(field perplexity "$OUT/gpt2-mini-test.json" 1)"

echo "== bert-mini classifiers on their test sets"
for task in spam sotu-era; do
  timed "eval bert-mini-$task (test set)" \
    sh -c '"$0" eval --task cls --model "bert-mini-'"$task"'" --data '"$task"' --split test --seq-len 256 --json "$@" > "'"$OUT"'/'"$task"'.json"' \
    "$MIMIC" "${common[@]}"
  echo "$task: accuracy $(field accuracy "$OUT/$task.json")  F1 $(field f1 "$OUT/$task.json")  MCC $(field mcc "$OUT/$task.json")"
done

echo "== record: gpt2-mini's attention on 32 validation samples of 256 tokens (weights of the first 4)"
timed "record gpt2-mini (32 x 256 tokens)" \
  "$MIMIC" record --model gpt2-mini --data all --split validation --samples 32 --seq-len 256 --weights-samples 4 \
  --out "$OUT/gpt2-mini.h5" --fresh "${common[@]}"

echo
echo "== summary"
printf '%-36s %s\n' "gpt2-mini test perplexity" "$(field perplexity "$OUT/gpt2-mini-test.json" 1)"
for task in spam sotu-era; do
  printf '%-36s %s\n' "bert-mini-$task test accuracy" "$(field accuracy "$OUT/$task.json")"
done
printf '%s\n' "${rows[@]}"
echo "quickstart done: outputs in $OUT"
