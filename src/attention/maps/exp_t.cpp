// φ(x) = exp(t·x) with temperature t, returned in log space (t·x).
#include "mimic/attention/maps/elementwise.h"

namespace mimic::attention {
FeatureMap make_exp_t_map(const FeatureMapSpec& spec) {
  MapOptions o(spec);
  const double t = o.number("t", 1.0);
  o.finish();
  return std::make_shared<maps::Elementwise>(spec, Sign::Positive, true, [t](const at::Tensor& x) { return x * t; });
}
}  // namespace mimic::attention
