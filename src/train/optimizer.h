// AdamW with decoupled weight decay (Loshchilov & Hutter), weight decay off for biases and norms, and a
// learning-rate schedule of linear warm-up then cosine decay. Written out (not torch::optim) so that its
// whole state is plain tensors that checkpoints store in safetensors and restore bit for bit.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mimic::train {

struct AdamWOptions {
  double lr = 3e-4;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

// True for parameters that take no weight decay: biases, LayerNorm weights, and any 1-d tensor.
bool exempt_from_weight_decay(const std::string& name, const at::Tensor& p);

class AdamW {
 public:
  // Named parameters (the names key the saved state).
  AdamW(std::vector<std::pair<std::string, at::Tensor>> params, AdamWOptions options);
  // One update with learning rate `lr` using the parameters' current .grad(); parameters without a
  // gradient are left unchanged.
  void step(double lr);
  void zero_grad();
  int64_t steps() const { return step_; }
  // State as named tensors ("<param>.exp_avg", "<param>.exp_avg_sq", "__step__"), and back.
  std::vector<std::pair<std::string, at::Tensor>> state() const;
  void load_state(const std::vector<std::pair<std::string, at::Tensor>>& state);
  const std::vector<std::pair<std::string, at::Tensor>>& params() const { return params_; }

 private:
  std::vector<std::pair<std::string, at::Tensor>> params_;
  std::vector<bool> decay_;
  std::vector<at::Tensor> m_, v_;
  AdamWOptions o_;
  int64_t step_ = 0;
};

// Learning rate at `step` (0-based): linear warm-up peak·(step+1)/warmup up to `peak` at step warmup−1, then cosine
// decay from `peak` (at step `warmup`) towards peak·min_ratio, reached at step `total` — one past the run's last
// step, which ends one step short of the floor, as HF's cosine schedule does (docs/finetune.md).
double warmup_cosine_lr(int64_t step, int64_t warmup, int64_t total, double peak, double min_ratio);

// Scales all gradients so their global L2 norm is at most max_norm; returns the norm before clipping
// (non-finite if any gradient is).
double clip_grad_norm(const std::vector<std::pair<std::string, at::Tensor>>& params, double max_norm);

}  // namespace mimic::train
