#include "mimic/generate/generate.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "mimic/core/error.h"
#include "mimic/core/runtime.h"
#include "mimic/models/family.h"
#include "mimic/models/model.h"

namespace mimic::generate {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
}  // namespace

Mode parse_mode(const std::string& name) {
  if (name == "recurrent") return Mode::Recurrent;
  if (name == "parallel") return Mode::Parallel;
  fail("unknown generation mode '", name, "' (recurrent or parallel)");
}

std::string mode_name(Mode mode) { return mode == Mode::Recurrent ? "recurrent" : "parallel"; }

Sampler::Sampler(double temperature, int64_t top_k, uint64_t seed) : temperature_(temperature), top_k_(top_k), rng_(seed) {
  MIMIC_CHECK(temperature >= 0 && std::isfinite(temperature), "temperature must be >= 0, got ", temperature);
  MIMIC_CHECK(top_k >= 0, "top-k must be >= 0 (0 = no cut), got ", top_k);
}

int64_t Sampler::next(const at::Tensor& logits) {
  MIMIC_CHECK(logits.dim() == 1 && logits.numel() > 0, "the sampler takes one row of logits");
  if (temperature_ == 0.0) {  // the first of equal maxima; read as float: a batch's rows cost no conversion
    auto f = host(logits.detach().to(torch::kFloat));
    const float* x = f.data_ptr<float>();
    return std::max_element(x, x + f.numel()) - x;
  }
  auto l = host(logits.detach().to(torch::kDouble));
  const double* x = l.data_ptr<double>();
  const int64_t v = l.numel();
  // the candidates: every id, or the top_k largest logits (ties broken by the lower id)
  std::vector<int64_t> ids(static_cast<size_t>(v));
  std::iota(ids.begin(), ids.end(), 0);
  const int64_t k = top_k_ > 0 ? std::min(top_k_, v) : v;
  auto larger = [&](int64_t a, int64_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); };
  if (k < v) {
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), larger);
    ids.resize(static_cast<size_t>(k));
  }
  double top = -INFINITY;
  for (auto i : ids) top = std::max(top, x[i]);
  std::vector<double> w(ids.size());
  double total = 0;
  for (size_t i = 0; i < ids.size(); ++i) total += (w[i] = std::exp((x[ids[i]] - top) / temperature_));
  // a uniform draw in [0, total) from 53 random bits: the same on every platform
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * total;
  double acc = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    acc += w[i];
    if (u < acc) return ids[i];
  }
  return ids.back();
}

double GenerateResult::decode_tokens_per_second() const {
  const auto steps = static_cast<double>(ids.size() > 1 ? ids.size() - 1 : 0);
  return decode_seconds > 0 ? steps / decode_seconds : 0.0;
}

double BatchGenerateResult::decode_tokens_per_second() const {
  double steps = 0;
  for (const auto& r : rows) steps += r.ids.size() > 1 ? static_cast<double>(r.ids.size() - 1) : 0.0;
  return decode_seconds > 0 ? steps / decode_seconds : 0.0;
}

BatchGenerateResult generate_batch(models::Model& model, const std::vector<std::vector<int64_t>>& prompts, const GenerateOptions& opt) {
  const auto s = model.summary();
  MIMIC_CHECK(s.family->causal && s.head == "lm", "generation needs a causal LM (", models::causal_family_names(), "); this is a ", s.model_type, " model");
  MIMIC_CHECK(!prompts.empty(), "generation needs at least one prompt");
  const auto len = static_cast<int64_t>(prompts[0].size());
  MIMIC_CHECK(len > 0, "the prompt is empty: generation needs at least one token");
  for (const auto& p : prompts)
    MIMIC_CHECK(static_cast<int64_t>(p.size()) == len, "batched prompts must have one length (no padding), got ", len, " and ", p.size(),
                " tokens");
  const int64_t ctx = s.max_positions;
  // what to do said too (the probe of 2026-12-02): mimic cuts no prompt, since which part to keep is the user's to decide
  MIMIC_CHECK(len <= ctx, "the prompt has ", len, " tokens, more than ", models::context_words(s), ": give at most ", ctx,
              " tokens, fewer to leave room for new ones (mimic cuts none: which part to keep is yours to choose)");
  MIMIC_CHECK(opt.max_new_tokens >= 0, "max-new-tokens must be >= 0, got ", opt.max_new_tokens);
  const auto B = static_cast<int64_t>(prompts.size());
  std::vector<Sampler> samplers;
  for (int64_t b = 0; b < B; ++b) samplers.emplace_back(opt.temperature, opt.top_k, opt.seed + static_cast<uint64_t>(b));
  BatchGenerateResult r;
  r.prompt_tokens = len;
  r.rows.resize(static_cast<size_t>(B));
  for (auto& row : r.rows) {
    row.prompt_tokens = len;
    row.stop = "new_tokens";
  }
  if (opt.max_new_tokens == 0) return r;

  torch::NoGradGuard no_grad;
  std::vector<int64_t> flat;
  for (const auto& p : prompts) flat.insert(flat.end(), p.begin(), p.end());
  const auto device = models::device_of(model);
  auto seq = torch::tensor(flat, torch::kLong).view({B, len}).to(device);  // parallel mode: the whole sequences so far
  std::unique_ptr<models::DecodeState> state;
  auto last_logits = [&](const at::Tensor& ids) {  // [B, V]
    auto logits = opt.mode == Mode::Recurrent ? model.forward_step(ids, *state) : model.forward(models::ForwardInputs{ids, {}, {}, {}}).logits;
    return logits.select(1, -1);
  };
  auto t0 = Clock::now();
  if (opt.mode == Mode::Recurrent) state = model.new_decode_state();
  auto logits = last_logits(seq);
  r.prefill_seconds = since(t0);

  auto t1 = Clock::now();
  std::vector<bool> done(static_cast<size_t>(B), false);
  std::vector<int64_t> next(static_cast<size_t>(B));
  int64_t generated = 0;
  while (true) {
    for (int64_t b = 0; b < B; ++b) {
      auto& row = r.rows[static_cast<size_t>(b)];
      if (done[b]) continue;  // fed its last token again
      next[b] = samplers[b].next(logits[b]);
      row.ids.push_back(next[b]);
      if (B == 1 && opt.on_token) opt.on_token(next[b]);
      if (std::find(opt.eos_ids.begin(), opt.eos_ids.end(), next[b]) != opt.eos_ids.end()) {
        row.stop = "eos";
        done[b] = true;
      }
    }
    ++generated;
    if (std::all_of(done.begin(), done.end(), [](bool d) { return d; }) || generated == opt.max_new_tokens) break;
    if (len + generated > ctx) {  // the next token to feed would sit at position ctx
      for (int64_t b = 0; b < B; ++b)
        if (!done[b]) r.rows[b].stop = "context";
      break;
    }
    auto step = torch::tensor(next, torch::kLong).view({B, 1}).to(device);
    if (opt.mode == Mode::Parallel) seq = torch::cat({seq, step}, 1);
    logits = last_logits(opt.mode == Mode::Recurrent ? step : seq);
  }
  r.decode_seconds = since(t1);
  if (state) r.state_bytes = state->bytes();
  for (auto& row : r.rows) {
    row.prefill_seconds = r.prefill_seconds;
    row.decode_seconds = r.decode_seconds;
    row.state_bytes = r.state_bytes;
  }
  return r;
}

GenerateResult generate(models::Model& model, const std::vector<int64_t>& prompt, const GenerateOptions& opt) {
  return generate_batch(model, {prompt}, opt).rows[0];
}

std::vector<int64_t> greedy_continue(models::Model& model, models::DecodeState& state, const at::Tensor& last_logits, int64_t n) {
  Sampler greedy(0.0, 0, 0);
  const int64_t ctx = model.summary().max_positions;
  std::vector<int64_t> out;
  auto logits = last_logits;
  const auto device = models::device_of(model);
  while (static_cast<int64_t>(out.size()) < n) {
    out.push_back(greedy.next(logits));
    if (static_cast<int64_t>(out.size()) == n || state.position() >= ctx) break;
    logits = model.forward_step(models::token_row({out.back()}, device), state)[0][-1];
  }
  return out;
}

}  // namespace mimic::generate
