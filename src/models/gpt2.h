// The GPT-2 network (a causal LM): HF's GPT2LMHeadModel with the LM head tied to the token embeddings.
// Its family description (models/gpt2.cpp, registered in families.def) is what the stages see.
#pragma once
#include <vector>

#include "mimic/models/networks.h"

namespace mimic::models {

class Gpt2Impl : public NetworkImpl {
 public:
  explicit Gpt2Impl(const ModelConfig& c);
  ForwardOutputs forward(const ForwardInputs& in) override;
  const ModelConfig& config() const override { return c_; }
  at::Tensor lm_head_weight() override { return wte->weight; }
  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
  struct Layer {
    torch::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
    Conv1D c_attn{nullptr}, attn_proj{nullptr}, c_fc{nullptr}, mlp_proj{nullptr};
  };
  std::vector<Layer> layers;
  torch::nn::LayerNorm ln_f{nullptr};

 private:
  ModelConfig c_;
};

}  // namespace mimic::models
