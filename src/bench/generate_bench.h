// `mimic bench generate`: greedy decoding speed by attention, batch size and context, set against the
// machine's memory-bandwidth limit.
//
// The model is a GPT-2 directory as loaded (a converted one of any kind: linear, hybrid, mixed) or, without
// one, a random GPT-2 at a named width (train_bench_width: gpt2-mini's or GPT-2 small's) whose position
// table is as long as the longest run, so that contexts beyond a shipped model's 512 tokens can be timed.
// Variants: the model as loaded (the reference: softmax, with its KV cache, for the targets), then every
// layer's attention replaced by an untrained linear kernel (hedgehog by default: the speed does not depend on
// the map's training), then, with a window, by an untrained hybrid kernel (sliding window + linear), and with a
// cache too, by the hybrid with LoLA's sparse cache of that many keys per head (its state flat in the context).
//
// Each run: B random prompts of one length, prefilled through the decode state, then greedy [B, 1] steps
// through every layer's kernel cache (what generate --batch does). Per run: the time of one step (each row's
// per-token time), tokens/s = B × steps / time, the decode state's bytes (the kernels' KernelCache::bytes()
// summed), and the bandwidth limit: a step must at least read every weight once (all rows share them) and
// every row's state, so bytes per step = weight bytes + the state's mean bytes over the steps, and the
// fastest possible step takes bytes per step ÷ the copy bandwidth measured in the same run (measure.h). The
// share of that limit a run reaches is the measure of how well decoding uses the machine. Targets (issue 21):
// batch-1 decoding at >= 50% of the limit; at batch 64 and a 2K context, the all-linear model at >= 3× the
// softmax model's tokens/s with <= 1/10 of its state bytes.
//
// A softmax run whose KV cache would not fit the memory budget is skipped, with the reason, not attempted.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mimic/bench/measure.h"
#include "mimic/bench/target.h"

namespace mimic::models { class Model; }

namespace mimic::bench {

struct GenerateBenchOptions {
  std::string model;            // a GPT-2 directory; empty: a random GPT-2 at `width`
  std::string width = "mini";   // without a model: "mini" or "small" (train_bench_width)
  std::vector<int64_t> prompt_lengths = {64, 128, 256, 448};
  std::vector<int64_t> batches = {1};
  int64_t new_tokens = 32;      // greedy tokens per row (the first from the prefill); every prompt + new_tokens − 1 must fit the context
  std::string feature_map;      // of the linear and hybrid variants; empty: each kind's own (hedgehog, hedgehog_softmax)
  int64_t window = 0;           // > 0: also the hybrid variant with this window (keys under exact softmax)
  int64_t cache = 0;            // > 0 (with a window): also that hybrid with a sparse cache of this many keys per head
  bool parallel = true;         // at batch 1, also time the parallel recompute and compare its tokens
  double memory_budget = 0;     // bytes a run's KV caches may hold; 0: half of MemAvailable at the start
  int64_t copy_bytes = int64_t{256} << 20;  // the bandwidth measurement's buffer (tests make it small)
  uint64_t seed = 0;            // random weights (no model) and prompt tokens
  bool progress = true;
  // Batch-1 runs: decode once more under the operator profiler (profile_ops) and report where a step's time
  // goes, by operator, as shares (the profiled run's times are not used).
  bool profile = false;
};

struct GenerateBenchRow {
  std::string attention;  // "<kind> (as loaded)" ("mixed" when layers differ), "linear <map> (untrained)", "hybrid w=<w> ..."
  int64_t batch = 1, prompt = 0;
  int64_t generated = 0;  // tokens per row (the first comes from the prefill; generated − 1 decoding steps)
  std::string skipped;    // non-empty: not run, and why (the numbers below are 0)
  double prefill_tps = 0;                 // prompt tokens of all rows per second of prefill
  double step_ms = 0;                     // one [B, 1] decoding step: each row's per-token time
  double recurrent_tps = 0;               // B × steps / decoding time
  double parallel_tps = 0;                // batch 1 and options.parallel only; else 0
  bool same_tokens = true;                // recurrent and parallel produced the same greedy tokens (batch 1)
  int64_t state_bytes_start = 0;          // the decode state after the prefill
  int64_t state_bytes = 0;                // ... and at the end of the run
  double weight_bytes = 0;                // the weights a step reads (decode_weight_bytes)
  double bytes_per_step = 0;              // weight_bytes + (state_bytes_start + state_bytes) / 2
  double limit_ms = 0;                    // bytes_per_step / bandwidth: the fastest step the memory allows
  double limit_share = 0;                 // limit_ms / step_ms (1 = at the limit)
  double ratio = 0;                       // tokens/s ÷ the first variant's at the same batch and prompt (0: not measured)
  bool profiled = false;                  // options.profile at batch 1
  OpProfile profile;                      // where a step's time goes (shares), when profiled
};

struct GenerateBenchResult {
  GenerateBenchOptions options;
  std::string model_name;     // the directory, or "random <width> (n_positions N)"
  int threads = 0;
  double bandwidth = 0;       // bytes/s, copy_bandwidth() in this run
  double memory_budget = 0;   // bytes, as applied
  std::vector<std::string> variants;  // the attention names, in row order
  std::vector<GenerateBenchRow> rows;  // per variant, per batch, per prompt length
  std::vector<TargetResult> targets;
};

// The weight bytes one decoding step reads: every parameter once (the LM head's [V, d] matrix included, tied
// to the token embedding or not), except the embedding tables, of which a step reads only its B rows (left
// out: a few KB). Kernel parameters (feature maps, gates) count like any other.
double decode_weight_bytes(models::Model& model);

GenerateBenchResult run_generate_bench(const GenerateBenchOptions& options);
nlohmann::json to_json(const GenerateBenchResult& result);
std::string format_report(const GenerateBenchResult& result);

}  // namespace mimic::bench
