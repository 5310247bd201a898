// BERT: the network with its heads, and its family description.
#include "mimic/models/bert.h"

#include <torch/torch.h>

#include <cmath>

#include "mimic/core/error.h"
#include "mimic/io/tensor_store.h"
#include "mimic/models/family.h"

namespace mimic::models {

// ------------------------------------------------------------------------------------------ network
BertImpl::BertImpl(const ModelConfig& c, Head head, bool with_pooler) : c_(c), head_(head) {
  auto ln = [&](int64_t d) { return torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(c.ln_eps)); };
  auto linear = [&](int64_t i, int64_t o) {
    torch::nn::Linear l(i, o);
    torch::NoGradGuard ng;
    l->weight.normal_(0.0, 0.02);
    l->bias.zero_();
    return l;
  };
  auto emb = std::make_shared<torch::nn::Module>();
  word = emb->register_module("word_embeddings", torch::nn::Embedding(c.vocab_size, c.d_model));
  position = emb->register_module("position_embeddings", torch::nn::Embedding(c.max_positions, c.d_model));
  token_type = emb->register_module("token_type_embeddings", torch::nn::Embedding(c.type_vocab_size, c.d_model));
  emb_ln = emb->register_module("LayerNorm", ln(c.d_model));
  for (auto* e : {&word, &position, &token_type}) torch::nn::init::normal_((*e)->weight, 0.0, 0.02);
  register_module("embeddings", emb);
  auto encoder = std::make_shared<torch::nn::Module>();
  auto list = encoder->register_module("layer", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.n_layer; ++i) {
    auto layer = std::make_shared<torch::nn::Module>();
    auto attention = std::make_shared<torch::nn::Module>();
    auto self = std::make_shared<torch::nn::Module>();
    auto attn_output = std::make_shared<torch::nn::Module>();
    auto intermediate = std::make_shared<torch::nn::Module>();
    auto output = std::make_shared<torch::nn::Module>();
    Layer l;
    l.query = self->register_module("query", linear(c.d_model, c.d_model));
    l.key = self->register_module("key", linear(c.d_model, c.d_model));
    l.value = self->register_module("value", linear(c.d_model, c.d_model));
    l.attn_out = attn_output->register_module("dense", linear(c.d_model, c.d_model));
    l.attn_ln = attn_output->register_module("LayerNorm", ln(c.d_model));
    l.intermediate = intermediate->register_module("dense", linear(c.d_model, c.d_ff));
    l.out = output->register_module("dense", linear(c.d_ff, c.d_model));
    l.out_ln = output->register_module("LayerNorm", ln(c.d_model));
    attention->register_module("self", self);
    attention->register_module("output", attn_output);
    layer->register_module("attention", attention);
    layer->register_module("intermediate", intermediate);
    layer->register_module("output", output);
    list->push_back(layer);
    layers.push_back(l);
  }
  register_module("encoder", encoder);
  if (with_pooler || head == Head::Cls || head == Head::Pretraining) {
    auto p = std::make_shared<torch::nn::Module>();
    pooler = p->register_module("dense", linear(c.d_model, c.d_model));
    register_module("pooler", p);
  }
  if (head == Head::Mlm || head == Head::Pretraining) {
    auto cls = std::make_shared<torch::nn::Module>();
    auto predictions = std::make_shared<torch::nn::Module>();
    auto transform = std::make_shared<torch::nn::Module>();
    mlm_dense = transform->register_module("dense", linear(c.d_model, c.d_model));
    mlm_ln = transform->register_module("LayerNorm", ln(c.d_model));
    predictions->register_module("transform", transform);
    mlm_bias = predictions->register_parameter("bias", torch::zeros({c.vocab_size}));
    cls->register_module("predictions", predictions);
    if (head == Head::Pretraining) {
      nsp = cls->register_module("seq_relationship", linear(c.d_model, 2));
    }
    register_module("cls", cls);
  }
  if (head == Head::Cls) classifier = register_module("classifier", linear(c.d_model, c.num_labels));
  init_layers(c.n_layer);
}

ForwardOutputs BertImpl::forward(const ForwardInputs& in) {
  const auto& ids = in.input_ids;
  check_ids(ids, c_.vocab_size);
  const int64_t b = ids.size(0), t = ids.size(1);
  MIMIC_CHECK(t <= c_.max_positions, "sequence of ", t, " tokens exceeds the model's context of ", c_.max_positions);
  auto types = in.token_type_ids.defined() ? in.token_type_ids : torch::zeros({b, t}, torch::dtype(torch::kLong).device(in.input_ids.device()));
  auto pos = torch::arange(t, torch::dtype(torch::kLong).device(in.input_ids.device())).unsqueeze(0).expand({b, t});
  const double p = is_training() ? c_.dropout : 0.0;
  auto drop = [&](const at::Tensor& t) { return p > 0 ? dropout(t, p) : t; };
  auto x = drop(emb_ln->forward(word->forward(ids) + position->forward(pos) + token_type->forward(types)));
  at::Tensor pad = in.attention_mask.defined() ? in.attention_mask.to(torch::kBool) : at::Tensor();
  const double scale = 1.0 / std::sqrt(static_cast<double>(c_.head_dim()));
  for (int64_t i = 0; i < c_.n_layer; ++i) {
    auto& l = layers[static_cast<size_t>(i)];
    auto a = attend(i, l.query->forward(x), l.key->forward(x), l.value->forward(x), /*causal=*/false, pad, scale);
    x = l.attn_ln->forward(x + drop(l.attn_out->forward(a)));
    x = l.out_ln->forward(x + drop(l.out->forward(activate(l.intermediate->forward(x), c_.activation))));
  }
  ForwardOutputs out;
  out.last_hidden_state = x;
  if (!pooler.is_empty()) out.pooled = torch::tanh(pooler->forward(x.select(1, 0)));
  if (head_ == Head::Mlm || head_ == Head::Pretraining) {
    auto h = in.logits_positions.defined() ? x.index({in.logits_positions}) : x;
    // the layer norm in its weights' type: under bf16 autocast the dense layer's output is bf16, which CUDA's
    // autocast widens for layer_norm and LibTorch 1.13's CPU autocast does not (it refuses the mix)
    auto hdn = mlm_ln->forward(activate(mlm_dense->forward(h), c_.activation).to(mlm_ln->weight.scalar_type()));
    out.logits = torch::matmul(hdn, word->weight.t()) + mlm_bias;
  } else if (head_ == Head::Cls) {
    out.logits = classifier->forward(out.pooled);
  }
  return out;
}

// ------------------------------------------------------------------------------------------ family
namespace {

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

class BertFamily : public Family {
 public:
  BertFamily() {
    model_type = "bert";
    display_name = "BERT";
    causal = false;
    cls_sep = true;
    classifier = {"BertForSequenceClassification", {"pooler.", "classifier."}, {"cls."}, "embeddings.word_embeddings.weight",
                  "classifier.weight"};
    checkpoint_prefix = "bert.";
    new_prefix = "bert.";
    context_key = "max_position_embeddings";
    finetune_preset = "bert";
    tokenizer_asset = "bert-base-uncased";
    hf_tokenizer_class = "BertTokenizerFast";
    pretrain_architecture = "BertForMaskedLM";
  }

  void read_config(const nlohmann::json& j, const std::string& where, ModelConfig& c) const override {
    c.keys = {"num_hidden_layers", "num_attention_heads", "", "hidden_size", "intermediate_size", "vocab_size",
              "max_position_embeddings", "layer_norm_eps", "hidden_dropout_prob"};
    c.vocab_size = json_int(j, c.keys.vocab_size, where);
    c.d_model = json_int(j, c.keys.d_model, where);
    c.n_layer = json_int(j, c.keys.n_layer, where);
    c.n_head = json_int(j, c.keys.n_head, where);
    c.d_ff = json_int(j, c.keys.d_ff, where);
    c.max_positions = json_int(j, c.keys.max_positions, where);
    c.type_vocab_size = json_int_or(j, "type_vocab_size", where, 2);
    c.ln_eps = json_double_or(j, c.keys.ln_eps, where, 1e-12);
    c.activation = config_activation(json_string_or(j, "hidden_act", where, "gelu"), where, "hidden_act");
    c.dropout = json_double_or(j, c.keys.dropout, where, 0.1);
    std::string pos = json_string_or(j, "position_embedding_type", where, "absolute");
    MIMIC_CHECK(pos == "absolute", where, ": unsupported position_embedding_type '", pos, "' (only absolute)");
    // id2label, when given, decides the number of labels, as HF reads it (it warns and overwrites num_labels): a
    // num_labels beside a map of another size was refused as the classifier's shape (the eleventh probe)
    c.num_labels = json_int_or(j, "num_labels", where, 2);
    if (j.contains("id2label") && j["id2label"].is_object() && !j["id2label"].empty()) c.num_labels = static_cast<int64_t>(j["id2label"].size());
  }

  std::vector<std::pair<std::string, Head>> architectures() const override {
    return {{"BertModel", Head::None},
            {"BertForMaskedLM", Head::Mlm},
            {"BertForPreTraining", Head::Pretraining},
            {"BertForSequenceClassification", Head::Cls}};
  }

  // config.json's head when it names one, else decided by which tensors the file has.
  Head checkpoint_head(const ModelConfig& c, const io::TensorStore& f) const override {
    bool mlm = false, nsp = false, cls = false;
    for (const auto& n : f.names()) {
      mlm |= starts_with(n, "cls.predictions.");
      nsp |= starts_with(n, "cls.seq_relationship.");
      cls |= starts_with(n, "classifier.");
    }
    Head h = c.head_from_config ? c.head : (cls ? Head::Cls : mlm ? Head::Mlm : Head::None);
    // HF's bert-base-uncased says BertForMaskedLM but ships the pre-training heads: keep them.
    if (h == Head::Mlm && nsp) h = Head::Pretraining;
    return h;
  }

  bool checkpoint_pooler(const io::TensorStore& f) const override {
    for (const auto& n : f.names())
      if (n.find("pooler.dense.") != std::string::npos) return true;
    return false;
  }

  Head new_head(const ModelConfig& c) const override { return c.head; }

  std::shared_ptr<NetworkImpl> make_network(const ModelConfig& c, Head head, bool pooler) const override {
    return std::make_shared<BertImpl>(c, head, pooler);
  }

  Ties ties(const ModelConfig&, Head head) const override {
    if (head != Head::Mlm && head != Head::Pretraining) return {};
    return {{"cls.predictions.decoder.weight", {"embeddings.word_embeddings.weight", "tied MLM decoder"}},
            {"cls.predictions.decoder.bias", {"cls.predictions.bias", "MLM decoder bias"}}};
  }

  // The "embeddings." group: word, position and token-type embeddings, their LayerNorm, position_ids.
  bool is_embedding(const std::string& name) const override { return name.find("embeddings.") != std::string::npos; }
  std::string position_table() const override { return "embeddings.position_embeddings.weight"; }

  std::vector<SizedTensor> sized_tensors(const ModelConfig& c) const override {
    const SizedDim d{c.d_model, c.keys.d_model};
    const std::string last = "encoder.layer." + std::to_string(c.n_layer - 1) + ".";
    return {{"embeddings.word_embeddings.weight", "", {{c.vocab_size, c.keys.vocab_size}, d}, ""},
            {"embeddings.position_embeddings.weight", "", {{c.max_positions, c.keys.max_positions}, d}, ""},
            {"embeddings.token_type_embeddings.weight", "", {{c.type_vocab_size, "type_vocab_size"}, d}, ""},
            {last + "attention.self.query.weight", c.keys.n_layer, {d, d}, ""},
            {last + "intermediate.dense.weight", c.keys.n_layer, {{c.d_ff, c.keys.d_ff}, d}, ""}};
  }

  // encoder.layer.<i>.attention.self.{query,key,value} and attention.output.dense
  bool is_attention_projection(const std::string& n) const override {
    return n.find(".attention.self.") != std::string::npos || n.find(".attention.output.dense.") != std::string::npos;
  }

  // Linear stores (out, in): the query, key and value rows of a head, and the output projection's columns that read
  // it. The output projection's bias is the layer's, not a head's.
  std::vector<HeadSlice> head_slices(const AttentionShape& a, int64_t layer, int64_t head) const override {
    const int64_t hd = a.head_dim;
    const std::string p = "encoder.layer." + std::to_string(layer) + ".attention.";
    std::vector<HeadSlice> out;
    for (const char* m : {"query", "key", "value"}) {
      out.push_back({p + "self." + m + ".weight", 0, head * hd, hd});
      out.push_back({p + "self." + m + ".bias", 0, head * hd, hd});
    }
    out.push_back({p + "output.dense.weight", 1, head * hd, hd});
    return out;
  }

  bool is_buffer(const std::string& name) const override { return name == "embeddings.position_ids"; }

  // The task heads (cls., classifier.) are never prefixed.
  bool takes_prefix(const std::string& name) const override {
    return starts_with(name, "embeddings.") || starts_with(name, "encoder.") || starts_with(name, "pooler.");
  }

  std::vector<LoraTarget> lora_targets(torch::nn::Module& net) const override {
    auto* b = dynamic_cast<BertImpl*>(&net);
    MIMIC_CHECK(b, "LoRA: the network is not the BERT network its family makes");
    std::vector<LoraTarget> out;
    for (size_t i = 0; i < b->layers.size(); ++i) {
      auto& l = b->layers[i];
      const std::string p = "encoder.layer." + std::to_string(i) + ".attention.";
      out.push_back({p + "self.query", &l.query->weight, false, {""}});
      out.push_back({p + "self.key", &l.key->weight, false, {""}});
      out.push_back({p + "self.value", &l.value->weight, false, {""}});
      out.push_back({p + "output.dense", &l.attn_out->weight, false, {""}});
    }
    return out;
  }
};

}  // namespace

const Family& bert_family() {
  static const BertFamily f;
  return f;
}

}  // namespace mimic::models
