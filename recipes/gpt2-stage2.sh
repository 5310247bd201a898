#!/usr/bin/env bash
# Which second stage keeps what placement kept (issue 33): one converted model with K heads kept softmax by the probe,
# finetuned in several ways with the same steps and tokens; per variant the validation perplexity, the copy gain on the
# validation split and passkey retrieval. The default chosen from this comparison is measured on the *validation*
# split, so that the test split stays for the tables that report it (gpt2-recall.sh). Table in docs/finetune.md.
#   bash recipes/gpt2-stage2.sh [MODEL]   (default gpt2-mini)
#   SCALE, MIMIC, OUT, THREADS, SEED as in recipes/lib.sh; K=8 (heads kept, by the probe; 0: all-linear), VARIANTS (default:
#   all below), PASSKEY_LENGTHS=256, PASSKEY_TRIALS=20, the probe's PROBE_* (lib.sh). Results are named s2-VARIANT for
#   K = 8 (the comparison in docs/finetune.md) and s2-kK-VARIANT for any other K.
MODEL=${1:-gpt2-mini}
SCALE=${SCALE:-quick}
if [[ $SCALE == full ]]; then REC_SAMPLES=256 REC_LEN=512 FT_STEPS=1000 FT_BATCH=8 FT_LEN=512; fi
K=${K:-8}
PASSKEY_LENGTHS=${PASSKEY_LENGTHS:-256}
PASSKEY_TRIALS=${PASSKEY_TRIALS:-20}
OUT=${OUT:-$(cd "$(dirname "$0")/.." && pwd)/out/$(basename "$MODEL")-$SCALE}
source "$(dirname "$0")/lib.sh"
whole_numbers K
fit_to_context "$MODEL"
mkdir -p "$OUT"
# Validation-split scores for choosing (the test split is kept for reporting); EVAL_ARGS overrides, as in lib.sh.
[[ -n ${EVAL_ARGS:-} ]] || EVAL=(--data all --split validation)

# name | finetune options (beside --task lm --data all, the steps and lengths of lib.sh)
declare -A variant=(
  [lm]="--lr 6e-4"
  [lm-copy]="--lr 1e-4 --copy-fraction 0.5"
  [kd]="--teacher $MODEL --kd 1 --copy-fraction 0 --lr 6e-4"
  [kd-copy]="--teacher $MODEL --kd 1 --copy-fraction 0.5 --lr 6e-4"
  [kd-copy-lr1e-4]="--teacher $MODEL --kd 1 --copy-fraction 0.5 --lr 1e-4"
  [kd-lr1e-4]="--teacher $MODEL --kd 1 --copy-fraction 0 --lr 1e-4"
  [kd-copy-random]="--teacher $MODEL --kd 1 --copy-fraction 0.5 --copy-random 0.5 --lr 6e-4"
  [kd-copy-frozen]="--teacher $MODEL --kd 1 --copy-fraction 0.5 --freeze-kept-heads --lr 6e-4"
  [kd-copy-attention]="--teacher $MODEL --kd 1 --copy-fraction 0.5 --train attention --lr 6e-4"
  [kd-copy-lora]="--teacher $MODEL --kd 1 --copy-fraction 0.5 --lora 8 --lr 1e-4"
  [kd-copy-lr2e-4]="--teacher $MODEL --kd 1 --copy-fraction 0.5 --lr 2e-4"
  [kd-copy-lr3e-4]="--teacher $MODEL --kd 1 --copy-fraction 0.5 --lr 3e-4"  # finetune's default under --kd (the kd preset)
  [kd-lr3e-4]="--teacher $MODEL --kd 1 --copy-fraction 0 --lr 3e-4"
  [kd-copy-lr3e-5]="--teacher $MODEL --kd 1 --copy-fraction 0.5 --lr 3e-5"
  [kd-copy-more]="--teacher $MODEL --kd 1 --copy-fraction 1 --copy-random 0.5 --copy-repeats 2 --lr 1e-4"
  [kd-copy-maps]="--teacher $MODEL --kd 1 --copy-fraction 0.5 --train feature-maps --lr 1e-3"
  [kd-copy-attention-frozen]="--teacher $MODEL --kd 1 --copy-fraction 0.5 --train attention --freeze-kept-heads --lr 3e-4"
  [kd-copy-lora-lr6e-4]="--teacher $MODEL --kd 1 --copy-fraction 0.5 --lora 8 --lr 6e-4"
  [kd-copy-long]="--teacher $MODEL --kd 1 --copy-fraction 1 --copy-span 64,256 --lr 1e-4"
  [kd-copy-long-lora]="--teacher $MODEL --kd 1 --copy-fraction 1 --copy-span 64,256 --lora 8 --lr 6e-4"
)
order=(lm lm-copy kd kd-lr1e-4 kd-lr3e-4 kd-copy kd-copy-lr1e-4 kd-copy-lr2e-4 kd-copy-lr3e-4 kd-copy-random kd-copy-frozen kd-copy-attention kd-copy-lora kd-copy-lr3e-5 kd-copy-more
       kd-copy-maps kd-copy-attention-frozen kd-copy-lora-lr6e-4 kd-copy-long kd-copy-long-lora)
read -ra VARIANTS <<<"${VARIANTS:-${order[*]}}"
for v in "${VARIANTS[@]}"; do [[ -v variant[$v] ]] || { echo "unknown variant '$v' (known: ${order[*]})" >&2; exit 2; }; done

record_lm "$MODEL"
distill_lm hedgehog --feature-map hedgehog
pre=s2
(( K == 8 )) || pre=s2-k$K
if (( K > 0 )); then
  convert_only "s2-probe$K" "$MODEL" hedgehog --keep-softmax "auto:$K" "${probe[@]}"
  converted=s2-probe$K
else
  convert_only s2-k0 "$MODEL" hedgehog
  converted=s2-k0
fi
eval_lm teacher-val "$MODEL"
for v in "${VARIANTS[@]}"; do
  read -ra opts <<<"${variant[$v]}"
  stage "finetune-$pre-$v" to "$OUT/finetune-$pre-$v.json" "$MIMIC" finetune --task lm --model "$OUT/$converted-converted" --data all \
    --steps "$FT_STEPS" --batch-size "$FT_BATCH" --seq-len "$FT_LEN" --warmup $(( FT_STEPS / 10 + 1 )) --eval-every "$FT_STEPS" \
    "${opts[@]}" --out "$OUT/$pre-$v" --json "${common[@]}"
  eval_lm "$pre-$v" "$OUT/$pre-$v"
  passkey "$pre-$v" "$OUT/$pre-$v"
done

echo
echo "== $MODEL, $( (( K > 0 )) && echo "$K heads kept by the probe" || echo "all-linear (K = 0)"): second stages ($SCALE; $FT_STEPS steps × $FT_BATCH × $FT_LEN tokens; validation split)"
printf '| %-20s | %-72s | %10s | %14s | %10s | %8s |\n' "variant" "finetune options" "perplexity" "copy gain" "passkey" "seconds"
printf '|---|---|---|---|---|---|\n'
printf '| %-20s | %-72s | %10s | %14s | %10s | %8s |\n' "teacher" "-" "$(ppl teacher-val)" "$(gain teacher-val)" "-" "-"
printf '| %-20s | %-72s | %10s | %14s | %10s | %8s |\n' "converted" "-" "$(ppl "$converted-converted")" "$(gain "$converted-converted")" "-" "-"
for v in "${VARIANTS[@]}"; do
  printf '| %-20s | %-72s | %10s | %14s | %10s | %8s |\n' "$v" "${variant[$v]//$MODEL/TEACHER}" "$(ppl "$pre-$v")" "$(gain "$pre-$v")" \
    "$(ranked "$pre-$v")" "$(get "$OUT/finetune-$pre-$v.json" .seconds 0)"
done
print_timings
