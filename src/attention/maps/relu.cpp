// φ(x) = ReLU(x).
#include "mimic/attention/maps/elementwise.h"

namespace mimic::attention {
FeatureMap make_relu_map(const FeatureMapSpec& spec) {
  MapOptions(spec).finish();
  return std::make_shared<maps::Elementwise>(spec, Sign::NonNegative, false, [](const at::Tensor& x) { return torch::relu(x); });
}
}  // namespace mimic::attention
