// mimic bench generate — decoding tokens/s (src/bench/generate_bench.{h,cpp}).
// mimic bench attention — softmax vs linear vs hybrid (sliding window + linear) attention: forward,
// forward+backward and peak memory by sequence length, recurrent decoding per token and state bytes by
// context, and the targets they are checked against. The measuring lives in src/bench/attention_bench.{h,cpp}.
#include <cstdio>

#include "mimic/bench/attention_bench.h"
#include "mimic/bench/generate_bench.h"
#include "cli.h"
#include "ranges.h"

namespace mimic::cli {
namespace {

struct BenchAttentionArgs {
  Common common;
  bench::AttentionBenchOptions options;
};

struct BenchGenerateArgs {
  Common common;
  bench::GenerateBenchOptions options;
  bool no_parallel = false;
};

}  // namespace

void register_bench(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Benchmarks (attention: softmax vs linear vs hybrid attention speed and memory; generate: decoding tokens/s)");
  bench->require_subcommand(1);

  auto args = std::make_shared<BenchAttentionArgs>();
  auto* sub = bench->add_subcommand(
      "attention", "Softmax vs linear vs hybrid attention (one head, d=64, hedgehog features): fwd, fwd+bwd, peak memory, decoding");
  sub->add_option("--max-len", args->options.max_len, "Longest sequence length of the fwd/bwd table (the lengths are 512, 1024, ... 32768)")
      ->capture_default_str()
      ->check(range::integer(512, 32768));
  sub->add_option("--repeats", args->options.repeats, "Timed runs per measurement (median), after one warm-up")
      ->capture_default_str()
      ->check(range::integer(1, 1000));
  sub->add_option("--chunk", args->options.chunk, "Chunk size of the chunked linear attention")
      ->capture_default_str()
      ->check(range::integer(1, 65536));
  sub->add_option("--window", args->options.window, "Window w of the hybrid form (keys under exact softmax)")
      ->capture_default_str()
      ->check(range::integer(1, 65536));
  add_common_options(*sub, args->common);
  sub->callback([args]() {
    start(args->common);
    auto result = bench::run_attention_bench(args->options);
    if (args->common.json) {
      auto j = bench::to_json(result);
      j["config"]["seed"] = args->common.seed;
      return print_json(j);
    }
    std::fputs(bench::format_report(result).c_str(), stdout);
  });

  auto gargs = std::make_shared<BenchGenerateArgs>();
  auto* gen = bench->add_subcommand(
      "generate", "Greedy decoding tokens/s: recurrent (KV cache / state) vs parallel recompute, as loaded and all-linear (untrained)");
  gen->add_option("--model", gargs->options.model, "GPT-2 model directory")->required()->transform(model_dir_arg());
  gen->add_option("--prompt-lengths", gargs->options.prompt_lengths, "Prompt lengths (random tokens; each below the model's context)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(range::tokens(1));
  gen->add_option("--new-tokens", gargs->options.new_tokens, "Tokens generated per run")->capture_default_str()->check(range::tokens(2));
  gen->add_option("--feature-map", gargs->options.feature_map, "Feature map of the all-linear variant")->capture_default_str();
  gen->add_flag("--no-parallel", gargs->no_parallel, "Skip the parallel recompute (the slow reference)");
  add_common_options(*gen, gargs->common);
  gen->callback([gargs]() {
    start(gargs->common);
    gargs->options.seed = gargs->common.seed;
    gargs->options.parallel = !gargs->no_parallel;
    auto result = bench::run_generate_bench(gargs->options);
    if (gargs->common.json) return print_json(bench::to_json(result));
    std::fputs(bench::format_report(result).c_str(), stdout);
  });
}

}  // namespace mimic::cli
