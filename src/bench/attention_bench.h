// `mimic bench attention`: what linear and hybrid attention buy over softmax attention on this machine.
//
// One head (head_dim 64, batch 1, fp32), three causal forms: softmax (the reference kind), chunked linear
// attention with a feature map (hedgehog by default: features from the map on q·√scale and k·√scale, then
// linear_chunked) and hybrid attention (LoLCATs: softmax over a sliding window of w keys + the same map's
// linear attention over older keys, hybrid_chunked). For each sequence length T: the time and peak memory of
// the forward pass and of forward + backward, per form. Then recurrent decoding: the time of one new token at
// a context of N tokens (softmax: one query against a KV cache of N keys; linear: linear_step on a state that
// has consumed N tokens; hybrid: a hybrid_step on such a state), and the bytes each form keeps
// at that context (the KV cache grows with N, the linear and hybrid states do not). Finally the targets:
// linear fwd+bwd ≥ 10× and hybrid fwd+bwd ≥ 8× faster than softmax at 16K, crossover ≤ 1K, recurrent
// per-token time at 32K ≤ 1.2× the one at 1K.
//
// The forms are a list (attention_bench.cpp): results hold one entry per form, in the order of
// AttentionBenchResult::forms, and the tables, JSON and speed-up targets loop over it.
//
// Peak memory is counted in LibTorch's CPU allocator (see measure.h): the largest number of tensor bytes
// alive at once during the call, beyond what was alive when it started.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mimic/bench/target.h"

namespace mimic::bench {

struct AttentionBenchOptions {
  int64_t max_len = 16384;  // longest T of the forward/backward table (the lengths are 512 ... 32768)
  int repeats = 3;          // timed runs per measurement (the median is reported), after one warm-up
  int64_t chunk = 64;       // chunk size of linear_chunked
  int64_t head_dim = 64;
  // Heads of the one sequence (batch 1), each [T, head_dim]. One head measures a form's cost per head, which on a GPU
  // is bound by launching its many small operators; GPT-2 small's 12 give the GPU a layer's work per launch.
  int64_t heads = 1;
  std::string feature_map = "hedgehog";
  int64_t window = 64;      // w of the hybrid form (keys under exact softmax), 1 ... 65536
  // λ > 0: a "hyb+cache" form beside hybrid, with LoLA's sparse cache of λ keys (sparse_cache.h): its whole-sequence
  // form selects every `cache_every` positions (hybrid_cache_chunked), its decoding every token (hybrid_step)
  int64_t cache = 0;
  int64_t cache_every = 64;
  std::vector<int64_t> decode_contexts = {1024, 2048, 4096, 8192, 16384, 32768};
  int64_t decode_tokens = 64;  // tokens per timed decoding run
  bool progress = true;        // progress on stderr (a bar on a terminal, a line a minute elsewhere)
};

// One attention form at one length. Times in milliseconds, memory in MB (10^6 bytes).
struct FormResult {
  bool measured = false;
  std::string skipped;  // why it was not measured (when !measured)
  double fwd_ms = 0, fwdbwd_ms = 0;
  double fwd_peak_mb = 0, fwdbwd_peak_mb = 0;
};

// Every form at one length, in the order of AttentionBenchResult::forms.
struct LengthResult {
  int64_t length = 0;
  std::vector<FormResult> forms;
};

// One form decoding at one context: per-token time in microseconds — the median of all single-token times
// (tokens x runs), and the median over the runs of a run's mean time per token — and the bytes of the state
// it decodes from after `context` tokens (softmax: the KV cache, 2·N·head_dim floats; linear: S, z, m;
// hybrid: hybrid_state_bytes, the window's ring and the linear state).
struct DecodeForm {
  double us = 0, mean_us = 0;
  int64_t state_bytes = 0;
};

struct DecodeResult {
  int64_t context = 0;
  std::vector<DecodeForm> forms;  // in the order of AttentionBenchResult::forms
};

struct AttentionBenchResult {
  AttentionBenchOptions options;
  // The forms measured ("softmax", "linear", "hybrid"); the first is the reference the others' speed-ups are
  // taken against.
  std::vector<std::string> forms;
  int threads = 0;
  std::string device;  // where it ran: "cpu", "cuda:0" (measure.h, set_bench_device)
  int64_t feature_dim = 0;
  std::string memory_method;
  std::string timing_method;
  std::vector<LengthResult> lengths;
  std::vector<DecodeResult> decode;
  std::vector<TargetResult> targets;
};

// The lengths measured for a given max_len: 512, 1024, ..., 32768, those <= max_len.
std::vector<int64_t> bench_lengths(int64_t max_len);

// The chunk the bench runs: options.chunk, at most the longest length measured. A longer chunk computes the same table
// (a chunked form takes chunk = T for any chunk >= T), but the decoders' prefills, at contexts up to 32K whatever
// max_len, ran in chunks of it: at --chunk 65536 one chunk of 32K, [32K, 32K] scores for linear and hybrid and the delta
// rule's O(C^3) solve per chunk, for hours (issue 38). The result's options hold the chunk run.
int64_t bench_chunk(const AttentionBenchOptions& options);

// Runs the whole benchmark with the current LibTorch thread settings and generator. Throws mimic::Error for
// invalid options (max_len < 512, repeats < 1, chunk < 1, window outside 1 ... kMaxHybridWindow, ...).
AttentionBenchResult run_attention_bench(const AttentionBenchOptions& options);

// Index of a form in result.forms; mimic::Error if it was not measured.
size_t form_index(const AttentionBenchResult& result, const std::string& name);

// The result as one JSON object (every number), and as the plain-text report (header, tables, targets).
nlohmann::json to_json(const AttentionBenchResult& result);
std::string format_report(const AttentionBenchResult& result);

}  // namespace mimic::bench
