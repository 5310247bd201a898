#include "mimic/models/tokenizer.h"

#include <filesystem>
#include <nlohmann/json.hpp>

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

}  // namespace mimic::models
