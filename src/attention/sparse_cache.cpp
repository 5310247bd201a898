#include "mimic/attention/sparse_cache.h"

#include <torch/torch.h>

#include <algorithm>
#include <limits>

#include "mimic/core/error.h"

namespace mimic::attention {

at::Tensor sparse_cache_selection(const at::Tensor& k, const at::Tensor& v, const Features& f, const HybridOptions& o,
                                  const at::Tensor& mask) {
  struct {
    int64_t size, every;
  } c{o.cache, o.cache_every};
  MIMIC_CHECK(o.causal, "sparse cache: causal attention only (a bidirectional query reads keys no selection has seen)");
  MIMIC_CHECK(c.size >= 0 && c.every >= 1, "sparse cache: the size must be >= 0 and the selection interval >= 1, got ", c.size, " and ",
              c.every);
  MIMIC_CHECK(o.window >= 1, "sparse cache: the window must be >= 1 key, got ", o.window);
  MIMIC_CHECK(k.dim() == 4 && v.dim() == 4 && f.k.dim() == 4 && v.sizes().slice(0, 3) == k.sizes().slice(0, 3) &&
                  f.k.sizes().slice(0, 3) == k.sizes().slice(0, 3),
              "sparse cache: k, v and the key features must be [B, H, T, ·] alike, got ", k.sizes(), ", ", v.sizes(), ", ", f.k.sizes());
  const int64_t b = k.size(0), h = k.size(1), t = k.size(2), w = o.window;
  MIMIC_CHECK(!mask.defined() || (mask.dim() == 2 && mask.size(0) == b && mask.size(1) == t),
              "sparse cache: key padding mask must be [B, T] = [", b, ", ", t, "]");
  torch::NoGradGuard no_grad;  // a discrete choice: gradients flow through the terms it chose, not through it
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const auto bools = k.options().dtype(torch::kBool);
  auto valid = (mask.defined() ? mask.to(torch::kBool) : torch::ones({b, t}, bools)).view({b, 1, t});
  // Keys' features in the state's units, and each candidate's own: in log space both shed a constant that cancels
  // in the prediction's ratio (one per head for the state's keys, one per key for the candidate reading it).
  at::Tensor kf = f.k, kc = f.k;
  if (f.log_space) {
    auto top = f.k.detach().masked_fill(valid.view({b, 1, t, 1}).logical_not(), -kInf).amax({2, 3}, true);
    top = torch::where(torch::isinf(top), torch::zeros_like(top), top);
    kf = (f.k.detach() - top).exp();
    kc = (f.k.detach() - std::get<0>(f.k.detach().max(-1, true))).exp();
  }
  kf = kf.detach().to(v.dtype());
  kc = kc.detach().to(v.dtype());
  auto vd = v.detach();
  auto S = torch::zeros({b, h, kf.size(3), v.size(3)}, v.options());
  auto z = torch::zeros({b, h, kf.size(3)}, v.options());
  auto cached = torch::zeros({b, h, t}, bools);
  auto pos = torch::arange(t, k.options().dtype(torch::kLong));
  auto rank_of = torch::arange(t, k.options().dtype(torch::kLong)).expand({b, h, t});
  auto out = torch::zeros({b, h, t, t}, bools);
  for (int64_t s = 0; s < t; s += c.every) {
    // the keys that left the window since the last selection: s − every − w < j ≤ s − w
    auto newly = pos.le(s - w).logical_and(pos.gt(s - c.every - w)).view({1, 1, t}).logical_and(valid);
    auto cand = cached.logical_or(newly);
    if (cand.sum(-1).max().item<int64_t>() > c.size) {
      auto den = (kc * z.unsqueeze(2)).sum(-1, true);                                   // [B, H, T, 1]
      auto pred = torch::matmul(kc, S) / torch::where(den == 0, torch::ones_like(den), den);
      auto sre = (pred - vd).pow(2).sum(-1);                                            // [B, H, T]
      auto score = sre.masked_fill(cand.logical_not(), -kInf);
      // descending, stable: of equal errors the older key ranks first (and stays)
      auto order = std::get<1>(score.sort(/*stable=*/true, /*dim=*/-1, /*descending=*/true));
      auto rank = torch::empty_like(order).scatter_(-1, order, rank_of);
      auto keep = cand.logical_and(rank.lt(c.size));
      auto written = cand.logical_and(keep.logical_not()).to(v.dtype()).unsqueeze(-1);  // [B, H, T, 1]
      S = S + torch::matmul((kf * written).transpose(-1, -2), vd);
      z = z + (kf * written).sum(2);
      cached = keep;
    } else {
      cached = cand;
    }
    // queries s … s + every − 1 read the cache and the keys that left their window since s (not yet chosen)
    const int64_t n = std::min(c.every, t - s);
    auto rows = torch::arange(s, s + n, pos.options()).view({n, 1});
    auto pending = pos.view({1, t}).gt(s - w).logical_and(pos.view({1, t}).le(rows - w));  // [n, T]
    out.narrow(2, s, n).copy_(cached.unsqueeze(2).logical_or(pending.view({1, 1, n, t})));
  }
  return out;
}

}  // namespace mimic::attention
