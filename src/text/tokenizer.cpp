#include "text/tokenizer.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/atomic_file.h"
#include "text/gpt2_bpe.h"
#include "text/wordpiece.h"

namespace mimic::text {

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& dir) {
  namespace fs = std::filesystem;
  fs::path d(dir);
  MIMIC_CHECK(fs::is_directory(d), "tokenizer directory not found: ", dir);
  if (fs::exists(d / "vocab.json") && fs::exists(d / "merges.txt"))
    return std::make_unique<Gpt2Bpe>((d / "vocab.json").string(), (d / "merges.txt").string());
  if (fs::exists(d / "vocab.txt")) {
    bool lower = true;
    if (fs::exists(d / "tokenizer_config.json")) {
      try {
        auto cfg = nlohmann::json::parse(io::read_text_file((d / "tokenizer_config.json").string()));
        if (cfg.contains("do_lower_case") && cfg["do_lower_case"].is_boolean()) lower = cfg["do_lower_case"].get<bool>();
      } catch (const nlohmann::json::exception& e) {
        fail((d / "tokenizer_config.json").string(), ": malformed JSON: ", e.what());
      }
    }
    return std::make_unique<WordPiece>((d / "vocab.txt").string(), lower);
  }
  fail("no tokenizer in ", dir, " (expected vocab.json + merges.txt for GPT-2, or vocab.txt for BERT)");
}

}  // namespace mimic::text
