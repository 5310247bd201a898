// The `delta` attention kind (issue 34): the gated delta rule (delta_rule.h) as a student a softmax layer converts to.
// Per head, from the layer's own q, k, v (the teacher's projections, so conversion starts from what the teacher
// computes): q and k L2-normalised (DeltaNet), the write strength β_t = sigmoid(k̂_t·w_β + b_β) and, with the gate,
// the decay log α_t = log sigmoid(k̂_t·w_α + b_α) — small per-head projections of the normalised key; then
// o_t = S_tᵀ q̂_t with S_t = α_t (I − β_t k̂_t k̂_tᵀ) S_{t−1} + β_t k̂_t v_tᵀ. The state is [head_dim, head_dim] per head
// whatever the context: constant-memory decoding. At init w = 0: β = 1/2 everywhere and α = sigmoid(5) ≈ 0.993
// (a memory of a few hundred tokens).
//
// Causal only (a recurrence over positions): a bidirectional layer (BERT) is refused. Padded keys write nothing
// (β = 0 there). Its effective weights (delta_rule_weights) may be negative — a later write under a similar key
// subtracts what an earlier one stored —, so cross-entropy distillation against softmax's weights is undefined for
// it: distill it with `--loss mse` (the per-head outputs). The forms: chunked (forward, training), the effective
// weights (forward_quadratic: record, report, analysis) and the recurrent step (decoding), all tested against the
// token-by-token recurrence.
//
// SLA head gates (option `gates`; the SLA seed's Softmax-GatedDeltaNet, shared/papers/000_…, Eq. 14–16): per token,
// G^K = H · softmax_h(K W_GK) scales the value a head writes and G^Q = H · softmax_h(Q W_GQ) the output it reads, with
// K, Q the layer's key and query projections (all heads side by side; HeadGatesImpl, linear_kernel.h). The rule is
// linear in v and o is linear in S, so every form runs the ungated rule on G^K·v and scales its output by G^Q; the
// effective weights are diag(G^Q) W diag(G^K). Why the factor H the paper does not have: the rule has no normaliser,
// so softmax's 1/H at init (W = 0) would shrink every head's output H² times; with it a converted layer starts
// at the ungated rule, and the gates only move heads against each other.
#pragma once
#include <ATen/core/Tensor.h>

#include <nlohmann/json.hpp>

#include "mimic/attention/distillable.h"
#include "mimic/attention/linear_kernel.h"

namespace mimic::attention {

struct DeltaAttentionConfig {
  int64_t chunk = 64;  // tokens per chunk of the WY form
  bool gate = true;    // the decay α (Gated DeltaNet); false: DeltaNet's α = 1
  bool gates = false;  // SLA head gates on the written values and the read outputs (Softmax-GatedDeltaNet)
  // Keys: chunk, gate, gates. Unknown keys and bad values are errors.
  static DeltaAttentionConfig from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

class DeltaAttention : public DistillableKernel {
 public:
  DeltaAttention(const DeltaAttentionConfig& config, int64_t n_head, int64_t head_dim);

  std::string kind() const override { return "delta"; }
  nlohmann::json config_json() const override { return config_.to_json(); }
  std::unique_ptr<KernelCache> new_cache() const override;
  at::Tensor forward_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                            KernelCache& cache) override;
  at::Tensor forward_cached_heads(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                                  KernelCache& cache, const at::Tensor& heads) override;
  // forward_fast's rows of `heads`: the rule runs on those heads alone (the gates read every head)
  at::Tensor forward_fast_heads(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                                const at::Tensor& heads) override;
  // The effective weights [B, H, T, T] and weights · v; log_weights: log of the positive weights, −∞ elsewhere.
  at::Tensor forward_quadratic(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                               at::Tensor* weights, at::Tensor* log_weights = nullptr) override;
  bool weights_may_be_negative() const override { return true; }
  bool weights_are_distribution() const override { return false; }
  std::string parameter_group(const std::string& name) const override;  // "gates" for gates.*, else "maps" (β, α)
  std::string feature_map() const override { return "identity"; }                     // q̂, k̂ enter as they are

  at::Tensor w_beta, b_beta;    // [H, head_dim], [H]
  at::Tensor w_alpha, b_alpha;  // with the gate
  std::shared_ptr<HeadGatesImpl> gates;  // with SLA head gates

 protected:
  at::Tensor forward_fast(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx) override;

 private:
  struct Inputs {
    at::Tensor q, k, v, beta, log_alpha;
    at::Tensor read, write;  // G^Q, G^K [B, H, T, 1] with gates, else undefined; v is G^K·v already
    at::Tensor gated(const at::Tensor& out) const { return read.defined() ? out * read : out; }
    Inputs heads(const at::Tensor& index) const;  // the rows of the heads `index` (on the inputs' device)
  };
  Inputs inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx) const;
  DeltaAttentionConfig config_;
};

}  // namespace mimic::attention
