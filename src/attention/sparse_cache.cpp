#include "mimic/attention/sparse_cache.h"

#include <torch/torch.h>

#include <algorithm>
#include <limits>

#include "mimic/attention/hybrid_parts.h"
#include "mimic/core/error.h"

namespace mimic::attention {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The schedule's choices over a sequence: the cache each selection n leaves (positions and slots in use, [B, H, N, λ],
// N = ⌈T / every⌉; empty at selections before any key left the window) and the selection at which each key was
// written into the state (long [B, H, T], N for a key never written).
struct Selection {
  at::Tensor held_pos, held_ok, written_at;
};

Selection select(const at::Tensor& k, const at::Tensor& v, const Features& f, const HybridOptions& o, const at::Tensor& mask) {
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
  const auto longs = k.options().dtype(torch::kLong);
  auto valid = (mask.defined() ? mask.to(torch::kBool) : torch::ones({b, t}, k.options().dtype(torch::kBool))).view({b, 1, t});
  // Each candidate's features in its own units: in log space a key sheds its largest log-feature, a constant that
  // cancels in the prediction's ratio. The keys written into the state stay logs until written (kf), and the state
  // carries a running constant (shift) per head, as the recurrent step's does (linear_step_sums): one constant taken over
  // the whole sequence underflowed every earlier key once a later one lay ~88 nats above them in float32.
  at::Tensor kf = f.k.detach(), kc = f.k.detach();
  if (f.log_space) kc = (kc - std::get<0>(kc.max(-1, true))).exp();
  const int64_t nf = kf.size(3), nd = v.size(3);
  // One table of what a candidate brings — its features for scoring (kc), its value, its features for writing (kf)
  // — so that a selection gathers its candidates' rows once (a loop of small tensor operations per position is what
  // this form costs at every = 1: the fewer per selection, the better; gathers were a fifth of a training step)
  // (outside log space both are the features: one copy, kw_at 0)
  auto table = f.log_space ? torch::cat({kc.to(v.dtype()), v.detach(), kf.to(v.dtype())}, -1) : torch::cat({kc.to(v.dtype()), v.detach()}, -1);
  const int64_t kw_at = f.log_space ? nf + nd : 0;
  // The state as one tensor [S | z]: [B, H, F, D + 1], read by one product (φ(k)ᵀS and φ(k)ᵀz together) and written
  // by one (φ(k)ᵀ[v, 1])
  auto Sz = torch::zeros({b, h, nf, nd + 1}, v.options());
  auto shift = torch::full({b, h, 1, 1}, -kInf, v.options());  // log space: the true state is exp(shift)·Sz; −∞ while empty
  // The cache as λ slots, and a spare one (λ) where a newcomer that is not kept is put and forgotten: each slot's key
  // position (those in use marked), its row of the table, and what the state returns for it, [φ(k)ᵀS | φ(k)ᵀz]. A
  // key keeps its slot while it is cached — only the slots whose key was written take newcomers — and its read is
  // kept up to date as keys are written, (φ(k)·φ(k_w)) [v_w, 1] added for each written k_w: a selection costs
  // O(λ·D + every·(λ·(F + D) + F·D)), not O(λ·F·D). (The cache was kept in position order, gathered whole and
  // read again at every selection: at cache_every = 1 and λ = 256 that made a distillation epoch 12× hedgehog's.)
  // Ties in the error keep the older key: the candidates are ordered by position, then by error (a stable sort). (A
  // kept read is a running sum, a newcomer's one product: errors equal in exact arithmetic may differ by a rounding
  // and so decide a tie otherwise than decoding's step, which reads every candidate afresh — duplicate keys and values
  // only, never seen on real inputs: the review of 2026-11-30.)
  const int64_t lam = c.size, width = table.size(3);
  auto slot_pos = torch::zeros({b, h, lam + 1}, longs);
  auto slot_ok = torch::zeros({b, h, lam + 1}, valid.options());
  auto slot_rows = torch::zeros({b, h, lam + 1, width}, table.options());
  auto slot_read = torch::zeros({b, h, lam + 1, nd + 1}, v.options());
  auto sre = [&](const at::Tensor& read, const at::Tensor& value) {  // ‖ φ(k)ᵀS / φ(k)ᵀz − v ‖² (an empty state: ‖v‖²)
    auto den = read.narrow(3, nd, 1);
    return (read.narrow(3, 0, nd) / torch::where(den == 0, torch::ones_like(den), den) - value).pow(2).sum(-1);
  };
  // the cache each selection leaves, kept for the output mask built once after the loop
  const int64_t selections = (t + c.every - 1) / c.every;
  auto held_pos = torch::zeros({b, h, selections, lam}, longs);
  auto held_ok = torch::zeros({b, h, selections, lam}, valid.options());
  auto written_at = torch::full({b, h, t + 1}, selections, longs);  // slot t takes the writes of slots not in use
  for (int64_t n = 0, s = 0; s < t; ++n, s += c.every) {
    // the keys that left the window since the last selection: s − every − w < j ≤ s − w
    const int64_t first = std::max<int64_t>(0, s - c.every - w + 1), last = s - w;
    if (last < first) continue;  // none yet: the cache is empty
    const int64_t m = last - first + 1;
    auto new_pos = torch::arange(first, last + 1, longs).view({1, 1, m}).expand({b, h, m});
    auto new_rows = table.narrow(2, first, m);                       // [B, H, m, width]
    auto new_read = hybrid_parts::small_matmul(new_rows.narrow(3, 0, nf), Sz);  // [B, H, m, D + 1]
    auto slots = [&](const at::Tensor& x) { return x.narrow(2, 0, lam); };
    // the candidates: the λ slots, then the newcomers
    auto cand = torch::cat({slots(slot_pos), new_pos}, 2);
    auto ok = torch::cat({slots(slot_ok), valid.narrow(2, first, m).expand({b, h, m})}, 2);
    auto score = torch::cat({sre(slots(slot_read), slots(slot_rows).narrow(3, nf, nd)), sre(new_read, new_rows.narrow(3, nf, nd))}, 2)
                     .masked_fill(ok.logical_not(), -kInf);  // SRE [B, H, λ + m]
    // the largest error first; of equal errors the older key
    auto by_pos = std::get<1>(cand.sort(/*stable=*/true, /*dim=*/-1, /*descending=*/false));
    auto order = by_pos.gather(2, std::get<1>(score.gather(2, by_pos).sort(/*stable=*/true, /*dim=*/-1, /*descending=*/true)));
    auto rest = order.narrow(2, lam, m);  // written into the state (or, not in use, dropped); the first λ stay
    // their rows, before a newcomer takes a slot
    auto from_slot = rest.lt(lam).unsqueeze(-1);
    auto out = torch::where(from_slot, slot_rows.gather(2, rest.clamp_max(lam).unsqueeze(-1).expand({b, h, m, width})),
                            new_rows.gather(2, (rest - lam).clamp_min(0).unsqueeze(-1).expand({b, h, m, width})));
    const auto written = ok.gather(2, rest).unsqueeze(-1);
    written_at.scatter_(2, torch::where(written.squeeze(-1), cand.gather(2, rest), torch::full_like(rest, t)), n);
    // the newcomers kept take the freed slots, the r-th newcomer the r-th slot (the others go to the spare)
    auto gone = torch::zeros({b, h, lam + m}, valid.options()).scatter_(2, rest, true);
    auto freed = gone.narrow(2, 0, lam), kept_new = gone.narrow(2, lam, m).logical_not();
    auto slot_of_rank = torch::full({b, h, lam + 1}, lam, longs)
                            .scatter_(2, torch::where(freed, freed.cumsum(-1) - 1, torch::full_like(freed, lam, longs)),
                                      torch::arange(lam, longs).view({1, 1, lam}).expand({b, h, lam}));
    auto target = torch::where(kept_new, slot_of_rank.gather(2, (kept_new.cumsum(-1) - 1).clamp_min(0)), torch::full_like(new_pos, lam));
    slot_pos.scatter_(2, target, new_pos);
    slot_ok.scatter_(2, target, ok.narrow(2, lam, m));
    slot_rows.scatter_(2, target.unsqueeze(-1).expand({b, h, m, width}), new_rows);
    slot_read.scatter_(2, target.unsqueeze(-1).expand({b, h, m, nd + 1}), new_read);
    // the written keys into the state, and into what it returns for each slot
    auto kw = out.narrow(3, kw_at, nf);
    if (f.log_space) {  // rescale the state to the larger constant, then write the keys in its units
      kw = kw.masked_fill(written.logical_not(), -kInf);
      auto next = torch::maximum(shift, kw.amax({2, 3}, true));
      auto keep = torch::where(torch::isinf(next), torch::zeros_like(next), (shift - next).exp());  // −∞ − −∞ would be NaN
      kw = torch::where(torch::isinf(next), torch::zeros_like(kw), (kw - next).exp());
      Sz = Sz * keep;
      slot_read = slot_read * keep;
      shift = next;
    } else {
      kw = torch::where(written, kw, torch::zeros_like(kw));  // (not a product: inf · 0 is NaN)
    }
    auto vw = torch::cat({out.narrow(3, nf, nd), torch::ones_like(out.narrow(3, nf, 1))}, -1);  // [v, 1]
    // (products of one written key, at cache_every = 1, by broadcasting: hybrid_parts::small_matmul)
    Sz = Sz + hybrid_parts::small_matmul(kw.transpose(-1, -2), vw);
    slot_read = slot_read + hybrid_parts::small_matmul(hybrid_parts::small_matmul(slot_rows.narrow(3, 0, nf), kw.transpose(-1, -2)), vw);
    held_pos.select(2, n).copy_(slots(slot_pos));
    held_ok.select(2, n).copy_(slots(slot_ok));
  }
  return {held_pos, held_ok, written_at.narrow(2, 0, t)};
}

}  // namespace

at::Tensor sparse_cache_selection(const at::Tensor& k, const at::Tensor& v, const Features& f, const HybridOptions& o,
                                  const at::Tensor& mask) {
  auto [held_pos, held_ok, written_at] = select(k, v, f, o, mask);
  const int64_t b = k.size(0), h = k.size(1), t = k.size(2), w = o.window, every = o.cache_every, selections = held_pos.size(2);
  const auto longs = k.options().dtype(torch::kLong);
  auto pos = torch::arange(t, longs);
  // Query i reads exact, beyond its window, the cache its selection (at s = i − i mod every) left and the keys that
  // left its window since s, not yet chosen. (Slots not in use point at position 0: added, not written, so that
  // they never unmark a cached key 0.)
  // (counts in bytes: a position is cached at most once per selection, and this buffer is [B, H, T/every, T] — in
  // longs it was 1.6 GB at T = 2048, B = 4, H = 12)
  auto cached = torch::zeros({b, h, selections, t}, longs.dtype(torch::kUInt8))
                    .scatter_add_(3, held_pos, held_ok.to(torch::kUInt8))
                    .gt(0);
  auto row_of = torch::arange(t, longs).div(every, "floor");
  auto start = row_of * every;
  auto pending = pos.view({1, t}).gt(start.view({t, 1}) - w).logical_and(pos.view({1, t}).le(pos.view({t, 1}) - w));  // [T, T]
  auto out = cached.index_select(2, row_of).logical_or(pending.view({1, 1, t, t}));
  return out;
}

at::Tensor hybrid_cache_chunked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Features& f, double scale,
                                const HybridOptions& o, const at::Tensor& mask) {
  using namespace hybrid_parts;
  check_inputs(q, k, v, f, o, mask);
  if (q.size(2) == 0) return torch::zeros_like(v);
  const auto sel = select(k, v, f, o, mask);
  const at::Tensor &held_pos = sel.held_pos, &held_ok = sel.held_ok, &written_at = sel.written_at;
  const int64_t b = q.size(0), h = q.size(1), t = q.size(2), d = q.size(3), dv = v.size(3), nf = f.k.size(3), w = o.window;
  // (a chunk longer than the sequence is the sequence: one selection, at 0, either way — and no every² scores)
  const int64_t every = std::min(o.cache_every, std::max<int64_t>(t, 1)), lam = o.cache, n = held_pos.size(2), tp = n * every;
  const auto longs = q.options().dtype(torch::kLong);
  auto valid = key_valid(mask, b, t, q.options());
  // The linear state after each selection, differentiable: selection m writes at most `every` keys (the candidates
  // are the λ cached and at most `every` that left the window; λ stay); gathered by selection (the keys sorted by the
  // selection that wrote them, a segment each), W_m = Σ φ(k) [v, 1]ᵀ, and the state after selection m is
  // Σ_{m' ≤ m} W_m'. In log space each segment sheds its own largest log-feature c_m and the running sum carries
  // the largest so far, −∞ until a key is written (as the selection's own state and decoding's do: a floor of 0
  // lost keys whose log-features all lay ~87 nats below it in float32).
  const int64_t seg = every;
  auto order = std::get<1>(written_at.sort(/*stable=*/true, /*dim=*/-1, /*descending=*/false));
  auto counts = torch::zeros({b, h, n + 1}, longs).scatter_add_(2, written_at, torch::ones_like(written_at)).narrow(2, 0, n);
  auto first = counts.cumsum(-1) - counts;
  auto r = torch::arange(seg, longs);
  auto used = r.view({1, 1, 1, seg}).lt(counts.unsqueeze(-1));                                           // [B, H, N, seg]
  auto keys_at = order.gather(2, (first.unsqueeze(-1) + r).clamp_max(t - 1).reshape({b, h, n * seg}));  // key positions
  auto rows = [&](const at::Tensor& x) {  // x [B, H, T, ·] at the segments' positions → [B, H, N, seg, ·]
    return x.gather(2, keys_at.unsqueeze(-1).expand({b, h, n * seg, x.size(3)})).view({b, h, n, seg, x.size(3)});
  };
  auto fw = rows(f.k), vw = rows(v);
  auto keep = used.unsqueeze(-1);
  at::Tensor cm, cm_raw;  // the constant each segment shed; cm_raw: −∞ for a segment that wrote nothing
  if (f.log_space) {
    fw = fw.masked_fill(keep.logical_not(), -kInf);
    cm_raw = fw.detach().amax({3, 4}, true);
    cm = torch::where(torch::isinf(cm_raw), torch::zeros_like(cm_raw), cm_raw);
    fw = (fw - cm).exp();
  } else {
    fw = torch::where(keep, fw, torch::zeros_like(fw));  // (not a product: inf · 0 is NaN)
  }
  // products batched over [B, H, N]: with chunks of one query (the decoding schedule) rows of one
  const auto mm = small_matmul;
  auto W = mm(fw.transpose(-1, -2), torch::cat({vw, torch::ones_like(vw.narrow(-1, 0, 1))}, -1));  // [B, H, N, F, D+1]
  at::Tensor states, shifts;
  if (!f.log_space) {
    states = W.cumsum(2);
    shifts = torch::zeros({b, h, n, 1, 1}, q.options());
  } else {
    std::vector<at::Tensor> each, tops;
    at::Tensor S, top = torch::full({b, h, 1, 1}, -kInf, q.options());
    // (unbound once: a select per m would give each its own backward of W's whole size, O(N²) work for N selections)
    const auto Wm = W.unbind(2), cms = cm.unbind(2), raws = cm_raw.unbind(2);
    for (int64_t m = 0; m < n; ++m) {  // S_m = Σ W_m' exp(c_m' − top_m), top_m = max_{m' ≤ m} c_m' (detached)
      const auto i = static_cast<size_t>(m);
      auto next = torch::maximum(top, raws[i]);
      auto zero = torch::zeros_like(next);
      auto add = torch::where(torch::isinf(raws[i]), zero, (cms[i] - next).exp());  // (an empty segment adds nothing)
      S = m == 0 ? Wm[i] * add : S * torch::where(torch::isinf(next), zero, (top - next).exp()) + Wm[i] * add;
      top = next;
      each.push_back(S);
      tops.push_back(top);  // −∞ while nothing is written: the empty state's terms then weigh nothing in combine()
    }
    states = torch::stack(each, 2);
    shifts = torch::stack(tops, 2);
  }
  // Each query reads the state its chunk's selection left: φ(q_i)·S_m, at log-scale qtop_i + top_m.
  at::Tensor qf = f.q, qtop = torch::zeros({b, h, t, 1}, q.options());
  if (f.log_space) {
    qtop = std::get<0>(f.q.detach().max(-1, true));
    qf = (f.q - qtop).exp();
  }
  auto lin_nd = mm(pad(qf, 2, -(tp - t)).view({b, h, n, every, nf}), states);  // [B, H, N, every, D+1]
  auto lin_shift = pad(qtop, 2, -(tp - t)).view({b, h, n, every, 1}) + shifts;
  LinearSums lin{lin_nd.reshape({b, h, tp, dv + 1}).narrow(2, 0, t), lin_shift.reshape({b, h, tp, 1}).narrow(2, 0, t)};

  // The exact terms of query i in the chunk that starts at s: the band of keys s − w + 1 … i (its window and the keys
  // that left it since s) and the cache selection s left — one softmax under σ_h and the maximum M_i.
  const int64_t band = w + every - 1;
  auto stream = [&](const at::Tensor& x, int64_t dim) { return pad(pad(x, dim, w - 1), dim, -(tp - t)); };  // position p at p + w − 1
  auto Kb = stream(k, 2).unfold(2, band, every);                   // [B, H, N, D, band]
  auto Vb = stream(v, 2).unfold(2, band, every).transpose(-1, -2);  // [B, H, N, band, D]
  auto vb = stream(valid, 1).unfold(1, band, every);                // [B, N, band]
  auto qc = pad(q, 2, -(tp - t)).view({b, h, n, every, d});
  auto cache_rows = [&](const at::Tensor& x) {  // [B, H, N, λ, ·]
    return x.gather(2, held_pos.reshape({b, h, n * lam, 1}).expand({b, h, n * lam, x.size(3)})).view({b, h, n, lam, x.size(3)});
  };
  auto ck = cache_rows(k), cv = cache_rows(v);
  auto s = torch::cat({mm(qc, Kb), mm(qc, ck.transpose(-1, -2))}, -1) * scale;  // [B, H, N, every, band + λ]
  auto i = torch::arange(every, longs).view({every, 1}), j = torch::arange(band, longs).view({1, band});
  auto in_band = j.le(i + w - 1).view({1, 1, 1, every, band}).logical_and(vb.view({b, 1, n, 1, band}));
  auto allowed = torch::cat({in_band.expand({b, h, n, every, band}), held_ok.unsqueeze(3).expand({b, h, n, every, lam})}, -1);
  s = s.masked_fill(allowed.logical_not(), -kInf);
  auto M = std::get<0>((o.exact ? s.detach() : s).max(-1, true));
  M = torch::where(torch::isinf(M), torch::zeros_like(M), M);  // a row with no key (a padded query's): every term is 0
  auto e = (s - M).exp() * per_head(o.window_weight, s, 5);
  auto wnum = mm(e, torch::cat({Vb, cv}, 3)).reshape({b, h, tp, dv}).narrow(2, 0, t);
  auto wden = e.sum(-1, true).reshape({b, h, tp, 1}).narrow(2, 0, t);
  auto wshift = o.exact ? M.reshape({b, h, tp, 1}).narrow(2, 0, t) : torch::zeros_like(wden);
  return combine(wnum, wden, wshift, {lin}, o.linear_weight);
}

}  // namespace mimic::attention
