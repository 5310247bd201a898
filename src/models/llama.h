// The Llama family's network (a causal LM): HF's LlamaForCausalLM, and the same network as MistralForCausalLM,
// Qwen2ForCausalLM (q/k/v biases) and Qwen3ForCausalLM (an RMSNorm over each head of q and k): RMSNorm, rotary
// position embeddings on q and k, grouped-query attention, a SwiGLU MLP, an LM head tied to the token embedding or
// its own. Its family descriptions (models/llama.cpp, four lines in families.def) are what the stages see.
#pragma once
#include <vector>

#include "mimic/models/networks.h"

namespace mimic::models {

// The rotary embedding's inverse frequencies [d_head / 2] (float64) of a config: rope_theta^(-2i/d_head), changed by
// its rope_scaling (linear: divided by the factor; llama3: kept for wavelengths below original/high_freq_factor,
// divided by the factor above original/low_freq_factor, blended between).
at::Tensor rope_inverse_frequencies(const ModelConfig& c);

// x [B, H, T, d_head] rotated by positions offset .. offset + T - 1: pairs (i, i + d_head/2), HF's rotate_half layout.
// cos and sin are [T, d_head] (rope_tables).
at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

class LlamaImpl : public NetworkImpl {
 public:
  explicit LlamaImpl(const ModelConfig& c);
  ForwardOutputs forward(const ForwardInputs& in) override;
  const ModelConfig& config() const override { return c_; }
  at::Tensor lm_head_weight() override { return lm_head ? lm_head->weight : embed_tokens->weight; }
  torch::nn::Embedding embed_tokens{nullptr};
  struct Layer {
    RmsNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
    torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
    RmsNorm q_norm{nullptr}, k_norm{nullptr};  // Qwen3 only
    torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
  };
  std::vector<Layer> layers;
  RmsNorm norm{nullptr};
  torch::nn::Linear lm_head{nullptr};  // untied heads only

 private:
  // cos and sin [T, d_head] for positions offset .. offset + T - 1, float32 on `device`: rows of tables kept for the
  // positions seen so far (a decoding step slices them instead of building six tensors and copying them to the device)
  std::pair<at::Tensor, at::Tensor> rope_tables(int64_t offset, int64_t t, c10::Device device);
  ModelConfig c_;
  at::Tensor inv_freq_;  // float64, CPU
  at::Tensor cos_, sin_;  // [n, d_head] float32 for positions 0 .. n - 1, on the device last asked for
};

}  // namespace mimic::models
