// mimic bench attention — softmax vs linear attention: forward, forward+backward and peak memory by sequence
// length, recurrent decoding per token by context, and the targets they are checked against. The measuring
// lives in src/bench/attention_bench.{h,cpp}.
#include <cstdio>

#include "bench/attention_bench.h"
#include "cli.h"

namespace mimic::cli {
namespace {

struct BenchAttentionArgs {
  Common common;
  bench::AttentionBenchOptions options;
};

}  // namespace

void register_bench(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Benchmarks (attention: softmax vs linear attention speed and memory)");
  bench->require_subcommand(1);

  auto args = std::make_shared<BenchAttentionArgs>();
  auto* sub = bench->add_subcommand(
      "attention", "Softmax vs linear attention (one head, d=64, hedgehog features): fwd, fwd+bwd, peak memory, decoding");
  sub->add_option("--max-len", args->options.max_len, "Longest sequence length of the fwd/bwd table (512 ... 32768)")
      ->capture_default_str();
  sub->add_option("--repeats", args->options.repeats, "Timed runs per measurement (median), after one warm-up")->capture_default_str();
  sub->add_option("--chunk", args->options.chunk, "Chunk size of the chunked linear attention")->capture_default_str();
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
}

}  // namespace mimic::cli
