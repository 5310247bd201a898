#include "mimic/bench/train_bench.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "mimic/attention/kinds.h"
#include "mimic/bench/measure.h"
#include "mimic/bench/text.h"
#include "mimic/core/error.h"
#include "mimic/core/progress.h"
#include "mimic/data/batches.h"
#include "mimic/models/model.h"
#include "mimic/train/lm.h"
#include "mimic/train/optimizer.h"

namespace mimic::bench {

TrainBenchWidth train_bench_width(const std::string& name) {
  nlohmann::json c = {{"model_type", "gpt2"},         {"architectures", {"GPT2LMHeadModel"}},
                      {"vocab_size", 50257},          {"activation_function", "gelu_new"},
                      {"layer_norm_epsilon", 1e-5},   {"resid_pdrop", 0.0},
                      {"embd_pdrop", 0.0},            {"attn_pdrop", 0.0},
                      {"initializer_range", 0.02},    {"scale_attn_weights", true}};
  if (name == "mini") {
    c.update({{"n_embd", 192}, {"n_layer", 6}, {"n_head", 8}, {"n_inner", 768}, {"n_positions", 512}});
  } else if (name == "small") {
    c.update({{"n_embd", 768}, {"n_layer", 12}, {"n_head", 12}, {"n_inner", 3072}, {"n_positions", 1024}});
  } else {
    fail("bench train: unknown width '", name, "' (known: mini, small)");
  }
  return {name, c};
}

namespace {

struct Targets {
  int64_t length;
  double limit;
};
// Issue 21's targets for a converted model's training step against softmax's, at gpt2-mini's widths.
constexpr Targets kTargets[] = {{256, 1.0}, {2048, 2.0}, {4096, 4.0}};

// Parameters that multiply activations, per token: every linear layer of every block and the LM head.
int64_t dense_parameters(const models::ModelSummary& s) {
  return s.n_layer * (4 * s.d_model * s.d_model + 2 * s.d_model * s.d_ff) + s.vocab_size * s.d_model;
}

}  // namespace

TrainBenchResult run_train_bench(const TrainBenchOptions& options) {
  TrainBenchOptions o = options;
  if (o.widths.empty()) o.widths.push_back(train_bench_width("mini"));
  MIMIC_CHECK(!o.lengths.empty(), "bench train: --lengths must name at least one length");
  MIMIC_CHECK(o.repeats >= 1, "bench train: --repeats must be >= 1, got ", o.repeats);
  MIMIC_CHECK(o.tokens_per_step >= 2, "bench train: --tokens-per-step must be >= 2, got ", o.tokens_per_step);
  for (auto t : o.lengths) MIMIC_CHECK(t >= 2, "bench train: every length must be >= 2, got ", t);
  std::vector<attention::KindSpec> specs = {{"softmax", nlohmann::json::object()}};
  for (const auto& k : o.kinds) specs.push_back(attention::parse_kind_spec(k));
  const int64_t longest = *std::max_element(o.lengths.begin(), o.lengths.end());

  TrainBenchResult r;
  r.threads = torch::get_num_threads();
  r.gemm_gflops = gemm_gflops();
  Progress bar("bench train", static_cast<int64_t>(o.widths.size() * o.lengths.size() * specs.size()), "run");
  if (!o.progress) bar.disable();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(o.seed);
  for (const auto& w : o.widths) {
    auto config = w.config;
    config["n_positions"] = std::max<int64_t>(config.value("n_positions", 0), longest);
    torch::manual_seed(o.seed);
    auto model = models::create_model(config.dump(), "");
    const auto s = model->summary();
    const int64_t dense = dense_parameters(s);
    // Every kind starts from the same weights: the step times do not depend on them, but the losses then
    // differ only by the attention.
    std::vector<std::pair<std::string, at::Tensor>> initial;
    for (const auto& p : model->module().named_parameters()) initial.emplace_back(p.key(), p.value().detach().clone());
    for (auto T : o.lengths) {
      TrainBenchRow row;
      row.width = w.name;
      row.length = T;
      row.batch = std::max<int64_t>(1, o.tokens_per_step / T);
      auto ids = at::randint(s.vocab_size, {row.batch, T}, gen, torch::kLong);
      auto labels = at::roll(ids, -1, 1);
      const data::LmBatch batch{ids, labels, {}};
      for (size_t k = 0; k < specs.size(); ++k) {
        for (int64_t l = 0; l < s.n_layer; ++l)
          model->set_attention_kernel(l, attention::make_attention_kernel(specs[k].kind, specs[k].options, s.n_head, s.d_model / s.n_head));
        {
          torch::NoGradGuard ng;
          auto params = model->module().named_parameters();
          for (const auto& [name, t] : initial)
            if (auto* p = params.find(name)) p->copy_(t);
        }
        std::vector<std::pair<std::string, at::Tensor>> params;
        for (const auto& p : model->module().named_parameters()) params.emplace_back(p.key(), p.value());
        train::AdamW opt(params, {});
        auto step = [&] {
          auto l = o.reference_loss ? train::causal_lm_loss_reference(*model, batch) : train::causal_lm_loss(*model, batch);
          l.backward();
          opt.step(1e-3);
          opt.zero_grad();
          return l.item<double>();
        };
        std::vector<double> losses;
        auto sample = measure(o.repeats, nullptr, [&] { losses.push_back(step()); });
        for (double x : losses) MIMIC_CHECK(std::isfinite(x), "bench train: ", specs[k].kind, " at T=", T, " gave a non-finite loss");
        TrainBenchCell c;
        c.kind = k == 0 ? "softmax" : o.kinds[k - 1];
        c.step_ms = sample.ms;
        c.tokens_per_second = row.batch * T / (sample.ms * 1e-3);
        c.peak_mb = sample.peak_bytes / 1e6;
        c.gflops = 6.0 * dense * row.batch * T / (sample.ms * 1e-3) / 1e9;
        c.first_loss = losses.front();
        c.last_loss = losses.back();
        if (o.profile) {
          c.profile = profile_ops([&] { step(); }, 1);
          c.profiled = true;
        }
        row.cells.push_back(c);
        bar.advance();
      }
      for (auto& c : row.cells) c.ratio = c.tokens_per_second / row.cells[0].tokens_per_second;
      r.rows.push_back(row);
    }
  }
  bar.finish();

  for (size_t k = 1; k < specs.size(); ++k)
    for (const auto& t : kTargets) {
      TrainBenchTarget g;
      g.name = strf("%s training step >= %gx softmax's tokens/s at %s (mini)", o.kinds[k - 1].c_str(), t.limit,
                    length_name(t.length).c_str());
      g.limit = t.limit;
      g.status = "n/a";
      g.detail = "not measured";
      for (const auto& row : r.rows)
        if (row.width == "mini" && row.length == t.length) {
          g.value = row.cells[k].ratio;
          g.status = g.value >= t.limit ? "PASS" : "MISS";
          g.detail = strf("%.0f vs %.0f tok/s: %.2fx", row.cells[k].tokens_per_second, row.cells[0].tokens_per_second, g.value);
        }
      r.targets.push_back(g);
    }
  r.options = o;
  return r;
}

nlohmann::json to_json(const TrainBenchResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : r.rows) {
    nlohmann::json cells = nlohmann::json::array();
    for (const auto& c : row.cells) {
      cells.push_back({{"kind", c.kind},
                       {"step_ms", c.step_ms},
                       {"tokens_per_second", c.tokens_per_second},
                       {"peak_mb", c.peak_mb},
                       {"dense_gflops", c.gflops},
                       {"gemm_share", c.gflops / r.gemm_gflops},
                       {"ratio", c.ratio},
                       {"first_loss", c.first_loss},
                       {"last_loss", c.last_loss}});
      if (c.profiled) {
        nlohmann::json ops = nlohmann::json::array();
        for (const auto& op : c.profile.ops) ops.push_back({{"name", op.name}, {"self_share", op.share}, {"calls_per_step", op.calls}});
        cells.back()["profile"] = {{"outside_operators_share", c.profile.outside_share},
                                   {"operators_per_step", c.profile.operators},
                                   {"top_level_operators_per_step", c.profile.top_level},
                                   {"operators", ops}};
      }
    }
    rows.push_back({{"width", row.width}, {"T", row.length}, {"batch", row.batch}, {"kinds", cells}});
  }
  nlohmann::json targets = nlohmann::json::array();
  for (const auto& t : r.targets)
    targets.push_back({{"name", t.name}, {"status", t.status}, {"detail", t.detail}, {"value", t.value}, {"limit", t.limit}});
  nlohmann::json widths = nlohmann::json::array();
  for (const auto& w : r.options.widths) widths.push_back({{"name", w.name}, {"config", w.config}});
  return {{"benchmark", "train"},
          {"config",
           {{"threads", r.threads},
            {"repeats", r.options.repeats},
            {"tokens_per_step", r.options.tokens_per_step},
            {"seed", r.options.seed},
            {"widths", widths},
            {"kinds", r.options.kinds},
            {"profile", r.options.profile},
            {"lm_loss", r.options.reference_loss ? "reference" : "chunked"}}},
          {"gemm_gflops", r.gemm_gflops},
          {"work", "dense FLOPs = 6 x (linear-layer and LM-head parameters) x tokens; attention's own FLOPs not counted"},
          {"rows", rows},
          {"targets", targets}};
}

std::string format_report(const TrainBenchResult& r) {
  std::ostringstream os;
  os << strf("training-step benchmark: GPT-2, random weights, AdamW, %d thread%s, ~%lld tokens per step, median of %d, %s LM loss\n",
             r.threads, r.threads == 1 ? "" : "s", static_cast<long long>(r.options.tokens_per_step), r.options.repeats,
             r.options.reference_loss ? "reference (all logits)" : "chunked");
  os << strf("measured GEMM rate (2048^3 fp32): %.1f GFLOP/s; dense GFLOP/s below count 6 x matmul parameters x tokens\n\n",
             r.gemm_gflops);
  os << strf("%-6s %6s %5s  %-50s %9s %9s %8s %9s %7s\n", "width", "T", "batch", "attention", "step ms", "tok/s", "ratio", "peak MB",
             "GFLOP/s");
  for (const auto& row : r.rows)
    for (const auto& c : row.cells)
      os << strf("%-6s %6s %5lld  %-50s %9.0f %9.0f %7.2fx %9.0f %7.1f\n", row.width.c_str(), length_name(row.length).c_str(),
                 static_cast<long long>(row.batch), c.kind.c_str(), c.step_ms, c.tokens_per_second, c.ratio, c.peak_mb, c.gflops);
  for (const auto& row : r.rows)
    for (const auto& c : row.cells) {
      if (!c.profiled) continue;
      os << strf("\nprofile (shares of a training step's wall time, under the profiler; its time not reported): %s, %s, T %s, batch %lld\n",
                 c.kind.c_str(), row.width.c_str(), length_name(row.length).c_str(), static_cast<long long>(row.batch));
      os << strf("  %.0f operator calls per step (%.0f from our code); outside any operator: %.1f%%\n", c.profile.operators,
                 c.profile.top_level, 100 * c.profile.outside_share);
      const size_t shown = std::min<size_t>(c.profile.ops.size(), 15);
      for (size_t i = 0; i < shown; ++i)
        os << strf("  %-40s %6.1f%%  %6.0f calls/step\n", c.profile.ops[i].name.c_str(), 100 * c.profile.ops[i].share, c.profile.ops[i].calls);
    }
  if (!r.targets.empty()) os << "\ntargets\n";
  for (const auto& t : r.targets) os << strf("  [%-4s] %s: %s\n", t.status.c_str(), t.name.c_str(), t.detail.c_str());
  return os.str();
}

}  // namespace mimic::bench
