// GPT-2 tokenizer files: the input is vocab.json, a "\n----\n" line, then merges.txt; load_tokenizer reads
// them, and the tokenizer it accepts encodes and decodes a fixed text and the input itself.
#include "fuzz_util.h"
#include "mimic/text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = mimic::fuzz::split_parts(data, size, 2);
  const std::string dir = mimic::fuzz::scratch() + "/gpt2";
  std::filesystem::create_directories(dir);
  mimic::fuzz::write_file("gpt2/vocab.json", parts[0]);
  mimic::fuzz::write_file("gpt2/merges.txt", parts[1]);
  MIMIC_FUZZ_EXPECT_ERRORS({
    auto tok = mimic::text::load_tokenizer(dir);
    for (const std::string& text : {std::string("Hello world, it's 2024!\n  tabs\tand caf\xc3\xa9"), parts[1]}) {
      auto ids = tok->encode(text);
      tok->decode(ids);
      for (auto id : ids) tok->token_to_id(tok->id_to_token(id));
    }
  });
  return 0;
}
