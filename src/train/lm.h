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

}  // namespace mimic::train
