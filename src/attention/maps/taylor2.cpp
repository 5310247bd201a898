// Second-order Taylor features of exp (Zhang et al. 2024, Mongaras & Larson 2025):
// φ(x) = [1, x, vec(x xᵀ)/√2], so φ(q)·φ(k) = 1 + q·k + (q·k)²/2. feature_dim = 1 + d + d².
#include <torch/torch.h>

#include <cmath>

#include "mimic/attention/feature_map.h"

namespace mimic::attention {
namespace {

class Taylor2 : public FeatureMapImpl {
 public:
  explicit Taylor2(const FeatureMapSpec& spec) : FeatureMapImpl(spec) { MapOptions(spec).finish(); }
  at::Tensor forward(const at::Tensor& x, Role, int64_t) override {
    auto outer = (x.unsqueeze(-1) * x.unsqueeze(-2)).flatten(-2) * (1.0 / std::sqrt(2.0));
    return torch::cat({torch::ones_like(x.narrow(-1, 0, 1)), x, outer}, -1);
  }
  int64_t feature_dim() const override { return 1 + spec_.head_dim + spec_.head_dim * spec_.head_dim; }
  Sign sign() const override { return Sign::Any; }
};

}  // namespace

FeatureMap make_taylor2_map(const FeatureMapSpec& spec) { return std::make_shared<Taylor2>(spec); }

}  // namespace mimic::attention
