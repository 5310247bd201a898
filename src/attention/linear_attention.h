// Linear attention: one definition, several proven-equal forms.
//
//   out_i = N(Σ_j a_ij v_j),   a_ij = φ(q_i)·φ(k_j) · γ^(i−j)   (j ≤ i when causal; padded keys excluded)
//
// with the normalisation N one of
//   Row   out_i = Σ_j a_ij v_j / (Σ_j a_ij + ε)             the usual linear attention
//   None  out_i = Σ_j a_ij v_j                                SLA's form (no denominator)
//   L2    out_i = y_i / (‖y_i‖₂ + ε),  y_i = Σ_j a_ij v_j     Mongaras & Larson: a vector norm instead of the denominator
//   RMS   out_i = y_i / (sqrt(mean(y_i²)) + ε)
// and γ an optional per-head decay (causal only; RetNet). The forms:
//   linear_quadratic     materialises a [T, T] (the reference; also returns the weights)
//   linear_chunked       causal, chunks of C: intra-chunk quadratic + inter-chunk state; O(T·C·F + T·F·D)
//   linear_bidirectional non-causal (BERT): one state Σ_j φ(k_j) v_jᵀ over the unpadded keys
//   linear_step          one token of the recurrence S_t = γ S_{t−1} + φ(k_t) v_tᵀ, z_t = γ z_{t−1} + φ(k_t)
//   linear_recurrent     linear_step over a sequence (reference for the chunked form's state)
//
// Stability. Exponential maps hand over log φ (Features::log_space). For Row, L2 and RMS every form
// subtracts (i) from each query's log-features their maximum over the feature dimension, a per-query
// constant that cancels in the normalisation, and (ii) from every key's log-features one constant m per
// (sequence, head): the maximum over the call's unpadded keys and the incoming state's own m, so the largest
// key feature is exactly 1. A per-key constant would not cancel; one constant for all keys of a head does.
// Both are detached (they carry no gradient: they cancel). The state remembers m: its true value is
// exp(m)·(S, z); a new m rescales it by exp(m_old − m_new). With None nothing is subtracted (it would not
// cancel), so exp maps with None can overflow for large logits — as the unnormalised form itself does.
// ε is defined in the units of the unstabilised sums (out = y / (Σ a + ε) with the true a): the op scales it
// by the subtracted constants, so every form computes the same function whatever constants it chose (the
// chunked form uses one m per call, the recurrence a running m). In fp32 a row whose attended keys all lie
// more than ~87 nats below the head's largest key underflows; it then yields 0, never NaN.
#pragma once
#include <ATen/core/Tensor.h>

#include <string>

namespace mimic::attention {

enum class Norm { Row, None, L2, RMS };
Norm parse_norm(const std::string& name);  // "row", "none", "l2", "rms"
std::string norm_name(Norm norm);

struct LinearOptions {
  bool causal = true;
  Norm norm = Norm::Row;
  double eps = 1e-6;
  int64_t chunk = 64;
  at::Tensor decay;  // [H] in (0, 1]; undefined = no decay. Causal forms only.
};

// φ(q), φ(k): [B, H, T, F], or log φ when log_space. Gates, if any, are already folded in.
struct Features {
  at::Tensor q, k;
  bool log_space = false;
};

// The recurrent state of a causal layer. Its true value is exp(m)·(S, z).
struct LinearState {
  at::Tensor S;  // [B, H, F, D]
  at::Tensor z;  // [B, H, F]
  at::Tensor m;  // [B, H]
  int64_t position = 0;  // tokens consumed so far
  bool defined() const { return S.defined(); }
};
LinearState zero_state(int64_t batch, int64_t heads, int64_t features, int64_t head_dim, const at::TensorOptions& options);

// v: [B, H, T, D]; key_padding_mask: bool [B, T] (true = real token) or undefined.
// initial: a state to continue from (causal only) or nullptr. weights: if given, receives [B, H, T, T] with
// out = weights · v (exact when there is no initial state). log_weights: if given, receives their logarithms
// computed from the stabilised sums (log of the shifted a_ij minus log of the shifted divisor; the shifts
// cancel), so they stay finite where the weights themselves underflow. An a_ij that is 0 (masked, causal,
// or a map's zero features) or negative (sign-free maps) is floored at FLT_MIN before the division: log FLT_MIN
// minus the log of the row's divisor (the floor passes no gradient, the divisor does; docs/distill.md says
// what that means for CE and KL); where the weights are positive and representable, exp(log_weights) == weights.
at::Tensor linear_quadratic(const Features& f, const at::Tensor& v, const LinearOptions& opts, const at::Tensor& key_padding_mask,
                            const LinearState* initial = nullptr, at::Tensor* weights = nullptr,
                            at::Tensor* log_weights = nullptr);
// The floor of log_weights: log(FLT_MIN).
double log_weight_floor();
// Causal. state: nullptr, or in: the state to continue from (undefined = zero), out: the state after the call.
at::Tensor linear_chunked(const Features& f, const at::Tensor& v, const LinearOptions& opts, const at::Tensor& key_padding_mask,
                          LinearState* state = nullptr);
at::Tensor linear_bidirectional(const Features& f, const at::Tensor& v, const LinearOptions& opts,
                                const at::Tensor& key_padding_mask);
// The chunked form's unnormalised sums, for kernels that put linear attention under one denominator with
// other terms (hybrid_attention.h): numden [B, H, T, D+1] = [Σ a v, Σ a] over the visible keys, as computed,
// and shift [B, H, T, 1] (detached): the true sums are exp(shift) · numden (shift is what the stabilisation
// subtracted; 0 when nothing was). opts.norm must not be None (the stabilisation needs a normaliser).
struct LinearSums {
  at::Tensor numden, shift;
};
LinearSums linear_chunked_sums(const Features& f, const at::Tensor& v, const LinearOptions& opts, const at::Tensor& key_padding_mask,
                               LinearState* state = nullptr);
// The fast form for opts.causal: chunked or bidirectional.
at::Tensor linear_attention(const Features& f, const at::Tensor& v, const LinearOptions& opts, const at::Tensor& key_padding_mask,
                            LinearState* state = nullptr);
// One token: q, k [B, H, F] (log φ when log_space), v [B, H, D]; updates state (undefined = zero). Returns [B, H, D].
at::Tensor linear_step(const at::Tensor& q, const at::Tensor& k, bool log_space, const at::Tensor& v, const LinearOptions& opts,
                       LinearState& state);
// linear_step before its normalisation, for kernels that put the recurrence under one denominator with other terms
// (hybrid_step): absorbs k, v into the state and reads it with q. numden [B, H, D+1] = [Σ a v, Σ a], shift [B, H, 1]
// (detached; the true sums are exp(shift) · numden).
LinearSums linear_step_sums(const at::Tensor& q, const at::Tensor& k, bool log_space, const at::Tensor& v, const LinearOptions& opts,
                            LinearState& state);
// linear_step over every position of a [B, H, T, ·] sequence (no padding). Returns [B, H, T, D].
at::Tensor linear_recurrent(const Features& f, const at::Tensor& v, const LinearOptions& opts, LinearState& state);

}  // namespace mimic::attention
