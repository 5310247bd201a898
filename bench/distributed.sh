#!/usr/bin/env bash
# Issue 19's bench (docs/distributed.md, "Bench"): what data parallelism costs on one machine. The same `finetune`
# (the embedded gpt2-mini, --task lm) runs as one process with 2 threads and as `mimic launch --nproc 2` with 1
# thread each: the same cores and the same global batch (the launch gives each rank half of it), so the ratio of
# their tokens/s is the price of the communication and of splitting the work in two. From the distributed runs'
# log (train engine fields `allreduce_seconds`, `compute_seconds`) it also prints the all-reduce wait per step
# against the rest of a step, the numbers a multi-machine projection starts from.
#
#   bash bench/distributed.sh [--steps N] [--batch B] [--seq-len T] [--repeats R] [--mimic PATH] [--work DIR]
#   (--work DIR keeps the runs there; without it they go to a temporary folder removed at the end)
#
# Every figure is the median of R repeats (default 3), each repeat running both forms one after the other.
# tokens/s is the training loop's own (the log line of the last step: evaluation and export left out). The
# machine's load is printed before and after (`cat /proc/loadavg`): numbers from a busy machine say little.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
STEPS=24 BATCH=8 SEQ=64 REPEATS=3 MIMIC=$root/build/mimic WORK=""
usage() { sed -n '9,10p' "$0" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --steps) STEPS=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --seq-len) SEQ=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    --mimic) MIMIC=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    *) usage ;;
  esac
done
(( BATCH % 2 == 0 )) || { echo "distributed.sh: --batch must be even (each of the 2 ranks takes half), got $BATCH" >&2; exit 2; }
[[ -x $MIMIC ]] || { echo "distributed.sh: no mimic executable at $MIMIC (build it, or give --mimic PATH)" >&2; exit 2; }
if [[ -z $WORK ]]; then
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
else
  mkdir -p "$WORK"  # kept: the runs' logs stay for a look
  rm -rf "$WORK"/one-* "$WORK"/two-*
fi

# the run, as both forms share it: no evaluation before the end, no checkpoint before the end
finetune() {  # OUT BATCH THREADS
  echo "finetune --task lm --model gpt2-mini --data all --steps $STEPS --warmup 2 --seq-len $SEQ --batch-size $2 --eval-every 0" \
       "--eval-batches 1 --checkpoint-every $STEPS --threads $3 --seed 1 --json --out $1"
}

echo "loadavg before: $(cat /proc/loadavg)"
for ((i = 1; i <= REPEATS; ++i)); do
  # shellcheck disable=SC2046  # the command's words are split on purpose
  "$MIMIC" $(finetune "$WORK/one-$i" "$BATCH" 2) > "$WORK/one-$i.json"
  # shellcheck disable=SC2046
  "$MIMIC" launch --nproc 2 -- mimic $(finetune "$WORK/two-$i" $((BATCH / 2)) 1) > "$WORK/two-$i.json"
done
echo "loadavg after:  $(cat /proc/loadavg)"

python3 - "$WORK" "$REPEATS" "$STEPS" "$BATCH" "$SEQ" <<'EOF'
import json, statistics, sys
work, repeats, steps, batch, seq = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]

def lines(run):
    with open(f"{work}/{run}/log.jsonl") as f:
        return [j for j in map(json.loads, f) if "loss" in j]

def last_tps(run):
    return lines(run)[-1]["tokens_per_second"]

def per_step(run, key):
    # the log's fields are per-step means over each window; weigh the windows by their steps
    ls, total, n, prev = lines(run), 0.0, 0, 0
    for j in ls:
        total += j[key] * (j["step"] - prev)
        n += j["step"] - prev
        prev = j["step"]
    return total / n

one = statistics.median(last_tps(f"one-{i}") for i in range(1, repeats + 1))
two = statistics.median(last_tps(f"two-{i}") for i in range(1, repeats + 1))
allreduce = statistics.median(per_step(f"two-{i}", "allreduce_seconds") for i in range(1, repeats + 1))
compute = statistics.median(per_step(f"two-{i}", "compute_seconds") for i in range(1, repeats + 1))
print(f"finetune --task lm gpt2-mini, {steps} steps, global batch {batch} x {seq} tokens, median of {repeats}")
print(f"{'form':<34} {'tokens/s':>10}")
print(f"{'1 process x 2 threads':<34} {one:>10.1f}")
print(f"{'2 processes x 1 thread (launch)':<34} {two:>10.1f}")
print(f"ratio (2 processes / 1 process): {two / one:.3f}")
print(f"per step, 2 processes: all-reduce wait {allreduce * 1000:.1f} ms, compute {compute * 1000:.1f} ms"
      f" (all-reduce {100 * allreduce / (allreduce + compute):.1f}% of the step)")
EOF
