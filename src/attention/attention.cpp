#include "attention/attention.h"

#include <torch/torch.h>

#include <limits>

namespace mimic::attention {

at::Tensor SoftmaxAttention::weights(const at::Tensor& q, const at::Tensor& k, const AttentionContext& ctx) {
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
  auto w = weights(q, k, ctx);
  auto o = torch::matmul(w, v);
  if (ctx.capture && ctx.capture->want_weights) ctx.capture->weights = w.detach();
  return o;
}

}  // namespace mimic::attention
