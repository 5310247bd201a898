// Text input (`record --data FILE` and the corpora): the input is checked for UTF-8 as record does, cleaned as
// load_corpus does, and tokenized by the embedded models' tokenizers (gpt2-mini's byte-level BPE and bert-mini's
// WordPiece), then decoded again.
#include <memory>

#include "fuzz_util.h"
#include "mimic/data/corpus.h"
#include "mimic/io/atomic_file.h"
#include "mimic/text/tokenizer.h"

namespace {
struct Tokenizers {
  std::unique_ptr<mimic::text::Tokenizer> gpt2 = mimic::text::load_tokenizer(mimic::fuzz::source_dir() + "/examples/models/gpt2-mini");
  std::unique_ptr<mimic::text::Tokenizer> bert = mimic::text::load_tokenizer(mimic::fuzz::source_dir() + "/examples/models/bert-mini");
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Tokenizers toks;
  const auto path = mimic::fuzz::write_file("text.txt", data, size);
  MIMIC_FUZZ_EXPECT_ERRORS({
    const std::string raw = mimic::io::read_text_file(path);
    if (!mimic::data::is_valid_utf8(raw)) return 0;  // record refuses such a file here
    const std::string text = mimic::data::clean_text(raw);
    for (const auto* tok : {toks.gpt2.get(), toks.bert.get()}) {
      tok->decode(tok->encode(raw, false));
      tok->decode(tok->encode(text, true));
    }
  });
  return 0;
}
