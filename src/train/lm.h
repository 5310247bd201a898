// Language modelling: the causal-LM loss that pretrain and finetune share (their batches: data/lm_source.h).
#pragma once
#include <ATen/core/Tensor.h>

namespace mimic::models { class Model; }
namespace mimic::data { struct LmBatch; }

namespace mimic::train {

// Mean next-token cross-entropy of a packed batch (labels of -100 are ignored). When the model's LM head is a
// plain product with a weight (Model::lm_head_weight: GPT-2's tied embedding), the head and the loss run
// together chunk by chunk (lm_head_loss, train/lm_head_loss.h) and the [B, T, V] logits are never formed;
// otherwise, and in causal_lm_loss_reference, the logits first and then next_token_loss.
at::Tensor causal_lm_loss(models::Model& model, const data::LmBatch& batch);
at::Tensor causal_lm_loss_reference(models::Model& model, const data::LmBatch& batch);
// The same from logits [B, T, V] and labels [B, T].
at::Tensor next_token_loss(const at::Tensor& logits, const at::Tensor& labels);

// Logit distillation (Hinton et al.; the second stage of RADLADS / Mamba-in-the-Llama conversions):
// T² · KL(softmax(teacher/T) ‖ softmax(student/T)), averaged over the positions whose label is not -100.
// logits: [B, T, V]; the teacher's carry no gradient. T² keeps the gradient's size independent of T.
at::Tensor logit_distillation_loss(const at::Tensor& student_logits, const at::Tensor& teacher_logits, const at::Tensor& labels,
                                   double temperature);
// The loss finetune --kd trains on: (1 − lm_weight) · logit_distillation_loss + lm_weight · next_token_loss, the
// latter only added when lm_weight > 0 (so that a batch with no scored position gives 0, not NaN, without it).
at::Tensor kd_loss_from_logits(const at::Tensor& student_logits, const at::Tensor& teacher_logits, const at::Tensor& labels,
                               double temperature, double lm_weight);

// That loss for `model` distilling `teacher` (no gradient, run under NoGradGuard) on a batch. When both models'
// LM heads are a plain product with a weight (GPT-2), both run without their head and the heads, the KL and
// the LM loss go chunk by chunk (lm_head_kd_loss, train/lm_head_loss.h): neither model's [B, T, V] logits
// are formed. Otherwise, and in causal_lm_kd_loss_reference, both models' logits first, then
// kd_loss_from_logits.
at::Tensor causal_lm_kd_loss(models::Model& model, models::Model& teacher, const data::LmBatch& batch, double temperature,
                             double lm_weight);
at::Tensor causal_lm_kd_loss_reference(models::Model& model, models::Model& teacher, const data::LmBatch& batch, double temperature,
                                       double lm_weight);

}  // namespace mimic::train
