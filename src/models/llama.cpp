// The Llama family: the network and the descriptions of the four HF model types it reads (llama, mistral, qwen2,
// qwen3), which differ only in their config keys and in which optional tensors they carry.
#include "mimic/models/llama.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <regex>

#include "mimic/core/error.h"
#include "mimic/core/json_keys.h"
#include "mimic/models/family.h"
#include "mimic/models/model.h"

namespace mimic::models {

// ------------------------------------------------------------------------------------------ rotary embedding
at::Tensor rope_inverse_frequencies(const ModelConfig& c) {
  const int64_t hd = c.head_dim();
  auto inv = 1.0 / torch::pow(c.rope_theta, torch::arange(0, hd, 2, torch::kDouble) / static_cast<double>(hd));
  if (c.rope_scaling == "linear") return inv / c.rope_factor;
  if (c.rope_scaling != "llama3") return inv;
  // llama3: a wave longer than the original context / low_freq_factor is slowed by the factor, one shorter than
  // original / high_freq_factor is kept, and one between is a blend whose weight runs linearly in original / wavelength
  const double old = static_cast<double>(c.rope_original_positions), lo = c.rope_low_freq_factor, hi = c.rope_high_freq_factor;
  const auto wavelength = 2 * M_PI / inv;
  auto out = torch::where(wavelength > old / lo, inv / c.rope_factor, inv);
  const auto smooth = (old / wavelength - lo) / (hi - lo);
  const auto medium = (wavelength >= old / hi) & (wavelength <= old / lo);
  return torch::where(medium, (1 - smooth) * out / c.rope_factor + smooth * out, out);
}

at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  const auto rotated = torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos + rotated * sin;
}

// ------------------------------------------------------------------------------------------ network
LlamaImpl::LlamaImpl(const ModelConfig& c) : c_(c), inv_freq_(rope_inverse_frequencies(c)) {
  const int64_t d = c.d_model, hd = c.head_dim(), nh = c.n_head, nkv = c.kv_heads();
  embed_tokens = register_module("embed_tokens", torch::nn::Embedding(c.vocab_size, d));
  torch::nn::init::normal_(embed_tokens->weight, 0.0, 0.02);
  auto layers_list = register_module("layers", torch::nn::ModuleList());
  auto linear = [&](int64_t in, int64_t out, bool bias) {
    torch::nn::Linear l(torch::nn::LinearOptions(in, out).bias(bias));
    torch::NoGradGuard ng;
    l->weight.normal_(0.0, 0.02);  // HF's initializer_range
    if (bias) l->bias.zero_();
    return l;
  };
  for (int64_t i = 0; i < c.n_layer; ++i) {
    auto block = std::make_shared<torch::nn::Module>();
    auto attn = std::make_shared<torch::nn::Module>();
    auto mlp = std::make_shared<torch::nn::Module>();
    Layer l;
    l.input_layernorm = block->register_module("input_layernorm", RmsNorm(d, c.ln_eps));
    l.q_proj = attn->register_module("q_proj", linear(d, nh * hd, c.qkv_bias));
    l.k_proj = attn->register_module("k_proj", linear(d, nkv * hd, c.qkv_bias));
    l.v_proj = attn->register_module("v_proj", linear(d, nkv * hd, c.qkv_bias));
    l.o_proj = attn->register_module("o_proj", linear(nh * hd, d, c.o_bias));
    if (c.qk_norm) {
      l.q_norm = attn->register_module("q_norm", RmsNorm(hd, c.ln_eps));
      l.k_norm = attn->register_module("k_norm", RmsNorm(hd, c.ln_eps));
    }
    l.post_attention_layernorm = block->register_module("post_attention_layernorm", RmsNorm(d, c.ln_eps));
    l.gate_proj = mlp->register_module("gate_proj", linear(d, c.d_ff, false));
    l.up_proj = mlp->register_module("up_proj", linear(d, c.d_ff, false));
    l.down_proj = mlp->register_module("down_proj", linear(c.d_ff, d, false));
    block->register_module("self_attn", attn);
    block->register_module("mlp", mlp);
    layers_list->push_back(block);
    layers.push_back(l);
  }
  norm = register_module("norm", RmsNorm(d, c.ln_eps));
  if (!c.tie_word_embeddings) lm_head = register_module("lm_head", linear(d, c.vocab_size, false));
  init_layers(c.n_layer);
}

std::pair<at::Tensor, at::Tensor> LlamaImpl::rope_tables(int64_t offset, int64_t t, c10::Device device) {
  if (!cos_.defined() || cos_.size(0) < offset + t || cos_.device() != device) {
    // grown to twice what is asked (within the context), so that decoding token by token rebuilds them rarely;
    // angles in float64 (positions up to 2^24 times frequencies near 1 lose their fractions in float32), then float32
    const int64_t n = std::min(c_.max_positions, std::max<int64_t>(2 * (offset + t), 64));
    const auto angles = torch::arange(0, n, torch::kDouble).unsqueeze(1) * inv_freq_.unsqueeze(0);
    const auto both = torch::cat({angles, angles}, -1);
    const auto to = torch::TensorOptions().dtype(torch::kFloat).device(device);
    cos_ = both.cos().to(to);
    sin_ = both.sin().to(to);
  }
  return {cos_.narrow(0, offset, t), sin_.narrow(0, offset, t)};
}

ForwardOutputs LlamaImpl::forward(const ForwardInputs& in) {
  const auto& ids = in.input_ids;
  check_ids(ids, c_.vocab_size);
  const int64_t b = ids.size(0), t = ids.size(1), nh = c_.n_head, nkv = c_.kv_heads(), hd = c_.head_dim();
  const int64_t offset = decoding_ ? decoding_->position() : 0;
  MIMIC_CHECK(offset + t <= c_.max_positions, "sequence of ", offset + t, " tokens exceeds ", context_words(c_.max_positions, c_.context_note));
  at::Tensor pad = in.attention_mask.defined() ? in.attention_mask.to(torch::kBool) : at::Tensor();
  const auto [cos, sin] = rope_tables(offset, t, ids.device());
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  at::Tensor x = embed_tokens->forward(ids);
  for (int64_t i = 0; i < c_.n_layer; ++i) {
    auto& l = layers[static_cast<size_t>(i)];
    const auto h = l.input_layernorm->forward(x);
    auto q = l.q_proj->forward(h).view({b, t, nh, hd});
    auto k = l.k_proj->forward(h).view({b, t, nkv, hd});
    auto v = l.v_proj->forward(h).view({b, t, nkv, hd}).transpose(1, 2);
    if (c_.qk_norm) q = l.q_norm->forward(q), k = l.k_norm->forward(k);
    q = apply_rope(q.transpose(1, 2), cos, sin);
    k = apply_rope(k.transpose(1, 2), cos, sin);
    // grouped-query attention: k and v keep their nkv heads; attend_heads repeats them for the kernels that need one
    // per query head and leaves them grouped for a KV cache
    x = x + l.o_proj->forward(attend_heads(i, q, k, v, /*causal=*/true, pad, scale));
    const auto h2 = l.post_attention_layernorm->forward(x);
    x = x + l.down_proj->forward(torch::silu(l.gate_proj->forward(h2)) * l.up_proj->forward(h2));
  }
  ForwardOutputs out;
  out.last_hidden_state = norm->forward(x);
  if (!in.lm_head && !decoding_) return out;
  auto h = in.logits_positions.defined() ? out.last_hidden_state.index({in.logits_positions}) : out.last_hidden_state;
  out.logits = decoding_ ? lm_logits(h, lm_head_weight()) : lm_logits_reference(h, lm_head_weight());
  return out;
}

// ------------------------------------------------------------------------------------------ family
namespace {

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

// One description per HF model type; `kind` says which of the types' differences apply.
class LlamaFamily : public Family {
 public:
  enum class Kind { Llama, Mistral, Qwen2, Qwen3 };

  LlamaFamily(Kind kind, const std::string& type, const std::string& name, const std::string& arch, const std::string& tokenizer)
      : kind_(kind), arch_(arch) {
    model_type = type;
    display_name = name;
    causal = true;
    checkpoint_prefix = "model.";
    new_prefix = "model.";
    context_key = "max_position_embeddings";
    finetune_preset = "gpt2";  // a causal LM's defaults
    tokenizer_asset = tokenizer;  // what `pretrain --arch` trains a fresh model with on prose (a model folder brings its own)
    hf_tokenizer_class = kind == Kind::Llama || kind == Kind::Mistral ? "LlamaTokenizerFast" : "Qwen2TokenizerFast";
    lm_head_may_be_untied = true;
    pretrain_architecture = arch + "ForCausalLM";
  }

  void read_config(const nlohmann::json& j, const std::string& where, ModelConfig& c) const override {
    c.keys = {"num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_size", "intermediate_size", "vocab_size",
              "max_position_embeddings", "rms_norm_eps", ""};
    c.vocab_size = json_int(j, c.keys.vocab_size, where);
    c.d_model = json_int(j, c.keys.d_model, where);
    c.n_layer = json_int(j, c.keys.n_layer, where);
    c.n_head = json_int(j, c.keys.n_head, where);
    // An absent key takes the default of the type's own HF config class, which is not always the derived size: Mistral
    // has 8 KV heads, Qwen2 and Qwen3 32, Qwen3's heads are 128 wide (one per query head and hidden / heads were read
    // for every type: the Llama-family probe of 2026-12-01). A null is not absent there: the classes turn it into one
    // KV head per query head and hidden / heads (the second probe).
    c.n_kv_head = json_int_or(j, c.keys.n_kv_head, where, j.contains(c.keys.n_kv_head) ? c.n_head : default_kv_heads(c.n_head));
    // Qwen3's null head_dim is no size HF reads (4's attention fails on it, 5's config refuses it): refused, not derived
    MIMIC_CHECK(kind_ != Kind::Qwen3 || !j.contains("head_dim") || json_given(j, "head_dim"), where,
                ": head_dim is null (Qwen3's heads have a width of their own: give it, or leave the key out for the default 128)");
    c.explicit_head_dim = json_int_or(j, "head_dim", where, kind_ == Kind::Qwen3 ? 128 : 0);  // 0: derived
    if (c.explicit_head_dim == c.d_model / c.n_head && c.d_model % c.n_head == 0) c.explicit_head_dim = 0;  // the default spelled out
    {  // rotary embeddings rotate pairs of dimensions: an odd head would fail deep in the first forward
      const bool derived = c.explicit_head_dim == 0;
      const int64_t hd = derived ? c.d_model / c.n_head : c.explicit_head_dim;
      MIMIC_CHECK(hd % 2 == 0 || (derived && c.d_model % c.n_head != 0), where, ": head_dim ", hd,
                  derived ? " (hidden_size / num_attention_heads)" : "", " is odd: rotary position embeddings rotate pairs of dimensions");
    }
    c.d_ff = json_int(j, c.keys.d_ff, where);
    c.max_positions = json_int(j, c.keys.max_positions, where);
    c.ln_eps = json_double_or(j, c.keys.ln_eps, where, 1e-6);
    c.dropout = 0;  // the family trains without residual dropout (attention_dropout is checked, not applied)
    c.activation = config_activation(json_string_or(j, "hidden_act", where, "silu"), where, "hidden_act");
    MIMIC_CHECK(c.activation == Activation::Silu, where, ": hidden_act '", json_string_or(j, "hidden_act", where, ""), "': the ",
                display_name, " MLP mimic implements is SwiGLU (silu)");
    read_rope(j, where, c);
    c.tie_word_embeddings = json_bool_or(j, "tie_word_embeddings", where, false);
    // Qwen2's q/k/v projections always have biases and its o_proj none (its config has no key for them); Llama's and
    // Qwen3's attention_bias puts a bias on all four (o_proj's was missed: the Llama-family probe); Mistral's attention
    // has none, whatever the config says (HF's ignores the key)
    const bool attention_bias = (kind_ == Kind::Llama || kind_ == Kind::Qwen3) && json_bool_or(j, "attention_bias", where, false);
    c.qkv_bias = kind_ == Kind::Qwen2 || attention_bias;
    c.o_bias = attention_bias;
    c.qk_norm = kind_ == Kind::Qwen3;
    MIMIC_CHECK(!json_bool_or(j, "mlp_bias", where, false), where, ": mlp_bias true: biases in the MLP, which mimic's ", display_name,
                " does not implement");
    // A sliding window shorter than the context changes what the model computes beyond the window; mimic's softmax
    // sees every position. Up to the window both are the same computation, so the context is capped there
    // (Mistral-7B-v0.1: 4096 of 32768 positions) rather than refusing the model (it was refused until 2026-12-01).
    // Read whether or not a layer uses it: a window of −5 is a broken config either way (the eleventh probe).
    // An absent sliding_window is 4096, the default of Mistral's, Qwen2's and Qwen3's config classes (null: none): read
    // as none, a trimmed config computed full attention beyond 4096 tokens, unlike HF's (the Llama-family probes).
    const bool type_default = kind_ != Kind::Llama && !json_has(j, "sliding_window");
    const int64_t w = type_default ? 4096 : json_int_or(j, "sliding_window", where, 0);
    if (windowed_layers(j, where, c.n_layer) && w > 0 && w < c.max_positions) {
      c.context_note = std::string(type_default ? "sliding_window absent: " + display_name + "'s default 4096" : "sliding_window") + "; " +
                       c.keys.max_positions + " " + std::to_string(c.max_positions);
      c.max_positions = w;
    }
  }

  std::vector<std::pair<std::string, Head>> architectures() const override {
    std::vector<std::pair<std::string, Head>> names = {{arch_ + "ForCausalLM", Head::Lm}, {arch_ + "Model", Head::None}};
    if (arch_ == "Llama") names.emplace_back("LLaMAForCausalLM", Head::Lm);  // early conversions' spelling, the same network
    return names;
  }

  // Always the LM head: the tied embedding or lm_head.weight (which load_weights requires of an untied model).
  Head checkpoint_head(const ModelConfig&, const io::TensorStore&) const override { return Head::Lm; }
  bool checkpoint_pooler(const io::TensorStore&) const override { return false; }
  Head new_head(const ModelConfig&) const override { return Head::Lm; }

  std::shared_ptr<NetworkImpl> make_network(const ModelConfig& c, Head, bool) const override { return std::make_shared<LlamaImpl>(c); }

  Ties ties(const ModelConfig& c, Head) const override {
    if (!c.tie_word_embeddings) return {};
    return {{"lm_head.weight", {"embed_tokens.weight", "tied LM head"}}};
  }

  std::string position_table() const override { return ""; }  // rotary: no table

  std::vector<SizedTensor> sized_tensors(const ModelConfig& c) const override {
    const SizedDim d{c.d_model, c.keys.d_model};
    const std::string last = "layers." + std::to_string(c.n_layer - 1) + ".";
    // q's and k's rows are heads × head_dim: the message names the keys with their own values, not the product
    const bool hd_given = json_given(c.raw, "head_dim");
    const std::string hd = " × head_dim " + std::to_string(c.head_dim()) +
                           (c.explicit_head_dim == 0 ? " (hidden_size " + std::to_string(c.d_model) + " / num_attention_heads " + std::to_string(c.n_head) + ")"
                            : hd_given               ? std::string()
                                                     : " (absent: " + display_name + "'s default)");
    // an absent num_key_value_heads is the type's default: shown as such, not as a value the file holds
    const bool kv_given = json_given(c.raw, "num_key_value_heads");
    const std::string kv_shown = kv_given ? "num_key_value_heads " + std::to_string(c.kv_heads())
                                 : c.raw.contains("num_key_value_heads")
                                     ? "num_key_value_heads null (one per query head: " + std::to_string(c.kv_heads()) + ")"
                                 : kind_ == Kind::Llama
                                     ? "num_key_value_heads absent (one per query head: " + std::to_string(c.kv_heads()) + ")"
                                     : "num_key_value_heads absent (" + display_name + "'s default: " + std::to_string(c.kv_heads()) + ")";
    const SizedDim q_rows{c.n_head * c.head_dim(), "num_attention_heads × head_dim", "num_attention_heads " + std::to_string(c.n_head) + hd};
    std::vector<SizedTensor> out = {
        {"embed_tokens.weight", "", {{c.vocab_size, c.keys.vocab_size}, d}, ""},
        {last + "self_attn.q_proj.weight", c.keys.n_layer, {q_rows, d}, ""},
        {last + "self_attn.k_proj.weight", c.keys.n_layer, {{c.kv_heads() * c.head_dim(), "num_key_value_heads × head_dim", kv_shown + hd}, d}, ""},
        {last + "mlp.gate_proj.weight", c.keys.n_layer, {{c.d_ff, c.keys.d_ff}, d}, ""}};
    if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", "", {{c.vocab_size, c.keys.vocab_size}, d}, "tie_word_embeddings"});
    // q's bias: asked for by attention_bias (Llama, Qwen3), always there in Qwen2 (its config has no key for it)
    if (c.qkv_bias)
      out.push_back({last + "self_attn.q_proj.bias", c.keys.n_layer, {q_rows}, kind_ == Kind::Qwen2 ? "" : "attention_bias",
                     kind_ == Kind::Qwen2 ? "Qwen2's q/k/v projections have biases" : ""});
    if (c.o_bias) out.push_back({last + "self_attn.o_proj.bias", c.keys.n_layer, {d}, "attention_bias"});
    return out;
  }

  bool is_embedding(const std::string& name) const override {
    const std::string n = starts_with(name, checkpoint_prefix) ? name.substr(checkpoint_prefix.size()) : name;
    return starts_with(n, "embed_tokens.");
  }

  // layers.<i>.self_attn.{q,k,v,o}_proj (and Qwen3's q_norm, k_norm: they shape q and k)
  bool is_attention_projection(const std::string& n) const override {
    return starts_with(n, "layers.") && n.find(".self_attn.") != std::string::npos;
  }

  // Linear stores (out, in): a head's query rows, its KV group's key and value rows, and the output projection's
  // columns that read it.
  std::vector<HeadSlice> head_slices(const AttentionShape& a, int64_t layer, int64_t head) const override {
    const int64_t hd = a.head_dim, group = head / (a.n_head / a.n_kv_head);
    const std::string p = "layers." + std::to_string(layer) + ".self_attn.";
    std::vector<HeadSlice> out = {{p + "q_proj.weight", 0, head * hd, hd}, {p + "k_proj.weight", 0, group * hd, hd},
                                  {p + "v_proj.weight", 0, group * hd, hd}, {p + "o_proj.weight", 1, head * hd, hd}};
    if (a.qkv_bias)  // o_proj's bias (attention_bias) is added once after the heads: no head's block
      for (const char* m : {"q_proj", "k_proj", "v_proj"}) out.push_back({p + m + ".bias", 0, (m[0] == 'q' ? head : group) * hd, hd});
    return out;
  }

  // The rotary frequencies some checkpoints carry per layer (recomputed from the config, written back unchanged).
  bool is_buffer(const std::string& name) const override {
    static const std::regex buffer(R"(layers\.\d+\.self_attn\.rotary_emb\.inv_freq)");
    return std::regex_match(name, buffer);
  }

  bool takes_prefix(const std::string& name) const override { return name != "lm_head.weight"; }

  std::vector<LoraTarget> lora_targets(torch::nn::Module& net) const override {
    auto* n = dynamic_cast<LlamaImpl*>(&net);
    MIMIC_CHECK(n, "LoRA: the network is not the ", display_name, " network its family makes");
    std::vector<LoraTarget> out;
    for (size_t i = 0; i < n->layers.size(); ++i) {
      auto& l = n->layers[i];
      const std::string p = "layers." + std::to_string(i) + ".self_attn.";
      out.push_back({p + "q_proj", &l.q_proj->weight, false, {""}});
      out.push_back({p + "k_proj", &l.k_proj->weight, false, {""}});
      out.push_back({p + "v_proj", &l.v_proj->weight, false, {""}});
      out.push_back({p + "o_proj", &l.o_proj->weight, false, {""}});
    }
    return out;
  }

 private:
  // Whether any layer attends through a sliding window: Mistral's every layer; Qwen2's and Qwen3's with
  // use_sliding_window, the layers from max_window_layers on (HF's default 28) or those layer_types names
  // "sliding_attention" — so a max_window_layers of at least the layer count windows none (it was refused: the tenth
  // probe of 2026-11-29). Llama has no window: HF's ignores use_sliding_window and sliding_window there, and so does
  // mimic (it capped the context: the Llama-family probe of 2026-12-01).
  bool windowed_layers(const nlohmann::json& j, const std::string& where, int64_t n_layer) const {
    if (kind_ == Kind::Mistral) return true;
    if (kind_ == Kind::Llama) return false;
    const bool asked = json_bool_or(j, "use_sliding_window", where, false);
    // read whether or not the window is used: a broken value is a broken config either way (the twelfth probe)
    const int64_t from = json_int_or(j, "max_window_layers", where, 28, 0);
    if (json_given(j, "layer_types")) {
      const auto& types = j["layer_types"];
      MIMIC_CHECK(types.is_array() && static_cast<int64_t>(types.size()) == n_layer, where, ": layer_types must list one type per layer (",
                  n_layer, "), got ", json_dump(types, -1).substr(0, 120));
      bool any = false;
      for (const auto& t : types) {
        MIMIC_CHECK(t == "full_attention" || t == "sliding_attention", where, ": layer_types holds ", json_dump(t, -1),
                    " (mimic reads full_attention and sliding_attention)");
        any = any || t == "sliding_attention";
      }
      return asked && any;
    }
    return asked && from < n_layer;
  }

  // The defaults of the types' HF config classes for an absent num_key_value_heads.
  int64_t default_kv_heads(int64_t n_head) const {
    switch (kind_) {
      case Kind::Llama: return n_head;
      case Kind::Mistral: return 8;
      case Kind::Qwen2:
      case Kind::Qwen3: return 32;
    }
    return n_head;
  }

  // The rotary settings, in either of HF's spellings: rope_theta and rope_scaling beside the other keys (transformers
  // 4), or one object rope_parameters {"rope_theta", "rope_type", "factor", ...} (transformers 5, which may leave
  // "rope_theta": null at the top). Read as 4's alone, a 5 config of Llama 3 lost its theta of 500000 and its llama3
  // scaling without an error. The object read is the one both versions read: a rope_scaling that says anything (4
  // reads nothing else, 5 takes it over rope_parameters), else rope_parameters (5). The theta is the top one (4), else
  // 10000 beside a rope_scaling (4) or the object's (5); a theta the two versions would read apart — inside the object
  // and different from the top one or 4's default — is refused, not read as one of them (the second Llama-family
  // probe). rope_parameters per layer type (models whose layer types rotate differently) is refused.
  static void read_rope(const nlohmann::json& j, const std::string& where, ModelConfig& c) {
    const bool has_scaling = json_given(j, "rope_scaling") && !(j["rope_scaling"].is_object() && j["rope_scaling"].empty());
    const bool has_params = !has_scaling && json_given(j, "rope_parameters");
    const std::string name = has_scaling ? "rope_scaling" : "rope_parameters";
    const nlohmann::json s = has_scaling ? j["rope_scaling"] : has_params ? j["rope_parameters"] : nlohmann::json::object();
    MIMIC_CHECK(s.is_object(), where, ": ", name, " must be an object or null, got ", json_dump(s, -1).substr(0, 120));
    if (has_params)
      for (const auto& [key, value] : s.items())
        MIMIC_CHECK(!value.is_object(), where, ": rope_parameters per layer type ('", key,
                    "': {...}) is not implemented (mimic reads one rope_parameters object for every layer)");
    const bool theta_top = json_given(j, "rope_theta"), theta_in = json_given(s, "rope_theta");
    MIMIC_CHECK(theta_top || theta_in || !j.contains("rope_theta"), where,
                ": rope_theta is null and neither rope_parameters nor rope_scaling gives it (a rotary base is needed; HF's default is 10000)");
    const bool default_theta = has_scaling && !j.contains("rope_theta");  // transformers 4's 10000 beside rope_scaling
    c.rope_theta = theta_top || default_theta ? json_double_or(j, "rope_theta", where, 10000.0)
                   : theta_in                 ? json_double(s, "rope_theta", where + " " + name)
                                              : 10000.0;
    if (theta_in && (theta_top || default_theta)) {
      const double inside = json_double(s, "rope_theta", where + " " + name);
      MIMIC_CHECK(inside == c.rope_theta, where, ": ", name, "'s rope_theta ", inside, " and ", theta_top ? "rope_theta " : "the default rope_theta ",
                  c.rope_theta, " disagree (transformers 4 and 5 would read different bases)");
    }
    MIMIC_CHECK(std::isfinite(c.rope_theta) && c.rope_theta > 1, where, ": rope_theta must be a number above 1, got ", c.rope_theta);
    // rotary embeddings on a part of each head (HF's partial_rotary_factor, as in Phi and some Qwen variants) are not
    // implemented: read as whole-head rotation they would compute another network (the tenth probe)
    for (const auto* o : {&j, &s})
      if (json_given(*o, "partial_rotary_factor")) {
        const double f = json_double(*o, "partial_rotary_factor", where);
        MIMIC_CHECK(f == 1.0, where, ": partial_rotary_factor ", f, ": mimic rotates whole heads only (partial_rotary_factor 1)");
      }
    if (has_scaling || has_params) read_rope_scaling(s, name, where, c);
  }

  // A rotary scaling object `s` (`name`: rope_scaling or rope_parameters): {"rope_type" (or "type"): "default" |
  // "linear" | "llama3", ...}; the other types change the frequencies in ways mimic does not implement, and are refused
  // by name.
  static void read_rope_scaling(const nlohmann::json& s, const std::string& name, const std::string& where, ModelConfig& c) {
    MIMIC_CHECK(s.is_object(), where, ": ", name, " must be an object or null, got ", json_dump(s, -1).substr(0, 120));
    // transformers 4 lets "type" override "rope_type", 5 the reverse: both given, they must name the same type (the
    // second Llama-family probe: {"rope_type": "default", "type": "linear"} ran unscaled)
    const bool has_rope_type = json_given(s, "rope_type"), has_type = json_given(s, "type");
    if (has_rope_type && has_type)
      MIMIC_CHECK(s["rope_type"] == s["type"], where, ": ", name, "'s rope_type ", json_dump(s["rope_type"], -1), " and type ",
                  json_dump(s["type"], -1), " disagree");
    const std::string key = has_rope_type ? "rope_type" : "type";  // neither: only the base is given, read as default
    // a factor without a type: HF refuses it (KeyError); read as default it would drop the factor (the tenth probe)
    const bool only_base = std::all_of(s.items().begin(), s.items().end(), [](const auto& kv) {
      return kv.key() == "rope_theta" || kv.key() == "partial_rotary_factor";
    });
    MIMIC_CHECK(only_base || has_rope_type || has_type, where, ": ", name, " ", json_dump(s, -1).substr(0, 160), " names no rope_type");
    const std::string in = where + ": " + name;  // "config.json: rope_scaling: missing key 'factor'"
    const std::string type = json_string_or(s, key, in, "default");
    if (type == "default") return;
    MIMIC_CHECK(type == "linear" || type == "llama3", where, ": ", name, " type '", type, "' is not implemented (mimic reads default, linear and llama3)");
    c.rope_scaling = type;
    c.rope_factor = json_double(s, "factor", in);
    MIMIC_CHECK(std::isfinite(c.rope_factor) && c.rope_factor >= 1, where, ": ", name, " factor must be at least 1, got ", c.rope_factor);
    if (type == "llama3") {
      c.rope_low_freq_factor = json_double(s, "low_freq_factor", in);
      c.rope_high_freq_factor = json_double(s, "high_freq_factor", in);
      // a whole number however written: HF's own configs write 8192, a config saved through a float field 8192.0
      const double original = json_double(s, "original_max_position_embeddings", in);
      MIMIC_CHECK(original >= 1 && original <= 1e9 && std::floor(original) == original, where, ": ", name,
                  " original_max_position_embeddings must be a whole number of positions, got ", json_dump(s["original_max_position_embeddings"], -1));
      c.rope_original_positions = static_cast<int64_t>(original);
      MIMIC_CHECK(c.rope_low_freq_factor > 0 && c.rope_high_freq_factor > c.rope_low_freq_factor, where, ": ", name,
                  " needs 0 < low_freq_factor < high_freq_factor, got ", c.rope_low_freq_factor, " and ", c.rope_high_freq_factor);
    }
  }

  Kind kind_;
  std::string arch_;  // the architectures' stem: "Llama" for LlamaForCausalLM and LlamaModel
};

}  // namespace

const Family& llama_family() {
  // Llama 3's 128,256-token vocabulary would make a small model mostly embedding (and its logits the cost of a step):
  // a fresh Llama trains with the Llama-2-style SentencePiece BPE of 32,000 tokens that Mistral ships
  static const LlamaFamily f(LlamaFamily::Kind::Llama, "llama", "Llama", "Llama", "mistral");
  return f;
}
const Family& mistral_family() {
  static const LlamaFamily f(LlamaFamily::Kind::Mistral, "mistral", "Mistral", "Mistral", "mistral");
  return f;
}
const Family& qwen2_family() {
  static const LlamaFamily f(LlamaFamily::Kind::Qwen2, "qwen2", "Qwen2", "Qwen2", "qwen3");  // Qwen's vocabulary (151,669)
  return f;
}
const Family& qwen3_family() {
  static const LlamaFamily f(LlamaFamily::Kind::Qwen3, "qwen3", "Qwen3", "Qwen3", "qwen3");
  return f;
}

}  // namespace mimic::models
