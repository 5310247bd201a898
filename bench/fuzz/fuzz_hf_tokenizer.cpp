// HF tokenizer.json: the input is tokenizer.json, a "\n----\n" line, then a text; load_tokenizer reads the folder
// (the JSON's normalizer, pre-tokenizer regexes, model, added tokens, post-processor and decoder all come from the
// input), and the tokenizer it accepts encodes and decodes a fixed text and the input's text.
#include "fuzz_util.h"
#include "mimic/text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = mimic::fuzz::split_parts(data, size, 2);
  const std::string dir = mimic::fuzz::scratch() + "/hf";
  std::filesystem::create_directories(dir);
  mimic::fuzz::write_file("hf/tokenizer.json", parts[0]);
  MIMIC_FUZZ_EXPECT_ERRORS({
    auto tok = mimic::text::load_tokenizer(dir);
    for (const std::string& text : {std::string("Hello world, it's 2024!\n  tabs\tand caf\xc3\xa9 \xff"), parts[1]}) {
      for (bool special : {false, true}) {
        auto ids = tok->encode(text, special);
        tok->decode(ids);
        for (auto id : ids) tok->token_to_id(tok->id_to_token(id));
      }
    }
  });
  return 0;
}
