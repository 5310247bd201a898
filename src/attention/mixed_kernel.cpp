#include "mimic/attention/mixed_kernel.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "mimic/attention/kinds.h"
#include "mimic/attention/linear_attention.h"
#include "mimic/core/error.h"
#include "mimic/core/json_keys.h"

namespace mimic::attention {

MixedAttention::MixedAttention(std::vector<int64_t> softmax_heads, std::shared_ptr<DistillableKernel> student, int64_t n_head)
    : softmax_heads_(std::move(softmax_heads)), student_(std::move(student)) {
  MIMIC_CHECK(student_ != nullptr, "a mixed layer needs a student kernel");
  MIMIC_CHECK(!softmax_heads_.empty() && static_cast<int64_t>(softmax_heads_.size()) < n_head,
              "a mixed layer keeps softmax in 1 to ", n_head - 1, " of its ", n_head, " heads, got ", softmax_heads_.size(),
              " (all heads: leave the layer softmax; none: convert it whole)");
  for (size_t i = 0; i < softmax_heads_.size(); ++i) {
    MIMIC_CHECK(softmax_heads_[i] >= 0 && softmax_heads_[i] < n_head, "softmax head ", softmax_heads_[i], " is not in [0, ", n_head, ")");
    MIMIC_CHECK(i == 0 || softmax_heads_[i] > softmax_heads_[i - 1], "softmax heads must be sorted and distinct, got ",
                nlohmann::json(softmax_heads_).dump());
  }
  index_ = torch::tensor(softmax_heads_, torch::kLong);
  std::vector<int64_t> converted;
  for (int64_t h = 0; h < n_head; ++h)
    if (!std::binary_search(softmax_heads_.begin(), softmax_heads_.end(), h)) converted.push_back(h);
  converted_ = torch::tensor(converted, torch::kLong);
  order_ = torch::cat({converted_, index_}).argsort();
  register_module("student", student_);
  softmax_ = std::make_shared<SoftmaxAttention>();
}

nlohmann::json MixedAttention::config_json() const {
  return {{"softmax_heads", softmax_heads_}, {"kind", student_->kind()}, {"options", student_->config_json()}};
}

namespace {
at::Tensor heads_of(const at::Tensor& x, const at::Tensor& index) { return x.index_select(1, index.to(x.device())); }
at::Tensor put_heads(const at::Tensor& all, const at::Tensor& index, const at::Tensor& part) {
  return all.index_copy(1, index.to(all.device()), part.to(all.dtype()));
}
AttentionContext without_capture(const AttentionContext& ctx) {
  auto c = ctx;
  c.capture = nullptr;
  return c;
}
}  // namespace

at::Tensor MixedAttention::in_head_order(const at::Tensor& converted, const at::Tensor& kept) const {
  return torch::cat({converted, kept.to(converted.dtype())}, 1).index_select(1, order_.to(converted.device()));
}

at::Tensor MixedAttention::forward_fast(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx) {
  const auto c = without_capture(ctx);
  auto converted = student_->forward_fast_heads(q, k, v, c, converted_);
  auto kept = softmax_->forward(heads_of(q, index_), heads_of(k, index_), heads_of(v, index_), c);
  return in_head_order(converted, kept);
}

at::Tensor MixedAttention::forward_quadratic(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                                             at::Tensor* weights, at::Tensor* log_weights) {
  const auto c = without_capture(ctx);
  auto out = student_->forward_quadratic(q, k, v, c, weights, log_weights);
  auto qs = heads_of(q, index_), ks = heads_of(k, index_), vs = heads_of(v, index_);
  auto w = softmax_weights(qs, ks, c);
  if (weights) *weights = put_heads(*weights, index_, w);
  if (log_weights) {
    const double tiny = std::numeric_limits<float>::min();
    *log_weights = put_heads(*log_weights, index_, w.clamp_min(tiny).log().clamp_min(log_weight_floor()));
  }
  return put_heads(out, index_, torch::matmul(w, vs.to(w.dtype())));
}

namespace {
struct MixedCache : KernelCache {
  std::unique_ptr<KernelCache> student, softmax;
  int64_t bytes() const override { return student->bytes() + softmax->bytes(); }
  std::unique_ptr<KernelCache> clone() const override {
    auto c = std::make_unique<MixedCache>();
    c->student = student->clone();
    c->softmax = softmax->clone();
    c->position = position;
    return c;
  }
};
}  // namespace

std::unique_ptr<KernelCache> MixedAttention::new_cache() const {
  auto c = std::make_unique<MixedCache>();
  c->student = student_->new_cache();
  c->softmax = softmax_->new_cache();
  return c;
}

at::Tensor MixedAttention::forward_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                                          KernelCache& cache) {
  auto& mc = cached_call<MixedCache>(cache, ctx, kind());
  const auto c = without_capture(ctx);
  const int64_t h = q.size(1);
  auto converted = student_->forward_cached_heads(q, k, v, c, *mc.student, converted_);
  const auto& grouping = kv_grouping(h / k.size(1), q.device());
  auto kept = softmax_->forward_cached_mapped(heads_of(q, index_), heads_of(k, grouping.kv_index), heads_of(v, grouping.kv_index), c,
                                              *mc.softmax, grouping.head_map);
  mc.position = mc.student->position;
  return in_head_order(converted, kept);
}

const MixedAttention::KvGrouping& MixedAttention::kv_grouping(int64_t g, const c10::Device& device) {
  if (grouping_.group == g && (!grouping_.head_map.defined() || grouping_.head_map.device() == device)) return grouping_;
  // Under grouped-query attention the KV cache holds each KV head a kept head reads, once: kept heads 0 and 1 of one
  // group share it. Worked out once per layer, not at every decoding step.
  grouping_ = {g, index_, at::Tensor()};
  if (g == 1) return grouping_;
  std::vector<int64_t> kv_heads, head_map;
  for (const int64_t kept : softmax_heads_) {
    if (kv_heads.empty() || kv_heads.back() != kept / g) kv_heads.push_back(kept / g);  // sorted heads: sorted groups
    head_map.push_back(static_cast<int64_t>(kv_heads.size()) - 1);
  }
  grouping_.kv_index = torch::tensor(kv_heads, torch::kLong);
  grouping_.head_map = torch::tensor(head_map, torch::kLong).to(device);
  return grouping_;
}

std::string MixedAttention::parameter_group(const std::string& name) const {
  const std::string prefix = "student.";
  return student_->parameter_group(name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name);
}

// The "mixed" entry of kinds.def: {"softmax_heads": [...], "kind": a distillable kind, "options": its options}.
AttentionKernel make_mixed_kernel(const nlohmann::json& options, int64_t n_head, int64_t head_dim) {
  MIMIC_CHECK(options.is_object(), "mixed attention options must be a JSON object, got ", options.dump());
  for (auto it = options.begin(); it != options.end(); ++it)
    if (!attention_kind("mixed").takes_option(it.key())) fail_unknown_option("mixed", it.key());
  MIMIC_CHECK(options.contains("softmax_heads") && options.at("softmax_heads").is_array(),
              "mixed attention needs 'softmax_heads': a list of head indices");
  std::vector<int64_t> heads;
  for (const auto& h : options.at("softmax_heads")) {
    MIMIC_CHECK(h.is_number_integer(), "mixed attention: 'softmax_heads' must hold integers, got ", h.dump());
    heads.push_back(h.get<int64_t>());
  }
  const std::string kind = json_string_or(options, "kind", "mixed attention options", "linear");
  MIMIC_CHECK(attention_kind(kind).role == KindRole::Distillable && kind != "mixed", "mixed attention: the student kind must be ",
              "a distillable kind other than mixed, got '", kind, "'");
  auto student = as_distillable(make_attention_kernel(kind, options.value("options", nlohmann::json::object()), n_head, head_dim),
                                "a mixed layer's student");
  return std::make_shared<MixedAttention>(std::move(heads), std::move(student), n_head);
}

}  // namespace mimic::attention
