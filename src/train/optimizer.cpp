#include "mimic/train/optimizer.h"

#include <torch/torch.h>

#include <cmath>
#include <map>

#include "mimic/core/error.h"

namespace mimic::train {

bool exempt_from_weight_decay(const std::string& name, const at::Tensor& p) {
  auto ends_with = [&](const std::string& s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  return p.dim() < 2 || ends_with("bias") || name.find("LayerNorm") != std::string::npos ||
         name.find("ln_") != std::string::npos || name.find("norm") != std::string::npos;
}

AdamW::AdamW(std::vector<std::pair<std::string, at::Tensor>> params, AdamWOptions options)
    : params_(std::move(params)), o_(options) {
  for (auto& [name, p] : params_) {
    decay_.push_back(!exempt_from_weight_decay(name, p));
    m_.push_back(torch::zeros_like(p));
    v_.push_back(torch::zeros_like(p));
  }
}

void AdamW::zero_grad() {
  for (auto& [name, p] : params_)
    if (p.grad().defined()) p.mutable_grad() = at::Tensor();
}

void AdamW::step(double lr) {
  torch::NoGradGuard no_grad;
  ++step_;
  const double bc1 = 1.0 - std::pow(o_.beta1, static_cast<double>(step_));
  const double bc2 = 1.0 - std::pow(o_.beta2, static_cast<double>(step_));
  for (size_t i = 0; i < params_.size(); ++i) {
    auto& p = params_[i].second;
    const auto& g = p.grad();
    if (!g.defined()) continue;
    if (decay_[i] && o_.weight_decay > 0) p.mul_(1.0 - lr * o_.weight_decay);
    m_[i].mul_(o_.beta1).add_(g, 1.0 - o_.beta1);
    v_[i].mul_(o_.beta2).addcmul_(g, g, 1.0 - o_.beta2);
    auto denom = (v_[i] / bc2).sqrt_().add_(o_.eps);
    p.addcdiv_(m_[i], denom, -lr / bc1);
  }
}

std::vector<std::pair<std::string, at::Tensor>> AdamW::state() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (size_t i = 0; i < params_.size(); ++i) {
    out.emplace_back(params_[i].first + ".exp_avg", m_[i]);
    out.emplace_back(params_[i].first + ".exp_avg_sq", v_[i]);
  }
  out.emplace_back("__step__", torch::tensor(step_, torch::kLong));
  return out;
}

void AdamW::load_state(const std::vector<std::pair<std::string, at::Tensor>>& state) {
  std::map<std::string, at::Tensor> s(state.begin(), state.end());
  auto get = [&](const std::string& key, const at::Tensor& like) {
    auto it = s.find(key);
    MIMIC_CHECK(it != s.end(), "optimizer state has no '", key, "'");
    MIMIC_CHECK(it->second.sizes() == like.sizes(), "optimizer state '", key, "' has shape ", it->second.sizes(),
                ", expected ", like.sizes());
    return it->second.to(like.device(), like.scalar_type()).clone();  // read on the CPU, kept where the parameter is
  };
  for (size_t i = 0; i < params_.size(); ++i) {
    m_[i] = get(params_[i].first + ".exp_avg", params_[i].second);
    v_[i] = get(params_[i].first + ".exp_avg_sq", params_[i].second);
  }
  auto it = s.find("__step__");
  MIMIC_CHECK(it != s.end(), "optimizer state has no step count");
  step_ = it->second.item<int64_t>();
}

double warmup_cosine_lr(int64_t step, int64_t warmup, int64_t total, double peak, double min_ratio) {
  if (warmup > 0 && step < warmup) return peak * static_cast<double>(step + 1) / static_cast<double>(warmup);
  if (total <= warmup) return peak;
  double progress = std::min(1.0, static_cast<double>(step - warmup) / static_cast<double>(total - warmup));
  double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
  return peak * (min_ratio + (1.0 - min_ratio) * cosine);
}

double clip_grad_norm(const std::vector<std::pair<std::string, at::Tensor>>& params, double max_norm) {
  torch::NoGradGuard no_grad;
  // Summed where the gradients are and read once (one read per parameter would wait on the GPU once each); each
  // parameter's square sum is taken in its own type and added in double, in order, as it always was.
  at::Tensor total;
  for (const auto& [name, p] : params) {
    if (!p.grad().defined()) continue;
    auto sq = p.grad().pow(2).sum().to(torch::kDouble);
    total = total.defined() ? total + sq : sq;
  }
  const double sq = total.defined() ? total.item<double>() : 0.0;
  double norm = std::sqrt(sq);
  if (std::isfinite(norm) && max_norm > 0 && norm > max_norm) {
    double scale = max_norm / (norm + 1e-6);
    for (const auto& [name, p] : params)
      if (p.grad().defined()) p.grad().mul_(scale);
  }
  return norm;
}

}  // namespace mimic::train
