#include "mimic/text/wordpiece.h"

#include <algorithm>
#include <sstream>

#include "mimic/core/error.h"
#include "mimic/core/utf8.h"
#include "mimic/io/atomic_file.h"
#include "mimic/text/unicode.h"

namespace mimic::text {

namespace u = unicode;

namespace {
constexpr size_t kMaxWordChars = 100;  // HF's max_input_chars_per_word (the TF original used 200)

bool is_bert_whitespace(char32_t c) {
  return c == U' ' || c == U'\t' || c == U'\n' || c == U'\r' || u::category(c) == u::Category::Zs;
}
bool is_bert_control(char32_t c) { return c != U'\t' && c != U'\n' && c != U'\r' && u::is_other(c); }
// What the basic tokenizer drops before anything else: NUL, U+FFFD, control and format characters (not \t \n \r).
bool dropped_char(char32_t c) { return c == 0 || c == 0xFFFD || is_bert_control(c); }
bool is_bert_punctuation(char32_t c) {
  // All non-alphanumeric printable ASCII counts, even $ + < = > ^ ` | ~ (symbols in Unicode).
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return true;
  return u::is_punctuation(c);
}
// The CJK Unified Ideographs blocks of the original _is_chinese_char (not Hangul, kana, ...).
bool is_cjk_ideograph(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// Python's str.split(): the non-empty runs between white space.
std::vector<std::u32string> split_python_space(const std::u32string& s) {
  std::vector<std::u32string> out;
  std::u32string cur;
  for (char32_t c : s) {
    if (!u::is_python_space(c)) {
      cur.push_back(c);
    } else if (!cur.empty()) {
      out.push_back(std::move(cur));
      cur.clear();
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

// The text without the bytes that are not part of well-formed UTF-8, like Python's
// decode("utf-8", errors="ignore").
std::string drop_invalid_utf8(const std::string& text) {
  if (is_valid_utf8(text)) return text;  // without a unit list (12 bytes a character) where nothing goes
  const auto units = u::decode_utf8(text);
  std::string out;
  for (const auto& x : units)
    if (x.cp != u::kInvalid) out.append(text, x.begin, x.end - x.begin);
  return out;
}

// lower() character by character, NFD, non-spacing marks dropped.
std::u32string lower_and_strip_accents(const std::u32string& word) {
  std::u32string lowered;
  lowered.reserve(word.size());
  for (char32_t c : word) u::append_lower(c, lowered);
  std::u32string out;
  out.reserve(lowered.size());
  for (char32_t c : u::nfd(lowered))
    if (u::category(c) != u::Category::Mn) out.push_back(c);
  return out;
}
}  // namespace

WordPiece::WordPiece(const std::string& vocab_txt_path, bool do_lower_case) : lower_(do_lower_case) {
  std::istringstream lines(io::read_text_file(vocab_txt_path));
  std::string token;
  while (std::getline(lines, token)) {
    if (!token.empty() && token.back() == '\r') token.pop_back();  // CRLF files
    // Hugging Face reads the file as UTF-8 and fails on other bytes; such a token would never match the text's
    // pieces (they are decoded first) and reached JSON as it was (helper-61's probe of 2026-12-04)
    MIMIC_CHECK(is_valid_utf8(token), vocab_txt_path, ":", id_to_token_.size() + 1, ": the token is not UTF-8 text (a BERT vocabulary is)");
    vocab_[token] = static_cast<int64_t>(id_to_token_.size());
    id_to_token_.push_back(std::move(token));
  }
  MIMIC_CHECK(!id_to_token_.empty(), vocab_txt_path, ": empty vocabulary");
  auto find = [&](const char* t) {
    auto it = vocab_.find(t);
    return it == vocab_.end() ? int64_t{-1} : it->second;
  };
  pad_ = find("[PAD]");
  unk_ = find("[UNK]");
  cls_ = find("[CLS]");
  sep_ = find("[SEP]");
  mask_ = find("[MASK]");
  MIMIC_CHECK(unk_ >= 0 && cls_ >= 0 && sep_ >= 0, vocab_txt_path, ": not a BERT vocabulary ([UNK], [CLS] or [SEP] missing)");
  for (const char* s : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"})
    if (vocab_.count(s)) specials_.push_back(s);
}

std::vector<std::string> WordPiece::basic_tokenize(const std::string& text) const {
  std::u32string cleaned;
  for (char32_t c : u::to_u32(text)) {  // bytes outside well-formed UTF-8 arrive as U+FFFD and go
    if (dropped_char(c)) continue;
    if (is_bert_whitespace(c)) {
      cleaned.push_back(U' ');
    } else if (is_cjk_ideograph(c)) {
      cleaned.append({U' ', c, U' '});
    } else {
      cleaned.push_back(c);
    }
  }
  // HF normalises to NFC before splitting; with accent stripping NFD follows anyway, which undoes any
  // composition, so NFC is only needed when the case is kept.
  if (!lower_) cleaned = u::nfc(cleaned);

  std::vector<std::string> out;
  for (const auto& word : split_python_space(cleaned)) {
    const std::u32string w = lower_ ? lower_and_strip_accents(word) : word;
    // Each punctuation character becomes a word of its own. (Lower-casing and NFD never produce white
    // space, so no second white-space split is needed.)
    std::u32string cur;
    for (char32_t c : w) {
      if (is_bert_punctuation(c)) {
        if (!cur.empty()) out.push_back(u::to_utf8(cur));
        cur.clear();
        out.push_back(u::to_utf8(std::u32string(1, c)));
      } else {
        cur.push_back(c);
      }
    }
    if (!cur.empty()) out.push_back(u::to_utf8(cur));
  }
  return out;
}

void WordPiece::wordpiece(const std::string& word, std::vector<int64_t>& out) const {
  // Byte offsets of the character boundaries: candidates are cut at characters, not bytes.
  std::vector<size_t> cuts;
  for (const auto& unit : u::decode_utf8(word)) cuts.push_back(unit.begin);
  const size_t chars = cuts.size();
  cuts.push_back(word.size());
  if (chars > kMaxWordChars) {
    out.push_back(unk_);
    return;
  }
  const size_t first = out.size();
  std::string candidate;
  for (size_t start = 0; start < chars;) {
    size_t end = chars;
    int64_t found = -1;
    for (; end > start; --end) {  // longest match first
      candidate.assign(start > 0 ? "##" : "");
      candidate.append(word, cuts[start], cuts[end] - cuts[start]);
      auto it = vocab_.find(candidate);
      if (it != vocab_.end()) {
        found = it->second;
        break;
      }
    }
    if (found < 0) {  // some rest matches nothing: the whole word is unknown
      out.resize(first);
      out.push_back(unk_);
      return;
    }
    out.push_back(found);
    start = end;
  }
}

namespace {
// The code point of the well-formed UTF-8 character starting at byte i of s, and its length in bytes.
char32_t decode_at(const std::string& s, size_t i, size_t& len) {
  const auto b = static_cast<unsigned char>(s[i]);
  len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  if (len == 1) return b;
  char32_t c = b & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
  for (size_t k = 1; k < len; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return c;
}
bool ascii_space(unsigned char b) { return b == ' ' || b == '\t' || b == '\n' || b == '\r'; }

// A text (between special tokens) can be cut before byte i with the same words on both sides as in the whole: before
// ASCII white space, as before any white space (BERT's and what Python's split() splits on), a CJK ideograph or a
// punctuation character — each a word boundary of the basic tokenizer, and each a character no canonical composition
// takes as its second (so NFC, for a cased vocabulary, composes nothing across the cut). A punctuation character with a
// combining mark after it is not a cut: "=" and U+0338 compose to "≠", a symbol, which does not split the word it is in.
// The mark may follow after characters the tokenizer drops; more than a few of those and no cut is made there (not
// cutting is always right).
bool word_boundary_at(const std::string& part, size_t i) {
  const auto b = static_cast<unsigned char>(part[i]);
  if (ascii_space(b)) return true;
  if (b >= 0x80 && b < 0xC0) return false;  // inside a character
  size_t len = 0;
  const char32_t c = decode_at(part, i, len);
  if (dropped_char(c)) return false;
  const bool space = is_bert_whitespace(c) || u::is_python_space(c);
  if (space || is_cjk_ideograph(c)) return true;
  if (!is_bert_punctuation(c)) return false;
  for (size_t j = i + len, skipped = 0; j < part.size(); j += len) {
    const char32_t next = decode_at(part, j, len);
    if (!dropped_char(next)) {
      const auto cat = u::category(next);
      return cat != u::Category::Mn && cat != u::Category::Mc && cat != u::Category::Me;
    }
    if (++skipped > 8) return false;
  }
  return true;
}
}  // namespace

// The text between special tokens, through the basic tokenizer and WordPiece a piece of about kPieceBytes at a time,
// each piece ending at a word boundary (word_boundary_at; every step of the basic tokenizer before its split maps a
// character by itself), so that the pieces' ids are the whole text's. The bytes it drops first (ASCII control
// characters) are left out of a piece as it is read. A long text is thus held as words a piece at a time (a 38 MB
// line's words all at once added 1.3 GB; 20 MB of "." in one piece, with no white space to cut before, 2 GB), and a
// head (`limit`) reads no piece past the one that completes it. A single word longer than a piece (no boundary in it)
// stays whole.
void WordPiece::encode_words(const std::string& part, std::vector<int64_t>& out, size_t limit) const {
  constexpr size_t kPieceBytes = size_t{1} << 16;
  std::string piece;
  for (size_t begin = 0; begin < part.size() && out.size() < limit;) {
    piece.clear();
    size_t i = begin;
    for (; i < part.size(); ++i) {
      if (piece.size() >= kPieceBytes && word_boundary_at(part, i)) break;
      const auto b = static_cast<unsigned char>(part[i]);
      if (b >= 0x80 || !dropped_char(b)) piece.push_back(static_cast<char>(b));  // an ASCII byte the tokenizer drops is left out
    }
    for (const auto& w : basic_tokenize(piece)) {
      if (out.size() >= limit) return;
      wordpiece(w, out);
    }
    begin = i;
  }
}

// Special tokens written literally are kept whole, as HF's BertTokenizer does with its special tokens;
// the text between them goes through the basic tokenizer and WordPiece.
void WordPiece::encode_segment(const std::string& raw, std::vector<int64_t>& out, size_t limit) const {
  const std::string text = drop_invalid_utf8(raw);
  // each special token's next occurrence at or after pos, searched again only once pos has passed it (searching every
  // special to the end of the text after each match took time quadratic in a text of many: helper-104)
  std::vector<size_t> next;
  for (const auto& s : specials_) next.push_back(text.find(s));
  for (size_t pos = 0;;) {
    size_t hit = std::string::npos;
    const std::string* special = nullptr;
    for (size_t i = 0; i < specials_.size(); ++i) {  // the earliest occurrence of any special token
      if (next[i] != std::string::npos && next[i] < pos) next[i] = text.find(specials_[i], pos);
      if (next[i] < hit) {
        hit = next[i];
        special = &specials_[i];
      }
    }
    const std::string part = text.substr(pos, hit == std::string::npos ? std::string::npos : hit - pos);
    encode_words(part, out, limit);
    if (!special || out.size() >= limit) return;
    out.push_back(vocab_.at(*special));
    pos = hit + special->size();
  }
}

std::vector<int64_t> WordPiece::encode(const std::string& text, bool add_special_tokens) const {
  std::vector<int64_t> ids;
  if (add_special_tokens) ids.push_back(cls_);
  encode_segment(text, ids);
  if (add_special_tokens) ids.push_back(sep_);
  return ids;
}

std::vector<int64_t> WordPiece::encode_head(const std::string& text, size_t n) const {
  std::vector<int64_t> ids;
  if (n > 0) encode_segment(text, ids, n);
  if (ids.size() > n) ids.resize(n);  // the last word's pieces past n
  return ids;
}

WordPiece::Pair WordPiece::encode_pair(const std::string& a, const std::string& b) const {
  Pair p;
  p.ids = encode(a, true);
  p.token_type_ids.assign(p.ids.size(), 0);
  encode_segment(b, p.ids);
  p.ids.push_back(sep_);
  p.token_type_ids.resize(p.ids.size(), 1);
  return p;
}

std::vector<std::string> WordPiece::tokenize(const std::string& text) const {
  std::vector<std::string> out;
  for (auto id : encode(text, false)) out.push_back(id_to_token_[id]);
  return out;
}

std::string WordPiece::decode(const std::vector<int64_t>& ids) const {
  // " ".join(tokens).replace(" ##", "").strip()
  std::string joined;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) joined += ' ';
    joined += id_to_token(ids[i]);
  }
  std::string out;
  for (size_t i = 0; i < joined.size();) {
    if (joined.compare(i, 3, " ##") == 0) {
      i += 3;
    } else {
      out += joined[i++];
    }
  }
  const size_t b = out.find_first_not_of(' '), e = out.find_last_not_of(' ');
  return b == std::string::npos ? std::string() : out.substr(b, e - b + 1);
}

std::string WordPiece::id_to_token(int64_t id) const {
  MIMIC_CHECK(id >= 0 && id < vocab_size(), "token id ", id, " outside the vocabulary (0..", vocab_size() - 1, ")");
  return id_to_token_[id];
}

int64_t WordPiece::token_to_id(const std::string& token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

}  // namespace mimic::text
