// HF tokenizer.json against an independent implementation (transformers.js's tokenizers, in
// tests/fixtures/hf_tokenizer_golden.json from gen_hf_tokenizer_golden.mjs) on Llama 3's and Qwen3's
// byte-level BPE and Mistral's SentencePiece BPE with byte fallback; GPT-2 written as a tokenizer.json
// against mimic's encoder.py-exact Gpt2Bpe (the same tokenizer in two forms, invalid UTF-8 included); the
// regex matcher's semantics; and the refusals.
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "mimic/core/paths.h"
#include "mimic/data/token_cache.h"
#include "mimic/models/tokenizer.h"
#include "mimic/text/bpe.h"
#include "mimic/text/gpt2_bpe.h"
#include "mimic/text/hf_tokenizer.h"
#include "mimic/text/pattern.h"
#include "mimic/text/tokenizer.h"
#include "mimic/text/unicode.h"
#include "test_util.h"

using mimic::test::TempDir;
using mimic::test::write_bytes;
using Ids = std::vector<int64_t>;
namespace text = mimic::text;
using json = nlohmann::json;

namespace {
const json& golden() {
  static const json j = json::parse(mimic::test::read_bytes(mimic::test::fixture("hf_tokenizer_golden.json")));
  return j;
}
const text::HfTokenizer& hf(const std::string& name) {
  static std::map<std::string, std::unique_ptr<text::HfTokenizer>> cache;
  auto& t = cache[name];
  if (!t)
    t = std::make_unique<text::HfTokenizer>(mimic::asset_path(name + "/tokenizer.json"), mimic::asset_path(name + "/tokenizer_config.json"));
  return *t;
}

// The spans a pattern finds in a text, as strings (the way Split with behavior Isolated keeps them).
std::vector<std::string> matches(const std::string& regex, const std::string& s) {
  const text::Pattern p(regex);
  const auto cps = text::unicode::to_u32(s);
  std::vector<std::string> out;
  size_t b, e;
  uint64_t budget = text::Pattern::budget_for(cps.size());
  for (size_t from = 0; from <= cps.size() && p.find(cps, from, b, e, budget); from = e > b ? e : b + 1)
    out.push_back(text::unicode::to_utf8(cps.substr(b, e - b)));
  return out;
}
using Strings = std::vector<std::string>;

// A tokenizer.json of a small byte-free SentencePiece-style BPE whose parts a test replaces.
json small_spm() {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"▁", 2}, {"a", 3}, {"b", 4}, {"▁a", 5}, {"ab", 6}, {"▁ab", 7}};
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    vocab[hex] = 8 + b;
  }
  return {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"▁ a", "a b", "▁a b"}}, {"byte_fallback", true},
                     {"unk_token", "<unk>"}, {"fuse_unk", true}}},
          {"normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "Prepend"}, {"prepend", "▁"}},
                                                                 {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}}}}},
          {"pre_tokenizer", nullptr},
          {"added_tokens", {{{"id", 1}, {"content", "<s>"}, {"special", true}}}},
          {"post_processor", {{"type", "TemplateProcessing"},
                              {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
                              {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
          {"decoder", {{"type", "Sequence"}, {"decoders", {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
                                                           {{"type", "ByteFallback"}}, {{"type", "Fuse"}},
                                                           {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}}};
}
std::unique_ptr<text::HfTokenizer> tokenizer_from_json(const TempDir& dir, const json& j) {
  write_bytes(dir.file("tokenizer.json"), j.dump());
  return std::make_unique<text::HfTokenizer>(dir.file("tokenizer.json"));
}
}  // namespace

// ------------------------------------------------------------------------------------------ golden ids
TEST(HfTokenizerGolden, Llama3Qwen3AndMistralIdsEqualTransformersJsOnUnseenText) {
  ASSERT_GE(golden()["cases"].size(), 270u);
  size_t with_special = 0;
  for (const std::string name : {"llama3", "qwen3", "mistral"}) {
    const auto& tok = hf(name);
    for (const auto& c : golden()["cases"]) {
      const std::string s = c["text"].get<std::string>();
      EXPECT_EQ(json(tok.encode(s, false)), c[name]) << name << " text: " << json(s).dump();
      if (c.contains(name + "_special")) {
        EXPECT_EQ(json(tok.encode(s, true)), c[name + "_special"]) << name << " with special tokens, text: " << json(s).dump();
        ++with_special;
      }
    }
  }
  EXPECT_EQ(with_special, 30u);
}

TEST(HfTokenizerGolden, SpecialIdsAndVocabularySizesAreTheFilesOwn) {
  const auto& l = hf("llama3");
  EXPECT_EQ(l.kind(), "hf-byte-bpe");
  EXPECT_EQ(l.vocab_size(), 128256);  // 128,000 + 256 added tokens
  EXPECT_EQ(l.eos_id(), 128001);      // <|end_of_text|>
  EXPECT_EQ(l.bos_id(), 128000);
  EXPECT_EQ(l.token_to_id("ĠHello"), 22691);
  EXPECT_EQ(l.id_to_token(22691), "ĠHello");
  EXPECT_EQ(l.token_to_id("<|eot_id|>"), 128009);
  const auto& q = hf("qwen3");
  EXPECT_EQ(q.eos_id(), 151645);  // <|im_end|> (tokenizer_config.json's eos_token)
  EXPECT_EQ(q.pad_id(), 151643);  // <|endoftext|>
  const auto& m = hf("mistral");
  EXPECT_EQ(m.kind(), "hf-bpe");
  EXPECT_EQ(m.vocab_size(), 32000);
  EXPECT_EQ(m.unk_id(), 0);
  EXPECT_EQ(m.eos_id(), 2);
  EXPECT_EQ(m.encode("hi", true).front(), 1);  // the template's <s>
  // what opens a document: the post-processor's ids before the text — Mistral's template's <s>; nothing for Qwen3 and
  // for this Llama 3 file, whose post-processors are ByteLevel alone (the first Llama 3 tokenizer.json: HF's
  // PreTrainedTokenizerFast adds no BOS with it either; the later file's template adds <|begin_of_text|>)
  EXPECT_EQ(m.document_start(), Ids{1});
  EXPECT_EQ(q.document_start(), Ids{});
  EXPECT_EQ(l.document_start(), Ids{});
  EXPECT_EQ(q.encode("hi", true), q.encode("hi", false));
  EXPECT_EQ(l.encode("hi", true), l.encode("hi", false));
  EXPECT_MIMIC_ERROR(l.id_to_token(128256), "token id 128256 is not in the vocabulary");
}

TEST(HfTokenizerGolden, DecodingGivesTheTextBack) {
  std::mt19937 rng(7);
  for (const auto& c : golden()["cases"]) {
    const std::string s = c["text"].get<std::string>();
    EXPECT_EQ(hf("llama3").decode(hf("llama3").encode(s, false)), s) << json(s).dump();
    // Qwen3 normalizes to NFC first; the texts here are NFC already except a few combining sequences
    const std::string nfc = text::unicode::to_utf8(text::unicode::nfc(text::unicode::to_u32(s)));
    EXPECT_EQ(hf("qwen3").decode(hf("qwen3").encode(s, false)), nfc) << json(s).dump();
    // Mistral prepends "▁" to a text (the decoder strips one leading space) and to each text after a special token
    if (s.find("<s>") == std::string::npos && s.find("</s>") == std::string::npos && s.find("<unk>") == std::string::npos)
      EXPECT_EQ(hf("mistral").decode(hf("mistral").encode(s, false)), s) << json(s).dump();
  }
  // arbitrary bytes: byte-level keeps every byte, byte fallback writes <0xHH> for what is not UTF-8
  for (int trial = 0; trial < 50; ++trial) {
    std::string bytes(1 + rng() % 40, '\0');
    for (auto& b : bytes) b = static_cast<char>(rng() % 256);
    EXPECT_EQ(hf("llama3").decode(hf("llama3").encode(bytes, false)), bytes);
    EXPECT_EQ(hf("mistral").decode(hf("mistral").encode(bytes, false)), bytes);
  }
  const Ids stray = hf("mistral").encode("a\xFF", false);
  EXPECT_EQ(stray.back(), hf("mistral").token_to_id("<0xFF>"));
}

TEST(HfTokenizerGolden, TokenCachesHoldIdsPast65535AndAreKeptPerTokenizer) {
  TempDir dir;
  std::vector<mimic::data::Document> docs(2);
  docs[0].id = "a";
  docs[0].text = "日本語のテキスト and some English";
  docs[1].id = "b";
  docs[1].text = "Ωmega 😀";
  const auto& l = hf("llama3");
  const auto info = mimic::data::write_token_cache(dir.file("c.bin"), l, docs);
  // each document as HF encodes a text with its special tokens (this file adds none: see document_start below), then
  // <|end_of_text|>
  Ids want = l.encode(docs[0].text, true);
  want.push_back(l.eos_id());
  const auto second = l.encode(docs[1].text, true);
  want.insert(want.end(), second.begin(), second.end());
  want.push_back(l.eos_id());
  ASSERT_GT(*std::max_element(want.begin(), want.end()), 65535);
  const auto cache = mimic::data::TokenCache::open(dir.file("c.bin"));
  EXPECT_EQ(cache.ids(), want);
  EXPECT_EQ(json::parse(mimic::test::read_bytes(dir.file("c.bin.json")))["dtype"], "uint32");
  EXPECT_EQ(mimic::test::read_bytes(dir.file("c.bin")).size(), want.size() * 4);
  EXPECT_EQ(info.tokenizer, l.identity());
  // two byte-level tokenizers of one kind never share a cache folder
  EXPECT_EQ(l.kind(), hf("qwen3").kind());
  EXPECT_NE(l.identity(), hf("qwen3").identity());
}

// ------------------------------------------------------------------------------------------ GPT-2 in two forms
TEST(HfTokenizerForms, Gpt2AsTokenizerJsonEqualsTheEncoderPyForm) {
  const text::Gpt2Bpe gpt2(mimic::asset_path("gpt2/vocab.json"), mimic::asset_path("gpt2/merges.txt"));
  json merges = json::array();
  std::istringstream lines(mimic::test::read_bytes(mimic::asset_path("gpt2/merges.txt")));
  std::string line;
  std::getline(lines, line);  // #version
  while (std::getline(lines, line))
    if (!line.empty()) merges.push_back(line);
  const json j = {{"model", {{"type", "BPE"}, {"vocab", json::parse(mimic::test::read_bytes(mimic::asset_path("gpt2/vocab.json")))}, {"merges", merges}}},
                  {"normalizer", nullptr},
                  {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
                  {"decoder", {{"type", "ByteLevel"}}},
                  {"added_tokens", {{{"id", 50256}, {"content", "<|endoftext|>"}, {"special", true}}}}};
  TempDir dir;
  const auto tok = tokenizer_from_json(dir, j);
  const json cases = json::parse(mimic::test::read_bytes(mimic::test::fixture("tokenizer_golden.json")))["cases"];
  size_t n = 0;
  for (const auto& c : cases) {
    std::string s;
    if (c.contains("text")) {
      s = c["text"].get<std::string>();
    } else {
      const auto hex = c["hex"].get<std::string>();
      for (size_t i = 0; i + 1 < hex.size(); i += 2) s.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    }
    if (s.find("<|endoftext|>") != std::string::npos) continue;  // an added token here, plain text to encoder.py
    EXPECT_EQ(tok->encode(s), gpt2.encode(s)) << json(s).dump(-1, ' ', true, json::error_handler_t::replace);
    EXPECT_EQ(tok->decode(tok->encode(s)), s);
    ++n;
  }
  EXPECT_GE(n, 320u);
  EXPECT_EQ(tok->encode("a<|endoftext|>b"), gpt2.encode_with_special("a<|endoftext|>b"));
}

TEST(HfTokenizerForms, HeapMergingEqualsTheScanOnARealMergeList) {
  // GPT-2's 50,000 merges over byte ids; words of 65..600 symbols cut from the golden texts (all of them
  // joined, so words cross spaces and scripts as a document without a pre-tokenizer does)
  const json vocab = json::parse(mimic::test::read_bytes(mimic::asset_path("gpt2/vocab.json")));
  text::BpeMerges merges;
  std::istringstream lines(mimic::test::read_bytes(mimic::asset_path("gpt2/merges.txt")));
  std::string line;
  std::getline(lines, line);
  while (std::getline(lines, line)) {
    const size_t sp = line.find(' ');
    if (sp == std::string::npos) continue;
    const std::string a = line.substr(0, sp), b = line.substr(sp + 1);
    merges.add(vocab[a].get<int32_t>(), vocab[b].get<int32_t>(), vocab[a + b].get<int32_t>());
  }
  ASSERT_EQ(merges.size(), 50000u);
  const auto alphabet = text::Gpt2Bpe::byte_alphabet();
  std::string all;
  for (const auto& c : golden()["cases"]) all += c["text"].get<std::string>();
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    const size_t len = 65 + rng() % 536, at = rng() % (all.size() - len);
    std::vector<int32_t> word;
    for (size_t i = at; i < at + len; ++i) {
      std::string ch;
      text::unicode::append_utf8(alphabet[static_cast<unsigned char>(all[i])], ch);
      word.push_back(vocab[ch].get<int32_t>());
    }
    auto by_scan = word, by_heap = word;
    merges.apply_by_scan(by_scan);
    merges.apply_by_heap(by_heap);
    ASSERT_EQ(by_heap, by_scan) << "trial " << trial;
    ASSERT_LT(by_heap.size(), word.size());
  }
}

// ------------------------------------------------------------------------------------------ the regex matcher
TEST(HfPattern, MatchesAsABacktrackingEngineWithLeftmostFirstAlternation) {
  // leftmost-first: the first alternative that matches wins even when a later one is longer
  EXPECT_EQ(matches("a|ab", "ab"), (Strings{"a"}));
  EXPECT_EQ(matches("ab|a", "ab"), (Strings{"ab"}));
  // \s+(?!\S) gives back the last space before a word; \p{N}{1,3} takes digits three at a time
  EXPECT_EQ(matches(" ?\\S+|\\s+(?!\\S)|\\s+", "a   b"), (Strings{"a", "  ", " b"}));
  EXPECT_EQ(matches("\\p{N}{1,3}", "1234567"), (Strings{"123", "456", "7"}));
  // case-insensitive group; [^\r\n\p{L}\p{N}]?\p{L}+ takes one leading symbol
  EXPECT_EQ(matches("(?i:'s|'t)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+", "IT'S ok"), (Strings{"IT", "'S", " ok"}));
  // greedy backtracking into a class repeat: \s*[\r\n]+ ends at the last newline
  EXPECT_EQ(matches("\\s*[\\r\\n]+", "a \n \n b"), (Strings{" \n \n"}));
  // lazy, counted, escapes, classes with ranges and negation, look-ahead
  EXPECT_EQ(matches("a+?", "aaa"), (Strings{"a", "a", "a"}));
  EXPECT_EQ(matches("x{2,}", "x xx xxx"), (Strings{"xx", "xxx"}));
  EXPECT_EQ(matches("[a-c\\x41]+", "abcAdB"), (Strings{"abcA"}));
  EXPECT_EQ(matches("[^a-z ]+", "ab CD ef"), (Strings{"CD"}));
  EXPECT_EQ(matches("\\w+(?=!)", "hi! yo"), (Strings{"hi"}));
  EXPECT_EQ(matches("\\p{Lu}\\p{Ll}+", "Élan ÉLAN"), (Strings{"Élan"}));
  EXPECT_EQ(matches("(?:ab)+", "abababa"), (Strings{"ababab"}));
  EXPECT_EQ(matches(".", "a\nb"), (Strings{"a", "b"}));
}

TEST(HfPattern, UnsupportedConstructsAreRefusedNamingThem) {
  EXPECT_MIMIC_ERROR(text::Pattern("^a"), "anchors ^ and $ are not supported");
  EXPECT_MIMIC_ERROR(text::Pattern("(?<=a)b"), "this group construct is not supported");
  EXPECT_MIMIC_ERROR(text::Pattern("a++"), "a quantifier after a quantifier (possessive or nested) is not supported");
  EXPECT_MIMIC_ERROR(text::Pattern("(\\w)\\1"), "the escape \\1 is not supported");
  EXPECT_MIMIC_ERROR(text::Pattern("\\p{Greek}"), "unknown Unicode property \\p{Greek}");
  EXPECT_MIMIC_ERROR(text::Pattern("(a"), "missing ')'");
  EXPECT_MIMIC_ERROR(text::Pattern("a)"), "unbalanced ')'");
  EXPECT_MIMIC_ERROR(text::Pattern("[a-"), "unterminated character class");
  EXPECT_MIMIC_ERROR(text::Pattern("a{3,1}"), "is empty");
  EXPECT_MIMIC_ERROR(text::Pattern("*a"), "a quantifier with nothing before it");
  EXPECT_MIMIC_ERROR(text::Pattern(std::string(100, '(') + std::string(100, ')')), "groups nested deeper than 64");
  // hostile patterns stop with an error, not a hang or a stack overflow
  EXPECT_MIMIC_ERROR(matches("(?:a|a)*b", std::string(40, 'a')), "backtracks too much");
  std::string abs;
  for (int i = 0; i < 6000; ++i) abs += "ab";
  EXPECT_MIMIC_ERROR(matches("(?:ab)+", abs), "nests its match deeper than 5000");
  EXPECT_MIMIC_ERROR(matches(std::string(1001, 'a'), "a"), "pattern of 1001 characters (at most 1000)");
  EXPECT_MIMIC_ERROR(text::Pattern("\\x{110000}"), "code point past U+10FFFF");
  // many cheap searches share one budget: [a-z]*X|a on a run of a's is quadratic without it
  EXPECT_MIMIC_ERROR(matches("[a-z]*X|a", std::string(200000, 'a')), "backtracks too much");
}

// ------------------------------------------------------------------------------------------ components
TEST(HfTokenizerComponents, SentencePieceStyleBpeWithByteFallbackUnkAndTemplate) {
  TempDir dir;
  const auto tok = tokenizer_from_json(dir, small_spm());
  EXPECT_EQ(tok->encode("ab a", false), (Ids{7, 5}));                       // ▁ab ▁a
  EXPECT_EQ(tok->encode("ab a", true), (Ids{1, 7, 5}));                     // <s> first
  EXPECT_EQ(tok->encode("é", false), (Ids{2, 8 + 0xC3, 8 + 0xA9}));         // ▁ then é's two bytes
  EXPECT_EQ(tok->decode(tok->encode("ab é a", false)), "ab é a");
  EXPECT_EQ(tok->encode("a<s>b", false), (Ids{5, 1, 2, 4}));               // the segment after <s> gets its own ▁
  EXPECT_EQ(tok->document_start(), Ids{1});
  // the ids before the text whatever the post-processor's form: a Sequence around a template that adds <s> twice and
  // a closing one, RobertaProcessing's <s> (the closing ids are the separator's business, not the start's)
  json nested = small_spm();
  nested["post_processor"] = json::parse(R"({"type": "Sequence", "processors": [
      {"type": "ByteLevel", "trim_offsets": false},
      {"type": "TemplateProcessing",
       "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"SpecialToken": {"id": "<s>", "type_id": 0}},
                  {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<unk>", "type_id": 0}}],
       "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}, "<unk>": {"id": "<unk>", "ids": [0], "tokens": ["<unk>"]}}}]})");
  TempDir dir3;
  const auto twice = tokenizer_from_json(dir3, nested);
  EXPECT_EQ(twice->encode("ab", true), (Ids{1, 1, 7, 0}));
  EXPECT_EQ(twice->document_start(), (Ids{1, 1}));
  json roberta = small_spm();
  roberta["post_processor"] = {{"type", "RobertaProcessing"}, {"sep", {"<unk>", 0}}, {"cls", {"<s>", 1}}};
  TempDir dir4;
  EXPECT_EQ(tokenizer_from_json(dir4, roberta)->document_start(), Ids{1});
  json none = small_spm();
  none["post_processor"] = nullptr;
  TempDir dir5;
  EXPECT_EQ(tokenizer_from_json(dir5, none)->document_start(), Ids{});
  json no_fallback = small_spm();
  no_fallback["model"]["byte_fallback"] = false;
  TempDir dir2;
  const auto unk = tokenizer_from_json(dir2, no_fallback);
  EXPECT_EQ(unk->encode("aéé", false), (Ids{5, 0}));  // two unknown characters fuse into one <unk>
}

// Added tokens as HF's tokenizers match them (added_vocabulary.rs: an Aho-Corasick automaton, leftmost-longest, over
// the raw text for tokens with normalized false): a single_word token inside a word is dropped and the search goes on
// after it — no shorter token is tried where it began — and "inside a word" is Rust's Unicode \w on each side, as
// lstrip/rstrip take Unicode's white space; the search goes on at a match's own end, not after the white space its
// rstrip took. mimic tried the shorter token, read every byte past ASCII as a word character (an em dash too),
// stripped only ASCII white space and searched on after the stripped space. The expected ids follow HF's code by hand.
TEST(HfTokenizerComponents, AddedTokensSingleWordAndStripReadCharactersAsHfsRustRegexesDo) {
  json j = small_spm();
  j["normalizer"] = nullptr;  // the raw text's bytes: "a" 3, "b" 4, "ab" 6, every other byte its fallback token
  auto added = [](int64_t id, const std::string& content, bool single_word, bool strip) {
    return json{{"id", id}, {"content", content}, {"single_word", single_word}, {"lstrip", strip}, {"rstrip", strip},
                {"normalized", false}, {"special", false}};
  };
  // (the ids HF gives: "<s>" and "a" the model's, the others the next past its 264 tokens)
  j["added_tokens"] = {added(1, "<s>", false, false), added(264, "ba", true, false), added(3, "a", false, false), added(265, "<m>", false, true),
                       added(266, "\n", false, false)};
  j["post_processor"] = nullptr;
  TempDir dir;
  const auto tok = tokenizer_from_json(dir, j);
  auto byte = [](unsigned b) { return int64_t{8} + b; };
  EXPECT_EQ(tok->encode("ba", false), (Ids{264}));
  EXPECT_EQ(tok->encode("ba ba", false), (Ids{264, byte(' '), 264}));
  // "ba" inside a word: dropped, and the text goes on after it; the model reads "bbab" (not b b, the added "a", b)
  EXPECT_EQ(tok->encode("bbab", false), (Ids{4, 4, 6}));
  EXPECT_EQ(tok->encode("_ba", false), (Ids{byte('_'), 4, 3}));     // connector punctuation is \w
  EXPECT_EQ(tok->encode("ba1", false), (Ids{4, 3, byte('1')}));     // and digits
  EXPECT_EQ(tok->encode("\xC3\xA9" "ba", false), (Ids{byte(0xC3), byte(0xA9), 4, 3}));  // é, a letter
  EXPECT_EQ(tok->encode("ba\xCC\x81", false), (Ids{4, 3, byte(0xCC), byte(0x81)}));      // a combining acute accent, a mark
  // an em dash (Pd) and a CJK full stop (Po) are no word characters: the token stands alone between them
  EXPECT_EQ(tok->encode("\xE2\x80\x94" "ba" "\xE3\x80\x82", false),
            (Ids{byte(0xE2), byte(0x80), byte(0x94), 264, byte(0xE3), byte(0x80), byte(0x82)}));
  // lstrip/rstrip take any white space: a no-break space before, an ideographic space and a tab after
  EXPECT_EQ(tok->encode("a\xC2\xA0<m>\xE3\x80\x80\tb", false), (Ids{3, 265, 4}));
  EXPECT_EQ(tok->encode("a <m> b", false), (Ids{3, 265, 4}));
  EXPECT_EQ(tok->encode("<m><m>", false), (Ids{265, 265}));
  // the search goes on at <m>'s own end, inside the white space rstrip took: a token there is still found, and the
  // model then reads on from that token's end (HF's start_offset falls back), so "  " is read twice as HF reads it
  EXPECT_EQ(tok->encode("<m>\n\nb", false), (Ids{265, 266, 266, 4}));
  EXPECT_EQ(tok->encode("<m>\n  b", false), (Ids{265, 266, byte(' '), byte(' '), 4}));
}

// HF's second pass (added_vocabulary.rs, extract_and_normalize): a token with normalized true is matched, as the
// normalizer writes it, in each segment the raw pass left once that segment is normalized; `normalized` defaults as
// AddedToken::from sets it, false for a special token and true for any other. The first case is HF's own unit test
// (options_use_cases: a Lowercase normalizer, "[CLS] My name is Anthony [SEP]"), the rest follow its code by hand.
// mimic matched every added token on the raw text: "My" was no "my", and a Prepend normalizer's ▁ stayed outside.
TEST(HfTokenizerComponents, NormalizedAddedTokensAreMatchedInTheNormalizedTextAsHfsSecondPassDoes) {
  auto byte = [](unsigned b) { return int64_t{8} + b; };
  json lower = small_spm();
  lower["normalizer"] = {{"type", "Lowercase"}};
  lower["post_processor"] = nullptr;
  lower["added_tokens"] = {
      {{"id", 264}, {"content", "[CLS]"}, {"special", true}},  // special, no `normalized`: matched on the raw text
      {{"id", 265}, {"content", "[SEP]"}, {"special", true}, {"normalized", false}},
      {{"id", 266}, {"content", "my"}, {"lstrip", true}, {"rstrip", true}, {"normalized", true}, {"special", false}},
      {{"id", 267}, {"content", "name"}},  // not special, no `normalized`: normalized
      {{"id", 268}, {"content", "ony"}, {"single_word", true}, {"normalized", true}},
      {{"id", 269}, {"content", "Yes"}, {"normalized", true}}};  // matched as "yes"
  TempDir dir;
  const auto tok = tokenizer_from_json(dir, lower);
  // HF's splits: [CLS] | " my " (the token with both spaces) | name | " is anthony " (no "ony": inside a word) | [SEP]
  EXPECT_EQ(tok->encode("[CLS] My name is Anthony [SEP]", false),
            (Ids{264, 266, 267, byte(' '), byte('i'), byte('s'), byte(' '), 3, byte('n'), byte('t'), byte('h'), byte('o'), byte('n'),
                 byte('y'), byte(' '), 265}));
  EXPECT_EQ(tok->encode("a YES", false), (Ids{3, byte(' '), 269}));
  EXPECT_EQ(tok->encode("ony", false), (Ids{268}));
  // a special token without `normalized` is matched on the raw text only: "[cls]" is no [CLS]
  EXPECT_EQ(tok->encode("[cls]", false), (Ids{byte('['), byte('c'), byte('l'), byte('s'), byte(']')}));

  // SentencePiece-style (Llama 2, Mistral: Prepend ▁, spaces → ▁): the token is matched as "▁<x>", the ▁ before it
  // is the token's, and the text after it is not prepended again
  json spm = small_spm();
  spm["post_processor"] = nullptr;
  spm["added_tokens"].push_back({{"id", 264}, {"content", "<x>"}, {"special", false}, {"normalized", true}});
  const auto sp = tokenizer_from_json(dir, spm);
  EXPECT_EQ(sp->encode("a <x> b", false), (Ids{5, 264, 2, 4}));   // ▁a | ▁<x> | ▁b (raw matching: 5 2 264 2 2 4)
  EXPECT_EQ(sp->encode("<x>a", false), (Ids{264, 3}));            // ▁<x> | a (raw: 264 5)
  EXPECT_EQ(sp->encode("a<x>", false), (Ids{5, byte('<'), byte('x'), byte('>')}));  // "▁a<x>" holds no "▁<x>"
  // the raw pass first: <s> (special) is split out of the raw text, and the segment after it is normalized alone
  EXPECT_EQ(sp->encode("<s>a <x>", false), (Ids{1, 5, 264}));
  // decoded in its normalized form, as HF's current decode does: the ▁ the token took comes back as its space
  EXPECT_EQ(sp->decode(sp->encode("a <x> b", false)), "a <x> b");
  EXPECT_EQ(sp->id_to_token(264), "<x>");  // its name stays the file's
  EXPECT_EQ(sp->token_to_id("<x>"), 264);

  // no matcher can be built from two tokens of one normalized form, or from one the normalizer empties: refused by name
  json twice = lower;
  twice["added_tokens"].push_back({{"id", 270}, {"content", "YES"}, {"normalized", true}});
  EXPECT_MIMIC_ERROR(tokenizer_from_json(dir, twice), R"("Yes" and "YES" (normalized: true) both normalize to "yes")");
  json emptied = spm;
  emptied["normalizer"] = {{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}};
  emptied["added_tokens"].push_back({{"id", 265}, {"content", "  "}, {"normalized", true}});
  EXPECT_MIMIC_ERROR(tokenizer_from_json(dir, emptied), R"(turns the added token "  " (id 265, normalized: true) into nothing)");
  // a byte-level decoder reads characters as bytes: the normalized form (NFC's é, U+00E9, the byte alphabet's 0xE9)
  // would decode to a lone byte, so there the file's content decodes (HF 0.23 gives U+FFFD)
  const json byte_level = {{"model", {{"type", "BPE"}, {"vocab", {{"a", 0}}}, {"merges", json::array()}}},
                           {"normalizer", {{"type", "NFC"}}},
                           {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
                           {"decoder", {{"type", "ByteLevel"}}},
                           {"added_tokens", {{{"id", 1}, {"content", "e\u0301"}, {"normalized", true}, {"special", false}}}}};
  const auto bl = tokenizer_from_json(dir, byte_level);
  EXPECT_EQ(bl->encode("e\u0301", false), (Ids{1}));
  EXPECT_EQ(bl->encode("\u00e9", false), (Ids{1}));  // composed in the text: NFC's form too
  EXPECT_EQ(bl->decode({1}), "e\u0301");
  json bytes_decoded = byte_level;  // the decoder decides, not the pre-tokenizer
  bytes_decoded["pre_tokenizer"] = nullptr;
  EXPECT_EQ(tokenizer_from_json(dir, bytes_decoded)->decode({1}), "e\u0301");
  // one content listed twice: with one id the last entry's flags (here single_word), with two ids or in two passes refused
  json repeated = lower;
  repeated["added_tokens"].push_back({{"id", 267}, {"content", "name"}, {"single_word", true}, {"normalized", true}});
  const auto rep = tokenizer_from_json(dir, repeated);
  EXPECT_EQ(rep->encode("name", false), (Ids{267}));
  EXPECT_EQ(rep->encode("names", false), (Ids{byte('n'), 3, byte('m'), byte('e'), byte('s')}));  // inside a word: passed over
  json two_ids = lower;
  two_ids["added_tokens"].push_back({{"id", 270}, {"content", "name"}, {"normalized", true}});
  EXPECT_MIMIC_ERROR(tokenizer_from_json(dir, two_ids), R"(the added token "name" is listed with ids 267 and 270)");
  json two_passes = lower;
  two_passes["added_tokens"].push_back({{"id", 267}, {"content", "name"}, {"normalized", false}});
  EXPECT_MIMIC_ERROR(tokenizer_from_json(dir, two_passes), R"(the added token "name" is listed twice, once normalized: true and once false)");
  json raw_then_normalized = lower;  // [SEP] first in the raw pass
  raw_then_normalized["added_tokens"].push_back({{"id", 265}, {"content", "[SEP]"}, {"normalized", true}});
  EXPECT_MIMIC_ERROR(tokenizer_from_json(dir, raw_then_normalized), R"(the added token "[SEP]" is listed twice, once normalized: true and once false)");
}

// The pieces a pre-tokenizer cuts, read from the ids of a model with ignore_merges, where a piece in the vocabulary is
// its own token: the expected pieces are HF's own, from its documentation of SplitDelimiterBehavior ("the-final--
// countdown") and its Metaspace test ("Hey   friend!" → ▁Hey ▁ ▁ ▁friend!); the decoder's from its decode_chain
// (every ▁ of the first token dropped). mimic let delimiters in a row lead the next piece together (--countdown,
// ▁▁▁friend!), cut adjacent gaps apart under Contiguous with invert, read the Whitespace pre-tokenizer's \w as L|M|Nd|Pc
// (Rust's also takes letter numbers and the zero-width joiners) and dropped one ▁ of the first token.
TEST(HfTokenizerComponents, SplitBehaviorsCutPiecesAsHfsFoldsDo) {
  const std::vector<std::string> pieces = {"the", "-", "final", "countdown", "-final", "--countdown", "-countdown", "the-", "final-",
                                           "--", "<unk>", "a", "aa", "b", "▁Hey", "▁", "▁friend!", "▁▁", "a\u200d" "b", "a\u216b", ","};
  json vocab = json::object();
  for (size_t i = 0; i < pieces.size(); ++i) vocab[pieces[i]] = i;
  auto with_pre = [&](const json& pre) {
    return json{{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}, {"ignore_merges", true}, {"unk_token", "<unk>"}}},
                {"normalizer", nullptr}, {"pre_tokenizer", pre}, {"added_tokens", json::array()}, {"post_processor", nullptr},
                {"decoder", {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "always"}, {"split", true}}}};
  };
  auto split = [&](const std::string& behavior) {
    TempDir dir;
    return tokenizer_from_json(dir, with_pre({{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}, {"invert", false}}))
        ->encode("the-final--countdown", false);
  };
  EXPECT_EQ(split("Removed"), (Ids{0, 2, 3}));                    // the final countdown
  EXPECT_EQ(split("Isolated"), (Ids{0, 1, 2, 1, 1, 3}));          // the - final - - countdown
  EXPECT_EQ(split("MergedWithPrevious"), (Ids{7, 8, 1, 3}));      // the- final- - countdown
  EXPECT_EQ(split("MergedWithNext"), (Ids{0, 4, 1, 6}));          // the -final - -countdown
  EXPECT_EQ(split("Contiguous"), (Ids{0, 1, 2, 9, 3}));           // the - final -- countdown
  TempDir dir;
  // invert: the "a"s are the text between delimiters, and Contiguous joins the two that touch
  EXPECT_EQ(tokenizer_from_json(dir, with_pre({{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Contiguous"}, {"invert", true}}))
                ->encode("aab", false),
            (Ids{12, 13}));
  const auto meta = tokenizer_from_json(dir, with_pre({{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "always"}, {"split", true}}));
  EXPECT_EQ(meta->encode("Hey   friend!", false), (Ids{14, 15, 15, 16}));
  EXPECT_EQ(meta->decode({17, 14}), " Hey");  // ▁▁ first: both dropped
  EXPECT_EQ(meta->decode({17, 17, 14}), "   Hey");  // only the first token's
  const auto ws = tokenizer_from_json(dir, with_pre({{"type", "Whitespace"}}));
  EXPECT_EQ(ws->encode("a\u200d" "b", false), (Ids{18}));  // a zero-width joiner is \w in Rust: one word
  EXPECT_EQ(ws->encode("a\u216b", false), (Ids{19}));       // Ⅻ, a letter number: \w
  EXPECT_EQ(ws->encode(" a ,\tb\u3000", false), (Ids{11, 20, 13}));
}

TEST(HfTokenizerComponents, SplitBehaviorsMetaspaceAndDigits) {
  auto with_pre = [](const json& pre) {
    json j = small_spm();
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = pre;
    j["model"]["byte_fallback"] = true;
    return j;
  };
  TempDir dir;
  // Metaspace: spaces become ▁, a ▁ is prepended, pieces start at each ▁
  auto meta = tokenizer_from_json(dir, with_pre({{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "always"}, {"split", true}}));
  EXPECT_EQ(meta->encode("ab ab", false), (Ids{7, 7}));
  // prepend_scheme first: only the text's first segment is prepended
  auto first = tokenizer_from_json(dir, with_pre({{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", false}}));
  EXPECT_EQ(first->encode("a<s>a", false), (Ids{5, 1, 3}));
  // Split on a string, removed: the delimiters disappear; Digits isolates every digit
  auto removed = tokenizer_from_json(dir, with_pre({{"type", "Split"}, {"pattern", {{"String", "b"}}}, {"behavior", "Removed"}, {"invert", false}}));
  EXPECT_EQ(removed->encode("abab", false), (Ids{3, 3}));
  auto merged = tokenizer_from_json(dir, with_pre({{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "MergedWithNext"}, {"invert", false}}));
  EXPECT_EQ(merged->encode("abab", false), (Ids{6, 6}));
  auto digits = tokenizer_from_json(dir, with_pre({{"type", "Digits"}, {"individual_digits", true}}));
  EXPECT_EQ(digits->encode("12", false), (Ids{8 + '1', 8 + '2'}));
}

// ------------------------------------------------------------------------------------------ HF's Rust tokenizers
// tests/fixtures/hf_rust_cases.json holds what HF's own tokenizers (the Rust library, its npm build 0.23.2; Oniguruma
// runs its regexes) gives (gen_hf_rust_cases.mjs): every difference found there until 2026-12-07 is a case of it.
namespace {
const json& rust_cases() {
  static const json j = json::parse(mimic::test::read_bytes(mimic::test::fixture("hf_rust_cases.json")));
  return j;
}
bool in_ranges(const json& ranges, char32_t cp) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), cp, [](char32_t c, const json& r) { return c < r[0].get<char32_t>(); });
  return it != ranges.begin() && cp <= (*std::prev(it))[1].get<char32_t>();
}
}  // namespace

TEST(HfRust, RegexClassesTakeTheCodePointsOnigurumaTakes) {
  // \w is Oniguruma's: letter numbers (Ⅻ), the circled letters and, from its Latin-1 table, ² ³ ¹ ¼ ½ ¾ are word
  // characters, the joiner U+200D is not (mimic's \w was letters, marks, Nd and Pc until 2026-12-07)
  EXPECT_EQ(matches("\\w+", "a½b \u216b x²\u200dy \u24d0 \u2155"), (Strings{"a½b", "\u216b", "x²", "y", "\u24d0"}));
  EXPECT_EQ(matches("[^\\w\\s]+", "x\u200dy\u2155"), (Strings{"\u200d", "\u2155"}));
  const json& j = rust_cases();
  ASSERT_EQ(j["tokenizers"], "0.23.2");
  size_t compared = 0;
  for (const auto& [cls, inside] : j["classes"].items()) {
    const text::Pattern p(cls);
    size_t wrong = 0;
    for (const auto& r : j["probed"])
      for (char32_t cp = r[0].get<char32_t>(); cp <= r[1].get<char32_t>(); ++cp) {
        // a code point assigned after Unicode 14 (mimic's tables) is in no class here, where Node's tables know it
        if (text::unicode::category(cp) == text::unicode::Category::Cn) continue;
        size_t b, e;
        uint64_t budget = text::Pattern::budget_for(1);
        const bool mimic = p.find(std::u32string(1, cp), 0, b, e, budget) && e == b + 1;
        if (mimic != in_ranges(inside, cp) && ++wrong <= 5) ADD_FAILURE() << cls << " at U+" << std::hex << static_cast<uint32_t>(cp) << ": HF " << !mimic;
        ++compared;
      }
    EXPECT_EQ(wrong, 0u) << cls;
  }
  EXPECT_GT(compared, 3u * 140000);  // the 144,7xx code points Unicode 14 assigns outside private use, three times
}

TEST(HfRust, SplitReplaceAndMetaspaceFirstGiveHfsIds) {
  // Split and Replace take empty regex matches as HF does ("x*" in "abxxc": -a-b-c- replaced, a|b|xx|c split), and
  // Metaspace's "first" prepends to the piece HF's alignments tie to the text's first character (not after a Strip,
  // a WhitespaceSplit or a Replace that took it); regexes read as Oniguruma reads them ({n}? optional, (?i:[A-Z]) takes
  // "a", [\w] leaves out ½, an iteration matching nothing ends its loop); an added " " with lstrip and rstrip found in
  // the white space the one before took gives no second token
  size_t encodings = 0;
  for (const auto& c : rust_cases()["cases"]) {
    TempDir dir;
    const auto tok = tokenizer_from_json(dir, c["tokenizer"]);
    for (const auto& e : c["encodings"]) {
      EXPECT_EQ(tok->encode(e["text"].get<std::string>(), false), e["ids"].get<Ids>()) << c["name"].get<std::string>() << " on " << e["text"];
      ++encodings;
    }
  }
  EXPECT_EQ(encodings, 50u + 5u + 21u + 20u + 6u + 14u * 6u * 9u);  // Split, Replace, regex forms, added tokens in white space, Metaspace
}

TEST(HfRust, WhatMimicWouldReadOtherwiseThanHfIsRefused) {
  // HF's steps after a ByteLevel see the byte alphabet (a space is Ġ), mimic's the raw text: refused, as is a class in a
  // class, which Oniguruma nests (mimic read [a[b]] as the class a[b followed by "]")
  TempDir dir;
  json j = small_spm();
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers", {{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}, {{"type", "WhitespaceSplit"}}}}};
  EXPECT_MIMIC_ERROR(tokenizer_from_json(dir, j), "a step after ByteLevel in a Sequence is not supported");
  EXPECT_MIMIC_ERROR(text::Pattern("[a[b]]"), "a class inside a class ([a[b]]) is not supported");
  EXPECT_MIMIC_ERROR(text::Pattern("[!-[a]]"), "a class inside a class ([a[b]]) is not supported");
  // counted loops over what can match nothing (Oniguruma compiles them two ways), and quantifiers Oniguruma nests
  EXPECT_MIMIC_ERROR(text::Pattern("(?:a|b??){2}a"), "a counted repeat {..} of something that can match nothing");
  EXPECT_MIMIC_ERROR(text::Pattern("(?:b|a??){1,3}b"), "a counted repeat {..} of something that can match nothing");
  EXPECT_MIMIC_ERROR(text::Pattern("a{2}{3}"), "a quantifier after a quantifier (possessive or nested)");
  EXPECT_MIMIC_ERROR(text::Pattern("a+{2}"), "a quantifier after a quantifier (possessive or nested)");
  EXPECT_MIMIC_ERROR(text::Pattern("a{2}+"), "a quantifier after a quantifier (possessive or nested)");
  EXPECT_MIMIC_ERROR(text::Pattern("x|{2}"), "a quantifier with nothing before it");
  EXPECT_EQ(matches("\\p{L}{2}", "abc"), (Strings{"ab"}));  // a single character's count stays
  EXPECT_EQ(matches("[\\[a]+", "[a]"), (Strings{"[a"}));  // an escaped one is the character
}

TEST(HfRust, AddedTokensKeepTheirIdsOnlyWhereHfGivesThemTheSame) {
  // HF gives an added token the model's id for it, else the next past the model's tokens and those added before, and
  // ignores the file's; a file that says otherwise (edited by hand) is refused, naming the id HF would give
  size_t loaded = 0, refused = 0;
  for (const auto& c : rust_cases()["added_token_cases"]) {
    const std::string name = c["name"];
    std::string first_wrong;
    for (const auto& a : c["tokenizer"]["added_tokens"])
      if (first_wrong.empty() && a["id"] != c["hf_ids"][a["content"].get<std::string>()])
        first_wrong = "the added token \"" + a["content"].get<std::string>() + "\" has id " + std::to_string(a["id"].get<int>()) +
                      ", but HF's tokenizers gives it id " + std::to_string(c["hf_ids"][a["content"].get<std::string>()].get<int>());
    TempDir dir;
    if (first_wrong.empty()) {
      const auto tok = tokenizer_from_json(dir, c["tokenizer"]);
      for (const auto& [content, id] : c["hf_ids"].items()) EXPECT_EQ(tok->encode("x" + content, false), (Ids{3, id.get<int64_t>()})) << name;
      ++loaded;
    } else {
      EXPECT_MIMIC_ERROR(tokenizer_from_json(dir, c["tokenizer"]), first_wrong);
      ++refused;
    }
  }
  EXPECT_EQ(loaded, 3u);   // in order, a model token under its own id, a special token first
  EXPECT_EQ(refused, 4u);  // out of order, a gap, starting late, a model token under another id
}

// transformers' Llama tokenizer classes: transformers 4 builds the post-processor from tokenizer_config.json's
// add_bos_token (default true) and add_eos_token (default false) whatever tokenizer.json holds, transformers 5 keeps
// tokenizer.json's (the class's [<s> TEXT] only where the file has none). Where both encode alike mimic does so; where
// they differ it refuses, naming both; any other class keeps the file's, flags or not.
TEST(HfTokenizerLoading, ALlamaTokenizerClassIsReadWhereTransformers4And5Agree) {
  json j = small_spm();  // its template: <s> $A
  j["model"]["vocab"]["</s>"] = 264;
  j["added_tokens"].push_back({{"id", 264}, {"content", "</s>"}, {"special", true}});
  TempDir dir;
  auto with = [&](const json& file, const std::string& config) {
    write_bytes(dir.file("tokenizer.json"), file.dump());
    write_bytes(dir.file("tokenizer_config.json"), config);
    return std::make_unique<text::HfTokenizer>(dir.file("tokenizer.json"), dir.file("tokenizer_config.json"));
  };
  // the hub's Llama 2 and Mistral folders: the flags say what the template does
  const auto agreeing = with(j, R"({"tokenizer_class": "LlamaTokenizer", "add_bos_token": true, "add_eos_token": false})");
  EXPECT_EQ(agreeing->encode("ab a", true), (Ids{1, 7, 5}));
  EXPECT_EQ(agreeing->document_start(), Ids{1});
  // a finetune saved with add_eos_token true: transformers 4 wrote the rebuilt template into tokenizer.json too
  json with_eos = j;
  with_eos["post_processor"]["single"].push_back({{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}});
  with_eos["post_processor"]["special_tokens"]["</s>"] = {{"id", "</s>"}, {"ids", {264}}, {"tokens", {"</s>"}}};
  const auto both = with(with_eos, R"({"tokenizer_class": "LlamaTokenizerFast", "add_eos_token": true})");  // </s>: the class's default
  EXPECT_EQ(both->encode("ab a", true), (Ids{1, 7, 5, 264}));
  EXPECT_EQ(both->document_start(), Ids{1});
  // flags against the file: each version would encode the text otherwise
  EXPECT_MIMIC_ERROR(with(j, R"({"tokenizer_class": "LlamaTokenizerFast", "add_bos_token": false, "add_eos_token": true})"),
                     "transformers 4 encodes a text as TEXT </s> (tokenizer_config.json's add_bos_token false, add_eos_token true), "
                     "transformers 5 as <s> TEXT (tokenizer.json's post_processor): make them agree");
  EXPECT_MIMIC_ERROR(with(j, R"({"tokenizer_class": "LlamaTokenizer", "add_bos_token": null})"), "transformers 4 encodes a text as TEXT (");
  // another class keeps the file's template, flags or not
  EXPECT_EQ(with(j, R"({"tokenizer_class": "PreTrainedTokenizerFast", "add_bos_token": false, "add_eos_token": true})")->encode("ab a", true),
            (Ids{1, 7, 5}));
  // without a post-processor in the file, both versions build the class's <s> TEXT
  json none = j;
  none["post_processor"] = nullptr;
  EXPECT_EQ(with(none, R"({"tokenizer_class": "LlamaTokenizerFast"})")->document_start(), Ids{1});
  EXPECT_EQ(with(none, R"({"tokenizer_class": "PreTrainedTokenizerFast"})")->document_start(), Ids{});
  EXPECT_MIMIC_ERROR(with(none, R"({"tokenizer_class": "LlamaTokenizer", "add_bos_token": false})"),
                     "transformers 5 as <s> TEXT (no post_processor: the class's <s>)");
  EXPECT_MIMIC_ERROR(with(j, R"({"tokenizer_class": "LlamaTokenizer", "add_eos_token": true, "eos_token": null})"),
                     "add_eos_token is true but no eos_token is named (LlamaTokenizer adds one; name the folder's eos_token)");
  EXPECT_MIMIC_ERROR(with(j, R"({"tokenizer_class": "LlamaTokenizer", "add_bos_token": "yes"})"), "add_bos_token");
}

// Legacy folders as transformers reads them: special_tokens_map.json names the special tokens where tokenizer_config.json
// has no added_tokens_decoder (saved before transformers 4.34, or no config at all), over the config's; a current config
// keeps its own and the map is ignored.
TEST(HfTokenizerLoading, ALegacyFolderTakesItsSpecialTokensFromSpecialTokensMapJson) {
  json j = small_spm();
  j["model"]["vocab"]["</s>"] = 264;
  j["added_tokens"].push_back({{"id", 264}, {"content", "</s>"}, {"special", true}});
  TempDir dir;
  write_bytes(dir.file("tokenizer.json"), j.dump());
  write_bytes(dir.file("special_tokens_map.json"),
              R"({"eos_token": "</s>", "pad_token": {"content": "<unk>", "lstrip": false, "normalized": false, "rstrip": false, "single_word": false}})");
  // no tokenizer_config.json: the map names them
  auto only_map = text::load_tokenizer(dir.path().string());
  EXPECT_EQ(only_map->eos_id(), 264);
  EXPECT_EQ(only_map->pad_id(), 0);
  // an old config naming other tokens: the map's win
  write_bytes(dir.file("tokenizer_config.json"), R"({"eos_token": "<s>", "pad_token": null})");
  auto legacy = text::load_tokenizer(dir.path().string());
  EXPECT_EQ(legacy->eos_id(), 264);
  EXPECT_EQ(legacy->pad_id(), 0);
  EXPECT_NE(legacy->identity(), text::HfTokenizer(dir.file("tokenizer.json"), dir.file("tokenizer_config.json")).identity());
  // a current config (added_tokens_decoder): its own tokens, the map ignored
  write_bytes(dir.file("tokenizer_config.json"), R"({"eos_token": "<s>", "added_tokens_decoder": {}})");
  auto current = text::load_tokenizer(dir.path().string());
  EXPECT_EQ(current->eos_id(), 1);
  EXPECT_EQ(current->pad_id(), -1);
  // a map naming what the file lacks is refused naming the map
  std::filesystem::remove(dir.file("tokenizer_config.json"));
  write_bytes(dir.file("special_tokens_map.json"), R"({"eos_token": "<|endoftext|>"})");
  EXPECT_MIMIC_ERROR(text::load_tokenizer(dir.path().string()),
                     dir.file("special_tokens_map.json") + ": eos_token \"<|endoftext|>\" is not a token of " + dir.file("tokenizer.json"));
  write_bytes(dir.file("special_tokens_map.json"), "[1]");
  EXPECT_MIMIC_ERROR(text::load_tokenizer(dir.path().string()), dir.file("special_tokens_map.json") + " must be a JSON object");
}

// A tokenizer_config.json that names no class (or none at all) gets the one AutoTokenizer takes from config.json: its
// tokenizer_class, else its model type's — LlamaTokenizerFast for llama and mistral, whose <s> opens a text whatever
// tokenizer.json's post-processor says, Qwen2TokenizerFast (the file's own) for qwen2 and qwen3.
TEST(HfTokenizerLoading, AFolderNamingNoClassGetsTheClassAutoTokenizerTakesForItsModelType) {
  json j = small_spm();
  j["post_processor"] = nullptr;  // an old conversion's file: no template
  TempDir dir;
  write_bytes(dir.file("tokenizer.json"), j.dump());
  const std::string d = dir.path().string();
  auto start = [&](const std::string& config) {
    write_bytes(dir.file("config.json"), config);
    return mimic::models::load_tokenizer(d)->document_start();
  };
  EXPECT_EQ(start(R"({"model_type": "llama"})"), Ids{1});
  EXPECT_EQ(mimic::models::load_tokenizer(d)->encode("ab", true), (Ids{1, 7}));
  EXPECT_EQ(text::load_tokenizer(d)->document_start(), Ids{});  // the tokenizer folder alone: the file's (none)
  EXPECT_EQ(start(R"({"model_type": "mistral"})"), Ids{1});
  EXPECT_EQ(start(R"({"model_type": "qwen2"})"), Ids{});
  EXPECT_EQ(start(R"({"model_type": "llama", "tokenizer_class": "PreTrainedTokenizerFast"})"), Ids{});  // config.json's class first
  write_bytes(dir.file("tokenizer_config.json"), R"({"tokenizer_class": "PreTrainedTokenizerFast"})");
  EXPECT_EQ(start(R"({"model_type": "llama"})"), Ids{});  // the folder's own class over the model type's
  // the class's flags are read from a config that names none: against a file without a template, the two versions differ
  write_bytes(dir.file("tokenizer_config.json"), R"({"add_bos_token": false})");
  EXPECT_MIMIC_ERROR(start(R"({"model_type": "llama"})"),
                     "LlamaTokenizerFast (AutoTokenizer's class for config.json's model_type llama): transformers 4 encodes a text as TEXT (");
  std::filesystem::remove(dir.file("tokenizer_config.json"));
  // a file without the class's <s> (a Llama 3 tokenizer.json in a llama folder naming no class) is refused with what to name
  json no_s = small_spm();
  no_s["post_processor"] = nullptr;
  no_s["added_tokens"] = json::array();
  no_s["model"]["vocab"].erase("<s>");
  write_bytes(dir.file("tokenizer.json"), no_s.dump());
  EXPECT_MIMIC_ERROR(start(R"({"model_type": "llama"})"),
                     "add_bos_token is true but the class's bos_token <s> is not a token of " + dir.file("tokenizer.json") +
                         " (LlamaTokenizerFast (AutoTokenizer's class for config.json's model_type llama) adds one; name the folder's bos_token, "
                         "or its tokenizer_class where it is not a Llama tokenizer)");
  EXPECT_EQ(start(R"({"model_type": "qwen3"})"), Ids{});
}

TEST(HfTokenizerLoading, AFolderWithOnlyTokenizerJsonLoadsAndBadFilesAreRefused) {
  TempDir dir;
  write_bytes(dir.file("tokenizer.json"), small_spm().dump());
  auto tok = text::load_tokenizer(dir.path().string());
  EXPECT_EQ(tok->kind(), "hf-bpe");
  EXPECT_EQ(tok->encode("ab", false), (Ids{7}));
  // a real folder: tokenizer.json wins over a vocab.json + merges.txt beside it (Qwen2 ships both)
  auto q = text::load_tokenizer(mimic::cache_dir() + "/assets/qwen3");
  EXPECT_EQ(q->encode("Hello world", false), (Ids{9707, 1879}));

  auto refused = [&](const json& j, const std::string& needle) {
    write_bytes(dir.file("tokenizer.json"), j.dump());
    EXPECT_MIMIC_ERROR(text::load_tokenizer(dir.path().string()), needle);
  };
  json j = small_spm();
  j["model"]["type"] = "Unigram";
  refused(j, "model type 'Unigram' is not supported (mimic reads BPE models from tokenizer.json)");
  j["model"]["type"] = "WordPiece";  // BERT's, without its vocab.txt: the hint is for it alone
  refused(j, "model type 'WordPiece' is not supported (mimic reads BPE models from tokenizer.json; for BERT's WordPiece, put the model's "
             "vocab.txt beside it, which is read instead)");
  j = small_spm();
  j["normalizer"] = {{"type", "NFKC"}};
  refused(j, "normalizer 'NFKC' is not supported");
  j = small_spm();
  j["pre_tokenizer"] = {{"type", "BertPreTokenizer"}};
  refused(j, "pre-tokenizer 'BertPreTokenizer' is not supported");
  j = small_spm();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(?<=x)"}}}, {"behavior", "Isolated"}};
  refused(j, "this group construct is not supported");
  j = small_spm();
  j["decoder"] = {{"type", "CTC"}};
  refused(j, "decoder 'CTC' is not supported");
  j = small_spm();
  j["model"]["merges"] = {"a c"};
  refused(j, "merges[0]: \"c\" is not in the vocabulary");
  j = small_spm();
  j["model"]["merges"] = {"abc"};
  refused(j, "merges[0]: expected two tokens separated by one space");
  j = small_spm();
  j["model"]["vocab"].erase("<0x41>");
  refused(j, "byte_fallback is set but token <0x41> is missing");
  j = small_spm();
  j["model"]["vocab"]["x"] = 3;
  refused(j, "id 3 is both");
  j = small_spm();
  j["model"]["vocab"]["x"] = int64_t{1} << 40;
  refused(j, "is 1099511627776, outside 0..2097151");
  j = small_spm();
  j["model"]["vocab"]["x"] = 2000000;
  refused(j, "ids reach 2000000 but only 266 tokens are defined");
  j = small_spm();
  j["model"]["vocab"]["x\nmimic: error: forged"] = 3;
  refused(j, "id 3 is both \"a\" and \"x\\nmimic: error: forged\"");  // one line, whatever the file holds
  j = small_spm();
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array()}};
  for (int d = 0; d < 40; ++d) j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {j["normalizer"]}}};
  refused(j, "normalizer: Sequence nested deeper than 16");
  {  // 30,000 deep: refused as well, not a stack overflow while the nested parts are read or copied
    j = small_spm();
    j["normalizer"] = "HERE";
    std::string deep;
    for (int d = 0; d < 30000; ++d) deep += R"({"type": "Sequence", "normalizers": [)";
    for (int d = 0; d < 30000; ++d) deep += "]}";
    std::string text = j.dump();
    text.replace(text.find("\"HERE\""), 6, deep);
    write_bytes(dir.file("tokenizer.json"), text);
    EXPECT_MIMIC_ERROR(text::load_tokenizer(dir.path().string()), "normalizer: Sequence nested deeper than 16");
  }
  j = small_spm();
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", ""}};
  refused(j, "Metaspace's replacement must be one character");
  j = small_spm();
  j["post_processor"]["special_tokens"]["<s>"]["ids"] = {5000};
  refused(j, "post_processor: id 5000 is not a token of the vocabulary");
  j = small_spm();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "^x"}}}, {"behavior", "Isolated"}};
  refused(j, "tokenizer.json: pre_tokenizer: pattern \"^x\" at character 1: anchors");
  j = small_spm();
  j["model"]["dropout"] = 0.1;
  refused(j, "BPE dropout is a training-time option");
  j = small_spm();
  j["post_processor"]["single"][0]["SpecialToken"]["id"] = "<bos>";
  refused(j, "special token '<bos>' of the template is not in special_tokens");
  {  // a dangling link is not an absent file: the folder's other tokenizer would be used without a word
    TempDir link;
    write_bytes(link.file("vocab.txt"), "[PAD]\n[UNK]\n[CLS]\n[SEP]\n");
    std::filesystem::create_symlink(link.file("blobs/missing"), link.file("tokenizer.json"));
    EXPECT_MIMIC_ERROR(text::load_tokenizer(link.path().string()), "tokenizer.json is a link to nothing");
  }
  write_bytes(dir.file("tokenizer.json"), "{\"model\": ");
  EXPECT_MIMIC_ERROR(text::load_tokenizer(dir.path().string()), "malformed JSON");
  write_bytes(dir.file("tokenizer.json"), small_spm().dump());
  write_bytes(dir.file("tokenizer_config.json"), "{\"eos_token\": \"</s>\"}");
  EXPECT_MIMIC_ERROR(text::load_tokenizer(dir.path().string()), "eos_token \"</s>\" is not a token of");
  write_bytes(dir.file("tokenizer_config.json"), "{\"eos_token\": 5}");
  EXPECT_MIMIC_ERROR(text::load_tokenizer(dir.path().string()), "eos_token must be a token (a string, or an object with a string \"content\"), got 5");
}
