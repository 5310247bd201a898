#include "mimic/analysis/metrics.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <vector>

#include "mimic/attention/attention.h"
#include "mimic/attention/distillable.h"
#include "mimic/core/error.h"
#include "mimic/core/json_keys.h"
#include "mimic/core/mean.h"
#include "mimic/core/runtime.h"

namespace mimic::analysis {

// Average ranks (1-based; ties share the mean of their positions) of z along the last dimension among the
// valid positions; invalid positions are sorted last and get ranks that the caller ignores.
static at::Tensor average_ranks(const at::Tensor& z_in, const at::Tensor& valid) {
  const int64_t t = z_in.size(-1);
  auto z = torch::where(valid, z_in, torch::full_like(z_in, std::numeric_limits<double>::infinity()));
  auto sorted = z.sort(-1);
  auto s = std::get<0>(sorted), idx = std::get<1>(sorted);
  auto pos = torch::arange(t, z.options()).expand_as(s);
  auto differs = s.narrow(-1, 1, t - 1) != s.narrow(-1, 0, t - 1);  // between p and p+1
  auto yes = torch::ones_like(s.narrow(-1, 0, 1), torch::kBool);
  auto starts = torch::cat({yes, differs}, -1);  // p opens a tie group
  auto ends = torch::cat({differs, yes}, -1);    // p closes one
  auto first = std::get<0>(torch::where(starts, pos, torch::zeros_like(pos)).cummax(-1));
  auto last = std::get<0>(torch::where(ends, pos, torch::full_like(pos, static_cast<double>(t - 1))).flip(-1).cummin(-1)).flip(-1);
  return torch::empty_like(z).scatter_(-1, idx, (first + last) / 2 + 1);
}

at::Tensor spearman_rows(const at::Tensor& x_in, const at::Tensor& y_in, const at::Tensor& valid_in) {
  auto shape = x_in.sizes().vec();
  const int64_t t = shape.back();
  auto x = x_in.to(torch::kDouble).reshape({-1, t});
  auto y = y_in.to(torch::kDouble).expand(x_in.sizes()).reshape({-1, t});
  auto v = valid_in.to(torch::kBool).expand(x_in.sizes()).reshape({-1, t});
  auto vd = v.to(torch::kDouble);
  auto rx = average_ranks(x, v), ry = average_ranks(y, v);
  auto count = vd.sum(-1, true);
  auto mean = (count + 1) / 2;  // the mean of the ranks 1..n, ties or not
  auto dx = (rx - mean) * vd, dy = (ry - mean) * vd;
  auto num = (dx * dy).sum(-1);
  auto den = ((dx * dx).sum(-1) * (dy * dy).sum(-1)).sqrt();
  auto rho = num / den;
  rho = torch::where((count.squeeze(-1) < 2) | (den == 0), torch::full_like(rho, std::numeric_limits<double>::quiet_NaN()), rho);
  shape.pop_back();
  return rho.reshape(shape);
}

at::Tensor top_k_mass(const at::Tensor& w, int64_t k) {
  MIMIC_CHECK(k >= 1, "top-k mass: k must be >= 1, got ", k);
  return std::get<0>(w.topk(std::min<int64_t>(k, w.size(-1)), -1)).sum(-1);
}

MetricsAccumulator::MetricsAccumulator(int64_t layer, int64_t n_head, int64_t top_k)
    : layer_(layer),
      n_head_(n_head),
      top_k_(top_k),
      ce_(n_head),
      ent_s_(n_head),
      ent_l_(n_head),
      rho_(n_head),
      rho_rows_(n_head),
      top_s_(n_head),
      top_l_(n_head) {}

void MetricsAccumulator::add(attention::DistillableKernel& student, const TeacherBatch& b) {
  torch::NoGradGuard no_grad;
  at::Tensor log_w, w;
  auto out = student.forward_quadratic(b.q, b.k, b.v, teacher_context(b), &w, &log_w);
  auto scores = torch::matmul(b.q, b.k.transpose(-1, -2)) * b.scale;
  add_weights(teacher_weights(b), log_w, scores, b, student.weights_may_be_negative() ? w : at::Tensor());
  if (b.o.defined()) {
    auto rows = valid_rows(b).to(out.dtype());
    mse_sum_ += ((out - b.o).square() * rows).sum().item<double>();
    mse_count_ += rows.sum().item<double>() * static_cast<double>(out.size(1) * out.size(3));
  }
}

void MetricsAccumulator::add_weights(const at::Tensor& a_in, const at::Tensor& log_w_in, const at::Tensor& scores,
                                     const TeacherBatch& b, const at::Tensor& signed_weights) {
  torch::NoGradGuard no_grad;
  if (signed_weights.defined() && !signed_) signed_ = negative_weights(signed_weights, b);
  auto vis = visible(b);                           // [B, 1, T, T]
  auto visd = vis.to(torch::kDouble);
  auto a = a_in.to(torch::kDouble) * visd;
  auto log_w = log_w_in.to(torch::kDouble);
  auto w = log_w.exp() * visd;
  auto ce = -(a * log_w).sum({-1});                // [B, H, T]; 0 in padded rows
  auto ent_s = -torch::xlogy(a, a).sum({-1});
  auto ent_l = -(w * log_w).sum({-1});
  // Spearman of the scores and the weights: log w ranks positive weights as w does (and tells apart those that
  // underflow in w); the weights of a kind whose weights may be negative are ranked themselves, in rows whose weights
  // are all finite
  auto rho_ok = valid_rows(b).squeeze(-1);
  at::Tensor rho;
  if (signed_weights.defined()) {
    const auto ws = signed_weights.to(torch::kDouble);
    rho_ok = rho_ok & (ws.isfinite() | vis.logical_not()).all(-1);
    rho = spearman_rows(scores, torch::where(vis, ws, torch::zeros_like(ws)), vis);
  } else {
    rho = spearman_rows(scores, log_w, vis);  // [B, H, T]
  }
  rho_ok = rho_ok & rho.isfinite();
  auto rho0 = torch::where(rho_ok, rho, torch::zeros_like(rho));
  at::Tensor top_s, top_l;  // masked keys and padded rows hold zeros: they add nothing
  if (top_k_ > 0) top_s = top_k_mass(a, top_k_), top_l = top_k_mass(w, top_k_);
  // Each head's sums as before (one reduction per head and quantity), read back in one host copy: a read per head
  // and quantity would wait on a GPU seven times a head.
  std::vector<at::Tensor> sums;
  for (int64_t h = 0; h < n_head_; ++h) {
    for (const at::Tensor* x : {&ce, &ent_s, &ent_l, &rho0}) sums.push_back(x->select(1, h).sum());
    sums.push_back(rho_ok.select(1, h).sum().to(torch::kDouble));
    if (top_k_ > 0) sums.push_back(top_s.select(1, h).sum()), sums.push_back(top_l.select(1, h).sum());
  }
  sums.push_back(valid_rows(b).sum().to(torch::kDouble));
  const auto all = host(torch::stack(sums).to(torch::kDouble));
  const double* x = all.data_ptr<double>();
  for (int64_t h = 0; h < n_head_; ++h) {
    const auto i = static_cast<size_t>(h);
    ce_[i] += *x++;
    ent_s_[i] += *x++;
    ent_l_[i] += *x++;
    rho_[i] += *x++;
    rho_rows_[i] += *x++;
    if (top_k_ > 0) top_s_[i] += *x++, top_l_[i] += *x++;
  }
  rows_ += *x;
}

LayerMetrics MetricsAccumulator::result() const {
  LayerMetrics m;
  m.layer = layer_;
  m.top_k = top_k_;
  const double rows = std::max(rows_, 1.0);
  DefinedMean spearman;  // a head none of whose rows has one (a signed student's normaliser zero) is out of its mean
  for (int64_t h = 0; h < n_head_; ++h) {
    const auto i = static_cast<size_t>(h);
    HeadMetrics x;
    x.ce = ce_[i] / rows;
    x.entropy_softmax = ent_s_[i] / rows;
    x.entropy_linear = ent_l_[i] / rows;
    // KL >= 0 (Gibbs); as a difference of two sums it rounds below 0 where they are equal (a kept head printed
    // -5.6e-10 in report: a probe of 2026-12-03). Only rounding-sized values are taken to 0: a larger negative one
    // would be a defect to see. A NaN stays NaN.
    const double kl = x.ce - x.entropy_softmax;
    x.kl = kl < 0 && kl > -1e-6 ? 0.0 : kl;
    x.top_k_softmax = top_s_[i] / rows;
    x.top_k_linear = top_l_[i] / rows;
    if (signed_) x.ce = x.kl = x.entropy_linear = x.top_k_linear = std::numeric_limits<double>::quiet_NaN();  // not a distribution
    x.spearman = rho_rows_[i] > 0 ? rho_[i] / rho_rows_[i] : std::numeric_limits<double>::quiet_NaN();
    m.heads.push_back(x);
    m.mean.ce += x.ce / static_cast<double>(n_head_);
    m.mean.kl += x.kl / static_cast<double>(n_head_);
    m.mean.entropy_softmax += x.entropy_softmax / static_cast<double>(n_head_);
    m.mean.entropy_linear += x.entropy_linear / static_cast<double>(n_head_);
    spearman.add(x.spearman);
    m.mean.top_k_softmax += x.top_k_softmax / static_cast<double>(n_head_);
    m.mean.top_k_linear += x.top_k_linear / static_cast<double>(n_head_);
  }
  m.mean.spearman = spearman.value();
  m.mse = mse_count_ > 0 ? mse_sum_ / mse_count_ : 0.0;
  return m;
}

nlohmann::json json_number(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

static nlohmann::json head_json(const HeadMetrics& h, bool top_k) {
  nlohmann::json j = {{"ce", json_number(h.ce)},
                      {"kl", json_number(h.kl)},
                      {"entropy_softmax", json_number(h.entropy_softmax)},
                      {"entropy_linear", json_number(h.entropy_linear)},
                      {"spearman", json_number(h.spearman)}};
  if (top_k) j["top_k_softmax"] = json_number(h.top_k_softmax), j["top_k_linear"] = json_number(h.top_k_linear);
  return j;
}

double number_from_json(const nlohmann::json& j, const char* key) {
  return json_key(j, key, "metrics").is_null() ? std::numeric_limits<double>::quiet_NaN() : json_double(j, key, "metrics");
}

static HeadMetrics head_from_json(const nlohmann::json& j) {
  HeadMetrics h;
  h.ce = number_from_json(j, "ce");
  h.kl = number_from_json(j, "kl");
  h.entropy_softmax = number_from_json(j, "entropy_softmax");
  h.entropy_linear = number_from_json(j, "entropy_linear");
  h.spearman = number_from_json(j, "spearman");
  if (j.contains("top_k_softmax")) h.top_k_softmax = number_from_json(j, "top_k_softmax"), h.top_k_linear = number_from_json(j, "top_k_linear");
  return h;
}

nlohmann::json LayerMetrics::to_json() const {
  nlohmann::json heads_j = nlohmann::json::array();
  for (const auto& h : heads) heads_j.push_back(head_json(h, top_k > 0));
  nlohmann::json j = {{"layer", layer}, {"mean", head_json(mean, top_k > 0)}, {"heads", heads_j}, {"mse", json_number(mse)}};
  if (top_k > 0) j["top_k"] = top_k;
  return j;
}

LayerMetrics LayerMetrics::from_json(const nlohmann::json& j) {
  LayerMetrics m;
  m.layer = json_int(j, "layer", "metrics", 0);
  m.top_k = json_int_or(j, "top_k", "metrics", 0, 0);
  m.mean = head_from_json(json_key(j, "mean", "metrics"));
  const auto& heads = json_key(j, "heads", "metrics");
  MIMIC_CHECK(heads.is_array(), "metrics: key 'heads' must be a list, got ", heads.dump().substr(0, 80));
  for (const auto& h : heads) m.heads.push_back(head_from_json(h));
  m.mse = number_from_json(j, "mse");
  return m;
}

}  // namespace mimic::analysis
