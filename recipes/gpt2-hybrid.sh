#!/usr/bin/env bash
# What a softmax window or a few softmax heads buy back (issue 18): all-linear Hedgehog vs the LoLCATs hybrid
# (softmax over the last w keys + linear attention over the rest, one denominator) with w = 16 and 64, vs
# head-level placement keeping K heads softmax (the K with the highest held-out KL of distill), each distilled,
# converted and finetuned the same way. Per model: perplexity, in-context copy gain, passkey retrieval, and the
# decoding state after STATE_AT tokens — the Pareto table of state size against recall.
#   bash recipes/gpt2-hybrid.sh [MODEL]   (default gpt2-mini; a HF GPT-2 directory works too)
#   SCALE=quick|full, MIMIC, OUT, THREADS, SEED as in recipes/lib.sh; WINDOWS="16 64", KEEP_HEADS="2 4 8",
#   PASSKEY_LENGTHS, PASSKEY_TRIALS, STATE_AT (default 512)
MODEL=${1:-gpt2-mini}
SCALE=${SCALE:-quick}
if [[ $SCALE == full ]]; then REC_SAMPLES=256 REC_LEN=512 FT_STEPS=1000 FT_BATCH=8 FT_LEN=512; fi
WINDOWS=${WINDOWS:-16 64}
KEEP_HEADS=${KEEP_HEADS:-2 4 8}
# The GPT-2 recipes share one output folder per model and scale: stages they have in common run once.
OUT=${OUT:-$(cd "$(dirname "$0")/.." && pwd)/out/$(basename "$MODEL")-$SCALE}
source "$(dirname "$0")/lib.sh"
whole_number_list WINDOWS KEEP_HEADS
fit_to_context "$MODEL"
mkdir -p "$OUT"

record_lm "$MODEL"
eval_lm teacher "$MODEL"
finetune_lm teacher-finetuned "$MODEL"
eval_lm teacher-finetuned "$OUT/teacher-finetuned"
# All-linear Hedgehog (shared with gpt2-hedgehog.sh) and the same maps with K heads kept softmax.
convert_lm hedgehog "$MODEL" --feature-map hedgehog
for k in $KEEP_HEADS; do convert_with "hedgehog-keep$k" "$MODEL" hedgehog --keep-softmax "auto:$k"; done
# The hybrid runs hedgehog_softmax, LoLCATs' normalised map: with the window's scores taken relative to their
# maximum, the linear terms must meet them on a fixed scale (docs/attention.md, "The normalisation we chose").
for w in $WINDOWS; do convert_lm "hybrid-w$w" "$MODEL" --attention "hybrid:window=$w" --feature-map hedgehog_softmax; done

models=(teacher-finetuned hedgehog-finetuned)
for k in $KEEP_HEADS; do models+=("hedgehog-keep$k-finetuned"); done
for w in $WINDOWS; do models+=("hybrid-w$w-finetuned"); done
for m in "${models[@]}"; do
  passkey "$m" "$OUT/$m"
  state "$m" "$OUT/$m"
done

echo
echo "== $MODEL: hybrid attention and placement ($SCALE; distill $EPOCHS epochs on $REC_SAMPLES × $REC_LEN tokens; finetune $FT_STEPS × $FT_BATCH × $FT_LEN tokens)"
printf '| %-34s | %10s | %14s | %-26s | %14s |\n' "model (finetuned)" "perplexity" "copy gain" "passkey ranked first ($PASSKEY_LENGTHS)" "state @ $STATE_AT (kB)"
printf '|---|---|---|---|---|\n'
row() {
  printf '| %-34s | %10s | %14s | %-26s | %14s |\n' "$1" "$(ppl "$2")" "$(gain "$2")" \
    "$(ranked "$2")" "$(state_kb "$2")"
}
row "softmax teacher" teacher-finetuned
row "hedgehog, all linear" hedgehog-finetuned
for k in $KEEP_HEADS; do row "hedgehog, $k heads kept softmax" "hedgehog-keep$k-finetuned"; done
for w in $WINDOWS; do row "hybrid w=$w (hedgehog_softmax)" "hybrid-w$w-finetuned"; done
echo "(passkey chance of ranking first: $(get "$OUT/passkey-teacher-finetuned.json" '.chance * 100' 0)%; heads kept: $(for k in $KEEP_HEADS; do jq -r --arg k "$k" '"K=\($k): " + ([.placement.kept[] | "\(.layer).\(.head)"] | join(" "))' "$OUT/convert-hedgehog-keep$k.json"; done | paste -sd';' -))"
print_timings
