// Hybrid attention (LoLCATs, Zhang et al. 2024, "sliding window + linear"): inside each head, exact softmax
// terms for the keys of a window around the query and linear-attention terms for every other key, under one
// shared denominator:
//
//   out_i = Σ_j a_ij v_j / Σ_j a_ij,
//   a_ij = σ_h · exp(s_ij − M_i)     for j in the window W(i),   s_ij = q_i·k_j·scale,  M_i = max_{j∈W(i)} s_ij
//   a_ij = λ_h · φ(q_i)·φ(k_j)       for every other visible key (older than the window when causal)
//
// W(i) = {i−w+1 … i} when causal (the query and the w−1 keys before it), {i−w+1 … i+w−1} otherwise; padded
// keys are in neither part. σ_h (the window weight, learned or fixed) and λ_h = 1, or 1 − σ_h ("affine"), are
// per head. M_i is part of the function, as in LoLCATs' code: it puts the window's largest term at σ_h whatever
// the scores' magnitude, so the window and the linear part meet on a fixed scale that φ can learn to match. It
// does not cancel (the linear terms do not carry it), so gradients flow through it. There is no ε: a row always
// holds its own key in the window (only a padded query row can have no mass; its output is 0).
//
// Forms, all computing the same function (tests compare them forward and backward):
//   hybrid_quadratic     materialises [T, T] (the reference; also returns the weights and log-weights)
//   hybrid_chunked       causal: the window in blocks of queries against their band of keys (O(T·(C+w)) scores)
//                        + chunked linear attention over the key stream delayed by w (a key enters the linear
//                        state exactly when it leaves the window); no [T, T] buffer. With a state it continues a
//                        sequence: the state holds the last w keys, values and key features (a ring) and the
//                        linear state of every older key — its size does not depend on the context.
//   hybrid_bidirectional non-causal (BERT): the window on both sides, the linear part as a causal pass over keys
//                        delayed by w plus the same pass on the reversed sequence.
//   hybrid_step          causal decoding, one token (the recurrent form): the state's ring of the last w keys is
//                        written in place and the key that leaves the window goes into the linear state, so a step
//                        costs O(w·D + F·D) whatever the context. Inference only. Its reference is hybrid_chunked
//                        with a state at T = 1 (what decoding ran before), which tests compare it with step by step.
//                        With a sparse cache (opts.cache, sparse_cache.h) the leaving key joins the cache's
//                        candidates and the one the state returns best is written instead; its reference is then
//                        hybrid_quadratic with the same cache, row by row. O(w·D + λ·F·D) a step.
//
// Stability: the linear sums come stabilised (linear_attention.h: true = exp(shift)·computed); both parts
// are brought to one scale by a per-query constant c_i = max(0, shift_i) that cancels in the ratio.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>

#include "mimic/attention/linear_attention.h"

namespace mimic::attention {

struct HybridOptions {
  bool causal = true;
  int64_t window = 64;      // w >= 1
  int64_t chunk = 64;       // the linear part's chunk
  int64_t block = 0;        // queries per window block (0: max(w, 64), at most T)
  at::Tensor window_weight;  // σ: [H], > 0 (may carry gradients)
  at::Tensor linear_weight;  // λ: [H], or undefined for 1
  bool exact = false;        // window terms σ exp(s) (M_i only stabilises) instead of LoLCATs' σ exp(s − M_i)
  int64_t cache = 0;         // λ: a sparse cache of keys kept exact beyond the window (sparse_cache.h); 0: none
  int64_t cache_every = 1;   // a cache selection every this many positions (the whole-sequence forms; the step: 1)
  // The features of keys [B, H, n, D] → [B, H, n, F], as f.k holds them (log φ when f.log_space), for maps whose
  // features are a function of the key alone (FeatureMapImpl::of_key_alone, no gates). When set, a state made by
  // hybrid_step or hybrid_chunked keeps keys only — no key features in the ring or the cache — and computes a
  // key's features again when it leaves the window or is scored for the cache: the state's bytes fall by
  // (w + λ)·F per head (half of a hedgehog hybrid's ring and cache, F = 2d), for one small map call per step.
  std::function<at::Tensor(const at::Tensor&)> key_features;
};

// What a causal hybrid head keeps between calls: the last w keys, values and key features and the linear state of
// every key older than them. The ring's keys and values are kept as the calls give them: per KV head under
// grouped-query attention (g times fewer than the query heads); its key features, the linear state and the sparse
// cache per query head. The w slots are a ring: read from slot `head` on (wrapping around) they run oldest first,
// and the newest `filled` of them hold keys (the others are zeros). hybrid_chunked leaves head at 0;
// hybrid_step overwrites slot `head` (the oldest) in place and advances it.
struct HybridState {
  at::Tensor k, v, fk;  // [B, H_kv, w, D], [B, H_kv, w, D], [B, H, w, F] (fk undefined when made with opts.key_features)
  int64_t filled = 0;
  int64_t head = 0;
  LinearState linear;
  int64_t position = 0;
  // The sparse cache (opts.cache = λ > 0; hybrid_step alone): λ slots of keys, values, key features and positions,
  // the first `cached` in use, in no particular order. Allocated whole with the ring.
  at::Tensor ck, cv, cfk, cpos;  // [B, H, λ, D], [B, H, λ, D], [B, H, λ, F] (as fk), long [B, H, λ]
  int64_t cached = 0;
  bool defined() const { return k.defined(); }
};

// q, k, v: [B, H, T, D] (q, k as the softmax part reads them, before `scale`); f: φ(q), φ(k) (log φ when
// f.log_space), gates folded in; key_padding_mask: bool [B, T] (true = real token) or undefined.
// weights / log_weights: if given, receive [B, H, T, T] (out = weights · v; log-weights computed from the
// stabilised terms, floored at log_weight_floor() where a weight is 0 or negative).
at::Tensor hybrid_quadratic(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Features& f, double scale,
                            const HybridOptions& opts, const at::Tensor& key_padding_mask, at::Tensor* weights = nullptr,
                            at::Tensor* log_weights = nullptr);
// The same with more exact keys: `exact_keys` (bool, broadcastable to [B, H, T, T]; undefined = none) marks keys
// outside a query's window that it reads as softmax terms too (a sparse cache, sparse_cache.h); they share the
// window's M_i and σ_h and leave the linear part. The reference of every form that keeps keys beyond the window.
at::Tensor hybrid_quadratic_with(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Features& f, double scale,
                                 const HybridOptions& opts, const at::Tensor& key_padding_mask, const at::Tensor& exact_keys,
                                 at::Tensor* weights = nullptr, at::Tensor* log_weights = nullptr);
// Causal. state: nullptr, or the state to continue from (undefined = empty), replaced by the state after the call.
// Here and in hybrid_step, k and v may hold H_kv heads dividing H (grouped-query attention: KV head j serves query
// heads j·g … j·g + g − 1, as expand_kv_heads reads them); f.k is then the features of the expanded keys.
at::Tensor hybrid_chunked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Features& f, double scale,
                          const HybridOptions& opts, const at::Tensor& key_padding_mask, HybridState* state = nullptr);
// One token of causal decoding: q [B, H, 1, D], k, v [B, H or H_kv, 1, D], f's features [B, H, 1, F]; state
// (undefined = empty) is updated in place — its ring tensors are written, so a copy that must not change needs
// hybrid_state_copy. The same function as hybrid_chunked(…, &state) at T = 1. Refuses inputs that require gradients
// under grad mode.
at::Tensor hybrid_step(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Features& f, double scale,
                       const HybridOptions& opts, HybridState& state);
// A copy whose ring does not share storage with the original (the linear state is shared: every form replaces
// its tensors rather than writing into them).
HybridState hybrid_state_copy(const HybridState& state);
at::Tensor hybrid_bidirectional(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Features& f, double scale,
                                const HybridOptions& opts, const at::Tensor& key_padding_mask);
// The fast form for opts.causal.
at::Tensor hybrid_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Features& f, double scale,
                            const HybridOptions& opts, const at::Tensor& key_padding_mask, HybridState* state = nullptr);
// Bytes the state holds (ring and linear state).
int64_t hybrid_state_bytes(const HybridState& state);

}  // namespace mimic::attention
