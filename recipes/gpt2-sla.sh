#!/usr/bin/env bash
# Hedgehog with and without SLA head gates (softmax over heads of Q·W_GQ and K·W_GK; arXiv 2602.01744), converted
# and finetuned the same way, compared on perplexity and on passkey retrieval (the retrieval SLA claims to restore).
#   bash recipes/gpt2-sla.sh [MODEL]   (default gpt2-mini; a HF GPT-2 directory works too)
#   SCALE=quick|full, MIMIC, OUT, THREADS, SEED as in recipes/lib.sh; PASSKEY_LENGTHS, PASSKEY_TRIALS
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
convert_lm hedgehog "$MODEL" --feature-map hedgehog
convert_lm hedgehog-sla "$MODEL" --feature-map hedgehog --sla
passkey teacher "$MODEL"
passkey hedgehog "$OUT/hedgehog-finetuned"
passkey hedgehog-sla "$OUT/hedgehog-sla-finetuned"

echo
echo "== $MODEL: hedgehog vs hedgehog + SLA gates ($SCALE; finetune $FT_STEPS × $FT_BATCH × $FT_LEN tokens)"
printf '| %-32s | %6s | %9s | %9s | %14s | %s |\n' "model" "KL" "ppl as is" "finetuned" "copy gain" "passkey: ranked first / gain ranked first, by length ($PASSKEY_LENGTHS)"
printf '|---|---|---|---|---|---|\n'
# row LABEL KL PPL FINETUNED-EVAL PASSKEY COPY: perplexities (test split), copy gain and passkey accuracy (of the
# finetuned students; of the teacher as it is)
row() {
  printf '| %-32s | %6s | %9s | %9s | %14s | %s |\n' "$1" "$2" "$3" "$([[ -f $OUT/eval-$4.json ]] && ppl "$4" || echo -)" \
    "$(gain "$6")" \
    "$(ranked "$5" gain)"
}
row "softmax teacher" "-" "$(ppl teacher)" teacher-finetuned teacher teacher
row "hedgehog" "$(kl hedgehog)" "$(ppl hedgehog-converted)" hedgehog-finetuned hedgehog hedgehog-finetuned
row "hedgehog + SLA gates" "$(kl hedgehog-sla)" "$(ppl hedgehog-sla-converted)" hedgehog-sla-finetuned hedgehog-sla hedgehog-sla-finetuned
echo "(passkey chance of ranking first: $(get "$OUT/passkey-teacher.json" '.chance * 100' 0)%)"
print_timings
