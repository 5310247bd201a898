// The LM head and its next-token cross-entropy as one operation: logits = hidden · weightᵀ, then the mean
// cross-entropy against the labels, computed chunk by chunk of tokens so that the [tokens, V] logits never
// exist all at once. What a causal-LM training step spends most of its time on: at gpt2-mini's widths the
// head's three GEMMs are ~3/4 of a step's dense FLOPs, and around them the naive form
// (lm_head_loss_reference) streams four full [tokens, V] tensors — the logits, their log-softmax, the zeroed
// gradient NLL's backward scatters into and log-softmax's backward output —, i.e. 4 × 820 MB at 4,096 tokens
// of gpt2-mini, with two exponentials per logit.
//
// lm_head_loss instead takes, per chunk of rows: the logits (a GEMM), their softmax (one exponential per
// logit), the loss −log p_target from it, and — when a gradient is wanted — softmax − one-hot,
// which is d(loss)/d(logits) up to the 1/N of the mean, multiplied straight into the gradients of the hidden
// states and the weight (two GEMMs, accumulated over the chunks). The gradients are thus computed in the
// forward pass and handed out by backward (scaled by the incoming gradient), as Liger-Kernel's fused linear
// cross-entropy does. Tokens labelled -100 are left out before the first GEMM (their hidden states get a zero
// gradient); with no scored token the loss is NaN and the gradients zero, as the reference's are.
//
// lm_head_kd_loss does the same for logit distillation (finetune --kd): per chunk the student's and the
// teacher's logits (two GEMMs), then, block by block of a few rows that stay in the cache, their softmaxes
// at temperature T, the KL between them and its gradient T·(q − p) (plus the LM loss's part when it is mixed
// in), written over the student's logits and multiplied into the gradients as above. The naive form
// (lm_head_kd_loss_reference) forms nine full [tokens, V] tensors in its forward pass alone (two models'
// logits, both divided by T, two log-softmaxes, p, log p − log q and its product with p), 412 MB each at 2,048
// tokens of GPT-2; the chunked form holds two [chunk, V] tensors (and its blocks), as lm_head_loss does.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mimic::train {

// hidden [..., d] (float), weight [V, d] (same dtype), labels [...] int64 in [0, V) or -100 (ignored), the
// same leading shape as hidden. Returns the mean cross-entropy over the scored tokens, a scalar whose backward
// gives hidden and weight their gradients (for those that require one; a once-differentiable operation).
// chunk_rows: tokens per chunk (0: as many as fit kLmHeadChunkBytes of logits).
at::Tensor lm_head_loss(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels, int64_t chunk_rows = 0);

// The naive form, the reference lm_head_loss is tested against: all logits (hidden · weightᵀ), then
// cross_entropy with ignore_index -100 — what a training step computed before lm_head_loss.
at::Tensor lm_head_loss_reference(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels);

// Logit distillation toward a teacher with the LM loss mixed in, the loss finetune --kd trains on:
//   lm_weight · CE(student) + (1 − lm_weight) · T² · KL(softmax(teacher / T) ‖ softmax(student / T)),
// both means over the rows whose label is not -100 (kd_loss_from_logits in train/lm.h, the definition). Student
// logits = hidden · weightᵀ, teacher logits = teacher_hidden · teacher_weightᵀ, formed chunk by chunk of scored
// rows. hidden, weight and labels as for lm_head_loss; teacher_hidden [..., d_t] with hidden's leading shape,
// teacher_weight [V, d_t] (the teacher gets no gradient; its logits are cast to hidden's type, as the reference
// does). temperature > 0, lm_weight in [0, 1]. With no scored row the loss is 0 when lm_weight is 0, else NaN
// (the KL's mean counts at least one row, the LM loss's is 0/0), and the gradients zero.
// chunk_rows: tokens per chunk (0: as many as keep one [tokens, V] tensor within kLmHeadChunkBytes, as lm_head_loss).
at::Tensor lm_head_kd_loss(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& teacher_hidden, const at::Tensor& teacher_weight,
                           const at::Tensor& labels, double temperature, double lm_weight, int64_t chunk_rows = 0);

// The naive form: both models' logits whole, then kd_loss_from_logits (what finetune --kd computed before).
at::Tensor lm_head_kd_loss_reference(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& teacher_hidden,
                                     const at::Tensor& teacher_weight, const at::Tensor& labels, double temperature, double lm_weight);

// Bytes of logits one chunk may take by default: 128 MiB, 667 tokens of GPT-2's 50,257-token vocabulary. Large
// enough that each chunk's GEMMs run at the full GEMM rate (their inner dimension, the chunk's tokens, is above
// OpenBLAS's own K blocking of a few hundred, so accumulating the weight's gradient chunk by chunk reads and
// writes it no more often than one big GEMM does), small enough to keep a 4K-token step's peak memory a
// fraction of the naive form's.
inline constexpr int64_t kLmHeadChunkBytes = int64_t{128} << 20;

}  // namespace mimic::train
