#!/usr/bin/env bash
# The README's "Convert your own model" block, run as typed on a GPT-2 of one's own: a random 2-layer GPT-2 with 8
# heads of 4 and a 64-token context (pretrained one step here, in the HF layout with its tokenizer) and a text file
# of one's own (pages of mimic's docs, which no corpus holds). The commands are the README's lines; only toy sizes
# are appended to each (samples, epochs, steps, the probe's calibration), so a README edit that breaks a command,
# an option or the order of the stages fails here.   readme_own_model_test.sh SOURCE_DIR MIMIC_CLI
set -euo pipefail
src=$1
MIMIC_BIN=$2
work=$(mktemp -d)
[[ -n ${KEEP:-} ]] && echo "readme_own_model_test: keeping $work" || trap 'rm -rf "$work"' EXIT
fail() { echo "readme_own_model_test: $*" >&2; exit 1; }
command -v jq >/dev/null || fail "jq is missing (tools/setup.sh installs it)"

block=$(awk '/^## Convert your own model/ { f = 1 } f && /^```bash/ { c = 1; next } c && /^```/ { exit } c' "$src/README.md")
[[ -n $block ]] || fail "README.md has no bash block under '## Convert your own model'"
grep -q '^M=./my-gpt2 TEXT=my-text.txt' <<<"$block" || fail "the block no longer starts with 'M=./my-gpt2 TEXT=my-text.txt'"

cd "$work"
jq '.n_embd = 32 | .n_head = 8 | .n_layer = 2 | .n_inner = 64 | .n_positions = 64' "$src/recipes/configs/recall-mini.json" >cfg.json
"$MIMIC_BIN" pretrain --arch gpt2 --config cfg.json --data all --steps 1 --batch-size 2 --seq-len 32 --warmup 1 --out my-gpt2 \
  --threads 1 >/dev/null 2>&1 || fail "could not make the toy GPT-2"
rm -rf my-gpt2/best my-gpt2/last my-gpt2/checkpoint.safetensors my-gpt2/log.jsonl  # what a HF directory holds
cat "$src"/docs/recall.md "$src"/docs/data.md >my-text.txt

# `mimic` as the README calls it, with toy sizes appended per command
mimic() {
  local cmd=$1; shift
  local toy=()
  case $cmd in
    record) toy=(--samples 4 --seq-len 32) ;;
    distill) toy=(--epochs 1) ;;
    convert) toy=(--probe-segments 2 --probe-segment-len 16 --probe-passkeys 1 --probe-passkey-len 64 --probe-leaders 2
                  --probe-lm-windows 1) ;;
    finetune) toy=(--steps 2 --batch-size 2 --seq-len 32 --warmup 1) ;;
    eval) [[ " $* " == *" --task copy "* ]] && toy=(--segments 2 --segment-len 16) ;;
    generate) toy=(--new-tokens 4) ;;
  esac
  echo "+ mimic $cmd $* ${toy[*]}" >>commands.log
  if [[ " $* " == *" --json "* ]]; then  # its result goes where the README sends it, and into the log
    "$MIMIC_BIN" "$cmd" "$@" "${toy[@]}" --threads 1 2>>out.log | tee -a out.log || { cat out.log >&2; fail "'mimic $cmd $*' failed"; }
  else
    "$MIMIC_BIN" "$cmd" "$@" "${toy[@]}" --threads 1 >>out.log 2>&1 || { cat out.log >&2; fail "'mimic $cmd $*' failed"; }
  fi
}
eval "$block"

# what the reader is promised: a converted, finetuned model with 8 softmax heads chosen by the probe, and the scores
[[ $(wc -l <commands.log) -ge 8 ]] || { cat commands.log >&2; fail "fewer than 8 commands ran"; }
[[ -f final/mimic.json && -f final/model.safetensors ]] || fail "no converted model in final/"
kept=$(jq '[.. | objects | select(has("kept")) | .kept | length] | max' converted/mimic.json)
[[ $kept == 8 ]] || fail "converted/mimic.json keeps $kept heads, not 8"
grep -q "perplexity" out.log || { cat out.log >&2; fail "eval printed no perplexity"; }
jq -e '.model.copy_gain | numbers' copy.json >/dev/null || { cat out.log >&2; fail "eval --task copy wrote no copy gain"; }
# the report: the finetuned model's and its teacher's perplexity and copy gain on the page and in its metrics
jq -e '[.quality[] | select(.label == "final" or .label == "teacher") | .perplexity.value, .copy_gain.value | numbers] | length == 4' \
  report/metrics.json >/dev/null || { cat out.log >&2; fail "report/metrics.json lacks the quality of final and its teacher"; }
grep -q '<h2>Quality</h2>' report/report.html || fail "report/report.html has no Quality section"
# a label that names none of the report's models is said (a typo made a row of its own beside the model's empty one)
"$MIMIC_BIN" report --record rec.h5 --model final --eval finl=ppl.json --out report-typo --threads 1 >/dev/null 2>typo.err ||
  { cat typo.err >&2; fail "report with a mistyped --eval label failed"; }
grep -q "note: --eval 'finl' names no --model of this report (final)" typo.err || { cat typo.err >&2; fail "no note of the mistyped label"; }
echo "readme_own_model_test: the README's own-model block ran ($(wc -l <commands.log) commands)"
