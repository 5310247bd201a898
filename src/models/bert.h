// The BERT network (a bidirectional encoder) with its heads: masked LM, next-sentence (pre-training),
// pooler and sequence classifier. Its family description (models/bert.cpp, registered in families.def)
// is what the stages see.
#pragma once
#include <vector>

#include "mimic/models/networks.h"

namespace mimic::models {

class BertImpl : public NetworkImpl {
 public:
  BertImpl(const ModelConfig& c, Head head, bool pooler);
  ForwardOutputs forward(const ForwardInputs& in) override;
  const ModelConfig& config() const override { return c_; }
  Head head() const { return head_; }
  struct Layer {
    torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr}, attn_out{nullptr}, intermediate{nullptr}, out{nullptr};
    torch::nn::LayerNorm attn_ln{nullptr}, out_ln{nullptr};
  };
  torch::nn::Embedding word{nullptr}, position{nullptr}, token_type{nullptr};
  torch::nn::LayerNorm emb_ln{nullptr};
  std::vector<Layer> layers;
  torch::nn::Linear pooler{nullptr};
  // heads
  torch::nn::Linear mlm_dense{nullptr};
  torch::nn::LayerNorm mlm_ln{nullptr};
  at::Tensor mlm_bias;
  torch::nn::Linear nsp{nullptr};
  torch::nn::Linear classifier{nullptr};

 private:
  ModelConfig c_;
  Head head_;
};

}  // namespace mimic::models
