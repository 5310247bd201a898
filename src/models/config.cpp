#include "models/config.h"

#include "core/error.h"
#include "io/atomic_file.h"

namespace mimic::models {

const char* head_name(Head h) {
  switch (h) {
    case Head::None: return "none";
    case Head::Lm: return "lm";
    case Head::Mlm: return "mlm";
    case Head::Cls: return "cls";
    case Head::Pretraining: return "pretraining";
  }
  return "?";
}

namespace {
int64_t get_int(const nlohmann::json& j, const std::string& key, const std::string& where, int64_t min = 1) {
  MIMIC_CHECK(j.contains(key), where, ": missing key '", key, "'");
  MIMIC_CHECK(j[key].is_number_integer(), where, ": key '", key, "' must be an integer, got ", j[key].dump());
  int64_t v = j[key].get<int64_t>();
  MIMIC_CHECK(v >= min, where, ": key '", key, "' must be at least ", min, ", got ", v);
  return v;
}
int64_t get_int_or(const nlohmann::json& j, const std::string& key, const std::string& where, int64_t fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  return get_int(j, key, where);
}
double get_double_or(const nlohmann::json& j, const std::string& key, const std::string& where, double fallback) {
  if (!j.contains(key)) return fallback;
  MIMIC_CHECK(j[key].is_number(), where, ": key '", key, "' must be a number");
  return j[key].get<double>();
}
Activation activation(const std::string& name, const std::string& where, const std::string& key) {
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") return Activation::GeluTanh;
  if (name == "gelu") return Activation::GeluExact;
  if (name == "relu") return Activation::Relu;
  fail(where, ": unsupported ", key, " '", name, "' (supported: gelu_new, gelu, relu)");
}
}  // namespace

ModelConfig parse_config(const nlohmann::json& j, const std::string& where) {
  MIMIC_CHECK(j.is_object(), where, ": not a JSON object");
  MIMIC_CHECK(j.contains("model_type") && j["model_type"].is_string(), where, ": missing key 'model_type'");
  ModelConfig c;
  c.raw = j;
  const std::string type = j["model_type"].get<std::string>();
  if (type == "gpt2") {
    c.arch = Arch::Gpt2;
    c.vocab_size = get_int(j, "vocab_size", where);
    c.max_positions = j.contains("n_positions") ? get_int(j, "n_positions", where) : get_int(j, "n_ctx", where);
    c.d_model = get_int(j, "n_embd", where);
    c.n_layer = get_int(j, "n_layer", where);
    c.n_head = get_int(j, "n_head", where);
    c.d_ff = get_int_or(j, "n_inner", where, 4 * c.d_model);
    c.ln_eps = get_double_or(j, "layer_norm_epsilon", where, 1e-5);
    c.activation = activation(j.value("activation_function", std::string("gelu_new")), where, "activation_function");
    c.scale_attn_weights = j.value("scale_attn_weights", true);
    c.scale_attn_by_layer_idx = j.value("scale_attn_by_inverse_layer_idx", false);
    c.dropout = get_double_or(j, "resid_pdrop", where, 0.1);
  } else if (type == "bert") {
    c.arch = Arch::Bert;
    c.vocab_size = get_int(j, "vocab_size", where);
    c.d_model = get_int(j, "hidden_size", where);
    c.n_layer = get_int(j, "num_hidden_layers", where);
    c.n_head = get_int(j, "num_attention_heads", where);
    c.d_ff = get_int(j, "intermediate_size", where);
    c.max_positions = get_int(j, "max_position_embeddings", where);
    c.type_vocab_size = get_int_or(j, "type_vocab_size", where, 2);
    c.ln_eps = get_double_or(j, "layer_norm_eps", where, 1e-12);
    c.activation = activation(j.value("hidden_act", std::string("gelu")), where, "hidden_act");
    c.dropout = get_double_or(j, "hidden_dropout_prob", where, 0.1);
    std::string pos = j.value("position_embedding_type", std::string("absolute"));
    MIMIC_CHECK(pos == "absolute", where, ": unsupported position_embedding_type '", pos, "' (only absolute)");
    if (j.contains("id2label") && j["id2label"].is_object()) c.num_labels = static_cast<int64_t>(j["id2label"].size());
    c.num_labels = get_int_or(j, "num_labels", where, c.num_labels > 0 ? c.num_labels : 2);
  } else {
    fail(where, ": unsupported model_type '", type, "' (mimic reads gpt2 and bert)");
  }
  MIMIC_CHECK(c.d_model % c.n_head == 0, where, ": hidden size ", c.d_model, " is not divisible by the number of heads ", c.n_head);
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty()) {
    std::string a = j["architectures"][0].is_string() ? j["architectures"][0].get<std::string>() : "";
    c.head_from_config = true;
    if (a == "GPT2LMHeadModel") c.head = Head::Lm;
    else if (a == "GPT2Model" || a == "BertModel") c.head = Head::None;
    else if (a == "BertForMaskedLM") c.head = Head::Mlm;
    else if (a == "BertForPreTraining") c.head = Head::Pretraining;
    else if (a == "BertForSequenceClassification") c.head = Head::Cls;
    else c.head_from_config = false;  // unknown architecture name: decide by the weights
  }
  return c;
}

ModelConfig load_config(const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(io::read_text_file(path));
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": malformed JSON: ", e.what());
  }
  return parse_config(j, path);
}

}  // namespace mimic::models
