// What every network shares: GPT-2's Conv1D, the activations, and NetworkImpl (a stack of layers with a swappable
// attention kernel each). The networks themselves (gpt2.h, bert.h, ...) are LibTorch modules whose
// named_parameters() are HF's names without the checkpoint prefix (checkpoint.cpp maps the key layouts of files).
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <vector>

#include "mimic/attention/attention.h"
#include "mimic/models/config.h"
#include "mimic/models/model.h"

namespace mimic::models {

// GPT-2's Conv1D: weight stored (in, out), y = x·W + b. forward takes a single row outside autograd (batch-1
// decoding) as a matrix-vector product, otherwise forward_reference (addmm); the two differ by float rounding only.
class Conv1DImpl : public torch::nn::Module {
 public:
  Conv1DImpl(int64_t in, int64_t out);
  at::Tensor forward(const at::Tensor& x);
  at::Tensor forward_reference(const at::Tensor& x);
  at::Tensor weight, bias;
};
TORCH_MODULE(Conv1D);

// RMSNorm (the Llama family): x / sqrt(mean(x²) + eps) · weight over the last dimension; no bias, no centring.
class RmsNormImpl : public torch::nn::Module {
 public:
  RmsNormImpl(int64_t d, double eps);
  at::Tensor forward(const at::Tensor& x);
  at::Tensor weight;
  double eps;
};
TORCH_MODULE(RmsNorm);

at::Tensor activate(const at::Tensor& x, Activation a);
// The LM head: h [..., d] times weight [V, d] transposed, [..., V]. A single row runs as a matrix-vector
// product (at::mv), more rows as lm_logits_reference (matmul); the two differ by float rounding only (the
// sums run in another order), so one token's logits may differ in their last bits from the same row in a batch.
at::Tensor lm_logits(const at::Tensor& h, const at::Tensor& weight);
at::Tensor lm_logits_reference(const at::Tensor& h, const at::Tensor& weight);
// Training's dropout, p in (0, 1): torch::dropout's, or under a BatchShare of several parts the same formula (noise
// ~ Bernoulli(1 − p) / (1 − p), times x) with the noise drawn for the global batch and this share's rows taken.
at::Tensor dropout(const at::Tensor& x, double p);
// Token ids must be [batch, time] and inside the vocabulary.
void check_ids(const at::Tensor& ids, int64_t vocab);

// What both networks share: a stack of layers with a swappable attention kernel and a capture slot each.
class NetworkImpl : public torch::nn::Module {
 public:
  virtual ForwardOutputs forward(const ForwardInputs& in) = 0;
  virtual const ModelConfig& config() const = 0;
  // Model::lm_head_weight: undefined unless the network's LM logits are last_hidden_state · weightᵀ.
  virtual at::Tensor lm_head_weight() { return {}; }
  void set_kernel(int64_t layer, attention::AttentionKernel kernel);
  attention::AttentionKernel kernel(int64_t layer) const;
  void set_capture(int64_t layer, attention::AttentionCapture* capture);
  // Incremental decoding (causal networks): forward() run on the tokens after `state`, every layer's
  // kernel continuing from its cache. Returns the LM logits of those tokens.
  at::Tensor forward_cached(const at::Tensor& ids, DecodeState& state);

 protected:
  // Set while forward_cached runs: the position offset of the tokens and the caches attend() continues from.
  DecodeState* decoding_ = nullptr;
  // Runs the layer's kernel on per-head q, k, v ([B, T, d] each, all heads side by side) and returns the
  // merged heads [B, T, d]; fills the capture when set.
  at::Tensor attend(int64_t layer, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                    const at::Tensor& key_padding_mask, double scale);
  // The same on heads split already ([B, H, T, d_head] each: a network that rotates q and k before the kernel);
  // k and v may hold H_kv heads dividing H (grouped-query attention: see attend_split). The capture's q_full and
  // k_full are the heads side by side, one key per query head.
  at::Tensor attend_heads(int64_t layer, const at::Tensor& qh, const at::Tensor& kh, const at::Tensor& vh, bool causal,
                          const at::Tensor& key_padding_mask, double scale);
  void init_layers(int64_t n);
  // attend's and attend_heads' shared part: q and k are the heads side by side, for the capture.
  at::Tensor attend_split(int64_t layer, const at::Tensor& qh, const at::Tensor& kh, const at::Tensor& vh, const at::Tensor& q,
                          const at::Tensor& k, bool causal, const at::Tensor& key_padding_mask, double scale);
  std::vector<attention::AttentionKernel> kernels_;
  std::vector<attention::AttentionCapture*> captures_;
  torch::nn::ModuleList kernel_modules_{nullptr};
};

}  // namespace mimic::models
