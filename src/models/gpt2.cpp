// GPT-2: the network and its family description.
#include "mimic/models/gpt2.h"

#include <torch/torch.h>

#include <cmath>
#include <regex>

#include "mimic/core/error.h"
#include "mimic/models/family.h"

namespace mimic::models {

// ------------------------------------------------------------------------------------------ network
Gpt2Impl::Gpt2Impl(const ModelConfig& c) : c_(c) {
  wte = register_module("wte", torch::nn::Embedding(c.vocab_size, c.d_model));
  wpe = register_module("wpe", torch::nn::Embedding(c.max_positions, c.d_model));
  torch::nn::init::normal_(wte->weight, 0.0, 0.02);
  torch::nn::init::normal_(wpe->weight, 0.0, 0.01);
  auto h = register_module("h", torch::nn::ModuleList());
  auto ln = [&](int64_t d) { return torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(c.ln_eps)); };
  for (int64_t i = 0; i < c.n_layer; ++i) {
    auto block = std::make_shared<torch::nn::Module>();
    auto attn = std::make_shared<torch::nn::Module>();
    auto mlp = std::make_shared<torch::nn::Module>();
    Layer l;
    l.ln_1 = block->register_module("ln_1", ln(c.d_model));
    l.c_attn = attn->register_module("c_attn", Conv1D(c.d_model, 3 * c.d_model));
    l.attn_proj = attn->register_module("c_proj", Conv1D(c.d_model, c.d_model));
    l.ln_2 = block->register_module("ln_2", ln(c.d_model));
    l.c_fc = mlp->register_module("c_fc", Conv1D(c.d_model, c.d_ff));
    l.mlp_proj = mlp->register_module("c_proj", Conv1D(c.d_ff, c.d_model));
    // GPT-2's scaled init of the residual projections
    torch::NoGradGuard ng;
    l.attn_proj->weight.normal_(0.0, 0.02 / std::sqrt(2.0 * c.n_layer));
    l.mlp_proj->weight.normal_(0.0, 0.02 / std::sqrt(2.0 * c.n_layer));
    block->register_module("attn", attn);
    block->register_module("mlp", mlp);
    h->push_back(block);
    layers.push_back(l);
  }
  ln_f = register_module("ln_f", ln(c.d_model));
  init_layers(c.n_layer);
}

ForwardOutputs Gpt2Impl::forward(const ForwardInputs& in) {
  const auto& ids = in.input_ids;
  check_ids(ids, c_.vocab_size);
  const int64_t b = ids.size(0), t = ids.size(1);
  // Positions 0..T-1 as HF's forward does by default (offset by what incremental decoding has seen);
  // padding (right-padded batches) is masked out of the keys by the attention mask.
  const int64_t offset = decoding_ ? decoding_->position() : 0;
  MIMIC_CHECK(offset + t <= c_.max_positions, "sequence of ", offset + t, " tokens exceeds the model's context of ", c_.max_positions);
  at::Tensor pad = in.attention_mask.defined() ? in.attention_mask.to(torch::kBool) : at::Tensor();
  const double p = is_training() ? c_.dropout : 0.0;
  // Dropout off (evaluation, decoding) is the identity: not called, so that a decoding step dispatches no
  // no-op operators.
  auto drop = [&](const at::Tensor& t) { return p > 0 ? dropout(t, p) : t; };
  at::Tensor x;
  if (decoding_) {
    // Positions offset..offset+T-1 of the table, broadcast over the batch: the rows wpe->forward would gather,
    // without building the index tensor every step (decoding has no backward, where the two would differ).
    x = drop(wte->forward(ids) + wpe->weight.narrow(0, offset, t));
  } else {
    auto positions = torch::arange(offset, offset + t, torch::dtype(torch::kLong).device(ids.device())).unsqueeze(0).expand({b, t});
    x = drop(wte->forward(ids) + wpe->forward(positions));
  }
  for (int64_t i = 0; i < c_.n_layer; ++i) {
    auto& l = layers[static_cast<size_t>(i)];
    auto qkv = l.c_attn->forward(l.ln_1->forward(x)).split(c_.d_model, -1);
    double scale = c_.scale_attn_weights ? 1.0 / std::sqrt(static_cast<double>(c_.head_dim())) : 1.0;
    if (c_.scale_attn_by_layer_idx) scale /= static_cast<double>(i + 1);
    x = x + drop(l.attn_proj->forward(attend(i, qkv[0], qkv[1], qkv[2], /*causal=*/true, pad, scale)));
    x = x + drop(l.mlp_proj->forward(activate(l.c_fc->forward(l.ln_2->forward(x)), c_.activation)));
  }
  ForwardOutputs out;
  out.last_hidden_state = ln_f->forward(x);
  if (!in.lm_head && !decoding_) return out;
  auto h = in.logits_positions.defined() ? out.last_hidden_state.index({in.logits_positions}) : out.last_hidden_state;
  // decoding: one row per sequence (lm_logits' matrix-vector product at batch 1); elsewhere the reference, so
  // that training and evaluation are bit for bit what they were
  out.logits = decoding_ ? lm_logits(h, wte->weight) : lm_logits_reference(h, wte->weight);
  return out;
}

// ------------------------------------------------------------------------------------------ family
namespace {

class Gpt2Family : public Family {
 public:
  Gpt2Family() {
    model_type = "gpt2";
    display_name = "GPT-2";
    causal = true;
    checkpoint_prefix = "transformer.";
    new_prefix = "";
    context_key = "n_positions";
    finetune_preset = "gpt2";
    tokenizer_asset = "gpt2";
    hf_tokenizer_class = "GPT2TokenizerFast";
    pretrain_architecture = "GPT2LMHeadModel";
  }

  void read_config(const nlohmann::json& j, const std::string& where, ModelConfig& c) const override {
    // n_ctx is the older name: read where n_positions is not given; a config with neither is told n_positions
    // (json_given, json_has: noted as read, so that a misspelling of either is told from a key mimic does not read)
    const bool n_positions = json_given(j, "n_positions") || !json_has(j, "n_ctx");
    c.keys = {"n_layer", "n_head", "", "n_embd", json_given(j, "n_inner") ? "n_inner" : "n_embd",
              "vocab_size", n_positions ? "n_positions" : "n_ctx", "layer_norm_epsilon", "resid_pdrop"};
    c.vocab_size = json_int(j, c.keys.vocab_size, where);
    c.max_positions = json_int(j, c.keys.max_positions, where);
    c.d_model = json_int(j, c.keys.d_model, where);
    c.n_layer = json_int(j, c.keys.n_layer, where);
    c.n_head = json_int(j, c.keys.n_head, where);
    c.d_ff = json_int_or(j, "n_inner", where, 4 * c.d_model);
    c.ln_eps = json_double_or(j, c.keys.ln_eps, where, 1e-5);
    c.activation = config_activation(json_string_or(j, "activation_function", where, "gelu_new"), where, "activation_function");
    c.scale_attn_weights = json_bool_or(j, "scale_attn_weights", where, true);
    c.scale_attn_by_layer_idx = json_bool_or(j, "scale_attn_by_inverse_layer_idx", where, false);
    c.dropout = json_double_or(j, c.keys.dropout, where, 0.1);
    // HF's GPT2Config maps these names onto its own (attribute_map), and the alias wins where both are given: a config
    // with "n_head": 4 and "num_attention_heads": 2 ran here with 4 heads and loads in HF with 2 — the same tensors, another
    // network (the fifteenth probe of 2026-11-30)
    for (const auto& [alias, own] : {std::pair{"hidden_size", c.keys.d_model}, std::pair{"num_attention_heads", c.keys.n_head},
                                     std::pair{"num_hidden_layers", c.keys.n_layer}, std::pair{"max_position_embeddings", c.keys.max_positions}}) {
      if (!j.contains(alias)) continue;
      // null or 4.0 too: HF sets its own key to None or a float, and the saved model did not load there (the sixteenth probe)
      MIMIC_CHECK(j[alias].is_number_integer() && j[alias] == j[own], where, ": ", alias, " ", json_dump(j[alias], -1),
                  j[alias].is_number_integer() ? " differs from " : " is no integer like ", own, " ", json_dump(j[own], -1),
                  " (HF reads ", alias, " as GPT-2's ", own, "): give one value, or leave ", alias, " out");
    }
  }

  std::vector<std::pair<std::string, Head>> architectures() const override {
    return {{"GPT2LMHeadModel", Head::Lm}, {"GPT2Model", Head::None}};
  }

  // Always the LM head: it is the tied token embedding, present in every checkpoint.
  Head checkpoint_head(const ModelConfig&, const io::TensorStore&) const override { return Head::Lm; }
  bool checkpoint_pooler(const io::TensorStore&) const override { return false; }
  Head new_head(const ModelConfig&) const override { return Head::Lm; }

  std::shared_ptr<NetworkImpl> make_network(const ModelConfig& c, Head, bool) const override { return std::make_shared<Gpt2Impl>(c); }

  Ties ties(const ModelConfig&, Head) const override { return {{"lm_head.weight", {"wte.weight", "tied LM head"}}}; }

  std::string position_table() const override { return "wpe.weight"; }

  std::vector<SizedTensor> sized_tensors(const ModelConfig& c) const override {
    const SizedDim d{c.d_model, c.keys.d_model};
    const std::string last = "h." + std::to_string(c.n_layer - 1) + ".";
    return {{"wte.weight", "", {{c.vocab_size, c.keys.vocab_size}, d}, ""},
            {"wpe.weight", "", {{c.max_positions, c.keys.max_positions}, d}, ""},
            {last + "attn.c_attn.weight", c.keys.n_layer, {d, {3 * c.d_model, c.keys.d_model}}, ""},
            {last + "mlp.c_fc.weight", c.keys.n_layer, {d, {c.d_ff, c.keys.d_ff}}, ""}};
  }

  bool is_embedding(const std::string& name) const override {
    const std::string n = name.rfind(checkpoint_prefix, 0) == 0 ? name.substr(checkpoint_prefix.size()) : name;
    return n.rfind("wte.", 0) == 0 || n.rfind("wpe.", 0) == 0;
  }

  // h.<i>.attn.c_attn / c_proj
  bool is_attention_projection(const std::string& n) const override {
    return n.rfind("h.", 0) == 0 && n.find(".attn.") != std::string::npos;
  }

  // Conv1D stores (in, out): c_attn's output columns are [q | k | v], each heads side by side; c_proj's input rows
  // are the heads' outputs side by side. c_proj's bias is the layer's, not a head's.
  std::vector<HeadSlice> head_slices(const AttentionShape& a, int64_t layer, int64_t head) const override {
    const int64_t d = a.d_model, hd = a.head_dim;
    const std::string p = "h." + std::to_string(layer) + ".attn.";
    std::vector<HeadSlice> out;
    for (int64_t part = 0; part < 3; ++part) {
      out.push_back({p + "c_attn.weight", 1, part * d + head * hd, hd});
      out.push_back({p + "c_attn.bias", 0, part * d + head * hd, hd});
    }
    out.push_back({p + "c_proj.weight", 0, head * hd, hd});
    return out;
  }

  // The causal-mask buffers older checkpoints carry.
  bool is_buffer(const std::string& name) const override {
    static const std::regex buffer(R"(h\.\d+\.attn\.(bias|masked_bias))");
    return std::regex_match(name, buffer);
  }

  bool takes_prefix(const std::string& name) const override { return name != "lm_head.weight"; }

  std::vector<LoraTarget> lora_targets(torch::nn::Module& net) const override {
    auto* g = dynamic_cast<Gpt2Impl*>(&net);
    MIMIC_CHECK(g, "LoRA: the network is not the GPT-2 network its family makes");
    std::vector<LoraTarget> out;
    for (size_t i = 0; i < g->layers.size(); ++i) {
      auto& l = g->layers[i];
      const std::string p = "h." + std::to_string(i) + ".attn.";
      out.push_back({p + "c_attn", &l.c_attn->weight, true, {"q", "k", "v"}});
      out.push_back({p + "c_proj", &l.attn_proj->weight, true, {""}});
    }
    return out;
  }
};

}  // namespace

const Family& gpt2_family() {
  static const Gpt2Family f;
  return f;
}

}  // namespace mimic::models
