// mimic record --model DIR --data SPLIT|FILE --out FILE.h5 — store a softmax teacher's per-layer attention
// (q, k, v, per-head outputs, optionally weights) in a resumable HDF5 file (docs/formats.md).
#include <cstdio>

#include "cli.h"
#include "mimic/core/error.h"
#include "mimic/core/words.h"
#include "mimic/record/record.h"
#include "ranges.h"

namespace mimic::cli {
namespace {

struct RecordArgs {
  Common common;
  record::RecordOptions o;
};

void run(RecordArgs& a) {
  a.o.note = print_note;
  start(a.common);
  a.o.device = a.common.on;
  refuse_out_over_inputs(a.o.out, {{"--model", a.o.model_dir}, {"--data", a.o.data}});
  auto r = record::record(a.o);
  const double ratio = r.forward_tokens_per_second > 0 ? r.tokens_per_second / r.forward_tokens_per_second : 0.0;
  // a rerun that recorded nothing measured no speed: null, as training prints it, not a speed of 0
  auto speed = [&](double v) { return r.recorded > 0 && v > 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
  nlohmann::json j = {{"out", r.out},
                      {"samples", r.samples},
                      {"recorded", r.recorded},
                      {"resumed_from", r.resumed_from},
                      {"rolled_back", r.rolled_back},
                      {"seq_len", r.seq_len},
                      {"layers", r.layers},
                      {"tokens", r.tokens},
                      {"padded_tokens", r.padded},
                      {"seconds", r.seconds},
                      {"tokens_per_second", speed(r.tokens_per_second)},
                      {"forward_seconds", r.forward_seconds},
                      {"write_seconds", r.write_seconds},
                      {"forward_tokens_per_second", speed(r.forward_tokens_per_second)},
                      {"record_vs_forward", speed(ratio)},
                      {"file_bytes", r.file_bytes},
                      {"gzip", r.gzip},
                      {"converted_attention", r.converted_attention.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.converted_attention)}};
  // a request larger than the data is clamped, and said so (issue 38: numbers that mean what they say)
  if (a.o.samples > r.samples)
    std::fprintf(stderr, "mimic: note: --samples %lld: the data gives %s of %lld tokens; the file holds all %lld\n",
                 static_cast<long long>(a.o.samples), count_of(r.samples, "sample").c_str(), static_cast<long long>(r.seq_len),
                 static_cast<long long>(r.samples));
  if (a.o.weights_samples > r.samples)
    std::fprintf(stderr, "mimic: note: --weights-samples %lld: the file holds %s, so the softmax weights of all %lld are kept\n",
                 static_cast<long long>(a.o.weights_samples), count_of(r.samples, "sample").c_str(), static_cast<long long>(r.samples));
  if (r.gzip != a.o.compression)
    std::fprintf(stderr, "mimic: note: --gzip %d: %s was written at gzip level %d, which the samples appended now keep (one level per file)\n",
                 a.o.compression, r.out.c_str(), r.gzip);
  // a converted model's record passed as a softmax teacher's, maps distilled from it too (helper-57's probe of 2026-12-04)
  if (!r.converted_attention.empty())
    std::fprintf(stderr,
                 "mimic: note: %s computes %s: the record holds that attention's outputs (and later layers' q, k of it), not a softmax "
                 "teacher's; maps are distilled from the softmax model's record, and report --model compares a converted model on it\n",
                 a.o.model_dir.c_str(), r.converted_attention.c_str());
  if (r.rolled_back > 0)
    std::fprintf(stderr, "mimic: note: the last %s of the interrupted run %s incomplete and %s recorded again\n",
                 count_of(r.rolled_back, "sample").c_str(), r.rolled_back == 1 ? "was" : "were", r.rolled_back == 1 ? "was" : "were");
  // padding said as such (helper-81's probe of 2026-12-06: "1 sample of 256 tokens" where the split held 91)
  if (r.padded > 0)
    std::fprintf(stderr, "mimic: note: %lld of the %lld token positions recorded now are padding (masked: the data's last block is shorter "
                 "than --seq-len %lld); tokens/s counts them, as the forward runs them\n",
                 static_cast<long long>(r.padded), static_cast<long long>(r.tokens), static_cast<long long>(r.seq_len));
  if (a.common.json) return print_json(j);
  std::printf("%s: %s of %lld tokens (%lld recorded now%s), %.1f MB\n", r.out.c_str(),
              count_of(r.samples, "sample").c_str(), static_cast<long long>(r.seq_len), static_cast<long long>(r.recorded),
              r.resumed_from > 0 ? (", resumed from " + std::to_string(r.resumed_from)).c_str() : "", static_cast<double>(r.file_bytes) / 1e6);
  if (r.recorded > 0)
    std::printf("recorded %.0f tokens/s in %.1f s (forward %.1f s, writing %.1f s), %.0f%% of the %.0f tokens/s of the same forward "
                "without capture or writing, timed on one batch\n",
                r.tokens_per_second, r.seconds, r.forward_seconds, r.write_seconds, 100 * ratio, r.forward_tokens_per_second);
}

}  // namespace

void register_record(CLI::App& app) {
  auto a = std::make_shared<RecordArgs>();
  auto* sub = app.add_subcommand("record", "Record a softmax model's per-layer attention (q, k, v, outputs, weights) into an HDF5 file");
  sub->add_option("--model", a->o.model_dir, "Model directory (the softmax teacher)")->required()->transform(model_dir_arg());
  sub->add_option("--data", a->o.data,
                  "Corpus all|sotu|moby-dick, classification data set spam|sotu-era (texts of --split), a UTF-8 text file or folder (split 90/5/5 by position, docs/data.md), or a recall "
                  "task mqar[:...] / ar[:...] (docs/recall.md)")
      ->required()
      ->check(data_arg());
  sub->add_flag("--repeat", a->o.repeat, "Each sample is a segment followed by itself ([A A]): for the induction scores of report");
  sub->add_option("--split", a->o.split, "Split of a corpus: train, validation or test")->capture_default_str()->check(split_arg());
  sub->add_option("--out", a->o.out, "Output file (.h5); an existing one with the same settings is resumed / extended")->required()->check(out_file_arg());
  sub->add_option("--samples", a->o.samples, "Samples in the file (0: every block of the data)")->capture_default_str()->transform(range::count(0));
  sub->add_option("--seq-len", a->o.seq_len, "Tokens per sample (default: min(256, the model's context); BERT: at least 3)")->transform(range::tokens(2));
  sub->add_option("--layers", a->o.layers, "Layers to record: all, or a list like 0,2,4-5")->capture_default_str()->transform(range::index_list());
  sub->add_option("--weights-samples", a->o.weights_samples, "Also store the softmax weights of the first K samples")->capture_default_str()->transform(range::count(0));
  sub->add_option("--dtype", a->o.dtype, "Storage of q, k, v, o, weights")->capture_default_str()->check(CLI::IsMember({"f16", "f32"}));
  sub->add_option("--batch-size", a->o.batch_size, "Samples per forward pass")->capture_default_str()->transform(range::batch());
  sub->add_option("--gzip", a->o.compression, "gzip level (0: none)")->capture_default_str()->transform(range::integer(0, 9));
  sub->add_flag("--fresh", a->o.fresh, "Overwrite an existing --out instead of resuming it");
  add_common_options(*sub, a->common, Devices::Any);
  sub->callback([a]() { run(*a); });
}

}  // namespace mimic::cli
