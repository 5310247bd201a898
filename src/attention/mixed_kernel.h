// A layer whose heads run different attention: the heads listed in `softmax_heads` keep the teacher's exact
// softmax attention, every other head runs a distillable student (linear, hybrid or delta). This is what head-level
// placement writes (`convert --keep-softmax`): keep softmax where a linear map loses what the head does
// (recall, sharp retrieval) and convert the rest.
//
//   out[:, h] = softmax(q_h k_hᵀ·scale) v_h   for h in softmax_heads
//   out[:, h] = student(q, k, v)[:, h]          otherwise
//
// The student reads every head's inputs (SLA gates read the layer's full Q and K, so a student's head may depend on
// the others) and runs its attention on the converted heads only (DistillableKernel::forward_fast_heads); softmax
// runs on its heads only. The quadratic reference form (record, report, the CE loss) computes the student's weights
// in every head and replaces the kept heads'. Decoding keeps a KV cache for the softmax heads only, beside the
// student's constant-size state for the converted heads only (forward_cached_heads): the memory that grows with the
// context is that of the heads that stay softmax, and no head carries both.
#pragma once
#include <ATen/core/Tensor.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "mimic/attention/distillable.h"

namespace mimic::attention {

class MixedAttention : public DistillableKernel {
 public:
  // student: a distillable kernel over all n_head heads; softmax_heads: sorted, distinct, in [0, n_head), not all.
  MixedAttention(std::vector<int64_t> softmax_heads, std::shared_ptr<DistillableKernel> student, int64_t n_head);
  std::string kind() const override { return "mixed"; }
  // {"softmax_heads": [...], "kind": the student's kind, "options": its options}
  nlohmann::json config_json() const override;
  std::unique_ptr<KernelCache> new_cache() const override;
  at::Tensor forward_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                            KernelCache& cache) override;
  // Softmax heads get the teacher's weights (and their logarithms); the others the student's.
  at::Tensor forward_quadratic(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                               at::Tensor* weights, at::Tensor* log_weights = nullptr) override;
  bool weights_may_be_negative() const override { return student_->weights_may_be_negative(); }
  std::string parameter_group(const std::string& name) const override;  // the student's, "student." stripped
  std::string feature_map() const override { return student_->feature_map(); }
  void fit_context(int64_t positions) override { student_->fit_context(positions); }

  std::vector<int64_t> softmax_heads(int64_t n_head) const override { return softmax_heads_; }
  const std::shared_ptr<DistillableKernel>& student() const { return student_; }

 protected:
  at::Tensor forward_fast(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx) override;

 private:
  std::vector<int64_t> softmax_heads_;
  at::Tensor index_;  // softmax_heads_ as an int64 tensor, built once
  at::Tensor converted_;  // the other heads, the student's (in the fast form and in decoding)
  at::Tensor order_;      // puts the rows of cat(converted, kept) back in head order
  // The student's rows (converted_'s heads) and the kept heads' (index_'s) as one tensor in head order, in the student's type
  at::Tensor in_head_order(const at::Tensor& converted, const at::Tensor& kept) const;
  std::shared_ptr<DistillableKernel> student_;
  std::shared_ptr<SoftmaxAttention> softmax_;
  // Decoding under grouped-query attention (g query heads a KV head): which KV heads the kept heads read (kv_index)
  // and, per kept head, its place among them (head_map; undefined when g = 1: the kept heads read their own).
  struct KvGrouping {
    int64_t group = 0;
    at::Tensor kv_index, head_map;
  };
  KvGrouping grouping_;
  const KvGrouping& kv_grouping(int64_t g, const c10::Device& device);
};

}  // namespace mimic::attention
