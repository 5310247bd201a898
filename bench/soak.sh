#!/usr/bin/env bash
# Crash-safety soak (docs/reliability.md, "Crash-safety soak"): mimic's promise that a run killed at any moment
# leaves no partial file under a final name, and that rerunning the same command finishes with the outputs of an
# uninterrupted run, tried by killing record, distill, finetune and report with SIGKILL at random moments.
#
#   bash bench/soak.sh [--runs N] [--stages record,distill,finetune,report] [--seed S] [--mimic PATH]
#                      [--work DIR] [--keep]
#
# Per stage: one uninterrupted run on the embedded gpt2-mini (small sizes: a few seconds to tens of seconds) is
# the reference, and its wall time D is noted (after a first, untimed run that warms caches). Then N times: start the same command in a fresh folder, kill -9 it after t seconds, t uniform in
# [0, D] (three draws in ten are uniform in [0.9 D, D] instead, so that kills land during the final writes; a
# run that finishes before its kill sets D to its own duration, so that a reference timed on a busier machine
# does not leave later runs unkilled),
# check that no file under a final name is partial, rerun the command to completion (record, distill and
# finetune resume from what the killed run left; report starts over) and check that the outputs equal the
# reference (bench/soak_compare.py says how each kind of file is compared). A failed trial's folder is kept in
# WORK/<stage>/failed-<i>. One summary line per stage; exits 1 when any trial failed.
# distill and report read the record (and report the maps) of the record (distill) stage's reference run.
# Everything runs with --threads 1: mimic is deterministic per seed, and byte-equal outputs need one thread.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
RUNS=5 STAGES=record,distill,finetune,report SEED=1 MIMIC=$root/build/mimic WORK="" KEEP=0
usage() { sed -n '5,6p' "$0" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) RUNS=$2; shift 2 ;;
    --stages) STAGES=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --mimic) MIMIC=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h | --help) usage ;;
    *) echo "soak.sh: unknown argument $1" >&2; usage ;;
  esac
done
[[ $RUNS =~ ^[0-9]+$ && $SEED =~ ^[0-9]+$ ]] || { echo "soak.sh: --runs and --seed take integers" >&2; exit 2; }
[[ -x $MIMIC ]] || { echo "soak.sh: no mimic CLI at $MIMIC (build it, or pass --mimic)" >&2; exit 2; }
{ command -v h5dump && command -v h5diff; } >/dev/null || { echo "soak.sh: needs h5dump and h5diff (hdf5-tools)" >&2; exit 2; }
IFS=, read -ra stages <<<"$STAGES"
for s in "${stages[@]}"; do
  case $s in record | distill | finetune | report) ;; *) echo "soak.sh: unknown stage '$s'" >&2; exit 2 ;; esac
done
WORK=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/mimic-soak.XXXXXX")}
mkdir -p "$WORK"
compare=$root/bench/soak_compare.py
model=$root/examples/models/gpt2-mini
common=(--threads 1 --seed "$SEED")

# cmd STAGE DIR: sets c to the stage's command, writing into DIR.
cmd() {
  local d=$2
  case $1 in
    record) c=("$MIMIC" record --model "$model" --data all --split train --samples 48 --seq-len 256 --batch-size 4 \
      --weights-samples 2 --out "$d/record.h5" "${common[@]}") ;;
    distill) c=("$MIMIC" distill --record "$WORK/record/ref/record.h5" --feature-map hedgehog --layers 0-2 --epochs 2 \
      --batch-size 4 --out "$d/maps.safetensors" "${common[@]}") ;;
    finetune) c=("$MIMIC" finetune --task lm --model "$model" --data all --steps 16 --batch-size 2 --seq-len 128 \
      --checkpoint-every 3 --eval-every 5 --eval-batches 2 --out "$d/ft" "${common[@]}") ;;
    report) c=("$MIMIC" report --record "$WORK/record/ref/record.h5" --maps "$WORK/distill/ref/maps.safetensors" \
      --baseline elu --samples 8 --out "$d/report" "${common[@]}") ;;
  esac
}
now() { date +%s.%N; }

# reference STAGE: the uninterrupted run (once per WORK folder); its wall time goes to WORK/STAGE/seconds.
reference() {
  # It runs in the trials' folder and is then renamed: outputs that record their own path (report's metrics.json
  # holds --out) compare equal.
  local s=$1 dir=$WORK/$1/run
  [[ -f $WORK/$s/seconds ]] && return 0
  case $s in distill) reference record || return 1 ;; report) reference distill || return 1 ;; esac
  rm -rf "$dir" "$WORK/$s/ref" && mkdir -p "$dir"
  cmd "$s" "$dir"
  # A first run warms what a later one finds ready (token caches, the page cache); it is timed again from scratch.
  if ! "${c[@]}" >"$WORK/$s/ref.log" 2>&1; then
    echo "soak.sh: the uninterrupted $s run failed (see $WORK/$s/ref.log)" >&2
    return 1
  fi
  rm -rf "$dir" && mkdir -p "$dir"
  local t0; t0=$(now)
  if ! "${c[@]}" >"$WORK/$s/ref.log" 2>&1; then
    echo "soak.sh: the uninterrupted $s run failed (see $WORK/$s/ref.log)" >&2
    return 1
  fi
  awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f\n", b - a }' >"$WORK/$s/seconds"
  mv "$dir" "$WORK/$s/ref"
}

failures=0
for s in "${stages[@]}"; do
  reference "$s" || { failures=$((failures + 1)); echo "$s: FAILED (no reference run)"; continue; }
  D=$(cat "$WORK/$s/seconds") D0=$(cat "$WORK/$s/seconds")
  killed=0 late=0 finished=0 partial=0 rerun_failed=0 differ=0
  notes=""
  for ((i = 1; i <= RUNS; i++)); do
    dir=$WORK/$s/run
    rm -rf "$dir" && mkdir -p "$dir"
    read -r t is_late < <(awk -v seed=$((SEED * 100003 + i)) -v d="$D" -v stage="$s" 'BEGIN {
      srand(seed + length(stage) * 7919); late = rand() < 0.3; u = rand()
      printf "%.2f %d\n", late ? d * (0.9 + 0.1 * u) : d * u, late }')
    cmd "$s" "$dir"
    t0=$(now)
    "${c[@]}" >"$WORK/$s/kill.log" 2>&1 &
    pid=$!
    sleep "$t"
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    if (($? == 137)); then
      killed=$((killed + 1)) late=$((late + is_late))
      what="killed at ${t} s"
    else
      finished=$((finished + 1))
      what="finished before ${t} s"
      # The machine got faster than when D was measured: draw the next moments from this run's duration.
      D=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f\n", b - a }')
    fi
    bad=""
    if ! out=$(python3 "$compare" partial "$WORK/$s/ref" "$dir"); then
      partial=$((partial + 1)) bad="partial"
      echo "$s #$i ($what): $out" | head -5
    fi
    if ! "${c[@]}" >"$WORK/$s/rerun.log" 2>&1; then
      rerun_failed=$((rerun_failed + 1)) bad="$bad rerun"
      echo "$s #$i ($what): the rerun failed: $(tail -1 "$WORK/$s/rerun.log")"
    elif ! out=$(python3 "$compare" equal "$WORK/$s/ref" "$dir"); then
      differ=$((differ + 1)) bad="$bad differ"
      echo "$s #$i ($what): after the rerun: $(grep -v '^note:' <<<"$out" | head -5)"
    else
      notes=$(grep '^note:' <<<"$out" | sed 's/^note: //' | paste -sd';' -)
    fi
    if [[ -n $bad ]]; then
      failures=$((failures + 1))
      rm -rf "$WORK/$s/failed-$i" && cp -a "$dir" "$WORK/$s/failed-$i"
      cp "$WORK/$s/kill.log" "$WORK/$s/rerun.log" "$WORK/$s/failed-$i/" 2>/dev/null
    fi
  done
  result=ok
  ((partial + rerun_failed + differ > 0)) && result=FAILED
  echo "$s: $result: $RUNS runs (reference ${D0} s): $killed killed ($late in the last 10%), $finished finished before the kill;" \
    "$partial left a partial file, $rerun_failed reruns failed, $differ differ from the reference${notes:+ ($notes)}"
done
if ((failures == 0 && KEEP == 0)); then rm -rf "$WORK"; else echo "work folder: $WORK"; fi
((failures == 0))
