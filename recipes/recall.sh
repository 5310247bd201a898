#!/usr/bin/env bash
# What linear attention loses, on synthetic associative recall (docs/recall.md), on CPU.
#  A. Hedgehog App. B.1 / Fig. 5: small GPT-2s (recipes/configs/recall-mini.json: 2 layers, 4 heads, d 64) — or with
#     ARCH=llama small Llamas of the same widths (recall-llama-mini.json: 4 query heads sharing 2 KV heads) — trained
#     from scratch on MQAR with softmax attention, with each registered feature map, with hedgehog + SLA gates and
#     with the gated delta rule (--attention delta):
#     recall accuracy on the task's test split and the attention entropy of each model, side by side.
#  B. The conversion experiment the paper does not have: the softmax MQAR model recorded, distilled with maps
#     (± SLA gates), converted, then finetuned briefly on the task: accuracy before and after, and the share of the
#     teacher's accuracy recovered.
#   SCALE=quick (default) | full;  MIMIC, OUT, THREADS, SEED as in recipes/lib.sh
#   knobs: ARCH (gpt2 | llama), VOCAB LEN PAIRS (the task), STEPS BATCH LR (training from scratch), MAPS (part A), CONVERT_MAPS (part B),
#          EXAMPLES (scored per model), ENT_SAMPLES (test examples for the entropy), REC_SAMPLES EPOCHS FT_STEPS (part B)
SCALE=${SCALE:-quick}
ARCH=${ARCH:-gpt2}
case $ARCH in gpt2 | llama) ;; *) echo "ARCH must be gpt2 or llama, got '$ARCH'" >&2; exit 2 ;; esac
suffix=; [[ $ARCH == gpt2 ]] || suffix=-$ARCH
OUT=${OUT:-$(cd "$(dirname "$0")/.." && pwd)/out/recall$suffix-$SCALE}
source "$(dirname "$0")/lib.sh"
mkdir -p "$OUT"
mqar_settings
ENT_SAMPLES=${ENT_SAMPLES:-16}  # REC_SAMPLES (64), EPOCHS (10) and FT_STEPS (60) as in recipes/lib.sh
whole_numbers ENT_SAMPLES
MAPS=${MAPS:-$("$MIMIC" info --feature-maps --json | jq -r '.feature_maps[].name | select(. != "identity")')}
CONVERT_MAPS=${CONVERT_MAPS:-hedgehog elu}
config=$root/recipes/configs/recall${suffix}-mini.json

# scratch NAME ATTENTION: a model trained from scratch on the task (lib.sh's from_scratch), and its attention entropy
scratch() {
  from_scratch "$1" "$2" "$config"
  # its attention entropy on test examples: the model recorded on itself, its own weights reported
  stage "record-scratch-$1" to "$OUT/record-scratch-$1.json" "$MIMIC" record --model "$OUT/scratch-$1" --data "$TASK" --split test \
    --samples "$ENT_SAMPLES" --out "$OUT/record-scratch-$1.h5" --json "${common[@]}"
  local model=(--model "$OUT/scratch-$1")
  [[ $2 == softmax ]] && model=()  # a softmax model is its record's teacher: the report's softmax rows are its own
  stage "report-scratch-$1" to "$OUT/report-scratch-$1.json" "$MIMIC" report --record "$OUT/record-scratch-$1.h5" \
    "${model[@]}" --samples "$ENT_SAMPLES" --out "$OUT/report-scratch-$1" --json "${common[@]}"
}
# entropy NAME: the model's mean attention entropy (nats; over layers, heads and query rows); "-" for a kind whose
# weights are not a distribution (delta: report gives no entropy)
entropy() {
  local v
  v=$(jq -r --arg s "$1" '[.metrics[] | select(.head == -1 and ((.source == "softmax") == ($s == "softmax"))) | .entropy]
    | if any(. == null) then "-" else add / length end' "$OUT/report-scratch-$1.json")
  [[ $v == - ]] && printf -- - || printf '%.2f' "$v"
}

# ---- A: trained from scratch
scratch softmax softmax
for m in $MAPS; do scratch "$m" "linear:$m"; done
scratch hedgehog-sla sla:hedgehog
scratch delta delta  # the gated delta rule (issue 34): a state that overwrites what it stored under a key

# ---- B: the softmax model converted
stage record to "$OUT/record.json" "$MIMIC" record --model "$OUT/scratch-softmax" --data "$TASK" --split train \
  --samples "$REC_SAMPLES" --out "$OUT/record.h5" --json "${common[@]}"
convert_recall() {  # convert_recall TAG [distill options...]
  local tag=$1; shift
  stage "distill-$tag" to "$OUT/distill-$tag.json" "$MIMIC" distill --record "$OUT/record.h5" --epochs "$EPOCHS" "$@" \
    --out "$OUT/maps-$tag.safetensors" --json "${common[@]}"
  stage "convert-$tag" to "$OUT/convert-$tag.json" "$MIMIC" convert --model "$OUT/scratch-softmax" --maps "$OUT/maps-$tag.safetensors" \
    --out "$OUT/$tag-converted" --json "${common[@]}"
  accuracy "$tag-converted" "$OUT/$tag-converted"
  stage "finetune-$tag" to "$OUT/finetune-$tag.json" "$MIMIC" finetune --task lm --model "$OUT/$tag-converted" --data "$TASK" \
    --seq-len "$LEN" --batch-size "$BATCH" --steps "$FT_STEPS" --warmup $(( FT_STEPS / 10 + 1 )) --lr "$LR" --eval-every "$FT_STEPS" \
    --out "$OUT/$tag-finetuned" --json "${common[@]}"
  accuracy "$tag-finetuned" "$OUT/$tag-finetuned"
}
for m in $CONVERT_MAPS; do convert_recall "$m" --feature-map "$m"; done
convert_recall hedgehog-sla --feature-map hedgehog --sla

teacher=$(get "$OUT/acc-scratch-softmax.json" .model.accuracy)
share() { awk -v a="$(get "$OUT/acc-$1.json" .model.accuracy)" -v t="$teacher" 'BEGIN { printf "%.0f%%", (t > 0 ? 100 * a / t : 0) }'; }
echo
mqar_header
echo "(models: $ARCH, recipes/configs/$(basename "$config"))"
printf '| %-22s | %9s | %16s |\n' "trained from scratch" "accuracy" "entropy (nats)"
printf '|---|---|---|\n'
for m in softmax $MAPS hedgehog-sla delta; do printf '| %-22s | %9s | %16s |\n' "$m" "$(acc "scratch-$m")" "$(entropy "$m")"; done
echo "(entropy of uniform weights over the visible keys: $(get "$OUT/report-scratch-softmax.json" .uniform_entropy 2) nats; delta: -, its weights are not a distribution)"
echo
echo "== the softmax model converted: distill $EPOCHS epochs on $REC_SAMPLES examples, finetune $FT_STEPS steps"
printf '| %-22s | %8s | %10s | %10s | %10s |\n' "map" "KL" "converted" "finetuned" "recovered"
printf '|---|---|---|---|---|\n'
for m in $CONVERT_MAPS hedgehog-sla; do
  printf '| %-22s | %8s | %10s | %10s | %10s |\n' "$m" "$(kl "$m")" "$(acc "$m-converted")" "$(acc "$m-finetuned")" "$(share "$m-finetuned")"
done
echo "(teacher: softmax from scratch, accuracy $(acc scratch-softmax); chance 1/$(( VOCAB - VOCAB / 2 )) values)"
print_timings
