#include "mimic/bench/peer_bench.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cmath>
#include <sstream>

#include "mimic/analysis/teacher.h"
#include "mimic/attention/distillable.h"
#include "mimic/attention/kinds.h"
#include "mimic/bench/measure.h"
#include "mimic/bench/text.h"
#include "mimic/bench/train_bench.h"
#include "mimic/core/error.h"
#include "mimic/io/safetensors.h"
#include "mimic/models/model.h"
#include "mimic/train/lm.h"
#include "mimic/train/optimizer.h"

namespace mimic::bench {

namespace {

// gpt2-mini's attention: 8 heads of 24 (192 wide).
constexpr int64_t kHeads = 8, kHeadDim = 24;
constexpr double kDistillLr = 1e-2;  // distill's default --lr
constexpr double kTrainLr = 1e-3;    // bench train's
const train::AdamWOptions kAdam{0.0, 0.9, 0.999, 1e-8, 0.0};  // distill's and bench train's: no weight decay

using Named = std::vector<std::pair<std::string, at::Tensor>>;

Named parameters(torch::nn::Module& m) {
  Named out;
  for (const auto& p : m.named_parameters()) out.emplace_back(p.key(), p.value());
  return out;
}

// One timed step as both sides run it: the loss, backward, the AdamW update, gradients cleared.
PeerStep time_step(const std::string& name, int repeats, const Named& params, double lr, const std::function<at::Tensor()>& loss) {
  train::AdamW opt(params, kAdam);
  PeerStep s;
  s.name = name;
  auto sample = measure(repeats, nullptr, [&] {
    auto l = loss();
    l.backward();
    opt.step(lr);
    opt.zero_grad();
    s.losses.push_back(l.item<double>());
  });
  for (double x : s.losses) MIMIC_CHECK(std::isfinite(x), "bench peer: the ", name, " step gave a non-finite loss");
  s.step_ms = sample.ms;
  s.peak_mb = sample.peak_bytes / 1e6;
  return s;
}

}  // namespace

PeerBenchResult run_peer_bench(const PeerBenchOptions& o) {
  MIMIC_CHECK(!o.inputs.empty(), "bench peer: --inputs FILE.safetensors is required");
  MIMIC_CHECK(o.distill_loss, "bench peer: no distillation loss given");
  MIMIC_CHECK(o.repeats >= 1, "bench peer: --repeats must be >= 1, got ", o.repeats);
  MIMIC_CHECK(o.distill_batch >= 1 && o.distill_length >= 2 && o.train_batch >= 1 && o.train_length >= 2,
              "bench peer: batches must be >= 1 and lengths >= 2");
  PeerBenchResult r;
  r.options = o;
  r.threads = torch::get_num_threads();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(o.seed);
  torch::manual_seed(o.seed);

  // The distillation side: teacher q, k, v of one layer and a student whose hedgehog map starts a little
  // away from its identity init (so that the first gradients are not special).
  const nlohmann::json student_options = {{"feature_map", "hedgehog"}};
  auto student = attention::as_distillable(attention::make_attention_kernel("linear", student_options, kHeads, kHeadDim), "bench peer");
  Named tensors;
  {
    torch::NoGradGuard ng;
    for (auto& [n, p] : parameters(*student)) {
      p.add_(at::randn(p.sizes(), gen) * 0.1);
      tensors.emplace_back("distill.student." + n, p);
    }
  }
  analysis::TeacherBatch batch;
  for (auto* t : {&batch.q, &batch.k, &batch.v}) *t = at::randn({o.distill_batch, kHeads, o.distill_length, kHeadDim}, gen);
  batch.scale = 1.0 / std::sqrt(static_cast<double>(kHeadDim));
  batch.causal = true;
  tensors.insert(tensors.end(), {{"distill.q", batch.q}, {"distill.k", batch.k}, {"distill.v", batch.v}});

  // The training side: gpt2-mini's widths, hedgehog linear attention in every layer.
  auto width = train_bench_width("mini");
  width.config["n_positions"] = std::max<int64_t>(width.config.value("n_positions", 0), o.train_length);
  auto model = models::create_model(width.config.dump(), "");
  const auto s = model->summary();
  for (int64_t l = 0; l < s.n_layer; ++l)
    model->set_attention_kernel(l, attention::make_attention_kernel("linear", student_options, s.n_head, s.head_dim));
  for (auto& [n, p] : parameters(model->module())) tensors.emplace_back("train.model." + n, p.detach());
  auto ids = at::randint(s.vocab_size, {o.train_batch, o.train_length}, gen, torch::kLong);
  auto labels = at::roll(ids, -1, 1);
  tensors.insert(tensors.end(), {{"train.ids", ids}, {"train.labels", labels}});

  r.config = {{"format", "mimic-peer-1"},
              {"distill",
               {{"n_head", kHeads},
                {"head_dim", kHeadDim},
                {"batch", o.distill_batch},
                {"length", o.distill_length},
                {"scale", batch.scale},
                {"student", student->config_json()},
                {"loss", "ce"},
                {"lr", kDistillLr}}},
              {"train",
               {{"model", width.config},
                {"attention", model->attention_kernel(0)->config_json()},
                {"batch", o.train_batch},
                {"length", o.train_length},
                {"loss", "next-token cross-entropy, labels = ids rolled left by one"},
                {"lr", kTrainLr}}},
              {"adamw", {{"beta1", kAdam.beta1}, {"beta2", kAdam.beta2}, {"eps", kAdam.eps}, {"weight_decay", kAdam.weight_decay}}},
              {"repeats", o.repeats},
              {"seed", o.seed}};
  io::SaveOptions save;
  save.metadata = {{"mimic_peer", r.config.dump()}};
  io::save_safetensors(o.inputs, tensors, save);

  r.steps.push_back(time_step("distill", o.repeats, parameters(*student), kDistillLr, [&] { return o.distill_loss(*student, batch); }));
  r.steps.push_back(time_step("train", o.repeats, parameters(model->module()), kTrainLr, [&] {
    return train::next_token_loss(model->forward({ids, {}, {}, {}}).logits, labels);
  }));
  return r;
}

nlohmann::json to_json(const PeerBenchResult& r) {
  nlohmann::json steps = nlohmann::json::object();
  for (const auto& s : r.steps) steps[s.name] = {{"step_ms", s.step_ms}, {"peak_mb", s.peak_mb}, {"losses", s.losses}};
  return {{"benchmark", "peer"}, {"side", "mimic"}, {"threads", r.threads}, {"inputs", r.options.inputs}, {"config", r.config},
          {"steps", steps}};
}

std::string format_report(const PeerBenchResult& r) {
  std::ostringstream os;
  os << strf("peer benchmark, mimic's side: %d thread%s, median of %d steps after a warm-up; inputs in %s\n", r.threads,
             r.threads == 1 ? "" : "s", r.options.repeats, r.options.inputs.c_str());
  os << strf("%-8s %9s %9s  %s\n", "step", "step ms", "peak MB", "losses (warm-up first)");
  for (const auto& s : r.steps) {
    std::string losses;
    for (double l : s.losses) losses += strf(" %.6f", l);
    os << strf("%-8s %9.1f %9.1f %s\n", s.name.c_str(), s.step_ms, s.peak_mb, losses.c_str());
  }
  return os.str();
}

}  // namespace mimic::bench
