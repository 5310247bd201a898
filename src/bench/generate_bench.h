// `mimic bench generate`: tokens/s of incremental decoding (KV cache / recurrent state) against the
// parallel recompute, on a real model as loaded and with every layer's attention replaced by an untrained
// linear kernel (hedgehog by default: the speed does not depend on the map's training), by prompt length.
// The model as loaded may be a converted one of any kind (linear, hybrid, mixed): decoding goes through each
// layer's kernel cache, and the state bytes reported are the sum of those caches' KernelCache::bytes().
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mimic::bench {

struct GenerateBenchOptions {
  std::string model;                                // a GPT-2 directory
  std::vector<int64_t> prompt_lengths = {64, 128, 256, 448};
  int64_t new_tokens = 32;                          // greedy tokens per run (fewer when the context ends)
  std::string feature_map = "hedgehog";
  bool parallel = true;                             // also time the parallel recompute (quadratic: the slow part)
  uint64_t seed = 0;                                // the random prompt tokens
  bool progress = true;
};

struct GenerateBenchRow {
  std::string attention;  // "<kind> (as loaded)" ("mixed" when layers differ), or "linear <map> (untrained)"
  int64_t prompt = 0, generated = 0;
  double prefill_tps = 0, recurrent_tps = 0, parallel_tps = 0;  // parallel_tps 0 when not measured
  int64_t state_bytes = 0;  // the decode state at the end of the run: its layers' KernelCache::bytes() summed
  bool same_tokens = true;  // recurrent and parallel produced the same greedy tokens
};

struct GenerateBenchResult {
  GenerateBenchOptions options;
  int threads = 0;
  std::vector<GenerateBenchRow> rows;
};

GenerateBenchResult run_generate_bench(const GenerateBenchOptions& options);
nlohmann::json to_json(const GenerateBenchResult& result);
std::string format_report(const GenerateBenchResult& result);

}  // namespace mimic::bench
