// Performer FAVOR+ (Choromanski et al. 2021): positive random features for exp(q·k),
// φ(x) = exp(Ωᵀx − |x|²/2) / √m with m random directions ω_i ~ N(0, I) (block-orthogonal by default, rows
// rescaled to chi-distributed norms), so that E[φ(q)·φ(k)] = exp(q·k). Returned in log space.
// Ω is a buffer per head, drawn from `seed`; with redraw=true it is drawn anew at every training pass.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cmath>

#include "mimic/attention/feature_map.h"
#include "mimic/core/error.h"
#include "mimic/core/precision.h"

namespace mimic::attention {
namespace {

class Performer : public FeatureMapImpl {
 public:
  explicit Performer(const FeatureMapSpec& spec) : FeatureMapImpl(spec) {
    MapOptions o(spec);
    features_ = o.integer("features", 2 * spec.head_dim, 1, kMaxFeatureDim);
    orthogonal_ = o.flag("orthogonal", true);
    redraw_ = o.flag("redraw", false);
    seed_ = o.integer("seed", 0);
    o.finish();
    MIMIC_CHECK(features_ >= 1, "feature map 'performer': features must be >= 1, got ", features_);
    check_map_size("performer", spec.n_head, spec.head_dim, features_);
    omega_ = register_buffer("omega", draw(seed_));
  }
  void begin_pass() override {
    if (redraw_ && is_training()) omega_.copy_(draw(seed_ + ++draws_));
  }
  at::Tensor forward(const at::Tensor& x, Role, int64_t) override {
    // In float (double with double inputs), autocast off: the log-features reach ±|ω||x| ~ 16 at head_dim 16, where
    // bf16's step is 1/16, and the largest of them dominate a row of exp(·) (under bf16 the projection and |x|² were
    // rounded: at 1,024 positions 2.5% off fp32, 5% decoded). A [d, m] product a head, small beside the attention.
    AutocastOff in_float;
    const auto xw = float_or_wider(x);
    auto proj = torch::matmul(xw, omega_.to(xw.dtype()));  // [B, H, T, m]
    return proj - 0.5 * xw.square().sum(-1, true) - 0.5 * std::log(static_cast<double>(features_));
  }
  int64_t feature_dim() const override { return features_; }
  bool log_space() const override { return true; }
  Sign sign() const override { return Sign::Positive; }
  bool of_key_alone() const override { return !redraw_; }  // a redraw changes every key's features

 private:
  // [H, d, m]: columns are the random directions.
  at::Tensor draw(int64_t seed) const {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed));
    const int64_t h = spec_.n_head, d = spec_.head_dim, m = features_;
    auto opts = torch::dtype(torch::kFloat);
    if (!orthogonal_) return at::randn({h, d, m}, gen, opts);
    std::vector<at::Tensor> heads;
    for (int64_t i = 0; i < h; ++i) {
      std::vector<at::Tensor> blocks;
      for (int64_t done = 0; done < m; done += d) {
        auto [q, r] = at::linalg_qr(at::randn({d, d}, gen, opts));
        q = q * torch::sign(r.diagonal());  // without the sign fix the directions are not uniformly distributed
        blocks.push_back(q.narrow(1, 0, std::min(d, m - done)));
      }
      auto dirs = torch::cat(blocks, 1);                                   // [d, m], unit columns
      auto norms = at::randn({d, m}, gen, opts).square().sum(0).sqrt();  // chi(d) lengths
      heads.push_back(dirs * norms);
    }
    return torch::stack(heads);
  }

  int64_t features_, seed_, draws_ = 0;
  bool orthogonal_, redraw_;
  at::Tensor omega_;
};

}  // namespace

FeatureMap make_performer_map(const FeatureMapSpec& spec) { return std::make_shared<Performer>(spec); }

}  // namespace mimic::attention
