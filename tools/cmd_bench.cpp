// mimic bench generate — decoding tokens/s (src/bench/generate_bench.{h,cpp}).
// mimic bench train — whole-model training steps, softmax vs converted kinds (src/bench/train_bench.{h,cpp}).
// mimic bench attention — softmax vs linear vs hybrid (sliding window + linear) attention: forward,
// forward+backward and peak memory by sequence length, recurrent decoding per token and state bytes by
// context, and the targets they are checked against. The measuring lives in src/bench/attention_bench.{h,cpp}.
#include <cstdio>

#include "mimic/bench/attention_bench.h"
#include "mimic/bench/generate_bench.h"
#include "mimic/bench/train_bench.h"
#include "cli.h"
#include "ranges.h"

namespace mimic::cli {
namespace {

struct BenchAttentionArgs {
  Common common;
  bench::AttentionBenchOptions options;
};

struct BenchTrainArgs {
  Common common;
  bench::TrainBenchOptions options;
  std::vector<std::string> widths = {"mini"};
};

struct BenchGenerateArgs {
  Common common;
  bench::GenerateBenchOptions options;
  bool no_parallel = false;
};

}  // namespace

void register_bench(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Benchmarks (attention: softmax vs linear vs hybrid attention speed and memory; generate: decoding tokens/s; train: whole-model training steps)");
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

  auto targs = std::make_shared<BenchTrainArgs>();
  auto* tr = bench->add_subcommand(
      "train", "Whole-model training steps (forward, backward, AdamW) of a random GPT-2: softmax vs converted attention kinds, by length");
  tr->add_option("--widths", targs->widths, "Model widths: mini (gpt2-mini, 6x192) and/or small (GPT-2 small, 12x768)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::IsMember({"mini", "small"}));
  tr->add_option("--lengths", targs->options.lengths, "Sequence lengths")->delimiter(',')->capture_default_str()->check(range::tokens(2));
  tr->add_option("--kinds", targs->options.kinds,
                 "Attention kinds besides softmax, as KIND[:key=value,...] (kinds.def), separated by ';'")
      ->delimiter(';')
      ->capture_default_str();
  tr->add_option("--tokens-per-step", targs->options.tokens_per_step, "Tokens per training step (batch = tokens / length, at least 1)")
      ->capture_default_str()
      ->check(range::tokens(2));
  tr->add_option("--repeats", targs->options.repeats, "Timed steps per measurement (median), after one warm-up step")
      ->capture_default_str()
      ->check(range::integer(1, 1000));
  add_common_options(*tr, targs->common);
  tr->callback([targs]() {
    start(targs->common);
    targs->options.seed = targs->common.seed;
    for (const auto& w : targs->widths) targs->options.widths.push_back(bench::train_bench_width(w));
    auto result = bench::run_train_bench(targs->options);
    if (targs->common.json) return print_json(bench::to_json(result));
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
