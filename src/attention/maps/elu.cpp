// φ(x) = 1 + ELU(x) (Katharopoulos et al. 2020): positive, linear for x > 0.
#include "mimic/attention/maps/elementwise.h"

namespace mimic::attention {
FeatureMap make_elu_map(const FeatureMapSpec& spec) {
  MapOptions(spec).finish();
  return std::make_shared<maps::Elementwise>(spec, Sign::Positive, false, [](const at::Tensor& x) { return torch::elu(x) + 1; });
}
}  // namespace mimic::attention
