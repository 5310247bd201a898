// Tokenizers against golden ids from independent Python references (tests/fixtures/gen_tokenizer_golden.py).
#include <nlohmann/json.hpp>
#include <random>

#include "core/paths.h"
#include "test_util.h"
#include "text/gpt2_bpe.h"
#include "text/tokenizer.h"
#include "text/wordpiece.h"

using mimic::test::TempDir;

namespace {
const nlohmann::json& golden() {
  static const nlohmann::json j = nlohmann::json::parse(mimic::test::read_bytes(mimic::test::fixture("tokenizer_golden.json")));
  return j;
}
const mimic::text::Gpt2Bpe& gpt2() {
  static const mimic::text::Gpt2Bpe t(mimic::asset_path("gpt2/vocab.json"), mimic::asset_path("gpt2/merges.txt"));
  return t;
}
const mimic::text::WordPiece& bert() {
  static const mimic::text::WordPiece t(mimic::asset_path("bert-base-uncased/vocab.txt"));
  return t;
}
}  // namespace

TEST(TokenizerGolden, Gpt2MatchesReferenceOnHardStrings) {
  ASSERT_GE(golden()["cases"].size(), 50u);
  for (const auto& c : golden()["cases"]) {
    auto text = c["text"].get<std::string>();
    EXPECT_EQ(nlohmann::json(gpt2().encode(text)), c["gpt2"]) << "text: " << text;
  }
}

TEST(TokenizerGolden, BertMatchesReferenceOnHardStrings) {
  for (const auto& c : golden()["cases"]) {
    auto text = c["text"].get<std::string>();
    EXPECT_EQ(nlohmann::json(bert().encode(text)), c["bert"]) << "text: " << text;
  }
}

TEST(Gpt2Bpe, AnchorsAndSpecialTokens) {
  EXPECT_EQ(gpt2().encode("Hello world"), (std::vector<int64_t>{15496, 995}));
  EXPECT_EQ(gpt2().vocab_size(), 50257);
  EXPECT_EQ(gpt2().eos_id(), 50256);
  EXPECT_TRUE(gpt2().encode("").empty());
  // Plain encode treats the marker as text; encode_with_special maps it to the id.
  EXPECT_EQ(gpt2().encode_with_special("a<|endoftext|>b"), (std::vector<int64_t>{64, 50256, 65}));
  EXPECT_GT(gpt2().encode("<|endoftext|>").size(), 1u);
  // Pre-tokenization: the last space of a run leads the next word; contractions split off.
  EXPECT_EQ(mimic::text::Gpt2Bpe::pretokenize("a   b"), (std::vector<std::string>{"a", "  ", " b"}));
  EXPECT_EQ(mimic::text::Gpt2Bpe::pretokenize("I'm ok\n"), (std::vector<std::string>{"I", "'m", " ok", "\n"}));
}

TEST(Gpt2Bpe, RoundTripsArbitraryBytes) {
  std::mt19937 rng(42);
  for (int n = 0; n < 300; ++n) {
    std::string s(rng() % 64, '\0');
    for (auto& ch : s) ch = static_cast<char>(rng() % 256);
    if (n % 3 == 0)  // mix in valid multi-byte text
      s += "héllo 世界 😀 ";
    EXPECT_EQ(gpt2().decode(gpt2().encode(s)), s);
  }
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(gpt2().decode(gpt2().encode(all)), all);
}

TEST(WordPiece, AnchorsPairsAndDecode) {
  EXPECT_EQ(bert().encode("i like strawberries"), (std::vector<int64_t>{101, 1045, 2066, 13137, 20968, 102}));
  EXPECT_EQ(bert().vocab_size(), 30522);
  EXPECT_EQ(bert().encode("", true), (std::vector<int64_t>{101, 102}));
  EXPECT_EQ(bert().encode("Strawberries", false), (std::vector<int64_t>{13137, 20968}));
  EXPECT_EQ(bert().decode({101, 1045, 2066, 13137, 20968, 102}), "[CLS] i like strawberries [SEP]");
  std::vector<int64_t> ids, types;
  bert().encode_pair("i like", "strawberries", ids, types);
  EXPECT_EQ(ids, (std::vector<int64_t>{101, 1045, 2066, 102, 13137, 20968, 102}));
  EXPECT_EQ(types, (std::vector<int64_t>{0, 0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(bert().tokenize(std::string(101, 'x')), (std::vector<std::string>{"[UNK]"}));
  EXPECT_EQ(bert().basic_tokenize("Héllo,WORLD!"), (std::vector<std::string>{"hello", ",", "world", "!"}));
}

TEST(TokenizerLoading, MalformedFilesGiveCleanErrors) {
  TempDir dir;
  EXPECT_MIMIC_ERROR(mimic::text::load_tokenizer(dir.path().string()), "no tokenizer in " + dir.path().string());
  EXPECT_MIMIC_ERROR(mimic::text::load_tokenizer(dir.file("absent")), "not found");
  mimic::test::write_bytes(dir.file("vocab.json"), "{\"a\": 0,");
  mimic::test::write_bytes(dir.file("merges.txt"), "#version: 0.2\na b\n");
  EXPECT_MIMIC_ERROR(mimic::text::load_tokenizer(dir.path().string()), "malformed vocabulary JSON");
  mimic::test::write_bytes(dir.file("vocab.json"), "{\"a\": 0, \"b\": 5}");
  EXPECT_MIMIC_ERROR(mimic::text::load_tokenizer(dir.path().string()), "outside");
  mimic::test::write_bytes(dir.file("vocab.json"), "{\"a\": 0, \"b\": 1}");
  EXPECT_MIMIC_ERROR(mimic::text::load_tokenizer(dir.path().string()), "not a GPT-2 byte-level vocabulary");
  // a real vocabulary with broken merges
  mimic::test::write_bytes(dir.file("vocab.json"), mimic::test::read_bytes(mimic::asset_path("gpt2/vocab.json")));
  mimic::test::write_bytes(dir.file("merges.txt"), "#version: 0.2\nab\n");
  EXPECT_MIMIC_ERROR(mimic::text::load_tokenizer(dir.path().string()), "merges.txt:2: expected two symbols");
  TempDir b;
  mimic::test::write_bytes(b.file("vocab.txt"), "hello\nworld\n");
  EXPECT_MIMIC_ERROR(mimic::text::load_tokenizer(b.path().string()), "not a BERT vocabulary");
  mimic::test::write_bytes(b.file("vocab.txt"), "[PAD]\n[UNK]\n[CLS]\n[SEP]\nHello\n");
  mimic::test::write_bytes(b.file("tokenizer_config.json"), "{\"do_lower_case\": false}");
  auto cased = mimic::text::load_tokenizer(b.path().string());
  EXPECT_EQ(cased->encode("Hello hello"), (std::vector<int64_t>{2, 4, 1, 3}));
  mimic::test::write_bytes(b.file("tokenizer_config.json"), "{oops");
  EXPECT_MIMIC_ERROR(mimic::text::load_tokenizer(b.path().string()), "tokenizer_config.json: malformed JSON");
}
