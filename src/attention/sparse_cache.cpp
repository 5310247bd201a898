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
  const auto longs = k.options().dtype(torch::kLong);
  auto valid = (mask.defined() ? mask.to(torch::kBool) : torch::ones({b, t}, k.options().dtype(torch::kBool))).view({b, 1, t});
  // Keys' features in the state's units, and each candidate's own: in log space both shed a constant that cancels
  // in the prediction's ratio (one per head for the state's keys, one per key for the candidate reading it).
  at::Tensor kf = f.k.detach(), kc = f.k.detach();
  if (f.log_space) {
    auto top = kf.masked_fill(valid.view({b, 1, t, 1}).logical_not(), -kInf).amax({2, 3}, true);
    top = torch::where(torch::isinf(top), torch::zeros_like(top), top);
    kf = (kf - top).exp();
    kc = (kc - std::get<0>(kc.max(-1, true))).exp();
  }
  kf = kf.to(v.dtype());
  kc = kc.to(v.dtype());
  auto vd = v.detach();
  const int64_t nf = kf.size(3), nd = v.size(3);
  auto S = torch::zeros({b, h, nf, nd}, v.options());
  auto z = torch::zeros({b, h, nf}, v.options());
  // The cache as λ slots of key positions (those in use marked): per selection only the candidates are scored,
  // O((λ + every)·F·D), not the whole sequence.
  auto cache_pos = torch::zeros({b, h, c.size}, longs);
  auto cache_ok = torch::zeros({b, h, c.size}, valid.options());
  auto pos = torch::arange(t, longs);
  auto rows_of = [&](const at::Tensor& x, const at::Tensor& at) {  // x [B, H, T, ·] at positions at [B, H, n]
    return x.gather(2, at.unsqueeze(-1).expand({b, h, at.size(2), x.size(3)}));
  };
  // the cache each selection leaves, kept for the output mask built once after the loop (a loop of small tensor
  // operations per position is what this form costs: the fewer per selection, the better)
  const int64_t selections = (t + c.every - 1) / c.every;
  auto held_pos = torch::zeros({b, h, selections, c.size}, longs);
  auto held_ok = torch::zeros({b, h, selections, c.size}, valid.options());
  for (int64_t n = 0, s = 0; s < t; ++n, s += c.every) {
    // the keys that left the window since the last selection: s − every − w < j ≤ s − w
    const int64_t first = std::max<int64_t>(0, s - c.every - w + 1), last = s - w;
    if (last < first) continue;  // none yet: the cache is empty
    const int64_t m = last - first + 1;
    auto fresh = torch::arange(first, last + 1, longs).view({1, 1, m}).expand({b, h, m});
    auto cand = torch::cat({cache_pos, fresh}, 2);
    auto ok = torch::cat({cache_ok, valid.narrow(2, first, m).expand({b, h, m})}, 2);
    auto kcc = rows_of(kc, cand), vc = rows_of(vd, cand);
    auto den = (kcc * z.unsqueeze(2)).sum(-1, true);
    auto pred = torch::matmul(kcc, S) / torch::where(den == 0, torch::ones_like(den), den);
    auto score = (pred - vc).pow(2).sum(-1).masked_fill(ok.logical_not(), -kInf);  // SRE [B, H, λ + m]
    // the largest error first; of equal errors the older key (candidates put in position order, then a stable sort)
    auto by_pos = std::get<1>(cand.sort(/*stable=*/true, /*dim=*/-1, /*descending=*/false));
    auto order = by_pos.gather(2, std::get<1>(score.gather(2, by_pos).sort(/*stable=*/true, /*dim=*/-1, /*descending=*/true)));
    auto top = order.narrow(2, 0, c.size);
    if (order.size(2) > c.size) {  // the rest of the order is written into the state
      auto rest = order.narrow(2, c.size, order.size(2) - c.size);
      auto kw = rows_of(kf, cand.gather(2, rest));
      kw = torch::where(ok.gather(2, rest).unsqueeze(-1), kw, torch::zeros_like(kw));  // (not a product: inf · 0 is NaN)
      S = S + torch::matmul(kw.transpose(-1, -2), rows_of(vd, cand.gather(2, rest)));
      z = z + kw.sum(2);
    }
    cache_pos = cand.gather(2, top);
    cache_ok = ok.gather(2, top);
    held_pos.select(2, n).copy_(cache_pos);
    held_ok.select(2, n).copy_(cache_ok);
  }
  // Query i reads exact, beyond its window, the cache its selection (at s = i − i mod every) left and the keys that
  // left its window since s, not yet chosen. (Slots not in use point at position 0: added, not written, so that
  // they never unmark a cached key 0.)
  auto cached = torch::zeros({b, h, selections, t}, longs).scatter_add_(3, held_pos, held_ok.to(torch::kLong)).gt(0);
  auto row_of = torch::arange(t, longs).div(c.every, "floor");
  auto start = row_of * c.every;
  auto pending = pos.view({1, t}).gt(start.view({t, 1}) - w).logical_and(pos.view({1, t}).le(pos.view({t, 1}) - w));  // [T, T]
  auto out = cached.index_select(2, row_of).logical_or(pending.view({1, 1, t, t}));
  return out;
}

}  // namespace mimic::attention
