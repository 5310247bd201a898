#include "mimic/train/lm.h"

#include <torch/torch.h>

#include <cmath>

#include "mimic/core/error.h"
#include "mimic/core/precision.h"
#include "mimic/data/batches.h"
#include "mimic/models/model.h"
#include "mimic/train/lm_head_loss.h"

namespace mimic::train {

at::Tensor next_token_loss(const at::Tensor& logits, const at::Tensor& labels) {
  // in float whatever the logits' type (a bf16 forward's): as lm_head_loss, and as CUDA's autocast does by itself
  return torch::nn::functional::cross_entropy(float_or_wider(logits).reshape({-1, logits.size(-1)}), labels.reshape({-1}),
                                              torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
}

at::Tensor causal_lm_loss(models::Model& model, const data::LmBatch& batch) {
  const auto b = data::to_device(batch, models::device_of(model));
  auto weight = model.lm_head_weight();
  if (!weight.defined()) return causal_lm_loss_reference(model, b);
  models::ForwardInputs in{b.input_ids, b.attention_mask, {}, {}};
  in.lm_head = false;
  return lm_head_loss(model.forward(in).last_hidden_state, weight, b.labels);
}

at::Tensor causal_lm_loss_reference(models::Model& model, const data::LmBatch& batch) {
  const auto b = data::to_device(batch, models::device_of(model));
  return next_token_loss(model.forward({b.input_ids, b.attention_mask, {}, {}}).logits, b.labels);
}

at::Tensor logit_distillation_loss(const at::Tensor& student, const at::Tensor& teacher, const at::Tensor& labels, double temperature) {
  MIMIC_CHECK(temperature > 0 && std::isfinite(temperature), "the distillation temperature must be > 0, got ", temperature);
  MIMIC_CHECK(student.dim() == 3 && teacher.sizes() == student.sizes() && labels.dim() == 2 && labels.size(0) == student.size(0) &&
                  labels.size(1) == student.size(1),
              "logit distillation needs student and teacher logits [B, T, V] alike and labels [B, T], got ", student.sizes(), ", ",
              teacher.sizes(), ", ", labels.sizes());
  // in float whatever the logits' type (bf16 forwards'): CPU autocast leaves log_softmax in bf16, CUDA's does not
  const auto s = float_or_wider(student);
  auto log_q = torch::log_softmax(s / temperature, -1);
  auto log_p = torch::log_softmax(teacher.detach().to(s.dtype()) / temperature, -1);
  auto kl = (log_p.exp() * (log_p - log_q)).sum(-1);  // [B, T]
  auto scored = labels.ne(-100).to(kl.dtype());
  return (kl * scored).sum() / scored.sum().clamp_min(1) * (temperature * temperature);
}

at::Tensor kd_loss_from_logits(const at::Tensor& student, const at::Tensor& teacher, const at::Tensor& labels, double temperature,
                               double lm_weight) {
  auto loss = (1 - lm_weight) * logit_distillation_loss(student, teacher, labels, temperature);
  if (lm_weight > 0) loss = loss + lm_weight * next_token_loss(student, labels);
  return loss;
}

at::Tensor causal_lm_kd_loss(models::Model& model, models::Model& teacher, const data::LmBatch& batch, double temperature, double lm_weight) {
  const auto b = data::to_device(batch, models::device_of(model));
  auto weight = model.lm_head_weight(), teacher_weight = teacher.lm_head_weight();
  if (!weight.defined() || !teacher_weight.defined()) return causal_lm_kd_loss_reference(model, teacher, b, temperature, lm_weight);
  models::ForwardInputs in{b.input_ids, b.attention_mask, {}, {}};
  in.lm_head = false;
  at::Tensor teacher_hidden;
  {
    torch::NoGradGuard no_grad;
    teacher_hidden = teacher.forward(in).last_hidden_state;
  }
  return lm_head_kd_loss(model.forward(in).last_hidden_state, weight, teacher_hidden, teacher_weight.detach(), b.labels, temperature,
                         lm_weight);
}

at::Tensor causal_lm_kd_loss_reference(models::Model& model, models::Model& teacher, const data::LmBatch& batch, double temperature,
                                       double lm_weight) {
  const auto b = data::to_device(batch, models::device_of(model));
  const models::ForwardInputs in{b.input_ids, b.attention_mask, {}, {}};
  at::Tensor teacher_logits;
  {
    torch::NoGradGuard no_grad;
    teacher_logits = teacher.forward(in).logits;
  }
  return kd_loss_from_logits(model.forward(in).logits, teacher_logits, b.labels, temperature, lm_weight);
}

}  // namespace mimic::train
