#!/usr/bin/env bash
# Finetuned conversion of the embedded BERT classifiers (bert-mini-spam, bert-mini-sotu-era) to Hedgehog linear
# attention (bidirectional), reported as in Hedgehog's GLUE table (Zhang et al. 2024, Table 6): the converted
# model's test metric as a percentage of the softmax teacher's ("recovered"), both finetuned with the same steps and
# data (the embedded teachers are small and still gain from more training). Target: >= 99%.
#   bash recipes/bert-hedgehog.sh [TASKS]   TASKS: "spam sotu-era" (default); each uses the embedded bert-mini-TASK
#   SCALE=quick (64 × 256 recorded tokens, 10 epochs, 100 finetuning steps) | full (256 × 256, 10 epochs, 400 steps)
#   CLS_LEN (256) tokens per example, CLS_BATCH (16) examples per finetuning step; MIMIC, OUT, THREADS, SEED as in
#   recipes/lib.sh
CLS_LEN=${CLS_LEN:-256} CLS_BATCH=${CLS_BATCH:-16}
TASKS=${1:-spam sotu-era}
SCALE=${SCALE:-quick}
if [[ $SCALE == full ]]; then REC_SAMPLES=256 FT_STEPS=${FT_STEPS:-400}; else FT_STEPS=${FT_STEPS:-100}; fi
OUT=${OUT:-$(cd "$(dirname "$0")/.." && pwd)/out/bert-hedgehog-$SCALE}
source "$(dirname "$0")/lib.sh"
whole_numbers CLS_LEN CLS_BATCH
mkdir -p "$OUT"

# finetune_cls NAME MODEL TASK: the paper's BERT preset (lr 1e-5, cosine), embeddings frozen as when the teachers were
# trained; the same steps and data for the teacher and the converted model
finetune_cls() {
  stage "$1" to "$OUT/$1.json" "$MIMIC" finetune --task cls --model "$2" --data "$3" --preset bert --freeze-embeddings \
    --seq-len "$CLS_LEN" --batch-size "$CLS_BATCH" --steps "$FT_STEPS" --warmup $(( FT_STEPS / 10 + 1 )) --eval-every "$FT_STEPS" \
    --out "$OUT/$1" --json "${common[@]}"
}
for task in $TASKS; do
  teacher=bert-mini-$task
  cls=(--task cls --data "$task" --split test --seq-len "$CLS_LEN")
  # the teacher's attention on the task's own training texts (packed), as Hedgehog distils on the task data
  stage "$task-record" to "$OUT/$task-record.json" "$MIMIC" record --model "$teacher" --data "$task" --split train \
    --samples "$REC_SAMPLES" --seq-len "$REC_LEN" --out "$OUT/$task-record.h5" --json "${common[@]}"
  stage "$task-distill" to "$OUT/distill-$task.json" "$MIMIC" distill --record "$OUT/$task-record.h5" --feature-map hedgehog \
    --epochs "$EPOCHS" --out "$OUT/$task-maps.safetensors" --json "${common[@]}"
  stage "$task-convert" to "$OUT/$task-convert.json" "$MIMIC" convert --model "$teacher" --maps "$OUT/$task-maps.safetensors" \
    --out "$OUT/$task-converted" --json "${common[@]}"
  stage "$task-eval-converted" to "$OUT/$task-eval-converted.json" "$MIMIC" eval --model "$OUT/$task-converted" \
    --teacher "$teacher" "${cls[@]}" --json "${common[@]}"
  finetune_cls "$task-finetuned" "$OUT/$task-converted" "$task"
  finetune_cls "$task-teacher-finetuned" "$teacher" "$task"
  stage "$task-eval-finetuned" to "$OUT/$task-eval-finetuned.json" "$MIMIC" eval --model "$OUT/$task-finetuned" \
    --teacher "$OUT/$task-teacher-finetuned" "${cls[@]}" --json "${common[@]}"
done

echo
echo "== bert-mini classifiers → hedgehog ($SCALE: distill $EPOCHS epochs/layer on $REC_SAMPLES × $REC_LEN tokens of the task's"
echo "   training texts; finetune $FT_STEPS steps × $CLS_BATCH examples, the teacher finetuned the same way)"
echo "recovered = converted finetuned / teacher finetuned (test split)"
printf '| %-10s | %-8s | %8s | %17s | %9s | %19s | %9s |\n' "task" "metric" "teacher" "teacher finetuned" "converted" \
  "converted finetuned" "recovered"
printf '|---|---|---|---|---|---|---|\n'
for task in $TASKS; do
  for metric in accuracy f1 mcc; do
    t=$(get "$OUT/$task-eval-converted.json" ".teacher.$metric" 3)
    tf=$(get "$OUT/$task-eval-finetuned.json" ".teacher.$metric" 3)
    c=$(get "$OUT/$task-eval-converted.json" ".model.$metric" 3)
    f=$(get "$OUT/$task-eval-finetuned.json" ".model.$metric" 3)
    printf '| %-10s | %-8s | %8s | %17s | %9s | %19s | %8s%% |\n' "$task" "$metric" "$t" "$tf" "$c" "$f" \
      "$(awk -v f="$f" -v t="$tf" 'BEGIN { printf "%.1f", 100 * f / t }')"
  done
done
print_timings
