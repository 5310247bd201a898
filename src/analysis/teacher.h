// The teacher side of attention analysis, shared by distill (training) and report (figures): a layer's
// q, k, v as the softmax teacher saw them, its weights and which positions count.
#pragma once
#include <ATen/core/Tensor.h>

namespace mimic::attention {
class DistillableKernel;
struct AttentionContext;
}  // namespace mimic::attention

namespace mimic::analysis {

// What a layer's attention consumed, as the teacher saw it.
struct TeacherBatch {
  at::Tensor q, k, v;  // [B, H, T, d]
  at::Tensor o;        // [B, H, T, d] the softmax per-head output (needed for mse)
  at::Tensor mask;     // bool [B, T], true = real token (undefined = none)
  double scale = 1.0;
  bool causal = true;
};

// The teacher's weights softmax(q kᵀ·scale + mask), [B, H, T, T] (0 at masked keys), computed by the
// softmax kernel itself.
at::Tensor teacher_weights(const TeacherBatch& b);
// bool [B, 1, T, T]: key j is visible to query i (causal and key padding), and query i is a real token.
at::Tensor visible(const TeacherBatch& b);
// bool [B, 1, T, 1]: query rows that count (real tokens).
at::Tensor valid_rows(const TeacherBatch& b);

// The kernel context of a batch (causality, key padding, scale), as the teacher ran.
attention::AttentionContext teacher_context(const TeacherBatch& b);

// True when some weight of w [B, H, T, T] that the batch's query sees is negative (a sign-free map such as
// identity): such weights are no distribution.
bool negative_weights(const at::Tensor& w, const TeacherBatch& batch);

// The same for a student's weights: only a kernel whose weights may be negative can give them.
bool negative_weights(const attention::DistillableKernel& student, const at::Tensor& w, const TeacherBatch& batch);

}  // namespace mimic::analysis
