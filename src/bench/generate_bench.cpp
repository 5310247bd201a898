#include "mimic/bench/generate_bench.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <sstream>

#include "mimic/attention/hybrid_kernel.h"
#include "mimic/attention/kinds.h"
#include "mimic/bench/measure.h"
#include "mimic/bench/text.h"
#include "mimic/bench/train_bench.h"
#include "mimic/core/error.h"
#include "mimic/core/progress.h"
#include "mimic/generate/generate.h"
#include "mimic/models/family.h"
#include "mimic/models/model.h"

namespace mimic::bench {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The targets of issue 21 for decoding.
constexpr double kBatch1Share = 0.5;   // batch-1 decoding reaches >= 50% of the bandwidth limit
constexpr int64_t kBigBatch = 64, kBigContext = 2048;
constexpr double kLinearSpeedup = 3.0;  // all-linear tokens/s >= 3x softmax's at batch 64, 2K
constexpr double kLinearState = 0.1;    // with <= 1/10 of its state bytes

// The prefill runs the prompt through the decode state in blocks whose softmax scores ([B, H, block, context]
// floats) stay under this many bytes: in one piece, 64 rows of 2K tokens would need 8.6 GB of scores per
// layer at gpt2-mini's 8 heads, far more than the KV cache being measured.
constexpr double kPrefillScoreBytes = 256e6;

std::string kinds(const models::Model& m, int64_t layers) {
  std::string first = m.attention_kernel(0)->kind();
  for (int64_t i = 1; i < layers; ++i)
    if (m.attention_kernel(i)->kind() != first) return "mixed";
  return first;
}

// What one run measured: times, the state's bytes after the prefill and at the end, row 0's tokens.
struct Decoded {
  double prefill_seconds = 0, decode_seconds = 0;
  int64_t steps = 0, state_start = 0, state_end = 0;
  std::vector<int64_t> row0;
};

// Greedy decoding of the prompts `ids` [B, P]: the prefill in blocks, then `steps` [B, 1] steps, each row's
// next token picked by generate's own greedy sampler. With `profile`, the steps run under the operator
// profiler (profile_ops), which slows them: such a run's times are not reported.
Decoded decode(models::Model& model, const at::Tensor& ids, int64_t steps, OpProfile* profile = nullptr) {
  torch::NoGradGuard no_grad;
  const auto s = model.summary();
  const int64_t B = ids.size(0), P = ids.size(1);
  const double per_query = static_cast<double>(B) * s.n_head * (P + steps) * sizeof(float);
  const int64_t block = std::clamp<int64_t>(static_cast<int64_t>(kPrefillScoreBytes / per_query), 1, P);
  generate::Sampler greedy(0.0, 0, 0);
  std::vector<int64_t> next(static_cast<size_t>(B));
  auto pick = [&](const at::Tensor& logits, Decoded& d) {  // logits [B, V]
    for (int64_t b = 0; b < B; ++b) next[b] = greedy.next(logits[b]);
    d.row0.push_back(next[0]);
  };
  Decoded d;
  auto t0 = Clock::now();
  auto state = model.new_decode_state();
  at::Tensor logits;
  for (int64_t p = 0; p < P; p += block) logits = model.forward_step(ids.narrow(1, p, std::min(block, P - p)), *state);
  pick(logits.select(1, -1), d);
  d.prefill_seconds = since(t0);
  d.state_start = state->bytes();
  auto t1 = Clock::now();
  auto run_steps = [&] {
    for (int64_t i = 0; i < steps; ++i)
      pick(model.forward_step(torch::tensor(next, torch::kLong).view({B, 1}), *state).select(1, -1), d);
  };
  if (profile)
    *profile = profile_ops(run_steps, steps);
  else
    run_steps();
  d.decode_seconds = since(t1);
  d.steps = steps;
  d.state_end = state->bytes();
  return d;
}

// Bytes of KV cache a run ends with: its softmax layers' 2 · B · context · H_kv · d_head floats each (the cache holds a
// row per KV head: grouped-query models' caches are g times smaller than their query heads'). The run needs up to
// 1.5 times that (the buffers grow by half when full), plus one layer's old buffer while it grows and the
// prefill's scores.
double kv_cache_bytes(const models::Model& m, const models::ModelSummary& s, int64_t batch, int64_t context) {
  double layers = 0;
  for (int64_t l = 0; l < s.n_layer; ++l) layers += attention::is_reference(*m.attention_kernel(l)) ? 1 : 0;
  return layers * 2.0 * batch * context * (s.n_kv_head > 0 ? s.n_kv_head : s.n_head) * s.head_dim * sizeof(float);
}

TargetResult not_measured(const std::string& name, double limit, const std::string& why) { return {name, "n/a", why, 0, limit}; }

std::vector<TargetResult> decoding_targets(const GenerateBenchResult& r) {
  std::vector<TargetResult> out;
  for (const auto& v : r.variants) {
    const std::string name = strf("%s: batch-1 decoding >= %.0f%% of the bandwidth limit", v.c_str(), 100 * kBatch1Share);
    const GenerateBenchRow* worst = nullptr;
    for (const auto& row : r.rows)
      if (row.attention == v && row.batch == 1 && row.skipped.empty() && (!worst || row.limit_share < worst->limit_share)) worst = &row;
    if (!worst) {
      out.push_back(not_measured(name, kBatch1Share, "batch 1 not measured"));
      continue;
    }
    out.push_back({name, worst->limit_share >= kBatch1Share ? "PASS" : "MISS",
                   strf("lowest at prompt %lld: %.0f%% (step %.2f ms, limit %.2f ms)", static_cast<long long>(worst->prompt),
                        100 * worst->limit_share, worst->step_ms, worst->limit_ms),
                   worst->limit_share, kBatch1Share});
  }
  const std::string speed = strf("all-linear >= %gx the softmax model's tokens/s at batch %lld, %s context", kLinearSpeedup,
                                 static_cast<long long>(kBigBatch), length_name(kBigContext).c_str());
  const std::string state = strf("all-linear state <= 1/%g of the softmax model's at batch %lld, %s context", 1 / kLinearState,
                                 static_cast<long long>(kBigBatch), length_name(kBigContext).c_str());
  auto find = [&](size_t variant) -> const GenerateBenchRow* {
    for (const auto& row : r.rows)
      if (row.attention == r.variants[variant] && row.batch == kBigBatch && row.prompt == kBigContext) return &row;
    return nullptr;
  };
  const auto *sm = find(0), *lin = find(1);
  std::string why;
  if (r.variants[0].rfind("softmax", 0) != 0)
    why = "the model as loaded is " + r.variants[0] + ", not softmax";
  else if (!sm || !lin)
    why = strf("batch %lld at a %s prompt not measured", static_cast<long long>(kBigBatch), length_name(kBigContext).c_str());
  else if (!sm->skipped.empty() || !lin->skipped.empty())
    why = "skipped: " + (sm->skipped.empty() ? lin->skipped : sm->skipped);
  if (!why.empty()) {
    out.push_back(not_measured(speed, kLinearSpeedup, why));
    out.push_back(not_measured(state, kLinearState, why));
    return out;
  }
  const double speedup = ratio(lin->recurrent_tps, sm->recurrent_tps);
  out.push_back({speed, speedup >= kLinearSpeedup ? "PASS" : "MISS",
                 strf("%.0f vs %.0f tok/s: %.2fx", lin->recurrent_tps, sm->recurrent_tps, speedup), speedup, kLinearSpeedup});
  const double share = ratio(static_cast<double>(lin->state_bytes), static_cast<double>(sm->state_bytes));
  out.push_back({state, share <= kLinearState ? "PASS" : "MISS",
                 strf("%.1f vs %.1f MB: 1/%.1f", lin->state_bytes / 1e6, sm->state_bytes / 1e6, share > 0 ? 1 / share : 0.0), share,
                 kLinearState});
  return out;
}

}  // namespace

double decode_weight_bytes(models::Model& model) {
  const auto s = model.summary();
  double bytes = 0;
  for (const auto& p : model.module().named_parameters())
    if (!models::is_embedding(p.key())) bytes += static_cast<double>(p.value().nbytes());
  return bytes + static_cast<double>(s.vocab_size) * s.d_model * sizeof(float);  // the LM head's matrix
}

GenerateBenchResult run_generate_bench(const GenerateBenchOptions& o) {
  MIMIC_CHECK(o.new_tokens >= 2, "bench generate: --new-tokens must be >= 2");
  MIMIC_CHECK(!o.prompt_lengths.empty() && !o.batches.empty(), "bench generate: at least one prompt length and one batch size");
  for (auto b : o.batches) MIMIC_CHECK(b >= 1, "bench generate: every batch size must be >= 1, got ", b);
  // the hybrid kind's own bound on w, before the model is built (it was refused after, by the first hybrid layer)
  MIMIC_CHECK(o.window >= 0 && o.window <= attention::kMaxHybridWindow, "bench generate: --window must be in 0 ... ",
              attention::kMaxHybridWindow, " (0: no hybrid variant), got ", o.window);
  MIMIC_CHECK(o.cache >= 0 && o.cache <= attention::kMaxHybridWindow && (o.cache == 0 || o.window > 0),
              "bench generate: --cache must be in 0 ... ", attention::kMaxHybridWindow, " and needs --window > 0 (the cache is the "
              "hybrid's), got ", o.cache);
  MIMIC_CHECK(o.memory_budget >= 0, "bench generate: the memory budget must be >= 0 (0: half of the available memory)");
  const int64_t longest = *std::max_element(o.prompt_lengths.begin(), o.prompt_lengths.end());
  GenerateBenchResult r;
  std::unique_ptr<models::Model> model;
  if (!o.model.empty()) {
    model = models::load_model(o.model);
    r.model_name = o.model;
  } else {
    auto config = train_bench_width(o.width).config;
    config["n_positions"] = std::max<int64_t>(config.value("n_positions", 0), longest + o.new_tokens - 1);
    torch::manual_seed(o.seed);
    model = models::create_model(config.dump(), "");
    r.model_name = strf("random %s (n_positions %lld)", o.width.c_str(), static_cast<long long>(config["n_positions"].get<int64_t>()));
  }
  const auto s = model->summary();
  MIMIC_CHECK(s.family->causal, "bench generate needs a causal LM (", models::causal_family_names(), "); ", o.model, " is a ", s.model_type, " model");
  // Every run decodes all the tokens asked, or none runs: a prompt whose new tokens passed the context's end decoded
  // fewer steps without a word (issue 38), and its row was compared with rows that decoded them all.
  for (auto len : o.prompt_lengths)
    MIMIC_CHECK(len >= 1 && len + o.new_tokens - 1 <= s.max_positions, "bench generate: a prompt of ", len, " tokens and --new-tokens ",
                o.new_tokens, " need ", len + o.new_tokens - 1, " positions, beyond ", models::context_words(s),
                len < s.max_positions ? " (at most " + std::to_string(s.max_positions - len + 1) + " new tokens fit after this prompt)"
                                      : std::string(" (the prompt alone fills it)"));
  r.options = o;
  r.threads = torch::get_num_threads();
  r.memory_budget = o.memory_budget > 0 ? o.memory_budget : 0.5 * available_memory_bytes();
  r.bandwidth = copy_bandwidth(o.copy_bytes);

  struct Variant {
    std::string name, kind;
    nlohmann::json options;
  };
  // each kind with its own map unless --feature-map names one (the hybrid's hedgehog_softmax, the linear kind's
  // hedgehog), named in the variant's label; the kind fills its defaults in (no name test here)
  auto variant = [&](const std::string& label, const std::string& kind, nlohmann::json options) {
    if (!o.feature_map.empty()) options["feature_map"] = o.feature_map;
    options = attention::canonical_options(kind, options, s.n_head, s.head_dim);
    return Variant{label + " " + options.value("feature_map", std::string()) + " (untrained)", kind, options};
  };
  std::vector<Variant> variants = {{kinds(*model, s.n_layer) + " (as loaded)", "", {}}, variant("linear", "linear", nlohmann::json::object())};
  if (o.window > 0) variants.push_back(variant(strf("hybrid w=%lld", static_cast<long long>(o.window)), "hybrid", {{"window", o.window}}));
  if (o.window > 0 && o.cache > 0)
    variants.push_back(variant(strf("hybrid w=%lld cache=%lld", static_cast<long long>(o.window), static_cast<long long>(o.cache)), "hybrid",
                               {{"window", o.window}, {"cache", o.cache}}));
  for (const auto& v : variants) r.variants.push_back(v.name);

  auto gen = at::make_generator<at::CPUGeneratorImpl>(o.seed);
  Progress bar("bench generate", static_cast<int64_t>(variants.size() * o.batches.size() * o.prompt_lengths.size()), "run");
  if (!o.progress) bar.disable();
  for (const auto& v : variants) {
    if (!v.kind.empty())
      for (int64_t l = 0; l < s.n_layer; ++l)
        model->set_attention_kernel(l, attention::make_attention_kernel(v.kind, v.options, s.n_head, s.head_dim));
    const double weights = decode_weight_bytes(*model);
    for (auto B : o.batches) {
      decode(*model, at::randint(s.vocab_size, {B, std::min<int64_t>(8, longest)}, gen, torch::kLong), 2);  // warm-up
      for (auto len : o.prompt_lengths) {
        GenerateBenchRow row;
        row.attention = v.name;
        row.batch = B;
        row.prompt = len;
        row.weight_bytes = weights;
        const int64_t steps = o.new_tokens - 1;  // within the context (checked above)
        const double kv = kv_cache_bytes(*model, s, B, len + steps);
        const double need = kv > 0 ? kv * (1.5 + 1.0 / s.n_layer) + kPrefillScoreBytes : 0.0;
        auto ids = at::randint(s.vocab_size, {B, len}, gen, torch::kLong);
        if (need > r.memory_budget) {
          // "in all": the KV cache is a part of it (157 kB beside a 256 MB prefill allowance read as the whole: helper-89)
          row.skipped = strf("needs about %.1f GB in all (a KV cache of %.3g GB, its working copies and the prefill's scores), over "
                             "the memory budget of %.1f GB", need / 1e9, kv / 1e9, r.memory_budget / 1e9);
        } else {
          try {
            auto d = decode(*model, ids, steps);
            row.generated = d.steps + 1;
            row.prefill_tps = static_cast<double>(B * len) / d.prefill_seconds;
            row.step_ms = 1e3 * d.decode_seconds / static_cast<double>(d.steps);
            row.recurrent_tps = static_cast<double>(B * d.steps) / d.decode_seconds;
            row.state_bytes_start = d.state_start;
            row.state_bytes = d.state_end;
            row.bytes_per_step = weights + 0.5 * static_cast<double>(d.state_start + d.state_end);
            row.limit_ms = 1e3 * row.bytes_per_step / r.bandwidth;
            row.limit_share = row.limit_ms / row.step_ms;
            if (o.parallel && B == 1) {
              generate::GenerateOptions g;
              g.max_new_tokens = row.generated;
              g.mode = generate::Mode::Parallel;
              std::vector<int64_t> prompt(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + len);
              auto par = generate::generate(*model, prompt, g);
              row.parallel_tps = par.decode_tokens_per_second();
              row.same_tokens = par.ids == d.row0;
            }
            if (o.profile && B == 1) {
              decode(*model, ids, steps, &row.profile);
              row.profiled = true;
            }
          } catch (const std::exception& e) {
            if (!is_out_of_memory(e)) throw;
            row.skipped = std::string("out of memory: ") + e.what();
            row.skipped = row.skipped.substr(0, row.skipped.find('\n'));
          }
        }
        r.rows.push_back(row);
        bar.advance();
      }
    }
  }
  bar.finish();
  for (auto& row : r.rows)
    for (const auto& ref : r.rows)
      if (ref.attention == r.variants[0] && ref.batch == row.batch && ref.prompt == row.prompt && row.skipped.empty())
        row.ratio = ratio(row.recurrent_tps, ref.recurrent_tps);
  r.targets = decoding_targets(r);
  return r;
}

nlohmann::json to_json(const GenerateBenchResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& x : r.rows) {
    nlohmann::json j = {{"attention", x.attention}, {"batch", x.batch}, {"prompt", x.prompt}, {"measured", x.skipped.empty()}};
    if (!x.skipped.empty()) {
      j["skipped"] = x.skipped;
    } else {
      j.update({{"generated", x.generated},
                {"prefill_tokens_per_second", x.prefill_tps},
                {"step_ms", x.step_ms},
                {"recurrent_tokens_per_second", x.recurrent_tps},
                {"parallel_tokens_per_second", x.parallel_tps},
                {"same_tokens", x.same_tokens},
                {"state_bytes_start", x.state_bytes_start},
                {"state_bytes", x.state_bytes},
                {"weight_bytes", x.weight_bytes},
                {"bytes_per_step", x.bytes_per_step},
                {"limit_ms", x.limit_ms},
                {"limit_share", x.limit_share},
                {"ratio", x.ratio}});
      if (x.profiled) {
        nlohmann::json ops = nlohmann::json::array();
        for (const auto& op : x.profile.ops) ops.push_back({{"name", op.name}, {"self_share", op.share}, {"calls_per_step", op.calls}});
        j["profile"] = {{"outside_operators_share", x.profile.outside_share},
                        {"operators_per_step", x.profile.operators},
                        {"top_level_operators_per_step", x.profile.top_level},
                        {"operators", ops}};
      }
    }
    rows.push_back(j);
  }
  nlohmann::json targets = nlohmann::json::array();
  for (const auto& t : r.targets)
    targets.push_back({{"name", t.name}, {"status", t.status}, {"detail", t.detail}, {"value", t.value}, {"limit", t.limit}});
  return {{"benchmark", "generate"},
          {"model", r.model_name},
          {"threads", r.threads},
          {"new_tokens", r.options.new_tokens},
          {"feature_map", r.options.feature_map.empty() ? nlohmann::json() : nlohmann::json(r.options.feature_map)},  // null: each kind's own
          {"window", r.options.window},
          {"cache", r.options.cache},
          {"seed", r.options.seed},
          {"batches", r.options.batches},
          {"prompt_lengths", r.options.prompt_lengths},
          {"variants", r.variants},
          {"bandwidth_bytes_per_second", r.bandwidth},
          {"bandwidth", "a copy of copy_bytes between two tensors, median of 5, counted as bytes read + written"},
          {"copy_bytes", r.options.copy_bytes},
          {"memory_budget_bytes", r.memory_budget},
          {"limit", "bytes_per_step = weight_bytes + mean of state_bytes_start and state_bytes; limit_ms = bytes_per_step / bandwidth"},
          {"rows", rows},
          {"targets", targets}};
}

std::string format_report(const GenerateBenchResult& r) {
  std::ostringstream os;
  os << strf("decoding benchmark: %s, greedy, %d thread%s, %lld tokens per row\n", r.model_name.c_str(), r.threads,
             r.threads == 1 ? "" : "s", static_cast<long long>(r.options.new_tokens));
  os << strf("copy bandwidth %.2f GB/s (read + written); limit = (weights + state) bytes per step / bandwidth\n\n", r.bandwidth / 1e9);
  // the attention column as wide as its longest name (a hybrid with a cache and a map ran past 34)
  int name_width = 34;
  for (const auto& x : r.rows) name_width = std::max(name_width, static_cast<int>(x.attention.size()));
  os << strf("%-*s %5s %6s %11s %9s %10s %6s %13s %8s %8s %7s %11s %5s\n", name_width, "attention", "batch", "prompt", "prefill t/s", "step ms",
             "tok/s", "ratio", "state bytes", "MB/step", "limit ms", "% limit", "parallel t/s", "same");
  for (const auto& x : r.rows) {
    if (!x.skipped.empty()) {
      os << strf("%-*s %5lld %6lld  skipped: %s\n", name_width, x.attention.c_str(), static_cast<long long>(x.batch), static_cast<long long>(x.prompt),
                 x.skipped.c_str());
      continue;
    }
    const std::string par = x.parallel_tps > 0 ? strf("%.1f", x.parallel_tps) : "-";
    const std::string ratio_text = x.ratio > 0 ? strf("%.2fx", x.ratio) : "-";
    os << strf("%-*s %5lld %6lld %11.0f %9.2f %10.1f %6s %13lld %8.1f %8.2f %6.0f%% %11s %5s\n", name_width, x.attention.c_str(),
               static_cast<long long>(x.batch), static_cast<long long>(x.prompt), x.prefill_tps, x.step_ms, x.recurrent_tps,
               ratio_text.c_str(), static_cast<long long>(x.state_bytes), x.bytes_per_step / 1e6, x.limit_ms, 100 * x.limit_share,
               par.c_str(), x.parallel_tps > 0 ? (x.same_tokens ? "yes" : "NO") : "-");
  }
  for (const auto& x : r.rows) {
    if (!x.profiled) continue;
    os << strf("\nprofile (shares of a decoding step's wall time, under the profiler): %s, batch %lld, prompt %lld\n", x.attention.c_str(),
               static_cast<long long>(x.batch), static_cast<long long>(x.prompt));
    os << strf("  %.1f operator calls per step (%.1f from our code); outside any operator: %.1f%%\n", x.profile.operators,
               x.profile.top_level, 100 * x.profile.outside_share);
    const size_t shown = std::min<size_t>(x.profile.ops.size(), 12);
    for (size_t i = 0; i < shown; ++i)
      os << strf("  %-36s %6.1f%%  %6.1f calls/step\n", x.profile.ops[i].name.c_str(), 100 * x.profile.ops[i].share, x.profile.ops[i].calls);
  }
  os << "\ntargets\n";
  for (const auto& t : r.targets) os << strf("  [%-4s] %s: %s\n", t.status.c_str(), t.name.c_str(), t.detail.c_str());
  return os.str();
}

}  // namespace mimic::bench
