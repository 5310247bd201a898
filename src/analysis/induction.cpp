#include "mimic/analysis/induction.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "mimic/core/error.h"

namespace mimic::analysis {

at::Tensor induction_targets(const at::Tensor& ids, const at::Tensor& mask) {
  MIMIC_CHECK(ids.dim() == 2, "induction targets need token ids [B, T], got ", ids.dim(), " dimensions");
  const int64_t t = ids.size(1);
  auto real = mask.defined() ? mask.to(torch::kBool) : torch::ones_like(ids, torch::kBool);
  // same[b, i, j]: x_j = x_i with j < i, both real
  auto same = ids.unsqueeze(2).eq(ids.unsqueeze(1)) & torch::ones({t, t}, torch::kBool).tril(-1).unsqueeze(0);
  same = same & real.unsqueeze(2) & real.unsqueeze(1);
  // the target is the key after the earlier occurrence: shift the key axis by one
  auto targets = torch::zeros_like(same);
  if (t > 1) targets.slice(2, 1, t).copy_(same.slice(2, 0, t - 1));
  return targets & real.unsqueeze(1);
}

InductionAccumulator::InductionAccumulator(int64_t n_head, int64_t local_window)
    : n_head_(n_head),
      window_(local_window),
      ind_(static_cast<size_t>(n_head), 0.0),
      prev_(static_cast<size_t>(n_head), 0.0),
      local_(static_cast<size_t>(n_head), 0.0) {
  MIMIC_CHECK(local_window >= 1, "the local-mass window must be >= 1 key, got ", local_window);
}

void InductionAccumulator::add(const at::Tensor& w, const at::Tensor& ids, const at::Tensor& mask) {
  MIMIC_CHECK(w.dim() == 4 && w.size(1) == n_head_ && w.size(2) == w.size(3) && ids.dim() == 2 && ids.size(0) == w.size(0) &&
                  ids.size(1) == w.size(2),
              "induction scores need weights [B, ", n_head_, ", T, T] and ids [B, T]");
  torch::NoGradGuard no_grad;
  auto wd = w.to(torch::kDouble);
  const int64_t t = w.size(2);
  auto targets = induction_targets(ids, mask);                  // [B, T, T]
  auto rows = targets.any(-1);                                  // [B, T]: rows with a target
  auto per_row = (wd * targets.unsqueeze(1).to(torch::kDouble)).sum(-1);  // [B, H, T]
  auto ind = (per_row * rows.unsqueeze(1).to(torch::kDouble)).sum(at::IntArrayRef{0, 2});  // [H]
  ind_rows_ += rows.sum().item<double>();
  auto real = mask.defined() ? mask.to(torch::kBool) : torch::ones_like(ids, torch::kBool);
  at::Tensor prev = torch::zeros({n_head_}, torch::kDouble);
  if (t > 1) {
    auto diag = wd.diagonal(-1, 2, 3);  // [B, H, T-1]: w[t, t-1] for t = 1..T-1
    auto ok = (real.slice(1, 1, t) & real.slice(1, 0, t - 1)).unsqueeze(1).to(torch::kDouble);
    prev = (diag * ok).sum(at::IntArrayRef{0, 2});
    prev_rows_ += ok.sum().item<double>();
  }
  // local mass: keys with |t − j| < W (a causal row has no weight after t, so this is the last W keys there)
  auto idx = torch::arange(t, torch::kLong);
  auto band = (idx.unsqueeze(1) - idx.unsqueeze(0)).abs().lt(window_).to(torch::kDouble);  // [T, T]
  auto real_rows = real.unsqueeze(1).to(torch::kDouble);                                    // [B, 1, T]
  auto local = ((wd * band).sum(-1) * real_rows).sum(at::IntArrayRef{0, 2});                 // [H]
  local_rows_ += real.sum().item<double>();
  for (int64_t h = 0; h < n_head_; ++h) {
    ind_[static_cast<size_t>(h)] += ind[h].item<double>();
    prev_[static_cast<size_t>(h)] += prev[h].item<double>();
    local_[static_cast<size_t>(h)] += local[h].item<double>();
  }
}

InductionScores InductionAccumulator::result() const {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  InductionScores r;
  r.induction_rows = ind_rows_;
  r.previous_rows = prev_rows_;
  r.local_rows = local_rows_;
  for (int64_t h = 0; h < n_head_; ++h) {
    r.induction.push_back(ind_rows_ > 0 ? ind_[static_cast<size_t>(h)] / ind_rows_ : nan);
    r.previous_token.push_back(prev_rows_ > 0 ? prev_[static_cast<size_t>(h)] / prev_rows_ : nan);
    r.local_mass.push_back(local_rows_ > 0 ? local_[static_cast<size_t>(h)] / local_rows_ : nan);
  }
  return r;
}

}  // namespace mimic::analysis
