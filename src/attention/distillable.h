// The interface distill, convert, report and the analysis metrics use for every attention kind that can be
// trained to mimic softmax: its weights in closed form (the quadratic reference form), whether they may be
// negative, and which trainable group each parameter belongs to. A new distillable kind (e.g. a sliding
// window + linear hybrid) implements this and registers in kinds.def; no stage needs its concrete class.
#pragma once
#include <ATen/core/Tensor.h>

#include <string>

#include "mimic/attention/attention.h"

namespace mimic::attention {

class DistillableKernel : public AttentionKernelImpl {
 public:
  // The fast form (forward_fast). When the capture asks for the weights (record, report), the quadratic form
  // instead, its weights stored in the capture: the same function, with the weights the fast form never builds.
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx) final {
    if (!ctx.capture || !ctx.capture->want_weights) return forward_fast(q, k, v, ctx);
    at::Tensor w;
    auto o = forward_quadratic(q, k, v, ctx, &w);
    ctx.capture->weights = w.detach();
    return o;
  }
  // The quadratic reference form: the output [B, H, T, head_dim] and, when asked, the attention weights and
  // their logarithms [B, H, T, T] (log-weights computed stably, not as log(weights); -inf where a key is not
  // visible). Equal to forward() up to rounding.
  virtual at::Tensor forward_quadratic(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                                       at::Tensor* weights, at::Tensor* log_weights = nullptr) = 0;
  // The weights and/or their logarithms alone, equal to forward_quadratic's, for callers that do not read the output
  // (the CE distillation loss, the report). A kind may skip the output's work: [T, T] × [T, d] per head, a third of
  // a hedgehog CE step's matmul FLOPs. v matters only where the weights depend on it (L2 / RMS normalisation).
  virtual void weights_quadratic(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                                 at::Tensor* weights, at::Tensor* log_weights) {
    forward_quadratic(q, k, v, ctx, weights, log_weights);
  }
  // True when some weights may be negative (a sign-free feature map such as taylor2 or identity): the
  // weights are then no distribution, and a cross-entropy against softmax's is undefined for such a batch.
  virtual bool weights_may_be_negative() const = 0;
  // True when each query's weights sum to one over its visible keys (every normalised kind); false for a kind whose
  // weights are an effective linear operator and no distribution (the delta rule's): entropy, KL and the CE loss
  // mean nothing for them, distill's MSE on the outputs does.
  virtual bool weights_are_distribution() const { return true; }
  // The group a parameter (a name of named_parameters()) belongs to, as `distill --train` selects them:
  // "maps" (the feature map's) or "gates" (SLA head gates).
  virtual std::string parameter_group(const std::string& name) const = 0;
  // The feature map the kernel runs (a name of the maps registry), for reports and messages.
  virtual std::string feature_map() const = 0;
  // The fast form on some of the heads (a mixed layer's converted heads, in training, eval and the placement probe;
  // a capture that asks for the weights — record, report — runs the quadratic form on every head instead): q, k, v
  // as forward takes them, every head (SLA gates read them all); `heads` sorted, distinct, a long tensor. Returns
  // forward_fast's rows of those heads, [B, |heads|, T, d], up to rounding. This default runs every head and keeps the
  // rows asked for; the kinds whose attention is per head (linear, hybrid, delta) override it and run the attention of
  // those heads alone (their features are still computed for every head, as gates and decoding do): a mixed layer
  // then spends nothing on the student's attention in the heads it keeps softmax.
  virtual at::Tensor forward_fast_heads(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                                        const at::Tensor& heads) {
    return forward_fast(q, k, v, ctx).index_select(1, heads.to(q.device()));
  }
  // Decoding on some of the heads (a mixed layer's converted heads): q, k, v as forward_cached takes them, every head
  // (SLA gates read them all); `heads` sorted, distinct, a long tensor. Returns those heads' rows of forward_cached's
  // output, [B, |heads|, T, d], with the cache's state held for those heads alone (a cache serves one set of heads
  // for its life). This default runs every head and keeps the rows asked for, its state holding every head; the
  // kinds whose state is per head (linear, hybrid, delta) override it, so that a mixed layer carries no linear
  // state for the heads it keeps softmax (it carried ~8/48 of an all-linear gpt2-mini's for nothing).
  virtual at::Tensor forward_cached_heads(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                                          KernelCache& cache, const at::Tensor& heads) {
    return forward_cached(q, k, v, ctx, cache).index_select(1, heads.to(q.device()));
  }

 protected:
  // The kernel's own fast form (chunked or bidirectional, ...), equal to forward_quadratic up to rounding.
  virtual at::Tensor forward_fast(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx) = 0;
};

}  // namespace mimic::attention
