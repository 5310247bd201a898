#!/usr/bin/env bash
# Conversions that keep the teacher's recall (issue 33): which heads keep softmax — chosen by distill's per-head KL or
# by the probe (measured effect, greedy; docs/convert.md, "Placement") — for K heads, with a linear student (hedgehog)
# or the LoLCATs hybrid (a softmax window of WINDOW keys + linear), and the second stage as the other recipes run it
# (LM loss on prose) or the one that keeps recall (logit distillation from the original teacher on blocks that repeat
# a span: `finetune --kd 1 --teacher MODEL --copy-fraction KD_COPY`; docs/finetune.md). Per model: test perplexity,
# in-context copy gain (and its share of the teacher's), passkey retrieval ranked first, the decoding state after
# STATE_AT tokens; the table, and OUT/pareto/pareto.{png,svg}: decoding state against the copy gain kept, one curve per
# placement and student after the new second stage.
#   bash recipes/gpt2-recall.sh [MODEL]   (default gpt2-mini; a HF GPT-2 directory works too)
#   SCALE=quick|full, MIMIC, OUT, THREADS, SEED as in recipes/lib.sh; KS="2 4 8 12" (0 always runs), KL_KS (the K's
#   that the per-head KL placement runs at, beside the probe; default KS, "" for none), WINDOW=64,
#   STUDENTS="hedgehog hybrid" (any of hedgehog, hybrid, delta), STAGE2S="lm kd" (the second stages to run: either or both),
#   KD_COPY=0.5, PASSKEY_LENGTHS=128,256,512, PASSKEY_TRIALS=100, STATE_AT=512;
#   CACHES="128": LoLA's sparse cache sizes λ added to the hybrid student at K=0 (convert --attention-options cache=λ,
#   training-free; then the second stages with the cache in the loop), "" for none;
#   HEAD_CACHE_KS (default 8, or the largest K when that is smaller; "" for none), HEAD_CACHE=192, HEAD_WINDOW=64: the cache
#   of HEAD_CACHE keys in the probe's first K heads only and a window of HEAD_WINDOW everywhere (convert --cache-heads),
#   its kd stage at HEAD_KD_LR=1e-4 (the kd preset's 3e-4 trains its passkey away; docs/recall.md);
#   the probe's calibration (lib.sh): PROBE_SEGMENTS=16 PROBE_LEN=128 PROBE_PASSKEYS=8 PROBE_PASSKEY_LEN=256 PROBE_LEADERS=16 PROBE_LM_WINDOWS=4
MODEL=${1:-gpt2-mini}
SCALE=${SCALE:-quick}
if [[ $SCALE == full ]]; then REC_SAMPLES=256 REC_LEN=512 FT_STEPS=1000 FT_BATCH=8 FT_LEN=512; fi
KS=${KS:-2 4 8 12}
KL_KS=${KL_KS-$KS}
# has_kl STUDENT K: whether per-head KL places K heads of STUDENT (delta's maps hold no KL: its weights are no distribution)
has_kl() { [[ $1 != delta && " $KL_KS " == *" $2 "* ]]; }
WINDOW=${WINDOW:-64}
PASSKEY_LENGTHS=${PASSKEY_LENGTHS:-128,256,512}
PASSKEY_TRIALS=${PASSKEY_TRIALS:-100}
# The GPT-2 recipes share one output folder per model and scale: stages they have in common run once.
OUT=${OUT:-$(cd "$(dirname "$0")/.." && pwd)/out/$(basename "$MODEL")-$SCALE}
source "$(dirname "$0")/lib.sh"
whole_numbers WINDOW
whole_number_list KS KL_KS
kmax=0
for k in $KS; do (( k > kmax )) && kmax=$k; done
(( kmax > 0 )) || { echo "KS must name at least one K > 0, got '$KS'" >&2; exit 2; }
CACHES=${CACHES-128}
HEAD_CACHE=${HEAD_CACHE:-192}
HEAD_WINDOW=${HEAD_WINDOW:-64}
HEAD_KD_LR=${HEAD_KD_LR:-1e-4}
HEAD_CACHE_KS=${HEAD_CACHE_KS-$(( kmax < 8 ? kmax : 8 ))}
whole_number_list CACHES HEAD_CACHE_KS
# checked before the first stage, not hours later when the cache-heads row's convert or kd stage would refuse them
[[ $HEAD_CACHE =~ ^[1-9][0-9]*$ && $HEAD_WINDOW =~ ^[1-9][0-9]*$ ]] ||
  { echo "HEAD_CACHE and HEAD_WINDOW must be positive integers, got '$HEAD_CACHE' and '$HEAD_WINDOW'" >&2; exit 2; }
[[ $HEAD_KD_LR =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$ ]] && awk -v x="$HEAD_KD_LR" 'BEGIN { exit !(x > 0) }' ||
  { echo "HEAD_KD_LR must be a positive number, got '$HEAD_KD_LR'" >&2; exit 2; }
for k in $HEAD_CACHE_KS; do
  (( k >= 1 && k <= kmax )) || { echo "HEAD_CACHE_KS: $k is not a K the probe places (1 to $kmax, the largest of KS)" >&2; exit 2; }
done
read -ra stages <<<"${STAGE2S:-lm kd}"
for s in "${stages[@]}"; do [[ $s == lm || $s == kd ]] || { echo "STAGE2S: unknown second stage '$s' (lm, kd)" >&2; exit 2; }; done
# the knobs first (above), then the model: its context may cut the lengths, and the output folder is made
fit_to_context "$MODEL"
mkdir -p "$OUT"

record_lm "$MODEL"
eval_lm teacher "$MODEL"
passkey teacher "$MODEL"
state teacher "$MODEL"
# The students: hedgehog (shared with the other recipes), the hybrid (hedgehog_softmax, LoLCATs' normalised map:
# docs/attention.md, "The normalisation we chose") and, when asked, the delta rule.
students=()
for st in ${STUDENTS:-hedgehog hybrid}; do
  case $st in
    hedgehog) distill_lm hedgehog --feature-map hedgehog; students+=(hedgehog) ;;
    hybrid) distill_lm "hybrid-w$WINDOW" --attention "hybrid:window=$WINDOW" --feature-map hedgehog_softmax; students+=("hybrid-w$WINDOW") ;;
    # the gated delta rule (issue 34): its weights are no distribution, so it distils by output MSE
    delta) distill_lm delta --attention delta --loss mse; students+=(delta) ;;
    *) echo "STUDENTS: unknown student '$st' (hedgehog, hybrid, delta)" >&2; exit 2 ;;
  esac
done
if [[ " ${stages[*]} " == *" lm "* ]]; then  # the teacher through the old second stage: what it erases
  finetune_lm teacher-finetuned "$MODEL"
  eval_lm teacher-finetuned "$OUT/teacher-finetuned"
  passkey teacher-finetuned "$OUT/teacher-finetuned"
  state teacher-finetuned "$OUT/teacher-finetuned"
fi

# stage2 TAG [kd options...]: the second stages of $OUT/TAG-converted, each evaluated, passkey and state measured.
stage2() {
  for s in "${stages[@]}"; do
    if [[ $s == lm ]]; then finetune_lm "$1-lm" "$OUT/$1-converted"; else finetune_kd "$1-kd" "$OUT/$1-converted" "$MODEL" "${@:2}"; fi
  done
  for s in "${stages[@]}"; do
    eval_lm "$1-$s" "$OUT/$1-$s"
    passkey "$1-$s" "$OUT/$1-$s"
    state "$1-$s" "$OUT/$1-$s"
  done
}
# the probe's first K heads of STUDENT as LAYER.HEAD,... (its run for the largest K chose them in order)
probe_heads() { jq -r --argjson k "$2" '[.placement.kept[:$k][] | "\(.layer).\(.head)"] | join(",")' "$OUT/convert-$1-probe$kmax.json"; }
headcache_tag() { echo "$1-c$HEAD_CACHE-w$HEAD_WINDOW-probe$2"; }
# cached STUDENT: whether the sparse-cache rows run for it (the hybrid kind alone has the cache)
cached() { [[ $1 == hybrid* && -n $CACHES ]]; }
for st in "${students[@]}"; do
  convert_only "$st-k0" "$MODEL" "$st"
  stage2 "$st-k0"
  # No softmax head and a state that does not grow: the K=0 hybrid with a sparse cache of λ keys per head (issue 34)
  if cached "$st"; then
    for c in $CACHES; do
      convert_only "$st-k0-c$c" "$MODEL" "$st" --attention-options "cache=$c"
      stage2 "$st-k0-c$c"
    done
  fi
  # The probe once, for the largest K: its greedy steps are the same for every smaller K (each step measures with the
  # heads chosen before kept), so K < max keeps the first K heads it chose.
  convert_only "$st-probe$kmax" "$MODEL" "$st" --keep-softmax "auto:$kmax" "${probe[@]}"
  for k in $KS; do
    if (( k != kmax )); then
      convert_only "$st-probe$k" "$MODEL" "$st" --keep-softmax "$(probe_heads "$st" "$k")"
    fi
    if has_kl "$st" "$k"; then convert_only "$st-kl$k" "$MODEL" "$st" --keep-softmax "auto:$k" --placement kl; fi
    stage2 "$st-probe$k"
    if has_kl "$st" "$k"; then stage2 "$st-kl$k"; fi
  done
  # No softmax head, a state that does not grow, and the cache only where the probe measured recall (issue 34): the
  # probe's first K heads get a cache of HEAD_CACHE keys, every head a window of HEAD_WINDOW
  if [[ $st == hybrid* ]]; then
    for k in $HEAD_CACHE_KS; do
      convert_only "$(headcache_tag "$st" "$k")" "$MODEL" "$st" --attention-options "window=$HEAD_WINDOW,cache=$HEAD_CACHE" \
        --cache-heads "$(probe_heads "$st" "$k")"
      stage2 "$(headcache_tag "$st" "$k")" --lr "$HEAD_KD_LR"
    done
  fi
done

teacher_gain=$(get "$OUT/copy-teacher.json" .model.copy_gain)
share() { awk -v g="$(get "$OUT/copy-$1.json" .model.copy_gain)" -v t="$teacher_gain" 'BEGIN { printf "%.0f%%", 100 * g / t }'; }
echo
echo "== $MODEL: keeping recall ($SCALE; distill $EPOCHS epochs on $REC_SAMPLES × $REC_LEN tokens; second stage $FT_STEPS × $FT_BATCH × $FT_LEN tokens)"
printf '| %-22s | %-6s | %3s | %-8s | %10s | %14s | %5s | %-18s | %10s |\n' "student" "placed" "K" "stage 2" "perplexity" "copy gain" "share" \
  "passkey ($PASSKEY_LENGTHS)" "state (kB)"
printf '|---|---|---|---|---|---|---|---|---|\n'
row() {  # row STUDENT PLACED K STAGE2 TAG
  printf '| %-22s | %-6s | %3s | %-8s | %10s | %14s | %5s | %-18s | %10s |\n' "$1" "$2" "$3" "$4" "$(ppl "$5")" "$(gain "$5")" "$(share "$5")" \
    "$(ranked "$5")" "$(state_kb "$5")"
}
row "softmax teacher" - - - teacher
[[ " ${stages[*]} " == *" lm "* ]] && row "softmax teacher" - - "LM" teacher-finetuned
for st in "${students[@]}"; do
  for s in "${stages[@]}"; do
    label=$([[ $s == lm ]] && echo "LM" || echo "KD+copy")
    row "$st" - 0 "$label" "$st-k0-$s"
    if cached "$st"; then for c in $CACHES; do row "$st, cache $c" - 0 "$label" "$st-k0-c$c-$s"; done; fi
    if [[ $st == hybrid* ]]; then
      for k in $HEAD_CACHE_KS; do
        row "$st, w $HEAD_WINDOW, cache $HEAD_CACHE in K heads" probe "$k" "$label$([[ $s == kd ]] && echo ", lr $HEAD_KD_LR")" \
          "$(headcache_tag "$st" "$k")-$s"
      done
    fi
    for k in $KS; do
      row "$st" probe "$k" "$label" "$st-probe$k-$s"
      if has_kl "$st" "$k"; then row "$st" kl "$k" "$label" "$st-kl$k-$s"; fi
    done
  done
done
echo
echo "before any finetuning (copy gain of the converted models):"
for st in "${students[@]}"; do
  line="  $st: K=0 $(gain "$st-k0-converted")"
  if cached "$st"; then for c in $CACHES; do line+=", with a cache of $c $(gain "$st-k0-c$c-converted")"; done; fi
  if [[ $st == hybrid* ]]; then
    for k in $HEAD_CACHE_KS; do line+=", w $HEAD_WINDOW with a cache of $HEAD_CACHE in the probe's $k $(gain "$(headcache_tag "$st" "$k")-converted")"; done
  fi
  for k in $KS; do
    line+="; K=$k probe $(gain "$st-probe$k-converted")"
    if has_kl "$st" "$k"; then line+=", kl $(gain "$st-kl$k-converted")"; fi
  done
  echo "$line"
done
echo "(passkey chance of ranking first: $(get "$OUT/passkey-teacher.json" '.chance * 100' 0)%; probe placement $(get "$OUT/convert-${students[0]}-probe$kmax.json" .placement.seconds 0) s" \
  "for K=$kmax on ${students[0]}, heads kept in order: $(jq -r '[.placement.kept[] | "\(.layer).\(.head)"] | join(" ")' "$OUT/convert-${students[0]}-probe$kmax.json"))"

# The Pareto figure: decoding state against the copy gain kept, one curve per placement and student (new second stage).
[[ " ${stages[*]} " == *" kd "* ]] || { print_timings; exit 0; }
series='[]'
for st in "${students[@]}"; do
  placements=(probe)
  [[ $st != delta ]] && placements+=(kl)
  for p in "${placements[@]}"; do
    ks=$([[ $p == probe ]] && echo "$KS" || echo "$KL_KS")
    pts=$(for k in 0 $ks; do
      tag=$([[ $k == 0 ]] && echo "$st-k0-kd" || echo "$st-$p$k-kd")
      jq -n --arg k "K=$k" --argjson x "$(get "$OUT/state-$tag.json" '.rows[0].state_bytes / 1000')" \
        --argjson y "$(get "$OUT/copy-$tag.json" .model.copy_gain)" --argjson t "$teacher_gain" '{x: $x, y: ($y / $t), label: $k}'
    done | jq -s .)
    series=$(jq --arg n "$p, $st" --argjson pts "$pts" '. + [{name: $n, points: $pts}]' <<<"$series")
  done
  if cached "$st"; then  # K=0 with the sparse cache, by its size
    pts=$(for c in $CACHES; do
      tag="$st-k0-c$c-kd"
      jq -n --arg c "cache $c" --argjson x "$(get "$OUT/state-$tag.json" '.rows[0].state_bytes / 1000')" \
        --argjson y "$(get "$OUT/copy-$tag.json" .model.copy_gain)" --argjson t "$teacher_gain" '{x: $x, y: ($y / $t), label: $c}'
    done | jq -s .)
    series=$(jq --arg n "sparse cache, $st" --argjson pts "$pts" '. + [{name: $n, points: $pts}]' <<<"$series")
  fi
done
jq -n --argjson s "$series" --arg at "$STATE_AT" '{title: "Decoding state against the copy gain kept (second stage: KD + copy)",
  x_label: ("decoding state after " + $at + " tokens (kB)"), y_label: "copy gain, share of the teacher'"'"'s", x_log: true,
  series: $s, reference: {y: 1, label: "teacher"}}' > "$OUT/pareto.json"
"$MIMIC" report --pareto "$OUT/pareto.json" --out "$OUT/pareto" "${common[@]}"
print_timings
