#include "mimic/analysis/teacher.h"

#include <torch/torch.h>

#include "mimic/attention/attention.h"
#include "mimic/attention/distillable.h"

namespace mimic::analysis {

attention::AttentionContext teacher_context(const TeacherBatch& b) {
  attention::AttentionContext ctx;
  ctx.causal = b.causal;
  ctx.key_padding_mask = b.mask;
  ctx.scale = b.scale;
  return ctx;
}

at::Tensor teacher_weights(const TeacherBatch& b) {
  auto a = attention::softmax_weights(b.q, b.k, teacher_context(b));
  return a * visible(b).to(a.dtype());  // exact zeros where the teacher gives no mass (and in padded rows)
}

at::Tensor valid_rows(const TeacherBatch& b) {
  const int64_t n = b.q.size(0), t = b.q.size(2);
  if (!b.mask.defined()) return torch::ones({n, 1, t, 1}, torch::dtype(torch::kBool).device(b.q.device()));
  return b.mask.to(torch::kBool).view({n, 1, t, 1});
}

at::Tensor visible(const TeacherBatch& b) {
  const int64_t n = b.q.size(0), t = b.q.size(2);
  const auto on = torch::dtype(torch::kBool).device(b.q.device());
  auto vis = torch::ones({n, 1, t, t}, on);
  if (b.mask.defined()) vis = vis & b.mask.to(torch::kBool).view({n, 1, 1, t});
  if (b.causal) vis = vis & torch::ones({t, t}, on).tril();
  return vis & valid_rows(b);
}

bool negative_weights(const at::Tensor& w, const TeacherBatch& b) { return ((w.detach() < 0) & visible(b)).any().item<bool>(); }

// A map whose features may be negative (Sign::Any) can still have a positive kernel (taylor2: 1 + q·k + (q·k)²/2);
// true when some visible weight of this batch is negative, i.e. the weights are no distribution.
bool negative_weights(const attention::DistillableKernel& student, const at::Tensor& w, const TeacherBatch& b) {
  return student.weights_may_be_negative() && negative_weights(w, b);
}

}  // namespace mimic::analysis
