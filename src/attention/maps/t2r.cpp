// T2R (Kasai et al. 2021): a learned per-head affine map followed by ReLU, φ(x) = relu(Wx+b).
#include "mimic/attention/maps/head_linear.h"

namespace mimic::attention {
namespace {

class T2R : public FeatureMapImpl {
 public:
  explicit T2R(const FeatureMapSpec& spec) : FeatureMapImpl(spec) {
    MapOptions o(spec);
    features_ = o.integer("feature_dim", spec.head_dim, 1, kMaxFeatureDim);
    const bool tied = o.flag("tied", false), bias = o.flag("bias", true);
    o.finish();
    MIMIC_CHECK(features_ >= 1, "feature map 't2r': feature_dim must be >= 1, got ", features_);
    linear_ = std::make_unique<maps::HeadLinear>(*this, spec.name, spec.n_head, spec.head_dim, features_, tied, bias);
  }
  at::Tensor forward(const at::Tensor& x, Role role, int64_t) override { return torch::relu((*linear_)(x, role)); }
  int64_t feature_dim() const override { return features_; }
  Sign sign() const override { return Sign::NonNegative; }

 private:
  int64_t features_;
  std::unique_ptr<maps::HeadLinear> linear_;
};

}  // namespace

FeatureMap make_t2r_map(const FeatureMapSpec& spec) { return std::make_shared<T2R>(spec); }

}  // namespace mimic::attention
