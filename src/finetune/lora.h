// LoRA (low-rank adaptation) on the attention projections of GPT-2 and BERT. Each of the q, k, v and
// output projections of every layer gets W' = W + (alpha/r)·B·A, A [r, in] drawn Kaiming-uniform
// (bound 1/sqrt(in)), B [out, r] zero, so the adapted model starts equal to the base model. GPT-2's fused
// c_attn gets one (A, B) pair per q, k and v block of its output. The base weights and biases of the adapted
// projections are frozen.
//
// The adapted weight is formed before every forward pass and handed to the projection in place of its
// weight (the registered parameter, which checkpoints and Model::save read, stays the base weight), so
// the network code is unchanged. LoraModel does that around any Model; its save() writes the merged
// model: a plain (or converted) directory with no LoRA tensors.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mimic/models/model.h"

namespace mimic::finetune {

struct LoraOptions {
  int64_t rank = 0;    // 0: no LoRA
  double alpha = 0;    // scale = alpha / rank; 0: alpha = rank (scale 1)
  double scale() const { return (alpha > 0 ? alpha : static_cast<double>(rank)) / static_cast<double>(rank); }
};

class LoraModel : public models::Model {
 public:
  // Adapts `base` (GPT-2 or BERT) in place; A is drawn from a generator seeded with `seed`.
  LoraModel(std::unique_ptr<models::Model> base, const LoraOptions& options, uint64_t seed);
  ~LoraModel() override;

  // The LoRA matrices, named "<projection>.lora_A[.q|.k|.v]" / "...lora_B..." after the adapted
  // projection's module name (e.g. "h.0.attn.c_attn.lora_A.q", "encoder.layer.0.attention.self.query.lora_B").
  std::vector<std::pair<std::string, at::Tensor>> lora_parameters() const;
  // True for the adapted projections' own parameters (weight and bias, network names).
  bool adapts(const std::string& parameter_name) const;
  // Folds B·A into the base weights for good and drops the adapters; the model is then `base` again.
  void merge();
  std::unique_ptr<models::Model> release_merged();

  models::ModelSummary summary() const override { return base_->summary(); }
  models::ForwardOutputs forward(const models::ForwardInputs& in) override;
  // Merged tensors (as Model::save writes them).
  std::vector<std::pair<std::string, at::Tensor>> state_dict() const override;
  torch::nn::Module& module() override { return base_->module(); }
  // The base's: LoRA adapts attention projections only, never the head.
  at::Tensor lm_head_weight() override { return base_->lm_head_weight(); }
  using Model::save;
  void save(const std::string& dir, const models::SaveOptions& options) const override;
  void set_attention_kernel(int64_t layer, std::shared_ptr<attention::AttentionKernelImpl> kernel) override {
    base_->set_attention_kernel(layer, std::move(kernel));
  }
  std::shared_ptr<attention::AttentionKernelImpl> attention_kernel(int64_t layer) const override {
    return base_->attention_kernel(layer);
  }
  void set_attention_capture(int64_t layer, attention::AttentionCapture* capture) override {
    base_->set_attention_capture(layer, capture);
  }
  nlohmann::json& provenance() override { return base_->provenance(); }
  const nlohmann::json& provenance() const override { return base_->provenance(); }

 protected:
  // LoRA models exist while finetuning; decoding runs on the exported (merged) model.
  at::Tensor forward_cached(const at::Tensor& ids, models::DecodeState& state) override;

  struct Adapter;

 private:
  // Runs `fn` with the merged weights in the base parameters, then restores them bit for bit.
  void with_merged(const std::function<void()>& fn) const;
  void apply();  // hands W + scale·B·A to every adapted projection
  std::unique_ptr<models::Model> base_;
  std::vector<std::unique_ptr<Adapter>> adapters_;
  double scale_ = 1;
};

}  // namespace mimic::finetune
