#!/usr/bin/env bash
# Full-size check (not a unit test: it writes ~1 GB): random-weight checkpoints with the exact sizes and
# key layouts of HF's gpt2 (124M) and bert-base-uncased, run through `mimic forward` on real text, the
# logits compared with the independent PyTorch reference of tests/fixtures/gen_model_fixtures.py.
#   bash bench/check_full_size.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
assets=${MIMIC_CACHE:-$HOME/.cache/mimic}/assets
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$root/tests/fixtures/gen_model_fixtures.py" --full "$work" "$assets"
head -c 1500 "$assets/corpora/moby-dick/chapter_1.txt" > "$work/text.txt"
for m in gpt2 bert-base-uncased; do
  "$build/mimic" info "$work/$m" | sed -n '2,8p'
  /usr/bin/time -f "  forward: %e s, %M KB peak" "$build/mimic" forward --model "$work/$m" --file "$work/text.txt" --out "$work/$m.out.safetensors"
  /usr/bin/python3 "$root/tests/fixtures/gen_model_fixtures.py" --check "$work/$m" "$work/$m.out.safetensors"
done
