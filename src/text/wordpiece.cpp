#include "text/wordpiece.h"

#include <sstream>

#include "core/error.h"
#include "io/atomic_file.h"
#include "text/unicode.h"

namespace mimic::text {

namespace u = unicode;

namespace {
constexpr size_t kMaxWordChars = 100;

bool is_bert_whitespace(char32_t c) { return c == U' ' || c == U'\t' || c == U'\n' || c == U'\r' || std::string(u::category(c)) == "Zs"; }
bool is_bert_control(char32_t c) {
  if (c == U'\t' || c == U'\n' || c == U'\r') return false;
  return u::category(c)[0] == 'C';
}
bool is_bert_punctuation(char32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return true;
  return u::category(c)[0] == 'P';
}
bool is_cjk(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}
// Python's str.split(): runs of str.isspace() characters separate words.
std::vector<std::u32string> split_python_space(const std::u32string& s) {
  std::vector<std::u32string> out;
  std::u32string cur;
  for (char32_t c : s) {
    if (u::is_python_space(c)) {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}
}  // namespace

WordPiece::WordPiece(const std::string& vocab_txt_path, bool do_lower_case) : lower_(do_lower_case) {
  std::istringstream is(io::read_text_file(vocab_txt_path));
  std::string line;
  while (std::getline(is, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    // The original keeps the first id of a duplicated token.
    vocab_.emplace(line, static_cast<int64_t>(id_to_token_.size()));
    id_to_token_.push_back(line);
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
  // clean: drop NUL, U+FFFD and control characters, map white space to ' ', pad CJK ideographs.
  std::u32string cleaned;
  for (char32_t c : u::to_u32(text)) {
    if (c == 0 || c == 0xFFFD || is_bert_control(c)) continue;
    if (is_bert_whitespace(c)) {
      cleaned.push_back(U' ');
    } else if (is_cjk(c)) {
      cleaned += U' ';
      cleaned.push_back(c);
      cleaned += U' ';
    } else {
      cleaned.push_back(c);
    }
  }
  std::vector<std::string> out;
  for (const auto& word : split_python_space(cleaned)) {
    std::u32string w;
    if (lower_) {
      std::u32string lowered;
      for (char32_t c : word) u::append_lower(c, lowered);
      for (char32_t c : u::nfd(lowered))
        if (!u::is_mark_nonspacing(c)) w.push_back(c);
    } else {
      w = word;
    }
    // split on punctuation: each punctuation character is a token of its own
    std::u32string cur;
    std::u32string joined;
    for (char32_t c : w) {
      if (is_bert_punctuation(c)) {
        if (!cur.empty()) joined += cur + U' ';
        cur.clear();
        joined.push_back(c);
        joined += U' ';
      } else {
        cur.push_back(c);
      }
    }
    joined += cur;
    for (const auto& piece : split_python_space(joined)) out.push_back(u::to_utf8(piece));
  }
  return out;
}

void WordPiece::wordpiece(const std::u32string& word, std::vector<int64_t>& out) const {
  if (word.size() > kMaxWordChars) {
    out.push_back(unk_);
    return;
  }
  std::vector<int64_t> pieces;
  size_t start = 0;
  while (start < word.size()) {
    size_t end = word.size();
    int64_t found = -1;
    while (start < end) {
      std::string sub = (start > 0 ? "##" : "") + u::to_utf8(word.substr(start, end - start));
      auto it = vocab_.find(sub);
      if (it != vocab_.end()) {
        found = it->second;
        break;
      }
      --end;
    }
    if (found < 0) {
      out.push_back(unk_);
      return;
    }
    pieces.push_back(found);
    start = end;
  }
  out.insert(out.end(), pieces.begin(), pieces.end());
}

// Special tokens written literally ("[MASK]", "[SEP]", ...) are kept whole, as HF's BertTokenizer does
// for its special tokens; everything between them goes through the basic tokenizer and WordPiece.
void WordPiece::encode_segment(const std::string& text, std::vector<int64_t>& out) const {
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t hit = std::string::npos, len = 0;
    std::string which;
    for (const auto& s : specials_) {
      size_t h = text.find(s, pos);
      if (h < hit) {
        hit = h;
        len = s.size();
        which = s;
      }
    }
    std::string part = text.substr(pos, hit == std::string::npos ? std::string::npos : hit - pos);
    for (const auto& w : basic_tokenize(part)) wordpiece(u::to_u32(w), out);
    if (hit == std::string::npos) break;
    out.push_back(vocab_.at(which));
    pos = hit + len;
  }
}

std::vector<int64_t> WordPiece::encode(const std::string& text, bool add_special_tokens) const {
  std::vector<int64_t> ids;
  if (add_special_tokens) ids.push_back(cls_);
  encode_segment(text, ids);
  if (add_special_tokens) ids.push_back(sep_);
  return ids;
}

void WordPiece::encode_pair(const std::string& a, const std::string& b, std::vector<int64_t>& ids,
                            std::vector<int64_t>& token_types) const {
  ids = encode(a, true);
  token_types.assign(ids.size(), 0);
  encode_segment(b, ids);
  ids.push_back(sep_);
  token_types.resize(ids.size(), 1);
}

std::vector<std::string> WordPiece::tokenize(const std::string& text) const {
  std::vector<std::string> out;
  for (auto id : encode(text, false)) out.push_back(id_to_token_[id]);
  return out;
}

std::string WordPiece::decode(const std::vector<int64_t>& ids) const {
  // Like the original convert_tokens_to_string: join with spaces, then glue "##" continuations.
  std::string out;
  for (auto id : ids) {
    const std::string& t = id_to_token(id);
    if (t.rfind("##", 0) == 0 && !out.empty()) {
      out += t.substr(2);
    } else {
      if (!out.empty()) out += ' ';
      out += t;
    }
  }
  return out;
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
