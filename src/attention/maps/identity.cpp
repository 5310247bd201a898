// φ(x) = x: plain (unnormalisable in general) linear attention, as in RetNet/GLA's "no feature map".
#include "mimic/attention/maps/elementwise.h"

namespace mimic::attention {
FeatureMap make_identity_map(const FeatureMapSpec& spec) {
  MapOptions(spec).finish();
  return std::make_shared<maps::Elementwise>(spec, Sign::Any, false, [](const at::Tensor& x) { return x; });
}
}  // namespace mimic::attention
