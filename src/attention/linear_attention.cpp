#include "mimic/attention/linear_attention.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "mimic/core/error.h"
#include "mimic/core/precision.h"

namespace mimic::attention {

Norm parse_norm(const std::string& name) {
  if (name == "row") return Norm::Row;
  if (name == "none") return Norm::None;
  if (name == "l2") return Norm::L2;
  if (name == "rms") return Norm::RMS;
  fail("unknown normalisation '", name, "' (known: row, none, l2, rms)");
}

std::string norm_name(Norm norm) {
  switch (norm) {
    case Norm::Row: return "row";
    case Norm::None: return "none";
    case Norm::L2: return "l2";
    case Norm::RMS: return "rms";
  }
  return "?";
}

LinearState zero_state(int64_t batch, int64_t heads, int64_t features, int64_t head_dim, const at::TensorOptions& options) {
  LinearState s;
  s.S = torch::zeros({batch, heads, features, head_dim}, options);
  s.z = torch::zeros({batch, heads, features}, options);
  s.m = torch::full({batch, heads}, -std::numeric_limits<double>::infinity(), options);  // empty: nothing stored yet
  return s;
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void check_inputs(const Features& f, const at::Tensor& v, const LinearOptions& opts, const at::Tensor& mask) {
  MIMIC_CHECK(f.q.dim() == 4 && f.k.dim() == 4 && v.dim() == 4, "linear attention: features and values must be [B, H, T, ·], got ",
              f.q.sizes(), ", ", f.k.sizes(), ", ", v.sizes());
  MIMIC_CHECK(f.q.sizes() == f.k.sizes(), "linear attention: query features ", f.q.sizes(), " and key features ", f.k.sizes(),
              " differ (self-attention only)");
  MIMIC_CHECK(v.size(0) == f.q.size(0) && v.size(1) == f.q.size(1) && v.size(2) == f.q.size(2),
              "linear attention: values ", v.sizes(), " do not match features ", f.q.sizes());
  MIMIC_CHECK(!mask.defined() || (mask.dim() == 2 && mask.size(0) == v.size(0) && mask.size(1) == v.size(2)),
              "linear attention: key padding mask must be [B, T] = [", v.size(0), ", ", v.size(2), "], got ",
              mask.defined() ? mask.sizes() : at::IntArrayRef{});
  MIMIC_CHECK(opts.chunk >= 1, "linear attention: chunk size must be >= 1, got ", opts.chunk);
  MIMIC_CHECK(opts.eps >= 0, "linear attention: eps must be >= 0, got ", opts.eps);
  if (opts.decay.defined()) {
    MIMIC_CHECK(opts.causal, "linear attention: decay needs causal attention");
    MIMIC_CHECK(opts.decay.dim() == 1 && opts.decay.size(0) == v.size(1), "linear attention: decay must hold one value per head (",
                v.size(1), "), got ", opts.decay.sizes());
    MIMIC_CHECK((opts.decay > 0).all().item<bool>() && (opts.decay <= 1).all().item<bool>(),
                "linear attention: decay values must be in (0, 1]");
  }
}

bool stabilised(bool log_space, const LinearOptions& o) { return log_space && o.norm != Norm::None; }

// The query features as read: exp(log φ − max) for stabilised exp maps (the max cancels), else φ.
// shift (if given) receives the subtracted log-constant per query, [.., 1] (0 when nothing is subtracted).
at::Tensor read_features(const at::Tensor& q, bool log_space, bool stab, at::Tensor* shift = nullptr) {
  if (!log_space || !stab) {
    if (shift) *shift = torch::zeros_like(q.narrow(-1, 0, 1));
    return log_space ? q.exp() : q;
  }
  auto top = std::get<0>(q.detach().max(-1, true));
  if (shift) *shift = top;
  return (q - top).exp();
}

// ε in the units of the unstabilised sums: the stabilised sums are exp(−shift) times the true ones, so ε is
// scaled alike, which makes every form (whatever constants it subtracted) compute the same function. The
// exponent is capped to stay finite, and a floor keeps 0/0 (a row whose terms all underflow) at 0.
at::Tensor scaled_eps(double eps, const at::Tensor& shift) {
  const double floor = std::numeric_limits<float>::min();
  return (eps * (-shift).clamp_max(80.0).exp()).clamp_min(floor);
}

// The divisor of row i, [.., 1], for [.., D+1] = [Σ a v, Σ a] at log-scale shift [.., 1] (ones for None).
at::Tensor divisor(const at::Tensor& numden, const LinearOptions& o, const at::Tensor& shift) {
  const int64_t d = numden.size(-1) - 1;
  auto num = numden.narrow(-1, 0, d);
  switch (o.norm) {
    case Norm::Row: return numden.narrow(-1, d, 1) + scaled_eps(o.eps, shift);
    case Norm::None: return torch::ones_like(numden.narrow(-1, d, 1));
    case Norm::L2: return at::linalg_vector_norm(num, 2, {-1}, true) + scaled_eps(o.eps, shift);
    case Norm::RMS: return num.square().mean(-1, true).sqrt() + scaled_eps(o.eps, shift);
  }
  return num;
}

at::Tensor normalise(const at::Tensor& numden, const LinearOptions& o, const at::Tensor& shift) {
  auto num = numden.narrow(-1, 0, numden.size(-1) - 1);
  // No divisor cancels the scale the sums were computed at (exp(−shift): a carried state's m), so it is undone.
  // Found by the definition written query by query (tests/test_attention.cpp): a state with m ≠ 0 read under norm
  // none gave exp(−m) times the sums. shift is 0 for every state mimic makes under none: the result is unchanged.
  if (o.norm == Norm::None) return shift.defined() ? num * shift.exp() : num;
  return num / divisor(numden, o, shift);
}

at::Tensor with_ones(const at::Tensor& v) { return torch::cat({v, torch::ones_like(v.narrow(-1, 0, 1))}, -1); }

// log γ in float (double with double inputs) whatever the features' type: in bf16, γ_h = 1 − 2^(−5−h) is 1 exactly
// for h ≥ 4 (no decay at all in half of an 8-head layer), and positions above 256 are no longer whole numbers
// (helper-40's review). The powers of γ built from it (causal_matrix, chunk_block, the quadratic form) are of its type.
at::Tensor log_decay(const LinearOptions& o, const at::Tensor& like) {
  return o.decay.defined() ? o.decay.to(float_or_wider(like.scalar_type())).log() : at::Tensor();
}

// γ^(e) per head for exponents e (any shape): [H, e...].
at::Tensor decay_pow(const at::Tensor& log_gamma, const at::Tensor& exponents) {
  std::vector<int64_t> shape(exponents.dim() + 1, 1);
  shape[0] = log_gamma.size(0);
  return (log_gamma.view(shape) * exponents.unsqueeze(0)).exp();
}

// Causal weights within a block of n positions: [H, n, n] with γ^(i−j) for j ≤ i, else 0 (or [n, n] without decay).
at::Tensor causal_matrix(int64_t n, const at::Tensor& log_gamma, const at::TensorOptions& opts) {
  auto tril = torch::ones({n, n}, opts).tril();
  if (!log_gamma.defined()) return tril;
  auto idx = torch::arange(n, opts.dtype(log_gamma.scalar_type()));
  auto diff = (idx.unsqueeze(1) - idx.unsqueeze(0)).clamp_min(0);
  return decay_pow(log_gamma, diff) * tril;
}

struct Prepared {
  at::Tensor q, k;   // features as used: q read-ready, k scaled by exp(−m) and zero at padded keys
  at::Tensor m;      // [B, H]
  at::Tensor shift;  // [B, H, T, 1]: log of (true sums / computed sums) per query: m + the query's max
  at::Tensor S0;    // [B, H, F, D+1] incoming state (with z as the last column) at scale m, or undefined
};

Prepared prepare(const Features& f, const LinearOptions& o, const at::Tensor& mask, const LinearState* initial) {
  const int64_t b = f.q.size(0), h = f.q.size(1), t = f.q.size(2);
  const bool stab = stabilised(f.log_space, o);
  const bool has_state = initial && initial->defined();
  Prepared p;
  at::Tensor qshift;
  p.q = read_features(f.q, f.log_space, stab, &qshift);
  auto m0 = has_state ? initial->m.to(f.q.dtype()) : torch::full({b, h}, -kInf, f.q.options());
  const auto wide = float_or_wider(f.q.scalar_type());  // the type the forms keep a LinearState in
  at::Tensor m = m0;
  if (stab && t > 0) {
    auto lk = f.k.detach();
    if (mask.defined()) lk = lk.masked_fill(mask.logical_not().view({b, 1, t, 1}), -kInf);
    m = torch::maximum(m0, lk.amax({2, 3}));
  }
  m = torch::where(torch::isinf(m), torch::zeros_like(m), m);  // nothing stored and no key: any constant will do
  p.m = m;
  p.shift = qshift + m.view({b, h, 1, 1});
  auto scale = (-m).exp().view({b, h, 1, 1});
  p.k = f.log_space ? (f.k - m.view({b, h, 1, 1})).exp() : (has_state ? f.k * scale : f.k);
  if (mask.defined()) p.k = p.k * mask.to(p.k.dtype()).view({b, 1, t, 1});
  if (has_state) {
    MIMIC_CHECK(o.causal, "linear attention: an initial state needs causal attention");
    auto s = torch::cat({initial->S, initial->z.unsqueeze(-1)}, -1).to(wide);
    MIMIC_CHECK(s.size(0) == b && s.size(1) == h && s.size(2) == f.q.size(3), "linear attention: state ", initial->S.sizes(),
                " does not match features ", f.q.sizes());
    p.S0 = s * (m0 - m).to(wide).exp().view({b, h, 1, 1});
  }
  return p;
}

void store_state(LinearState* state, const at::Tensor& S, const at::Tensor& m, int64_t consumed) {
  if (!state) return;
  const int64_t d = S.size(-1) - 1;
  const int64_t position = state->position;
  state->S = S.narrow(-1, 0, d);
  state->z = S.select(-1, d);
  state->m = m;
  state->position = position + consumed;
}

// One block of n chunks of size c (q, k, v1 hold n·c positions). S: the state before the block ([B, H, F, D+1] or
// undefined = zero); replaced by the state after it. Returns [B, H, n·c, D+1] = [Σ a v, Σ a].
at::Tensor chunk_block(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v1, int64_t c, const at::Tensor& log_gamma,
                       at::Tensor& S) {
  const int64_t b = q.size(0), h = q.size(1), t = q.size(2), f = q.size(3), e = v1.size(3), n = t / c;
  auto qc = q.reshape({b, h, n, c, f}), kc = k.reshape({b, h, n, c, f}), vc = v1.reshape({b, h, n, c, e});
  auto opts = q.options();
  auto intra = causal_matrix(c, log_gamma, opts);  // [c, c] or [H, c, c]
  if (log_gamma.defined()) intra = intra.unsqueeze(1);  // [H, 1, c, c] against [B, H, n, c, c]
  auto out = torch::matmul(torch::matmul(qc, kc.transpose(-1, -2)) * intra, vc);

  // What each chunk writes to the state: Σ_r γ^(c−1−r) φ(k_r) [v_r, 1]ᵀ.
  auto kw = kc;
  at::Tensor read_scale;
  // With a decay, the state carried from chunk to chunk in float (double with double inputs): under bf16 the carry
  // `cur * carry + kv` was rounded at every chunk. Without one it is a cumulative sum, one rounding a prefix (CPU
  // autocast leaves it in bf16), widened where it is stored.
  const auto wide = opts.dtype(float_or_wider(q.scalar_type()));
  if (log_gamma.defined()) {
    auto r = torch::arange(c, wide);
    kw = kc * decay_pow(log_gamma, (c - 1) - r).view({h, 1, c, 1});
    read_scale = decay_pow(log_gamma, r + 1).view({h, 1, c, 1});
  }
  auto kv = torch::matmul(kw.transpose(-1, -2), vc);  // [B, H, n, F, D+1]

  at::Tensor before;  // the state each chunk reads: [B, H, n, F, D+1]
  if (!log_gamma.defined()) {
    auto inclusive = kv.cumsum(2);
    before = torch::cat({torch::zeros_like(kv.narrow(2, 0, 1)), inclusive.narrow(2, 0, n - 1)}, 2);
    if (S.defined()) before = before + S.unsqueeze(2);
    S = S.defined() ? S + inclusive.select(2, n - 1) : inclusive.select(2, n - 1);
  } else {
    auto carry = decay_pow(log_gamma, torch::full({}, static_cast<double>(c), wide)).view({1, h, 1, 1});
    auto cur = S.defined() ? S : torch::zeros({b, h, f, e}, wide);
    std::vector<at::Tensor> states;
    states.reserve(n);
    for (int64_t i = 0; i < n; ++i) {
      states.push_back(cur);
      cur = cur * carry + kv.select(2, i);
    }
    before = torch::stack(states, 2);
    S = cur;
  }
  auto qr = read_scale.defined() ? qc * read_scale : qc;
  out = out + torch::matmul(qr, before);
  return out.reshape({b, h, t, e});
}

}  // namespace

double log_weight_floor() { return std::log(static_cast<double>(std::numeric_limits<float>::min())); }

at::Tensor linear_quadratic(const Features& f, const at::Tensor& v, const LinearOptions& opts, const at::Tensor& mask,
                            const LinearState* initial, at::Tensor* weights, at::Tensor* log_weights) {
  check_inputs(f, v, opts, mask);
  auto p = prepare(f, opts, mask, initial);
  const int64_t t = v.size(2);
  auto lg = log_decay(opts, p.q);
  auto a = torch::matmul(p.q, p.k.transpose(-1, -2));  // [B, H, T, T]
  if (opts.causal) a = a * causal_matrix(t, lg, p.q.options());
  auto numden = torch::matmul(a, with_ones(v).to(a.dtype()));
  if (p.S0.defined()) {
    auto r = torch::matmul(p.q, p.S0);
    if (lg.defined()) r = r * decay_pow(lg, torch::arange(1, t + 1, p.q.options().dtype(lg.scalar_type()))).unsqueeze(-1);
    numden = numden + r;
  }
  if (weights || log_weights) {
    auto div = divisor(numden, opts, p.shift);
    if (weights) *weights = a / div;
    if (log_weights) {
      const double tiny = std::numeric_limits<float>::min();
      *log_weights = a.clamp_min(tiny).log() - div.clamp_min(tiny).log();
    }
  }
  return normalise(numden, opts, p.shift);
}

namespace {
// The chunked form up to (not including) the normalisation.
LinearSums chunked_sums(const Features& f, const at::Tensor& v, const LinearOptions& opts, const at::Tensor& mask, LinearState* state) {
  check_inputs(f, v, opts, mask);
  MIMIC_CHECK(opts.causal, "linear attention: the chunked form is causal; use the bidirectional form");
  auto p = prepare(f, opts, mask, state);
  const int64_t t = v.size(2), c = opts.chunk, whole = t / c * c;
  auto lg = log_decay(opts, p.q);
  auto v1 = with_ones(v).to(p.q.dtype());
  at::Tensor S = p.S0;
  std::vector<at::Tensor> parts;
  if (whole > 0) parts.push_back(chunk_block(p.q.narrow(2, 0, whole), p.k.narrow(2, 0, whole), v1.narrow(2, 0, whole), c, lg, S));
  if (t > whole) {  // the tail: one shorter chunk
    const int64_t rest = t - whole;
    parts.push_back(chunk_block(p.q.narrow(2, whole, rest), p.k.narrow(2, whole, rest), v1.narrow(2, whole, rest), rest, lg, S));
  }
  if (state) {
    const auto wide = p.q.options().dtype(float_or_wider(p.q.scalar_type()));
    S = S.defined() ? S.to(wide.dtype()) : torch::zeros({v.size(0), v.size(1), p.q.size(3), v.size(3) + 1}, wide);
    store_state(state, S, p.m.to(wide.dtype()), t);
  }
  if (parts.empty()) return {torch::zeros({v.size(0), v.size(1), 0, v.size(3) + 1}, v.options()), p.shift};
  return {parts.size() == 1 ? parts[0] : torch::cat(parts, 2), p.shift};
}
}  // namespace

LinearSums linear_chunked_sums(const Features& f, const at::Tensor& v, const LinearOptions& opts, const at::Tensor& mask,
                               LinearState* state) {
  MIMIC_CHECK(opts.norm != Norm::None, "linear attention: stabilised sums need a normalisation (not none)");
  return chunked_sums(f, v, opts, mask, state);
}

at::Tensor linear_chunked(const Features& f, const at::Tensor& v, const LinearOptions& opts, const at::Tensor& mask,
                          LinearState* state) {
  auto sums = chunked_sums(f, v, opts, mask, state);
  if (v.size(2) == 0) return torch::zeros_like(v);
  return normalise(sums.numden, opts, sums.shift);
}

at::Tensor linear_bidirectional(const Features& f, const at::Tensor& v, const LinearOptions& opts, const at::Tensor& mask) {
  check_inputs(f, v, opts, mask);
  MIMIC_CHECK(!opts.causal, "linear attention: the bidirectional form is not causal; use the chunked form");
  auto p = prepare(f, opts, mask, nullptr);
  auto kv = torch::matmul(p.k.transpose(-1, -2), with_ones(v).to(p.q.dtype()));  // [B, H, F, D+1]
  return normalise(torch::matmul(p.q, kv), opts, p.shift);
}

at::Tensor linear_attention(const Features& f, const at::Tensor& v, const LinearOptions& opts, const at::Tensor& mask,
                            LinearState* state) {
  if (opts.causal) return linear_chunked(f, v, opts, mask, state);
  MIMIC_CHECK(!state, "linear attention: a recurrent state needs causal attention");
  return linear_bidirectional(f, v, opts, mask);
}

LinearSums linear_step_sums(const at::Tensor& q, const at::Tensor& k, bool log_space, const at::Tensor& v, const LinearOptions& opts,
                            LinearState& state) {
  MIMIC_CHECK(q.dim() == 3 && k.sizes() == q.sizes() && v.dim() == 3 && v.size(0) == q.size(0) && v.size(1) == q.size(1),
              "linear attention step: q, k must be [B, H, F] and v [B, H, D], got ", q.sizes(), ", ", k.sizes(), ", ", v.sizes());
  MIMIC_CHECK(opts.causal, "linear attention step: the recurrence is causal");
  const int64_t b = q.size(0), h = q.size(1);
  // The state, its decay and its rescaling in float (double with double inputs) whatever q's type: under bf16 the
  // sums rounded to bf16 at every token lost a token's term once they were ~256 times larger (helper-40's review:
  // z 9% low after 500 steps). fp32 and double are computed as they were.
  const auto wide = float_or_wider(q.scalar_type());
  if (!state.defined()) {
    const int64_t position = state.position;
    state = zero_state(b, h, q.size(2), v.size(2), q.options().dtype(wide));
    state.position = position;
  }
  const bool stab = stabilised(log_space, opts);
  auto m0 = state.m.to(q.dtype());
  auto m = stab ? torch::maximum(m0, k.detach().amax(-1)) : m0;
  m = torch::where(torch::isinf(m), torch::zeros_like(m), m);
  auto keep = (m0 - m).to(wide).exp();  // rescales the stored state to the new constant (0 for an empty state)
  if (opts.decay.defined()) keep = keep * opts.decay.to(wide).view({1, h});
  auto kf = log_space ? (k - m.unsqueeze(-1)).exp() : k * (-m).exp().unsqueeze(-1);
  auto S = torch::cat({state.S, state.z.unsqueeze(-1)}, -1).to(wide) * keep.view({b, h, 1, 1}) +
           kf.unsqueeze(-1) * with_ones(v).to(q.dtype()).unsqueeze(-2);
  at::Tensor qshift;
  auto qf = read_features(q, log_space, stab, &qshift);
  LinearSums sums{torch::matmul(qf.unsqueeze(-2), S).squeeze(-2), qshift + m.unsqueeze(-1)};
  store_state(&state, S, m.to(wide), 1);  // m in the state's type: its bytes do not change after the first token
  return sums;
}

at::Tensor linear_step(const at::Tensor& q, const at::Tensor& k, bool log_space, const at::Tensor& v, const LinearOptions& opts,
                       LinearState& state) {
  auto sums = linear_step_sums(q, k, log_space, v, opts, state);
  return normalise(sums.numden, opts, sums.shift);
}

at::Tensor linear_recurrent(const Features& f, const at::Tensor& v, const LinearOptions& opts, LinearState& state) {
  check_inputs(f, v, opts, at::Tensor());
  std::vector<at::Tensor> outs;
  for (int64_t i = 0; i < v.size(2); ++i)
    outs.push_back(linear_step(f.q.select(2, i), f.k.select(2, i), f.log_space, v.select(2, i), opts, state));
  if (outs.empty()) return torch::zeros_like(v);
  return torch::stack(outs, 2);
}

}  // namespace mimic::attention
