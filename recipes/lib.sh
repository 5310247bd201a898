# Shared by the recipes (source it): settings, skippable timed stages, reading JSON results, the table.
#   MIMIC=path/to/mimic   SCALE=quick|full   OUT=dir   THREADS=N   SEED=S
# Every stage writes its outputs under $OUT and is skipped when its `.done` mark exists (rerun a recipe to
# continue where it stopped; remove a mark or the folder to redo a stage). Commands that resume by themselves
# (distill, finetune) continue from their checkpoints when a stage was interrupted.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MIMIC=${MIMIC:-$root/build/mimic}
SCALE=${SCALE:-quick}
THREADS=${THREADS:-$(nproc)}
SEED=${SEED:-1}
common=(--threads "$THREADS" --seed "$SEED")
case $SCALE in quick | full) ;; *) echo "SCALE must be quick or full, got '$SCALE'" >&2; exit 2 ;; esac
# whole_numbers NAME...: each named knob a whole number, else one line and exit 2 (a knob such as STEPS=abc reached
# bash arithmetic and read "abc: unbound variable": helper-86's probe). No leading zero: bash arithmetic reads 0512 as
# octal (warmup 34 where mimic got 512) and 08 not at all (the review of session 55).
whole='(0|[1-9][0-9]*)'
whole_numbers() {
  local n
  for n; do [[ ${!n} =~ ^$whole$ ]] || { echo "$n must be a whole number, got '${!n}'" >&2; exit 2; }; done
}
# whole_number_list NAME...: each named knob whole numbers separated by spaces ("" for none), as whole_numbers
whole_number_list() {
  local n
  for n; do
    [[ ${!n} =~ ^\ *($whole(\ +$whole)*)?\ *$ ]] || { echo "$n must be whole numbers separated by spaces, got '${!n}'" >&2; exit 2; }
  done
}
[[ -x $MIMIC ]] || { echo "no mimic CLI at $MIMIC (build it: cmake --build build --target mimic_cli, or set MIMIC)" >&2; exit 2; }

declare -a timings=()
# stage NAME COMMAND...: runs COMMAND unless $OUT/.done/NAME exists; records the wall time.
stage() {
  local name=$1; shift
  local mark=$OUT/.done/$name
  mkdir -p "$OUT/.done"
  if [[ -f $mark ]]; then
    echo "== $name: done earlier ($(cat "$mark") s; remove $mark to redo)"
  else
    echo "== $name"
    local t0=$SECONDS
    "$@"
    echo $(( SECONDS - t0 )) > "$mark"
  fi
  timings+=("$(printf '%-44s %6s s' "$name" "$(cat "$mark")")")
}
# to FILE COMMAND...: runs COMMAND with its stdout (a --json result) written atomically to FILE (a failed command leaves
# no FILE.tmp behind).
to() { local f=$1; shift; "$@" > "$f.tmp" || { local rc=$?; rm -f "$f.tmp"; return $rc; }; mv "$f.tmp" "$f"; }
# get FILE JQ-PATH [DECIMALS]: a number from a JSON result.
get() { jq -r "$2" "$1" | { read -r v; [[ -n ${3:-} ]] && printf "%.${3}f" "$v" || printf '%s' "$v"; }; }
print_timings() { echo; echo "time per stage"; printf '  %s\n' "${timings[@]}"; }

# Recall tasks (recall.sh, taylor.sh). mqar_settings: the task and its training, each a knob with the recipes' default
# (VOCAB LEN PAIRS the task, STEPS BATCH LR training from scratch, EXAMPLES scored per model; SCALE=full trains and
# scores 4x more), and TASK, the task's --data spelling. mqar_header: the line above a recipe's table of results.
mqar_settings() {
  local d_steps=1500 d_examples=500
  [[ $SCALE == full ]] && d_steps=6000 d_examples=2000
  VOCAB=${VOCAB:-32} LEN=${LEN:-32} PAIRS=${PAIRS:-4}
  STEPS=${STEPS:-$d_steps} BATCH=${BATCH:-64} LR=${LR:-3e-3} EXAMPLES=${EXAMPLES:-$d_examples}
  whole_numbers VOCAB LEN PAIRS STEPS BATCH EXAMPLES
  TASK="mqar:vocab=$VOCAB,seq_len=$LEN,pairs=$PAIRS"
}
mqar_header() {
  echo "== $TASK ($SCALE): $STEPS steps × $BATCH examples from scratch; accuracy over $EXAMPLES test examples ($(( EXAMPLES * PAIRS )) queries)"
}
# from_scratch NAME ATTENTION CONFIG: a model of CONFIG (its model_type the architecture: gpt2, llama, ...) trained from
# scratch on $TASK with ATTENTION → $OUT/scratch-NAME, its accuracy → $OUT/acc-scratch-NAME.json
from_scratch() {
  local arch
  arch=$(jq -r .model_type "$3")
  stage "scratch-$1" to "$OUT/train-scratch-$1.json" "$MIMIC" pretrain --arch "$arch" --config "$3" --data "$TASK" --seq-len "$LEN" \
    --attention "$2" --batch-size "$BATCH" --steps "$STEPS" --warmup $(( STEPS / 20 + 1 )) --lr "$LR" --eval-every "$STEPS" \
    --eval-batches 4 --out "$OUT/scratch-$1" --json "${common[@]}"
  accuracy "scratch-$1" "$OUT/scratch-$1"
}
# accuracy NAME MODEL: MQAR accuracy on the test split → $OUT/acc-NAME.json
accuracy() {
  stage "acc-$1" to "$OUT/acc-$1.json" "$MIMIC" eval --task mqar --model "$2" --data "$TASK" --examples "$EXAMPLES" --json "${common[@]}"
}
acc() { get "$OUT/acc-$1.json" .model.accuracy 3; }

# ---- the conversion pipeline of a causal LM (used by quickstart, gpt2-hedgehog, gpt2-sla, feature-map-ablation)
# Settings (set them before calling; defaults are the quick scale):
#   REC_SAMPLES REC_LEN        samples × tokens recorded from the training split for distillation
#   EPOCHS                     distillation epochs per layer
#   FT_STEPS FT_BATCH FT_LEN   finetuning: optimizer steps, sequences per step, tokens per sequence
#   EVAL=(...)                 the text `mimic eval` scores, for perplexity and copy gain alike (default: the test
#                              split of all corpora); from the environment: EVAL_ARGS="--file my.txt"
#   PPL_STRIDE                 the perplexity windows' stride (default: eval's own); only the LM eval takes it
REC_SAMPLES=${REC_SAMPLES:-64} REC_LEN=${REC_LEN:-256} EPOCHS=${EPOCHS:-10}
# Finetuning runs at the evaluation's length (gpt2-mini's whole context): a converted model finetuned on 256-token
# sequences scored 189 perplexity in 256-token windows but 972 in 512-token ones (positions it was never trained at
# after its weights moved), so FT_LEN follows the model's context and FT_BATCH keeps 2,048 tokens per step.
FT_STEPS=${FT_STEPS:-60} FT_BATCH=${FT_BATCH:-4} FT_LEN=${FT_LEN:-512}
if [[ -n ${EVAL_ARGS:-} ]]; then read -ra EVAL <<<"$EVAL_ARGS"; elif [[ ! -v EVAL ]]; then EVAL=(--data all --split test); fi
#   COPY_SEGMENTS COPY_LEN     in-context copy (docs/recall.md): segments × tokens of the same text, each run doubled
COPY_SEGMENTS=${COPY_SEGMENTS:-32} COPY_LEN=${COPY_LEN:-128}
whole_numbers REC_SAMPLES REC_LEN EPOCHS FT_STEPS FT_BATCH FT_LEN COPY_SEGMENTS COPY_LEN

# record_lm TEACHER: the teacher's attention on REC_SAMPLES training samples → $OUT/record.h5
record_lm() {
  stage record to "$OUT/record.json" "$MIMIC" record --model "$1" --data all --split train --samples "$REC_SAMPLES" \
    --seq-len "$REC_LEN" --out "$OUT/record.h5" --json "${common[@]}"
}
# eval_lm NAME MODEL: perplexity → $OUT/eval-NAME.json, and the in-context copy gain → $OUT/copy-NAME.json
eval_lm() {
  stage "eval-$1" to "$OUT/eval-$1.json" "$MIMIC" eval --model "$2" "${EVAL[@]}" ${PPL_STRIDE:+--stride "$PPL_STRIDE"} \
    --json "${common[@]}"
  stage "copy-$1" to "$OUT/copy-$1.json" "$MIMIC" eval --task copy --model "$2" "${EVAL[@]}" --segments "$COPY_SEGMENTS" \
    --segment-len "$COPY_LEN" --json "${common[@]}"
}
# finetune_lm NAME MODEL: FT_STEPS of causal-LM finetuning on the training split → $OUT/NAME (a model directory)
finetune_lm() {
  stage "finetune-$1" to "$OUT/finetune-$1.json" "$MIMIC" finetune --task lm --model "$2" --data all --steps "$FT_STEPS" \
    --batch-size "$FT_BATCH" --seq-len "$FT_LEN" --warmup $(( FT_STEPS / 10 + 1 )) --eval-every "$FT_STEPS" --out "$OUT/$1" --json "${common[@]}"
}
# The probe's calibration (convert --placement probe; docs/convert.md, "Placement"): PROBE_SEGMENTS copy segments of
# PROBE_LEN tokens, PROBE_LM_WINDOWS prose windows (the model's context, at most 512 tokens) for the LM loss,
# PROBE_PASSKEYS passkey trials of PROBE_PASSKEY_LEN tokens, PROBE_LEADERS heads re-measured per step.
PROBE_SEGMENTS=${PROBE_SEGMENTS:-16} PROBE_LEN=${PROBE_LEN:-128} PROBE_PASSKEYS=${PROBE_PASSKEYS:-8}
PROBE_PASSKEY_LEN=${PROBE_PASSKEY_LEN:-256} PROBE_LEADERS=${PROBE_LEADERS:-16} PROBE_LM_WINDOWS=${PROBE_LM_WINDOWS:-4}
whole_numbers PROBE_SEGMENTS PROBE_LEN PROBE_PASSKEYS PROBE_PASSKEY_LEN PROBE_LEADERS PROBE_LM_WINDOWS
probe=(--placement probe --probe-segments "$PROBE_SEGMENTS" --probe-segment-len "$PROBE_LEN" --probe-passkeys "$PROBE_PASSKEYS"
       --probe-passkey-len "$PROBE_PASSKEY_LEN" --probe-leaders "$PROBE_LEADERS" --probe-lm-windows "$PROBE_LM_WINDOWS")
# finetune_kd NAME MODEL TEACHER [finetune options...]: the second stage that keeps recall (docs/finetune.md): logit
# distillation from the original TEACHER (--kd 1) on blocks of which KD_COPY repeat a span (the copy curriculum),
# FT_STEPS × FT_BATCH × FT_LEN tokens; every other setting is finetune's default under --kd unless given → $OUT/NAME
KD_COPY=${KD_COPY:-0.5}
finetune_kd() {
  stage "finetune-$1" to "$OUT/finetune-$1.json" "$MIMIC" finetune --task lm --model "$2" --teacher "$3" --kd 1 --copy-fraction "$KD_COPY" \
    --data all --steps "$FT_STEPS" --batch-size "$FT_BATCH" --seq-len "$FT_LEN" --warmup $(( FT_STEPS / 10 + 1 )) --eval-every "$FT_STEPS" \
    --out "$OUT/$1" "${@:4}" --json "${common[@]}"
}
# distill_lm TAG [distill options...]: distill (on $OUT/record.h5) → $OUT/maps-TAG.safetensors
distill_lm() {
  local tag=$1; shift
  stage "distill-$tag" to "$OUT/distill-$tag.json" "$MIMIC" distill --record "$OUT/record.h5" --epochs "$EPOCHS" "$@" \
    --out "$OUT/maps-$tag.safetensors" --json "${common[@]}"
}
# convert_lm TAG TEACHER [distill options...]: distill (on $OUT/record.h5) → convert → eval → finetune → eval.
# Results: $OUT/eval-TAG-converted.json, $OUT/eval-TAG-finetuned.json.
convert_lm() {
  local tag=$1 teacher=$2; shift 2
  distill_lm "$tag" "$@"
  convert_with "$tag" "$teacher" "$tag"
}
# convert_only TAG TEACHER MAPS_TAG [convert options...]: convert with the maps of an earlier distill stage (e.g. with
# --keep-softmax auto:K) → $OUT/TAG-converted, and eval it.
convert_only() {
  local tag=$1 teacher=$2 maps=$3; shift 3
  stage "convert-$tag" to "$OUT/convert-$tag.json" "$MIMIC" convert --model "$teacher" --maps "$OUT/maps-$maps.safetensors" \
    --out "$OUT/$tag-converted" "$@" --json "${common[@]}"
  eval_lm "$tag-converted" "$OUT/$tag-converted"
}
# convert_with TAG TEACHER MAPS_TAG [convert options...]: convert_only → finetune → eval, as convert_lm does.
convert_with() {
  convert_only "$@"
  finetune_lm "$1-finetuned" "$OUT/$1-converted"
  eval_lm "$1-finetuned" "$OUT/$1-finetuned"
}
# passkey NAME MODEL: passkey retrieval at PASSKEY_LENGTHS with PASSKEY_TRIALS keys each → $OUT/passkey-NAME.json
PASSKEY_LENGTHS=${PASSKEY_LENGTHS:-64,128,256,512}
PASSKEY_TRIALS=${PASSKEY_TRIALS:-$([[ $SCALE == full ]] && echo 100 || echo 20)}
whole_numbers PASSKEY_TRIALS
[[ $PASSKEY_LENGTHS =~ ^$whole(,$whole)*$ ]] || { echo "PASSKEY_LENGTHS must be whole numbers separated by commas, got '$PASSKEY_LENGTHS'" >&2; exit 2; }
# Recipes share one folder and some ask other lengths or trials of the same model (gpt2-sla: 64..512 × 20;
# gpt2-recall: 128..512 × 100): a result made with other settings is measured again, so a table never shows another
# recipe's trials.
passkey() {
  local f=$OUT/passkey-$1.json
  if [[ -f $OUT/.done/passkey-$1 && -f $f ]] &&
     [[ $(jq -r '[([.rows[].length] | map(tostring) | join(",")), (.rows[0].trials | tostring)] | join(" ")' "$f") != "$PASSKEY_LENGTHS $PASSKEY_TRIALS" ]]; then
    rm "$OUT/.done/passkey-$1"
  fi
  stage "passkey-$1" to "$f" "$MIMIC" eval --task passkey --model "$2" --lengths "$PASSKEY_LENGTHS" \
    --trials "$PASSKEY_TRIALS" --json "${common[@]}"
}
# state NAME MODEL: bytes of the decoding state (KV cache and/or recurrent states) after STATE_AT tokens → $OUT/state-NAME.json
STATE_AT=${STATE_AT:-512}
whole_numbers STATE_AT
state() {
  stage "state-$1" to "$OUT/state-$1.json" "$MIMIC" bench generate --model "$2" --prompt-lengths $(( STATE_AT - 8 )) \
    --new-tokens 8 --no-parallel --json "${common[@]}"
}
state_kb() { get "$OUT/state-$1.json" '.rows[0].state_bytes / 1000' 0; }
ppl() { get "$OUT/eval-$1.json" .perplexity 1; }
# copy gain in nats/token with its 95% interval, e.g. "4.21 ± 0.12"
gain() { echo "$(get "$OUT/copy-$1.json" .model.copy_gain 2) ± $(get "$OUT/copy-$1.json" .model.copy_gain_ci95 2)"; }
# passkey retrieval by length: the share of keys ranked first, e.g. "95%, 60%"; with "gain" also ranked by the
# gain over a prompt without the key, e.g. "95% / 98%, 60% / 85%"
ranked() {
  local f='"\(.rank_accuracy*100|round)%"'
  [[ ${2:-} == gain ]] && f='"\(.rank_accuracy*100|round)% / \(.gain_rank_accuracy*100|round)%"'
  jq -r "[.rows[] | $f] | join(\", \")" "$OUT/passkey-$1.json"
}
kl() { get "$OUT/distill-$1.json" '[.layers[].after.mean.kl] | add / length' 3; }

# fit_to_context MODEL: the lengths above, cut to what MODEL can read (its config's max_positions), so that a model
# with a shorter context than gpt2-mini's 512 runs every recipe unchanged: recorded and finetuning sequences at most
# the context (finetuning keeps its tokens per step: FT_BATCH grows as FT_LEN shrinks), copy passages at most half of
# it (they are read twice in one window), passkey lengths beyond it dropped, the state measured at most at it.
# Says what it changed in one line; changes nothing for a model whose context holds every length.
fit_to_context() {
  local ctx
  ctx=$("$MIMIC" info "$1" --json | jq -r .max_positions) || { echo "fit_to_context: cannot read $1 (mimic info failed)" >&2; exit 2; }
  [[ $ctx =~ ^[0-9]+$ ]] && (( ctx >= 16 )) || { echo "fit_to_context: $1 has a context of '$ctx' tokens (need >= 16)" >&2; exit 2; }
  local said=()
  if (( REC_LEN > ctx )); then REC_LEN=$ctx; said+=("record $REC_LEN"); fi
  if (( FT_LEN > ctx )); then
    FT_BATCH=$(( (FT_BATCH * FT_LEN + ctx - 1) / ctx )) FT_LEN=$ctx; said+=("finetune $FT_BATCH × $FT_LEN")
  fi
  if (( 2 * COPY_LEN > ctx )); then COPY_LEN=$(( ctx / 2 )); said+=("copy passages $COPY_LEN"); fi
  if (( PROBE_LEN > 0 && 2 * PROBE_LEN > ctx )); then PROBE_LEN=$(( ctx / 2 )); said+=("probe passages $PROBE_LEN"); fi
  if (( PROBE_PASSKEY_LEN > ctx )); then PROBE_PASSKEY_LEN=$ctx; said+=("probe passkeys $PROBE_PASSKEY_LEN"); fi
  probe=(--placement probe --probe-segments "$PROBE_SEGMENTS" --probe-segment-len "$PROBE_LEN" --probe-passkeys "$PROBE_PASSKEYS"
         --probe-passkey-len "$PROBE_PASSKEY_LEN" --probe-leaders "$PROBE_LEADERS" --probe-lm-windows "$PROBE_LM_WINDOWS")
  local kept=() l
  IFS=, read -ra ls <<<"$PASSKEY_LENGTHS"
  for l in "${ls[@]}"; do (( l <= ctx )) && kept+=("$l"); done
  (( ${#kept[@]} > 0 )) || kept=("$ctx")
  local fitted; fitted=$(IFS=,; echo "${kept[*]}")
  if [[ $fitted != "$PASSKEY_LENGTHS" ]]; then PASSKEY_LENGTHS=$fitted; said+=("passkey $PASSKEY_LENGTHS"); fi
  if (( STATE_AT > ctx )); then STATE_AT=$ctx; said+=("state at $STATE_AT"); fi
  if (( ${#said[@]} > 0 )); then
    local msg; msg=$(printf '; %s' "${said[@]}")
    echo "== $1 reads $ctx tokens: lengths cut to fit (${msg:2})"
  fi
}
