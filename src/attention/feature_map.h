// Feature maps of linear attention: φ such that softmax(q·k) is replaced by φ(q)·φ(k).
//
// One registry (maps/maps.def) names every map; each map is one file in maps/ with its own parameters.
// A map is applied per layer to all heads at once: x is [B, H, T, d] and the result [B, H, T, F].
// Maps built on exp (hedgehog, performer, exp_t, ...) return log φ instead of φ (log_space() is true):
// the linear-attention op exponentiates them after subtracting stabilising constants (see
// linear_attention.h), which is what keeps them finite in fp32 for any input size.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mimic::attention {

enum class Role { Query, Key };

// What a map promises about its (exponentiated) features.
enum class Sign { Any, NonNegative, Positive };

struct FeatureMapSpec {
  std::string name = "hedgehog";
  int64_t n_head = 1;
  int64_t head_dim = 64;
  nlohmann::json options = nlohmann::json::object();  // map-specific; unknown keys are an error
};

class FeatureMapImpl : public torch::nn::Module {
 public:
  explicit FeatureMapImpl(FeatureMapSpec spec) : spec_(std::move(spec)) {}
  // x: [B, H, T, head_dim], already multiplied by sqrt(attention scale), so that φ(q)·φ(k) stands in for
  // exp(scale·q·k). offset: absolute position of x[..., 0, :] (used by position-aware maps).
  // Returns [B, H, T, feature_dim()]: the features, or their logarithms when log_space().
  virtual at::Tensor forward(const at::Tensor& x, Role role, int64_t offset) = 0;
  virtual int64_t feature_dim() const = 0;
  virtual bool log_space() const { return false; }
  virtual Sign sign() const = 0;
  // Called once per attention call before q and k are mapped (random-feature maps redraw here).
  virtual void begin_pass() {}
  // Whether a key's features are a function of the key alone — not of its position (cosformer) nor of the pass
  // (performer redrawing): a decoding state may then keep keys only and compute their features again when needed.
  virtual bool of_key_alone() const { return true; }
  const FeatureMapSpec& spec() const { return spec_; }

 protected:
  FeatureMapSpec spec_;
};
using FeatureMap = std::shared_ptr<FeatureMapImpl>;

// Builds the named map; throws mimic::Error naming the known maps for an unknown name, and naming the
// option for an unknown or ill-typed option.
FeatureMap make_feature_map(const FeatureMapSpec& spec);

struct FeatureMapInfo {
  std::string name;
  std::string summary;
};
const std::vector<FeatureMapInfo>& feature_maps();

// The most features a map option may ask for (hedgehog and t2r feature_dim, performer features). Maps allocate
// parameters of n_head × head_dim × F and features of [B, H, T, F] from it, so an unbounded value ("feature_dim":
// 1000000000) was gigabytes before the first step; 65536 is 512 times the Hedgehog paper's 2 × head_dim.
inline constexpr int64_t kMaxFeatureDim = 65536;
// The most parameters (or random directions) one map may hold: n_head × head_dim × F. kMaxFeatureDim alone still let
// a wide layer ask for 2^32 weights (a maps file's n_head 64, head_dim 1024, feature_dim 65536); 2^26 (256 MiB of
// float32) is thousands of times a real Hedgehog layer (12 heads × 64 × 128). Checked before allocating.
inline constexpr int64_t kMaxMapParameters = int64_t{1} << 26;
// Throws mimic::Error naming the map unless n_head × in × out <= kMaxMapParameters.
void check_map_size(const std::string& map, int64_t n_head, int64_t in, int64_t out);

// Reads a map's options and rejects the ones it did not ask for (finish()).
class MapOptions {
 public:
  MapOptions(const FeatureMapSpec& spec);
  double number(const std::string& key, double fallback);  // finite
  int64_t integer(const std::string& key, int64_t fallback);
  // An integer in [lo, hi] when given (the fallback is not checked): a mimic::Error naming the map, option and range.
  int64_t integer(const std::string& key, int64_t fallback, int64_t lo, int64_t hi);
  bool flag(const std::string& key, bool fallback);
  std::string text(const std::string& key, const std::string& fallback);
  void finish() const;  // throws for options that no read asked for

 private:
  const nlohmann::json* find(const std::string& key);
  const FeatureMapSpec& spec_;
  std::vector<std::string> used_;
};

}  // namespace mimic::attention
