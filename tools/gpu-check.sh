#!/usr/bin/env bash
# The device check of docs/gpu.md: builds mimic against the LibTorch it finds (a pip torch's, e.g. PyTorch 2.x with
# CUDA), runs the device tests (tests/device/: every attention kind and form, a training step and decoding on the
# GPU against the CPU) and a few CPU tests of the same build, then `bench attention` and `bench train` on the GPU
# with PyTorch's own SDPA timed in the same run (bench/gpu/sdpa.py). Sized for under 8 minutes on a 16-core GPU
# machine without network.
#
#   tools/gpu-check.sh --prepare         on a Debian machine with mimic's packages: packs the header-only
#                                        libraries (nlohmann/json, CLI11), GoogleTest's sources and the assets
#                                        the core tests read (GPT-2's and BERT's vocabularies, which are the
#                                        embedded models' tokenizers too, and two corpora: 3.9 MB in all) into
#                                        .gpu-carry.tar.xz (ignored by git) for a machine that lacks them; the
#                                        check unpacks it. With the device tool: carry [".gpu-carry.tar.xz"]. The
#                                        tree the tool sends must stay under 64 MiB (tracked files 64.6 MiB on
#                                        2026-11-30): untrack examples/models/bert-mini-sotu-era in the index for
#                                        the run (git rm -r --cached, listed in .git/info/exclude; git reset
#                                        afterwards): the check needs no BERT classifier.
#   tools/gpu-check.sh [OUT]             on the GPU machine, from the repository root: writes build.log,
#                                        tests.log, cpu-tests.log, bench-attention.txt/.json, bench-train.json,
#                                        sdpa.json and summary.txt (with bench train's table) into OUT (default
#                                        gpu-check-out); prints the summary
# Environment: MIMIC_GPU_CARRY (default .gpu-carry), MIMIC_GPU_BUILD (default build-gpu), TORCH_PREFIX (a
# LibTorch's CMake prefix; default: python3's torch.utils.cmake_prefix_path), JOBS (default: all cores),
# MIMIC_GPU_CLI_ONLY=1 (the CLI alone, and the commands on the GPU: no tests), MIMIC_GPU_DEVICE (default cuda; cpu: a
# dry run of the commands on a machine without a GPU), MIMIC_GPU_PREBUILT=DIR (use the build in DIR: no configure or
# build), MIMIC_GPU_BENCHES (default attention,train), MIMIC_GPU_QUICK=1 (shorter benches), MIMIC_GPU_SKIP_BENCH=1 (none), MIMIC_GPU_BENCH_BEFORE=S (benches only if the
# check so far took under S seconds), MIMIC_GPU_TEST_TIMEOUT (seconds per shard of the core tests, default 300), MIMIC_GPU_CPU_TESTS=all (every core test of the
# build, sharded over the cores, instead of the attention/model subset) or =FILTER (the core tests a gtest filter names,
# sharded likewise), MIMIC_GPU_SKIP_CLI=1 (no commands on the device: the tests and benchmarks alone).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# include/mimic is a tracked link to src/; a copy of the checkout that carried no links lacks it
[[ -e include/mimic ]] || { mkdir -p include && ln -s ../src include/mimic; }
carry=${MIMIC_GPU_CARRY:-.gpu-carry}
# where mimic looks for its assets (tools/setup.sh fetches them there; --prepare packs them from there)
assets="${MIMIC_CACHE:-${HOME:-/tmp}/.cache/mimic}/assets"
# the assets --prepare packs and the check installs (the spam corpus, 88 MB, and the Llama-family tokenizers stay behind)
carried_assets="gpt2 bert-base-uncased corpora/sotu corpora/moby-dick"

if [ "${1:-}" = "--prepare" ]; then
  # One compressed file (332 kB measured on 2026-11-26): the device tool sends at most 64 MiB, and the tracked tree is close to it.
  set -e
  for p in /usr/include/nlohmann/json.hpp /usr/include/CLI/CLI.hpp /usr/src/googletest/CMakeLists.txt; do
    [ -e "$p" ] || { echo "gpu-check: $p is missing (install nlohmann-json3-dev, libcli11-dev, libgtest-dev)" >&2; exit 1; }
  done
  stage=$(mktemp -d)
  mkdir -p "$stage/include" "$stage/googletest/googletest"
  cp -r /usr/include/nlohmann /usr/include/CLI "$stage/include/"
  cp /usr/src/googletest/CMakeLists.txt "$stage/googletest/"
  cp -r /usr/src/googletest/googletest/{CMakeLists.txt,cmake,include,src} "$stage/googletest/googletest/"
  parts=(include googletest)
  # the assets the core tests read (GPT-2's and BERT's vocabularies, the State of the Union and Moby Dick corpora:
  # 3.6 MB compressed, measured 2026-11-27); the spam corpus (88 MB) stays behind, and its tests fail there
  have=()
  for a in $carried_assets; do [ -e "$assets/$a" ] && have+=("$a"); done
  if [ ${#have[@]} -gt 0 ]; then
    mkdir -p "$stage/assets" && (cd "$assets" && cp -r --parents "${have[@]}" "$stage/assets/") && parts+=(assets)
  fi
  tar -C "$stage" -cf - "${parts[@]}" | xz -9 -T0 >"$carry.tar.xz"
  rm -rf "$stage"
  grep -qxF "/$carry.tar.xz" .git/info/exclude 2>/dev/null || echo "/$carry.tar.xz" >>.git/info/exclude
  grep -qxF "/$carry/" .git/info/exclude 2>/dev/null || echo "/$carry/" >>.git/info/exclude
  what="nlohmann/json, CLI11, GoogleTest's sources"
  [[ " ${parts[*]} " == *" assets "* ]] && what="$what, the assets ${have[*]}"
  echo "gpu-check: $carry.tar.xz holds $what ($(du -h "$carry.tar.xz" | cut -f1)); carry it to the GPU machine"
  exit 0
fi
if [ -f "$carry.tar.xz" ] && [ ! -d "$carry" ]; then
  mkdir -p "$carry" && tar -C "$carry" -xJf "$carry.tar.xz"
fi
# the carried assets go where mimic looks for them, unless that machine has its own
if [ -d "$carry/assets" ]; then
  for a in $carried_assets; do
    [ -e "$carry/assets/$a" ] && [ ! -e "$assets/$a" ] && mkdir -p "$(dirname "$assets/$a")" && cp -r "$carry/assets/$a" "$assets/$a"
  done
fi
# the embedded models' tokenizer files (untracked), from the assets as tools/setup.sh places them (the list is
# tools/fetch-assets.mjs's EMBEDDED): gpt2-mini's conversion below and the core tests of the embedded models read them
for pair in gpt2-mini/vocab.json:gpt2/vocab.json gpt2-mini/merges.txt:gpt2/merges.txt bert-mini/vocab.txt:bert-base-uncased/vocab.txt; do
  dst="examples/models/${pair%%:*}" src="$assets/${pair#*:}"
  [ -f "$dst" ] || [ ! -f "$src" ] || cp "$src" "$dst"
done

out=${1:-gpu-check-out}
build=${MIMIC_GPU_BUILD:-build-gpu}
# MIMIC_GPU_CLI_ONLY=1: build the CLI alone and run only the commands on the GPU (a short lease)
targets="mimic_cli mimic_tests mimic_device_tests"
[ "${MIMIC_GPU_CLI_ONLY:-0}" = 1 ] && targets="mimic_cli"
jobs=${JOBS:-$(nproc)}
mkdir -p "$out"
summary="$out/summary.txt"
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }
stamp() { date +%s; }
t_all=$(stamp)
# MIMIC_GPU_DEVICE=cpu runs the commands' "GPU" side on the CPU: a dry run of this script on a machine without one
gpu=${MIMIC_GPU_DEVICE:-cuda}

say "gpu-check: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
if command -v nvidia-smi >/dev/null 2>&1; then
  say "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)"
else
  say "gpu: nvidia-smi not found"
fi
say "cpu: $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
prefix=${TORCH_PREFIX:-$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null)}
say "torch: $(python3 -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>/dev/null || echo 'python3 torch not found'); cmake prefix ${prefix:-none}"
[ -n "$prefix" ] || { say "gpu-check: no LibTorch found (set TORCH_PREFIX)"; exit 1; }

# ---- configure + build (keep going past errors, so one run shows them all)
cfg=(-S . -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix")
command -v ninja >/dev/null 2>&1 && cfg+=(-G Ninja)
[ -d "$carry/include" ] && cfg+=(-DCMAKE_INCLUDE_PATH="$root/$carry/include")
[ -d "$carry/googletest" ] && cfg+=(-DMIMIC_GTEST_SOURCE_DIR="$root/$carry/googletest")
# A CUDA LibTorch's CMake package needs the CUDA toolkit (one: nvcc's) and the GPU's architecture; mimic compiles
# no CUDA code itself.
if command -v nvcc >/dev/null 2>&1; then
  nvcc_path=$(command -v nvcc)
  cfg+=(-DCMAKE_CUDA_COMPILER="$nvcc_path" -DCUDAToolkit_ROOT="$(dirname "$(dirname "$(readlink -f "$nvcc_path")")")")
  arch=$(python3 -c 'import torch; c=torch.cuda.get_device_capability(); print(f"{c[0]}.{c[1]}")' 2>/dev/null || echo 9.0)
  cfg+=(-DTORCH_CUDA_ARCH_LIST="$arch")
fi
# configure_and_build BUILD_DIR [CMAKE ARGS...]: 0 when the three executables built, link libstdc++ first and run
configure_and_build() {
  local dir=$1; shift
  local t0; t0=$(stamp)
  if ! cmake "${cfg[@]}" -B "$dir" "$@" >>"$out/build.log" 2>&1; then
    say "configure: FAILED ($(( $(stamp) - t0 )) s); the end of build.log:"
    tail -40 "$out/build.log" | tee -a "$summary"
    return 2
  fi
  say "configure ($dir): ok ($(( $(stamp) - t0 )) s); $(grep -m1 'without the full library' "$out/build.log" | sed 's/^-- //' || true)"
  t0=$(stamp)
  # shellcheck disable=SC2086
  if cmake --build "$dir" -j"$jobs" --target $targets -- -k 0 >>"$out/build.log" 2>&1; then
    say "build: ok ($(( $(stamp) - t0 )) s, $jobs jobs)"
  else
    say "build: FAILED ($(( $(stamp) - t0 )) s); errors (what did build still runs below):"
    grep -E "error:|undefined reference|FAILED:" "$out/build.log" | head -40 | tee -a "$summary"
  fi
  # pip torch's libtorch exports its own copies of std::filesystem (pytorch/pytorch#133437): an executable whose
  # first needed library is not the shared libstdc++, or that holds a static copy of it, crashes in them
  # (CMakeLists.txt, mimic_link_torch). The test the suite runs too says which; on failure the link command and
  # the compiler follow.
  local ok=0
  local exes=("$dir/mimic")
  [[ " $targets " == *" mimic_tests "* ]] && exes+=("$dir/tests/mimic_tests")
  [[ " $targets " == *" mimic_device_tests "* ]] && exes+=("$dir/tests/mimic_device_tests")
  if bash tests/first_needed_test.sh "${exes[@]}" >"$out/first-needed.txt" 2>&1; then
    say "first needed library: libstdc++ in all ${#exes[@]} executables, no static copy of std::filesystem"
  else
    ok=1
    say "first needed library: WRONG (std::filesystem calls will crash):"
    tee -a "$summary" <"$out/first-needed.txt"
    local cxx; cxx=$(grep -m1 '^CMAKE_CXX_COMPILER:' "$dir/CMakeCache.txt" | cut -d= -f2)
    say "  compiler $cxx ($(file -b "$cxx" 2>/dev/null | cut -c1-60)); its libstdc++.so.6: $("$cxx" -print-file-name=libstdc++.so.6)"
    (cd "$dir" && { ninja -t commands tests/mimic_tests 2>/dev/null || true; } | tail -1 | cut -c1-600) | tee -a "$summary"
  fi
  rm -f "$out/first-needed.txt"
  # a libstdc++ older than the compiler's, found at run time, fails here rather than in every test
  if ! "$dir/mimic" --help >/dev/null 2>"$out/help.err"; then
    ok=1
    say "mimic --help: FAILED: $(head -c 400 "$out/help.err")"
  fi
  rm -f "$out/help.err"
  return $ok
}
: >"$out/build.log"
if [ -n "${MIMIC_GPU_PREBUILT:-}" ]; then
  # a dry run of the rest on a machine that built mimic already (no configure, no build)
  build=$MIMIC_GPU_PREBUILT; rc_build=0
  say "build: skipped (MIMIC_GPU_PREBUILT=$build)"
else
configure_and_build "$build"
rc_build=$?
fi
[ $rc_build -eq 2 ] && exit 1
# The compiler CMake picks may link libstdc++ statically (the 2026-11-26 machine's /opt/gcc/bin/g++ did); the
# distribution's compiler links it shared. One more build with it, in the same run, rather than a second lease.
if [ $rc_build -ne 0 ] && [ -x /usr/bin/g++ ] && [ "$(readlink -f "$(grep -m1 '^CMAKE_CXX_COMPILER:' "$build/CMakeCache.txt" | cut -d= -f2)")" != "$(readlink -f /usr/bin/g++)" ]; then
  say "retrying with /usr/bin/g++ ($(/usr/bin/g++ -dumpfullversion 2>/dev/null)) in $build-sysgcc"
  # its tests run below whatever it showed: they say more than the first build's would
  configure_and_build "$build-sysgcc" -DCMAKE_CXX_COMPILER=/usr/bin/g++ -DCMAKE_C_COMPILER=/usr/bin/gcc
  build="$build-sysgcc"
fi
mimic="$build/mimic"
say "links libtorch_cuda: $(readelf -d "$mimic" 2>/dev/null | grep -c 'NEEDED.*torch_cuda') (1 = CUDA backend loaded at start)"

# the core test Record.H5pyReadsTheFile runs python3's h5py: say whether that machine has it (it hung there once)
say "python3 h5py: $(timeout 30 /usr/bin/python3 -c 'import h5py; print(h5py.__version__)' 2>&1 | tail -1)"
# ---- tests: the device tests, then CPU tests of this build (LibTorch 2.x behaving as 1.13 does)
if [ "$targets" = mimic_cli ]; then
  say "tests skipped (MIMIC_GPU_CLI_ONLY=1)"
else
t0=$(stamp)
"$build/tests/mimic_device_tests" >"$out/tests.log" 2>&1
rc=$?
say "device tests: $( [ $rc -eq 0 ] && echo passed || echo FAILED) ($(( $(stamp) - t0 )) s): $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/tests.log" | tr '\n' ' ')"
grep -E "rel err" "$out/tests.log" | grep -v bf16 | awk '{ print $NF, $0 }' | sort -g -r | cut -d" " -f2- | head -3 | sed 's/^/  largest: /' | tee -a "$summary"
t0=$(stamp)
filter='AttentionKinds*:SoftmaxAttention*:LinearAttention*:LinearKernel*:HybridAttention*:HybridKernel*:MixedKernel*:SlaGates*:FeatureMaps*:LmHead*:SafeTensors*:TrainOptimizer*:TrainEngine*:Precision*:Gpt2*:Bert*:CheckedDevice*'
cpu_tests=${MIMIC_GPU_CPU_TESTS:-some}
if [ "$cpu_tests" != some ]; then
  # every core test of this build (all) or those a gtest filter names, in shards of two threads each (one process
  # per two cores); one log comes back
  filter='*'; [ "$cpu_tests" = all ] || filter=$cpu_tests
  shards=$(( jobs / 2 > 1 ? jobs / 2 : 1 ))
  pids=()
  for i in $(seq 0 $((shards - 1))); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i OMP_NUM_THREADS=2 timeout "${MIMIC_GPU_TEST_TIMEOUT:-300}" "$build/tests/mimic_tests" \
      --gtest_filter="$filter" >"$out/cpu-tests-$i.log" 2>&1 &
    pids+=($!)
  done
  rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  for i in $(seq 0 $((shards - 1))); do echo "=== shard $i"; cat "$out/cpu-tests-$i.log"; done >"$out/cpu-tests.log"
  rm -f "$out"/cpu-tests-[0-9]*.log
else
  timeout 240 "$build/tests/mimic_tests" --gtest_filter="$filter" >"$out/cpu-tests.log" 2>&1
  rc=$?
fi
n_ok=$(grep -cE '^\[       OK \]' "$out/cpu-tests.log"); n_skip=$(grep -cE '^\[  SKIPPED \] [A-Za-z]' "$out/cpu-tests.log")
say "cpu tests ($filter): $( [ $rc -eq 0 ] && echo passed || echo "FAILED (rc $rc)") ($(( $(stamp) - t0 )) s): $n_ok ok ($n_skip of them skipped)"
grep -E '^\[  FAILED  \] [A-Za-z]' "$out/cpu-tests.log" | sed 's/ (.*//' | sort -u | head -40 | tee -a "$summary"
# a test that started and never ended (a crash or the timeout)
grep -oE '^\[ RUN      \] .*' "$out/cpu-tests.log" | cut -c14- | sort >"$out/.run"
# (a skipped test ends with SKIPPED and no OK line)
grep -oE '^\[ +(OK|FAILED|SKIPPED) +\] [A-Za-z][^ ]*' "$out/cpu-tests.log" | sed -E 's/^\[ +(OK|FAILED|SKIPPED) +\] //' | sort -u >"$out/.end"
comm -23 "$out/.run" "$out/.end" | sed 's/^/  started, never ended: /' | head -10 | tee -a "$summary"
rm -f "$out/.run" "$out/.end"
# the device tool returns files up to 16 MiB: every core test's log was larger (2026-11-27), even compressed. Name
# the lines repeated most (a warning printed per call, say), then keep each distinct line at most 20 times
say "cpu tests log: $(stat -c %s "$out/cpu-tests.log") bytes; lines repeated most:"
awk '{ c[substr($0, 1, 160)]++ } END { for (l in c) if (c[l] > 200) print c[l] "x " l }' "$out/cpu-tests.log" | sort -rn | head -5 | sed 's/^/  /' | tee -a "$summary"
awk 'c[$0]++ < 20' "$out/cpu-tests.log" >"$out/cpu-tests.kept" && mv "$out/cpu-tests.kept" "$out/cpu-tests.log"
[ "$(stat -c %s "$out/cpu-tests.log")" -lt 15000000 ] || gzip -1 "$out/cpu-tests.log"
fi

# ---- the commands with --device: pretrain, finetune and eval of a small GPT-2 on an MQAR task (no tokenizer, no
# assets), on the GPU and on this machine's CPU cores, from the same seed: the scores and the tokens/s side by side
t0=$(stamp)
if [ "${MIMIC_GPU_SKIP_CLI:-0}" = 1 ]; then
  say "commands skipped (MIMIC_GPU_SKIP_CLI=1)"
else
cli=$(mktemp -d)
echo '{"n_embd": 128, "n_layer": 4, "n_head": 4, "n_positions": 128, "n_inner": 512}' >"$cli/c.json"
task="mqar:vocab=256,seq_len=128,pairs=16"
: >"$out/cli.log"
# gpu-bf16: the same commands with --precision bf16 (pretrain and finetune)
for run in gpu gpu-bf16 cpu; do
  dev=${run%-bf16}; [ "$dev" = gpu ] && dev=$gpu
  common=(--device "$dev" --seed 1 --json)
  prec=(); [ "$run" = gpu-bf16 ] && prec=(--precision bf16)
  "$mimic" pretrain --arch gpt2 --config "$cli/c.json" --data "$task" --seq-len 128 --batch-size 32 --steps 60 --warmup 6 \
    --lr 1e-3 --eval-every 30 --eval-batches 4 --out "$cli/pre-$run" "${common[@]}" "${prec[@]}" >"$cli/pre-$run.json" 2>>"$out/cli.log" &&
  "$mimic" finetune --task lm --model "$cli/pre-$run" --data "$task" --seq-len 128 --batch-size 32 --steps 30 --warmup 3 \
    --eval-every 15 --eval-batches 4 --out "$cli/ft-$run" "${common[@]}" "${prec[@]}" >"$cli/ft-$run.json" 2>>"$out/cli.log" &&
  "$mimic" eval --task mqar --data "$task" --model "$cli/ft-$run" --examples 256 "${common[@]}" "${prec[@]}" >"$cli/eval-$run.json" 2>>"$out/cli.log"
  rc=$?
  say "cli on $run: rc $rc; $(python3 - "$cli" "$run" <<'PY' 2>&1
import json, sys
d, dev = sys.argv[1], sys.argv[2]
def get(name):
    try: return json.load(open(f"{d}/{name}-{dev}.json"))
    except Exception as e: return {"error": str(e)[:80]}
p, f, e = get("pre"), get("ft"), get("eval")
m = e.get("model", {})
print(f"pretrain {p.get('tokens_per_second', 0):.0f} tok/s, finetune {f.get('tokens_per_second', 0):.0f} tok/s, "
      f"finetune validation loss {f.get('validation', {}).get('loss', float('nan')):.4f}, mqar accuracy {m.get('accuracy', float('nan')):.4f}")
PY
)"
done
# the delta kind (gated delta rule, its chunked WY form in training) from scratch, on each device and precision
for run in gpu gpu-bf16 cpu; do
  dev=${run%-bf16}; [ "$dev" = gpu ] && dev=$gpu
  prec=(); [ "$run" = gpu-bf16 ] && prec=(--precision bf16)
  "$mimic" pretrain --arch gpt2 --config "$cli/c.json" --attention delta --data "$task" --seq-len 128 --batch-size 32 --steps 30 --warmup 3 \
    --lr 1e-3 --eval-every 30 --eval-batches 4 --out "$cli/delta-$run" --device "$dev" --seed 1 --json "${prec[@]}" >"$cli/delta-$run.json" 2>>"$out/cli.log"
  say "pretrain --attention delta on $run: rc $?; $(python3 - "$cli/delta-$run.json" <<'PY' 2>&1
import json, sys
p = json.load(open(sys.argv[1]))
print(f"{p.get('tokens_per_second', 0):.0f} tok/s, last loss {p.get('last_loss', float('nan')):.4f}, best validation loss {p.get('best_eval_loss', float('nan')):.4f}")
PY
)"
done
# distill from one record (written on the CPU from the CPU run's model) on the GPU and on the CPU: the same record,
# the same initial maps, so the two runs' best validation losses agree to rounding. Then the record written on the GPU
# (record --device cuda), distilled on the CPU: it agrees with the CPU's record to rounding, and so do its losses.
if "$mimic" record --model "$cli/pre-cpu" --data "$task" --samples 64 --seq-len 128 --out "$cli/r.h5" --seed 1 --device cpu >/dev/null 2>>"$out/cli.log" &&
  "$mimic" record --model "$cli/pre-cpu" --data "$task" --samples 64 --seq-len 128 --out "$cli/r-gpu.h5" --seed 1 --device "$gpu" >/dev/null 2>>"$out/cli.log"; then
  say "record on $gpu: rc 0"
  for dev in gpu gpu-bf16 cpu gpu-record; do
    rec="$cli/r.h5"; on=${dev%-bf16}; [ "$on" = gpu ] && on=$gpu
    dprec=fp32; [ "$dev" = gpu-bf16 ] && dprec=bf16
    [ "$dev" = gpu-record ] && { rec="$cli/r-gpu.h5"; on=cpu; }
    "$mimic" distill --record "$rec" --epochs 3 --batch-size 8 --out "$cli/maps-$dev.safetensors" --device "$on" --precision $dprec --seed 1 --json \
      >"$cli/distill-$dev.json" 2>>"$out/cli.log"
    say "distill on $dev: rc $?; $(python3 - "$cli/distill-$dev.json" <<'PY' 2>&1
import json, sys
j = json.load(open(sys.argv[1]))
losses = [l["best_val_loss"] for l in j["layers"]]
kl = sum(l["after"]["mean"]["kl"] for l in j["layers"]) / len(j["layers"])
print(f"{len(losses)} layers in {j['seconds']:.1f} s, best validation losses {' '.join(f'{x:.6f}' for x in losses)}, mean KL {kl:.5f}")
PY
)"
  done
  # convert on the GPU and on the CPU from the CPU's maps (2 heads kept by the maps' KL: this model has no tokenizer
  # for the probe's text; the gpt2-mini run below probes): the same heads kept, the same MQAR accuracy after
  for dev in gpu cpu; do
    on=$dev; [ "$dev" = gpu ] && on=$gpu
    "$mimic" convert --model "$cli/pre-cpu" --maps "$cli/maps-cpu.safetensors" --keep-softmax auto:2 --placement kl --out "$cli/conv-$dev" \
      --device "$on" --seed 1 --json >"$cli/convert-$dev.json" 2>>"$out/cli.log" &&
      "$mimic" eval --task mqar --data "$task" --model "$cli/conv-$dev" --examples 256 --device "$on" --seed 1 --json >"$cli/conv-eval-$dev.json" 2>>"$out/cli.log"
    say "convert on $dev: rc $?; $(python3 - "$cli" "$dev" <<'PY' 2>&1
import json, sys
d, dev = sys.argv[1], sys.argv[2]
c = json.load(open(f"{d}/convert-{dev}.json")); e = json.load(open(f"{d}/conv-eval-{dev}.json"))
pl = c.get("placement", {})
kept = pl.get("kept", pl) if isinstance(pl, dict) else pl
print(f"kept {json.dumps(kept)[:160]}; mqar accuracy {e.get('model', {}).get('accuracy', float('nan')):.4f}")
PY
)"
  done
else
  say "record: FAILED (cli.log)"
fi
# issue 33's conversion on the device: gpt2-mini (when its tokenizer is here: --prepare packs it) recorded on text
# (docs/*.md as one file), distilled, converted with 8 heads kept by the probe (MIMIC_GPU_KEEP, default auto:8)
if [ -f examples/models/gpt2-mini/vocab.json ] && [ -f examples/models/gpt2-mini/merges.txt ]; then
  t0=$(stamp)
  cat docs/*.md >"$cli/text.txt"
  "$mimic" record --model gpt2-mini --data "$cli/text.txt" --split train --samples 32 --seq-len 256 --out "$cli/g.h5" --device "$gpu" --seed 0 \
    >/dev/null 2>>"$out/cli.log" &&
    "$mimic" distill --record "$cli/g.h5" --feature-map hedgehog --epochs 2 --out "$cli/g-maps.safetensors" --device "$gpu" --seed 0 \
      >/dev/null 2>>"$out/cli.log" &&
    "$mimic" convert --model gpt2-mini --maps "$cli/g-maps.safetensors" --keep-softmax "${MIMIC_GPU_KEEP:-auto:8}" --probe-data "$cli/text.txt" \
      --out "$cli/g-conv" --device "$gpu" --seed 0 --json >"$cli/g-conv.json" 2>>"$out/cli.log"
  rc=$?
  say "gpt2-mini record, distill, convert (probe) on $gpu: rc $rc ($(( $(stamp) - t0 )) s); $(python3 - "$cli/g-conv.json" <<'PY' 2>&1
import json, sys
p = json.load(open(sys.argv[1]))["placement"]
kept = " ".join(f"{k['layer']}.{k['head']}" for k in p.get("kept", []))
print(f"kept {kept}; probe {p.get('seconds', 0):.1f} s; reached {json.dumps(p.get('reached'))[:120]}")
PY
)"
  # greedy decoding of gpt2-mini and of its conversion: fp32 and bf16 on the device against fp32 on the CPU
  for m in gpt2-mini g-conv; do
    mp=$m; [ "$m" = g-conv ] && mp="$cli/g-conv"
    for run in cpu gpu gpu-bf16; do
      dev=${run%-bf16}; [ "$dev" = gpu ] && dev=$gpu
      p=fp32; [ "$run" = gpu-bf16 ] && p=bf16
      "$mimic" generate --model "$mp" --prompt "The President said that the Congress" --new-tokens 32 --device "$dev" --precision $p --seed 0 --json \
        >"$cli/gen-$m-$run.json" 2>>"$out/cli.log" || echo "generate $m $run failed" >>"$out/cli.log"
    done
    say "generate $m (32 greedy tokens): $(python3 - "$cli" "$m" <<'PY' 2>&1
import json, sys
d, m = sys.argv[1], sys.argv[2]
ref = json.load(open(f"{d}/gen-{m}-cpu.json"))["ids"]
out = []
for run in ("gpu", "gpu-bf16"):
    try:
        g = json.load(open(f"{d}/gen-{m}-{run}.json"))
        same = next((i for i, (a, b) in enumerate(zip(ref, g["ids"])) if a != b), len(ref))
        out.append(f"{run}: first {same} of {len(ref)} tokens as the CPU's, {g['timing']['decode_tokens_per_second']:.0f} tok/s decoding")
    except Exception as e:
        out.append(f"{run}: {str(e)[:60]}")
print("; ".join(out))
PY
)"
  done
else
  say "gpt2-mini: no tokenizer here (tools/gpu-check.sh --prepare packs it): its conversion skipped"
fi
tail -5 "$out/cli.log" | sed 's/^/  cli.log: /' | tee -a "$summary"
rm -rf "$cli"
say "cli: $(( $(stamp) - t0 )) s"
fi

# ---- benchmarks on the GPU
if [ "${MIMIC_GPU_SKIP_BENCH:-0}" = 1 ]; then say "benchmarks skipped (MIMIC_GPU_SKIP_BENCH=1)"; say "total: $(( $(stamp) - t_all )) s"; exit 0; fi
# MIMIC_GPU_BENCH_BEFORE=S: the benchmarks run only when the check so far took under S seconds (a lease is short)
if [ -n "${MIMIC_GPU_BENCH_BEFORE:-}" ] && [ $(( $(stamp) - t_all )) -ge "$MIMIC_GPU_BENCH_BEFORE" ]; then
  say "benchmarks skipped: $(( $(stamp) - t_all )) s spent, MIMIC_GPU_BENCH_BEFORE=$MIMIC_GPU_BENCH_BEFORE"; say "total: $(( $(stamp) - t_all )) s"; exit 0
fi
quick=${MIMIC_GPU_QUICK:-0}
max_len=32768; reps=5; lengths=512,2048
[ "$quick" = 1 ] && { max_len=16384; reps=3; lengths=2048; }
# MIMIC_GPU_BENCHES: which benchmarks run (default both; the device tool returns at most 8 files)
benches=${MIMIC_GPU_BENCHES:-attention,train}
if [[ ",$benches," == *",attention,"* ]]; then
  t0=$(stamp)
  "$mimic" bench attention --device "$gpu" --max-len $max_len --repeats $reps --json >"$out/bench-attention.json" 2>>"$out/build.log" &&
    "$mimic" bench attention --device "$gpu" --max-len $max_len --repeats $reps >"$out/bench-attention.txt" 2>>"$out/build.log"
  say "bench attention: rc $? ($(( $(stamp) - t0 )) s)"
  # GPT-2 small's 12 heads: a layer's work per launch (one head is launch-bound on a GPU); its table follows the first
  # in bench-attention.txt (the tool returns at most 8 files)
  t0=$(stamp)
  { echo; echo "=== --n-head 12"; "$mimic" bench attention --device "$gpu" --n-head 12 --max-len 16384 --repeats $reps; } >>"$out/bench-attention.txt" 2>>"$out/build.log"
  say "bench attention --n-head 12: rc $? ($(( $(stamp) - t0 )) s)"
  t0=$(stamp)
  python3 bench/gpu/sdpa.py $max_len $reps 1,12 >"$out/sdpa.json" 2>>"$out/build.log"
  say "sdpa reference: rc $? ($(( $(stamp) - t0 )) s)"
fi
if [[ ",$benches," == *",train,"* ]]; then
  # fp32, then bf16 mixed precision (--precision bf16) in the same run: the ratio of the two is the result
  for prec in fp32 bf16; do
    t0=$(stamp)
    json="$out/bench-train.json"; [ "$prec" = bf16 ] && json="$out/bench-train-bf16.json"
    "$mimic" bench train --device "$gpu" --precision $prec --widths small --lengths $lengths --tokens-per-step 16384 --repeats $reps --json \
      --kinds "linear:feature_map=hedgehog;hybrid:window=64,feature_map=hedgehog_softmax;${MIMIC_GPU_TRAIN_KINDS:-delta}" \
      >"$json" 2>>"$out/build.log" &&
      python3 - "$json" >>"$summary" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"bench train on {r['config']['device']} in {r['config'].get('precision', 'fp32')}, GEMM {r['gemm_gflops']:.0f} GFLOP/s (fp32)")
for row in r["rows"]:
    for c in row["kinds"]:
        print(f"{row['width']:6} T={row['T']:6} {c['kind']:48} {c['tokens_per_second']:10.0f} tok/s  {c['step_ms']:8.1f} ms  x{c['ratio']:.2f}  loss {c.get('first_loss', 0):.3f} -> {c.get('last_loss', 0):.3f}")
PY
    say "bench train ($prec): rc $? ($(( $(stamp) - t0 )) s)"
  done
fi
say "total: $(( $(stamp) - t_all )) s"
echo
cat "$out/bench-attention.txt" 2>/dev/null | head -40
python3 - "$out/sdpa.json" <<'PY' 2>/dev/null
import json, sys
r = json.load(open(sys.argv[1]))
print(f"PyTorch {r['torch']} on {r['device']}: fwd+bwd ms (fwd ms)")
for row in r["rows"]:
    cells = []
    for k in ("sdpa_fp32", "plain_fp32", "sdpa_bf16"):
        v = row[k]
        cells.append(f"{k} {v['fwdbwd_ms']:.3f} ({v['fwd_ms']:.3f})" if isinstance(v, dict) else f"{k} {v}")
    print(f"H={row.get('heads', 1):3} T={row['length']:6}  " + "  ".join(cells))
PY
