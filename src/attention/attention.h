// The attention interface of mimic's models. Each layer's attention block computes its projections and
// hands per-head q, k, v to an AttentionKernel; the kernel is the swappable part (softmax by default,
// linear attention after conversion). A capture, when set, receives exactly what the kernel consumed and
// produced — the tensors the `record` stage stores.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mimic::attention {

struct AttentionCapture {
  bool want_weights = false;  // also store the attention weights [B, H, T, T]
  at::Tensor q, k, v;         // [B, H, T, head_dim], after projection and head split
  at::Tensor o;               // [B, H, T, head_dim], per-head output before the output projection
  at::Tensor weights;         // [B, H, T, T] when want_weights
  at::Tensor q_full, k_full;  // [B, T, d_model]: all heads side by side (what SLA gates read)
  double scale = 0.0;         // the softmax scale applied to q·k in this layer
  bool causal = false;
};

struct AttentionContext {
  bool causal = false;
  at::Tensor key_padding_mask;  // bool [B, T], true = real token; undefined = no padding
  double scale = 1.0;           // applied to q·k
  int64_t layer = 0;
  AttentionCapture* capture = nullptr;
};

// What a causal kernel keeps between the calls of incremental decoding (one per layer): softmax the keys
// and values seen so far (growing), linear attention its recurrent state (constant size). clone() gives an
// independent copy: decoding from it leaves the original untouched (linear states replace their tensors on
// update, so their clones share them; the KV cache and the hybrid state's ring of recent keys are written in
// place, so their clones copy them).
class KernelCache {
 public:
  virtual ~KernelCache() = default;
  virtual int64_t bytes() const = 0;  // bytes of the tensors held
  virtual std::unique_ptr<KernelCache> clone() const = 0;
  int64_t position = 0;  // tokens consumed so far
};

class AttentionKernelImpl : public torch::nn::Module {
 public:
  // q, k, v: [B, H, T, head_dim]. Returns [B, H, T, head_dim].
  virtual at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx) = 0;
  virtual std::string kind() const = 0;
  // The heads (of n_head) whose output is exactly softmax attention's: every head of the softmax kernel, the kept
  // heads of a mixed one, none otherwise. What "the heads a conversion kept" means to a stage (finetune's
  // --freeze-kept-heads) without asking for a kind by name.
  virtual std::vector<int64_t> softmax_heads(int64_t n_head) const { return {}; }
  // The options that rebuild this kernel with make_attention_kernel(kind(), config_json(), ...) (linear_kernel.h).
  virtual nlohmann::json config_json() const { return nlohmann::json::object(); }
  // Incremental causal decoding: an empty cache, and the continuation of the sequence the cache has seen by
  // the tokens q, k, v [B, H, T, head_dim] (absolute positions cache.position ...), equal to the
  // corresponding rows of forward() over the whole sequence; updates the cache. ctx.causal must be true and
  // ctx.key_padding_mask undefined. The defaults refuse: a kernel that cannot decode says so.
  // Grouped-query attention: here k and v may hold H_kv heads, H_kv dividing H (see expand_kv_heads), so that a
  // kernel can keep its cache per KV head; one that needs a key per query head expands them first.
  virtual std::unique_ptr<KernelCache> new_cache() const;
  virtual at::Tensor forward_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                                    KernelCache& cache);
  // The model it computes in reads at most `positions` tokens (its context): a kernel that sizes buffers by its
  // options may size them by that instead where the options ask for more, with the same results (the hybrid kind's
  // ring of w keys: a window of 65536 in a model of context 512 reserved 600 MB of decode state, helper-83's probe of
  // 2026-12-06). Its options (config_json) stay as given. Called by the model that installs it.
  virtual void fit_context(int64_t positions) {}
};
using AttentionKernel = std::shared_ptr<AttentionKernelImpl>;

// Grouped-query attention's reading of k or v [B, H_kv, T, d]: KV head j serves query heads j·g .. j·g + g − 1
// (g = n_head / H_kv, HF's repeat_kv), so each is repeated g times in place; unchanged when H_kv = n_head.
// A mimic::Error when H_kv does not divide n_head.
at::Tensor expand_kv_heads(const at::Tensor& kv, int64_t n_head);

// Checks what forward_cached needs of its context (causal, no padding) and that the cache is the kernel's
// own type C; a mimic::Error naming the layer otherwise.
void check_cached_call(const AttentionContext& ctx, const std::string& kind, bool cache_fits);
template <class C>
C& cached_call(KernelCache& cache, const AttentionContext& ctx, const std::string& kind) {
  auto* c = dynamic_cast<C*>(&cache);
  check_cached_call(ctx, kind, c != nullptr);
  return *c;
}

// Softmax attention, the teacher: softmax(q kᵀ·scale + mask) v. Masked scores are set to the lowest
// float (as HF does), so a row with every key masked gets uniform weights instead of NaN.
class SoftmaxAttention : public AttentionKernelImpl {
 public:
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx) override;
  std::string kind() const override { return "softmax"; }
  std::vector<int64_t> softmax_heads(int64_t n_head) const override;
  // The KV cache: keys and values of every position so far, [B, H_kv, S, head_dim] each — one per KV head
  // under grouped-query attention (g times smaller than one per query head; a step of one token reads it
  // without repeating it, the g query heads of a group as g rows of one product).
  std::unique_ptr<KernelCache> new_cache() const override;
  at::Tensor forward_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                            KernelCache& cache) override;
  // The same with any map from query heads to the cache's heads (query head i reads cache head head_map[i],
  // int64 [H]): a mixed layer's kept heads, whose KV heads are any subset of the layer's.
  at::Tensor forward_cached_mapped(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                                   KernelCache& cache, const at::Tensor& head_map);
};

// The reference for SoftmaxAttention::forward_cached (which appends into preallocated buffers): the same
// step with the KV cache grown by concatenation, k_cache and v_cache ([B, H, S, head_dim], undefined at
// first) replaced by the longer tensors. The tests compare the two bit for bit.
at::Tensor softmax_step_by_concatenation(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                                         at::Tensor& k_cache, at::Tensor& v_cache);

// Softmax attention's weights [B, H, T, T] alone (what forward uses; record and the analysis recompute the
// teacher's weights with it).
// Scale and causal mask inside one GEMM (baddbmm); softmax_weights_reference is the plain form (matmul, × scale,
// masked_fill), which the tests hold it to, forward and gradients.
at::Tensor softmax_weights(const at::Tensor& q, const at::Tensor& k, const AttentionContext& ctx);
at::Tensor softmax_weights_reference(const at::Tensor& q, const at::Tensor& k, const AttentionContext& ctx);

}  // namespace mimic::attention
