#include "text/gpt2_bpe.h"

#include <climits>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "io/atomic_file.h"
#include "text/unicode.h"

namespace mimic::text {

namespace u = unicode;

namespace {

enum class Cls { Letter, Number, Space, Other };

Cls classify(char32_t cp) {
  if (cp == u::kInvalid) return Cls::Other;
  if (u::is_white_space(cp)) return Cls::Space;
  if (u::is_letter(cp)) return Cls::Letter;
  if (u::is_number(cp)) return Cls::Number;
  return Cls::Other;
}

// Length (in units) of a contraction at units[i], or 0: 's 't 're 've 'm 'll 'd (case-sensitive).
size_t contraction(const std::vector<u::Unit>& us, size_t i) {
  if (us[i].cp != U'\'' || i + 1 >= us.size()) return 0;
  char32_t a = us[i + 1].cp;
  if (a == U's' || a == U't' || a == U'm' || a == U'd') return 2;
  if (i + 2 < us.size()) {
    char32_t b = us[i + 2].cp;
    if ((a == U'r' && b == U'e') || (a == U'v' && b == U'e') || (a == U'l' && b == U'l')) return 3;
  }
  return 0;
}

}  // namespace

// The pattern  's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+  matched by
// hand, alternatives tried in order at each position, with the regex engine's backtracking for
// \s+(?!\S): a whitespace run followed by a non-space gives up its last character, which then leads the
// next piece (" word").
std::vector<std::string> Gpt2Bpe::pretokenize(const std::string& text) {
  auto us = u::decode_utf8(text);
  std::vector<Cls> cls(us.size());
  for (size_t i = 0; i < us.size(); ++i) cls[i] = classify(us[i].cp);
  std::vector<std::string> pieces;
  size_t i = 0;
  const size_t n = us.size();
  auto run = [&](size_t from, Cls c) {
    while (from < n && cls[from] == c) ++from;
    return from;
  };
  while (i < n) {
    size_t end = 0;
    if (size_t c = contraction(us, i)) {
      end = i + c;
    } else {
      size_t j = (us[i].cp == U' ' && i + 1 < n && cls[i + 1] != Cls::Space) ? i + 1 : i;  // optional leading space
      if (cls[j] != Cls::Space) {
        end = run(j, cls[j]);
      } else {
        size_t k = run(i, Cls::Space);
        // \s+(?!\S): all of the run at the end of text, else all but its last character (if that leaves any)
        end = (k == n) ? k : (k - i >= 2 ? k - 1 : k);
      }
    }
    pieces.push_back(text.substr(us[i].begin, us[end - 1].end - us[i].begin));
    i = end;
  }
  return pieces;
}

Gpt2Bpe::Gpt2Bpe(const std::string& vocab_json_path, const std::string& merges_path) {
  // bytes_to_unicode: printable bytes stand for themselves, the others map to U+0100 onwards.
  int next = 0;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    char32_t cp = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + next++);
    std::string s;
    u::append_utf8(cp, s);
    byte_to_unicode_[b] = s;
    unicode_to_byte_[s] = static_cast<uint8_t>(b);
  }
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(io::read_text_file(vocab_json_path));
  } catch (const nlohmann::json::exception& e) {
    fail(vocab_json_path, ": malformed vocabulary JSON: ", e.what());
  }
  MIMIC_CHECK(vocab.is_object() && !vocab.empty(), vocab_json_path, ": vocabulary must be a non-empty JSON object");
  id_to_token_.resize(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    MIMIC_CHECK(it.value().is_number_integer(), vocab_json_path, ": id of token '", it.key(), "' is not an integer");
    int64_t id = it.value().get<int64_t>();
    MIMIC_CHECK(id >= 0 && id < static_cast<int64_t>(vocab.size()), vocab_json_path, ": token '", it.key(), "' has id ", id,
                " outside 0..", vocab.size() - 1);
    MIMIC_CHECK(id_to_token_[id].empty(), vocab_json_path, ": id ", id, " is used twice");
    id_to_token_[id] = it.key();
    vocab_[it.key()] = id;
  }
  for (int b = 0; b < 256; ++b)
    MIMIC_CHECK(vocab_.count(byte_to_unicode_[b]), vocab_json_path, ": byte ", b, " has no token: not a GPT-2 byte-level vocabulary");
  auto eos = vocab_.find("<|endoftext|>");
  eos_ = eos == vocab_.end() ? -1 : eos->second;

  std::istringstream merges(io::read_text_file(merges_path));
  std::string line;
  int rank = 0, lineno = 0;
  while (std::getline(merges, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (lineno == 1 && line.rfind("#version", 0) == 0) continue;
    if (line.empty()) continue;
    auto sp = line.find(' ');
    MIMIC_CHECK(sp != std::string::npos && sp > 0 && sp + 1 < line.size() && line.find(' ', sp + 1) == std::string::npos,
                merges_path, ":", lineno, ": expected two symbols separated by one space, got '", line, "'");
    ranks_.emplace(line, rank++);
  }
  MIMIC_CHECK(rank > 0, merges_path, ": no merges");
}

void Gpt2Bpe::bpe(const std::string& piece, std::vector<int64_t>& out) const {
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(piece);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<std::string> word;
  for (unsigned char b : piece) word.push_back(byte_to_unicode_[b]);
  while (word.size() > 1) {
    int best = INT_MAX;
    size_t at = 0;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      auto it = ranks_.find(word[i] + " " + word[i + 1]);
      if (it != ranks_.end() && it->second < best) {
        best = it->second;
        at = i;
      }
    }
    if (best == INT_MAX) break;
    // Merge every occurrence of the best pair, left to right.
    const std::string first = word[at], second = word[at + 1];
    std::vector<std::string> merged;
    merged.reserve(word.size());
    for (size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && word[i] == first && word[i + 1] == second) {
        merged.push_back(first + second);
        i += 2;
      } else {
        merged.push_back(word[i++]);
      }
    }
    word.swap(merged);
  }
  std::vector<int64_t> ids;
  for (const auto& w : word) {
    auto it = vocab_.find(w);
    MIMIC_CHECK(it != vocab_.end(), "BPE produced '", w, "', which the vocabulary lacks (merges and vocabulary do not match)");
    ids.push_back(it->second);
  }
  out.insert(out.end(), ids.begin(), ids.end());
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() < 200000) cache_.emplace(piece, std::move(ids));
}

std::vector<int64_t> Gpt2Bpe::encode(const std::string& text, bool) const {
  std::vector<int64_t> ids;
  for (const auto& piece : pretokenize(text)) bpe(piece, ids);
  return ids;
}

std::vector<int64_t> Gpt2Bpe::encode_with_special(const std::string& text) const {
  static const std::string kEos = "<|endoftext|>";
  std::vector<int64_t> ids;
  size_t pos = 0;
  while (true) {
    size_t hit = eos_ >= 0 ? text.find(kEos, pos) : std::string::npos;
    auto part = encode(text.substr(pos, hit == std::string::npos ? std::string::npos : hit - pos));
    ids.insert(ids.end(), part.begin(), part.end());
    if (hit == std::string::npos) break;
    ids.push_back(eos_);
    pos = hit + kEos.size();
  }
  return ids;
}

std::string Gpt2Bpe::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  for (auto id : ids) {
    const std::string& tok = id_to_token(id);
    for (const auto& unit : u::decode_utf8(tok)) {
      auto it = unicode_to_byte_.find(tok.substr(unit.begin, unit.end - unit.begin));
      MIMIC_CHECK(it != unicode_to_byte_.end(), "token ", id, " is not byte-level");
      out.push_back(static_cast<char>(it->second));
    }
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
