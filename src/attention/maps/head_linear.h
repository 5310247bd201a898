// Per-head affine maps shared by the learned feature maps (hedgehog, t2r): y = x W_h + b_h for each head h,
// separate or shared ("tied") for queries and keys, W initialised to the identity (rectangular when the
// output width differs from head_dim) and b to zero.
#pragma once
#include <torch/torch.h>

#include "mimic/attention/feature_map.h"
#include "mimic/core/error.h"

namespace mimic::attention::maps {

class HeadLinear {
 public:
  // Registers q_weight/q_bias and k_weight/k_bias (or weight/bias when tied) on `owner`, the map named `map`.
  HeadLinear(torch::nn::Module& owner, const std::string& map, int64_t n_head, int64_t in, int64_t out, bool tied, bool bias) {
    check_map_size(map, n_head, in, out);
    auto make = [&](const std::string& prefix) {
      Pair p;
      p.weight = owner.register_parameter(prefix + "weight", torch::eye(in, out).unsqueeze(0).repeat({n_head, 1, 1}));
      if (bias) p.bias = owner.register_parameter(prefix + "bias", torch::zeros({n_head, 1, out}));
      return p;
    };
    if (tied) {
      q_ = k_ = make("");
    } else {
      q_ = make("q_");
      k_ = make("k_");
    }
  }
  // x: [B, H, T, in] -> [B, H, T, out]
  at::Tensor operator()(const at::Tensor& x, Role role) const {
    const Pair& p = role == Role::Query ? q_ : k_;
    auto y = torch::matmul(x, p.weight.to(x.dtype()));
    return p.bias.defined() ? y + p.bias.to(x.dtype()) : y;
  }

 private:
  struct Pair {
    at::Tensor weight, bias;
  };
  Pair q_, k_;
};

}  // namespace mimic::attention::maps
