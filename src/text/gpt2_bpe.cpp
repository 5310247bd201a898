#include "mimic/text/gpt2_bpe.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "mimic/core/error.h"
#include "mimic/core/json_keys.h"
#include "mimic/core/utf8.h"
#include "mimic/io/atomic_file.h"
#include "mimic/text/unicode.h"

namespace mimic::text {

namespace u = unicode;

namespace {

constexpr const char* kEndOfText = "<|endoftext|>";

// What the pre-tokenization regex distinguishes: \p{L}, \p{N}, \s, and everything else.
enum class Cls : uint8_t { Letter, Number, Space, Other };

Cls classify(char32_t cp) {
  if (cp < 0x80) {  // ASCII fast path
    if ((cp | 0x20) >= U'a' && (cp | 0x20) <= U'z') return Cls::Letter;
    if (cp >= U'0' && cp <= U'9') return Cls::Number;
    if (cp == U' ' || (cp >= 0x09 && cp <= 0x0D)) return Cls::Space;
    return Cls::Other;
  }
  if (cp == u::kInvalid) return Cls::Other;  // a byte outside well-formed UTF-8
  if (u::is_white_space(cp)) return Cls::Space;
  if (u::is_letter(cp)) return Cls::Letter;
  if (u::is_number(cp)) return Cls::Number;
  return Cls::Other;
}

// Length in characters of a contraction 's 't 're 've 'm 'll 'd starting at us[i] (case-sensitive, as
// in the pattern), or 0.
size_t contraction_length(const std::vector<u::Unit>& us, size_t i) {
  auto at = [&](size_t k) { return i + k < us.size() ? us[i + k].cp : char32_t{0}; };
  if (at(0) != U'\'') return 0;
  const char32_t a = at(1), b = at(2);
  if (a == U's' || a == U't' || a == U'm' || a == U'd') return 2;
  if ((a == U'r' && b == U'e') || (a == U'v' && b == U'e') || (a == U'l' && b == U'l')) return 3;
  return 0;
}

// OpenAI's bytes_to_unicode(): the printable bytes ! .. ~, ¡ .. ¬ and ® .. ÿ stand for themselves; the
// other 68 bytes get the code points from U+0100 on, in byte order.
std::vector<char32_t> bytes_to_unicode_map() {
  std::vector<char32_t> map(256);
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    map[b] = printable ? static_cast<char32_t>(b) : next++;
  }
  return map;
}

// The byte spans [begin, end) of the pieces the pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// finds, scanning as the `regex` module does: at each position the first alternative that matches wins,
// each greedy. Every character belongs to exactly one of the classes L, N, \s, other, so the
// alternatives reduce to the three cases below.
std::vector<std::pair<uint32_t, uint32_t>> split_pieces(const std::string& text) {
  const auto us = u::decode_utf8(text);
  const size_t n = us.size();
  std::vector<Cls> cls(n);
  for (size_t i = 0; i < n; ++i) cls[i] = classify(us[i].cp);
  auto run_end = [&](size_t from) {  // end of the run of characters of cls[from]'s class
    size_t k = from;
    while (k < n && cls[k] == cls[from]) ++k;
    return k;
  };
  std::vector<std::pair<uint32_t, uint32_t>> spans;
  for (size_t i = 0; i < n;) {
    size_t end;
    if (size_t c = contraction_length(us, i)) {
      end = i + c;
    } else if (cls[i] != Cls::Space) {
      end = run_end(i);  // \p{L}+ | \p{N}+ | [^\s\p{L}\p{N}]+
    } else if (us[i].cp == U' ' && i + 1 < n && cls[i + 1] != Cls::Space) {
      end = run_end(i + 1);  // the optional leading space of the same three alternatives
    } else {
      // \s+(?!\S): the whole run if it ends the text; otherwise the look-ahead makes the engine give back
      // the run's last character (left to lead the next piece), unless that would leave nothing, in which
      // case \s+ takes the single character.
      const size_t k = run_end(i);
      end = (k == n || k - i == 1) ? k : k - 1;
    }
    spans.emplace_back(us[i].begin, us[end - 1].end);
    i = end;
  }
  return spans;
}

}  // namespace

std::vector<char32_t> Gpt2Bpe::byte_alphabet() { return bytes_to_unicode_map(); }

std::vector<std::string> Gpt2Bpe::pretokenize(const std::string& text) {
  std::vector<std::string> pieces;
  for (auto [b, e] : split_pieces(text)) pieces.push_back(text.substr(b, e - b));
  return pieces;
}

Gpt2Bpe::Gpt2Bpe(const std::string& vocab_json_path, const std::string& merges_path) {
  // ---- vocabulary: a JSON object token → id, ids 0..n-1 each used once
  // (mimic's JSON reader: nlohmann's message carried its "[json.exception.parse_error.101]" tag and quoted bytes that
  // are not UTF-8 raw: helper-61's probe of 2026-12-04)
  const nlohmann::json vocab = json_parse(io::read_text_file(vocab_json_path), vocab_json_path + " (the vocabulary)");
  MIMIC_CHECK(vocab.is_object() && !vocab.empty(), vocab_json_path, ": vocabulary must be a non-empty JSON object");
  const auto n = static_cast<int64_t>(vocab.size());
  id_to_token_.resize(n);
  std::vector<bool> used(n, false);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    MIMIC_CHECK(it.value().is_number_integer(), vocab_json_path, ": id of token '", it.key(), "' is not an integer");
    const auto id = it.value().get<int64_t>();
    MIMIC_CHECK(id >= 0 && id < n, vocab_json_path, ": token '", it.key(), "' has id ", id, " outside 0..", n - 1);
    MIMIC_CHECK(!used[id], vocab_json_path, ": id ", id, " is used twice");
    used[id] = true;
    id_to_token_[id] = it.key();
    vocab_.emplace(it.key(), id);
  }

  // ---- the bytes each token stands for, and the token of each single byte
  const auto b2u = bytes_to_unicode_map();
  std::unordered_map<char32_t, uint8_t> u2b;
  for (int b = 0; b < 256; ++b) u2b[b2u[b]] = static_cast<uint8_t>(b);
  for (int b = 0; b < 256; ++b) {
    std::string s;
    u::append_utf8(b2u[b], s);
    auto it = vocab_.find(s);
    MIMIC_CHECK(it != vocab_.end(), vocab_json_path, ": byte ", b, " has no token: not a GPT-2 byte-level vocabulary");
    byte_id_[b] = static_cast<int32_t>(it->second);
  }
  token_bytes_.resize(n);
  for (int64_t id = 0; id < n; ++id) {
    std::string bytes;
    bool byte_level = true;
    for (char32_t cp : u::to_u32(id_to_token_[id])) {
      auto it = u2b.find(cp);
      if (it == u2b.end()) {
        byte_level = false;
        break;
      }
      bytes.push_back(static_cast<char>(it->second));
    }
    // A token spelled outside the byte alphabet (an added token of another vocabulary) stands for its
    // own UTF-8 text.
    token_bytes_[id] = byte_level ? bytes : id_to_token_[id];
  }
  auto eos = vocab_.find(kEndOfText);
  eos_ = eos == vocab_.end() ? -1 : eos->second;

  // ---- merges: "left right" per line, rank = order; the merged token must be in the vocabulary
  std::istringstream lines(io::read_text_file(merges_path));
  std::string line;
  int32_t rank = 0;
  size_t lineno = 0;
  while (std::getline(lines, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if ((lineno == 1 && line.rfind("#version", 0) == 0) || line.empty()) continue;
    const size_t sp = line.find(' ');
    MIMIC_CHECK(sp != std::string::npos && sp > 0 && sp + 1 < line.size() && line.find(' ', sp + 1) == std::string::npos,
                merges_path, ":", lineno, ": expected two symbols separated by one space, got '", shown_excerpt(line), "'");
    const std::string left = line.substr(0, sp), right = line.substr(sp + 1);
    auto id_of = [&](const std::string& token) {
      auto it = vocab_.find(token);
      MIMIC_CHECK(it != vocab_.end(), merges_path, ":", lineno, ": '", shown_excerpt(token), "' is not in the vocabulary ", vocab_json_path);
      return static_cast<int32_t>(it->second);
    };
    const int32_t a = id_of(left), b = id_of(right), merged = id_of(left + right);
    merges_.add(a, b, merged);
    ++rank;
  }
  MIMIC_CHECK(rank > 0, merges_path, ": no merges");
}

void Gpt2Bpe::bpe(const std::string& piece, std::vector<int64_t>& out) const {
  if (cache_.get(piece, out)) return;
  std::vector<int32_t> word;
  for (unsigned char c : piece) word.push_back(byte_id_[c]);
  merges_.apply(word);
  out.insert(out.end(), word.begin(), word.end());
  cache_.put(piece, word);
}

std::vector<int64_t> Gpt2Bpe::encode(const std::string& text, bool /*add_special_tokens*/) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 3);
  for (auto [b, e] : split_pieces(text)) bpe(text.substr(b, e - b), ids);
  return ids;
}

std::vector<int64_t> Gpt2Bpe::encode_with_special(const std::string& text) const {
  if (eos_ < 0) return encode(text);
  const std::string marker = kEndOfText;
  std::vector<int64_t> ids;
  for (size_t pos = 0;;) {
    const size_t hit = text.find(marker, pos);
    const auto part = encode(text.substr(pos, hit == std::string::npos ? std::string::npos : hit - pos));
    ids.insert(ids.end(), part.begin(), part.end());
    if (hit == std::string::npos) return ids;
    ids.push_back(eos_);
    pos = hit + marker.size();
  }
}

std::string Gpt2Bpe::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  for (auto id : ids) {
    MIMIC_CHECK(id >= 0 && id < vocab_size(), "token id ", id, " outside the vocabulary (0..", vocab_size() - 1, ")");
    out += token_bytes_[id];
  }
  return out;
}

std::string Gpt2Bpe::id_to_token(int64_t id) const {
  MIMIC_CHECK(id >= 0 && id < vocab_size(), "token id ", id, " outside the vocabulary (0..", vocab_size() - 1, ")");
  return id_to_token_[id];
}

int64_t Gpt2Bpe::token_to_id(const std::string& token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

}  // namespace mimic::text
