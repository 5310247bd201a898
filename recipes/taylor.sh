#!/usr/bin/env bash
# Taylor-n attention and a norm in place of the denominator (issue 34; the seed "softmax as an RNN", Mongaras & Larson,
# shared/papers/003_…, Figures 5 and 6, at our scale): small GPT-2s (recipes/configs/taylor-mini.json: 2 layers,
# 8 heads of 8 dimensions, so that order 4's features fit) trained from scratch on MQAR with linear attention whose
# map is exp's series to order N (taylor:order=N, φ(q)·φ(k) = Σ_{n≤N} (q·k)ⁿ/n!) and whose output is normalised by
# the sum of its weights (row: softmax's denominator) or by a vector norm of itself (l2, rms: the seed's
# replacement), beside softmax on the same model: recall accuracy on the task's test split, one row per order.
#   SCALE=quick (default) | full;  MIMIC, OUT, THREADS, SEED as in recipes/lib.sh
#   knobs: VOCAB LEN PAIRS (the task), STEPS BATCH LR (training), EXAMPLES (scored per model),
#          ORDERS (default "1 2 3"; order N has Σ_{n≤N} 8ⁿ features a head: 9, 73, 585, 4681 — order 4 is about 8x
#          order 3's time), NORMS (default "row l2 rms")
SCALE=${SCALE:-quick}
OUT=${OUT:-$(cd "$(dirname "$0")/.." && pwd)/out/taylor-$SCALE}
source "$(dirname "$0")/lib.sh"
mkdir -p "$OUT"
mqar_settings
ORDERS=${ORDERS:-1 2 3} NORMS=${NORMS:-row l2 rms}
whole_number_list ORDERS
config=$root/recipes/configs/taylor-mini.json

from_scratch softmax softmax "$config"
for n in $ORDERS; do
  for norm in $NORMS; do from_scratch "taylor$n-$norm" "linear:feature_map=taylor,map_options={\"order\":$n},norm=$norm" "$config"; done
done

echo
mqar_header
printf '| %-10s |' "order"
for norm in $NORMS; do printf ' %8s |' "$norm"; done
echo
printf '|---|'; for norm in $NORMS; do printf -- '---|'; done; echo
for n in $ORDERS; do
  printf '| %-10s |' "taylor $n"
  for norm in $NORMS; do printf ' %8s |' "$(acc "scratch-taylor$n-$norm")"; done
  echo
done
echo "(softmax on the same model: accuracy $(acc scratch-softmax); chance 1/$(( VOCAB - VOCAB / 2 )) values; row = the sum of the weights, l2 and rms = a norm of the output, the seed's replacement for it)"
print_timings
