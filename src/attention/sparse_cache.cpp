#include "mimic/attention/sparse_cache.h"

#include <torch/torch.h>

#include <algorithm>
#include <limits>

#include "mimic/attention/hybrid_parts.h"
#include "mimic/core/error.h"
#include "mimic/core/precision.h"

namespace mimic::attention {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The schedule's choices over a sequence: the cache each selection n leaves (positions and slots in use, [B, H, N, λ],
// N = ⌈T / every⌉; empty at selections before any key left the window) and the selection at which each key was
// written into the state (long [B, H, T], N for a key never written).
struct Selection {
  at::Tensor held_pos, held_ok, written_at;
};

// The schedule of one head, on the host: `rows` [T, width] holds each key's row of the table (its features for
// scoring, its value, its features for writing at kw_at), `valid` [T] whether it is a real key; the cache each
// selection leaves goes to held_pos/held_ok [N, λ], the selection that wrote each key to written_at [T] (N: never).
struct Schedule {
  int64_t t, w, every, lam, nf, nd, kw_at;
  bool log_space;
  int64_t selections;
};

template <typename S>
void select_head(const Schedule& p, const S* rows, int64_t width, const bool* valid, int64_t* held_pos, bool* held_ok,
                 int64_t* written_at) {
  const int64_t lam = p.lam, nf = p.nf, nd = p.nd, r1 = nd + 1;
  // The state [S | z] ([F, D + 1]; log space: the true state is exp(shift)·Sz, −∞ while empty: one constant over the
  // whole sequence underflowed every earlier key once a later one lay ~88 nats above them in float32).
  std::vector<S> Sz(static_cast<size_t>(nf * r1), S(0));
  S shift = -std::numeric_limits<S>::infinity();
  // The cache as λ slots: each slot's key position, whether it is in use, and what the state returns for it,
  // [φ(k)ᵀS | φ(k)ᵀz] — kept up to date as keys are written ((φ(k)·φ(k_w)) [v_w, 1] added for each written k_w),
  // not read again: a selection costs O(λ·D + every·(λ·(F + D) + F·D)), not O(λ·F·D). A key keeps its slot while
  // it is cached; the slots whose key was written take the newcomers kept. (A kept read is a running sum, a
  // newcomer's one product: errors equal in exact arithmetic may differ by a rounding and so decide a tie otherwise
  // than decoding's step, which reads every candidate afresh — duplicate keys and values only, never seen on real
  // inputs: the review of 2026-11-30.)
  std::vector<int64_t> slot_pos(static_cast<size_t>(lam), 0);
  std::vector<char> slot_ok(static_cast<size_t>(lam), 0);
  std::vector<S> slot_read(static_cast<size_t>(lam * r1), S(0));
  std::vector<S> new_read, score, e(static_cast<size_t>(nf));
  std::vector<int64_t> cand_pos, order, writes;
  std::vector<char> gone;
  auto read_of = [&](const S* kc, S* out) {  // kcᵀ [S | z]
    std::fill(out, out + r1, S(0));
    for (int64_t f = 0; f < nf; ++f) {
      const S a = kc[f];
      if (a == S(0)) continue;
      const S* row = Sz.data() + f * r1;
      for (int64_t j = 0; j < r1; ++j) out[j] += a * row[j];
    }
  };
  auto sre = [&](const S* read, const S* value) {  // ‖ φ(k)ᵀS / φ(k)ᵀz − v ‖² (an empty state predicts 0: ‖v‖²)
    const S den = read[nd] == S(0) ? S(1) : read[nd];
    S sum = 0;
    for (int64_t j = 0; j < nd; ++j) {
      const S d = read[j] / den - value[j];
      sum += d * d;
    }
    return sum;
  };
  for (int64_t n = 0, s = 0; s < p.t; ++n, s += p.every) {
    // the keys that left the window since the last selection: s − every − w < j ≤ s − w
    const int64_t first = std::max<int64_t>(0, s - p.every - p.w + 1), last = s - p.w;
    if (last < first) continue;  // none yet: the cache is empty
    const int64_t m = last - first + 1, all = lam + m;
    // the candidates: the λ slots, then the newcomers, each scored (−∞: not in use, never kept over a real key)
    new_read.assign(static_cast<size_t>(m * r1), S(0));
    score.resize(static_cast<size_t>(all));
    cand_pos.resize(static_cast<size_t>(all));
    const S none = -std::numeric_limits<S>::infinity();
    for (int64_t i = 0; i < lam; ++i) {
      cand_pos[i] = slot_pos[i];
      score[i] = slot_ok[i] ? sre(slot_read.data() + i * r1, rows + slot_pos[i] * width + nf) : none;
    }
    for (int64_t j = 0; j < m; ++j) {
      const int64_t q = first + j;
      cand_pos[lam + j] = q;
      read_of(rows + q * width, new_read.data() + j * r1);
      score[lam + j] = valid[q] ? sre(new_read.data() + j * r1, rows + q * width + nf) : none;
    }
    // the m written: the smallest errors; of equal errors the newer key (the older stays). A NaN error ranks as the
    // largest (as a descending sort of the errors put it first).
    order.resize(static_cast<size_t>(all));
    for (int64_t i = 0; i < all; ++i) order[i] = i;
    auto key = [&](int64_t i) { return std::isnan(score[i]) ? std::numeric_limits<S>::infinity() : score[i]; };
    auto written_first = [&](int64_t a, int64_t b) {
      const S x = key(a), y = key(b);
      return x < y || (x == y && (cand_pos[a] > cand_pos[b] || (cand_pos[a] == cand_pos[b] && a > b)));
    };
    std::nth_element(order.begin(), order.begin() + (m - 1), order.end(), written_first);
    // order[0 .. m) are written (in no particular order); the slots among them take the newcomers kept
    gone.assign(static_cast<size_t>(all), 0);
    for (int64_t r = 0; r < m; ++r) gone[order[r]] = 1;
    // the written keys, before a newcomer takes their slot
    writes.clear();
    for (int64_t r = 0; r < m; ++r) {
      const int64_t i = order[r];
      const bool real = i < lam ? slot_ok[i] != 0 : valid[first + (i - lam)];
      if (real) writes.push_back(cand_pos[i]);
    }
    for (int64_t i = 0, j = 0; j < m; ++j) {
      if (gone[lam + j]) continue;
      while (!gone[i]) ++i;  // as many freed slots as newcomers kept
      slot_pos[i] = first + j;
      slot_ok[i] = valid[first + j] ? 1 : 0;
      std::copy(new_read.data() + j * r1, new_read.data() + (j + 1) * r1, slot_read.data() + i * r1);
      ++i;
    }
    // the written keys into the state, and into what it returns for each slot
    if (!writes.empty()) {
      S next = shift;
      if (p.log_space)
        for (const int64_t q : writes)
          for (int64_t f = 0; f < nf; ++f) next = std::max(next, rows[q * width + p.kw_at + f]);
      if (p.log_space && next != shift) {  // rescale to the larger constant
        const S keep = std::isinf(shift) ? S(0) : std::exp(shift - next);
        for (auto& x : Sz) x *= keep;
        for (auto& x : slot_read) x *= keep;
        shift = next;
      }
      for (const int64_t q : writes) {
        const S* kw = rows + q * width + p.kw_at;
        const S* value = rows + q * width + nf;
        // (a shift still −∞: every feature written so far is exp(−∞) = 0, and −∞ − −∞ would be NaN)
        for (int64_t f = 0; f < nf; ++f) e[f] = !p.log_space ? kw[f] : std::isinf(shift) ? S(0) : std::exp(kw[f] - shift);
        for (int64_t f = 0; f < nf; ++f) {
          S* row = Sz.data() + f * r1;
          for (int64_t j = 0; j < nd; ++j) row[j] += e[f] * value[j];
          row[nd] += e[f];
        }
        for (int64_t i = 0; i < lam; ++i) {
          const S* kc = rows + slot_pos[i] * width;
          S a = 0;
          for (int64_t f = 0; f < nf; ++f) a += kc[f] * e[f];
          S* out = slot_read.data() + i * r1;
          for (int64_t j = 0; j < nd; ++j) out[j] += a * value[j];
          out[nd] += a;
        }
        written_at[q] = n;
      }
    }
    for (int64_t i = 0; i < lam; ++i) {
      held_pos[n * lam + i] = slot_pos[i];
      held_ok[n * lam + i] = slot_ok[i] != 0;
    }
  }
}

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
  auto valid = (mask.defined() ? mask.to(torch::kBool) : torch::ones({b, t}, k.options().dtype(torch::kBool))).view({b, 1, t});
  // Each candidate's features in its own units: in log space a key sheds its largest log-feature, a constant that
  // cancels in the prediction's ratio. The keys written into the state stay logs until written (kf), and the state
  // carries a running constant (shift) per head, as the recurrent step's does (linear_step_sums): one constant taken over
  // the whole sequence underflowed every earlier key once a later one lay ~88 nats above them in float32.
  // In float (double with double inputs): the host scores in float, and decoding's selection scores the features in
  // its float state's type — rounded to bf16 here first, a performer's log-features (up to ±16, step 1/16) gave the
  // whole-sequence form and decoding different choices (helper-42's review). fp32 and double: no cast.
  const auto wide = float_or_wider(v.scalar_type());
  at::Tensor kf = f.k.detach().to(wide), kc = kf;
  if (f.log_space) kc = (kc - std::get<0>(kc.max(-1, true))).exp();
  const int64_t nf = kf.size(3), nd = v.size(3);
  // One table of what a candidate brings — its features for scoring (kc), its value, its features for writing (kf) —
  // a row per key (outside log space both are the features: one copy, kw_at 0)
  const auto vw = v.detach().to(wide);
  auto table = f.log_space ? torch::cat({kc, vw, kf}, -1) : torch::cat({kc, vw}, -1);
  const int64_t kw_at = f.log_space ? nf + nd : 0;
  // The schedule runs on the host, head by head, in plain loops: a selection at every position, as tensor operations,
  // was a loop of ~80 small operations per position whose overhead and temporaries made a distillation epoch with a
  // cache of 256 at cache_every = 1 first 12×, then (cached reads kept, below) 4× hedgehog's (under load). The
  // selection has no gradient, and its inputs are one row per key — copied to the host once on a GPU.
  const auto host = table.scalar_type() == torch::kDouble ? table.to(torch::kCPU).contiguous()
                                                          : table.to(torch::kCPU, torch::kFloat).contiguous();
  const auto valid_host = valid.to(torch::kCPU).contiguous();
  const int64_t selections = (t + c.every - 1) / c.every;
  auto held_pos = torch::zeros({b, h, selections, c.size}, torch::kLong);
  auto held_ok = torch::zeros({b, h, selections, c.size}, torch::kBool);
  auto written_at = torch::full({b, h, t}, selections, torch::kLong);
  const Schedule plan{t, w, c.every, c.size, nf, nd, kw_at, f.log_space, selections};
  AT_DISPATCH_FLOATING_TYPES(host.scalar_type(), "sparse_cache_select", [&] {
    const auto* rows = host.data_ptr<scalar_t>();
    const auto* ok = valid_host.data_ptr<bool>();
    auto* pos_out = held_pos.data_ptr<int64_t>();
    auto* ok_out = held_ok.data_ptr<bool>();
    auto* at_out = written_at.data_ptr<int64_t>();
    const int64_t width = host.size(3);
    at::parallel_for(0, b * h, 1, [&](int64_t begin, int64_t end) {
      for (int64_t bh = begin; bh < end; ++bh)
        select_head(plan, rows + bh * t * width, width, ok + (bh / h) * t, pos_out + bh * selections * c.size,
                    ok_out + bh * selections * c.size, at_out + bh * t);
    });
  });
  return {held_pos.to(k.device()), held_ok.to(k.device()), written_at.to(k.device())};
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
  // products batched over [B, H, N] (small_matmul: with chunks of one query, the decoding schedule, rows of one)
  // The states, their shifts and the constants they rescale by are float (double with double inputs): under bf16 the
  // carry S_m, rescaled and added to at every selection (every token by default), was rounded at each, and a later
  // key's term was lost once S was ~256 times larger, as in linear attention's decoding state (at 1,024 positions the
  // output was 58–65% off fp32 in every head: Precision.TheSparseCachesCarriedStateStaysFloatUnderBf16).
  const auto wide = q.options().dtype(float_or_wider(q.scalar_type()));
  auto W = small_matmul(fw.transpose(-1, -2), torch::cat({vw, torch::ones_like(vw.narrow(-1, 0, 1))}, -1))
               .to(wide.dtype());  // [B, H, N, F, D+1]
  at::Tensor states, shifts;
  if (!f.log_space) {
    states = W.cumsum(2);
    shifts = torch::zeros({b, h, n, 1, 1}, wide);
  } else {
    cm = cm.to(wide.dtype());
    cm_raw = cm_raw.to(wide.dtype());
    std::vector<at::Tensor> each, tops;
    at::Tensor S, top = torch::full({b, h, 1, 1}, -kInf, wide);
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
  // (qf in the states' type: with one query a chunk, cache_every = 1, small_matmul multiplies elementwise, in float;
  // with more, autocast runs the product in bf16, reading the float state rounded once)
  auto lin_nd = small_matmul(pad(qf.to(wide.dtype()), 2, -(tp - t)).view({b, h, n, every, nf}), states);  // [B, H, N, every, D+1]
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
  // The scores and their softmax in float (double with double inputs), as flash attention keeps S and P: under bf16
  // the scores were rounded to its step (1/64 at 2–4), and the softmax's backward, a difference of near-equal terms,
  // left the query gradients of a normalised map's hybrid (hedgehog_softmax: its window terms dominate) 9.2% off fp32
  // at cache_every 16 and 3.7% at 1, the key gradients 3.3%; in float 0.3%, 0.2% and 1.0%
  // (Precision.EveryKindAndMapOverALongSequenceStaysCloseToFp32UnderBf16). The products with the values stay autocast's.
  at::Tensor s;
  {
    AutocastOff fp32;
    const auto qw = qc.to(wide.dtype());
    s = torch::cat({small_matmul(qw, Kb.to(wide.dtype())), small_matmul(qw, ck.transpose(-1, -2).to(wide.dtype()))}, -1) * scale;
  }  // [B, H, N, every, band + λ]
  auto i = torch::arange(every, longs).view({every, 1}), j = torch::arange(band, longs).view({1, band});
  auto in_band = j.le(i + w - 1).view({1, 1, 1, every, band}).logical_and(vb.view({b, 1, n, 1, band}));
  auto allowed = torch::cat({in_band.expand({b, h, n, every, band}), held_ok.unsqueeze(3).expand({b, h, n, every, lam})}, -1);
  s = s.masked_fill(allowed.logical_not(), -kInf);
  auto M = std::get<0>((o.exact ? s.detach() : s).max(-1, true));
  M = torch::where(torch::isinf(M), torch::zeros_like(M), M);  // a row with no key (a padded query's): every term is 0
  auto e = (s - M).exp() * per_head(o.window_weight, s, 5);
  auto wnum = small_matmul(e.to(v.scalar_type()), torch::cat({Vb, cv}, 3)).reshape({b, h, tp, dv}).narrow(2, 0, t);  // (window_sums says why)
  auto wden = e.sum(-1, true).reshape({b, h, tp, 1}).narrow(2, 0, t);
  auto wshift = o.exact ? M.reshape({b, h, tp, 1}).narrow(2, 0, t) : torch::zeros_like(wden);
  return combine(wnum, wden, wshift, {lin}, o.linear_weight);
}

}  // namespace mimic::attention
