// The (gated) delta rule: a linear-attention state that overwrites the value stored under a key instead of adding to
// it (DeltaNet; Gated DeltaNet adds a decay gate). Issue 34's `delta` kind computes with these forms; this file is the
// arithmetic alone, without projections or feature maps.
//
//   S_t = α_t (I − β_t k_t k_tᵀ) S_{t−1} + β_t k_t v_tᵀ,      o_t = S_tᵀ q_t
//
// S is [Dk, Dv] per (sequence, head); β_t in (0, 1] is how much of the value stored under k_t is replaced by v_t (with
// β = 1 and a unit key, reading with q = k_t afterwards returns v_t exactly); α_t in (0, 1] (given as log α ≤ 0) decays
// the whole state; no gate means α = 1. The recurrence is a contraction only for ‖k_t‖ ≤ 1 and β in (0, 2): the
// kind L2-normalises keys, as DeltaNet does; these functions take k as given.
//
// The forms:
//   delta_rule_step     one token of the recurrence (decoding)
//   delta_rule_naive    the recurrence token by token over a sequence: the reference
//   delta_rule_weights  the effective [T, T] weights (the whole sequence as one chunk): the quadratic form
//   delta_rule_chunked  chunks of C tokens in the WY form (fla's delta_rule README; the gated form derived below),
//                       O(T·C·(Dk + Dv) + T·Dk·Dv) with matrix products instead of T sequential steps
//
// The chunked form. Inside a chunk (local t = 1..C, state S₀ on entry, g_t = Σ_{i≤t} log α_i, Γ_ti = exp(g_t − g_i)):
// by induction S_t = e^{g_t} S₀ + Σ_{i≤t} Γ_ti k_i u_iᵀ with u_t = β_t (v_t − α_t S_{t−1}ᵀ k_t), which unrolls to the
// unit-lower-triangular system (I + tril(diag(β)(Γ ⊙ KKᵀ), −1)) U = diag(β) V − diag(β) diag(e^g) K S₀. With
// T = (I + tril(diag(β)(Γ ⊙ KKᵀ), −1))⁻¹ diag(β), W = T diag(e^g) K and Ũ = T V (one triangular solve per chunk):
//   U = Ũ − W S₀,   O = diag(e^g) Q S₀ + ((Q Kᵀ) ⊙ Γ ⊙ causal) U,   S_C = e^{g_C} S₀ + (diag(e^{g_C − g}) K)ᵀ U.
// Without a gate g = 0 and Γ = 1: DeltaNet's form. Every exponent is ≤ 0 (g is non-increasing), masked entries are
// set to −∞ before the exponential, so no form overflows.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mimic::attention {

struct DeltaRuleResult {
  at::Tensor out;    // [B, H, T, Dv]
  at::Tensor state;  // [B, H, Dk, Dv] after the last token
};

// q, k [B, H, T, Dk]; v [B, H, T, Dv]; beta [B, H, T]; log_alpha [B, H, T] (≤ 0) or undefined (no gate); state
// [B, H, Dk, Dv] or undefined (zeros). Shapes are checked (mimic::Error naming the tensor).
DeltaRuleResult delta_rule_naive(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                                 const at::Tensor& log_alpha, const at::Tensor& state);
// chunk >= 1 tokens per chunk (the last may be shorter).
DeltaRuleResult delta_rule_chunked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                                   const at::Tensor& log_alpha, const at::Tensor& state, int64_t chunk);
// The effective attention weights of the sequence from a zero state, [B, H, T, T]: out = weights · v, with weights
// that depend on q, k, β and α only (not on v). Lower triangular; entries may be negative (a later write under a
// similar key subtracts what an earlier one stored). What distill and report read; O(T²) memory.
at::Tensor delta_rule_weights(const at::Tensor& q, const at::Tensor& k, const at::Tensor& beta, const at::Tensor& log_alpha);
// One token: q, k [B, H, Dk], v [B, H, Dv], beta [B, H], log_alpha [B, H] or undefined; state [B, H, Dk, Dv] is
// replaced by the new state. Returns o [B, H, Dv].
at::Tensor delta_rule_step(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                           const at::Tensor& log_alpha, at::Tensor& state);

}  // namespace mimic::attention
