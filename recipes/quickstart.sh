#!/usr/bin/env bash
# mimic quickstart: the whole conversion pipeline on the embedded gpt2-mini, in about 3½ minutes on 2 cores (200 s measured on a quiet machine, 2026-11-25).
#   record   gpt2-mini's attention (q, k, v, outputs) on 64 training samples of 256 tokens → HDF5
#   distill  Hedgehog feature maps, layer by layer, to mimic the softmax weights (10 epochs per layer)
#   convert  swap them into gpt2-mini: every layer runs linear attention
#   finetune the converted model as a causal LM (60 steps × 4 × 512 tokens: the whole context)
#   eval     test perplexity of the teacher, the converted model before and after finetuning
#   report   entropy / monotonicity / KL of teacher vs maps, converted and finetuned model per layer and head, and
#            their perplexity and copy gain (report.html)
# Ends with a summary table. Stages are skipped when done (rerun to continue); outputs in $OUT.
#   MIMIC=path/to/mimic  OUT=out/gpt2-mini-quick  THREADS=N  bash recipes/quickstart.sh
# quickstart has one size: another SCALE ran the whole quick pipeline without a word (helper-86's probe)
[[ ${SCALE:-quick} == quick ]] || { echo "quickstart runs at SCALE=quick only (the other recipes take SCALE=full), got '$SCALE'" >&2; exit 2; }
SCALE=quick
# The GPT-2 recipes share one output folder per model and scale: stages they have in common run once.
OUT=${OUT:-$(cd "$(dirname "$0")/.." && pwd)/out/gpt2-mini-$SCALE}
source "$(dirname "$0")/lib.sh"
fit_to_context gpt2-mini
mkdir -p "$OUT"
t_start=$SECONDS

"$MIMIC" info --system "${common[@]}" | head -3
record_lm gpt2-mini
eval_lm teacher gpt2-mini
convert_lm hedgehog gpt2-mini --feature-map hedgehog
# the report: attention metrics of the maps, the converted and the finetuned model beside the teacher's, and what
# eval measured of each (perplexity, copy gain) in its Quality section
quality=()
# (the teacher's label is "teacher", the one report takes for the record's own model without a --model of that name)
for m in teacher:teacher hedgehog-converted:converted hedgehog-finetuned:finetuned; do
  quality+=(--eval "${m#*:}=$OUT/eval-${m%%:*}.json" --eval "${m#*:}=$OUT/copy-${m%%:*}.json")
done
stage report "$MIMIC" report --record "$OUT/record.h5" --maps "$OUT/maps-hedgehog.safetensors" --baseline elu \
  --model "converted=$OUT/hedgehog-converted" --model "finetuned=$OUT/hedgehog-finetuned" "${quality[@]}" \
  --out "$OUT/report" "${common[@]}"

echo
echo "== summary (gpt2-mini, perplexity on ${EVAL[*]}: $(get "$OUT/eval-teacher.json" .predicted) tokens scored)"
printf '%-46s %10s %14s\n' "model" "perplexity" "copy gain"
printf '%-46s %10s %14s\n' "gpt2-mini (softmax teacher)" "$(ppl teacher)" "$(gain teacher)"
printf '%-46s %10s %14s\n' "hedgehog, converted (KL $(kl hedgehog) after distill)" "$(ppl hedgehog-converted)" "$(gain hedgehog-converted)"
printf '%-46s %10s %14s\n' "hedgehog, converted + finetuned $FT_STEPS steps" "$(ppl hedgehog-finetuned)" "$(gain hedgehog-finetuned)"
echo "(copy gain: nats/token better on the second reading of $COPY_SEGMENTS passages of $COPY_LEN tokens, 95% interval; docs/recall.md)"
print_timings
echo "quickstart done in $(( SECONDS - t_start )) s: outputs in $OUT"
[[ -f $OUT/report/report.html ]] && echo "open $OUT/report/report.html in a browser"
exit 0
