#!/usr/bin/env bash
# Regenerates mimic's embedded models (examples/models/): gpt2-mini (causal LM) and bert-mini (masked LM)
# pretrained on the public-domain corpora, and bert-mini finetuned on the two classification tasks.
#   SCALE=full  (default) the shipped models: long runs, best on 2 quiet cores (see docs/data.md)
#   SCALE=quick a few steps of each stage, to check the recipe end to end in minutes
#   MIMIC=path/to/mimic  OUT=out/pretrain-mini  INSTALL=1 (copy the results into examples/models/)
#   THREADS=N  threads per stage (default: all cores)
# Every stage resumes from its checkpoint when interrupted and is skipped once its output is complete;
# rerunning the same command continues where it stopped.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
MIMIC=${MIMIC:-$root/build/mimic}
SCALE=${SCALE:-full}
OUT=${OUT:-$root/out/pretrain-mini-$SCALE}
THREADS=${THREADS:-$(nproc)}
common=(--threads "$THREADS" --seed 1)
mkdir -p "$OUT"

case $SCALE in
  full)  bert_steps=${BERT_STEPS:-500} cls_steps=${CLS_STEPS:-400} eval_every=100 ;;
  quick) bert_steps=6 cls_steps=6 eval_every=3 ;;
  *) echo "SCALE must be quick or full" >&2; exit 2 ;;
esac

stage() {  # stage NAME COMMAND...: runs COMMAND unless NAME is done, timing it
  local name=$1; shift
  if [[ -f $OUT/$name/.done ]]; then echo "== $name: done (remove $OUT/$name/.done to redo)"; return; fi
  echo "== $name"
  local t0=$(date +%s)
  "$@"
  echo "$(( $(date +%s) - t0 ))" > "$OUT/$name/.done"
}

# gpt2-mini: 6 layers, d=192, 8 heads of 24, context 512, no dropout, GPT-2's byte-level BPE (50,257 tokens),
# trained in six curriculum stages so that it copies from its context (issue 17; docs/data.md, "The copy
# curriculum"). Each stage starts from the previous one's last/ model and may end part-way through its own
# learning-rate schedule (--end-at): the hand-over points were chosen from the snapshots' probes (induction
# scores, then copy gain on held-out prose and passkey retrieval). Every block of every stage carries a span that
# recurs; the model still learns prose from the rest of each block (validation blocks are plain prose).
#  1. pos: a fresh model with a sin/cos position table at RMS 0.1 (a previous-token head needs positions the
#     model can tell apart) on 128-token blocks, each carrying a span of 8-32 tokens that recurs twice, half of the
#     spans random tokens of the 2,000 most frequent ids.
#  2. syn: the same blocks with every span random, 16-40 tokens from the 500 most frequent ids: only an induction
#     head predicts them. The copies' loss sits at ln 500 for ~1,000 steps, then falls (the induction phase change).
#  3. syn2: the same all-random blocks drawn from the 20,000 most frequent ids, so that the circuit works for (nearly)
#     every token: the copies' loss starts at ln 20000 ~ 9.9 and falls after ~450 steps.
#  4. prs: syn2's blocks with half the spans prose: the circuit learns to copy prose (held-out copy gain at
#     60-token segments 0.15 -> 2.97 in 500 steps).
#  5. len256, 6. gpt2-mini: the context doubled per stage (256-token blocks with spans of 16-80 tokens, then 512 with
#     16-128), half the spans random. Going from 128 straight to 512 tokens destroyed the circuit (its positions
#     128-511 untrained and a fresh learning-rate warm-up at once); one doubling at a time keeps it.
if [[ $SCALE == full ]]; then
  pos=(--steps 3000 --end-at 500) syn=(--steps 4000 --end-at 1500) syn2=(--steps 1500) prs=(--steps 1500 --end-at 500)
  len256=(--steps 1500 --end-at 1300) len512=(--steps 1500 --end-at ${GPT_END:-1500})
else
  pos=(--steps 8 --end-at 4) syn=(--steps 8 --end-at 4) syn2=(--steps 4) prs=(--steps 6 --end-at 3) len256=(--steps 4)
  len512=(--steps 4)
fi
# gpt2_stage NAME SEED ARGS...: one stage of the curriculum; what every stage shares is here, what differs is ARGS
gpt2_stage() {
  local name=$1 seed=$2; shift 2
  stage "$name" "$MIMIC" pretrain --arch gpt2 --data all --lr 1e-3 --weight-decay 0.1 --copy-fraction 1.0 --copy-repeats 2 \
    --eval-every "$eval_every" --checkpoint-every 25 "$@" --out "$OUT/$name" --threads "$THREADS" --seed "$seed"
}
gpt2_stage gpt2-mini-pos 1 --config "$root/recipes/configs/gpt2-mini.json" --position-init sinusoidal --position-scale 0.1 \
  --seq-len 128 --batch-size 16 "${pos[@]}" --warmup 50 --copy-span 8,32 --copy-random 0.5
gpt2_stage gpt2-mini-syn 3 --init "$OUT/gpt2-mini-pos/last" --seq-len 128 --batch-size 16 "${syn[@]}" --warmup 20 \
  --copy-span 16,40 --copy-random 1.0 --copy-random-vocab 500
gpt2_stage gpt2-mini-syn2 5 --init "$OUT/gpt2-mini-syn/last" --seq-len 128 --batch-size 16 "${syn2[@]}" --warmup 20 \
  --copy-span 16,40 --copy-random 1.0 --copy-random-vocab 20000
gpt2_stage gpt2-mini-prs 8 --init "$OUT/gpt2-mini-syn2/last" --seq-len 128 --batch-size 16 "${prs[@]}" --warmup 50 \
  --copy-span 16,40 --copy-random 0.5 --copy-random-vocab 20000
gpt2_stage gpt2-mini-len256 9 --init "$OUT/gpt2-mini-prs/last" --seq-len 256 --batch-size 8 "${len256[@]}" --warmup 50 \
  --copy-span 16,80 --copy-random 0.5 --copy-random-vocab 20000
gpt2_stage gpt2-mini 10 --init "$OUT/gpt2-mini-len256/last" --seq-len 512 --batch-size 4 "${len512[@]}" --warmup 50 \
  --copy-span 16,128 --copy-random 0.5 --copy-random-vocab 20000
# bert-mini: 4 layers, d=256, 8 heads of 32, bert-base-uncased WordPiece (30,522 tokens), masked LM.
stage bert-mini "$MIMIC" pretrain --arch bert --config "$root/recipes/configs/bert-mini.json" --data all \
  --seq-len 256 --batch-size 16 --steps "$bert_steps" --warmup $(( bert_steps / 20 + 1 )) --lr 1e-3 --weight-decay 0.01 \
  --eval-every "$eval_every" --checkpoint-every 25 --out "$OUT/bert-mini" "${common[@]}"

# The classifiers start from bert-mini with its embeddings frozen (small labelled sets; and the shipped
# classifiers then share bert-mini's embedding shard byte for byte); labels and splits: docs/data.md.
for task in spam sotu-era; do
  stage "bert-mini-$task" "$MIMIC" finetune --task cls --model "$OUT/bert-mini" --data "$task" --freeze-embeddings \
    --seq-len 256 --batch-size 16 --steps "$cls_steps" --warmup $(( cls_steps / 10 + 1 )) --lr 1e-4 --weight-decay 0.01 --min-lr-ratio 0.1 \
    --eval-every "$eval_every" --checkpoint-every 25 --out "$OUT/bert-mini-$task" "${common[@]}"
done

# The shipped form: fp16 weights; BERT models as HF sharded checkpoints whose first shard is the embeddings.
for m in gpt2-mini bert-mini bert-mini-spam bert-mini-sotu-era; do
  shard=(); [[ $m == bert* ]] && shard=(--shard-embeddings)
  "$MIMIC" export --model "$OUT/$m" --out "$OUT/ship/$m" --dtype f16 "${shard[@]}" "${common[@]}" > /dev/null
  cp "$OUT/$m/log.jsonl" "$OUT/ship/$m/train-log.jsonl"
done

# Test-split metrics of the shipped models: the numbers the README reports and tests/test_embedded.cpp
# reproduces.
echo "== metrics (test splits)"
"$MIMIC" eval --model "$OUT/ship/gpt2-mini" --data all --split test --json "${common[@]}" > "$OUT/ship/gpt2-mini/metrics.json"
# recall from the context (issue 17's targets): copy gain on repeated held-out passages of 127 tokens, and passkey
# retrieval against 9 wrong keys (100 keys per length)
"$MIMIC" eval --task copy --model "$OUT/ship/gpt2-mini" --data all --split test --segments 32 --segment-len 128 --json \
  "${common[@]}" > "$OUT/ship/gpt2-mini/copy.json"
"$MIMIC" eval --task passkey --model "$OUT/ship/gpt2-mini" --lengths 128,256,512 --trials 100 --json "${common[@]}" \
  > "$OUT/ship/gpt2-mini/passkey.json"
for task in spam sotu-era; do
  "$MIMIC" eval --task cls --model "$OUT/ship/bert-mini-$task" --data "$task" --split test --seq-len 256 --json "${common[@]}" \
    > "$OUT/ship/bert-mini-$task/metrics.json"
done
for f in gpt2-mini/metrics gpt2-mini/copy gpt2-mini/passkey bert-mini-spam/metrics bert-mini-sotu-era/metrics; do
  echo "$f: $(tr -d '\n ' < "$OUT/ship/$f.json")"
done

if [[ ${INSTALL:-0} == 1 ]]; then
  for m in gpt2-mini bert-mini bert-mini-spam bert-mini-sotu-era; do
    dst=$root/examples/models/$m
    rm -rf "$dst" && mkdir -p "$dst" && cp "$OUT/ship/$m"/* "$dst/"
    # A classifier's files that are byte-identical to bert-mini's (the frozen embeddings' shard, vocab.txt)
    # become relative symlinks to them: stored once in git and on disk; every reader follows them.
    if [[ $m == bert-mini-* ]]; then
      for f in "$dst"/*; do
        base=$root/examples/models/bert-mini/$(basename "$f")
        if [[ -f $base ]] && cmp -s "$f" "$base"; then ln -sf "../bert-mini/$(basename "$f")" "$f"; fi
      done
    fi
    echo "installed $dst ($(du -sh "$dst" | cut -f1))"
  done
  echo "examples/models: $(du -sh "$root/examples/models" | cut -f1) (symlinks not followed)"
fi
