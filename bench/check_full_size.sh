#!/usr/bin/env bash
# Full-size check (not a unit test: it writes ~4.5 GB and needs ~16 GB of memory): random-weight checkpoints with the
# exact sizes and key layouts of HF's gpt2 (124M), bert-base-uncased, Llama-3.2-1B and Qwen2.5-0.5B (bfloat16, with
# Llama 3's and Qwen's tokenizer.json), run through `mimic forward` on real text, the logits compared with the
# independent PyTorch reference of tests/fixtures/gen_model_fixtures.py. Prints load + forward time and peak memory.
#   bash bench/check_full_size.sh [BUILD_DIR] [MODEL...]     (default: all four)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
assets=${MIMIC_CACHE:-$HOME/.cache/mimic}/assets
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
shift || true
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(gpt2 bert-base-uncased llama-3.2-1b qwen2.5-0.5b)
/usr/bin/python3 "$root/tests/fixtures/gen_model_fixtures.py" --full "$work" "$assets" "${models[@]}"
head -c 1500 "$assets/corpora/moby-dick/chapter_1.txt" > "$work/text.txt"
for m in "${models[@]}"; do
  "$build/mimic" info "$work/$m" | sed -n '2,8p'
  /usr/bin/time -f "  forward: %e s, %M KB peak" "$build/mimic" forward --model "$work/$m" --file "$work/text.txt" --out "$work/$m.out.safetensors"
  /usr/bin/python3 "$root/tests/fixtures/gen_model_fixtures.py" --check "$work/$m" "$work/$m.out.safetensors"
  rm -rf "${work:?}/$m" "$work/$m.out.safetensors"  # one model on disk at a time
done
