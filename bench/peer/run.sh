#!/usr/bin/env bash
# The peer benchmark (docs/peer.md): mimic's Hedgehog distillation step and converted-model training step against
# the same steps in PyTorch (Debian's python3-torch), in one run, same threads, same shapes, same inputs.
#
#   bench/peer/run.sh [--mimic PATH] [--threads N] [--repeats N] [--out DIR] [-- extra `mimic bench peer` options]
#
# mimic writes the inputs (safetensors) and times its steps; peer.py reads the same file, times PyTorch's steps,
# prints mimic ÷ PyTorch per step (target <= 1.0) and fails (exit 1) when the two sides' losses differ: then they do
# not compute the same thing and the times mean nothing. Speed figures only count from a quiet machine
# (cat /proc/loadavg: load well below the core count).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mimic=${MIMIC:-$here/../../build/mimic}
threads=2
repeats=5
out=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --mimic) mimic=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "run.sh: unknown option $1 (see the head of this script)" >&2; exit 2 ;;
  esac
done
python=/usr/bin/python3
[[ -x $mimic ]] || { echo "run.sh: no mimic executable at $mimic (build first, or pass --mimic PATH)" >&2; exit 2; }
"$python" -c 'import torch' 2>/dev/null || { echo "run.sh: $python cannot import torch (apt-get install python3-torch)" >&2; exit 2; }
if [[ -z $out ]]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min); $(nproc) cores; threads per side: $threads"
"$mimic" bench peer --inputs "$out/inputs.safetensors" --threads "$threads" --repeats "$repeats" --json "$@" >"$out/mimic.json"
OMP_NUM_THREADS=$threads "$python" "$here/peer.py" --inputs "$out/inputs.safetensors" --threads "$threads" --repeats "$repeats" \
  --mimic "$out/mimic.json" --json-out "$out/pytorch.json"
