// A sparse cache beside the window (LoLA, arXiv 2505.23666): hybrid attention
// (hybrid_attention.h) whose keys, when they leave the window, do not all enter the linear state. A key that the
// state would return badly stays exact, in a cache of at most λ keys per head:
//
//   at a selection, the candidates are the cache and the keys that left the window since the last selection;
//   each is scored by its self-recall error  SRE(k, v) = ‖ φ(k)ᵀS / φ(k)ᵀz − v ‖²  against the linear state
//   (S, z) as it is before the candidates are written (an empty state predicts 0: SRE = ‖v‖²); the λ candidates
//   with the largest error stay in the cache, the others are written into the state.
//
// A query reads as softmax terms (σ_h exp(s − M_i), M_i their maximum, as the window's) the keys of its window,
// the keys that left it since the last selection (not yet chosen), and the cache; as linear terms the state. With
// λ = 0 and a selection at every position this is hybrid attention; with a cache that holds every old key, softmax
// attention over all keys (σ_h cancels).
//
// The schedule: a selection runs at every position that is a multiple of `every` (before that position's query
// reads), so `every` = 1 is decoding's schedule — one key leaves the window per token, and one candidate (or
// none) is written — and a larger `every` is LoLA's chunked schedule, whose queries read up to every − 1 keys
// more as exact terms. Ties in the error keep the older key. The selection is discrete: it is computed without
// gradients, and gradients reach q, k, v and the features through the terms the selection chose (docs/attention.md).
//
// Forms (tests compare them, forward and gradients, with a per-token reference written apart):
//   sparse_cache_selection  the schedule run over a sequence: which keys beyond its window each query reads exact
//   hybrid_quadratic        with opts.cache = λ > 0: the output over that selection (and the [T, T] weights)
//   hybrid_cache_chunked    the same output without a [T, T] buffer: per chunk of `every` queries, a band of
//                           w + every − 1 keys and the λ cached ones as exact terms, and the linear state the chunk's
//                           selection left. Memory: O(T·(w + every + λ)) scores and O((T/every)·(F + 2λ)·D) for
//                           each selection's state and cached keys and values — at every = 1 that is more per query
//                           than a [T, T] row below T ≈ (F + 2λ)·D. The kernel's whole-sequence forward runs
//                           whichever of the two keeps less (hybrid_attention).
//   hybrid_step             with opts.cache = λ > 0 (and a selection every position): decoding, one token, with a
//                           state of fixed size (the ring, λ cached keys and the linear state)
// Causal only.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

#include "mimic/attention/hybrid_attention.h"

namespace mimic::attention {

// k, v: [B, H, T, D]; f.k: φ(k) (log φ when f.log_space); key_padding_mask: bool [B, T] or undefined (padded keys
// are never candidates); the cache's size and schedule: opts.cache (λ ≥ 0) and opts.cache_every (≥ 1). Returns bool
// [B, H, T, T]: true where query i reads key j exact although j lies before i's window (the cache, and the keys
// awaiting a selection). Computed without gradients.
at::Tensor sparse_cache_selection(const at::Tensor& k, const at::Tensor& v, const Features& f, const HybridOptions& opts,
                                  const at::Tensor& key_padding_mask);

// hybrid_quadratic's output with the cache (opts.cache ≥ 0, causal), computed by chunks of opts.cache_every queries:
// the same function, forward and gradients (the selection runs once, without gradients, as there), no [T, T] buffer.
at::Tensor hybrid_cache_chunked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Features& f, double scale,
                                const HybridOptions& opts, const at::Tensor& key_padding_mask);

}  // namespace mimic::attention
