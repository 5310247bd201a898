#include "mimic/attention/attention.h"

#include <torch/torch.h>

#include <limits>

#include "mimic/core/error.h"

namespace mimic::attention {

at::Tensor softmax_weights(const at::Tensor& q, const at::Tensor& k, const AttentionContext& ctx) {
  auto scores = torch::matmul(q, k.transpose(-1, -2)) * ctx.scale;  // [B, H, T, S]
  const double lowest = std::numeric_limits<float>::lowest();
  const int64_t t = q.size(-2), s = k.size(-2);
  if (ctx.causal) {
    // query i (the last t of s positions) sees keys j <= i + (s - t)
    auto allowed = torch::ones({t, s}, torch::dtype(torch::kBool)).tril(s - t);
    scores = scores.masked_fill(allowed.logical_not(), lowest);
  }
  if (ctx.key_padding_mask.defined()) {
    auto keep = ctx.key_padding_mask.to(torch::kBool).view({q.size(0), 1, 1, s});
    scores = scores.masked_fill(keep.logical_not(), lowest);
  }
  return torch::softmax(scores, -1);
}

at::Tensor SoftmaxAttention::forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx) {
  auto w = softmax_weights(q, k, ctx);
  auto o = torch::matmul(w, v);
  if (ctx.capture && ctx.capture->want_weights) ctx.capture->weights = w.detach();
  return o;
}

std::unique_ptr<KernelCache> AttentionKernelImpl::new_cache() const {
  fail("attention kernel '", kind(), "' cannot decode incrementally");
}

at::Tensor AttentionKernelImpl::forward_cached(const at::Tensor&, const at::Tensor&, const at::Tensor&, const AttentionContext&,
                                               KernelCache&) {
  fail("attention kernel '", kind(), "' cannot decode incrementally");
}

void check_cached_call(const AttentionContext& ctx, const std::string& kind, bool cache_fits) {
  MIMIC_CHECK(ctx.causal, "incremental decoding needs causal attention (", kind, " kernel of layer ", ctx.layer, ")");
  MIMIC_CHECK(!ctx.key_padding_mask.defined(), "incremental decoding takes no padding mask (layer ", ctx.layer, ")");
  MIMIC_CHECK(cache_fits, "layer ", ctx.layer, ": the decoding cache was made for another attention kernel than ", kind,
              " (make a new decode state after changing kernels)");
}

namespace {
struct KvCache : KernelCache {
  at::Tensor k, v;  // [B, H, S, head_dim]; undefined before the first call
  int64_t bytes() const override { return k.defined() ? static_cast<int64_t>(k.nbytes() + v.nbytes()) : 0; }
  std::unique_ptr<KernelCache> clone() const override { return std::make_unique<KvCache>(*this); }
};
}  // namespace

std::unique_ptr<KernelCache> SoftmaxAttention::new_cache() const { return std::make_unique<KvCache>(); }

at::Tensor SoftmaxAttention::forward_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                                            KernelCache& cache) {
  auto& kv = cached_call<KvCache>(cache, ctx, kind());
  kv.k = kv.k.defined() ? torch::cat({kv.k, k}, 2) : k;
  kv.v = kv.v.defined() ? torch::cat({kv.v, v}, 2) : v;
  kv.position += q.size(2);
  return forward(q, kv.k, kv.v, ctx);  // the causal mask aligns the T queries with the last T of the S keys
}

// The "softmax" entry of kinds.def.
AttentionKernel make_softmax_kernel(const nlohmann::json& options, int64_t n_head, int64_t head_dim) {
  MIMIC_CHECK(options.is_null() || options.empty(), "softmax attention takes no options, got ", options.dump());
  return std::make_shared<SoftmaxAttention>();
}

}  // namespace mimic::attention
