#include "mimic/models/config.h"

#include "mimic/core/error.h"
#include "mimic/core/json_keys.h"
#include "mimic/io/atomic_file.h"
#include "mimic/models/family.h"

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

Activation config_activation(const std::string& name, const std::string& where, const std::string& key) {
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") return Activation::GeluTanh;
  if (name == "gelu") return Activation::GeluExact;
  if (name == "relu") return Activation::Relu;
  fail(where, ": unsupported ", key, " '", name, "' (supported: gelu_new, gelu, relu)");
}

ModelConfig parse_config(const nlohmann::json& j, const std::string& where) {
  MIMIC_CHECK(j.is_object(), where, ": not a JSON object");
  MIMIC_CHECK(j.contains("model_type") && j["model_type"].is_string(), where, ": missing key 'model_type'");
  ModelConfig c;
  c.raw = j;
  const std::string type = j["model_type"].get<std::string>();
  c.family = find_family(type);
  MIMIC_CHECK(c.family, where, ": unsupported model_type '", type, "' (mimic reads ", family_names(), ")");
  // The families read their keys with the config_* readers, which name a key of the wrong type; this catch is
  // the backstop for any other JSON access, so a config of the wrong shape is never more than a refused file.
  try {
    c.family->read_config(j, where, c);
  } catch (const nlohmann::json::exception& e) {
    fail(where, ": a key of the ", type, " config has the wrong type (", e.what(), ")");
  }
  MIMIC_CHECK(c.d_model % c.n_head == 0, where, ": hidden size ", c.d_model, " is not divisible by the number of heads ", c.n_head);
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty()) {
    std::string a = j["architectures"][0].is_string() ? j["architectures"][0].get<std::string>() : "";
    // Any family's architecture names are recognised (a mismatched one is decided as before the registry);
    // an unknown name leaves the head to be decided by the weights.
    c.head_from_config = false;
    for (const Family* f : families())
      if (f->head_of_architecture(a, &c.head)) {
        c.head_from_config = true;
        break;
      }
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
