#include "mimic/attention/attention.h"

#include <torch/torch.h>

#include <algorithm>
#include <limits>

#include "mimic/core/error.h"

namespace mimic::attention {

std::vector<int64_t> SoftmaxAttention::softmax_heads(int64_t n_head) const {
  std::vector<int64_t> all(static_cast<size_t>(n_head));
  for (int64_t h = 0; h < n_head; ++h) all[static_cast<size_t>(h)] = h;
  return all;
}

// The score a masked position gets: the most negative finite value of the scores' type, so that a row with no
// visible key stays finite (uniform weights, no NaN). In a bf16 step (autocast) the scores are bf16, which cannot
// hold float's lowest (masked_fill refuses it as an overflow): bf16's own. fp32 and fp64 keep float's, as before.
namespace {
double lowest_score(at::ScalarType t) {
  if (t == at::kBFloat16) return static_cast<double>(std::numeric_limits<c10::BFloat16>::lowest());
  if (t == at::kHalf) return static_cast<double>(std::numeric_limits<c10::Half>::lowest());
  return std::numeric_limits<float>::lowest();
}
}  // namespace

at::Tensor softmax_weights_reference(const at::Tensor& q, const at::Tensor& k, const AttentionContext& ctx) {
  auto scores = torch::matmul(q, k.transpose(-1, -2)) * ctx.scale;  // [B, H, T, S]
  const double lowest = lowest_score(scores.scalar_type());
  const int64_t t = q.size(-2), s = k.size(-2);
  if (ctx.causal && t > 1) {  // a single query is the last position: it sees every key, nothing to mask
    // query i (the last t of s positions) sees keys j <= i + (s - t)
    auto allowed = torch::ones({t, s}, torch::dtype(torch::kBool).device(q.device())).tril(s - t);
    scores = scores.masked_fill(allowed.logical_not(), lowest);
  }
  if (ctx.key_padding_mask.defined()) {
    auto keep = ctx.key_padding_mask.to(torch::kBool).view({q.size(0), 1, 1, s});
    scores = scores.masked_fill(keep.logical_not(), lowest);
  }
  return torch::softmax(scores, -1);
}

// The reference's scores take three passes over [B, H, T, S] forward (the product, × scale, the causal
// masked_fill) and two more backward (the masked_fill's and the multiplication's gradients); at 4K tokens
// those passes were a third of a softmax model's training step. Here the scale is the GEMM's alpha and the
// causal mask an additive bias the GEMM accumulates onto (baddbmm, beta = 1): the product is written once,
// and its gradient flows through the GEMM alone. Masked scores are lowest + alpha·(q·k), which rounds to
// lowest for any score below ~1e31, so the forward is the reference's. The backward is too, except in a row
// whose every key is masked (weights uniform, so the product's gradient would leak through the bias): that
// takes key padding or more queries than keys, and then the causal mask is a masked_fill as in the reference.
// A padding mask of all ones (packed training batches) masks nothing and is skipped.
at::Tensor softmax_weights(const at::Tensor& q, const at::Tensor& k, const AttentionContext& ctx) {
  if (q.dim() != 4 || k.dim() != 4) return softmax_weights_reference(q, k, ctx);
  const int64_t b = q.size(0), h = q.size(1), t = q.size(2), s = k.size(2), d = q.size(3);
  const double lowest = lowest_score(q.scalar_type());
  at::Tensor keep;
  if (ctx.key_padding_mask.defined()) {
    keep = ctx.key_padding_mask.to(torch::kBool);
    if (keep.all().item<bool>()) keep = at::Tensor();
  }
  const bool causal = ctx.causal && t > 1;  // a single query is the last position: it sees every key
  at::Tensor hidden;                        // [T, S]: true where query i (the last t of s positions) may not see key j
  if (causal) hidden = torch::ones({t, s}, torch::dtype(torch::kBool).device(q.device())).triu(s - t + 1);
  // More queries than keys (t > s) also leaves rows with no visible key: the masked_fill path too.
  const bool bias_mask = causal && !keep.defined() && t <= s;
  auto bias = bias_mask ? torch::zeros({t, s}, q.options().requires_grad(false)).masked_fill_(hidden, lowest)
                        : torch::zeros({1, 1, 1}, q.options().requires_grad(false));
  // beta = 1 also without a mask: LibTorch 1.13's small-matrix baddbmm reads its output uninitialised at beta = 0
  auto scores = torch::baddbmm(bias, q.reshape({b * h, t, d}), k.reshape({b * h, s, d}).transpose(1, 2), /*beta=*/1.0,
                               /*alpha=*/ctx.scale)
                    .view({b, h, t, s});
  // under autocast the product is bf16 whatever q is
  const double lowest_here = lowest_score(scores.scalar_type());
  if (causal && !bias_mask) scores.masked_fill_(hidden, lowest_here);
  if (keep.defined()) scores.masked_fill_(keep.view({b, 1, 1, s}).logical_not(), lowest_here);
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
// The keys and values live in buffers [B, H, capacity, head_dim] written in place, with k and v the views of
// their first `position` rows: appending a token copies that token only, where concatenating would copy the
// whole cache every step (at a 2K context that copy moved more bytes than the weights). Capacity grows by
// half when full (amortised: a prefill of P tokens, then steps, copies the cache about twice in all). Since
// the buffers are written in place, clone() copies the used rows instead of sharing them.
struct KvCache : KernelCache {
  at::Tensor k_buf, v_buf;  // [B, H, capacity, head_dim]; undefined before the first call
  at::Tensor k, v;          // the filled rows [B, H, S, head_dim]: views into the buffers
  // The used rows only: what a step reads (the spare capacity is at most half of it again).
  int64_t bytes() const override { return k.defined() ? static_cast<int64_t>(k.nbytes() + v.nbytes()) : 0; }
  std::unique_ptr<KernelCache> clone() const override {
    auto c = std::make_unique<KvCache>();
    c->position = position;
    if (k.defined()) c->append(k, v);
    return c;
  }
  void append(const at::Tensor& nk, const at::Tensor& nv) {
    const int64_t used = k.defined() ? k.size(2) : 0, need = used + nk.size(2);
    if (!k_buf.defined() || need > k_buf.size(2) || k_buf.size(0) != nk.size(0)) {
      const int64_t capacity = std::max(need, used + used / 2);
      auto grow = [&](const at::Tensor& old, const at::Tensor& like) {
        auto buf = at::empty({like.size(0), like.size(1), capacity, like.size(3)}, like.options().memory_format(at::MemoryFormat::Contiguous));
        if (used > 0) buf.narrow(2, 0, used).copy_(old);
        return buf;
      };
      k_buf = grow(k, nk);
      v_buf = grow(v, nv);
    }
    k_buf.narrow(2, used, nk.size(2)).copy_(nk);
    v_buf.narrow(2, used, nv.size(2)).copy_(nv);
    k = k_buf.narrow(2, 0, need);
    v = v_buf.narrow(2, 0, need);
  }
};
}  // namespace

at::Tensor softmax_step_by_concatenation(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                                         at::Tensor& k_cache, at::Tensor& v_cache) {
  k_cache = k_cache.defined() ? torch::cat({k_cache, k}, 2) : k;
  v_cache = v_cache.defined() ? torch::cat({v_cache, v}, 2) : v;
  return SoftmaxAttention().forward(q, k_cache, v_cache, ctx);
}

std::unique_ptr<KernelCache> SoftmaxAttention::new_cache() const { return std::make_unique<KvCache>(); }

at::Tensor SoftmaxAttention::forward_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                                            KernelCache& cache) {
  return forward_cached_mapped(q, k, v, ctx, cache, at::Tensor());
}

at::Tensor SoftmaxAttention::forward_cached_mapped(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                   const AttentionContext& ctx, KernelCache& cache, const at::Tensor& head_map) {
  auto& kv = cached_call<KvCache>(cache, ctx, kind());
  MIMIC_CHECK(!kv.k.defined() || kv.k.size(1) == k.size(1), "layer ", ctx.layer, ": the KV cache holds ", kv.k.size(1),
              " key heads, this step gives ", k.size(1));
  kv.append(k, v);
  kv.position += q.size(2);
  // the causal mask aligns the T queries with the last T of the S keys
  if (head_map.defined()) return forward(q, kv.k.index_select(1, head_map), kv.v.index_select(1, head_map), ctx);
  const int64_t b = q.size(0), h = q.size(1), hk = kv.k.size(1);
  if (hk == h) return forward(q, kv.k, kv.v, ctx);
  if (q.size(2) == 1 && !(ctx.capture && ctx.capture->want_weights)) {
    // One token sees every key: the g query heads of KV head j are g rows of one product with j's keys, which
    // reads the cache once instead of copying it g times. No causal mask (it would treat the rows as positions).
    auto c = ctx;
    c.causal = false;
    c.capture = nullptr;
    MIMIC_CHECK(h % hk == 0, "layer ", ctx.layer, ": ", hk, " key/value heads do not divide ", h, " query heads");
    return forward(q.reshape({b, hk, h / hk, q.size(3)}), kv.k, kv.v, c).reshape({b, h, 1, kv.v.size(3)});
  }
  return forward(q, expand_kv_heads(kv.k, h), expand_kv_heads(kv.v, h), ctx);
}

at::Tensor expand_kv_heads(const at::Tensor& kv, int64_t n_head) {
  const int64_t hk = kv.size(1);
  if (hk == n_head) return kv;
  MIMIC_CHECK(hk >= 1 && n_head % hk == 0, hk, " key/value heads do not divide ", n_head, " query heads");
  // KV head j to rows j·g … j·g + g − 1: repeat_interleave's order, as a broadcast copy (repeat_interleave builds a
  // repeats tensor and, on CUDA, reads its output size back to the host at every call)
  auto sizes = kv.sizes().vec();
  auto grouped = sizes;
  grouped.insert(grouped.begin() + 2, n_head / hk);
  sizes[1] = n_head;
  return kv.unsqueeze(2).expand(grouped).reshape(sizes);
}

// The "softmax" entry of kinds.def.
AttentionKernel make_softmax_kernel(const nlohmann::json& options, int64_t n_head, int64_t head_dim) {
  MIMIC_CHECK(options.is_null() || options.empty(), "softmax attention takes no options, got ", options.dump());
  return std::make_shared<SoftmaxAttention>();
}

}  // namespace mimic::attention
