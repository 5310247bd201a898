#include "mimic/train/lm_head_loss.h"

#include <torch/torch.h>

#include <algorithm>
#include <limits>

#include "mimic/core/error.h"

namespace mimic::train {

namespace {

constexpr int64_t kIgnore = -100;
// Below this a target's softmax probability is not trusted for its log (float's normal range ends at 1.2e-38).
constexpr double kTinyProbability = 1e-30;

struct HeadPass {
  at::Tensor loss;                        // mean over the scored rows (float scalar)
  at::Tensor grad_hidden, grad_weight;    // d(loss)/d(hidden) [N, d], d(loss)/d(weight) [V, d]; undefined if not wanted
};

// The chunked pass over hidden [N, d] and labels [N] (see the header). want_*: form that gradient.
HeadPass head_pass(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels, int64_t chunk_rows,
                   bool want_hidden, bool want_weight) {
  const int64_t n = hidden.size(0), d = hidden.size(1), vocab = weight.size(0);
  auto scored = labels.ne(kIgnore);
  const int64_t n_scored = scored.sum().item<int64_t>();
  // Only the scored rows enter the GEMMs: padding and prompt tokens cost nothing.
  const bool all = n_scored == n;
  at::Tensor rows = all ? at::Tensor() : scored.nonzero().squeeze(1);
  at::Tensor h = all ? hidden : hidden.index_select(0, rows);
  at::Tensor y = all ? labels : labels.index_select(0, rows);
  if (n_scored > 0) {
    const int64_t lo = y.min().item<int64_t>(), hi = y.max().item<int64_t>();
    MIMIC_CHECK(lo >= 0 && hi < vocab, "LM loss: label ", lo < 0 ? lo : hi, " is outside the vocabulary of ", vocab, " (and not -100)");
  }
  const int64_t chunk = std::max<int64_t>(1, chunk_rows > 0 ? chunk_rows : kLmHeadChunkBytes / (vocab * static_cast<int64_t>(hidden.element_size())));
  // The mean's 1/N folded into the GEMMs' alpha. No scored row: no chunk runs, the gradients stay zero and the
  // loss is 0/0 = NaN, as cross_entropy's.
  const double scale = n_scored > 0 ? 1.0 / static_cast<double>(n_scored) : 0.0;
  at::Tensor grad_h = want_hidden ? at::zeros({n_scored, d}, hidden.options()) : at::Tensor();
  at::Tensor grad_w = want_weight ? at::zeros(weight.sizes(), weight.options()) : at::Tensor();
  const auto wt = weight.t();
  double loss_sum = 0;
  for (int64_t s = 0; s < n_scored; s += chunk) {
    const int64_t c = std::min(chunk, n_scored - s);
    auto hc = h.narrow(0, s, c);
    auto yc = y.narrow(0, s, c).unsqueeze(1);
    auto logits = at::mm(hc, wt);  // [c, V]
    auto p = at::softmax(logits, 1);
    // The loss from p itself, −log p_target, without a log-softmax pass of its own. Exact to float rounding
    // while p_target is a normal float; a target so far below the row's maximum that p_target nears the
    // underflow (a loss above ~69 nats) takes the row's log-sum-exp from its logits instead.
    auto p_target = p.gather(1, yc);
    auto losses = -p_target.log();
    auto tiny = p_target.lt(kTinyProbability).squeeze(1);
    if (tiny.any().item<bool>()) {
      auto far = tiny.nonzero().squeeze(1);
      auto z = logits.index_select(0, far);
      losses.index_put_({far}, z.logsumexp(1, /*keepdim=*/true) - z.gather(1, yc.index_select(0, far)));
    }
    logits.reset();  // the chunk's logits are not needed again: the next chunk may reuse their memory
    loss_sum += losses.sum().item<double>();
    if (!want_hidden && !want_weight) continue;
    // d(loss_i)/d(z_i) = softmax(z_i) − onehot(y_i), times 1/N (alpha below).
    p.scatter_add_(1, yc, at::full({c, 1}, -1.0, p.options()));
    if (want_hidden) grad_h.narrow(0, s, c).addmm_(p, weight, 1.0, scale);
    if (want_weight) grad_w.addmm_(p.t(), hc, 1.0, scale);
  }
  HeadPass out;
  out.loss = at::scalar_tensor(n_scored > 0 ? loss_sum * scale : std::numeric_limits<double>::quiet_NaN(), hidden.options());
  if (want_hidden) out.grad_hidden = all ? grad_h : at::zeros({n, d}, hidden.options()).index_copy_(0, rows, grad_h);
  out.grad_weight = grad_w;
  return out;
}

// Autograd's view of the pass: forward computes the loss and the gradients the inputs need, backward hands
// them out times the incoming gradient (a scalar). Not twice differentiable.
struct LmHeadLoss : public torch::autograd::Function<LmHeadLoss> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& hidden, const at::Tensor& weight,
                            const at::Tensor& labels, int64_t chunk_rows) {
    const int64_t d = hidden.size(-1);
    auto r = head_pass(hidden.reshape({-1, d}), weight, labels.reshape({-1}), chunk_rows, hidden.requires_grad(), weight.requires_grad());
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
    return {gh, gw, at::Tensor(), at::Tensor()};
  }
};

void check_shapes(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels) {
  MIMIC_CHECK(hidden.dim() >= 1 && weight.dim() == 2 && hidden.size(-1) == weight.size(1) && labels.numel() * hidden.size(-1) == hidden.numel(),
              "LM loss: needs hidden [..., d], weight [V, d] and one label per hidden row, got ", hidden.sizes(), ", ", weight.sizes(),
              ", ", labels.sizes());
  MIMIC_CHECK(labels.scalar_type() == at::kLong, "LM loss: labels must be int64");
  MIMIC_CHECK(hidden.is_floating_point() && hidden.scalar_type() == weight.scalar_type(),
              "LM loss: hidden and weight must share one floating type, got ", hidden.scalar_type(), " and ", weight.scalar_type());
}

}  // namespace

at::Tensor lm_head_loss(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels, int64_t chunk_rows) {
  check_shapes(hidden, weight, labels);
  if (!at::GradMode::is_enabled() || (!hidden.requires_grad() && !weight.requires_grad()))
    return head_pass(hidden.reshape({-1, hidden.size(-1)}), weight, labels.reshape({-1}), chunk_rows, false, false).loss;
  return LmHeadLoss::apply(hidden, weight, labels, chunk_rows);
}

at::Tensor lm_head_loss_reference(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels) {
  check_shapes(hidden, weight, labels);
  auto logits = torch::matmul(hidden, weight.t());
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), labels.reshape({-1}),
                                              torch::nn::functional::CrossEntropyFuncOptions().ignore_index(kIgnore));
}

}  // namespace mimic::train
