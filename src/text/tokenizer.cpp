#include "mimic/text/tokenizer.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "mimic/core/error.h"
#include "mimic/core/json_keys.h"
#include "mimic/io/atomic_file.h"
#include "mimic/text/gpt2_bpe.h"
#include "mimic/text/hf_tokenizer.h"
#include "mimic/text/wordpiece.h"

namespace mimic::text {

std::vector<int64_t> Tokenizer::encode_head(const std::string& text, size_t n) const {
  auto ids = encode(text, /*add_special_tokens=*/false);
  if (ids.size() > n) ids.resize(n);
  return ids;
}

std::vector<int64_t> Tokenizer::encode_document(const std::string& text) const {
  auto ids = document_start();
  const auto body = encode(text, /*add_special_tokens=*/false);
  ids.insert(ids.end(), body.begin(), body.end());
  return ids;
}

std::string Tokenizer::decode_after(const std::vector<int64_t>& before, const std::vector<int64_t>& ids) const {
  auto all = before;
  all.insert(all.end(), ids.begin(), ids.end());
  const std::string head = decode(before), whole = decode(all);
  return whole.size() >= head.size() && whole.compare(0, head.size(), head) == 0 ? whole.substr(head.size()) : decode(ids);
}

namespace {
// do_lower_case from an optional tokenizer_config.json (HF's default for BERT: true).
bool bert_lower_case(const std::filesystem::path& config_path) {
  if (!std::filesystem::exists(config_path)) return true;
  const nlohmann::json cfg = json_parse(io::read_text_file(config_path.string()), config_path.string());
  if (!cfg.is_object() || !cfg.contains("do_lower_case")) return true;
  MIMIC_CHECK(cfg["do_lower_case"].is_boolean(), config_path.string(), ": do_lower_case must be true or false");
  return cfg["do_lower_case"].get<bool>();
}

// Whether a parsed tokenizer.json holds a WordPiece model (a BERT folder's, read from vocab.txt beside it).
// (A "type" that is no string is HfTokenizer's to refuse by name: value("type", "") threw nlohmann's type_error on it,
// which the fuzzer found on 2026-12-07.)
bool wordpiece_json(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object() || !j["model"].contains("type")) return false;
  const auto& type = j["model"]["type"];
  return type.is_string() && type.get<std::string>() == "WordPiece";
}
}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& dir, const std::string& default_class, const std::string& why) {
  namespace fs = std::filesystem;
  const fs::path d(dir);
  MIMIC_CHECK(fs::is_directory(d), "tokenizer directory not found: ", dir);
  // A link to nothing (an HF cache snapshot whose blob is missing) would read as an absent file, and another
  // tokenizer of the folder would be taken without a word.
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt", "vocab.txt"}) {
    std::error_code ec;
    MIMIC_CHECK(!fs::is_symlink(d / name, ec) || fs::exists(d / name, ec), (d / name).string(), " is a link to nothing");
  }
  const bool vocab_json = fs::exists(d / "vocab.json"), merges = fs::exists(d / "merges.txt");
  // tokenizer.json first: it is what HF's fast tokenizers read, and a folder may hold vocab.json + merges.txt
  // beside it whose regex differs (Qwen2's). Its WordPiece models are read from vocab.txt instead.
  if (fs::exists(d / "tokenizer.json")) {
    // read and parsed once: the model's type decides, and HfTokenizer takes the parse
    const std::string path = (d / "tokenizer.json").string(), text = io::read_text_file(path);
    const nlohmann::json j = json_parse(text, path);
    // the loader decides which file holds a WordPiece model, so it says which file is missing (HfTokenizer reads BPE)
    MIMIC_CHECK(!wordpiece_json(j) || fs::exists(d / "vocab.txt"), path, ": model type 'WordPiece' is not supported (mimic reads BPE models "
                "from tokenizer.json; for BERT's WordPiece, put the model's vocab.txt beside it, which is read instead)");
    if (!wordpiece_json(j)) {
      auto beside = [&](const char* name) { return fs::exists(d / name) ? (d / name).string() : std::string(); };
      return std::make_unique<HfTokenizer>(path, text, j,
                                           HfTokenizerFolder{beside("tokenizer_config.json"), beside("special_tokens_map.json"), default_class, why});
    }
  }
  if (vocab_json && merges) return std::make_unique<Gpt2Bpe>((d / "vocab.json").string(), (d / "merges.txt").string());
  if (fs::exists(d / "vocab.txt"))
    return std::make_unique<WordPiece>((d / "vocab.txt").string(), bert_lower_case(d / "tokenizer_config.json"));
  MIMIC_CHECK(!vocab_json && !merges, "incomplete GPT-2 tokenizer in ", dir, ": ", vocab_json ? "merges.txt" : "vocab.json",
              " is missing");
  fail("no tokenizer in ", dir, " (expected tokenizer.json, vocab.json + merges.txt for GPT-2, or vocab.txt for BERT; the embedded models "
       "get theirs from tools/setup.sh)");
}

}  // namespace mimic::text
