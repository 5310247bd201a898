#include "mimic/bench/train_bench.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <sstream>

#include "mimic/attention/kinds.h"
#include "mimic/bench/measure.h"
#include "mimic/bench/text.h"
#include "mimic/core/checked_device.h"
#include "mimic/core/error.h"
#include "mimic/core/progress.h"
#include "mimic/core/words.h"
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
// The distillation step's: within 1.5x the plain step's time and peak memory.
constexpr double kKdLimit = 1.5;

// Parameters that multiply activations, per token: every linear layer of every block and the LM head.
int64_t dense_parameters(const models::ModelSummary& s) {
  return s.n_layer * (4 * s.d_model * s.d_model + 2 * s.d_model * s.d_ff) + s.vocab_size * s.d_model;
}

}  // namespace

void check_train_bench_options(const TrainBenchOptions& o) {
  MIMIC_CHECK(!o.lengths.empty(), "bench train: --lengths must name at least one length");
  MIMIC_CHECK(o.repeats >= 1, "bench train: --repeats must be >= 1, got ", o.repeats);
  MIMIC_CHECK(o.tokens_per_step >= 2, "bench train: --tokens-per-step must be >= 2, got ", o.tokens_per_step);
  MIMIC_CHECK(o.kd_temperature >= 0 && std::isfinite(o.kd_temperature), "bench train: --kd must be a temperature > 0 (or 0: off), got ",
              o.kd_temperature);
  for (auto t : o.lengths) MIMIC_CHECK(t >= 2, "bench train: every length must be >= 2, got ", t);
  // `--kinds softmax` measured softmax against itself, with targets "softmax training step >= 4x softmax's" (helper-56)
  for (const auto& k : o.kinds)
    MIMIC_CHECK(attention::attention_kind(attention::parse_kind_spec(k).kind).role != attention::KindRole::Reference, "bench train: --kinds ", k,
                ": the reference attention is measured in every run, as the baseline of the others; name the kinds to measure beside it");
}

TrainBenchResult run_train_bench(const TrainBenchOptions& options) {
  check_train_bench_options(options);
  TrainBenchOptions o = options;
  if (o.widths.empty()) o.widths.push_back(train_bench_width("mini"));
  std::vector<attention::KindSpec> specs = {{"softmax", nlohmann::json::object()}};
  for (const auto& k : o.kinds) specs.push_back(attention::parse_kind_spec(k));
  const int64_t longest = *std::max_element(o.lengths.begin(), o.lengths.end());

  TrainBenchResult r;
  const c10::Device device = bench_device();
  r.device = device_label(device);
  r.threads = torch::get_num_threads();
  // softmax's step keeps every layer's T × T weights for its backward (fp32; GPT-2 small at 2,048 tokens peaked 4.0 GB
  // above the linear kind's, this estimate 4.8 GB: docs/finetune.md's table): a length beyond the machine's
  // memory was met by the allocator, or by the kernel's OOM killer, minutes in (helper-56's probe of 2026-12-04).
  // Refused before anything runs (on the CPU, whose free memory /proc/meminfo says): after the GEMM timing and a
  // model with a million positions it took 39 s and 3.8 GB to say so (helper-89's probe).
  if (device.is_cpu())
    for (const auto& w : o.widths)
      for (auto T : o.lengths) {
        const int64_t layers = w.config.at("n_layer").get<int64_t>(), heads = w.config.at("n_head").get<int64_t>();
        const double rows = static_cast<double>(std::max<int64_t>(1, o.tokens_per_step / T));
        const double need = 4.0 * static_cast<double>(layers * heads) * rows * static_cast<double>(T) * static_cast<double>(T);
        refuse_beyond_memory(need,
                             detail::concat("bench train: softmax at ", T, " tokens (", w.name, ": ", layers, " layers × ", heads,
                                            " heads × ", count_of(static_cast<int64_t>(rows), "row"), ") keeps"),
                             " of attention weights for its backward", "give shorter --lengths");
      }
  r.gemm_gflops = gemm_gflops();
  Progress bar("bench train", static_cast<int64_t>(o.widths.size() * o.lengths.size() * specs.size()), "run");
  if (!o.progress) bar.disable();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(o.seed);
  for (const auto& w : o.widths) {
    auto config = w.config;
    config["n_positions"] = std::max<int64_t>(config.value("n_positions", 0), longest);
    torch::manual_seed(o.seed);
    auto model = models::create_model(config.dump(), "");
    model->module().to(device);  // weights drawn on the CPU generator, then moved: the same start on any device
    const auto s = model->summary();
    const int64_t dense = dense_parameters(s);
    // Every kind starts from the same weights: the step times do not depend on them, but the losses then
    // differ only by the attention.
    std::vector<std::pair<std::string, at::Tensor>> initial;
    for (const auto& p : model->module().named_parameters()) initial.emplace_back(p.key(), p.value().detach().clone());
    // The distillation teacher: softmax attention, its own random weights (so that the KL is far from 0).
    std::unique_ptr<models::Model> teacher;
    if (o.kd_temperature > 0) {
      torch::manual_seed(o.seed + 1);
      teacher = models::create_model(config.dump(), "");
      teacher->module().to(device);
      teacher->module().eval();
    }
    for (auto T : o.lengths) {
      TrainBenchRow row;
      row.width = w.name;
      row.length = T;
      row.batch = std::max<int64_t>(1, o.tokens_per_step / T);
      auto ids = at::randint(s.vocab_size, {row.batch, T}, gen, torch::kLong).to(device);
      auto labels = at::roll(ids, -1, 1);
      const data::LmBatch batch{ids, labels, {}};
      for (size_t k = 0; k < specs.size(); ++k) {
        for (int64_t l = 0; l < s.n_layer; ++l)
          model->set_attention_kernel(l, attention::make_attention_kernel(specs[k].kind, specs[k].options, s.n_head, s.head_dim));
        model->module().to(device);  // the new kernels' parameters
        const std::string kind = k == 0 ? "softmax" : o.kinds[k - 1];
        // Runs of AdamW steps from the starting weights, one per loss: the plain LM loss and, with kd_temperature,
        // distillation. Each run has its own optimizer and its own copy of the weights, which it loads into the
        // model before each of its steps (untimed); with two runs the steps alternate, so that both see the
        // same load on a shared machine and their ratio does not drift with it.
        struct Run {
          std::string what;
          std::function<at::Tensor()> loss;
          std::vector<at::Tensor> weights;
          std::unique_ptr<train::AdamW> opt;
          std::vector<double> losses, ms;
          int64_t peak_bytes = 0;
          OpProfile profile;
        };
        std::vector<at::Tensor> model_weights;
        std::vector<std::pair<std::string, at::Tensor>> params;
        for (const auto& p : model->module().named_parameters()) {
          model_weights.push_back(p.value());
          params.emplace_back(p.key(), p.value());
        }
        std::vector<Run> runs;
        auto add_run = [&](const std::string& what, std::function<at::Tensor()> loss) {
          Run r;
          r.what = what;
          r.loss = std::move(loss);
          // the starting weights; a kernel's own parameters (absent from softmax's model) as the kernel made them
          for (const auto& p : model->module().named_parameters()) {
            const auto start = std::find_if(initial.begin(), initial.end(), [&](const auto& e) { return e.first == p.key(); });
            r.weights.push_back(start != initial.end() ? start->second.clone() : p.value().detach().clone());
          }
          r.opt = std::make_unique<train::AdamW>(params, train::AdamWOptions{});
          runs.push_back(std::move(r));
        };
        add_run(kind, [&] { return o.reference_loss ? train::causal_lm_loss_reference(*model, batch) : train::causal_lm_loss(*model, batch); });
        if (teacher)
          add_run(kind + " (distillation)", [&] {
            return o.reference_loss ? train::causal_lm_kd_loss_reference(*model, *teacher, batch, o.kd_temperature, 0.0)
                                    : train::causal_lm_kd_loss(*model, *teacher, batch, o.kd_temperature, 0.0);
          });
        auto load = [&](Run& r) {
          torch::NoGradGuard ng;
          for (size_t i = 0; i < model_weights.size(); ++i) model_weights[i].copy_(r.weights[i]);
        };
        auto keep = [&](Run& r) {
          torch::NoGradGuard ng;
          for (size_t i = 0; i < model_weights.size(); ++i) r.weights[i].copy_(model_weights[i]);
        };
        auto step = [&](Run& r) {
          at::Tensor l;
          {
            AutocastGuard mixed(o.precision, bench_device());  // the forward only, as the trainer does
            l = r.loss().to(at::kFloat);
          }
          l.backward();
          r.opt->step(1e-3);
          r.opt->zero_grad();
          r.losses.push_back(l.item<double>());
        };
        for (int i = 0; i <= o.repeats; ++i)  // a warm-up step each, then the timed ones
          for (auto& r : runs) {
            auto sample = measure_once([&] { load(r); }, [&] { step(r); });
            keep(r);
            if (i == 0) continue;
            r.ms.push_back(sample.ms);
            r.peak_bytes = std::max(r.peak_bytes, sample.peak_bytes);
          }
        for (auto& r : runs) {
          for (double x : r.losses) MIMIC_CHECK(std::isfinite(x), "bench train: ", r.what, " at T=", T, " gave a non-finite loss");
          if (!o.profile) continue;
          load(r);
          const size_t kept = r.losses.size();
          r.profile = profile_ops([&] { step(r); }, 1);
          r.losses.resize(kept);  // the profiled step's loss is not among those reported
        }
        const Run& plain = runs[0];
        TrainBenchCell c;
        c.kind = kind;
        c.step_ms = median(plain.ms);
        c.tokens_per_second = row.batch * T / (c.step_ms * 1e-3);
        c.peak_mb = plain.peak_bytes / 1e6;
        c.gflops = 6.0 * dense * row.batch * T / (c.step_ms * 1e-3) / 1e9;
        c.first_loss = plain.losses.front();
        c.last_loss = plain.losses.back();
        c.profiled = o.profile;
        c.profile = plain.profile;
        if (teacher) {
          const Run& kd = runs[1];
          c.distilled = true;
          c.kd.step_ms = median(kd.ms);
          c.kd.peak_mb = kd.peak_bytes / 1e6;
          c.kd.time_ratio = c.kd.step_ms / c.step_ms;
          c.kd.peak_ratio = c.kd.peak_mb / c.peak_mb;
          c.kd.first_loss = kd.losses.front();
          c.kd.last_loss = kd.losses.back();
          c.kd.profile = kd.profile;
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
  if (o.kd_temperature > 0)
    for (size_t k = 0; k < specs.size(); ++k)
      for (bool memory : {false, true}) {
        const std::string kind = k == 0 ? "softmax" : o.kinds[k - 1];
        TrainBenchTarget g;
        g.name = strf("%s distillation step <= %gx the plain step's %s at every length (mini)", kind.c_str(), kKdLimit,
                      memory ? "peak memory" : "time");
        g.limit = kKdLimit;
        g.status = "n/a";
        g.detail = "not measured";
        for (const auto& row : r.rows) {
          if (row.width != "mini") continue;
          const auto& c = row.cells[k];
          const double ratio = memory ? c.kd.peak_ratio : c.kd.time_ratio;
          if (g.status != "n/a" && ratio <= g.value) continue;
          g.value = ratio;
          g.status = ratio <= kKdLimit ? "PASS" : "MISS";
          g.detail = memory ? strf("worst at %s: %.0f vs %.0f MB: %.2fx", length_name(row.length).c_str(), c.kd.peak_mb, c.peak_mb, ratio)
                            : strf("worst at %s: %.0f vs %.0f ms: %.2fx", length_name(row.length).c_str(), c.kd.step_ms, c.step_ms, ratio);
        }
        r.targets.push_back(g);
      }
  r.options = o;
  return r;
}

namespace {

nlohmann::json profile_json(const OpProfile& p) {
  nlohmann::json ops = nlohmann::json::array();
  for (const auto& op : p.ops) ops.push_back({{"name", op.name}, {"self_share", op.share}, {"calls_per_step", op.calls}});
  return {{"outside_operators_share", p.outside_share},
          {"operators_per_step", p.operators},
          {"top_level_operators_per_step", p.top_level},
          {"operators", ops}};
}

void format_profile(std::ostringstream& os, const OpProfile& p, const std::string& what, const TrainBenchRow& row) {
  os << strf("\nprofile (shares of a training step's wall time, under the profiler; its time not reported): %s, %s, T %s, batch %lld\n",
             what.c_str(), row.width.c_str(), length_name(row.length).c_str(), static_cast<long long>(row.batch));
  os << strf("  %.0f operator calls per step (%.0f from our code); outside any operator: %.1f%%\n", p.operators, p.top_level,
             100 * p.outside_share);
  const size_t shown = std::min<size_t>(p.ops.size(), 15);
  for (size_t i = 0; i < shown; ++i)
    os << strf("  %-40s %6.1f%%  %6.0f calls/step\n", p.ops[i].name.c_str(), 100 * p.ops[i].share, p.ops[i].calls);
}

}  // namespace

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
      if (c.profiled) cells.back()["profile"] = profile_json(c.profile);
      if (c.distilled) {
        cells.back()["kd"] = {{"step_ms", c.kd.step_ms},       {"peak_mb", c.kd.peak_mb},       {"time_ratio", c.kd.time_ratio},
                              {"peak_ratio", c.kd.peak_ratio}, {"first_loss", c.kd.first_loss}, {"last_loss", c.kd.last_loss}};
        if (c.profiled) cells.back()["kd"]["profile"] = profile_json(c.kd.profile);
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
            {"device", r.device},
            {"repeats", r.options.repeats},
            {"tokens_per_step", r.options.tokens_per_step},
            {"seed", r.options.seed},
            {"widths", widths},
            {"kinds", r.options.kinds},
            {"profile", r.options.profile},
            {"kd_temperature", r.options.kd_temperature},
            {"lm_loss", r.options.reference_loss ? "reference" : "chunked"},
            {"precision", precision_name(r.options.precision)}}},
          {"gemm_gflops", r.gemm_gflops},
          {"work", "dense FLOPs = 6 x (linear-layer and LM-head parameters) x tokens; attention's own FLOPs not counted"},
          {"rows", rows},
          {"targets", targets}};
}

std::string format_report(const TrainBenchResult& r) {
  std::ostringstream os;
  // The tokens a step really holds: batch = tokens-per-step / T, at least one sequence, so a row whose T exceeds
  // --tokens-per-step holds more than asked (the header said "~2 tokens per step" over rows of 16: the eighth probe).
  int64_t fewest = 0, most = 0;
  for (const auto& row : r.rows) {
    const int64_t n = row.batch * row.length;
    fewest = fewest == 0 ? n : std::min(fewest, n);
    most = std::max(most, n);
  }
  const std::string tokens = fewest == most ? strf("%lld tokens per step", static_cast<long long>(most))
                                            : strf("%lld to %lld tokens per step (batch x T, near --tokens-per-step %lld)", static_cast<long long>(fewest),
                                                   static_cast<long long>(most), static_cast<long long>(r.options.tokens_per_step));
  os << strf("training-step benchmark on %s (%s): GPT-2, random weights, AdamW, %d CPU thread%s, %s, median of %d, %s LM loss\n",
             r.device.c_str(), precision_name(r.options.precision), r.threads, r.threads == 1 ? "" : "s", tokens.c_str(), r.options.repeats,
             r.options.reference_loss ? "reference (all logits)" : "chunked");
  os << strf("measured GEMM rate (2048^3 fp32): %.1f GFLOP/s; dense GFLOP/s below count 6 x matmul parameters x tokens; "
             "peak MB: the step's peak allocation above its start, in 10^6 bytes\n\n",
             r.gemm_gflops);
  const bool kd = r.options.kd_temperature > 0;
  os << strf("%-6s %6s %5s  %-50s %9s %9s %8s %9s %7s", "width", "T", "batch", "attention", "step ms", "tok/s", "ratio", "peak MB",
             "GFLOP/s");
  if (kd) os << strf(" %9s %7s %9s %7s", "KD ms", "KD x", "KD MB", "KD x");
  os << "\n";
  for (const auto& row : r.rows)
    for (const auto& c : row.cells) {
      os << strf("%-6s %6s %5lld  %-50s %9.0f %9.0f %7.2fx %9.0f %7.1f", row.width.c_str(), length_name(row.length).c_str(),
                 static_cast<long long>(row.batch), c.kind.c_str(), c.step_ms, c.tokens_per_second, c.ratio, c.peak_mb, c.gflops);
      if (c.distilled) os << strf(" %9.0f %6.2fx %9.0f %6.2fx", c.kd.step_ms, c.kd.time_ratio, c.kd.peak_mb, c.kd.peak_ratio);
      os << "\n";
    }
  if (kd)
    os << strf("KD: a logit-distillation step at temperature %g (the KL alone) toward a softmax teacher of the same width, "
               "x = multiple of the plain step's time / peak memory\n",
               r.options.kd_temperature);
  for (const auto& row : r.rows)
    for (const auto& c : row.cells) {
      if (!c.profiled) continue;
      format_profile(os, c.profile, c.kind, row);
      if (c.distilled) format_profile(os, c.kd.profile, c.kind + " (distillation step)", row);
    }
  if (!r.targets.empty()) os << "\ntargets\n";
  for (const auto& t : r.targets) os << strf("  [%-4s] %s: %s\n", t.status.c_str(), t.name.c_str(), t.detail.c_str());
  return os.str();
}

}  // namespace mimic::bench
