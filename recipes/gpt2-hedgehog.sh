#!/usr/bin/env bash
# Hedgehog's pretrained-conversion recipe (Zhang et al. 2024, Sec. 5.3: GPT-2 → linear attention, finetuned on
# language modelling), with the comparison the claim needs: the softmax teacher finetuned with the same steps and
# data. Target: converted + finetuned perplexity ≤ 1.05 × the finetuned teacher's.
#   bash recipes/gpt2-hedgehog.sh [MODEL]    MODEL: gpt2-mini (default), or a HF GPT-2 directory with config.json,
#                                            model.safetensors, vocab.json and merges.txt (e.g. a download of `gpt2`)
#   SCALE=quick (default: 64 × 256 recorded tokens, 10 epochs, 60 finetuning steps × 4 × 512)
#   SCALE=full  (256 × 512 recorded, 10 epochs, 1000 steps × 8 × 512; about 3 h for gpt2-mini on 2 cores)
#   MIMIC=… OUT=… THREADS=… SEED=…; stages are skipped when done.
MODEL=${1:-gpt2-mini}
SCALE=${SCALE:-quick}
if [[ $SCALE == full ]]; then REC_SAMPLES=256 REC_LEN=512 FT_STEPS=1000 FT_BATCH=8 FT_LEN=512; fi
# The GPT-2 recipes share one output folder per model and scale: stages they have in common run once.
OUT=${OUT:-$(cd "$(dirname "$0")/.." && pwd)/out/$(basename "$MODEL")-$SCALE}
source "$(dirname "$0")/lib.sh"
fit_to_context "$MODEL"
mkdir -p "$OUT"

record_lm "$MODEL"
eval_lm teacher "$MODEL"
finetune_lm teacher-finetuned "$MODEL"
eval_lm teacher-finetuned "$OUT/teacher-finetuned"
convert_lm hedgehog "$MODEL" --feature-map hedgehog

ratio=$(awk -v a="$(get "$OUT/eval-hedgehog-finetuned.json" .perplexity)" -v b="$(get "$OUT/eval-teacher-finetuned.json" .perplexity)" 'BEGIN { printf "%.3f", a / b }')
echo
echo "== $MODEL → hedgehog ($SCALE: distill $EPOCHS epochs on $REC_SAMPLES × $REC_LEN tokens; finetune $FT_STEPS × $FT_BATCH × $FT_LEN tokens)"
printf '| %-40s | %10s | %14s |\n' "model" "perplexity" "copy gain" "---" "---" "---"
printf '| %-40s | %10s | %14s |\n' "softmax teacher" "$(ppl teacher)" "$(gain teacher)" \
  "softmax teacher, finetuned" "$(ppl teacher-finetuned)" "$(gain teacher-finetuned)" \
  "hedgehog, converted (KL $(kl hedgehog))" "$(ppl hedgehog-converted)" "$(gain hedgehog-converted)" \
  "hedgehog, converted + finetuned" "$(ppl hedgehog-finetuned)" "$(gain hedgehog-finetuned)"
echo "converted + finetuned / finetuned teacher = $ratio (target <= 1.05: $(awk -v r="$ratio" 'BEGIN { print (r <= 1.05 ? "PASS" : "FAIL") }'))"
print_timings
