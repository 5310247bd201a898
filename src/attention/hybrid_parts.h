// The pieces hybrid attention's forms share (hybrid_attention.cpp, sparse_cache.cpp); not part of the interface.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "mimic/attention/linear_attention.h"

namespace mimic::attention {
struct HybridOptions;
}

namespace mimic::attention::hybrid_parts {

// q, k, v, the features, the options and the mask agree in shape (one-line errors naming what does not). kv_groups:
// k and v may hold fewer heads than q, H_kv dividing H (grouped-query attention; the forms that keep a ring,
// hybrid_chunked and hybrid_step, which keep it per KV head).
void check_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Features& f, const HybridOptions& o,
                  const at::Tensor& mask, bool kv_groups = false);
// w [H] viewed to broadcast over a tensor of `dims` dimensions whose dimension 1 is the head, in like's dtype.
at::Tensor per_head(const at::Tensor& w, const at::Tensor& like, int64_t dims);
// The key padding mask as bool [B, T], or all true when undefined.
at::Tensor key_valid(const at::Tensor& mask, int64_t b, int64_t t, const at::TensorOptions& like);
// Pads dimension `dim` of x with n zeros in front (n > 0) or behind (n < 0).
at::Tensor pad(const at::Tensor& x, int64_t dim, int64_t n);
// a · m batched over the leading dimensions. Where a has one row, m one column, or the inner dimension is one, by
// broadcasting: a batched matmul of such shapes runs one tiny GEMM per batch entry, a select each (35% of a training
// step with the sparse cache's decoding schedule at T = 256 in the profile).
at::Tensor small_matmul(const at::Tensor& a, const at::Tensor& m);
// Window sums (true value exp(wshift)·sums) and linear sums (true value exp(shift)·numden, scaled by λ) brought to
// one scale and divided.
at::Tensor combine(const at::Tensor& wnum, const at::Tensor& wden, const at::Tensor& wshift, const std::vector<LinearSums>& parts,
                   const at::Tensor& lambda);

}  // namespace mimic::attention::hybrid_parts
