#include "mimic/attention/hybrid_attention.h"

#include <torch/torch.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "mimic/attention/attention.h"
#include "mimic/attention/hybrid_parts.h"
#include "mimic/attention/sparse_cache.h"
#include "mimic/core/error.h"
#include "mimic/core/precision.h"

namespace mimic::attention {

namespace hybrid_parts {

void check_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Features& f, const HybridOptions& o,
                  const at::Tensor& mask, bool kv_groups) {
  const bool heads_fit = kv_groups ? k.dim() == 4 && k.size(1) >= 1 && q.dim() == 4 && q.size(1) % k.size(1) == 0 : k.sizes() == q.sizes();
  MIMIC_CHECK(q.dim() == 4 && k.dim() == 4 && heads_fit && k.size(0) == q.size(0) && k.size(2) == q.size(2) && k.size(3) == q.size(3) &&
                  v.dim() == 4 && v.size(0) == q.size(0) && v.size(1) == k.size(1) && v.size(2) == q.size(2),
              "hybrid attention: q, k, v must be [B, H, T, ·] alike", kv_groups ? " (k and v may hold H_kv heads dividing H)" : "",
              ", got ", q.sizes(), ", ", k.sizes(), ", ", v.sizes());
  MIMIC_CHECK(f.q.dim() == 4 && f.k.sizes() == f.q.sizes() && f.q.size(0) == q.size(0) && f.q.size(1) == q.size(1) &&
                  f.q.size(2) == q.size(2),
              "hybrid attention: features ", f.q.sizes(), " / ", f.k.sizes(), " do not match q ", q.sizes());
  MIMIC_CHECK(!mask.defined() || (mask.dim() == 2 && mask.size(0) == q.size(0) && mask.size(1) == q.size(2)),
              "hybrid attention: key padding mask must be [B, T] = [", q.size(0), ", ", q.size(2), "], got ",
              mask.defined() ? mask.sizes() : at::IntArrayRef{});
  MIMIC_CHECK(o.window >= 1, "hybrid attention: the window must be >= 1 key, got ", o.window);
  MIMIC_CHECK(o.chunk >= 1 && o.block >= 0, "hybrid attention: chunk must be >= 1 and block >= 0, got ", o.chunk, " and ", o.block);
  MIMIC_CHECK(o.window_weight.defined() && o.window_weight.dim() == 1 && o.window_weight.size(0) == q.size(1),
              "hybrid attention: the window weight must hold one value per head (", q.size(1), ")");
  MIMIC_CHECK(!o.linear_weight.defined() || (o.linear_weight.dim() == 1 && o.linear_weight.size(0) == q.size(1)),
              "hybrid attention: the linear weight must hold one value per head (", q.size(1), ")");
}

at::Tensor per_head(const at::Tensor& w, const at::Tensor& like, int64_t dims) {
  std::vector<int64_t> shape(static_cast<size_t>(dims), 1);
  shape[1] = w.size(0);
  return w.to(like.dtype()).view(shape);
}

at::Tensor key_valid(const at::Tensor& mask, int64_t b, int64_t t, const at::TensorOptions& like) {
  return mask.defined() ? mask.to(torch::kBool) : torch::ones({b, t}, like.dtype(torch::kBool));
}

at::Tensor small_matmul(const at::Tensor& a, const at::Tensor& m) {
  if (a.size(-1) == 1) return a * m;
  if (m.size(-1) == 1) return (a * m.transpose(-1, -2)).sum(-1, true);
  return a.size(-2) == 1 ? (a.transpose(-1, -2) * m).sum(-2, true) : torch::matmul(a, m);
}

at::Tensor pad(const at::Tensor& x, int64_t dim, int64_t n) {
  if (n == 0) return x;
  auto shape = x.sizes().vec();
  shape[static_cast<size_t>(dim)] = n > 0 ? n : -n;
  auto z = torch::zeros(shape, x.options());
  return n > 0 ? torch::cat({z, x}, dim) : torch::cat({x, z}, dim);
}

at::Tensor combine(const at::Tensor& wnum, const at::Tensor& wden, const at::Tensor& wshift, const std::vector<LinearSums>& parts,
                   const at::Tensor& lambda) {
  const int64_t dv = wnum.size(-1);
  // In float (double with double inputs), returned in wnum's type: under bf16 a shift of ~8–16 nats (a performer's
  // log-features) rounded to bf16's step of 1/16 moved a part's weight by up to 3% (exp of half a step). fp32 and
  // double: the same operations.
  const auto wide = float_or_wider(wnum.scalar_type());
  auto c = wshift.to(wide);
  for (const auto& p : parts) c = torch::maximum(c, p.shift.to(wide));
  auto wscale = (wshift.to(wide) - c).exp();
  auto num = wnum.to(wide) * wscale, den = wden.to(wide) * wscale;
  for (const auto& p : parts) {
    auto lin = p.numden.to(wide) * (p.shift.to(wide) - c).exp();
    if (lambda.defined()) lin = lin * per_head(lambda, lin, 4);
    num = num + lin.narrow(-1, 0, dv);
    den = den + lin.narrow(-1, dv, 1);
  }
  return (num / torch::where(den == 0, torch::ones_like(den), den)).to(wnum.scalar_type());
}

}  // namespace hybrid_parts

namespace {

using namespace hybrid_parts;
constexpr double kInf = std::numeric_limits<double>::infinity();

// The window part: query i reads keys K[i … i+span−1] (K holds T+span−1 positions, `valid` [B, T+span−1]).
// Blocks of c queries against their band of c+span−1 keys. Returns Σ σ exp(s − M) v [B, H, T, D] and Σ σ exp(s − M) [B, H, T, 1].
// With `exact` the window's terms are σ exp(s) and M is only a stabilising constant (detached, returned in *shift);
// otherwise M belongs to the function (LoLCATs) and *shift is 0.
std::pair<at::Tensor, at::Tensor> window_sums(const at::Tensor& q, const at::Tensor& K, const at::Tensor& V, const at::Tensor& valid,
                                              int64_t span, double scale, const at::Tensor& sigma, int64_t block, bool exact,
                                              at::Tensor* shift) {
  const int64_t b = q.size(0), h = q.size(1), t = q.size(2), d = q.size(3), dv = V.size(3);
  const int64_t c = std::max<int64_t>(1, std::min(block, t));
  const int64_t n = (t + c - 1) / c, tp = n * c, len = c + span - 1;
  auto qp = pad(q, 2, -(tp - t)).view({b, h, n, c, d});
  auto Kb = pad(K, 2, -(tp - t)).unfold(2, len, c);                   // [B, H, n, D, len]
  auto Vb = pad(V, 2, -(tp - t)).unfold(2, len, c).transpose(-1, -2);  // [B, H, n, len, Dv]
  auto vb = pad(valid, 1, -(tp - t)).unfold(1, len, c);                // [B, n, len]
  // the scores and their softmax in float, as the sparse cache's form has them (sparse_cache.cpp says why)
  at::Tensor s;
  {
    AutocastOff fp32;
    const auto wide = float_or_wider(q.scalar_type());
    s = torch::matmul(qp.to(wide), Kb.to(wide)) * scale;  // [B, H, n, c, len]
  }
  auto r = torch::arange(c, q.options().dtype(torch::kLong)).view({c, 1});
  auto j = torch::arange(len, q.options().dtype(torch::kLong)).view({1, len});
  auto allowed = (j >= r).logical_and(j < r + span).view({1, 1, 1, c, len}).logical_and(vb.view({b, 1, n, 1, len}));
  s = s.masked_fill(allowed.logical_not(), -kInf);
  auto M = std::get<0>((exact ? s.detach() : s).max(-1, true));
  M = torch::where(torch::isinf(M), torch::zeros_like(M), M);  // a row with no key: every term is 0
  auto e = (s - M).exp() * per_head(sigma, s, 5);
  // the value product in the values' type (autocast's, and a bf16 call without autocast then still runs); the
  // denominator sums the float weights
  auto num = torch::matmul(e.to(Vb.scalar_type()), Vb).reshape({b, h, tp, dv}).narrow(2, 0, t);
  auto den = e.sum(-1, true).reshape({b, h, tp, 1}).narrow(2, 0, t);
  *shift = exact ? M.reshape({b, h, tp, 1}).narrow(2, 0, t) : torch::zeros_like(den);
  return {num, den};
}


LinearOptions linear_part(const HybridOptions& o) {
  LinearOptions lo;
  lo.causal = true;
  lo.norm = Norm::Row;
  lo.chunk = o.chunk;
  return lo;
}

int64_t window_block(const HybridOptions& o) { return o.block > 0 ? o.block : std::max<int64_t>(o.window, 64); }

// Delays a [B, H, T, ·] stream (or a [B, T] mask) by w positions: slot i holds position i − w (zeros / false before 0).
at::Tensor delayed(const at::Tensor& x, int64_t dim, int64_t w) { return pad(x, dim, w).narrow(dim, 0, x.size(dim)); }

void check_state(const HybridState& s, const at::Tensor& k, const at::Tensor& v, const Features& f, const HybridOptions& o) {
  const int64_t w = o.window;
  MIMIC_CHECK(s.k.dim() == 4 && s.k.size(0) == k.size(0) && s.k.size(1) == k.size(1) && s.k.size(2) == w && s.k.size(3) == k.size(3) &&
                  s.v.size(3) == v.size(3) && (!s.fk.defined() || s.fk.size(3) == f.k.size(3)) && s.head >= 0 && s.head < w &&
                  s.filled >= 0 && s.filled <= w,
              "hybrid attention: state ", s.k.sizes(), " does not match keys ", k.sizes(), " with a window of ", w);
  MIMIC_CHECK(s.fk.defined() != static_cast<bool>(o.key_features), "hybrid attention: the state keeps ",
              s.fk.defined() ? "key features, and these options compute them from the keys"
                             : "keys only, and these options have no key_features to compute their features",
              " (continue a state under the options that made it)");
}

// The features of the ring's or the cache's keys: kept in the state, or computed again from its keys.
at::Tensor key_features_of(const at::Tensor& kept, const at::Tensor& keys, const HybridOptions& o, const at::Tensor& like) {
  return kept.defined() ? kept : o.key_features(keys).to(like.dtype());
}

// The ring [B, H, w, ·] in oldest-first order, given the slot of its oldest entry.
at::Tensor in_order(const at::Tensor& ring, int64_t head) {
  if (head == 0) return ring;
  const int64_t w = ring.size(2);
  return torch::cat({ring.narrow(2, head, w - head), ring.narrow(2, 0, head)}, 2);
}

}  // namespace

at::Tensor hybrid_quadratic(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Features& f, double scale,
                            const HybridOptions& o, const at::Tensor& mask, at::Tensor* weights, at::Tensor* log_weights) {
  // a sparse cache: the keys its selection keeps beyond each query's window are read exact
  const auto exact = o.cache > 0 ? sparse_cache_selection(k, v, f, o, mask) : at::Tensor();
  return hybrid_quadratic_with(q, k, v, f, scale, o, mask, exact, weights, log_weights);
}

at::Tensor hybrid_quadratic_with(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Features& f, double scale,
                                 const HybridOptions& o, const at::Tensor& mask, const at::Tensor& exact_keys, at::Tensor* weights,
                                 at::Tensor* log_weights) {
  check_inputs(q, k, v, f, o, mask);
  const int64_t b = q.size(0), h = q.size(1), t = q.size(2), w = o.window;
  auto idx = torch::arange(t, q.options().dtype(torch::kLong));
  auto diff = idx.unsqueeze(1) - idx.unsqueeze(0);  // i − j
  auto in_window = o.causal ? diff.ge(0).logical_and(diff.lt(w)) : diff.abs().lt(w);
  auto in_linear = o.causal ? diff.ge(w) : diff.abs().ge(w);
  auto valid = key_valid(mask, b, t, q.options()).view({b, 1, 1, t});
  in_window = in_window.view({1, 1, t, t}).logical_and(valid);
  in_linear = in_linear.view({1, 1, t, t}).logical_and(valid);
  if (exact_keys.defined()) {  // keys kept exact beyond the window (a sparse cache) move from the linear part
    auto extra = exact_keys.to(torch::kBool).logical_and(in_linear);
    in_window = in_window.logical_or(extra);
    in_linear = in_linear.logical_and(extra.logical_not());
  }

  // the scores and their softmax in float, as the chunked forms have them (sparse_cache.cpp says why): a cache of 256
  // keys runs this form below about 6,900 positions
  at::Tensor s;
  {
    AutocastOff fp32;
    const auto wide = float_or_wider(q.scalar_type());
    s = (torch::matmul(q.to(wide), k.transpose(-1, -2).to(wide)) * scale).masked_fill(in_window.logical_not(), -kInf);
  }
  auto M = std::get<0>((o.exact ? s.detach() : s).max(-1, true));
  M = torch::where(torch::isinf(M), torch::zeros_like(M), M);
  auto wshift = o.exact ? M : torch::zeros_like(M);  // exact: M only stabilises (the true terms are σ exp(s))
  auto sigma = per_head(o.window_weight, s, 4);
  auto win = (s - M).exp() * sigma;

  at::Tensor qf = f.q, kf = f.k, lshift = torch::zeros({b, h, t, 1}, q.options());
  if (f.log_space) {  // exp(log φ − constants); the constants (detached) are added back through lshift
    auto qtop = std::get<0>(f.q.detach().max(-1, true));
    auto ktop = f.k.detach().masked_fill(valid.view({b, 1, t, 1}).logical_not(), -kInf).amax({2, 3}, true);
    ktop = torch::where(torch::isinf(ktop), torch::zeros_like(ktop), ktop);
    qf = (f.q - qtop).exp();
    kf = (f.k - ktop).exp();
    lshift = qtop + ktop;
  }
  auto lin = torch::matmul(qf, kf.transpose(-1, -2)).masked_fill(in_linear.logical_not(), 0.0);
  if (o.linear_weight.defined()) lin = lin * per_head(o.linear_weight, lin, 4);

  auto c = torch::maximum(lshift, wshift);
  auto a = win * (wshift - c).exp() + lin * (lshift - c).exp();
  auto den = a.sum(-1, true);
  den = torch::where(den == 0, torch::ones_like(den), den);
  if (weights) *weights = a / den;
  if (log_weights) {
    const double tiny = std::numeric_limits<float>::min(), floor = log_weight_floor();
    auto log_lin = lin.clamp_min(tiny).log() + lshift - c;
    auto log_win = sigma.log() + s.masked_fill(in_window.logical_not(), 0.0) - M + wshift - c;
    auto la = torch::where(in_window, log_win, log_lin) - den.clamp_min(tiny).log();
    auto positive = in_window.logical_or(in_linear.logical_and(lin > 0));
    *log_weights = torch::where(positive, la, torch::full_like(la, floor)).clamp_min(floor);
  }
  return torch::matmul(a, v.to(a.dtype())) / den;
}

at::Tensor hybrid_chunked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Features& f, double scale,
                          const HybridOptions& o, const at::Tensor& mask, HybridState* state) {
  check_inputs(q, k, v, f, o, mask, /*kv_groups=*/true);
  MIMIC_CHECK(o.causal, "hybrid attention: the chunked form is causal; use the bidirectional form");
  MIMIC_CHECK(o.cache == 0 && (!state || state->cached == 0),
              "hybrid attention: the chunked form has no sparse cache (yet): use hybrid_quadratic, or hybrid_step to decode");
  const int64_t b = q.size(0), h = q.size(1), hk = k.size(1), t = q.size(2), w = o.window;
  // The ring before this call: the last w positions (zeros and invalid where nothing was seen yet), one per KV head.
  at::Tensor rk, rv, rfk;
  int64_t filled = 0;
  if (state && state->defined()) {
    check_state(*state, k, v, f, o);
    // After hybrid_step the ring's oldest slot is `head`: unroll it into the oldest-first order this form reads.
    rk = in_order(state->k, state->head), rv = in_order(state->v, state->head);
    rfk = state->fk.defined() ? in_order(state->fk, state->head) : key_features_of(at::Tensor(), expand_kv_heads(rk, h), o, f.k);
    filled = state->filled;
  } else {
    rk = torch::zeros({b, hk, w, k.size(3)}, k.options());
    rv = torch::zeros({b, hk, w, v.size(3)}, v.options());
    rfk = torch::zeros({b, h, w, f.k.size(3)}, f.k.options());
  }
  auto Ak = torch::cat({rk.to(k.dtype()), k}, 2), Av = torch::cat({rv.to(v.dtype()), v}, 2);  // per KV head
  const auto Akq = expand_kv_heads(Ak, h), Avq = expand_kv_heads(Av, h);                         // per query head
  auto Afk = torch::cat({rfk.to(f.k.dtype()), f.k}, 2);
  auto ring_valid = torch::arange(w, q.options().dtype(torch::kLong)).ge(w - filled).view({1, w}).expand({b, w});
  auto valid = torch::cat({ring_valid, key_valid(mask, b, t, q.options())}, 1);  // [B, w+T]: A[i] is position i − w

  // The linear part: slot i admits A[i], the key leaving query i's window.
  LinearState* ls = state ? &state->linear : nullptr;
  auto lin = linear_chunked_sums({f.q, Afk.narrow(2, 0, t), f.log_space}, Avq.narrow(2, 0, t), linear_part(o), valid.narrow(1, 0, t), ls);
  // The window part: query i reads A[i+1 … i+w].
  at::Tensor wshift;
  auto [wnum, wden] = window_sums(q, Akq.narrow(2, 1, t + w - 1), Avq.narrow(2, 1, t + w - 1), valid.narrow(1, 1, t + w - 1), w,
                                  scale, o.window_weight, window_block(o), o.exact, &wshift);
  if (state) {
    // Copies, not views: a view would keep the whole [w + T] buffer of a long prompt alive inside a state that
    // claims (and is reported as) w slots.
    state->k = Ak.narrow(2, t, w).clone();
    state->v = Av.narrow(2, t, w).clone();
    state->fk = o.key_features ? at::Tensor() : Afk.narrow(2, t, w).clone();
    state->filled = std::min(w, filled + t);
    state->head = 0;
    state->position += t;
  }
  return combine(wnum, wden, wshift, {lin}, o.linear_weight);
}

// Why a separate step and not hybrid_chunked at T = 1: the chunked form rebuilds the ring by concatenation, pads,
// unfolds and masks a band of keys and runs the chunked linear machinery for one query — about a hundred small
// operators per head and layer, which at batch 1 cost more than the arithmetic (decoding reached 39% of the
// memory-bandwidth limit against 52–58% for softmax and linear). The step writes the new key into the ring in place
// (the oldest slot), moves the key that leaves the window into the linear state with linear_step_sums, and puts
// both parts under the shared denominator with the same combine() as the chunked form.
// Inference only: the ring is written in place, which autograd could not differentiate through across steps, and
// decoding runs without gradients (Model::forward_step holds a NoGradGuard). The kernel differentiates through
// hybrid_chunked instead; this refuses inputs that require gradients while grad mode is on.
at::Tensor hybrid_step(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Features& f, double scale,
                       const HybridOptions& o, HybridState& state) {
  check_inputs(q, k, v, f, o, at::Tensor(), /*kv_groups=*/true);
  MIMIC_CHECK(o.causal, "hybrid attention: the recurrent step is causal");
  MIMIC_CHECK(q.size(2) == 1, "hybrid attention: the recurrent step takes one token, got ", q.size(2), " (use hybrid_chunked)");
  if (at::GradMode::is_enabled())
    for (const auto* x : {&q, &k, &v, &f.q, &f.k, &o.window_weight, &o.linear_weight})
      MIMIC_CHECK(!x->defined() || !x->requires_grad(),
                  "hybrid attention: the recurrent step is inference only (it writes its state in place); run it under "
                  "torch::NoGradGuard, or hybrid_chunked to differentiate");
  const int64_t b = q.size(0), h = q.size(1), hk = k.size(1), w = o.window, lam = o.cache;
  MIMIC_CHECK(lam >= 0 && (lam == 0 || o.cache_every == 1),
              "hybrid attention: the recurrent step selects for its sparse cache at every token (cache_every 1), got ", o.cache_every);
  if (!state.defined()) {
    state.k = torch::zeros({b, hk, w, k.size(3)}, k.options());  // the ring: one per KV head
    state.v = torch::zeros({b, hk, w, v.size(3)}, v.options());
    state.fk = o.key_features ? at::Tensor() : torch::zeros({b, h, w, f.k.size(3)}, f.k.options());
    state.filled = 0;
    state.head = 0;
    if (lam > 0) {
      state.ck = torch::zeros({b, h, lam, k.size(3)}, k.options());
      state.cv = torch::zeros({b, h, lam, v.size(3)}, v.options());
      state.cfk = o.key_features ? at::Tensor() : torch::zeros({b, h, lam, f.k.size(3)}, f.k.options());
      state.cpos = torch::zeros({b, h, lam}, k.options().dtype(torch::kLong));
      state.cached = 0;
    }
  } else {
    check_state(state, k, v, f, o);
    MIMIC_CHECK(lam == 0 ? !state.ck.defined() : state.ck.defined() && state.ck.size(2) == lam && state.cached <= lam,
                "hybrid attention: the state's sparse cache (", state.ck.defined() ? state.ck.size(2) : 0,
                " keys) does not match the options' (", lam, ")");
  }
  if (!state.linear.defined()) {  // allocated up front, so that the state's bytes stay the same from the first token
    const int64_t position = state.linear.position;
    state.linear = zero_state(b, h, f.q.size(3), v.size(3), f.q.options().dtype(float_or_wider(f.q.scalar_type())));  // as linear_step's
    state.linear.position = position;
  }
  const int64_t slot = state.head;  // the oldest entry: position p − w when the ring is full
  std::vector<LinearSums> parts;
  bool admits = state.filled == w;
  if (admits) {
    // Key p − w leaves query p's window and enters the linear part, which this query reads (as in the chunked
    // form's slot p). The ring's slot is read here, before the new key overwrites it below. With a sparse cache
    // the key written is the candidate (the cache's keys and this one) the state returns best (sparse_cache.h).
    // (a KV head's key and value, read by each of its query heads: the features and the cache are per query head)
    const auto leaving_k = expand_kv_heads(state.k.narrow(2, slot, 1), h).select(2, 0);
    const auto leaving_v = expand_kv_heads(state.v.narrow(2, slot, 1), h).select(2, 0);
    at::Tensor wk = key_features_of(state.fk.defined() ? state.fk.narrow(2, slot, 1) : at::Tensor(), leaving_k.unsqueeze(2), o, f.k)
                        .select(2, 0),
               wv = leaving_v;
    if (lam > 0) {
      const int64_t leaving = state.position - w;
      if (state.cached < lam) {  // room: the key moves into the cache; the state, empty until the cache is full, admits nothing
        state.ck.select(2, state.cached).copy_(leaving_k);
        state.cv.select(2, state.cached).copy_(wv);
        if (state.cfk.defined()) state.cfk.select(2, state.cached).copy_(wk);
        state.cpos.select(2, state.cached).fill_(leaving);
        state.cached += 1;
        admits = false;
      } else {
        auto fk_all = torch::cat({key_features_of(state.cfk, state.ck, o, f.k), wk.unsqueeze(2)}, 2), v_all = torch::cat({state.cv, wv.unsqueeze(2)}, 2);
        auto pos_all = torch::cat({state.cpos, torch::full({b, h, 1}, leaving, state.cpos.options())}, 2);
        // scored in the state's type (float under bf16), as the whole-sequence form's selection scores them
        const auto fk = fk_all.to(state.linear.S.dtype());
        auto kc = f.log_space ? (fk - std::get<0>(fk.max(-1, true))).exp() : fk;
        auto den = (kc * state.linear.z.unsqueeze(2)).sum(-1, true);
        auto pred = torch::matmul(kc, state.linear.S) / torch::where(den == 0, torch::ones_like(den), den);
        auto sre = (pred - v_all.to(pred.dtype())).pow(2).sum(-1);  // [B, H, λ + 1]
        // the least error is written; of equal errors the newest key (the older stays, as the selection ranks them)
        auto least = std::get<0>(sre.min(-1, true));
        auto idx = torch::where(sre == least, pos_all, torch::full_like(pos_all, -1)).argmax(-1, true);  // [B, H, 1]
        wk = fk_all.gather(2, idx.unsqueeze(-1).expand({b, h, 1, fk_all.size(3)})).squeeze(2);
        wv = v_all.gather(2, idx.unsqueeze(-1).expand({b, h, 1, v_all.size(3)})).squeeze(2);
        // the leaving key takes the written key's slot (when the leaving key itself is written, nothing moves)
        auto taken = torch::arange(lam, idx.options()).view({1, 1, lam}).eq(idx).unsqueeze(-1);  // [B, H, λ, 1]
        state.ck.copy_(torch::where(taken, leaving_k.unsqueeze(2), state.ck));
        state.cv.copy_(torch::where(taken, leaving_v.unsqueeze(2), state.cv));
        if (state.cfk.defined()) state.cfk.copy_(torch::where(taken, state.fk.select(2, slot).unsqueeze(2), state.cfk));
        state.cpos.copy_(torch::where(taken.squeeze(-1), torch::full_like(state.cpos, leaving), state.cpos));
      }
    }
    if (admits) {
      auto lin = linear_step_sums(f.q.select(2, 0), wk, f.log_space, wv, linear_part(o), state.linear);
      parts.push_back({lin.numden.unsqueeze(2), lin.shift.unsqueeze(2)});
    }
  }
  if (!admits) state.linear.position += 1;  // the chunked form's slot p admits nothing (a zero key) yet still counts
  state.k.select(2, slot).copy_(k.select(2, 0));
  state.v.select(2, slot).copy_(v.select(2, 0));
  if (state.fk.defined()) state.fk.select(2, slot).copy_(f.k.select(2, 0));
  state.head = (slot + 1) % w;
  state.filled = std::min(w, state.filled + 1);
  state.position += 1;

  // The window: the new query against the ring's keys, in slot order (the sums do not depend on the order). As
  // products and sums over d rather than matmul: for one query a batched matmul runs one tiny GEMM per (row, head),
  // and the two products cost twice the time of these at batch 1, 8 and 64 (1 thread, w = 64, d = 24). Under
  // grouped-query attention the g query heads of a KV head read its ring as g rows, without repeating it.
  const int64_t g = h / hk;
  auto s = hk == h ? (state.k.to(q.dtype()) * q).sum(-1).unsqueeze(2) * scale  // [B, H, 1, w]
                   : (state.k.to(q.dtype()).unsqueeze(2) * q.reshape({b, hk, g, 1, q.size(3)})).sum(-1).reshape({b, h, 1, w}) * scale;
  if (state.filled < w) {  // slots not written yet: their logical index (slot − head) mod w is below w − filled
    auto logical = (torch::arange(w, q.options().dtype(torch::kLong)) - state.head).remainder(w);
    s = s.masked_fill(logical.lt(w - state.filled).view({1, 1, 1, w}), -kInf);
  }
  at::Tensor values = state.v;
  if (state.cached > 0) {  // the cache's keys are softmax terms beside the window's, under the same M
    auto ck = state.ck.narrow(2, 0, state.cached), cv = state.cv.narrow(2, 0, state.cached);
    s = torch::cat({s, (ck.to(q.dtype()) * q).sum(-1).unsqueeze(2) * scale}, -1);
    // the cache's values are per query head: the ring's repeated beside them (one reduction, as without groups;
    // a window sum and a cache sum added apart would round once more under bf16)
    values = torch::cat({expand_kv_heads(state.v, h), cv}, 2);
  }
  auto M = std::get<0>(s.max(-1, true));  // finite: the new key is always in the window
  auto e = (s - M).exp() * per_head(o.window_weight, s, 4);
  at::Tensor wnum;  // [B, H, 1, D]
  if (hk == h || state.cached > 0)
    wnum = (e.transpose(-1, -2) * values.to(e.dtype())).sum(2, true);
  else  // a KV head's ring against its g query heads' weights
    wnum = (e.reshape({b, hk, g, w, 1}) * state.v.to(e.dtype()).unsqueeze(2)).sum(3).reshape({b, h, 1, v.size(3)});
  auto wden = e.sum(-1, true);
  auto wshift = o.exact ? M : torch::zeros_like(wden);  // as window_sums: exact keeps σ exp(s), M only stabilises
  return combine(wnum, wden, wshift, parts, o.linear_weight);
}

HybridState hybrid_state_copy(const HybridState& state) {
  HybridState c = state;
  if (state.defined()) {
    c.k = state.k.clone();
    c.v = state.v.clone();
    if (state.fk.defined()) c.fk = state.fk.clone();
  }
  if (state.ck.defined()) {
    c.ck = state.ck.clone();
    c.cv = state.cv.clone();
    if (state.cfk.defined()) c.cfk = state.cfk.clone();
    c.cpos = state.cpos.clone();
  }
  return c;
}

at::Tensor hybrid_bidirectional(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Features& f, double scale,
                                const HybridOptions& o, const at::Tensor& mask) {
  check_inputs(q, k, v, f, o, mask);
  MIMIC_CHECK(!o.causal, "hybrid attention: the bidirectional form is not causal; use the chunked form");
  const int64_t b = q.size(0), t = q.size(2), w = o.window;
  auto valid = key_valid(mask, b, t, q.options());
  // Window: query i reads keys i−w+1 … i+w−1, i.e. positions i … i+2w−2 of the keys padded by w−1 on both sides.
  auto both = [&](const at::Tensor& x, int64_t dim) { return pad(pad(x, dim, w - 1), dim, -(w - 1)); };
  at::Tensor wshift;
  auto [wnum, wden] =
      window_sums(q, both(k, 2), both(v, 2), both(valid, 1), 2 * w - 1, scale, o.window_weight, window_block(o), o.exact, &wshift);
  // Linear: keys j <= i−w (a causal pass over keys delayed by w) and j >= i+w (the same pass on the reversed sequence).
  const auto lo = linear_part(o);
  auto before = linear_chunked_sums({f.q, delayed(f.k, 2, w), f.log_space}, delayed(v, 2, w), lo, delayed(valid, 1, w));
  auto rq = f.q.flip(2), rk = f.k.flip(2), rvv = v.flip(2), rvalid = valid.flip(1);
  auto after = linear_chunked_sums({rq, delayed(rk, 2, w), f.log_space}, delayed(rvv, 2, w), lo, delayed(rvalid, 1, w));
  after.numden = after.numden.flip(2);
  after.shift = after.shift.flip(2);
  return combine(wnum, wden, wshift, {before, after}, o.linear_weight);
}

at::Tensor hybrid_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Features& f, double scale,
                            const HybridOptions& o, const at::Tensor& mask, HybridState* state) {
  if (o.causal && o.cache > 0 && !state) {  // the cache's forms (sparse_cache.h), the same function
    // The chunked form keeps, per selection, the state it left and the λ keys and values it cached — about
    // (F + 2λ)·D / cache_every numbers a query, plus its band's scores, its chunk no longer than the sequence — where
    // the quadratic form keeps a few [T, T] tensors for the backward, about 6·T a query: at cache_every = 1 and
    // gpt2-mini's λ = 256 (13,440 a query) the chunked form's training step peaked at 14 GB at T = 256 and took three
    // times the quadratic one's (under load). The smaller of the two runs; an empty sequence gets the chunked form's
    // zeros. A catch of the quadratic form: one log-scale constant over the whole sequence where the chunked form keeps
    // a running one, so in float32 a key ~88 nats above the earlier ones in log-feature zeroes their rows (as in the
    // plain hybrid's quadratic form: docs/attention.md).
    const int64_t t = q.size(2), every = std::clamp<int64_t>(o.cache_every, 1, std::max<int64_t>(t, 1));
    const int64_t per_query_chunked = (f.k.size(3) + 2 * o.cache) * v.size(3) / every + o.window + every + o.cache;
    if (t > 0 && 6 * t < per_query_chunked) return hybrid_quadratic(q, k, v, f, scale, o, mask);
    return hybrid_cache_chunked(q, k, v, f, scale, o, mask);
  }
  if (o.causal) return hybrid_chunked(q, k, v, f, scale, o, mask, state);
  MIMIC_CHECK(!state, "hybrid attention: a recurrent state needs causal attention");
  MIMIC_CHECK(o.cache == 0, "hybrid attention: the sparse cache is for causal attention only (a bidirectional query reads keys no "
              "selection has seen); leave cache out for this model");
  return hybrid_bidirectional(q, k, v, f, scale, o, mask);
}

int64_t hybrid_state_bytes(const HybridState& s) {
  int64_t n = 0;
  for (const auto* t : {&s.k, &s.v, &s.fk, &s.linear.S, &s.linear.z, &s.linear.m, &s.ck, &s.cv, &s.cfk, &s.cpos})
    if (t->defined()) n += static_cast<int64_t>(t->nbytes());
  return n;
}

}  // namespace mimic::attention
