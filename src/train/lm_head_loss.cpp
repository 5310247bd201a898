#include "mimic/train/lm_head_loss.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "mimic/core/error.h"
#include "mimic/core/precision.h"
#include "mimic/train/lm.h"

namespace mimic::train {

namespace {

constexpr int64_t kIgnore = -100;
// Below this a target's softmax probability is not trusted for its log (float's normal range ends at 1.2e-38).
constexpr double kTinyProbability = 1e-30;
// Rows of [rows, V] values distillation_chunk takes per block: 2 MiB (10 rows of GPT-2's vocabulary in float), so
// that the five such tensors a block touches, times the threads that each work on a block, stay within the
// last-level cache (32 MiB on the machine the numbers in docs come from) beside other work.
constexpr int64_t kDistillationBlockBytes = int64_t{2} << 20;

struct HeadPass {
  at::Tensor loss;                        // mean over the scored rows (scalar of hidden's type)
  at::Tensor grad_hidden, grad_weight;    // d(loss)/d(hidden) [N, d], d(loss)/d(weight) [V, d]; undefined if not wanted
};

// One chunk's rows: the student's hidden states [c, d], their labels [c, 1] and, for a loss that needs them,
// the same rows of the teacher's hidden states [c, d_t] (undefined otherwise).
struct ChunkRows {
  at::Tensor hidden, labels, teacher_hidden;
};
// What a chunk contributes: its rows' losses summed and, when a gradient is wanted, d(that sum)/d(logits)
// [c, V] divided by grad_scale — a constant a loss may leave out of its [c, V] passes, since the GEMMs that
// take the gradient on multiply by it at no cost.
struct ChunkLoss {
  double loss_sum = 0;
  at::Tensor grad_logits;
  double grad_scale = 1;
};
using ChunkFn = std::function<ChunkLoss(const ChunkRows& rows, bool want_grad)>;

// Rows per chunk: chunk_rows when given, else as many as keep one [c, V] tensor within kLmHeadChunkBytes.
int64_t chunk_size(int64_t chunk_rows, const at::Tensor& weight) {
  return std::max<int64_t>(1, chunk_rows > 0 ? chunk_rows : kLmHeadChunkBytes / (weight.size(0) * static_cast<int64_t>(weight.element_size())));
}

// The chunked pass shared by the head's losses, over hidden [N, d], labels [N] and (for distillation)
// teacher_hidden [N, d_t]: the scored rows are picked, cut into chunks of `chunk` rows, each chunk's loss
// computes its logits and their gradient (chunk_loss), and that gradient goes straight into the gradients of
// the hidden states and the weight. no_row_loss: the loss when no row is scored. want_*: form that gradient.
HeadPass head_pass(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels, const at::Tensor& teacher_hidden,
                   int64_t chunk, double no_row_loss, bool want_hidden, bool want_weight, const ChunkFn& chunk_loss) {
  const int64_t n = hidden.size(0), d = hidden.size(1), vocab = weight.size(0);
  auto scored = labels.ne(kIgnore);
  const int64_t n_scored = scored.sum().item<int64_t>();
  // Only the scored rows enter the GEMMs: padding and prompt tokens cost nothing.
  const bool all = n_scored == n;
  at::Tensor rows = all ? at::Tensor() : scored.nonzero().squeeze(1);
  auto take = [&](const at::Tensor& x) { return all || !x.defined() ? x : x.index_select(0, rows); };
  at::Tensor h = take(hidden), y = take(labels), th = take(teacher_hidden);
  if (n_scored > 0) {
    const int64_t lo = y.min().item<int64_t>(), hi = y.max().item<int64_t>();
    MIMIC_CHECK(lo >= 0 && hi < vocab, "LM loss: label ", lo < 0 ? lo : hi, " is outside the vocabulary of ", vocab, " (and not -100)");
  }
  // The mean's 1/N folded into the GEMMs' alpha. No scored row: no chunk runs and the gradients stay zero.
  const double scale = n_scored > 0 ? 1.0 / static_cast<double>(n_scored) : 0.0;
  at::Tensor grad_h = want_hidden ? at::zeros({n_scored, d}, hidden.options()) : at::Tensor();
  at::Tensor grad_w = want_weight ? at::zeros(weight.sizes(), weight.options()) : at::Tensor();
  double loss_sum = 0;
  for (int64_t s = 0; s < n_scored; s += chunk) {
    const int64_t c = std::min(chunk, n_scored - s);
    ChunkRows r{h.narrow(0, s, c), y.narrow(0, s, c).unsqueeze(1), th.defined() ? th.narrow(0, s, c) : at::Tensor()};
    auto part = chunk_loss(r, want_hidden || want_weight);
    loss_sum += part.loss_sum;
    if (want_hidden) grad_h.narrow(0, s, c).addmm_(part.grad_logits, weight, 1.0, scale * part.grad_scale);
    if (want_weight) grad_w.addmm_(part.grad_logits.t(), r.hidden, 1.0, scale * part.grad_scale);
  }
  HeadPass out;
  out.loss = at::scalar_tensor(n_scored > 0 ? loss_sum * scale : no_row_loss, hidden.options());
  if (want_hidden) out.grad_hidden = all ? grad_h : at::zeros({n, d}, hidden.options()).index_copy_(0, rows, grad_h);
  out.grad_weight = grad_w;
  return out;
}

// lm_head_loss's chunk: the logits (a GEMM), their softmax (one exponential per logit), the loss −log p_target
// from it, and softmax − one-hot, d(loss)/d(logits).
ChunkLoss cross_entropy_chunk(const ChunkRows& r, bool want_grad, const at::Tensor& weight) {
  auto logits = at::mm(r.hidden, weight.t());  // [c, V]
  auto p = at::softmax(logits, 1);
  // The loss from p itself, −log p_target, without a log-softmax pass of its own. Exact to float rounding
  // while p_target is a normal float; a target so far below the row's maximum that p_target nears the
  // underflow (a loss above ~69 nats) takes the row's log-sum-exp from its logits instead.
  auto p_target = p.gather(1, r.labels);
  auto losses = -p_target.log();
  auto tiny = p_target.lt(kTinyProbability).squeeze(1);
  if (tiny.any().item<bool>()) {
    auto far = tiny.nonzero().squeeze(1);
    auto z = logits.index_select(0, far);
    losses.index_put_({far}, z.logsumexp(1, /*keepdim=*/true) - z.gather(1, r.labels.index_select(0, far)));
  }
  logits.reset();  // the chunk's logits are not needed again: the next tensors may reuse their memory
  ChunkLoss out;
  out.loss_sum = losses.sum().item<double>();
  if (!want_grad) return out;
  // d(loss_i)/d(z_i) = softmax(z_i) − onehot(y_i)
  out.grad_logits = p.scatter_add_(1, r.labels, at::full({r.labels.size(0), 1}, -1.0, p.options()));
  return out;
}

// Softmax of the rows of x into `out`, and their log-sum-exp without a pass of exponentials of its own: a row's
// largest probability is exp(0)/Σ = 1/Σ exactly, so logsumexp = max(x) − log(max p).
at::Tensor softmax_and_logsumexp(at::Tensor& out, const at::Tensor& x) {
  at::_softmax_out(out, x, 1, false);
  return x.amax(1) - out.amax(1).log();
}

// lm_head_kd_loss's chunk, with a = 1 − lm_weight the distillation's share and b = lm_weight the LM loss's. Per
// row, with z' = z/T and t' = t/T, q = softmax(z') the student's and p = softmax(t') the teacher's tempered
// distributions, log q_v = z'_v − lse(z'), log p_v = t'_v − lse(t'):
//
//   T²·KL(p ‖ q) = T² Σ_v p_v (log p_v − log q_v) = T² [Σ_v p_v (t'_v − z'_v) − lse(t') + lse(z')]   (Σ_v p_v = 1),
//   d/dz_j = −T² Σ_v p_v d(log q_v)/dz_j = −T² Σ_v p_v (δ_vj − q_j)/T = T·(q_j − p_j),
//
// and the LM loss's d/dz_j = softmax(z)_j − onehot(y)_j, so d(loss_i)/d(z_i) = a·T·(q − p) + b·(softmax(z) − onehot).
// The KL's value takes no log of a probability: where the teacher gives a token probability 0 (below the
// type's range), p_v = 0 multiplies the finite t'_v − z'_v and the term is exactly 0, as its limit p log p → 0
// is; where the student does (q_v = 0), the term p_v (t'_v − z'_v) stays large and finite, as it should. The
// LM loss −log softmax(z)_y = lse(z) − z_y is finite however far the target lies.
//
// The chunk's two GEMMs write the student's and the teacher's logits [c, V]; the rest — two softmaxes (the
// only exponentials: one per logit and model), row maxima, the KL's terms and the gradient, about ten passes
// over [c, V] values — runs block by block of kDistillationBlockBytes of rows, so that those passes read and
// write the cache rather than memory, and the gradient overwrites the student's logits in place. Two [c, V]
// tensors are alive at once, as in lm_head_loss.
ChunkLoss distillation_chunk(const ChunkRows& r, bool want_grad, const at::Tensor& weight, const at::Tensor& teacher_weight,
                             double temperature, double lm_weight) {
  const double a = 1 - lm_weight, b = lm_weight, inv_t = 1 / temperature;
  const bool lm = b > 0, kd = a > 0, tempered = temperature != 1;
  const int64_t c = r.hidden.size(0), vocab = weight.size(0);
  // The student's logits; with the KL alone at 1/T, 1/T folded into the GEMM's input ([c, d] multiplications
  // instead of [c, V]).
  auto z = at::mm(kd && !lm && tempered ? r.hidden * inv_t : r.hidden, weight.t());
  at::Tensor t;  // the teacher's logits at 1/T, in the student's type
  if (kd) {
    auto th = r.teacher_hidden.detach();
    t = at::mm(tempered ? th * inv_t : th, teacher_weight.detach().t()).to(z.scalar_type());
  }
  const int64_t block = std::max<int64_t>(1, kDistillationBlockBytes / (vocab * static_cast<int64_t>(z.element_size())));
  const int64_t n_blocks = (c + block - 1) / block;
  // Each block's LM-loss and KL sums, added up in block order afterwards (the same result whatever the threads).
  std::vector<double> lm_part(static_cast<size_t>(n_blocks)), kl_part(static_cast<size_t>(n_blocks));
  // The blocks are shared out among the threads, each running its blocks' operators on its own: one parallel
  // region per chunk rather than one per operator and block (some 2,000 per step at 2,048 tokens), each a
  // wait for the slowest thread — which, on a machine shared with other work, is a descheduled one.
  at::parallel_for(0, n_blocks, 1, [&](int64_t first, int64_t last) {
    const int64_t rows = std::min(block, c);
    // This thread's buffers: softmax(z) (the LM loss's), q = softmax(z/T) (the same when T = 1), p = softmax(t/T).
    auto buffer = [&](bool needed) { return needed ? at::empty({rows, vocab}, z.options()) : at::Tensor(); };
    at::Tensor s_buf = buffer(lm), q_buf = buffer(kd && !(lm && !tempered)), p_buf = buffer(kd);
    for (int64_t i = first; i < last; ++i) {
      const int64_t s = i * block, n = std::min(block, c - s);
      auto zb = z.narrow(0, s, n), yb = r.labels.narrow(0, s, n);
      auto rows_of = [&](const at::Tensor& buf) { return buf.defined() ? buf.narrow(0, 0, n) : at::Tensor(); };
      at::Tensor sm = rows_of(s_buf), q = rows_of(q_buf), p = rows_of(p_buf);
      if (lm) {  // −log softmax(z)_y = logsumexp(z) − z_y
        auto lse = softmax_and_logsumexp(sm, zb);
        lm_part[static_cast<size_t>(i)] = (lse - zb.gather(1, yb).squeeze(1)).sum().item<double>();
      }
      if (kd) {
        // zb becomes z/T (it already is with the KL alone); t is at 1/T.
        at::Tensor lse_q;
        if (lm && !tempered) {
          q = sm;
          lse_q = zb.amax(1) - sm.amax(1).log();
        } else {
          lse_q = softmax_and_logsumexp(q, lm ? zb.mul_(inv_t) : zb);
        }
        auto tb = t.narrow(0, s, n);
        auto lse_p = softmax_and_logsumexp(p, tb);
        // Σ_v p_v (log p_v − log q_v) with log p_v = t_v − lse_p, log q_v = z_v − lse_q and Σ_v p_v = 1
        kl_part[static_cast<size_t>(i)] = (tb.sub_(zb).mul_(p).sum(1) - lse_p + lse_q).sum().item<double>();
      }
      if (!want_grad) continue;
      // The gradient, into the student's logits (no longer needed), with the factor out.grad_scale left out.
      auto one_hot_minus = [&](double w) { zb.scatter_add_(1, yb, at::full({n, 1}, -w, zb.options())); };
      if (!kd) {  // the LM loss alone: softmax(z) − onehot
        zb.copy_(sm);
        one_hot_minus(1.0);
      } else if (!lm) {  // the KL alone: T·(q − p), its T left out
        at::sub_out(zb, q, p);
      } else if (!tempered) {  // T = 1, q = softmax(z): a(q − p) + b(q − onehot) = q − a·p − b·onehot
        at::sub_out(zb, q, p, a);
        one_hot_minus(b);
      } else {  // a·T·[(q − p) + b/(aT)·(softmax(z) − onehot)], its a·T left out
        at::sub_out(zb, q, p).add_(sm, b / (a * temperature));
        one_hot_minus(b / (a * temperature));
      }
    }
  });
  double lm_sum = 0, kl_sum = 0;
  for (int64_t i = 0; i < n_blocks; ++i) {
    lm_sum += lm_part[static_cast<size_t>(i)];
    kl_sum += kl_part[static_cast<size_t>(i)];
  }
  ChunkLoss out;
  out.loss_sum = b * lm_sum + a * temperature * temperature * kl_sum;
  if (!want_grad) return out;
  out.grad_logits = z;
  out.grad_scale = !kd ? 1.0 : !lm ? temperature : !tempered ? 1.0 : a * temperature;
  return out;
}

// Autograd's view of a head pass: forward runs it and keeps the gradients the inputs need, backward hands them
// out times the incoming gradient (a scalar). Not twice differentiable. `pass` (the loss's own, taking want_hidden
// and want_weight) holds any input that gets no gradient, such as the teacher's.
using PassFn = std::function<HeadPass(bool want_hidden, bool want_weight)>;
struct HeadLoss : public torch::autograd::Function<HeadLoss> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& hidden, const at::Tensor& weight, const PassFn& pass) {
    auto r = pass(hidden.requires_grad(), weight.requires_grad());
    ctx->saved_data["has_hidden"] = r.grad_hidden.defined();
    ctx->saved_data["has_weight"] = r.grad_weight.defined();
    if (r.grad_hidden.defined()) ctx->saved_data["grad_hidden"] = r.grad_hidden.view(hidden.sizes());
    if (r.grad_weight.defined()) ctx->saved_data["grad_weight"] = r.grad_weight;
    return r.loss;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grad) {
    const auto& g = grad[0];
    at::Tensor gh, gw;
    if (ctx->saved_data["has_hidden"].toBool()) gh = ctx->saved_data["grad_hidden"].toTensor() * g;
    if (ctx->saved_data["has_weight"].toBool()) gw = ctx->saved_data["grad_weight"].toTensor() * g;
    return {gh, gw, at::Tensor()};
  }
};

// The loss of `pass` with a gradient for hidden and weight when one is wanted, a plain value otherwise.
at::Tensor head_loss(const at::Tensor& hidden, const at::Tensor& weight, const PassFn& pass) {
  if (!at::GradMode::is_enabled() || (!hidden.requires_grad() && !weight.requires_grad())) return pass(false, false).loss;
  return HeadLoss::apply(hidden, weight, pass);
}

void check_shapes(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels) {
  MIMIC_CHECK(hidden.dim() >= 1 && weight.dim() == 2 && hidden.size(-1) == weight.size(1) && labels.numel() * hidden.size(-1) == hidden.numel(),
              "LM loss: needs hidden [..., d], weight [V, d] and one label per hidden row, got ", hidden.sizes(), ", ", weight.sizes(),
              ", ", labels.sizes());
  MIMIC_CHECK(labels.scalar_type() == at::kLong, "LM loss: labels must be int64");
  MIMIC_CHECK(hidden.is_floating_point() && hidden.scalar_type() == weight.scalar_type(),
              "LM loss: hidden and weight must share one floating type, got ", hidden.scalar_type(), " and ", weight.scalar_type());
}

void check_distillation(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& teacher_hidden, const at::Tensor& teacher_weight,
                        const at::Tensor& labels, double temperature, double lm_weight) {
  check_shapes(hidden, weight, labels);
  MIMIC_CHECK(teacher_hidden.dim() >= 1 && teacher_weight.dim() == 2 && teacher_hidden.size(-1) == teacher_weight.size(1) &&
                  teacher_hidden.numel() == labels.numel() * teacher_hidden.size(-1) && teacher_weight.size(0) == weight.size(0),
              "logit distillation: needs the teacher's hidden states [..., d_t], one per label, and its head's weight [V, d_t] with the "
              "student's V = ", weight.size(0), ", got ", teacher_hidden.sizes(), " and ", teacher_weight.sizes());
  MIMIC_CHECK(teacher_hidden.is_floating_point() && teacher_hidden.scalar_type() == teacher_weight.scalar_type(),
              "logit distillation: the teacher's hidden states and weight must share one floating type, got ", teacher_hidden.scalar_type(),
              " and ", teacher_weight.scalar_type());
  MIMIC_CHECK(temperature > 0 && std::isfinite(temperature), "the distillation temperature must be > 0, got ", temperature);
  MIMIC_CHECK(lm_weight >= 0 && lm_weight <= 1, "the LM loss's weight beside distillation must lie in [0, 1], got ", lm_weight);
}

// A bf16 step's hidden states (autocast's output) in the head weight's wider type; the cast is differentiable, so the
// gradient goes back in the hidden states' own type. Only a 16-bit float is widened: any other mismatch (double
// hidden states against a float weight) stays the error check_shapes names.
at::Tensor in_type_of(const at::Tensor& hidden, const at::Tensor& weight) {
  const bool half_width = hidden.scalar_type() == at::kBFloat16 || hidden.scalar_type() == at::kHalf;
  return half_width && weight.scalar_type() != hidden.scalar_type() ? hidden.to(weight.scalar_type()) : hidden;
}

}  // namespace

at::Tensor lm_head_loss(const at::Tensor& hidden_in, const at::Tensor& weight, const at::Tensor& labels, int64_t chunk_rows) {
  // In a bf16 step the head stays float (mimic/core/precision.h): its logits' softmax over a 50k vocabulary is
  // where bf16's 8-bit mantissa would cost most, and the chunked gradients accumulate in the weight's type.
  AutocastOff fp32;
  const auto hidden = in_type_of(hidden_in, weight);
  check_shapes(hidden, weight, labels);
  const auto h = hidden.reshape({-1, hidden.size(-1)}), y = labels.reshape({-1});
  const int64_t chunk = chunk_size(chunk_rows, weight);
  auto chunk_loss = [&](const ChunkRows& r, bool want_grad) { return cross_entropy_chunk(r, want_grad, weight); };
  // no scored row: the loss is 0/0 = NaN, as cross_entropy's
  return head_loss(hidden, weight, [&](bool want_hidden, bool want_weight) {
    return head_pass(h, weight, y, {}, chunk, std::numeric_limits<double>::quiet_NaN(), want_hidden, want_weight, chunk_loss);
  });
}

at::Tensor lm_head_loss_reference(const at::Tensor& hidden_in, const at::Tensor& weight, const at::Tensor& labels) {
  AutocastOff fp32;  // float in a bf16 step, as lm_head_loss
  const auto hidden = in_type_of(hidden_in, weight);
  check_shapes(hidden, weight, labels);
  auto logits = torch::matmul(hidden, weight.t());
  return next_token_loss(logits.reshape({-1, logits.size(-1)}), labels.reshape({-1}));
}

at::Tensor lm_head_kd_loss(const at::Tensor& hidden_in, const at::Tensor& weight, const at::Tensor& teacher_hidden_in, const at::Tensor& teacher_weight,
                           const at::Tensor& labels, double temperature, double lm_weight, int64_t chunk_rows) {
  AutocastOff fp32;  // as lm_head_loss: float in a bf16 step
  const auto hidden = in_type_of(hidden_in, weight), teacher_hidden = in_type_of(teacher_hidden_in, teacher_weight);
  check_distillation(hidden, weight, teacher_hidden, teacher_weight, labels, temperature, lm_weight);
  const auto h = hidden.reshape({-1, hidden.size(-1)}), th = teacher_hidden.reshape({-1, teacher_hidden.size(-1)}), y = labels.reshape({-1});
  const int64_t chunk = chunk_size(chunk_rows, weight);
  auto chunk_loss = [&](const ChunkRows& r, bool want_grad) {
    return distillation_chunk(r, want_grad, weight, teacher_weight, temperature, lm_weight);
  };
  // No scored row: the KL's mean is 0 (logit_distillation_loss divides by at least 1), the LM loss's NaN; the
  // reference adds the LM loss only when it is weighted.
  const double no_row_loss = lm_weight > 0 ? std::numeric_limits<double>::quiet_NaN() : 0.0;
  return head_loss(hidden, weight, [&](bool want_hidden, bool want_weight) {
    return head_pass(h, weight, y, th, chunk, no_row_loss, want_hidden, want_weight, chunk_loss);
  });
}

at::Tensor lm_head_kd_loss_reference(const at::Tensor& hidden_in, const at::Tensor& weight, const at::Tensor& teacher_hidden_in,
                                     const at::Tensor& teacher_weight, const at::Tensor& labels, double temperature, double lm_weight) {
  AutocastOff fp32;  // float in a bf16 step, as lm_head_kd_loss
  const auto hidden = in_type_of(hidden_in, weight), teacher_hidden = in_type_of(teacher_hidden_in, teacher_weight);
  check_distillation(hidden, weight, teacher_hidden, teacher_weight, labels, temperature, lm_weight);
  const int64_t vocab = weight.size(0);
  auto student = torch::matmul(hidden, weight.t()).reshape({1, -1, vocab});
  auto teacher = torch::matmul(teacher_hidden.detach(), teacher_weight.detach().t()).reshape({1, -1, vocab});
  return kd_loss_from_logits(student, teacher, labels.reshape({1, -1}), temperature, lm_weight);
}

}  // namespace mimic::train
