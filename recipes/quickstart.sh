#!/usr/bin/env bash
# mimic quickstart.
# Today (foundation stage) it shows what runs: the system set-up, the exact GPT-2 and BERT tokenizers on
# real public-domain text, and a GPT-2 checkpoint in HF layout loaded, run and evaluated. The embedded
# pretrained gpt2-mini and the record → distill → convert → finetune → eval pipeline replace the demo
# model as those stages land (see the issues).
#   MIMIC=path/to/mimic  OUT=out/quickstart  bash recipes/quickstart.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
MIMIC=${MIMIC:-$root/build/mimic}
OUT=${OUT:-$root/out/quickstart}
mkdir -p "$OUT"
corpus=${MIMIC_CACHE:-$HOME/.cache/mimic}/assets/corpora
# The test fixture GPT-2 (random weights, real vocabulary) completed with the real tokenizer files.
model=$OUT/gpt2-fixture
rm -rf "$model" && cp -r "$root/tests/fixtures/models/gpt2-prefixed" "$model"
cp "${MIMIC_CACHE:-$HOME/.cache/mimic}"/assets/gpt2/{vocab.json,merges.txt} "$model/"

echo "== system"
"$MIMIC" info --system | head -4

echo "== tokenizers on Moby Dick (chapter 1) and the 2021 State of the Union"
moby=$(ls "$corpus"/moby-dick/*.txt 2>/dev/null | head -1 || true)
sotu=$(ls "$corpus"/sotu/2021_*.txt | head -1)
for f in ${moby:+"$moby"} "$sotu"; do
  g=$("$MIMIC" tokenize --model gpt2 --file "$f" --json | grep -c '^ *[0-9]')
  b=$("$MIMIC" tokenize --model bert-base-uncased --file "$f" --json | grep -c '^ *[0-9]')
  printf '  %-40s %8d bytes  %7d GPT-2 tokens  %7d BERT tokens\n' "$(basename "$f")" "$(wc -c <"$f")" "$g" "$b"
done

echo "== a GPT-2 checkpoint in HF layout (random-weight test fixture until gpt2-mini ships)"
"$MIMIC" info "$model"
"$MIMIC" forward --model "$model" --text "Call me Ishmael." --out "$OUT/forward.safetensors"
head -c 20000 "$sotu" > "$OUT/sotu-2021.txt"
"$MIMIC" eval --model "$model" --file "$OUT/sotu-2021.txt"
echo "quickstart done: outputs in $OUT"
