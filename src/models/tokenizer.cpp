#include "mimic/models/tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "mimic/core/error.h"
#include "mimic/core/json_keys.h"
#include "mimic/io/atomic_file.h"
#include "mimic/models/family.h"

namespace mimic::models {

std::unique_ptr<text::Tokenizer> load_tokenizer(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path config = fs::path(dir) / "config.json";
  std::string cls, why;
  // a tokenizer folder without a model (an asset, a pretrain's tokenizer) has no config.json: no class beyond its own
  std::error_code ec;
  if (fs::is_regular_file(config, ec)) {
    const std::string where = config.string();
    const nlohmann::json j = json_parse(io::read_text_file(where), where);
    if (j.is_object()) {
      cls = json_string_or(j, "tokenizer_class", where, "");
      if (!cls.empty()) {
        why = "config.json's tokenizer_class";
      } else if (const Family* f = find_family(json_string_or(j, "model_type", where, ""))) {
        cls = f->hf_tokenizer_class;
        why = "AutoTokenizer's class for config.json's model_type " + f->model_type;
      }
    }
  }
  return text::load_tokenizer(dir, cls, why);
}

std::unique_ptr<text::Tokenizer> try_load_tokenizer(const std::string& dir, std::string& why) {
  try {
    return load_tokenizer(dir);
  } catch (const Error& e) {
    why = e.what();
    return nullptr;
  }
}

std::vector<int64_t> end_of_text_ids(const std::string& dir, const text::Tokenizer& tok, int64_t vocab_size) {
  namespace fs = std::filesystem;
  std::vector<int64_t> ids;
  auto add = [&](int64_t id) {
    if (id >= 0 && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  // generation_config.json's, where it names any, else config.json's (HF's GenerationConfig.from_model_config)
  for (const char* name : {"generation_config.json", "config.json"}) {
    const fs::path file = fs::path(dir) / name;
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) continue;
    const std::string where = file.string();
    const nlohmann::json j = json_parse(io::read_text_file(where), where);
    MIMIC_CHECK(j.is_object(), where, " must be a JSON object");
    if (!j.contains("eos_token_id") || j["eos_token_id"].is_null()) continue;
    const auto& e = j["eos_token_id"];
    for (const auto& id : e.is_array() ? e : nlohmann::json::array({e}))
      MIMIC_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < vocab_size, where, ": eos_token_id ", e.dump(),
                  " must be a token id of the model (0 to ", vocab_size - 1, ") or a list of them");
    for (const auto& id : e.is_array() ? e : nlohmann::json::array({e})) add(id.get<int64_t>());
    break;
  }
  add(tok.eos_id());
  return ids;
}

}  // namespace mimic::models
