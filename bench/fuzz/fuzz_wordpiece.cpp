// BERT tokenizer files: the input is vocab.txt, a "\n----\n" line, then tokenizer_config.json (left out when
// empty); load_tokenizer reads them, and the tokenizer it accepts encodes and decodes a fixed text and the input.
#include "fuzz_util.h"
#include "mimic/text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = mimic::fuzz::split_parts(data, size, 2);
  const std::string dir = mimic::fuzz::scratch() + "/bert";
  std::filesystem::create_directories(dir);
  mimic::fuzz::write_file("bert/vocab.txt", parts[0]);
  std::filesystem::remove(dir + "/tokenizer_config.json");
  if (!parts[1].empty()) mimic::fuzz::write_file("bert/tokenizer_config.json", parts[1]);
  MIMIC_FUZZ_EXPECT_ERRORS({
    auto tok = mimic::text::load_tokenizer(dir);
    for (const std::string& text : {std::string("Hello World, it's 2024!\n  unaffable caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87"), parts[0]}) {
      auto ids = tok->encode(text);
      tok->decode(ids);
      for (auto id : ids) tok->token_to_id(tok->id_to_token(id));
    }
  });
  return 0;
}
