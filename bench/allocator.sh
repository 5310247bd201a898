#!/usr/bin/env bash
# mimic's CPU allocator against LibTorch's own (docs/attention.md, "The CPU allocator"): one binary, the allocator
# switched by MIMIC_CPU_ALLOCATOR, runs of `mimic bench train` interleaved as ABBA... (mimic, libtorch, libtorch, mimic,
# repeated) so that a machine that slows down or speeds up during the measurement moves both allocators alike.
#
#   bash bench/allocator.sh [--pairs N (even; runs: 2N)] [--widths small] [--lengths 512,2048] [--repeats 3] [--mimic PATH] [--work DIR]
#
# Prints, per length and kind, each allocator's tokens/s (the median over its runs, and every run's) and the ratio of
# the medians, the peak RSS of each run, and the load average (also in WORK/load.txt) at each run's start, right after
# the last run and 240 s after it. The guide's rule holds
# for the figures this prints: a ratio goes into the docs only when the load was below 1 before AND after (the bench's
# own threads make it about 2 during the runs), and the losses must agree to the last digit (the allocator changes where
# tensors live, not what is computed); the script says so when they do not.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
PAIRS=2 WIDTHS=small LENGTHS=512,2048 REPEATS=3 MIMIC=$root/build/mimic WORK=""
usage() { sed -n '6,6p' "$0" >&2; exit "${1:-2}"; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --pairs | --widths | --lengths | --repeats | --mimic | --work) [[ $# -ge 2 ]] || { echo "allocator.sh: $1 needs a value" >&2; usage; } ;;&
    --pairs) PAIRS=$2; shift 2 ;;
    --widths) WIDTHS=$2; shift 2 ;;
    --lengths) LENGTHS=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    --mimic) MIMIC=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    -h | --help) usage 0 ;;
    *) echo "allocator.sh: unknown argument $1" >&2; usage ;;
  esac
done
[[ $PAIRS =~ ^[1-9][0-9]*$ && $REPEATS =~ ^[1-9][0-9]*$ ]] || { echo "allocator.sh: --pairs and --repeats take positive integers" >&2; exit 2; }
# an odd count ends on an unbalanced pair (mimic first), which a drift of the machine favours
((PAIRS % 2 == 0)) || { echo "allocator.sh: --pairs must be even (ABBA: each allocator runs first as often as second)" >&2; exit 2; }
[[ -x $MIMIC ]] || { echo "allocator.sh: no mimic CLI at $MIMIC (build it, or pass --mimic)" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "allocator.sh: needs /usr/bin/time (Debian package time) for the peak RSS" >&2; exit 2; }
[[ -n $WORK ]] || WORK=$(mktemp -d /tmp/mimic-allocator.XXXXXX)
mkdir -p "$WORK" || exit 2
# the summary reads every run*.json of the folder: one run's only
[[ -z $(ls -A "$WORK") ]] || { echo "allocator.sh: $WORK is not empty (give a new --work folder)" >&2; exit 2; }
: > "$WORK/load.txt"
i=0
for ((p = 0; p < PAIRS; p++)); do
  # ABBA: even pairs run mimic's allocator first, odd pairs LibTorch's
  if ((p % 2 == 0)); then order="mimic libtorch"; else order="libtorch mimic"; fi
  for a in $order; do
    i=$((i + 1))
    echo "run $i ($a) of $((2 * PAIRS)), load at its start: $(cat /proc/loadavg)" | tee -a "$WORK/load.txt" >&2
    MIMIC_CPU_ALLOCATOR=$a /usr/bin/time -f '%M' -o "$WORK/run$i-$a.rss" "$MIMIC" bench train --widths "$WIDTHS" \
      --lengths "$LENGTHS" --kinds 'linear:feature_map=hedgehog' --repeats "$REPEATS" --threads 2 --json \
      > "$WORK/run$i-$a.json" 2> "$WORK/run$i-$a.err" || { echo "allocator.sh: run $i failed: $WORK/run$i-$a.err" >&2; exit 1; }
  done
done
# The load average decays exponentially (a 1-minute time constant): right after the runs it is about 2, the bench's own
# two threads; 240 s later their share has decayed to 2·e^-4 ≈ 0.04, so what remains is other work. (Work that ran
# beside the bench and ended with it is seen only in the loads at the runs' starts, well above 2.)
echo "load right after: $(cat /proc/loadavg)" | tee -a "$WORK/load.txt" >&2
sleep 240
echo "load 240 s after: $(cat /proc/loadavg)" | tee -a "$WORK/load.txt" >&2
/usr/bin/python3 - "$WORK" <<'EOF'
import glob, json, os, statistics, sys
work = sys.argv[1]
runs = {"mimic": [], "libtorch": []}
for path in sorted(glob.glob(os.path.join(work, "run*.json")), key=lambda p: int(os.path.basename(p)[3:].split("-")[0])):
    a = path.rsplit("-", 1)[1][:-5]
    rss = int(open(path[:-5] + ".rss").read().split()[-1]) / 2**20  # GNU time's %M: KiB
    runs[a].append((json.load(open(path)), rss))
rows = {}
for a, rs in runs.items():
    for doc, _ in rs:
        for row in doc["rows"]:
            for k in row["kinds"]:
                rows.setdefault((row["T"], k["kind"]), {"mimic": [], "libtorch": []})[a].append(k)
same = True
# each run's tokens/s beside the medians: the spread between one allocator's runs says what a ratio can resolve
print("| tokens | kind | mimic tokens/s: median (runs) | libtorch tokens/s: median (runs) | mimic / libtorch |")
print("|---|---|---|---|---|")
for (T, kind), by in sorted(rows.items()):
    ms = [k["tokens_per_second"] for k in by["mimic"]]
    ls = [k["tokens_per_second"] for k in by["libtorch"]]
    m, l = statistics.median(ms), statistics.median(ls)
    losses = {(k["first_loss"], k["last_loss"]) for k in by["mimic"] + by["libtorch"]}
    same &= len(losses) == 1
    runs_of = lambda xs: ", ".join("%.1f" % x for x in xs)
    print("| %d | %s | %.1f (%s) | %.1f (%s) | %.3f× |" % (T, kind, m, runs_of(ms), l, runs_of(ls), m / l))
for a, rs in runs.items():
    print("peak RSS %s: %s GiB" % (a, ", ".join("%.2f" % r for _, r in rs)))
print("losses identical under both allocators:", "yes" if same else "NO")
print(open(os.path.join(work, "load.txt")).read().strip())
sys.exit(0 if same else 1)  # the allocator changes where tensors live, never what is computed
EOF
