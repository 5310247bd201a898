// Taylor features of exp (Zhang et al. 2024; Mongaras & Larson 2025, shared/papers/003_…): softmax's numerator
// exp(q·k) = Σ_n (q·k)ⁿ/n!, and each term is a dot product of features, (q·k)ⁿ = vec(q^⊗n)·vec(k^⊗n). So
//   φ(x) = [1, x, vec(x⊗x)/√2!, …, vec(x^⊗N)/√N!],   φ(q)·φ(k) = Σ_{n≤N} (q·k)ⁿ/n!,
// feature_dim = Σ_{n≤N} dⁿ. `taylor` takes the order N (option `order`, 1–6, default 2); `taylor2` is its N = 2 case.
// The features grow as d^N: an order whose features would exceed kMaxFeatures at this head dimension is refused
// (order 2 at d = 64 has 4,161; order 3 needs d ≤ 39, order 4 d ≤ 15). Even orders give a positive kernel (the
// truncated series of exp is positive for even N), odd orders a kernel that is negative where q·k is below about
// −1.6 (order 3): the features have any sign either way (Sign::Any), and the weights are checked where it matters.
#include <torch/torch.h>

#include <cmath>

#include "mimic/attention/feature_map.h"
#include "mimic/core/error.h"

namespace mimic::attention {
namespace {

constexpr int64_t kMaxFeatures = 65536;

class Taylor : public FeatureMapImpl {
 public:
  Taylor(const FeatureMapSpec& spec, int64_t order) : FeatureMapImpl(spec), order_(order) {
    int64_t features = 0, power = 1;
    for (int64_t n = 0; n <= order_; ++n, power *= spec.head_dim) {
      features += power;
      MIMIC_CHECK(features <= kMaxFeatures, "feature map ", spec.name, ": order ", order_, " at head dimension ", spec.head_dim,
                  " needs more than ", kMaxFeatures, " features (Σ dⁿ for n ≤ order): lower the order or the head dimension");
    }
    features_ = features;
  }
  at::Tensor forward(const at::Tensor& x, Role, int64_t) override {
    std::vector<at::Tensor> terms = {torch::ones_like(x.narrow(-1, 0, 1))};
    at::Tensor term = terms.front();
    for (int64_t n = 1; n <= order_; ++n) {
      // vec(x^⊗n)/√n! from vec(x^⊗(n−1))/√(n−1)!: one outer product with x, one factor 1/√n
      term = (term.unsqueeze(-1) * x.unsqueeze(-2)).flatten(-2) * (1.0 / std::sqrt(static_cast<double>(n)));
      terms.push_back(term);
    }
    return torch::cat(terms, -1);
  }
  int64_t feature_dim() const override { return features_; }
  Sign sign() const override { return Sign::Any; }

 private:
  int64_t order_;
  int64_t features_ = 0;
};

}  // namespace

FeatureMap make_taylor_map(const FeatureMapSpec& spec) {
  MapOptions o(spec);
  const int64_t order = o.integer("order", 2, 1, 6);
  o.finish();
  return std::make_shared<Taylor>(spec, order);
}

FeatureMap make_taylor2_map(const FeatureMapSpec& spec) {
  MapOptions(spec).finish();
  return std::make_shared<Taylor>(spec, 2);
}

}  // namespace mimic::attention
