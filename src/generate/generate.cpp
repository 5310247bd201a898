#include "mimic/generate/generate.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "mimic/core/error.h"
#include "mimic/models/family.h"
#include "mimic/models/model.h"

namespace mimic::generate {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
at::Tensor row(const std::vector<int64_t>& ids) { return torch::tensor(ids, torch::kLong).unsqueeze(0); }
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
  auto l = logits.detach().to(torch::kDouble).contiguous();
  MIMIC_CHECK(l.dim() == 1 && l.numel() > 0, "the sampler takes one row of logits");
  const double* x = l.data_ptr<double>();
  const int64_t v = l.numel();
  if (temperature_ == 0.0) return std::max_element(x, x + v) - x;  // the first of equal maxima
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

GenerateResult generate(models::Model& model, const std::vector<int64_t>& prompt, const GenerateOptions& opt) {
  const auto s = model.summary();
  MIMIC_CHECK(s.family->causal && s.head == "lm", "generation needs a causal LM (GPT-2); this is a ", s.model_type, " model");
  MIMIC_CHECK(!prompt.empty(), "the prompt is empty: generation needs at least one token");
  const int64_t ctx = s.max_positions;
  MIMIC_CHECK(static_cast<int64_t>(prompt.size()) <= ctx, "the prompt has ", prompt.size(), " tokens, more than the model's context of ",
              ctx);
  MIMIC_CHECK(opt.max_new_tokens >= 0, "max-new-tokens must be >= 0, got ", opt.max_new_tokens);
  Sampler sampler(opt.temperature, opt.top_k, opt.seed);
  GenerateResult r;
  r.prompt_tokens = static_cast<int64_t>(prompt.size());
  r.stop = "max_new_tokens";
  if (opt.max_new_tokens == 0) return r;

  torch::NoGradGuard no_grad;
  std::vector<int64_t> seq = prompt;
  std::unique_ptr<models::DecodeState> state;
  auto last_logits = [&](const at::Tensor& ids) {
    auto logits = opt.mode == Mode::Recurrent ? model.forward_step(ids, *state) : model.forward(models::ForwardInputs{ids, {}, {}, {}}).logits;
    return logits[0][-1];
  };
  auto t0 = Clock::now();
  if (opt.mode == Mode::Recurrent) state = model.new_decode_state();
  auto logits = last_logits(row(prompt));
  r.prefill_seconds = since(t0);

  auto t1 = Clock::now();
  while (true) {
    const int64_t next = sampler.next(logits);
    r.ids.push_back(next);
    seq.push_back(next);
    if (opt.on_token) opt.on_token(next);
    if (next == opt.eos_id) {
      r.stop = "eos";
      break;
    }
    if (static_cast<int64_t>(r.ids.size()) == opt.max_new_tokens) break;
    if (static_cast<int64_t>(seq.size()) > ctx) {  // the next token to feed would sit at position ctx
      r.stop = "context";
      break;
    }
    logits = last_logits(opt.mode == Mode::Recurrent ? row({next}) : row(seq));
  }
  r.decode_seconds = since(t1);
  if (state) r.state_bytes = state->bytes();
  return r;
}

std::vector<int64_t> greedy_continue(models::Model& model, models::DecodeState& state, const at::Tensor& last_logits, int64_t n) {
  Sampler greedy(0.0, 0, 0);
  const int64_t ctx = model.summary().max_positions;
  std::vector<int64_t> out;
  auto logits = last_logits;
  while (static_cast<int64_t>(out.size()) < n) {
    out.push_back(greedy.next(logits));
    if (static_cast<int64_t>(out.size()) == n || state.position() >= ctx) break;
    logits = model.forward_step(row({out.back()}), state)[0][-1];
  }
  return out;
}

}  // namespace mimic::generate
