#include "mimic/attention/linear_kernel.h"

#include <torch/torch.h>

#include <cmath>

#include "mimic/attention/kinds.h"
#include "mimic/core/error.h"

namespace mimic::attention {

std::vector<double> retnet_decay(int64_t n_head) {
  std::vector<double> g;
  for (int64_t h = 0; h < n_head; ++h) g.push_back(1.0 - std::pow(2.0, -5.0 - static_cast<double>(h)));
  return g;
}

LinearAttentionConfig LinearAttentionConfig::from_json(const nlohmann::json& j, int64_t n_head) {
  MIMIC_CHECK(j.is_object(), "linear attention options must be a JSON object, got ", j.dump());
  LinearAttentionConfig c;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const auto& key = it.key();
    // kinds.def's list decides which keys are options (convert reads it to tell another kind's option from a
    // value out of range): a key read below but not listed is refused too
    if (!attention_kind("linear").takes_option(key)) fail_unknown_option("linear", key);
    const auto& val = it.value();
    auto bad = [&](const char* want) { fail("linear attention option '", key, "' must be ", want, ", got ", val.dump()); };
    if (key == "feature_map") {
      if (!val.is_string()) bad("a feature-map name");
      c.feature_map = val.get<std::string>();
    } else if (key == "map_options") {
      if (!val.is_object()) bad("an object");
      c.map_options = val;
    } else if (key == "norm") {
      if (!val.is_string()) bad("one of row, none, l2, rms");
      c.norm = parse_norm(val.get<std::string>());
    } else if (key == "eps") {
      if (!val.is_number() || val.get<double>() < 0) bad("a number >= 0");
      c.eps = val.get<double>();
    } else if (key == "chunk") {
      if (!val.is_number_integer() || val.get<int64_t>() < 1) bad("an integer >= 1");
      c.chunk = val.get<int64_t>();
    } else if (key == "gates") {
      if (!val.is_boolean()) bad("true or false");
      c.gates = val.get<bool>();
    } else if (key == "decay") {
      if (val.is_boolean()) {
        c.decay = val.get<bool>() ? retnet_decay(n_head) : std::vector<double>{};
      } else if (val.is_array()) {
        for (const auto& g : val) {
          if (!g.is_number() || g.get<double>() <= 0 || g.get<double>() > 1) bad("a list of values in (0, 1]");
          c.decay.push_back(g.get<double>());
        }
        MIMIC_CHECK(static_cast<int64_t>(c.decay.size()) == n_head, "linear attention option 'decay' needs one value per head (",
                    n_head, "), got ", c.decay.size());
      } else {
        bad("true, false or a list of per-head values");
      }
    } else {
      fail_unknown_option("linear", key);
    }
  }
  return c;
}

nlohmann::json LinearAttentionConfig::to_json() const {
  nlohmann::json j = {{"feature_map", feature_map}, {"map_options", map_options}, {"norm", norm_name(norm)},
                      {"eps", eps},                 {"chunk", chunk},             {"gates", gates}};
  j["decay"] = decay.empty() ? nlohmann::json(false) : nlohmann::json(decay);
  return j;
}

HeadGatesImpl::HeadGatesImpl(int64_t d_model, int64_t n_head) {
  w_q = register_parameter("w_q", torch::zeros({d_model, n_head}));
  w_k = register_parameter("w_k", torch::zeros({d_model, n_head}));
}

std::pair<at::Tensor, at::Tensor> HeadGatesImpl::forward(const at::Tensor& q, const at::Tensor& k, bool query_trains) {
  auto gate = [](const at::Tensor& x, const at::Tensor& w) {
    auto full = x.permute({0, 2, 1, 3}).flatten(2);  // [B, T, H·d]: the layer's projection, heads side by side
    return torch::log_softmax(torch::matmul(full, w.to(x.dtype())), -1).permute({0, 2, 1});  // [B, H, T]
  };
  return {gate(q, query_trains ? w_q : w_q.detach() + w_q * 0.0), gate(k, w_k)};
}

LinearAttention::LinearAttention(const LinearAttentionConfig& config, int64_t n_head, int64_t head_dim) : config_(config) {
  map = register_module("feature_map", make_feature_map({config.feature_map, n_head, head_dim, config.map_options}));
  if (config.gates) gates = register_module("gates", std::make_shared<HeadGatesImpl>(n_head * head_dim, n_head));
  if (!config.decay.empty()) {
    MIMIC_CHECK(static_cast<int64_t>(config.decay.size()) == n_head, "linear attention: decay needs one value per head (", n_head,
                "), got ", config.decay.size());
    decay_ = torch::tensor(config.decay, torch::kDouble);
  }
}

void LinearAttention::to(torch::Device device, torch::Dtype dtype, bool non_blocking) {
  torch::nn::Module::to(device, dtype, non_blocking);
  if (decay_.defined()) decay_ = decay_.to(device);
}

void LinearAttention::to(torch::Device device, bool non_blocking) {
  torch::nn::Module::to(device, non_blocking);
  if (decay_.defined()) decay_ = decay_.to(device);
}

LinearOptions LinearAttention::options(bool causal) const {
  LinearOptions o;
  o.causal = causal;
  o.norm = config_.norm;
  o.eps = config_.eps;
  o.chunk = config_.chunk;
  o.decay = decay_;
  return o;
}

Features LinearAttention::features(const at::Tensor& q, const at::Tensor& k, double scale, int64_t offset) {
  map->begin_pass();
  const double root = std::sqrt(scale);
  Features f{map->forward(q * root, Role::Query, offset), map->forward(k * root, Role::Key, offset), map->log_space()};
  if (gates) {
    // where G^Q is a factor of each query's numerator and denominator alike it stays in the forward (the same numbers),
    // but W_GQ learns nothing from ε's remainder (weight decay alone moves it, towards 0, which cancels as well); without
    // autograd (decoding) no zero-gradient path is built
    auto [gq, gk] = gates->forward(q, k, /*query_trains=*/!query_gate_cancels() || !at::GradMode::is_enabled());
    if (f.log_space) {
      f.q = f.q + gq.unsqueeze(-1);
      f.k = f.k + gk.unsqueeze(-1);
    } else {
      f.q = f.q * gq.exp().unsqueeze(-1);
      f.k = f.k * gk.exp().unsqueeze(-1);
    }
  }
  return f;
}

std::function<at::Tensor(const at::Tensor&)> LinearAttention::key_features(double scale) {
  if (gates || !map->of_key_alone()) return {};
  return [map = map, root = std::sqrt(scale)](const at::Tensor& k) { return map->forward(k * root, Role::Key, 0); };
}

namespace {
// The features, values and per-head decay cut to the heads `heads` (long, sorted, distinct; undefined: every head).
void keep_heads(Features& f, at::Tensor& v, LinearOptions& opts, const at::Tensor& heads) {
  if (!heads.defined()) return;
  const auto index = heads.to(v.device());
  f.q = f.q.index_select(1, index);
  f.k = f.k.index_select(1, index);
  v = v.index_select(1, index);
  if (opts.decay.defined()) opts.decay = opts.decay.index_select(0, heads.to(opts.decay.device()));
}
}  // namespace

at::Tensor LinearAttention::forward_fast(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx) {
  return LinearAttention::forward_fast_heads(q, k, v, ctx, at::Tensor());
}

at::Tensor LinearAttention::forward_fast_heads(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v_in, const AttentionContext& ctx,
                                               const at::Tensor& heads) {
  auto f = features(q, k, ctx.scale, 0);
  auto opts = options(ctx.causal);
  auto v = v_in;
  keep_heads(f, v, opts, heads);
  return linear_attention(f, v, opts, ctx.key_padding_mask);
}

at::Tensor LinearAttention::forward_quadratic(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                              const AttentionContext& ctx, at::Tensor* weights, at::Tensor* log_weights) {
  return linear_quadratic(features(q, k, ctx.scale, 0), v, options(ctx.causal), ctx.key_padding_mask, nullptr, weights,
                          log_weights);
}

void LinearAttention::weights_quadratic(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                                        at::Tensor* weights, at::Tensor* log_weights) {
  const bool needs_v = config_.norm == Norm::L2 || config_.norm == Norm::RMS;
  forward_quadratic(q, k, needs_v ? v : v.narrow(-1, 0, 1), ctx, weights, log_weights);
}

at::Tensor LinearAttention::forward_with_state(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v_in, double scale,
                                               LinearState& state, const at::Tensor& heads) {
  auto f = features(q, k, scale, state.position);
  auto opts = options(true);
  auto v = v_in;
  keep_heads(f, v, opts, heads);
  if (q.size(2) == 1) return linear_step(f.q.select(2, 0), f.k.select(2, 0), f.log_space, v.select(2, 0), opts, state).unsqueeze(2);
  return linear_chunked(f, v, opts, at::Tensor(), &state);
}

namespace {
struct LinearCache : KernelCache {
  LinearState state;
  int64_t bytes() const override {
    int64_t n = 0;
    for (const auto* t : {&state.S, &state.z, &state.m})
      if (t->defined()) n += static_cast<int64_t>(t->nbytes());
    return n;
  }
  std::unique_ptr<KernelCache> clone() const override { return std::make_unique<LinearCache>(*this); }
};
}  // namespace

std::unique_ptr<KernelCache> LinearAttention::new_cache() const { return std::make_unique<LinearCache>(); }

at::Tensor LinearAttention::forward_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                                           KernelCache& cache) {
  return LinearAttention::forward_cached_heads(q, k, v, ctx, cache, at::Tensor());
}

at::Tensor LinearAttention::forward_cached_heads(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                                                 KernelCache& cache, const at::Tensor& heads) {
  auto& lc = cached_call<LinearCache>(cache, ctx, kind());
  // the state is per query head: the feature maps are, and φ(k) differs per head of a group
  auto o = forward_with_state(q, expand_kv_heads(k, q.size(1)), expand_kv_heads(v, q.size(1)), ctx.scale, lc.state, heads);
  lc.position = lc.state.position;
  return o;
}

bool LinearAttention::weights_may_be_negative() const { return map->sign() == Sign::Any; }

std::string LinearAttention::parameter_group(const std::string& name) const {
  return name.rfind("gates.", 0) == 0 ? "gates" : "maps";
}

// The "linear" entry of kinds.def: options are LinearAttentionConfig's JSON.
AttentionKernel make_linear_kernel(const nlohmann::json& options, int64_t n_head, int64_t head_dim) {
  return std::make_shared<LinearAttention>(LinearAttentionConfig::from_json(options, n_head), n_head, head_dim);
}

}  // namespace mimic::attention
