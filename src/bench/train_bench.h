// `mimic bench train`: whole-model training steps (forward, loss, backward, AdamW update) of a GPT-2 with
// softmax attention against the same model with its attention replaced by other kinds (linear, hybrid, any
// registered kind with options), by sequence length. What users feel when they finetune a converted model,
// as opposed to `bench attention`, which times one head alone.
//
// The models are random (create_model) at named widths — gpt2-mini's (6 × 192, 8 heads) and GPT-2 small's
// (12 × 768, 12 heads) — with a position table as long as the longest length measured, so a length beyond a
// shipped model's context can be timed. Each step sees `tokens_per_step` tokens (batch = tokens / T, at least
// 1), so every length does about the same dense work and the ratios show what attention costs.
//
// Work is counted as dense FLOPs: 6 × (the parameters that multiply activations: every linear layer and the
// LM head) × tokens. Attention's own FLOPs are left out on purpose: every kind is credited with the same
// work, so achieved GFLOP/s compare like with like and sit against a GEMM rate measured in the same run.
//
// With --kd T each cell also times the step finetune --kd T takes — the same model distilling a softmax teacher
// of its width (the teacher's forward without gradient, then the chunked KL over the vocabulary) — and sets its
// time and peak memory against the plain step's. The two steps alternate (each from its own copy of the
// weights, with its own optimizer), so that the load of a shared machine weighs on both alike.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mimic/bench/measure.h"
#include "mimic/bench/target.h"
#include "mimic/core/precision.h"

namespace mimic::bench {

struct TrainBenchWidth {
  std::string name;     // "mini", "small", or a test's own name
  nlohmann::json config;  // a GPT-2 config.json (n_positions is raised to the longest length)
};
// The named widths: "mini" (gpt2-mini) and "small" (GPT-2 small); an unknown name is a mimic::Error.
TrainBenchWidth train_bench_width(const std::string& name);

struct TrainBenchOptions {
  std::vector<TrainBenchWidth> widths;                   // default: {mini}
  std::vector<int64_t> lengths = {256, 512, 1024, 2048, 4096};
  // Attention kinds as "KIND[:key=value,...]" specs (kinds.h); softmax, the reference, is always measured first.
  std::vector<std::string> kinds = {"linear:feature_map=hedgehog", "hybrid:window=64,feature_map=hedgehog_softmax"};
  int64_t tokens_per_step = 4096;
  int repeats = 3;     // timed steps per measurement (median), after one warm-up step
  uint64_t seed = 0;   // weights and token ids
  bool progress = true;
  // After the timed steps of every (width, length, kind), one more step under the operator profiler
  // (profile_ops): where a step's time goes, by operator, as shares. The profiler slows the step, so its time
  // is not reported, and the step is not among those whose losses are kept.
  bool profile = false;
  // The step's loss as training computes it (train::causal_lm_loss: the LM head and cross-entropy chunk by
  // chunk) or, with reference_loss, the naive form (all [B, T, V] logits, then cross-entropy), to compare.
  bool reference_loss = false;
  // > 0: each cell also times a logit-distillation step at this temperature (train::causal_lm_kd_loss, the KL
  // alone, as finetune --kd T takes it; with reference_loss its logits path) toward a teacher, a softmax GPT-2
  // of the same width with other random weights, on the same batch, from the same starting weights — and
  // reports its time and peak memory as multiples of the plain step's.
  double kd_temperature = 0;
  // fp32, or bf16 mixed precision (autocast around each step's forward, as train::TrainOptions::precision):
  // the weights, the optimizer and the LM-head loss stay float.
  Precision precision = Precision::Fp32;
};

// The distillation step of a cell (TrainBenchOptions::kd_temperature).
struct TrainBenchKd {
  double step_ms = 0, peak_mb = 0;
  double time_ratio = 0, peak_ratio = 0;  // ÷ the plain step's step_ms and peak_mb
  double first_loss = 0, last_loss = 0;
  OpProfile profile;  // when options.profile
};

struct TrainBenchCell {
  std::string kind;  // the spec as given ("softmax" for the reference)
  double step_ms = 0, tokens_per_second = 0;
  double peak_mb = 0;        // LibTorch CPU allocator bytes alive at once during a step, beyond what lived before
  double gflops = 0;         // dense FLOPs per second
  double ratio = 0;          // tokens/s ÷ softmax's at the same width and length
  // The loss of the warm-up step and of the last timed one: every step trains on the same batch, so the
  // second is lower when the steps really train.
  double first_loss = 0, last_loss = 0;
  bool profiled = false;  // options.profile
  OpProfile profile;      // shares of one step's wall time (calls per step), when profiled
  bool distilled = false;  // options.kd_temperature > 0
  TrainBenchKd kd;
};

struct TrainBenchRow {
  std::string width;
  int64_t length = 0, batch = 0;
  std::vector<TrainBenchCell> cells;  // softmax first, then options.kinds in order
};

using TrainBenchTarget = TargetResult;

struct TrainBenchResult {
  TrainBenchOptions options;
  std::string device;  // where it ran: "cpu", "cuda:0" (measure.h, set_bench_device)
  int threads = 0;
  double gemm_gflops = 0;  // a 2048³ float GEMM on this machine, median of 5
  std::vector<TrainBenchRow> rows;
  // issue 21's: each converted kind vs softmax at mini widths; with kd_temperature, each kind's distillation
  // step within 1.5x the plain step's time and peak memory at every length measured (mini)
  std::vector<TrainBenchTarget> targets;
};

// Refuses options no run could measure (no length, a length below 2, softmax among the kinds: it is every run's
// baseline, and the kinds are measured beside it); run_train_bench calls it first, the CLI too (usage errors).
void check_train_bench_options(const TrainBenchOptions& options);
TrainBenchResult run_train_bench(const TrainBenchOptions& options);
nlohmann::json to_json(const TrainBenchResult& result);
std::string format_report(const TrainBenchResult& result);

}  // namespace mimic::bench
