#include "mimic/attention/delta_rule.h"

#include <torch/torch.h>

#include <limits>
#include <vector>

#include "mimic/core/error.h"

namespace mimic::attention {

namespace {

void check_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta, const at::Tensor& log_alpha,
                  const at::Tensor& state) {
  MIMIC_CHECK(q.dim() == 4 && k.sizes() == q.sizes(), "delta rule: q and k must be [B, H, T, Dk] alike, got ", q.sizes(), " and ", k.sizes());
  MIMIC_CHECK(v.dim() == 4 && v.size(0) == q.size(0) && v.size(1) == q.size(1) && v.size(2) == q.size(2),
              "delta rule: v must be [B, H, T, Dv] with q's B, H, T = ", q.sizes(), ", got ", v.sizes());
  MIMIC_CHECK(beta.sizes() == q.sizes().slice(0, 3), "delta rule: beta must be [B, H, T] = ", q.sizes().slice(0, 3), ", got ", beta.sizes());
  MIMIC_CHECK(!log_alpha.defined() || log_alpha.sizes() == beta.sizes(), "delta rule: log_alpha must be [B, H, T] as beta, got ",
              log_alpha.sizes());
  MIMIC_CHECK(!state.defined() || state.sizes() == at::IntArrayRef({q.size(0), q.size(1), q.size(3), v.size(3)}),
              "delta rule: the state must be [B, H, Dk, Dv] = [", q.size(0), ", ", q.size(1), ", ", q.size(3), ", ", v.size(3), "], got ",
              state.sizes());
}

at::Tensor initial_state(const at::Tensor& q, const at::Tensor& v, const at::Tensor& state) {
  return state.defined() ? state : torch::zeros({q.size(0), q.size(1), q.size(3), v.size(3)}, v.options());
}

}  // namespace

at::Tensor delta_rule_step(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                           const at::Tensor& log_alpha, at::Tensor& state) {
  MIMIC_CHECK(q.dim() == 3 && k.sizes() == q.sizes() && v.dim() == 3 && beta.dim() == 2, "delta rule step: q, k [B, H, Dk], v [B, H, Dv], beta [B, H]");
  const auto b = beta.unsqueeze(-1).unsqueeze(-1);
  const auto kk = k.unsqueeze(-1);                              // [B, H, Dk, 1]
  const auto stored = at::matmul(k.unsqueeze(-2), state);       // kᵀS: what the state returns for k, [B, H, 1, Dv]
  auto next = state - b * kk * stored;                          // (I − β k kᵀ) S
  if (log_alpha.defined()) next = log_alpha.exp().unsqueeze(-1).unsqueeze(-1) * next;
  state = next + b * kk * v.unsqueeze(-2);                      // + β k vᵀ
  return at::matmul(q.unsqueeze(-2), state).squeeze(-2);        // Sᵀq
}

DeltaRuleResult delta_rule_naive(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                                 const at::Tensor& log_alpha, const at::Tensor& state) {
  check_inputs(q, k, v, beta, log_alpha, state);
  auto S = initial_state(q, v, state);
  std::vector<at::Tensor> outs;
  outs.reserve(static_cast<size_t>(q.size(2)));
  for (int64_t t = 0; t < q.size(2); ++t)
    outs.push_back(delta_rule_step(q.select(2, t), k.select(2, t), v.select(2, t), beta.select(2, t),
                                   log_alpha.defined() ? log_alpha.select(2, t) : at::Tensor(), S));
  auto out = outs.empty() ? torch::zeros_like(v) : torch::stack(outs, 2);
  return {out, S};
}

namespace {

// What one chunk's WY form needs of its keys, β and log α (delta_rule.h): the causal mask (i ≤ t), Γ, e^g, e^{g_C − g},
// e^{g_C} (undefined without a gate: all ones) and T = (I + tril(diag(β)(Γ ⊙ KKᵀ), −1))⁻¹ diag(β).
struct ChunkTerms {
  at::Tensor lower, gamma, decay_in, decay_out, last, t;
};

// (K [..., c, Dk], B and log α [..., c]: one chunk, or every chunk at once along a dimension before the last two)
ChunkTerms chunk_terms(const at::Tensor& K, const at::Tensor& B, const at::Tensor& log_alpha) {
  const int64_t c = K.size(-2);
  const double inf = std::numeric_limits<double>::infinity();
  ChunkTerms r;
  r.lower = torch::ones({c, c}, torch::dtype(torch::kBool).device(K.device())).tril();
  if (log_alpha.defined()) {
    const auto g = log_alpha.cumsum(-1);  // [B, H, c], non-increasing
    r.gamma = (g.unsqueeze(-1) - g.unsqueeze(-2)).masked_fill(r.lower.logical_not(), -inf).exp();
    r.decay_in = g.exp().unsqueeze(-1);
    const auto gl = g.select(-1, c - 1);
    r.decay_out = (gl.unsqueeze(-1) - g).exp().unsqueeze(-1);
    r.last = gl.exp().unsqueeze(-1).unsqueeze(-1);
  }
  const auto KK = at::matmul(K, K.transpose(-1, -2));  // [B, H, c, c]
  auto a = B.unsqueeze(-1) * (r.gamma.defined() ? KK * r.gamma : KK);
  a = a.masked_fill(r.lower.tril(-1).logical_not(), 0.0) + torch::eye(c, K.options());
  // A is unit lower triangular: one triangular solve
  r.t = at::linalg_solve_triangular(a, torch::diag_embed(B), /*upper=*/false, /*left=*/true, /*unitriangular=*/true);
  return r;
}

// (Q Kᵀ) ⊙ Γ on and below the diagonal, 0 above.
at::Tensor causal_scores(const at::Tensor& Q, const at::Tensor& K, const ChunkTerms& c) {
  auto scores = at::matmul(Q, K.transpose(-1, -2));
  return (c.gamma.defined() ? scores * c.gamma : scores).masked_fill(c.lower.logical_not(), 0.0);
}

}  // namespace

DeltaRuleResult delta_rule_chunked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                                   const at::Tensor& log_alpha, const at::Tensor& state, int64_t chunk) {
  check_inputs(q, k, v, beta, log_alpha, state);
  MIMIC_CHECK(chunk >= 1, "delta rule: chunk must be >= 1 token, got ", chunk);
  auto S = initial_state(q, v, state);
  const int64_t T = q.size(2);
  if (T == 0) return {torch::zeros_like(v), S};
  // Everything that does not depend on the state is computed for every chunk at once — the products, masks and
  // triangular solves of the WY form — and only the state's recurrence runs chunk after chunk (four products each).
  // Chunk by chunk, those ~15 small operations per chunk made the backward nine times the forward (bench attention:
  // delta fwd+bwd 4.0× faster than softmax at 16K, against linear attention's 24×). The last chunk is filled with
  // zero rows (β = 0, α = 1, k = v = q = 0): their rows of T are zero, so they write nothing and decay nothing.
  const int64_t c = std::min(chunk, T), n = (T + c - 1) / c, pad = n * c - T;
  auto blocks = [&](const at::Tensor& x) {  // [B, H, T, ...] → [B, H, n, c, ...]
    auto shape = x.sizes().vec();
    shape[2] = pad;
    auto y = pad > 0 ? torch::cat({x, torch::zeros(shape, x.options())}, 2) : x;
    shape[2] = c;
    shape.insert(shape.begin() + 2, n);
    return y.reshape(shape);
  };
  const auto Q = blocks(q), K = blocks(k), V = blocks(v);
  const auto terms = chunk_terms(K, blocks(beta), log_alpha.defined() ? blocks(log_alpha) : at::Tensor());
  const auto W = at::matmul(terms.t, terms.decay_in.defined() ? terms.decay_in * K : K);  // [B, H, n, c, Dk]
  const auto TV = at::matmul(terms.t, V);                                                  // [B, H, n, c, Dv]
  const auto scores = causal_scores(Q, K, terms);                                          // [B, H, n, c, c]
  const auto Kout = (terms.decay_out.defined() ? terms.decay_out * K : K).transpose(-1, -2);
  // (unbound once: a select per chunk would give each its own backward of the whole tensor's size, O(n²) work)
  const auto Wn = W.unbind(2), TVn = TV.unbind(2), Qn = Q.unbind(2), Sn = scores.unbind(2), Kn = Kout.unbind(2);
  std::vector<at::Tensor> decay_in, last;
  if (terms.decay_in.defined()) decay_in = terms.decay_in.unbind(2), last = terms.last.unbind(2);
  std::vector<at::Tensor> outs;
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    const auto U = TVn[i] - at::matmul(Wn[i], S);
    const auto QS = at::matmul(Qn[i], S);
    outs.push_back((decay_in.empty() ? QS : decay_in[i] * QS) + at::matmul(Sn[i], U));
    S = (last.empty() ? S : last[i] * S) + at::matmul(Kn[i], U);
  }
  auto out = torch::stack(outs, 2).reshape({v.size(0), v.size(1), n * c, v.size(3)});
  return {pad > 0 ? out.narrow(2, 0, T) : out, S};
}

at::Tensor delta_rule_weights(const at::Tensor& q, const at::Tensor& k, const at::Tensor& beta, const at::Tensor& log_alpha) {
  check_inputs(q, k, q, beta, log_alpha, at::Tensor());
  // from a zero state, the whole sequence as one chunk: O = ((Q Kᵀ) ⊙ Γ ⊙ causal) T V
  const auto terms = chunk_terms(k, beta, log_alpha);
  return at::matmul(causal_scores(q, k, terms), terms.t);
}

}  // namespace mimic::attention
