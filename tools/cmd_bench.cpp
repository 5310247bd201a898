// mimic bench generate — decoding speed by batch and context against the bandwidth limit (src/bench/generate_bench.{h,cpp}).
// mimic bench peer — the distillation and training steps that bench/peer/run.sh compares with PyTorch's (src/bench/peer_bench.{h,cpp}).
// mimic bench train — whole-model training steps, softmax vs converted kinds (src/bench/train_bench.{h,cpp}).
// mimic bench attention — softmax vs linear vs hybrid (sliding window + linear) attention: forward,
// forward+backward and peak memory by sequence length, recurrent decoding per token and state bytes by
// context, and the targets they are checked against. The measuring lives in src/bench/attention_bench.{h,cpp}.
#include <cstdio>

#include "mimic/attention/hybrid_kernel.h"
#include "mimic/bench/attention_bench.h"
#include "mimic/bench/generate_bench.h"
#include "mimic/bench/measure.h"
#include "mimic/bench/peer_bench.h"
#include "mimic/bench/train_bench.h"
#if MIMIC_HAVE_FULL
#include "mimic/distill/distill.h"  // bench peer's distillation loss
#endif
#include "mimic/core/error.h"
#include "mimic/core/runtime.h"
#include "mimic/io/output_lock.h"
#include "mimic/distributed/environment.h"
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
  double memory_budget_gb = 0;
};

struct BenchPeerArgs {
  Common common;
  bench::PeerBenchOptions options;
};

// --repeats, as every benchmark that takes a median reads it.
void add_repeats(CLI::App& sub, int& repeats, const std::string& what) {
  sub.add_option("--repeats", repeats, "Timed " + what + " (median), after one warm-up")->capture_default_str()->transform(range::integer(1, 1000));
}

}  // namespace

void register_bench(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Benchmarks (attention: softmax vs linear vs hybrid attention speed and memory; generate: decoding speed against the bandwidth limit; peer: steps to compare with PyTorch; train: whole-model training steps)");
  bench->require_subcommand(1);

  auto args = std::make_shared<BenchAttentionArgs>();
  auto* sub = bench->add_subcommand(
      "attention", "Softmax vs linear vs hybrid attention (one head unless --n-head, d=64, hedgehog features): fwd, fwd+bwd, peak memory, decoding");
  sub->add_option("--max-len", args->options.max_len, "Longest sequence length of the fwd/bwd table (the lengths are 512, 1024, ... 32768)")
      ->capture_default_str()
      ->transform(range::integer(512, 32768));
  add_repeats(*sub, args->options.repeats, "runs per measurement");
  sub->add_option("--n-head", args->options.heads,
                  "Heads of the one sequence (batch 1), each of head_dim 64: 1 times a form per head (on a GPU, bound by launching its "
                  "operators); GPT-2 small has 12")
      ->capture_default_str()
      ->transform(range::integer(1, 256));
  sub->add_option("--chunk", args->options.chunk, "Chunk size of the chunked forms (linear, hybrid, delta); at most the longest length measured")
      ->capture_default_str()
      ->transform(range::integer(1, 65536));
  sub->add_option("--window", args->options.window, "Window w of the hybrid form (keys under exact softmax)")
      ->capture_default_str()
      ->transform(range::integer(1, attention::kMaxHybridWindow));
  auto* cache_opt = sub->add_option("--cache", args->options.cache,
                                    "Also a hybrid form with LoLA's sparse cache of this many keys (0: none; docs/attention.md)")
                        ->capture_default_str()
                        ->transform(range::integer(0, attention::kMaxHybridWindow));
  sub->add_option("--cache-every", args->options.cache_every, "With --cache: a cache selection every this many positions in fwd and fwd+bwd")
      ->capture_default_str()
      ->transform(range::integer(1, 65536))
      ->needs(cache_opt);
  add_common_options(*sub, args->common, Devices::Any);
  sub->callback([args]() {
    start(args->common);
    bench::set_bench_device(args->common.on);
    auto result = bench::run_attention_bench(args->options);
    // after the work, as every note (it came before a refusal the bench found later)
    if (const int64_t chunk = bench::bench_chunk(args->options); chunk < args->options.chunk)
      std::fprintf(stderr, "mimic: note: --chunk %lld is longer than the longest length measured: the bench runs chunk %lld, which "
                   "computes the same table\n", static_cast<long long>(args->options.chunk), static_cast<long long>(chunk));
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
      ->default_str(typed_list(targs->widths))
      ->check(CLI::IsMember({"mini", "small"}));
  tr->add_option("--lengths", targs->options.lengths, "Sequence lengths")->delimiter(',')->default_str(typed_list(targs->options.lengths))->transform(range::tokens(2));
  tr->add_option("--kinds", targs->options.kinds,
                 "Attention kinds besides softmax, as KIND[:key=value,...] (kinds.def), separated by ';'")
      ->delimiter(';')
      ->default_str(typed_list(targs->options.kinds, ";"))
      ->check(attention_spec_arg(/*student=*/false));  // each kind, before the model is built (the sixth probe)
  tr->add_option("--tokens-per-step", targs->options.tokens_per_step, "Tokens per training step (batch = tokens / length, at least 1)")
      ->capture_default_str()
      ->transform(range::tokens(2));
  add_repeats(*tr, targs->options.repeats, "steps per measurement");
  tr->add_flag("--profile", targs->options.profile,
               "Run one more step per width, length and kind under LibTorch's operator profiler and report each operator's share of a step");
  tr->add_flag("--reference-loss", targs->options.reference_loss,
               "Compute the loss the naive way (all logits, then cross-entropy; with --kd both models' logits, then the KL) instead of training's chunked LM-head loss");
  tr->add_option("--kd", targs->options.kd_temperature,
                 "Also time a logit-distillation step at temperature T (finetune --kd T's step, toward a softmax teacher of the same width) "
                 "and report its time and peak memory as multiples of the plain step's")
      ->transform(range::kd_temperature(/*zero_is_off=*/false));  // finetune --kd's range, without its off
  add_precision_option(*tr, targs->options.precision, targs->common);
  add_common_options(*tr, targs->common, Devices::Any);
  tr->callback([targs]() {
    usage_checked([&] { bench::check_train_bench_options(targs->options); });
    start(targs->common);
    bench::set_bench_device(targs->common.on);
    targs->options.seed = targs->common.seed;
    for (const auto& w : targs->widths) targs->options.widths.push_back(bench::train_bench_width(w));
    auto result = bench::run_train_bench(targs->options);
    if (targs->common.json) return print_json(bench::to_json(result));
    std::fputs(bench::format_report(result).c_str(), stdout);
  });

  auto gargs = std::make_shared<BenchGenerateArgs>();
  auto* gen = bench->add_subcommand(
      "generate",
      "Greedy decoding by attention, batch and context: per-token time, tokens/s, state bytes and the share of the memory-bandwidth limit reached");
  auto* model_opt = gen->add_option("--model", gargs->options.model, "GPT-2 model directory (default: a random GPT-2 at --width)")
                        ->transform(model_dir_arg());
  gen->add_option("--width", gargs->options.width,
                  "Without --model: random weights at gpt2-mini's (mini) or GPT-2 small's (small) widths, position table as long as the longest run")
      ->capture_default_str()
      ->check(CLI::IsMember({"mini", "small"}))
      ->excludes(model_opt);
  gen->add_option("--prompt-lengths", gargs->options.prompt_lengths, "Prompt lengths (random tokens; each + --new-tokens - 1 within the model's context)")
      ->delimiter(',')
      ->default_str(typed_list(gargs->options.prompt_lengths))
      ->transform(range::tokens(1));
  auto* batches = gen->add_option("--batch-sizes", gargs->options.batches, "Batch sizes (rows decoded together)")
                      ->delimiter(',')
                      ->default_str(typed_list(gargs->options.batches))
                      ->transform(range::batch());
  retire_spelling(*gen, gen->add_option("--batch", gargs->options.batches)->delimiter(',')->transform(range::batch()), batches);
  gen->add_option("--new-tokens", gargs->options.new_tokens,
                  "Tokens generated per row, all of them: a prompt length + new tokens - 1 beyond the model's context is refused")
      ->capture_default_str()
      ->transform(range::tokens(2));
  gen->add_option("--feature-map", gargs->options.feature_map,
                  "Feature map of the all-linear and hybrid variants (default: each kind's own, hedgehog for linear, hedgehog_softmax for hybrid)")
      ->check(feature_map_arg());
  // the hybrid kind's bound on w: a larger --window was refused only by the first hybrid layer, after the model was built
  auto* window_opt = gen->add_option("--window", gargs->options.window, "Also a hybrid variant with this sliding window (0: none)")
      ->capture_default_str()
      ->transform(range::integer(0, attention::kMaxHybridWindow));
  gen->add_option("--cache", gargs->options.cache,
                  "With --window: also that hybrid with LoLA's sparse cache of this many keys per head (0: none; docs/attention.md)")
      ->capture_default_str()
      ->transform(range::integer(0, attention::kMaxHybridWindow))
      ->needs(window_opt);
  gen->add_option("--memory-budget", gargs->memory_budget_gb, "GB a run's KV caches may take; a run that needs more is skipped (0: half of the available memory)")
      ->capture_default_str()
      ->transform(range::gigabytes());
  gen->add_flag("--no-parallel", gargs->no_parallel, "Skip the parallel recompute at batch 1 (the slow reference)");
  gen->add_flag("--profile", gargs->options.profile,
                "Batch-1 runs: decode once more under LibTorch's operator profiler and report each operator's share of a step");
  add_common_options(*gen, gargs->common);
  gen->callback([gargs]() {
    start(gargs->common);
    gargs->options.seed = gargs->common.seed;
    gargs->options.parallel = !gargs->no_parallel;
    gargs->options.memory_budget = gargs->memory_budget_gb * 1e9;
    auto result = bench::run_generate_bench(gargs->options);
    if (gargs->common.json) return print_json(bench::to_json(result));
    std::fputs(bench::format_report(result).c_str(), stdout);
  });

  auto pargs = std::make_shared<BenchPeerArgs>();
  auto* peer = bench->add_subcommand(
      "peer", "mimic's side of the PyTorch comparison (bench/peer/run.sh): writes the inputs of a Hedgehog distillation step and a converted-model training step, then times both");
  peer->add_option("--inputs", pargs->options.inputs, "The safetensors file to write the steps' inputs to (for bench/peer/peer.py)")->required();
  peer->add_option("--distill-batch", pargs->options.distill_batch, "Sequences per distillation step")->capture_default_str()->transform(range::batch());
  peer->add_option("--distill-length", pargs->options.distill_length, "Tokens per distillation sequence")->capture_default_str()->transform(range::tokens(2));
  peer->add_option("--train-batch", pargs->options.train_batch, "Sequences per training step")->capture_default_str()->transform(range::batch());
  peer->add_option("--train-length", pargs->options.train_length, "Tokens per training sequence")->capture_default_str()->transform(range::tokens(2));
  add_repeats(*peer, pargs->options.repeats, "steps");
  add_common_options(*peer, pargs->common);
  peer->callback([pargs]() {
    start(pargs->common);
    // --inputs is an output: it replaces only an earlier peer file, and is held while written (it overwrote a model's
    // weights, a record, a file a running finetune was writing: the fourth probe of 2026-11-27)
    refuse_out_over_inputs(pargs->options.inputs, {}, "--inputs " + pargs->options.inputs);
    refuse_foreign_file(pargs->options.inputs, "a bench peer inputs file", [](const auto& md) { return md.count("mimic_peer") > 0; },
                        "--inputs");
    const auto lock = io::lock_output_file(pargs->options.inputs);
    pargs->options.seed = pargs->common.seed;
#if MIMIC_HAVE_FULL
    const distill::LossSpec ce{distill::LossKind::CE, 1.0, 1.0};
    pargs->options.distill_loss = [ce](attention::DistillableKernel& student, const analysis::TeacherBatch& batch) {
      return distill::distill_loss(student, batch, ce).total;
    };
#else
    fail("bench peer needs the distillation loss of the full library, which this build lacks (", MIMIC_FULL_MISSING, ")");
#endif
    auto result = bench::run_peer_bench(pargs->options);
    if (pargs->common.json) return print_json(bench::to_json(result));
    std::fputs(bench::format_report(result).c_str(), stdout);
  });
}

}  // namespace mimic::cli
