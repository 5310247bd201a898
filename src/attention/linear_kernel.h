// The linear-attention kernel a converted layer runs: a feature map (feature_map.h), optional SLA head gates,
// optional per-head decay, and the linear-attention op (linear_attention.h) in its fast form.
//
// Softmax Linear Attention (SLA, arXiv 2602.01744, Eq. 3–6): G^Q = softmax_h(Q W_GQ), G^K = softmax_h(K W_GK), with Q, K the layer's full
// query/key projections (all heads side by side) and W ∈ R^{d_model×H}. The gates scale each head's read
// (query) and write (key) strength: φ̃(q_h) = G^Q_h φ(q_h), φ̃(k_h) = G^K_h φ(k_h) — folded into the features,
// so every form (quadratic, chunked, bidirectional, recurrent) runs gated attention unchanged. Under row
// normalisation G^Q cancels (a per-query constant); G^K does not. W = 0 at init: uniform gates 1/H.
// With decay, γ_h = 1 − 2^(−5−h) (RetNet, used by Softmax-RetNet Eq. 10) or an explicit list.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "mimic/attention/attention.h"
#include "mimic/attention/distillable.h"
#include "mimic/attention/feature_map.h"
#include "mimic/attention/linear_attention.h"

namespace mimic::attention {

struct LinearAttentionConfig {
  std::string feature_map = "hedgehog";
  nlohmann::json map_options = nlohmann::json::object();
  Norm norm = Norm::Row;
  double eps = 1e-6;
  int64_t chunk = 64;
  bool gates = false;
  std::vector<double> decay;  // empty = none; else one γ per head
  // Keys: feature_map, map_options, norm, eps, chunk, gates, decay (false | true = RetNet γ_h | [γ_1, ...]).
  // Unknown keys and bad values are errors.
  static LinearAttentionConfig from_json(const nlohmann::json& j, int64_t n_head);
  nlohmann::json to_json() const;
};

// RetNet's per-head decay: γ_h = 1 − 2^(−5−h), h = 0..H−1.
std::vector<double> retnet_decay(int64_t n_head);

class HeadGatesImpl : public torch::nn::Module {
 public:
  HeadGatesImpl(int64_t d_model, int64_t n_head);
  // q, k: [B, H, T, d]; their heads side by side are the layer's Q and K. Returns log G^Q, log G^K: [B, H, T].
  // query_trains false: G^Q's value as it is, with a zero gradient to W_GQ (where it cancels but for ε, AdamW scaled
  // that remainder up to steps as large as W_GK's: helper-99's probe of 2026-12-06). Zero, not none: W_GQ stays a
  // trainable tensor, and the overlapped all-reduce waits for every trainable tensor's gradient (the review of 2026-12-06).
  std::pair<at::Tensor, at::Tensor> forward(const at::Tensor& q, const at::Tensor& k, bool query_trains = true);
  at::Tensor w_q, w_k;  // [d_model, H]
};

class LinearAttention : public DistillableKernel {
 public:
  LinearAttention(const LinearAttentionConfig& config, int64_t n_head, int64_t head_dim);

  std::string kind() const override { return "linear"; }
  nlohmann::json config_json() const override { return config_.to_json(); }

  // The features the op consumes: the map on √scale·q and √scale·k, gates folded in. offset: absolute position.
  Features features(const at::Tensor& q, const at::Tensor& k, double scale, int64_t offset);
  // Keys [B, H, n, d] → their features as features() computes them, when they depend on the key alone (no gates,
  // whose key gate reads every head of a position; a map of_key_alone); otherwise empty. Calls no begin_pass.
  std::function<at::Tensor(const at::Tensor&)> key_features(double scale);
  LinearOptions options(bool causal) const;
  // Causal continuation for generation: q, k, v [B, H, T, d] are the tokens after state.position; updates state.
  // `heads` (long, sorted, distinct; undefined: every head): the heads whose rows are returned and whose state is
  // kept (the features are computed on every head, as the gates read them all).
  at::Tensor forward_with_state(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale, LinearState& state,
                                const at::Tensor& heads = at::Tensor());
  // Incremental decoding: the cache holds the LinearState (constant size); forward_cached runs
  // forward_with_state (a recurrent step for one token, the chunked form for a prompt).
  std::unique_ptr<KernelCache> new_cache() const override;
  at::Tensor forward_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                            KernelCache& cache) override;
  at::Tensor forward_cached_heads(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                                  KernelCache& cache, const at::Tensor& heads) override;
  // forward_fast's rows of `heads`: the features of every head, the attention of those heads alone
  at::Tensor forward_fast_heads(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                                const at::Tensor& heads) override;
  // The quadratic reference with its weights [B, H, T, T] (distillation and analysis).
  at::Tensor forward_quadratic(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                               at::Tensor* weights, at::Tensor* log_weights = nullptr) override;
  // Row / no normalisation: the weights do not depend on v, so one column of it stands in (the output is then a
  // [T, T] × [T, 2] product instead of [T, T] × [T, d + 1]); L2 / RMS: forward_quadratic itself.
  void weights_quadratic(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                         at::Tensor* weights, at::Tensor* log_weights) override;
  bool weights_may_be_negative() const override;  // the map's features may be negative (Sign::Any)
  std::string parameter_group(const std::string& name) const override;  // "gates" for gates.*, else "maps"
  std::string feature_map() const override { return config_.feature_map; }

  const LinearAttentionConfig& config() const { return config_; }
  // Whether G^Q cancels in this kernel's output (up to ε): under row normalisation, and under L2 and RMS, which divide
  // each query's output by its own norm — then W_GQ's gradient is zero (HeadGatesImpl::forward). Only norm=none, SLA's
  // own form, keeps it; the hybrid, whose one denominator also sums the window's softmax terms, overrides this.
  virtual bool query_gate_cancels() const { return config_.norm != Norm::None; }
  FeatureMap map;
  std::shared_ptr<HeadGatesImpl> gates;  // null without SLA gates

  // The per-head decay is a constant, not a buffer (converted models saved before it existed load unchanged):
  // moving the module moves it too, in float64.
  using torch::nn::Module::to;
  void to(torch::Device device, torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Device device, bool non_blocking = false) override;

 protected:
  // The fast form: chunked when ctx.causal, bidirectional otherwise.
  at::Tensor forward_fast(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx) override;

 private:
  LinearAttentionConfig config_;
  at::Tensor decay_;
};

// Built by name through the registry of attention kinds (kinds.h: make_attention_kernel("linear", options, ...)).

}  // namespace mimic::attention
