// The distillation loss: cross-entropy between the teacher's softmax weights and the student's, the MSE between
// their per-head outputs, or a weighted sum (distill.h). Its teacher side (weights, masks) is analysis/teacher.h.
#include "mimic/distill/distill.h"

#include <torch/torch.h>

#include "mimic/analysis/teacher.h"
#include "mimic/attention/distillable.h"
#include "mimic/core/error.h"

namespace mimic::distill {

using analysis::TeacherBatch;
using analysis::teacher_weights;
using analysis::valid_rows;
using attention::DistillableKernel;

LossKind parse_loss(const std::string& name) {
  if (name == "ce") return LossKind::CE;
  if (name == "mse") return LossKind::MSE;
  if (name == "ce+mse") return LossKind::CEMSE;
  fail("unknown distillation loss '", name, "' (known: ce, mse, ce+mse)");
}

std::string loss_name(LossKind k) {
  switch (k) {
    case LossKind::CE: return "ce";
    case LossKind::MSE: return "mse";
    case LossKind::CEMSE: return "ce+mse";
  }
  return "?";
}

LossValue distill_loss(DistillableKernel& student, const TeacherBatch& b, const LossSpec& spec) {
  MIMIC_CHECK(student.weights_are_distribution() || spec.kind == LossKind::MSE, "attention kind '", student.kind(),
              "' has weights that are no distribution: the ce loss is undefined for it; use --loss mse");
  at::Tensor log_w, w;
  const bool check = spec.kind != LossKind::MSE && student.weights_may_be_negative();
  // The CE loss reads the weights only: the output's work is skipped where the kind can (weights_quadratic).
  at::Tensor out;
  if (spec.kind == LossKind::CE)
    student.weights_quadratic(b.q, b.k, b.v, analysis::teacher_context(b), check ? &w : nullptr, &log_w);
  else
    out = student.forward_quadratic(b.q, b.k, b.v, analysis::teacher_context(b), check ? &w : nullptr, &log_w);
  MIMIC_CHECK(!check || !analysis::negative_weights(student, w, b), "feature map '", student.feature_map(),
              "' gives negative attention weights: they are no distribution and the ce loss is undefined; use --loss mse");
  auto rows = valid_rows(b).to(log_w.dtype());                // [B, 1, T, 1]
  const double n_rows = rows.sum().item<double>() * static_cast<double>(b.q.size(1));  // real rows × heads
  MIMIC_CHECK(n_rows > 0, "distillation: a batch without any real token");
  LossValue r;
  if (spec.kind != LossKind::MSE) {
    at::Tensor a;
    {
      torch::NoGradGuard no_grad;
      a = teacher_weights(b);
    }
    r.ce = -(a * log_w).sum() / n_rows;  // a is 0 outside the visible keys and in padded rows
  }
  if (spec.kind != LossKind::CE) {
    MIMIC_CHECK(b.o.defined(), "distillation: the mse loss needs the teacher's per-head outputs");
    r.mse = ((out - b.o).square() * rows).sum() / (n_rows * static_cast<double>(out.size(3)));
  }
  switch (spec.kind) {
    case LossKind::CE: r.total = r.ce; break;
    case LossKind::MSE: r.total = r.mse; break;
    case LossKind::CEMSE: r.total = spec.ce_weight * r.ce + spec.mse_weight * r.mse; break;
  }
  return r;
}

}  // namespace mimic::distill
