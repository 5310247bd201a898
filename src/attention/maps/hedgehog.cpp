// Hedgehog (Zhang et al. 2024, Eq. 3 and App. A.1): a learned per-head affine map followed by exp of it and
// of its negation, φ(x) = [exp(Wx+b), exp(-(Wx+b))]; or, for hedgehog_softmax, a softmax over each half.
// Returned in log space.
#include "mimic/attention/maps/head_linear.h"
#include "mimic/core/precision.h"

namespace mimic::attention {
namespace {

class Hedgehog : public FeatureMapImpl {
 public:
  Hedgehog(const FeatureMapSpec& spec, bool softmax) : FeatureMapImpl(spec), softmax_(softmax) {
    MapOptions o(spec);
    features_ = o.integer("feature_dim", 2 * spec.head_dim, 2, kMaxFeatureDim);
    const bool tied = o.flag("tied", false), bias = o.flag("bias", true);
    o.finish();
    MIMIC_CHECK(features_ >= 2 && features_ % 2 == 0, "feature map '", spec.name, "': feature_dim must be even and >= 2, got ",
                features_);
    linear_ = std::make_unique<maps::HeadLinear>(*this, spec.name, spec.n_head, spec.head_dim, features_ / 2, tied, bias);
  }
  at::Tensor forward(const at::Tensor& x, Role role, int64_t) override {
    auto u = (*linear_)(x, role);
    if (softmax_) {
      // in float (double with double inputs), as CUDA's autocast runs a log-softmax; LibTorch's CPU autocast left it in
      // bf16, and its backward's cancellation (g − softmax·Σg, g a sum over every later query) made the first keys'
      // gradients 15% off fp32's at 1,024 positions
      u = float_or_wider(u);
      return torch::cat({torch::log_softmax(u, -1), torch::log_softmax(-u, -1)}, -1);
    }
    return torch::cat({u, -u}, -1);
  }
  int64_t feature_dim() const override { return features_; }
  bool log_space() const override { return true; }
  Sign sign() const override { return Sign::Positive; }

 private:
  bool softmax_;
  int64_t features_;
  std::unique_ptr<maps::HeadLinear> linear_;
};

}  // namespace

FeatureMap make_hedgehog_map(const FeatureMapSpec& spec) { return std::make_shared<Hedgehog>(spec, false); }
FeatureMap make_hedgehog_softmax_map(const FeatureMapSpec& spec) { return std::make_shared<Hedgehog>(spec, true); }

}  // namespace mimic::attention
