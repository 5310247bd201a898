// The hybrid kernel a converted layer runs (LoLCATs' form, hybrid_attention.h): softmax over a sliding window
// of w keys plus linear attention over every other key, under one denominator. It is linear attention with a
// window — the feature map, SLA gates and chunk of LinearAttention, under the same parameter names (maps
// distilled for the linear kind load into it) — plus a per-head window weight σ_h = sigmoid(window_logit_h)
// when learned. Decoding keeps the last w keys and values and the linear state: constant memory in the context.
// With `cache` = λ > 0 it is LoLA's form (sparse_cache.h): λ more keys kept exact, chosen by the state's recall
// error; the whole-sequence forward then runs the chunked form (hybrid_cache_chunked), distillation's weights the
// quadratic form, and decoding (prompt included) the recurrent step.
#pragma once
#include <ATen/core/Tensor.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "mimic/attention/hybrid_attention.h"
#include "mimic/attention/linear_kernel.h"

namespace mimic::attention {

// The largest window w a hybrid layer may have (its "window" option); the benches' --window take the same bound, so
// that they measure only windows a model can have.
inline constexpr int64_t kMaxHybridWindow = 65536;

struct HybridConfig {
  int64_t window = 64;
  bool learned = true;         // σ_h trained (mix "learned") or fixed at window_weight (mix "fixed")
  double window_weight = 0.5;  // σ at initialisation (learned) or always (fixed), in (0, 1)
  bool affine = false;         // λ_h = 1 − σ_h (LoLCATs' affine_attention_factors); else λ_h = 1
  bool exact = false;          // window terms σ exp(s) ("window_scale": "exact") or LoLCATs' σ exp(s − M_i) ("max")
  int64_t cache = 0;           // LoLA's sparse cache of λ keys beside the window (sparse_cache.h); 0: none
  int64_t cache_every = 1;     // the whole-sequence forms' selection interval (decoding selects at every token)
  // The heads that carry the cache (sorted, distinct; empty: every head). The others are the plain hybrid (window
  // and state): a cache where the measured recall lives (convert --cache-heads) and none elsewhere.
  std::vector<int64_t> cache_heads;
  // The linear part's options, its feature map defaulting to kDefaultFeatureMap, not the linear kind's hedgehog: the
  // window's softmax terms and the features share one denominator, and an unnormalised map's features outgrow the
  // window's terms (gpt2-mini distilled at w 16: mean KL 1.269 with hedgehog, 0.224 with hedgehog_softmax; docs/attention.md)
  static constexpr const char* kDefaultFeatureMap = "hedgehog_softmax";
  LinearAttentionConfig linear;
  // Keys: window (or w), mix (learned | fixed), window_weight, affine, window_scale (max | exact), cache, cache_every,
  // cache_heads (written only with a cache, so that a model without one keeps its options' digest; cache_heads only
  // when it is not every head), and the linear kind's feature_map (default kDefaultFeatureMap), map_options,
  // eps, chunk, gates (norm only "row", decay only false: the shared denominator is the row normaliser, and a
  // decay would need a definition across the window's edge). Unknown keys and bad values are errors.
  static HybridConfig from_json(const nlohmann::json& j, int64_t n_head);
  nlohmann::json to_json() const;
};

class HybridAttention : public LinearAttention {
 public:
  HybridAttention(const HybridConfig& config, int64_t n_head, int64_t head_dim);
  std::string kind() const override { return "hybrid"; }
  nlohmann::json config_json() const override { return hybrid_.to_json(); }
  // G^Q scales the linear part only, not the window's softmax terms beside it in the one denominator
  bool query_gate_cancels() const override { return false; }
  // Decoding: the cache is a HybridState (ring of w keys + linear state); a prompt runs the chunked form, a token
  // without gradients the recurrent step (hybrid_step).
  std::unique_ptr<KernelCache> new_cache() const override;
  at::Tensor forward_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                            KernelCache& cache) override;
  at::Tensor forward_cached_heads(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                                  KernelCache& cache, const at::Tensor& heads) override;
  at::Tensor forward_quadratic(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                               at::Tensor* weights, at::Tensor* log_weights = nullptr) override;
  std::string parameter_group(const std::string& name) const override;  // window_logit trains with the maps
  // A window (and a sparse cache) beyond the context hold every key a query can see at the context: both sized by it
  void fit_context(int64_t positions) override { context_ = positions; }

  // forward_fast's rows of `heads` (each group of heads below cut to them): the features of every head, the
  // attention of those heads alone
  at::Tensor forward_fast_heads(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                                const at::Tensor& heads) override;

  HybridOptions hybrid_options(bool causal) const;
  // With cache_heads a strict subset of the heads, the layer runs as two groups of heads, each through the hybrid
  // forms on its own heads (the features computed once for all): the cache heads with the cache, the others without.
  // Otherwise one group, every head. A call on some heads (`only`: long, sorted, distinct; undefined: every head)
  // cuts each group to those of its heads it lists, a group with none of them left out; a mimic::Error for a list
  // that is not sorted, distinct heads of the layer.
  struct HeadPart {
    at::Tensor index;  // long, CPU: the group's heads
    bool with_cache;   // LoLA's sparse cache runs in these heads
    bool first;        // the cache heads (or every head): decoding's HybridCache::state; the others' is `plain`
  };
  std::vector<HeadPart> head_parts(const at::Tensor& only) const;
  // What puts the rows of the parts' outputs, concatenated, back in head order (long, CPU); `every_head`: the parts of
  // head_parts(undefined), whose order is computed once.
  at::Tensor parts_order(const std::vector<HeadPart>& parts, bool every_head) const;
  struct HeadGroup {
    at::Tensor index;  // long, the group's heads, on the inputs' device
    HybridOptions options;
  };
  // The group of heads `index` (long, CPU) with the options cut to them, the cache dropped when !with_cache.
  HeadGroup head_group(const at::Tensor& index, const HybridOptions& all, bool with_cache, const c10::Device& device) const;
  at::Tensor window_weight() const;  // σ_h, [H]
  const HybridConfig& hybrid_config() const { return hybrid_; }
  at::Tensor window_logit;  // [H], learned mix only

  // A fixed window weight is a constant (no parameter): moving the module moves it too.
  using LinearAttention::to;
  void to(torch::Device device, torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Device device, bool non_blocking = false) override;

 protected:
  at::Tensor forward_fast(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx) override;

 private:
  HybridConfig hybrid_;
  int64_t n_head_;
  int64_t context_ = 0;  // fit_context's (0: none given): caps the window and the cache hybrid_options passes on
  at::Tensor fixed_weight_;  // [n_head]: the window weight when it is not learned
  // cache_heads a strict subset: the two groups' heads; undefined otherwise
  at::Tensor cache_index_, plain_index_;
  at::Tensor split_order_;  // argsort of cat(cache_index_, plain_index_): the split layer's rows back in head order
  bool split() const { return cache_index_.defined(); }
};

}  // namespace mimic::attention
