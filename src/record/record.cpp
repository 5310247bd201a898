// The `record` stage: run the teacher over the samples and hand what its kernels consumed to RecordWriter.
#include "mimic/record/record.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "mimic/attention/attention.h"
#include "mimic/core/error.h"
#include "mimic/core/layers.h"
#include "mimic/core/progress.h"
#include "mimic/core/runtime.h"
#include "mimic/core/words.h"
#include "mimic/data/corpus.h"
#include "mimic/data/recall_tasks.h"
#include "mimic/io/output_lock.h"
#include "mimic/models/config.h"
#include "mimic/models/family.h"
#include "mimic/attention/kinds.h"
#include "mimic/models/model.h"
#include "mimic/record/hdf5.h"
#include "mimic/record/samples.h"
#include "mimic/record/writer.h"
#include "mimic/text/tokenizer.h"

namespace mimic::record {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

RecordResult record(const RecordOptions& o) {
  MIMIC_CHECK(!o.out.empty(), "--out is required");
  MIMIC_CHECK(o.dtype == "f16" || o.dtype == "f32", "--dtype must be f16 or f32, not '", o.dtype, "'");
  MIMIC_CHECK(o.samples >= 0, "--samples must be >= 0 (0: every block of the data)");
  MIMIC_CHECK(o.seq_len >= 0, "--seq-len must be positive");
  MIMIC_CHECK(o.batch_size >= 1, "--batch-size must be >= 1");
  MIMIC_CHECK(o.weights_samples >= 0, "--weights-samples must be >= 0");
  MIMIC_CHECK(o.compression >= 0 && o.compression <= 9, "the gzip level must be 0..9");
  // one writer per record file for the whole run, --fresh included (docs/reliability.md, "Concurrent runs")
  const auto lock = io::lock_output_file(o.out);

  auto tok = record_tokenizer(o);  // null for a recall task
  auto model = models::load_model(o.model_dir, o.device);
  const auto sum = model->summary();
  const bool cls_sep = sum.family->cls_sep;
  const bool recall = data::is_recall_task(o.data);
  MIMIC_CHECK(!recall || !o.repeat, "--repeat doubles text segments; a recall task (", o.data, ") brings its own structure");
  const int64_t seq_len = sample_length(o, sum.max_positions, sum.context_note, cls_sep, tok.get());
  const auto layers = parse_layers(o.layers, sum.n_layer);
  const int64_t n_head = sum.n_head, head_dim = sum.head_dim;
  model->module().eval();
  torch::NoGradGuard no_grad;

  // What the kernels see: the scale and causality of every layer (a one-token probe).
  std::vector<attention::AttentionCapture> captures(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) model->set_attention_capture(layers[i], &captures[i]);
  {
    int64_t probe = cls_sep && tok ? tok->cls_id() : 0;
    model->forward({torch::full({1, 1}, probe, torch::dtype(torch::kLong).device(o.device)), {}, {}, {}});
  }

  std::string data_id;
  Stream stream = open_stream(o, tok.get(), seq_len, sum.vocab_size, &data_id);
  Sampler sampler = make_sampler(stream, tok.get(), cls_sep, seq_len, o.repeat);
  const int64_t available = sampler.available();
  const int64_t target = o.samples > 0 ? std::min(o.samples, available) : available;
  const int64_t K = o.weights_samples;
  // The settings a resumed file must share with this run, in the order they are checked.
  std::vector<std::pair<std::string, nlohmann::json>> settings = {
      {"format", kFormat},
      {"model_type", sum.model_type},
      {"n_layer", sum.n_layer},
      {"n_head", n_head},
      {"head_dim", head_dim},
      {"d_model", sum.d_model},
      {"model_digest", models::model_digest(*model)},
      {"network", models::network_description(o.model_dir)},
      // a conversion shares its teacher's weights and network: its attention (kinds, options, maps) tells them
      // apart, or a record resumed with it held two models' samples (the seventh probe of issue 38)
      {"attention", models::attention_digest(*model)},
      {"tokenizer", tok ? tok->kind() : std::string("none")},
      {"causal", captures[0].causal ? 1 : 0},
      {"scale", captures[0].scale},
      {"data", data_id},
      {"split", data::split_name(data::split_from_name(o.split))},  // every kind of --data is split now (a user's text too)
      // a recall task's stream is its first --samples examples, each the same whatever their number: the task spec
      // (data) names it, and a count there refused a record extended to more samples (the eighth probe of 2026-11-29)
      {"data_tokens", recall ? nlohmann::json(nullptr) : nlohmann::json(stream.size)},
      {"data_digest", recall ? nlohmann::json(nullptr) : nlohmann::json(stream_digest(stream))},
      {"seq_len", seq_len},
      {"layers", layers},
      {"dtype", o.dtype},
      {"weights_samples", K},
  };
  // Absent (null: no attribute) unless set, so that files recorded before the option still resume.
  settings.emplace_back("repeat", o.repeat ? nlohmann::json(1) : nlohmann::json(nullptr));
  std::string source = fs::absolute(o.model_dir).lexically_normal().string();
  while (source.size() > 1 && source.back() == '/') source.pop_back();

  RecordResult result;
  for (int64_t l = 0; l < sum.n_layer && result.converted_attention.empty(); ++l)
    if (const auto kernel = model->attention_kernel(l); kernel && !attention::is_reference(*kernel))
      result.converted_attention = models::attention_summary(*model);
  result.out = o.out;
  result.seq_len = seq_len;
  result.layers = layers;

  std::vector<double> scales;
  for (const auto& c : captures) scales.push_back(c.scale);
  std::vector<std::string> converted;
  for (auto l : layers) converted.push_back(models::converted_layer_attention(*model, l));
  const RecordLayout layout{std::move(settings), source, target, seq_len, n_head, head_dim, layers, scales, K, converted};
  RecordWriter writer(o, layout, [&](int64_t done) { return sampler.batch(0, done).first; });
  // what the file will hold, said before the work where it is unbounded or large: --samples 0 wrote 3 GB of a
  // corpus without a word (helper-57's probe of 2026-12-04); after the writer's checks of an existing --out, which may
  // refuse it (a note above a one-line refusal made it two: helper-71's probe)
  if (o.note) {
    const double elem = o.dtype == "f16" ? 2 : 4, layers_n = static_cast<double>(layers.size()), rows = static_cast<double>(target);
    const double per_sample = layers_n * static_cast<double>(std::size(kTensors)) * static_cast<double>(n_head * seq_len * head_dim) * elem;
    const double weights = layers_n * static_cast<double>(std::min(K, target)) * static_cast<double>(n_head * seq_len * seq_len) * elem;
    const double bytes = rows * per_sample + weights;
    if (o.samples == 0 || bytes >= 1e9) {
      o.note(detail::concat(o.samples == 0 ? "--samples 0 takes every sample of the data: " : "", target, " samples of ", seq_len,
                            " tokens, up to ", byte_size(bytes), " before compression (q, k, v and o of ", layers.size(), layers.size() == 1 ? " layer" : " layers",
                            K > 0 ? ", and the weights of the first samples" : "", ")", o.samples == 0 ? "; --samples N takes fewer" : ""));
    }
  }
  const int64_t done = writer.samples_done();
  result.rolled_back = writer.rolled_back();
  result.gzip = writer.compression();
  result.resumed_from = done;

  // ---------------------------------------------------------------------------------- the loop
  Progress progress("record", target, "sample");
  progress.update(done);
  const auto loop_start = Clock::now();
  double excluded = 0;
  for (int64_t s = done; s < target; s += o.batch_size) {
    const int64_t b = std::min(o.batch_size, target - s);
    auto [ids, mask] = sampler.batch(s, b);
    for (auto& c : captures) c.want_weights = s < K;
    auto t0 = Clock::now();
    // The LM / MLM head is not needed: score no position.
    const auto on = ids.to(o.device), on_mask = mask.to(o.device);
    const auto no_position = torch::zeros({b, seq_len}, torch::dtype(torch::kBool).device(o.device));
    model->forward({on, on_mask, {}, no_position});
    synchronize(o.device);  // a GPU runs asynchronously: the time is the forward's, not its launch's
    result.forward_seconds += since(t0);

    auto t1 = Clock::now();
    writer.write_batch(s, ids, mask, captures);
    result.write_seconds += since(t1);
    result.recorded += b;
    result.padded += mask.defined() ? (mask == 0).sum().item<int64_t>() : 0;
    progress.update(s + b);

    // on the second batch where there is one: the first carries the warm-up (the thread pool's start, the first
    // allocations), and timed on it the forward looked slower than the loop's average, so that recording came out
    // at more than 100% of it (helper-57's probe of 2026-12-04)
    if (o.measure_forward && (s == done + o.batch_size || (s == done && target - done <= o.batch_size))) {
      // The comparison: the same forward of the same batch without capture — no head either, as recording
      // runs none — so that the ratio is what capturing and writing cost. (With the head it was a different
      // computation: on a small model with a large vocabulary the head alone made recording look faster.)
      for (auto l : layers) model->set_attention_capture(l, nullptr);
      // Timed twice, the faster kept: on gpt2-mini the first run after the captured one took ~1.5× the second
      // and third (0.28–0.32 s against 0.19–0.21 s, three records) — a warm-up, not the forward's cost.
      double sec = 0;
      for (int rep = 0; rep < 2; ++rep) {
        auto tf = Clock::now();
        model->forward({on, on_mask, {}, no_position});
        synchronize(o.device);
        const double took = since(tf);
        sec = rep == 0 ? took : std::min(sec, took);
        excluded += took;  // not part of the recording time
      }
      result.forward_tokens_per_second = sec > 0 ? static_cast<double>(b * seq_len) / sec : 0.0;
      for (size_t i = 0; i < layers.size(); ++i) model->set_attention_capture(layers[i], &captures[i]);
    }
  }
  progress.finish();
  result.seconds = since(loop_start) - excluded;
  for (size_t i = 0; i < layers.size(); ++i) model->set_attention_capture(layers[i], nullptr);
  result.samples = done + result.recorded;
  result.tokens = result.recorded * seq_len;
  result.tokens_per_second = result.seconds > 0 ? static_cast<double>(result.tokens) / result.seconds : 0.0;
  writer.close();
  result.file_bytes = static_cast<int64_t>(fs::file_size(o.out));
  return result;
}

}  // namespace mimic::record
