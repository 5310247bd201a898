#include "mimic/attention/hybrid_kernel.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <vector>

#include "mimic/attention/kinds.h"
#include "mimic/core/error.h"

namespace mimic::attention {

HybridConfig HybridConfig::from_json(const nlohmann::json& j, int64_t n_head) {
  MIMIC_CHECK(j.is_object(), "hybrid attention options must be a JSON object, got ", j.dump());
  HybridConfig c;
  nlohmann::json linear = nlohmann::json::object();
  for (auto it = j.begin(); it != j.end(); ++it) {
    const auto& key = it.key();
    // kinds.def's list decides which keys are options (convert reads it to tell another kind's option from a
    // value out of range): a key read below but not listed is refused too
    if (!attention_kind("hybrid").takes_option(key)) fail_unknown_option("hybrid", key);
    const auto& val = it.value();
    auto bad = [&](const char* want) { fail("hybrid attention option '", key, "' must be ", want, ", got ", val.dump()); };
    if (key == "window" || key == "w") {  // w: the short name LoLCATs' papers use
      if (!val.is_number_integer() || val.get<int64_t>() < 1 || val.get<int64_t>() > kMaxHybridWindow)
        bad(("an integer in [1, " + std::to_string(kMaxHybridWindow) + "]").c_str());
      c.window = val.get<int64_t>();
    } else if (key == "mix") {
      if (!val.is_string() || (val != "learned" && val != "fixed")) bad("learned or fixed");
      c.learned = val == "learned";
    } else if (key == "window_weight") {
      if (!val.is_number() || !(val.get<double>() > 0 && val.get<double>() < 1)) bad("a number in (0, 1)");
      c.window_weight = val.get<double>();
    } else if (key == "affine") {
      if (!val.is_boolean()) bad("true or false");
      c.affine = val.get<bool>();
    } else if (key == "window_scale") {
      if (!val.is_string() || (val != "max" && val != "exact")) bad("max or exact");
      c.exact = val == "exact";
    } else if (key == "cache") {
      if (!val.is_number_integer() || val.get<int64_t>() < 0 || val.get<int64_t>() > kMaxHybridWindow) bad("an integer in [0, 65536]");
      c.cache = val.get<int64_t>();
    } else if (key == "cache_every") {
      if (!val.is_number_integer() || val.get<int64_t>() < 1 || val.get<int64_t>() > kMaxHybridWindow) bad("an integer in [1, 65536]");
      c.cache_every = val.get<int64_t>();
    } else if (key == "cache_heads") {
      if (!val.is_array() || val.empty()) bad("a non-empty list of head indices");
      for (const auto& h : val) {
        if (!h.is_number_integer() || h.get<int64_t>() < 0 || h.get<int64_t>() >= n_head)
          bad(("a list of head indices in [0, " + std::to_string(n_head) + ")").c_str());
        if (!c.cache_heads.empty() && h.get<int64_t>() <= c.cache_heads.back()) bad("sorted and distinct head indices");
        c.cache_heads.push_back(h.get<int64_t>());
      }
    } else if (key == "norm") {
      if (val != "row") bad("row (the window and the linear part share the row normaliser)");
    } else if (key == "decay") {
      if (val != false) bad("false (a decay is not defined across the window's edge)");
    } else if (key == "feature_map" || key == "map_options" || key == "eps" || key == "chunk" || key == "gates") {
      linear[key] = val;
    } else {
      fail_unknown_option("hybrid", key);
    }
  }
  MIMIC_CHECK(c.cache > 0 || !j.contains("cache_every"), "hybrid attention option 'cache_every' sets the sparse cache's selection "
              "interval: it needs cache > 0");
  MIMIC_CHECK(c.cache > 0 || !j.contains("cache_heads"), "hybrid attention option 'cache_heads' names the heads that carry the sparse "
              "cache: it needs cache > 0");
  if (static_cast<int64_t>(c.cache_heads.size()) == n_head) c.cache_heads.clear();  // every head: the default, written as such
  if (!linear.contains("feature_map")) linear["feature_map"] = kDefaultFeatureMap;
  // the linear part's keys are checked by its parser, whose refusals said "linear attention option 'eps'" to a user who
  // gave hybrid options (helper-83's probe): said as the hybrid part they are
  try {
    c.linear = LinearAttentionConfig::from_json(linear, n_head);
  } catch (const Error& e) {
    fail("hybrid attention's linear part: ", e.what());
  }
  return c;
}

nlohmann::json HybridConfig::to_json() const {
  auto j = linear.to_json();
  j["window"] = window;
  j["mix"] = learned ? "learned" : "fixed";
  j["window_weight"] = window_weight;
  j["affine"] = affine;
  j["window_scale"] = exact ? "exact" : "max";
  if (cache > 0) {  // only with a cache: the options (and digests) of models without one stay as they were
    j["cache"] = cache;
    j["cache_every"] = cache_every;
    if (!cache_heads.empty()) j["cache_heads"] = cache_heads;
  }
  return j;
}

HybridAttention::HybridAttention(const HybridConfig& config, int64_t n_head, int64_t head_dim)
    : LinearAttention(config.linear, n_head, head_dim), hybrid_(config), n_head_(n_head) {
  if (config.learned) {
    const double logit = std::log(config.window_weight / (1 - config.window_weight));
    window_logit = register_parameter("window_logit", torch::full({n_head}, logit));
  } else {
    fixed_weight_ = torch::full({n_head}, config.window_weight);
  }
  if (!config.cache_heads.empty()) {
    std::vector<int64_t> plain;
    for (int64_t h = 0; h < n_head; ++h)
      if (!std::binary_search(config.cache_heads.begin(), config.cache_heads.end(), h)) plain.push_back(h);
    cache_index_ = torch::tensor(config.cache_heads, torch::kLong);
    plain_index_ = torch::tensor(plain, torch::kLong);
    split_order_ = torch::cat({cache_index_, plain_index_}).argsort();
  }
}

void HybridAttention::to(torch::Device device, torch::Dtype dtype, bool non_blocking) {
  LinearAttention::to(device, dtype, non_blocking);
  if (fixed_weight_.defined()) fixed_weight_ = fixed_weight_.to(device);  // float32, as before a move
}

void HybridAttention::to(torch::Device device, bool non_blocking) {
  LinearAttention::to(device, non_blocking);
  if (fixed_weight_.defined()) fixed_weight_ = fixed_weight_.to(device);
}

at::Tensor HybridAttention::window_weight() const {
  return hybrid_.learned ? torch::sigmoid(window_logit) : fixed_weight_;
}

HybridOptions HybridAttention::hybrid_options(bool causal) const {
  HybridOptions o;
  o.causal = causal;
  // (a window of at least the context sees every key either way, and so does a cache of the context's size; a cache
  // stays > 0, so that the form that computes it stays the same)
  o.window = context_ > 0 ? std::min(hybrid_.window, context_) : hybrid_.window;
  o.chunk = hybrid_.linear.chunk;
  o.window_weight = window_weight();
  if (hybrid_.affine) o.linear_weight = 1 - o.window_weight;
  o.exact = hybrid_.exact;
  o.cache = context_ > 0 ? std::min(hybrid_.cache, context_) : hybrid_.cache;
  o.cache_every = hybrid_.cache_every;
  return o;
}

HybridAttention::HeadGroup HybridAttention::head_group(const at::Tensor& index, const HybridOptions& all, bool with_cache,
                                                       const c10::Device& device) const {
  HeadGroup g{index.to(device), all};
  g.options.window_weight = all.window_weight.index_select(0, index.to(all.window_weight.device()));
  if (all.linear_weight.defined()) g.options.linear_weight = all.linear_weight.index_select(0, index.to(all.linear_weight.device()));
  if (!with_cache) {
    g.options.cache = 0;
    g.options.cache_every = 1;
  }
  return g;
}

namespace {
at::Tensor heads(const at::Tensor& x, const at::Tensor& index) { return x.index_select(1, index); }
Features heads(const Features& f, const at::Tensor& index) { return {heads(f.q, index), heads(f.k, index), f.log_space}; }
// The key features of one group's keys [B, G, n, D]: the map is per head, so the keys go to their heads' places
// in a layer-wide tensor (the other heads' rows zero; their features are dropped).
std::function<at::Tensor(const at::Tensor&)> group_key_features(std::function<at::Tensor(const at::Tensor&)> all, at::Tensor index,
                                                                int64_t n_head) {
  if (!all) return {};
  return [all = std::move(all), index = std::move(index), n_head](const at::Tensor& k) {
    auto full = torch::zeros({k.size(0), n_head, k.size(2), k.size(3)}, k.options());
    return heads(all(full.index_copy(1, index, k)), index);
  };
}
// The groups' outputs (or weights) [B, |group|, ...] as one tensor in head order: `order` (long, CPU) puts the rows of
// their concatenation back in place (HybridAttention::parts_order).
at::Tensor in_head_order(const std::vector<at::Tensor>& outs, const at::Tensor& order) {
  const auto out = torch::cat(outs, 1);
  return out.index_select(1, order.to(out.device()));
}
// The heads of `index` that `only` lists (both sorted), as a long tensor on the CPU; undefined when none.
at::Tensor common_heads(const at::Tensor& index, const std::vector<int64_t>& only) {
  std::vector<int64_t> both;
  const auto idx = index.to(torch::kCPU).contiguous();
  const auto* p = idx.data_ptr<int64_t>();
  std::set_intersection(p, p + idx.numel(), only.begin(), only.end(), std::back_inserter(both));
  return both.empty() ? at::Tensor() : torch::tensor(both, torch::kLong);
}
}  // namespace

at::Tensor HybridAttention::parts_order(const std::vector<HeadPart>& parts, bool every_head) const {
  if (every_head && split()) return split_order_;
  std::vector<at::Tensor> rows;
  for (const auto& part : parts) rows.push_back(part.index);
  return torch::cat(rows).argsort();
}

std::vector<HybridAttention::HeadPart> HybridAttention::head_parts(const at::Tensor& only) const {
  const std::vector<HeadPart> parts = split() ? std::vector<HeadPart>{{cache_index_, true, true}, {plain_index_, false, false}}
                                              : std::vector<HeadPart>{{torch::arange(n_head_, torch::kLong), hybrid_.cache > 0, true}};
  if (!only.defined()) return parts;
  const auto asked = only.to(torch::kCPU).contiguous();
  const std::vector<int64_t> wanted(asked.data_ptr<int64_t>(), asked.data_ptr<int64_t>() + asked.numel());
  MIMIC_CHECK(std::is_sorted(wanted.begin(), wanted.end()) && std::adjacent_find(wanted.begin(), wanted.end()) == wanted.end() &&
                  !wanted.empty() && wanted.front() >= 0 && wanted.back() < n_head_,
              "hybrid attention on heads ", nlohmann::json(wanted).dump(), ": give sorted, distinct heads of the layer's ", n_head_);
  std::vector<HeadPart> cut;
  for (const auto& part : parts)
    if (auto index = common_heads(part.index, wanted); index.defined()) cut.push_back({index, part.with_cache, part.first});
  return cut;
}

at::Tensor HybridAttention::forward_fast(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx) {
  return HybridAttention::forward_fast_heads(q, k, v, ctx, at::Tensor());
}

at::Tensor HybridAttention::forward_fast_heads(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                                               const at::Tensor& only) {
  auto f = features(q, k, ctx.scale, 0);
  const auto all = hybrid_options(ctx.causal);
  if (!split() && !only.defined()) return hybrid_attention(q, k, v, f, ctx.scale, all, ctx.key_padding_mask);
  const auto parts = head_parts(only);
  std::vector<at::Tensor> outs;
  for (const auto& part : parts) {
    const auto g = head_group(part.index, all, part.with_cache, q.device());
    outs.push_back(hybrid_attention(heads(q, g.index), heads(k, g.index), heads(v, g.index), heads(f, g.index), ctx.scale, g.options,
                                    ctx.key_padding_mask));
  }
  return in_head_order(outs, parts_order(parts, !only.defined()));
}

at::Tensor HybridAttention::forward_quadratic(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                                              at::Tensor* weights, at::Tensor* log_weights) {
  auto f = features(q, k, ctx.scale, 0);
  if (!split()) return hybrid_quadratic(q, k, v, f, ctx.scale, hybrid_options(ctx.causal), ctx.key_padding_mask, weights, log_weights);
  const auto all = hybrid_options(ctx.causal);
  const auto parts = head_parts(at::Tensor());
  std::vector<at::Tensor> outs, ws, lws;
  for (const auto& part : parts) {
    const auto g = head_group(part.index, all, part.with_cache, q.device());
    at::Tensor w, lw;
    outs.push_back(hybrid_quadratic(heads(q, g.index), heads(k, g.index), heads(v, g.index), heads(f, g.index), ctx.scale, g.options,
                                    ctx.key_padding_mask, weights ? &w : nullptr, log_weights ? &lw : nullptr));
    ws.push_back(w);
    lws.push_back(lw);
  }
  const auto order = parts_order(parts, true);
  if (weights) *weights = in_head_order(ws, order);
  if (log_weights) *log_weights = in_head_order(lws, order);
  return in_head_order(outs, order);
}

namespace {
struct HybridCache : KernelCache {
  HybridState state;
  HybridState plain;  // with cache_heads a strict subset: the heads without the cache (`state` then holds the cache heads')
  int64_t bytes() const override { return hybrid_state_bytes(state) + (plain.defined() ? hybrid_state_bytes(plain) : 0); }
  // hybrid_step writes the ring in place, so a clone copies it (as the KV cache's clone copies its rows).
  std::unique_ptr<KernelCache> clone() const override {
    auto c = std::make_unique<HybridCache>();
    c->state = hybrid_state_copy(state);
    if (plain.defined()) c->plain = hybrid_state_copy(plain);
    c->position = position;
    return c;
  }
};
}  // namespace

std::unique_ptr<KernelCache> HybridAttention::new_cache() const { return std::make_unique<HybridCache>(); }

namespace {
// Decoding with one state: q [B, H, T, D], k, v [B, H_kv, T, D] (H_kv dividing H: the ring is kept per KV head), f the
// features (per query head).
at::Tensor decode(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Features& f, double scale, HybridOptions o,
                  HybridState& state) {
  if (o.cache > 0) {
    // LoLA's decoding: the recurrent step selects at every token, the prompt's tokens included (the chunked form
    // has no cache); no gradients (the step writes its state in place)
    MIMIC_CHECK(!at::GradMode::is_enabled() || (!q.requires_grad() && !k.requires_grad() && !v.requires_grad()),
                "hybrid attention with a sparse cache decodes without gradients (run it under torch::NoGradGuard); "
                "the whole-sequence forward trains");
    torch::NoGradGuard no_grad;
    o.cache_every = 1;
    std::vector<at::Tensor> rows;
    for (int64_t t = 0; t < q.size(2); ++t)
      rows.push_back(hybrid_step(q.narrow(2, t, 1), k.narrow(2, t, 1), v.narrow(2, t, 1),
                                 Features{f.q.narrow(2, t, 1), f.k.narrow(2, t, 1), f.log_space}, scale, o, state));
    return torch::cat(rows, 2);
  }
  // One token without gradients (decoding): the recurrent step. A prompt, or a call that autograd must see
  // through, runs the chunked form (the step's reference), which continues from the same state.
  return q.size(2) == 1 && !at::GradMode::is_enabled() ? hybrid_step(q, k, v, f, scale, o, state)
                                                       : hybrid_chunked(q, k, v, f, scale, o, at::Tensor(), &state);
}
}  // namespace

at::Tensor HybridAttention::forward_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionContext& ctx,
                                           KernelCache& cache) {
  return forward_cached_heads(q, k, v, ctx, cache, at::Tensor());
}

at::Tensor HybridAttention::forward_cached_heads(const at::Tensor& q, const at::Tensor& k_in, const at::Tensor& v_in,
                                                 const AttentionContext& ctx, KernelCache& cache, const at::Tensor& only) {
  auto& hc = cached_call<HybridCache>(cache, ctx, kind());
  // The linear state is per query head (the maps are); the window's ring of keys and values is per KV head under
  // grouped-query attention — g times smaller, its g query heads reading it as g rows — where every head runs
  // as one group. Groups of heads (a split cache, a mixed layer's converted heads) keep their ring per query head.
  const auto k = expand_kv_heads(k_in, q.size(1));
  auto f = features(q, k, ctx.scale, hc.position);
  // the states keep keys only where their features can be computed again
  const auto key_feats = key_features(ctx.scale);
  at::Tensor o;
  if (!split() && !only.defined()) {
    auto opts = hybrid_options(true);
    opts.key_features = key_feats;
    o = decode(q, k_in, v_in, f, ctx.scale, opts, hc.state);
    hc.position = hc.state.position;
    return o;
  }
  // Groups of heads, each decoded with its own state: the cache heads (`state`) and the others (`plain`), or every
  // head (`state`); each cut to the heads asked for, where some are, a group with none of them skipped.
  const auto all = hybrid_options(true);
  const auto parts = head_parts(only);
  const auto v = expand_kv_heads(v_in, q.size(1));
  std::vector<at::Tensor> outs;
  for (const auto& part : parts) {
    auto g = head_group(part.index, all, part.with_cache, q.device());
    g.options.key_features = group_key_features(key_feats, g.index, n_head_);
    auto& state = part.first ? hc.state : hc.plain;
    outs.push_back(decode(heads(q, g.index), heads(k, g.index), heads(v, g.index), heads(f, g.index), ctx.scale, g.options, state));
    hc.position = state.position;
  }
  // every head of a split layer, at every token: the order computed once (split_order_), not an argsort a token
  return in_head_order(outs, parts_order(parts, !only.defined()));
}

std::string HybridAttention::parameter_group(const std::string& name) const {
  return name == "window_logit" ? "maps" : LinearAttention::parameter_group(name);
}

// The "hybrid" entry of kinds.def: options are HybridConfig's JSON.
AttentionKernel make_hybrid_kernel(const nlohmann::json& options, int64_t n_head, int64_t head_dim) {
  return std::make_shared<HybridAttention>(HybridConfig::from_json(options, n_head), n_head, head_dim);
}

}  // namespace mimic::attention
