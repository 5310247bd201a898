#include "mimic/attention/delta_kernel.h"

#include <torch/torch.h>

#include <cmath>

#include "mimic/attention/delta_rule.h"
#include "mimic/attention/kinds.h"
#include "mimic/core/error.h"
#include "mimic/core/precision.h"

namespace mimic::attention {

namespace {
// b_α at init: α = sigmoid(5) ≈ 0.993, a memory of a few hundred tokens
constexpr double kAlphaBias = 5.0;
}  // namespace

DeltaAttentionConfig DeltaAttentionConfig::from_json(const nlohmann::json& j) {
  MIMIC_CHECK(j.is_object(), "delta attention options must be a JSON object, got ", j.dump());
  DeltaAttentionConfig c;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const auto& key = it.key();
    // kinds.def's list decides which keys are options (convert reads it to tell another kind's option from a
    // value out of range): a key read below but not listed is refused too
    if (!attention_kind("delta").takes_option(key)) fail_unknown_option("delta", key);
    const auto& val = it.value();
    auto bad = [&](const char* want) { fail("delta attention option '", key, "' must be ", want, ", got ", val.dump()); };
    if (key == "chunk") {
      if (!val.is_number_integer() || val.get<int64_t>() < 1) bad("an integer >= 1");
      c.chunk = val.get<int64_t>();
    } else if (key == "gate") {
      if (!val.is_boolean()) bad("true or false");
      c.gate = val.get<bool>();
    } else if (key == "gates") {
      if (!val.is_boolean()) bad("true or false");
      c.gates = val.get<bool>();
    } else {
      fail_unknown_option("delta", key);
    }
  }
  return c;
}

nlohmann::json DeltaAttentionConfig::to_json() const { return {{"chunk", chunk}, {"gate", gate}, {"gates", gates}}; }

DeltaAttention::DeltaAttention(const DeltaAttentionConfig& config, int64_t n_head, int64_t head_dim) : config_(config) {
  MIMIC_CHECK(n_head >= 1 && head_dim >= 1, "delta attention needs heads and a head dimension, got ", n_head, " x ", head_dim);
  w_beta = register_parameter("w_beta", torch::zeros({n_head, head_dim}));
  b_beta = register_parameter("b_beta", torch::zeros({n_head}));
  if (config_.gate) {
    w_alpha = register_parameter("w_alpha", torch::zeros({n_head, head_dim}));
    b_alpha = register_parameter("b_alpha", torch::full({n_head}, kAlphaBias));
  }
  if (config_.gates) gates = register_module("gates", std::make_shared<HeadGatesImpl>(n_head * head_dim, n_head));
}

std::string DeltaAttention::parameter_group(const std::string& name) const { return name.rfind("gates.", 0) == 0 ? "gates" : "maps"; }

DeltaAttention::Inputs DeltaAttention::inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx) const {
  MIMIC_CHECK(ctx.causal, "attention kind 'delta' is causal (a recurrence over positions): it cannot run a bidirectional (BERT) layer");
  MIMIC_CHECK(q.dim() == 4 && q.size(1) == w_beta.size(0) && q.size(3) == w_beta.size(1), "delta attention of ", w_beta.size(0),
              " heads of dimension ", w_beta.size(1), " got q of shape ", q.sizes());
  namespace F = torch::nn::functional;
  Inputs in;
  in.q = F::normalize(q.to(w_beta.scalar_type()), F::NormalizeFuncOptions().dim(-1).eps(1e-6));
  in.k = F::normalize(k.to(w_beta.scalar_type()), F::NormalizeFuncOptions().dim(-1).eps(1e-6));
  // per-head projections of the normalised key: [B, H, T]
  auto project = [&](const at::Tensor& w, const at::Tensor& b) { return (in.k * w.view({1, w.size(0), 1, w.size(1)})).sum(-1) + b.view({1, -1, 1}); };
  in.beta = torch::sigmoid(project(w_beta, b_beta));
  if (ctx.key_padding_mask.defined())  // a padded key writes nothing
    in.beta = in.beta * ctx.key_padding_mask.to(in.beta.scalar_type()).unsqueeze(1);
  if (config_.gate) in.log_alpha = torch::log_sigmoid(project(w_alpha, b_alpha));
  in.v = v.to(w_beta.scalar_type());
  if (gates) {  // H · softmax over the heads: 1 everywhere at init (see the header)
    auto [log_gq, log_gk] = gates->forward(q.to(w_beta.scalar_type()), k.to(w_beta.scalar_type()));
    const double log_h = std::log(static_cast<double>(w_beta.size(0)));
    in.write = (log_gk + log_h).exp().unsqueeze(-1);
    in.read = (log_gq + log_h).exp().unsqueeze(-1);
    in.v = in.v * in.write;
  }
  return in;
}

// In a bf16 step (autocast) the rule still runs in the parameters' type (AutocastOff, inputs widened): its triangular
// solve and the products a state accumulates over thousands of tokens are where bf16's 8-bit mantissa would cost most,
// and LibTorch has no bf16 triangular solve on the CPU.
at::Tensor DeltaAttention::forward_fast(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx) {
  return DeltaAttention::forward_fast_heads(q, k, v, ctx, at::Tensor());
}

at::Tensor DeltaAttention::forward_fast_heads(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                                              const at::Tensor& heads) {
  AutocastOff fp32;
  // every head's inputs (the gates read them all), then those of the heads asked for
  const auto in = heads.defined() ? inputs(q, k, v, ctx).heads(heads.to(q.device())) : inputs(q, k, v, ctx);
  return in.gated(delta_rule_chunked(in.q, in.k, in.v, in.beta, in.log_alpha, at::Tensor(), config_.chunk).out);
}

at::Tensor DeltaAttention::forward_quadratic(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                                             at::Tensor* weights, at::Tensor* log_weights) {
  AutocastOff fp32;  // as forward_fast
  const auto in = inputs(q, k, v, ctx);
  auto w = delta_rule_weights(in.q, in.k, in.beta, in.log_alpha);
  if (gates) w = in.read * w * in.write.transpose(-1, -2);  // diag(G^Q) W diag(G^K): the weights of the values as given
  if (weights) *weights = w;
  if (log_weights) *log_weights = torch::where(w > 0, w.clamp_min(1e-30).log(), torch::full_like(w, -std::numeric_limits<double>::infinity()));
  return at::matmul(w, v.to(w.scalar_type()));
}

namespace {
struct DeltaCache : KernelCache {
  at::Tensor state;  // [B, H, head_dim, head_dim]
  int64_t bytes() const override { return state.defined() ? static_cast<int64_t>(state.nbytes()) : 0; }
  // the state is replaced, never written in place: a clone may share it
  std::unique_ptr<KernelCache> clone() const override { return std::make_unique<DeltaCache>(*this); }
};
}  // namespace

std::unique_ptr<KernelCache> DeltaAttention::new_cache() const { return std::make_unique<DeltaCache>(); }

DeltaAttention::Inputs DeltaAttention::Inputs::heads(const at::Tensor& index) const {
  auto pick = [&](const at::Tensor& x) { return x.defined() ? x.index_select(1, index) : x; };
  return {pick(q), pick(k), pick(v), pick(beta), pick(log_alpha), pick(read), pick(write)};
}

at::Tensor DeltaAttention::forward_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                                          KernelCache& cache) {
  return forward_cached_heads(q, k, v, ctx, cache, at::Tensor());
}

at::Tensor DeltaAttention::forward_cached_heads(const at::Tensor& q, const at::Tensor& k_in, const at::Tensor& v_in,
                                                const AttentionContext& ctx, KernelCache& cache, const at::Tensor& heads) {
  auto& c = cached_call<DeltaCache>(cache, ctx, kind());
  const auto k = expand_kv_heads(k_in, q.size(1)), v = expand_kv_heads(v_in, q.size(1));  // a state per query head
  AutocastOff fp32;  // as forward_fast
  const auto in = heads.defined() ? inputs(q, k, v, ctx).heads(heads.to(q.device())) : inputs(q, k, v, ctx);  // as forward_fast_heads
  at::Tensor out;
  if (q.size(2) == 1) {  // one token: the recurrent step
    if (!c.state.defined()) c.state = torch::zeros({in.q.size(0), in.q.size(1), in.q.size(3), in.v.size(3)}, in.v.options());
    out = delta_rule_step(in.q.select(2, 0), in.k.select(2, 0), in.v.select(2, 0), in.beta.select(2, 0),
                          in.log_alpha.defined() ? in.log_alpha.select(2, 0) : at::Tensor(), c.state)
              .unsqueeze(2);
  } else {  // a prompt: the chunked form from the state so far
    auto r = delta_rule_chunked(in.q, in.k, in.v, in.beta, in.log_alpha, c.state, config_.chunk);
    out = r.out;
    c.state = r.state;
  }
  out = in.gated(out);
  c.position += q.size(2);
  return out;
}

AttentionKernel make_delta_kernel(const nlohmann::json& options, int64_t n_head, int64_t head_dim) {
  return std::make_shared<DeltaAttention>(DeltaAttentionConfig::from_json(options), n_head, head_dim);
}

}  // namespace mimic::attention
