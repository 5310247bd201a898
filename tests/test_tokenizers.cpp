// Tokenizers and their Unicode tables against golden data from independent Python references
// (tests/fixtures/gen_tokenizer_golden.py: OpenAI's encoder.py algorithm, HF's BertTokenizer algorithm,
// Python's unicodedata), plus round trips, special tokens and error handling.
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "mimic/core/paths.h"
#include "test_util.h"
#include "mimic/text/gpt2_bpe.h"
#include "mimic/text/tokenizer.h"
#include "mimic/text/unicode.h"
#include "mimic/text/wordpiece.h"

using mimic::test::TempDir;
using mimic::test::write_bytes;
using Ids = std::vector<int64_t>;
namespace text = mimic::text;
namespace uc = mimic::text::unicode;

namespace {
const nlohmann::json& golden() {
  static const nlohmann::json j = nlohmann::json::parse(mimic::test::read_bytes(mimic::test::fixture("tokenizer_golden.json")));
  return j;
}
const text::Gpt2Bpe& gpt2() {
  static const text::Gpt2Bpe t(mimic::asset_path("gpt2/vocab.json"), mimic::asset_path("gpt2/merges.txt"));
  return t;
}
const text::WordPiece& bert() {
  static const text::WordPiece t(mimic::asset_path("bert-base-uncased/vocab.txt"));
  return t;
}
const text::WordPiece& bert_cased() {  // the uncased vocabulary with do_lower_case = false
  static const text::WordPiece t(mimic::asset_path("bert-base-uncased/vocab.txt"), /*do_lower_case=*/false);
  return t;
}

// The input bytes of a golden case: "text" (UTF-8) or "hex" (bytes that are not valid UTF-8).
std::string case_bytes(const nlohmann::json& c) {
  if (c.contains("text")) return c["text"].get<std::string>();
  const auto hex = c["hex"].get<std::string>();
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return bytes;
}
// A JSON-escaped copy of possibly invalid UTF-8, for failure messages.
std::string printable(const std::string& s) { return nlohmann::json(s).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace); }

// The generator's checksum: h = h * 1000003 + v (mod 2^64).
struct Hash {
  uint64_t h = 0;
  void add(uint64_t v) { h = h * 1000003u + v; }
  void add_seq(const std::u32string& s) {
    add(s.size());
    for (char32_t c : s) add(c);
  }
};
constexpr char32_t kCodePoints = 0x110000;
std::u32string u32(const std::string& utf8) { return uc::to_u32(utf8); }
}  // namespace

// ------------------------------------------------------------------------------------------ Unicode
TEST(TokenizerUnicode, CategoryOfEveryCodePointMatchesPython) {
  const auto& g = golden()["unicode"];
  const auto names = g["categories"].get<std::vector<std::string>>();
  std::map<std::string, int64_t> counts;
  Hash hash;
  for (char32_t cp = 0; cp < kCodePoints; ++cp) {
    const std::string name = uc::category_name(uc::category(cp));
    ++counts[name];
    hash.add(static_cast<uint64_t>(std::find(names.begin(), names.end(), name) - names.begin()));
  }
  for (const auto& name : names) EXPECT_EQ(counts[name], g["category_counts"][name].get<int64_t>()) << name;
  EXPECT_EQ(std::to_string(hash.h), g["category_hash"].get<std::string>());
  EXPECT_EQ(uc::category(0x110000), uc::Category::Cn);
  EXPECT_TRUE(uc::is_letter(U'ß') && uc::is_number(U'½') && uc::is_punctuation(U'¿') && uc::is_other(0xE000));
}

TEST(TokenizerUnicode, WhiteSpaceSetsMatchRegexAndPython) {
  const auto& g = golden()["unicode"];
  std::vector<uint32_t> ws, py;
  for (char32_t cp = 0; cp < kCodePoints; ++cp) {
    if (uc::is_white_space(cp)) ws.push_back(cp);
    if (uc::is_python_space(cp)) py.push_back(cp);
  }
  EXPECT_EQ(ws, g["white_space"].get<std::vector<uint32_t>>());
  EXPECT_EQ(py, g["python_space"].get<std::vector<uint32_t>>());
}

TEST(TokenizerUnicode, LowerNfdNfcOfEveryCharacterMatchPython) {
  const auto& g = golden()["unicode"];
  Hash lower, nfd, nfc;
  for (char32_t cp = 0; cp < kCodePoints; ++cp) {
    std::u32string l;
    uc::append_lower(cp, l);
    lower.add_seq(l);
    nfd.add_seq(uc::nfd(std::u32string(1, cp)));
    nfc.add_seq(uc::nfc(std::u32string(1, cp)));
  }
  EXPECT_EQ(std::to_string(lower.h), g["lower_hash"].get<std::string>());
  EXPECT_EQ(std::to_string(nfd.h), g["nfd_hash"].get<std::string>());
  EXPECT_EQ(std::to_string(nfc.h), g["nfc_hash"].get<std::string>());
}

TEST(TokenizerUnicode, NormalizationOfStringsMatchesPython) {
  ASSERT_GE(golden()["normalization"].size(), 10u);
  for (const auto& c : golden()["normalization"]) {
    const auto s = u32(c["text"].get<std::string>());
    std::u32string lower;
    for (char32_t cp : s) uc::append_lower(cp, lower);
    EXPECT_EQ(uc::to_utf8(uc::nfd(s)), c["nfd"].get<std::string>()) << printable(c["text"]);
    EXPECT_EQ(uc::to_utf8(uc::nfc(s)), c["nfc"].get<std::string>()) << printable(c["text"]);
    EXPECT_EQ(uc::to_utf8(lower), c["lower"].get<std::string>()) << printable(c["text"]);
  }
}

TEST(TokenizerUnicode, Utf8DecodingMarksEachInvalidByte) {
  // "é", stray continuation, truncated "€", overlong "/", surrogate, "😀"
  const std::string s = "\xC3\xA9\x80\xE2\x82\xC0\xAF\xED\xA0\x80\xF0\x9F\x98\x80";
  std::vector<char32_t> cps;
  for (const auto& unit : uc::decode_utf8(s)) cps.push_back(unit.cp);
  const char32_t bad = uc::kInvalid;
  EXPECT_EQ(cps, (std::vector<char32_t>{U'é', bad, bad, bad, bad, bad, bad, bad, bad, U'😀'}));
  EXPECT_EQ(uc::to_utf8(uc::to_u32("a\xFF" "b")), "a\xEF\xBF\xBD" "b");  // U+FFFD per invalid byte
  EXPECT_EQ(uc::to_utf8(uc::to_u32("Ω😀")), "Ω😀");
}

// ------------------------------------------------------------------------------------------ golden ids
TEST(TokenizerGolden, Gpt2MatchesEncoderPy) {
  ASSERT_GE(golden()["cases"].size(), 300u);
  for (const auto& c : golden()["cases"]) {
    const auto bytes = case_bytes(c);
    const auto ids = gpt2().encode(bytes);
    EXPECT_EQ(nlohmann::json(ids), c["gpt2"]) << "text: " << printable(bytes);
    EXPECT_EQ(gpt2().decode(ids), bytes) << "text: " << printable(bytes);
  }
}

TEST(TokenizerGolden, BertUncasedMatchesBertTokenizer) {
  for (const auto& c : golden()["cases"]) {
    const auto bytes = case_bytes(c);
    EXPECT_EQ(nlohmann::json(bert().encode(bytes)), c["bert"]) << "text: " << printable(bytes);
  }
}

TEST(TokenizerGolden, BertCasedMatchesBertTokenizer) {
  for (const auto& c : golden()["cases"]) {
    const auto bytes = case_bytes(c);
    EXPECT_EQ(nlohmann::json(bert_cased().encode(bytes)), c["bert_cased"]) << "text: " << printable(bytes);
  }
}

// ------------------------------------------------------------------------------------------ GPT-2
TEST(Gpt2Bpe, AnchorsAndVocabulary) {
  EXPECT_EQ(gpt2().kind(), "gpt2-bpe");
  EXPECT_EQ(gpt2().encode("Hello world"), (Ids{15496, 995}));
  EXPECT_EQ(gpt2().encode(" Hello"), (Ids{18435}));
  EXPECT_EQ(gpt2().vocab_size(), 50257);
  EXPECT_EQ(gpt2().eos_id(), 50256);
  EXPECT_EQ(gpt2().cls_id(), -1);
  EXPECT_EQ(gpt2().id_to_token(995), "\xC4\xA0world");  // "Ġworld": the space byte's stand-in
  EXPECT_EQ(gpt2().token_to_id("\xC4\xA0world"), 995);
  EXPECT_EQ(gpt2().token_to_id("no such token"), -1);
  EXPECT_TRUE(gpt2().encode("").empty());
  EXPECT_EQ(gpt2().decode({}), "");
  EXPECT_MIMIC_ERROR(gpt2().decode({50257}), "outside the vocabulary");
  EXPECT_MIMIC_ERROR(gpt2().id_to_token(-1), "outside the vocabulary");
}

TEST(Gpt2Bpe, PreTokenizationFollowsTheRegex) {
  using V = std::vector<std::string>;
  // The last space of a run leads the next word; a run at the end stays whole.
  EXPECT_EQ(text::Gpt2Bpe::pretokenize("a   b  \n\n c\xC2\xA0 d  "), (V{"a", "  ", " b", "  \n\n", " c", "\xC2\xA0", " d", "  "}));
  EXPECT_EQ(text::Gpt2Bpe::pretokenize("I'm ok\n"), (V{"I", "'m", " ok", "\n"}));
  EXPECT_EQ(text::Gpt2Bpe::pretokenize("I'M they'll ''s"), (V{"I", "'", "M", " they", "'ll", " ''", "s"}));
  EXPECT_EQ(text::Gpt2Bpe::pretokenize("x1.5 \tEl Niño"), (V{"x", "1", ".", "5", " ", "\t", "El", " Niño"}));
  // \s is White_Space: U+001C is a symbol to the regex (though Python's isspace() says otherwise), U+00A0 a space.
  EXPECT_EQ(text::Gpt2Bpe::pretokenize("a  \x1C" "b"), (V{"a", " ", " \x1C", "b"}));
  EXPECT_EQ(text::Gpt2Bpe::pretokenize("a  \xC2\xA0" "b"), (V{"a", "  ", "\xC2\xA0", "b"}));
  // Each byte outside well-formed UTF-8 is a symbol character of its own: it joins the symbol run.
  EXPECT_EQ(text::Gpt2Bpe::pretokenize("a \xFF!\xC3 b"), (V{"a", " \xFF!\xC3", " b"}));
}

TEST(Gpt2Bpe, EndOfTextIsOrdinaryTextUnlessAskedFor) {
  EXPECT_EQ(gpt2().encode("a<|endoftext|>b"), (Ids{64, 27, 91, 437, 1659, 5239, 91, 29, 65}));
  EXPECT_EQ(gpt2().encode_with_special("a<|endoftext|>b"), (Ids{64, 50256, 65}));
  EXPECT_EQ(gpt2().encode_with_special("a <|endoftext|> b"), (Ids{64, 220, 50256, 275}));
  EXPECT_EQ(gpt2().encode_with_special("<|endoftext|><|endoftext|>"), (Ids{50256, 50256}));
  EXPECT_EQ(gpt2().encode_with_special("no marker"), gpt2().encode("no marker"));
  EXPECT_EQ(gpt2().decode({64, 50256, 65}), "a<|endoftext|>b");
}

TEST(Gpt2Bpe, RoundTripsArbitraryBytes) {
  std::mt19937 rng(42);
  const std::vector<std::string> fragments = {"a", " ", "'s", "\n", "é", "世界", "😀", "\xC3", "\xE2\x82", "\xF0\x9F\x98",
                                              "\x80", "\xED\xA0\x80", "\xC0\xAF", "\xFF", "\xA0"};
  for (int n = 0; n < 2000; ++n) {
    std::string s;
    const size_t len = rng() % 48;
    for (size_t i = 0; i < len; ++i) {
      if (n % 2)
        s.push_back(static_cast<char>(rng() % 256));  // uniform bytes: mostly invalid UTF-8
      else
        s += fragments[rng() % fragments.size()];  // near-valid text with broken sequences
    }
    const auto ids = gpt2().encode(s);
    ASSERT_EQ(gpt2().decode(ids), s) << printable(s);
    for (auto id : ids) ASSERT_TRUE(id >= 0 && id < 50256) << printable(s);
  }
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(gpt2().decode(gpt2().encode(all)), all);
}

// ------------------------------------------------------------------------------------------ BERT
TEST(WordPiece, AnchorsAndSpecialIds) {
  EXPECT_EQ(bert().kind(), "bert-wordpiece");
  EXPECT_EQ(bert().encode("i like strawberries"), (Ids{101, 1045, 2066, 13137, 20968, 102}));
  EXPECT_EQ(bert().encode("Strawberries", false), (Ids{13137, 20968}));
  EXPECT_EQ(bert().vocab_size(), 30522);
  EXPECT_EQ(bert().pad_id(), 0);
  EXPECT_EQ(bert().unk_id(), 100);
  EXPECT_EQ(bert().cls_id(), 101);
  EXPECT_EQ(bert().sep_id(), 102);
  EXPECT_EQ(bert().mask_id(), 103);
  EXPECT_EQ(bert().eos_id(), -1);
  EXPECT_EQ(bert().encode(""), (Ids{101, 102}));
  EXPECT_TRUE(bert().encode(" \t\n", false).empty());
  EXPECT_EQ(bert().token_to_id("##ness"), 2791);
  EXPECT_EQ(bert().token_to_id("NoSuchToken"), -1);
}

TEST(WordPiece, BasicTokenizationSteps) {
  using V = std::vector<std::string>;
  EXPECT_EQ(bert().basic_tokenize("Héllo,WORLD! \x01\xC2\xAD"), (V{"hello", ",", "world", "!"}));
  EXPECT_EQ(bert().basic_tokenize("東京Tokyo"), (V{"東", "京", "tokyo"}));
  EXPECT_EQ(bert().basic_tokenize("$5+x^2"), (V{"$", "5", "+", "x", "^", "2"}));  // ASCII symbols split too
  // Character-by-character lower-casing: no final sigma; İ → i + U+0307, whose mark is then stripped.
  EXPECT_EQ(bert().basic_tokenize("ΟΔΥΣΣΕΥΣ İ"), (V{"οδυσσευσ", "i"}));
  EXPECT_EQ(bert_cased().basic_tokenize("Cafe\xCC\x81 Déjà"), (V{"Café", "Déjà"}));  // NFC, case kept
}

TEST(WordPiece, PairsHaveTokenTypes) {
  const auto p = bert().encode_pair("i like", "strawberries");
  EXPECT_EQ(p.ids, (Ids{101, 1045, 2066, 102, 13137, 20968, 102}));
  EXPECT_EQ(p.token_type_ids, (Ids{0, 0, 0, 0, 1, 1, 1}));
  const auto empty = bert().encode_pair("", "");
  EXPECT_EQ(empty.ids, (Ids{101, 102, 102}));
  EXPECT_EQ(empty.token_type_ids, (Ids{0, 0, 1}));
}

TEST(WordPiece, DecodeJoinsContinuations) {
  const auto ids = bert().encode("Hello, World! unaffable");
  EXPECT_EQ(ids, (Ids{101, 7592, 1010, 2088, 999, 14477, 20961, 3468, 102}));
  EXPECT_EQ(bert().decode(ids), "[CLS] hello , world ! unaffable [SEP]");
  EXPECT_EQ(bert().decode(bert().encode("The Whiteness of the Whale", false)), "the whiteness of the whale");
  EXPECT_EQ(bert().decode({20961}), "##ffa");
  EXPECT_EQ(bert().decode({}), "");
  EXPECT_MIMIC_ERROR(bert().decode({30522}), "outside the vocabulary");
}

TEST(WordPiece, LongAndUnknownWordsBecomeUnk) {
  using V = std::vector<std::string>;
  EXPECT_EQ(bert().tokenize(std::string(101, 'x')), (V{"[UNK]"}));
  EXPECT_NE(bert().tokenize(std::string(100, 'x')), (V{"[UNK]"}));
  // The limit counts characters, not bytes: 60 two-byte characters are one word of 60.
  std::string e60;
  for (int i = 0; i < 60; ++i) e60 += "é";
  EXPECT_NE(bert().tokenize(e60), (V{"[UNK]"}));
  EXPECT_EQ(bert().tokenize("a \xE2\x98\x83\xE2\x98\x83 b"), (V{"a", "[UNK]", "b"}));  // no piece for ☃
}

TEST(WordPiece, LiteralSpecialTokensStayWhole) {
  EXPECT_EQ(bert().encode("x[MASK]y", false), (Ids{1060, 103, 1061}));
  EXPECT_EQ(bert().encode("[mask]", false), (Ids{1031, 7308, 1033}));  // case-sensitive, as in HF
  EXPECT_EQ(bert().encode("[CLS][SEP][PAD][UNK]", false), (Ids{101, 102, 0, 100}));
  // Invalid bytes are dropped before special tokens are looked for, as decoding with errors="ignore" does.
  EXPECT_EQ(bert().encode("[MA\xFFSK]", false), (Ids{103}));
}

// A long text goes through the basic tokenizer in pieces cut before ASCII white space, and a head stops at the piece
// that completes it: the ids are the whole's, which the sentences encoded one by one give.
TEST(WordPiece, ALongTextEncodesAsItsSentencesAndAHeadIsTheStartOfTheWhole) {
  const std::vector<std::string> sentences = {"The Whiteness of the Whale,", "東京Tokyo\tcafé", "Cafe\xCC\x81 x[MASK]y",
                                              "\xFF broken \xC3", "ΟΔΥΣΣΕΥΣ İ!", " \xCC\x81 unaffable\r\n", "[SEP]strawberries",
                                              "a\x0b" "b\x0c" "c"};  // \x0b, \x0c: controls, dropped: no cut there
  std::vector<std::string> plain_parts;  // without literal special tokens, which cut the text into short parts of their own
  for (const auto& s : sentences)
    if (s.find('[') == std::string::npos) plain_parts.push_back(s);
  EXPECT_EQ(bert().encode(std::string(70000, 'x'), false), (Ids{100}));  // one word, however long: [UNK]
  const std::vector<std::string>& plain = plain_parts;
  for (const auto& run : {std::pair{&bert(), &sentences}, std::pair{&bert_cased(), &sentences}, std::pair{&bert(), &plain}}) {
    const text::WordPiece* tok = run.first;  // (a structured binding cannot be captured in C++17)
    const auto& texts = *run.second;
    std::string whole;
    Ids expected;
    auto add = [&](const std::string& s) {
      whole += s + (whole.size() % 3 ? " " : "\n");
      const auto ids = tok->encode(s, false);
      expected.insert(expected.end(), ids.begin(), ids.end());
    };
    for (int i = 0; whole.size() < 3 * 65536; ++i) {
      add(texts[static_cast<size_t>(i) % texts.size()]);
      if (i == 2000) add(std::string(70000, 'x'));  // a word longer than a piece stays one word: [UNK]
    }
    ASSERT_GT(expected.size(), 20000u);
    EXPECT_EQ(tok->encode(whole, false), expected);
    for (size_t n : {size_t{0}, size_t{1}, size_t{5}, expected.size() / 2, expected.size() - 1, expected.size(), expected.size() + 3}) {
      const Ids head(expected.begin(), expected.begin() + static_cast<int64_t>(std::min(n, expected.size())));
      EXPECT_EQ(tok->encode_head(whole, n), head) << n;
    }
  }
  EXPECT_EQ(gpt2().encode_head("Hello world, again", 2), (Ids{15496, 995}));  // the others cut the whole's ids
  EXPECT_EQ(gpt2().encode_head("Hello", 9), (Ids{15496}));
}

// A long text with no ASCII white space is cut into pieces elsewhere — before punctuation, a CJK ideograph or another
// white space (NBSP, U+3000, U+2028) — with the whole text's ids: 20 MB of "." or of unspaced CJK was one piece of
// 1–2 GB (helper-107's probe of 2026-12-07). The reference is the basic tokenizer over the whole text at once, each
// word then through WordPiece alone. The fragments include what must not be cut before: a punctuation character that
// a combining mark follows ("=" U+0338 composes to "≠" in the cased vocabulary, and joins its neighbours into a word),
// the same after dropped control characters, and the controls themselves (dropped: the letters around them join).
TEST(WordPiece, ALongTextWithoutWhiteSpaceIsCutAtPunctuationCjkAndOtherSpacesWithTheWholesIds) {
  const std::vector<std::string> fragments = {"word", "Whale", ".", "=\xCC\xB8", "\xCC\x81", "\x01", "\x7f", "\xC2\xA0", "\xE2\x80\xA8",
                                              "\xE4\xB8\x80", "\xE3\x80\x80", "caf\xC3\xA9", "\xC4\xB0", "!", "\xEF\xBF\xBD", ",\x01\x01\xCC\x81",
                                              "<\x02\xCC\xB8x", "\xE2\x80\x94", "ab"};
  std::mt19937 rng(7);
  for (const text::WordPiece* tok : {&bert(), &bert_cased()}) {
    std::string whole;
    while (whole.size() < 3 * 65536) whole += fragments[rng() % fragments.size()];
    ASSERT_EQ(whole.find_first_of(" \t\n\r"), std::string::npos);
    Ids expected;
    for (const auto& w : tok->basic_tokenize(whole)) {
      const auto ids = tok->encode(w, false);
      expected.insert(expected.end(), ids.begin(), ids.end());
    }
    ASSERT_GT(expected.size(), 20000u);
    EXPECT_EQ(tok->encode(whole, false), expected) << tok->identity();
    for (size_t n : {size_t{1}, expected.size() / 2, expected.size()}) {
      const Ids head(expected.begin(), expected.begin() + static_cast<int64_t>(n));
      EXPECT_EQ(tok->encode_head(whole, n), head) << n;
    }
  }
  // where a piece may first end (64 KiB), a "=" that U+0338 follows, at once or after controls: in the cased vocabulary
  // the two compose to "≠", which joins "ab" and "def" into one word, so no cut is made there
  for (const std::string mid : {"=\xCC\xB8", "=\x01\x7f\xCC\xB8", ".\xCC\x81", "\xE4\xB8\x80\xCC\x81"}) {
    std::string text;
    while (text.size() < 65536) text += "abc.";
    text.resize(65536);
    if (text.back() == '.') text.back() = 'z';
    text += mid + "def." + std::string(3000, '!');
    for (const text::WordPiece* tok : {&bert(), &bert_cased()}) {
      Ids expected;
      for (const auto& w : tok->basic_tokenize(text)) {
        const auto ids = tok->encode(w, false);
        expected.insert(expected.end(), ids.begin(), ids.end());
      }
      EXPECT_EQ(tok->encode(text, false), expected) << tok->identity() << " " << printable(mid);
    }
  }
  const int64_t dot = bert().token_to_id(".");
  EXPECT_EQ(bert().encode(std::string(200000, '.'), false), Ids(200000, dot));
  EXPECT_EQ(bert().encode_head(std::string(200000, '.') + std::string(100000, '\x7f') + "x", 7), Ids(7, dot));
}

// ------------------------------------------------------------------------------------------ loading
TEST(TokenizerLoading, LoadsBothKindsFromModelDirectories) {
  TempDir dir;
  EXPECT_MIMIC_ERROR(text::load_tokenizer(dir.path().string()), "no tokenizer in " + dir.path().string());
  EXPECT_MIMIC_ERROR(text::load_tokenizer(dir.file("absent")), "tokenizer directory not found: " + dir.file("absent"));
  auto g = text::load_tokenizer(mimic::cache_dir() + "/assets/gpt2");
  EXPECT_EQ(g->kind(), "gpt2-bpe");
  EXPECT_EQ(g->encode("Hello world"), (Ids{15496, 995}));
  auto b = text::load_tokenizer(mimic::cache_dir() + "/assets/bert-base-uncased");
  EXPECT_EQ(b->kind(), "bert-wordpiece");
  EXPECT_EQ(b->encode("Hello"), (Ids{101, 7592, 102}));
}

TEST(TokenizerLoading, MalformedGpt2FilesGiveErrors) {
  TempDir dir;
  const auto vocab = dir.file("vocab.json"), merges = dir.file("merges.txt");
  write_bytes(vocab, "{}");
  EXPECT_MIMIC_ERROR(text::load_tokenizer(dir.path().string()), "merges.txt is missing");
  write_bytes(merges, "#version: 0.2\na b\n");
  write_bytes(vocab, "{\"a\": 0,");
  EXPECT_MIMIC_ERROR(text::load_tokenizer(dir.path().string()), "vocab.json (the vocabulary): malformed JSON: parse error at line 1, column 9");
  // in mimic's words, the bytes that are no UTF-8 shown as \xHH (nlohmann's tag and the raw bytes showed: helper-61)
  write_bytes(vocab, "{\"\xC3(\": 0}");
  try {
    text::load_tokenizer(dir.path().string());
    ADD_FAILURE() << "a vocabulary of ill-formed UTF-8 was read";
  } catch (const mimic::Error& e) {
    EXPECT_EQ(std::string(e.what()).find("json.exception"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("\\xC3("), std::string::npos) << e.what();
  }
  write_bytes(vocab, "[1, 2]");
  EXPECT_MIMIC_ERROR(text::load_tokenizer(dir.path().string()), "must be a non-empty JSON object");
  write_bytes(vocab, "{\"a\": \"zero\"}");
  EXPECT_MIMIC_ERROR(text::load_tokenizer(dir.path().string()), "id of token 'a' is not an integer");
  write_bytes(vocab, "{\"a\": 0, \"b\": 5}");
  EXPECT_MIMIC_ERROR(text::load_tokenizer(dir.path().string()), "has id 5 outside 0..1");
  write_bytes(vocab, "{\"a\": 0, \"b\": 0}");
  EXPECT_MIMIC_ERROR(text::load_tokenizer(dir.path().string()), "id 0 is used twice");
  write_bytes(vocab, "{\"a\": 0, \"b\": 1}");
  EXPECT_MIMIC_ERROR(text::load_tokenizer(dir.path().string()), "not a GPT-2 byte-level vocabulary");
  // the real vocabulary with broken merges
  write_bytes(vocab, mimic::test::read_bytes(mimic::asset_path("gpt2/vocab.json")));
  write_bytes(merges, "#version: 0.2\nab\n");
  EXPECT_MIMIC_ERROR(text::load_tokenizer(dir.path().string()), "merges.txt:2: expected two symbols separated by one space");
  write_bytes(merges, "#version: 0.2\nh e\nhe llo world\n");
  EXPECT_MIMIC_ERROR(text::load_tokenizer(dir.path().string()), "merges.txt:3: expected two symbols");
  write_bytes(merges, "#version: 0.2\nh e\n\xE2\x98\x83 x\n");
  EXPECT_MIMIC_ERROR(text::load_tokenizer(dir.path().string()), "merges.txt:3: '\xE2\x98\x83' is not in the vocabulary");
  write_bytes(merges, "#version: 0.2\n");
  EXPECT_MIMIC_ERROR(text::load_tokenizer(dir.path().string()), "no merges");
  // a line quoted in part, and its bytes that are no text shown (a 50 MB line was echoed whole, and a NUL cut the
  // message: helper-61's probe of 2026-12-04)
  write_bytes(merges, "#version: 0.2\n" + std::string(300, 'a') + "\n");
  EXPECT_MIMIC_ERROR(text::load_tokenizer(dir.path().string()), "merges.txt:2: expected two symbols separated by one space, got '" + std::string(80, 'a') + "… (300 bytes)'");
  write_bytes(merges, std::string("#version: 0.2\nh e\nal\0\0\n", 22));
  EXPECT_MIMIC_ERROR(text::load_tokenizer(dir.path().string()), "merges.txt:3: expected two symbols separated by one space, got 'al\\x00\\x00'");
  // a small consistent pair of files works, CRLF and all
  write_bytes(merges, "#version: 0.2\r\nh e\r\nl l\r\nhe ll\r\n");
  auto tok = text::load_tokenizer(dir.path().string());
  EXPECT_EQ(tok->encode("hell"), (Ids{tok->token_to_id("hell")}));
}

TEST(TokenizerLoading, MalformedBertFilesGiveErrors) {
  TempDir dir;
  write_bytes(dir.file("vocab.txt"), "");
  EXPECT_MIMIC_ERROR(text::load_tokenizer(dir.path().string()), "empty vocabulary");
  write_bytes(dir.file("vocab.txt"), "hello\nworld\n");
  EXPECT_MIMIC_ERROR(text::load_tokenizer(dir.path().string()), "not a BERT vocabulary");
  // bytes that are not UTF-8 (Hugging Face fails on them too) name the line
  write_bytes(dir.file("vocab.txt"), "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhel\xFFlo\n");
  EXPECT_MIMIC_ERROR(text::load_tokenizer(dir.path().string()), "vocab.txt:5: the token is not UTF-8 text (a BERT vocabulary is)");
  write_bytes(dir.file("vocab.txt"), "[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\nHello\r\nhello\r\n##s\r\n");
  auto uncased = text::load_tokenizer(dir.path().string());
  EXPECT_EQ(uncased->encode("Hello hellos HELLO"), (Ids{2, 5, 5, 6, 5, 3}));
  write_bytes(dir.file("tokenizer_config.json"), "{\"do_lower_case\": false}");
  auto cased = text::load_tokenizer(dir.path().string());
  EXPECT_EQ(cased->encode("Hello hellos HELLO"), (Ids{2, 4, 5, 6, 1, 3}));
  write_bytes(dir.file("tokenizer_config.json"), "{\"do_lower_case\": \"no\"}");
  EXPECT_MIMIC_ERROR(text::load_tokenizer(dir.path().string()), "do_lower_case must be true or false");
  write_bytes(dir.file("tokenizer_config.json"), "{oops");
  EXPECT_MIMIC_ERROR(text::load_tokenizer(dir.path().string()), "tokenizer_config.json: malformed JSON");
  // A repeated token keeps its last id (HF's load_vocab); both lines keep their id → token entry.
  write_bytes(dir.file("vocab.txt"), "[UNK]\n[CLS]\n[SEP]\nhi\nhi\n");
  const text::WordPiece dup(dir.file("vocab.txt"));
  EXPECT_EQ(dup.encode("hi", false), (Ids{4}));
  EXPECT_EQ(dup.id_to_token(3), "hi");
  EXPECT_EQ(dup.pad_id(), -1);
}
