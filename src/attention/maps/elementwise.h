// Feature maps applied element by element with feature_dim = head_dim (elu, relu, exp_t, identity).
#pragma once
#include <torch/torch.h>

#include <functional>

#include "mimic/attention/feature_map.h"

namespace mimic::attention::maps {

class Elementwise : public FeatureMapImpl {
 public:
  using Fn = std::function<at::Tensor(const at::Tensor&)>;
  Elementwise(const FeatureMapSpec& spec, Sign sign, bool log_space, Fn fn)
      : FeatureMapImpl(spec), sign_(sign), log_space_(log_space), fn_(std::move(fn)) {}
  at::Tensor forward(const at::Tensor& x, Role, int64_t) override { return fn_(x); }
  int64_t feature_dim() const override { return spec_.head_dim; }
  bool log_space() const override { return log_space_; }
  Sign sign() const override { return sign_; }

 private:
  Sign sign_;
  bool log_space_;
  Fn fn_;
};

}  // namespace mimic::attention::maps
