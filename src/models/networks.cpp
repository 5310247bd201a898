#include "mimic/models/networks.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "mimic/attention/kinds.h"
#include "mimic/core/error.h"

namespace mimic::models {

Conv1DImpl::Conv1DImpl(int64_t in, int64_t out) {
  weight = register_parameter("weight", torch::empty({in, out}));
  bias = register_parameter("bias", torch::zeros({out}));
  torch::nn::init::normal_(weight, 0.0, 0.02);
}

at::Tensor Conv1DImpl::forward(const at::Tensor& x) {
  // One row outside autograd (batch-1 decoding): a matrix-vector product. As a [1, in] × [in, out] GEMM,
  // OpenBLAS packs the weight into its panel layout on every call; that made the six layers' 24 projections
  // ~21% of a gpt2-mini decoding step (profiled, one thread), 3–5× the time of GEMV on the same weight.
  const bool grad = at::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad() || bias.requires_grad());
  // (Only when x has the weight's type: under bf16 autocast x may be bf16, and addmv, which CPU autocast does not
  // cover, would refuse the mix; addmm below is autocast's.)
  if (!grad && x.numel() == x.size(-1) && x.scalar_type() == weight.scalar_type()) {
    auto shape = x.sizes().vec();
    shape.back() = weight.size(1);
    return at::addmv(bias, weight.t(), x.reshape({x.size(-1)})).view(shape);
  }
  return forward_reference(x);
}

at::Tensor Conv1DImpl::forward_reference(const at::Tensor& x) {
  auto shape = x.sizes().vec();
  shape.back() = weight.size(1);
  return torch::addmm(bias, x.reshape({-1, x.size(-1)}), weight).view(shape);
}

RmsNormImpl::RmsNormImpl(int64_t d, double eps) : eps(eps) { weight = register_parameter("weight", torch::ones({d})); }

at::Tensor RmsNormImpl::forward(const at::Tensor& x) {
  // in float32 whatever x's type (HF computes the mean square in float32 too), back to x's type before the weight
  const auto xf = x.to(at::kFloat);
  return (xf * torch::rsqrt(xf.pow(2).mean(-1, true) + eps)).to(x.scalar_type()) * weight;
}

namespace {
struct Share {
  int64_t part = 0, parts = 1;
};
thread_local Share share;
}  // namespace

BatchShare::BatchShare(int64_t part, int64_t parts) : part_before_(share.part), parts_before_(share.parts) {
  MIMIC_CHECK(parts >= 1 && part >= 0 && part < parts, "a batch share ", part, " of ", parts, " is no share");
  share = {part, parts};
}
BatchShare::~BatchShare() { share = {part_before_, parts_before_}; }

at::Tensor dropout(const at::Tensor& x, double p) {
  if (share.parts == 1) return torch::dropout(x, p, true);
  // ATen's unfused dropout (Dropout.cpp's _dropout_impl: noise = empty_like(x).bernoulli_(1 − p).div_(1 − p), then
  // x · noise), drawn over the global batch: a CPU Bernoulli draw fills its elements in index order from the
  // generator, so the rows of share `part` get what one process's draw gives them
  auto sizes = x.sizes().vec();
  const int64_t rows = sizes.at(0);
  sizes[0] = rows * share.parts;
  auto noise = at::empty(sizes, x.options()).bernoulli_(1 - p).div_(1 - p);
  // a copy of this share's rows: the product keeps its factor for backward, and a view would keep every share's noise
  // alive until then (N times one process's masks: helper-82's review)
  return x * noise.narrow(0, share.part * rows, rows).clone();
}

at::Tensor activate(const at::Tensor& x, Activation a) {
  switch (a) {
    case Activation::GeluTanh: {
      // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), as GPT-2's gelu_new
      const double k = std::sqrt(2.0 / M_PI);
      return 0.5 * x * (1.0 + torch::tanh(k * (x + 0.044715 * torch::pow(x, 3.0))));
    }
    case Activation::GeluExact: return torch::gelu(x);
    case Activation::Relu: return torch::relu(x);
    case Activation::Silu: return torch::silu(x);
  }
  return x;
}

at::Tensor lm_logits(const at::Tensor& h, const at::Tensor& weight) {
  // One row (batch-1 decoding): a matrix-vector product. As a [1, d] × [d, V] GEMM, OpenBLAS packs the whole
  // [V, d] matrix into its panel layout before multiplying, i.e. reads and writes the LM head (38.6 MB at
  // gpt2-mini) on top of the product's own read; GEMV streams it once.
  if (h.numel() == h.size(-1)) {
    auto shape = h.sizes().vec();
    shape.back() = weight.size(0);
    return at::mv(weight, h.reshape({h.size(-1)})).view(shape);
  }
  return lm_logits_reference(h, weight);
}

at::Tensor lm_logits_reference(const at::Tensor& h, const at::Tensor& weight) { return torch::matmul(h, weight.t()); }

// ------------------------------------------------------------------------------------------ shared
void check_ids(const at::Tensor& ids, int64_t vocab) {
  MIMIC_CHECK(ids.dim() == 2, "input_ids must be [batch, time]");
  if (ids.numel() == 0) return;
  int64_t lo = 0, hi = 0;
  if (ids.device().is_cpu() && ids.scalar_type() == at::kLong && ids.is_contiguous()) {
    // read in place: two reductions and their item() calls were a noticeable part of a batch-1 decoding step
    const int64_t* p = ids.data_ptr<int64_t>();
    const auto [mn, mx] = std::minmax_element(p, p + ids.numel());
    lo = *mn;
    hi = *mx;
  } else {
    lo = ids.min().item<int64_t>();
    hi = ids.max().item<int64_t>();
  }
  MIMIC_CHECK(lo >= 0 && hi < vocab, "token id ", lo < 0 ? lo : hi, " is outside the model's vocabulary of ", vocab,
              " (does the tokenizer belong to this model?)");
}

void NetworkImpl::init_layers(int64_t n) {
  kernel_modules_ = register_module("kernels", torch::nn::ModuleList());
  for (int64_t i = 0; i < n; ++i) {
    // every layer starts on the reference kind (softmax); convert swaps kernels in later
    auto k = attention::make_attention_kernel("softmax", nlohmann::json::object(), 1, 1);
    kernels_.push_back(k);
    kernel_modules_->push_back(k);
  }
  captures_.assign(static_cast<size_t>(n), nullptr);
}

void NetworkImpl::set_kernel(int64_t layer, attention::AttentionKernel kernel) {
  MIMIC_CHECK(layer >= 0 && layer < static_cast<int64_t>(kernels_.size()), "layer ", layer, " out of range");
  kernels_[layer] = kernel;
  // Replace the registered child so that the kernel's parameters appear as "kernels.<layer>.*".
  kernel_modules_ = replace_module("kernels", [&] {
    torch::nn::ModuleList list;
    for (auto& k : kernels_) list->push_back(k);
    return list;
  }());
}

attention::AttentionKernel NetworkImpl::kernel(int64_t layer) const { return kernels_.at(static_cast<size_t>(layer)); }

void NetworkImpl::set_capture(int64_t layer, attention::AttentionCapture* capture) {
  MIMIC_CHECK(layer >= 0 && layer < static_cast<int64_t>(captures_.size()), "layer ", layer, " out of range");
  captures_[layer] = capture;
}

at::Tensor NetworkImpl::forward_cached(const at::Tensor& ids, DecodeState& state) {
  MIMIC_CHECK(!decoding_, "forward_cached is not reentrant");
  struct Reset {
    DecodeState*& p;
    ~Reset() { p = nullptr; }
  } reset{decoding_};
  decoding_ = &state;
  ForwardInputs in;
  in.input_ids = ids;
  return forward(in).logits;
}

at::Tensor NetworkImpl::attend(int64_t layer, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                               const at::Tensor& key_padding_mask, double scale) {
  const auto& c = config();
  const int64_t b = q.size(0), t = q.size(1), h = c.n_head, dh = c.head_dim();
  auto split = [&](const at::Tensor& x) { return x.view({b, t, h, dh}).transpose(1, 2); };  // [B, H, T, dh]
  return attend_split(layer, split(q), split(k), split(v), q, k, causal, key_padding_mask, scale);
}

at::Tensor NetworkImpl::attend_heads(int64_t layer, const at::Tensor& qh, const at::Tensor& kh, const at::Tensor& vh, bool causal,
                                     const at::Tensor& key_padding_mask, double scale) {
  if (!captures_[layer]) return attend_split(layer, qh, kh, vh, {}, {}, causal, key_padding_mask, scale);
  auto merge = [](const at::Tensor& x) { return x.transpose(1, 2).reshape({x.size(0), x.size(2), x.size(1) * x.size(3)}); };
  return attend_split(layer, qh, kh, vh, merge(qh), merge(attention::expand_kv_heads(kh, qh.size(1))), causal, key_padding_mask, scale);
}

at::Tensor NetworkImpl::attend_split(int64_t layer, const at::Tensor& qh, const at::Tensor& kh, const at::Tensor& vh, const at::Tensor& q,
                                     const at::Tensor& k, bool causal, const at::Tensor& key_padding_mask, double scale) {
  const int64_t b = qh.size(0), t = qh.size(2), h = qh.size(1), dh = qh.size(3);
  attention::AttentionContext ctx;
  ctx.causal = causal;
  ctx.key_padding_mask = key_padding_mask;
  ctx.scale = scale;
  ctx.layer = layer;
  ctx.capture = captures_[layer];
  // Grouped-query attention: decoding hands the kernel one key and value per KV head, so that its cache can be
  // kept per KV head (forward_cached's contract); the whole-sequence forward, and every stage that reads a
  // capture, see one per query head (expanded once: unchanged without grouping).
  const bool expand = !decoding_ || captures_[layer];
  const auto k_heads = expand ? attention::expand_kv_heads(kh, h) : kh, v_heads = expand ? attention::expand_kv_heads(vh, h) : vh;
  auto o = decoding_ ? kernels_[layer]->forward_cached(qh, kh, vh, ctx, *decoding_->layers.at(static_cast<size_t>(layer)))
                    : kernels_[layer]->forward(qh, k_heads, v_heads, ctx);
  if (auto* cap = captures_[layer]) {
    cap->q = qh.detach();
    cap->k = k_heads.detach();
    cap->v = v_heads.detach();
    cap->o = o.detach();
    cap->q_full = q.detach();
    cap->k_full = k.detach();
    cap->scale = scale;
    cap->causal = causal;
  }
  return o.transpose(1, 2).reshape({b, t, h * dh});
}

}  // namespace mimic::models
