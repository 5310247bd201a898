#include "mimic/bench/generate_bench.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cstdio>
#include <sstream>

#include "mimic/attention/kinds.h"
#include "mimic/core/error.h"
#include "mimic/core/progress.h"
#include "mimic/generate/generate.h"
#include "mimic/models/family.h"
#include "mimic/models/model.h"

namespace mimic::bench {

namespace {
std::string kinds(const models::Model& m, int64_t layers) {
  std::string first = m.attention_kernel(0)->kind();
  for (int64_t i = 1; i < layers; ++i)
    if (m.attention_kernel(i)->kind() != first) return "mixed";
  return first;
}
}  // namespace

GenerateBenchResult run_generate_bench(const GenerateBenchOptions& o) {
  MIMIC_CHECK(o.new_tokens >= 2, "bench generate: --new-tokens must be >= 2");
  auto model = models::load_model(o.model);
  const auto s = model->summary();
  MIMIC_CHECK(s.family->causal, "bench generate needs a causal LM (GPT-2); ", o.model, " is a ", s.model_type, " model");
  for (auto len : o.prompt_lengths)
    MIMIC_CHECK(len >= 1 && len < s.max_positions, "bench generate: prompt length ", len, " must be in 1 .. ", s.max_positions - 1);
  GenerateBenchResult r;
  r.options = o;
  r.threads = torch::get_num_threads();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(o.seed);
  Progress bar("bench generate", 2 * static_cast<int64_t>(o.prompt_lengths.size()), "run");
  if (!o.progress) bar.disable();
  for (int variant = 0; variant < 2; ++variant) {
    std::string name = kinds(*model, s.n_layer) + " (as loaded)";
    if (variant == 1) {
      for (int64_t l = 0; l < s.n_layer; ++l)
        model->set_attention_kernel(l, attention::make_attention_kernel("linear", {{"feature_map", o.feature_map}}, s.n_head,
                                                                        s.d_model / s.n_head));
      name = "linear " + o.feature_map + " (untrained)";
    }
    for (auto len : o.prompt_lengths) {
      auto t = at::randint(s.vocab_size, {len}, gen, torch::kLong);
      std::vector<int64_t> prompt(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + len);
      generate::GenerateOptions g;
      g.max_new_tokens = o.new_tokens;
      generate::generate(*model, std::vector<int64_t>(prompt.begin(), prompt.begin() + std::min<int64_t>(len, 8)), g);  // warm-up
      auto rec = generate::generate(*model, prompt, g);
      GenerateBenchRow row;
      row.attention = name;
      row.prompt = len;
      row.generated = static_cast<int64_t>(rec.ids.size());
      row.prefill_tps = rec.prefill_tokens_per_second();
      row.recurrent_tps = rec.decode_tokens_per_second();
      row.state_bytes = rec.state_bytes;
      if (o.parallel) {
        g.mode = generate::Mode::Parallel;
        auto par = generate::generate(*model, prompt, g);
        row.parallel_tps = par.decode_tokens_per_second();
        row.same_tokens = par.ids == rec.ids;
      }
      r.rows.push_back(row);
      bar.advance();
    }
  }
  bar.finish();
  return r;
}

nlohmann::json to_json(const GenerateBenchResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& x : r.rows)
    rows.push_back({{"attention", x.attention},         {"prompt", x.prompt},
                    {"generated", x.generated},         {"prefill_tokens_per_second", x.prefill_tps},
                    {"recurrent_tokens_per_second", x.recurrent_tps}, {"parallel_tokens_per_second", x.parallel_tps},
                    {"state_bytes", x.state_bytes},     {"same_tokens", x.same_tokens}});
  return {{"model", r.options.model}, {"threads", r.threads}, {"new_tokens", r.options.new_tokens},
          {"feature_map", r.options.feature_map}, {"seed", r.options.seed}, {"rows", rows}};
}

std::string format_report(const GenerateBenchResult& r) {
  std::ostringstream os;
  char line[256];
  std::snprintf(line, sizeof line, "generation benchmark: %s, greedy, batch 1, %d thread%s, %lld new tokens per run\n",
                r.options.model.c_str(), r.threads, r.threads == 1 ? "" : "s", static_cast<long long>(r.options.new_tokens));
  os << line;
  std::snprintf(line, sizeof line, "%-28s %7s %12s %14s %14s %9s %12s %6s\n", "attention", "prompt", "prefill t/s", "recurrent t/s",
                "parallel t/s", "speed-up", "state bytes", "same");
  os << line;
  for (const auto& x : r.rows) {
    char par[32] = "-", speedup[32] = "-";
    if (x.parallel_tps > 0) {
      std::snprintf(par, sizeof par, "%.1f", x.parallel_tps);
      std::snprintf(speedup, sizeof speedup, "%.1fx", x.recurrent_tps / x.parallel_tps);
    }
    std::snprintf(line, sizeof line, "%-28s %7lld %12.0f %14.1f %14s %9s %12lld %6s\n", x.attention.c_str(),
                  static_cast<long long>(x.prompt), x.prefill_tps, x.recurrent_tps, par, speedup, static_cast<long long>(x.state_bytes),
                  r.options.parallel ? (x.same_tokens ? "yes" : "NO") : "-");
    os << line;
  }
  return os.str();
}

}  // namespace mimic::bench
