#!/usr/bin/env bash
# Every registered feature map through the same conversion of gpt2-mini — distill (trainable maps learn, fixed
# ones are only scored), convert, finetune, evaluate — in one table like Hedgehog's feature-map comparison
# (Zhang et al. 2024, Table 2 / Sec. 5.1): KL to the softmax weights after distillation, perplexity converted and
# after finetuning, the in-context copy gain (docs/recall.md) of each, and passkey retrieval after finetuning
# (a key-value lookup across the context: associative recall on prose). identity is left out: its features have any sign, so row-normalised attention divides by sums
# that can vanish (distill refuses it with the cross-entropy loss).
#   bash recipes/feature-map-ablation.sh [MODEL]    SCALE=quick (30 finetuning steps per map) | full (300)
#   MAPS="hedgehog t2r elu" to choose maps; MIMIC, OUT, THREADS, SEED as in recipes/lib.sh
MODEL=${1:-gpt2-mini}
SCALE=${SCALE:-quick}
if [[ $SCALE == full ]]; then FT_STEPS=${FT_STEPS:-300} EPOCHS=${EPOCHS:-10}; else FT_STEPS=${FT_STEPS:-30} EPOCHS=${EPOCHS:-5}; fi
# Non-overlapping perplexity windows: half the cost of the default stride. Not part of EVAL: the copy eval
# takes the same text but no stride (it refuses one).
PPL_STRIDE=${PPL_STRIDE:-512}
OUT=${OUT:-$(cd "$(dirname "$0")/.." && pwd)/out/$(basename "$MODEL")-$SCALE}
source "$(dirname "$0")/lib.sh"
fit_to_context "$MODEL"
mkdir -p "$OUT"
MAPS=${MAPS:-$("$MIMIC" info --feature-maps --json | jq -r '.feature_maps[].name | select(. != "identity")')}

record_lm "$MODEL"
eval_lm ablation-teacher "$MODEL"
passkey ablation-teacher "$MODEL"
for m in $MAPS; do
  convert_lm "ablation-$m" "$MODEL" --feature-map "$m"
  passkey "ablation-$m-finetuned" "$OUT/ablation-$m-finetuned"
done

echo
echo "== $MODEL: feature maps ($SCALE: distill $EPOCHS epochs/layer on $REC_SAMPLES × $REC_LEN tokens; finetune $FT_STEPS × $FT_BATCH × $FT_LEN)"
echo "softmax teacher: perplexity $(ppl ablation-teacher), copy gain $(gain ablation-teacher) nats/token," \
  "passkey ranked first $(ranked ablation-teacher) ($PASSKEY_LENGTHS tokens)"
printf '| %-17s | %-9s | %12s | %12s | %12s | %14s | %14s | %-22s |\n' "feature map" "trained" "KL (distill)" "ppl converted" \
  "ppl finetuned" "copy converted" "copy finetuned" "passkey (finetuned)"
printf '|---|---|---|---|---|---|---|---|\n'
for m in $MAPS; do
  printf '| %-17s | %-9s | %12s | %12s | %12s | %14s | %14s | %-22s |\n' "$m" "$(get "$OUT/distill-ablation-$m.json" '.layers[0].trained')" \
    "$(kl "ablation-$m")" "$(ppl "ablation-$m-converted")" "$(ppl "ablation-$m-finetuned")" \
    "$(gain "ablation-$m-converted")" "$(gain "ablation-$m-finetuned")" "$(ranked "ablation-$m-finetuned")"
done
print_timings
