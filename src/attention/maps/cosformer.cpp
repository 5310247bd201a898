// cosFormer (Qin et al. 2022): φ(x_i) = [relu(x_i) cos(π i / 2M), relu(x_i) sin(π i / 2M)] at absolute position i,
// so φ(q_i)·φ(k_j) = relu(q_i)·relu(k_j) cos(π (i − j) / 2M): a locality re-weighting. M (max_len) bounds the
// positions; a position ≥ M is an error rather than a silent wrap-around.
#include <torch/torch.h>

#include <cmath>

#include "mimic/attention/feature_map.h"
#include "mimic/core/error.h"

namespace mimic::attention {
namespace {

class CosFormer : public FeatureMapImpl {
 public:
  explicit CosFormer(const FeatureMapSpec& spec) : FeatureMapImpl(spec) {
    MapOptions o(spec);
    max_len_ = o.integer("max_len", 2048);
    o.finish();
    MIMIC_CHECK(max_len_ >= 1, "feature map 'cosformer': max_len must be >= 1, got ", max_len_);
  }
  at::Tensor forward(const at::Tensor& x, Role, int64_t offset) override {
    const int64_t t = x.size(-2);
    MIMIC_CHECK(offset >= 0 && offset + t <= max_len_, "feature map 'cosformer': position ", offset + t - 1,
                " is beyond max_len ", max_len_, " (set the option max_len)");
    auto angle = torch::arange(offset, offset + t, x.options()) * (M_PI / (2.0 * max_len_));
    auto r = torch::relu(x);
    return torch::cat({r * torch::cos(angle).unsqueeze(-1), r * torch::sin(angle).unsqueeze(-1)}, -1);
  }
  int64_t feature_dim() const override { return 2 * spec_.head_dim; }
  Sign sign() const override { return Sign::NonNegative; }
  bool of_key_alone() const override { return false; }  // the angle is the key's position

 private:
  int64_t max_len_;
};

}  // namespace

FeatureMap make_cosformer_map(const FeatureMapSpec& spec) { return std::make_shared<CosFormer>(spec); }

}  // namespace mimic::attention
