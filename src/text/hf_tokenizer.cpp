#include "mimic/text/hf_tokenizer.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>

#include "mimic/core/error.h"
#include "mimic/core/json_keys.h"
#include "mimic/io/atomic_file.h"
#include "mimic/text/bpe.h"
#include "mimic/text/gpt2_bpe.h"
#include "mimic/text/pattern.h"
#include "mimic/text/unicode.h"

namespace mimic::text {

namespace u = unicode;
using json = nlohmann::json;

namespace {
constexpr int64_t kMaxId = int64_t{1} << 21;  // ids past this are a broken file, not a vocabulary to allocate (Gemma: 262,144)
constexpr int kMaxNesting = 16;                // Sequence inside Sequence: real files nest one level
constexpr size_t kMaxPrepend = 64;             // bytes a Prepend normalizer may add to each segment

// A string of the file in a message: JSON-quoted, so that a newline or an escape sequence in it cannot forge lines.
std::string quoted(const std::string& s) { return json(s).dump(-1, ' ', true, json::error_handler_t::replace); }

// A token id from the file: an integer in [0, kMaxId), read without wrapping an unsigned 64-bit value.
int64_t read_id(const json& v, const std::string& what) {
  MIMIC_CHECK(v.is_number_integer(), what, " must be an integer, got ", v.dump());
  const bool ok = v.is_number_unsigned() ? v.get<uint64_t>() < static_cast<uint64_t>(kMaxId) : (v.get<int64_t>() >= 0 && v.get<int64_t>() < kMaxId);
  MIMIC_CHECK(ok, what, " is ", v.dump(), ", outside 0..", kMaxId - 1);
  return v.get<int64_t>();
}

// The text of `s` as code points (kInvalid for a byte outside well-formed UTF-8), with the byte offset of
// each code point (and of the end) to map matches back to bytes.
struct Units {
  std::u32string cps;
  std::vector<uint32_t> at;  // cps.size() + 1 offsets
  explicit Units(const std::string& s) {
    for (const auto& unit : u::decode_utf8(s)) {
      cps.push_back(unit.cp);
      at.push_back(unit.begin);
    }
    at.push_back(static_cast<uint32_t>(s.size()));
  }
};

bool ascii(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

// f applied to each run of well-formed UTF-8 in s; bytes outside it pass through untouched.
std::string map_valid_runs(const std::string& s, const std::function<std::u32string(const std::u32string&)>& f) {
  std::string out;
  std::u32string run;
  auto flush = [&] {
    if (!run.empty()) out += u::to_utf8(f(run));
    run.clear();
  };
  for (const auto& unit : u::decode_utf8(s)) {
    if (unit.cp == u::kInvalid) {
      flush();
      out.append(s, unit.begin, unit.end - unit.begin);
    } else {
      run.push_back(unit.cp);
    }
  }
  flush();
  return out;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) s.replace(pos, from.size(), to);
  return s;
}

// A Split/Replace "pattern": {"String": s} or {"Regex": r}. Returns the non-empty matches' byte spans.
class Matcher {
 public:
  Matcher(const json& pattern, const std::string& where) : where_(where) {
    MIMIC_CHECK(pattern.is_object() && pattern.size() == 1, where, ": pattern must be {\"String\": ...} or {\"Regex\": ...}");
    if (pattern.contains("String")) {
      literal_ = json_string(pattern, "String", where);
      MIMIC_CHECK(!literal_.empty(), where, ": empty String pattern");
    } else {
      try {
        regex_ = std::make_shared<Pattern>(json_string(pattern, "Regex", where));
      } catch (const Error& e) {
        fail(where, ": ", e.what());
      }
    }
  }
  std::vector<std::pair<size_t, size_t>> spans(const std::string& s) const {
    std::vector<std::pair<size_t, size_t>> out;
    if (!regex_) {
      for (size_t pos = 0; (pos = s.find(literal_, pos)) != std::string::npos; pos += literal_.size())
        out.emplace_back(pos, pos + literal_.size());
      return out;
    }
    const Units us(s);
    size_t b, e;
    uint64_t budget = Pattern::budget_for(us.cps.size());  // one for the whole text: many cheap searches add up too
    try {
      for (size_t from = 0; from <= us.cps.size() && regex_->find(us.cps, from, b, e, budget);) {
        if (e > b) out.emplace_back(us.at[b], us.at[e]);
        from = e > b ? e : b + 1;
      }
    } catch (const Error& x) {
      fail(where_, ": ", x.what());
    }
    return out;
  }

 private:
  std::string where_;
  std::string literal_;
  std::shared_ptr<Pattern> regex_;
};

// HF's SplitDelimiterBehavior applied to the matches of a piece.
enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

std::vector<std::string> split(const std::string& s, const std::vector<std::pair<size_t, size_t>>& matches, Behavior how,
                               bool invert) {
  struct Seg {
    size_t b, e;
    bool match;
  };
  std::vector<Seg> segs;
  size_t prev = 0;
  for (auto [b, e] : matches) {
    if (b > prev) segs.push_back({prev, b, invert});
    segs.push_back({b, e, !invert});
    prev = e;
  }
  if (prev < s.size()) segs.push_back({prev, s.size(), invert});
  std::vector<std::pair<size_t, size_t>> out;  // spans
  bool last_was_match = false;
  for (const auto& g : segs) {
    if (!g.match) {
      if (how == Behavior::MergedWithNext && last_was_match && !out.empty()) {
        out.back().second = g.e;
      } else {
        out.emplace_back(g.b, g.e);
      }
      last_was_match = false;
      continue;
    }
    switch (how) {
      case Behavior::Removed: break;
      case Behavior::Isolated: out.emplace_back(g.b, g.e); break;
      case Behavior::MergedWithPrevious:
        if (!out.empty() && !last_was_match && out.back().second == g.b) out.back().second = g.e;
        else out.emplace_back(g.b, g.e);
        break;
      case Behavior::MergedWithNext:
        if (last_was_match && !out.empty()) out.back().second = g.e;  // matches in a row lead the next gap together
        else out.emplace_back(g.b, g.e);
        break;
      case Behavior::Contiguous:
        if (last_was_match && !out.empty()) out.back().second = g.e;
        else out.emplace_back(g.b, g.e);
        break;
    }
    last_was_match = true;
  }
  std::vector<std::string> pieces;
  for (auto [b, e] : out)
    if (e > b) pieces.push_back(s.substr(b, e - b));
  return pieces;
}

Behavior behavior_of(const std::string& name, const std::string& where) {
  if (name == "Removed") return Behavior::Removed;
  if (name == "Isolated") return Behavior::Isolated;
  if (name == "MergedWithPrevious") return Behavior::MergedWithPrevious;
  if (name == "MergedWithNext") return Behavior::MergedWithNext;
  if (name == "Contiguous") return Behavior::Contiguous;
  fail(where, ": unknown split behavior '", name, "'");
}

// A token named in tokenizer_config.json: a string, {"content": ...}, or null.
std::string config_token(const json& cfg, const std::string& key, const std::string& where) {
  if (!cfg.is_object() || !cfg.contains(key) || cfg[key].is_null()) return "";
  const json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  MIMIC_CHECK(v.is_object() && v.contains("content") && v["content"].is_string(), where, ": ", key,
              " must be a token (a string, or an object with a string \"content\"), got ", v.dump());
  return v["content"].get<std::string>();
}

// A part of the file by reference, null when absent (json::value would copy it: recursively, so a part nested
// 30,000 deep overflowed the stack before its depth was checked).
const json& part(const json& j, const char* key) {
  static const json none;
  auto it = j.find(key);
  return it == j.end() ? none : *it;
}

std::string type_of(const json& j, const std::string& where, int depth) {
  MIMIC_CHECK(depth <= kMaxNesting, where, ": Sequence nested deeper than ", kMaxNesting);
  MIMIC_CHECK(j.is_object(), where, " must be an object");
  return json_string(j, "type", where);
}
}  // namespace

namespace {
// The byte each character of a byte-level vocabulary stands for (GPT-2's bytes_to_unicode, inverted).
std::unordered_map<char32_t, char> byte_of_char() {
  std::unordered_map<char32_t, char> u2b;
  const auto b2u = Gpt2Bpe::byte_alphabet();
  for (int b = 0; b < 256; ++b) u2b[b2u[b]] = static_cast<char>(b);
  return u2b;
}

// The bytes a byte-level spelling stands for; a spelling with a character outside the alphabet (an added token)
// stands for its own UTF-8 text, as in HF.
std::string spelling_bytes(const std::string& spelling, const std::unordered_map<char32_t, char>& u2b) {
  std::string bytes;
  for (char32_t c : u::to_u32(spelling)) {
    auto it = u2b.find(c);
    if (it == u2b.end()) return spelling;
    bytes.push_back(it->second);
  }
  return bytes;
}
}  // namespace

struct HfTokenizer::Pipeline {
  std::string path;
  const std::unordered_map<char32_t, char> u2b = byte_of_char();
  using Normalize = std::function<std::string(const std::string&)>;
  // pieces, and whether this is the text's first segment (Metaspace's prepend_scheme "first")
  using PreTokenize = std::function<std::vector<std::string>(std::vector<std::string>, bool)>;
  using Decode = std::function<std::vector<std::string>(std::vector<std::string>)>;
  using PostProcess = std::function<std::vector<int64_t>(std::vector<int64_t>)>;
  Normalize normalize;
  PreTokenize pre_tokenize;
  Decode decode;
  PostProcess post_process;

  // the BPE model
  std::unordered_map<std::string, int32_t> vocab;  // the model's vocabulary: key = bytes (byte-level) or spelling
  BpeMerges merges;
  int32_t byte_id[256];      // byte-level: the token of each byte (-1: none)
  int32_t fallback_id[256];  // byte_fallback: the <0xHH> tokens (-1: none)
  bool byte_fallback = false, fuse_unk = false, ignore_merges = false;
  int32_t unk = -1;
  PieceCache cache;

  // added tokens
  struct Added {
    std::string content;
    int64_t id;
    bool lstrip, rstrip, single_word;
  };
  std::vector<Added> added;
  // a byte trie of the added tokens: node → (byte → child), and the token ending at each node (-1: none)
  std::vector<std::unordered_map<unsigned char, int32_t>> trie{1};
  std::vector<int32_t> trie_token{-1};
  std::unordered_map<std::string, int64_t> added_ids;
  std::unordered_map<std::string, int64_t> special_ids;  // post-processor names → id

  std::string where(const std::string& part) const { return path + ": " + part; }

  Normalize normalizer(const json& n, int depth = 0);
  PreTokenize pre_tokenizer(const json& n, bool& byte_level, int depth = 0);
  Decode decoder(const json& n, int depth = 0);
  PostProcess post_processor(const json& n, int64_t& cls, int64_t& sep, int depth = 0);
  std::vector<int64_t> post_ids;  // every id the post-processor adds (checked against the vocabulary once read)
};

HfTokenizer::Pipeline::Normalize HfTokenizer::Pipeline::normalizer(const json& n, int depth) {
  if (n.is_null()) return {};
  const std::string w = where("normalizer");
  const std::string type = type_of(n, w, depth);
  if (type == "NFC" || type == "NFD") {
    const bool compose = type == "NFC";
    return [compose](const std::string& s) {
      if (ascii(s)) return s;
      return map_valid_runs(s, [compose](const std::u32string& r) { return compose ? u::nfc(r) : u::nfd(r); });
    };
  }
  if (type == "Lowercase") {
    return [](const std::string& s) {
      return map_valid_runs(s, [](const std::u32string& r) {
        std::u32string out;
        for (char32_t c : r) u::append_lower(c, out);
        return out;
      });
    };
  }
  if (type == "Prepend") {
    const std::string prefix = json_string(n, "prepend", w);
    MIMIC_CHECK(prefix.size() <= kMaxPrepend, w, ": Prepend of ", prefix.size(), " bytes (at most ", kMaxPrepend, ")");
    return [prefix](const std::string& s) { return s.empty() ? s : prefix + s; };
  }
  if (type == "Replace") {
    const Matcher m(json_key(n, "pattern", w), w);
    const std::string content = json_string(n, "content", w);
    return [m, content](const std::string& s) {
      std::string out;
      size_t prev = 0;
      for (auto [b, e] : m.spans(s)) out.append(s, prev, b - prev).append(content), prev = e;
      return out.append(s, prev, std::string::npos);
    };
  }
  if (type == "Strip") {
    const bool left = json_bool_or(n, "strip_left", w, true), right = json_bool_or(n, "strip_right", w, true);
    return [left, right](const std::string& s) {
      const Units us(s);
      size_t b = 0, e = us.cps.size();
      auto space = [&](size_t i) { return us.cps[i] != u::kInvalid && u::is_white_space(us.cps[i]); };
      while (left && b < e && space(b)) ++b;
      while (right && e > b && space(e - 1)) --e;
      return s.substr(us.at[b], us.at[e] - us.at[b]);
    };
  }
  if (type == "Sequence") {
    std::vector<Normalize> steps;
    for (const auto& step : json_key(n, "normalizers", w))
      if (auto f = normalizer(step, depth + 1)) steps.push_back(f);
    return [steps](const std::string& s) {
      std::string out = s;
      for (const auto& f : steps) out = f(out);
      return out;
    };
  }
  fail(w, ": normalizer '", type, "' is not supported (mimic reads NFC, NFD, Lowercase, Prepend, Replace, Strip, Sequence)");
}

HfTokenizer::Pipeline::PreTokenize HfTokenizer::Pipeline::pre_tokenizer(const json& n, bool& byte_level, int depth) {
  if (n.is_null()) return {};
  const std::string w = where("pre_tokenizer");
  const std::string type = type_of(n, w, depth);
  auto each = [](std::function<std::vector<std::string>(const std::string&, bool)> f) -> PreTokenize {
    return [f](std::vector<std::string> pieces, bool first) {
      std::vector<std::string> out;
      for (size_t i = 0; i < pieces.size(); ++i) {
        auto parts = f(pieces[i], first && i == 0);
        out.insert(out.end(), std::make_move_iterator(parts.begin()), std::make_move_iterator(parts.end()));
      }
      return out;
    };
  };
  auto by_pattern = [&](const std::string& regex, Behavior how, bool invert) {
    const Matcher m(json{{"Regex", regex}}, w);
    return each([m, how, invert](const std::string& s, bool) { return split(s, m.spans(s), how, invert); });
  };
  if (type == "Split") {
    const Matcher m(json_key(n, "pattern", w), w);
    const Behavior how = behavior_of(json_string(n, "behavior", w), w);
    const bool invert = json_bool_or(n, "invert", w, false);
    return each([m, how, invert](const std::string& s, bool) { return split(s, m.spans(s), how, invert); });
  }
  if (type == "ByteLevel") {
    byte_level = true;
    const bool prefix = json_bool_or(n, "add_prefix_space", w, true), regex = json_bool_or(n, "use_regex", w, true);
    return each([prefix, regex](const std::string& s, bool) {
      const std::string t = prefix && (s.empty() || s[0] != ' ') ? " " + s : s;
      return regex ? Gpt2Bpe::pretokenize(t) : std::vector<std::string>{t};
    });
  }
  if (type == "Metaspace") {
    const std::string rep = json_string(n, "replacement", w);
    MIMIC_CHECK(u::to_u32(rep).size() == 1, w, ": Metaspace's replacement must be one character, got ", quoted(rep));
    std::string scheme = json_string_or(n, "prepend_scheme", w, "");
    if (scheme.empty()) scheme = json_bool_or(n, "add_prefix_space", w, true) ? "always" : "never";
    MIMIC_CHECK(scheme == "always" || scheme == "first" || scheme == "never", w, ": unknown prepend_scheme '", scheme, "'");
    const bool do_split = json_bool_or(n, "split", w, true);
    return each([rep, scheme, do_split](const std::string& s, bool first) {
      std::string t = replace_all(s, " ", rep);
      if ((scheme == "always" || (scheme == "first" && first)) && t.rfind(rep, 0) != 0) t = rep + t;
      if (!do_split) return std::vector<std::string>{t};
      std::vector<std::pair<size_t, size_t>> at;
      for (size_t pos = 0; (pos = t.find(rep, pos)) != std::string::npos; pos += rep.size()) at.emplace_back(pos, pos + rep.size());
      return split(t, at, Behavior::MergedWithNext, false);
    });
  }
  if (type == "Digits") {
    const bool single = json_bool_or(n, "individual_digits", w, false);
    return by_pattern("\\p{N}", single ? Behavior::Isolated : Behavior::Contiguous, false);
  }
  if (type == "Whitespace") return by_pattern("\\w+|[^\\w\\s]+", Behavior::Removed, true);
  if (type == "WhitespaceSplit") return by_pattern("\\S+", Behavior::Removed, true);
  if (type == "Sequence") {
    std::vector<PreTokenize> steps;
    for (const auto& step : json_key(n, "pretokenizers", w))
      if (auto f = pre_tokenizer(step, byte_level, depth + 1)) steps.push_back(f);
    return [steps](std::vector<std::string> pieces, bool first) {
      for (const auto& f : steps) pieces = f(std::move(pieces), first);
      return pieces;
    };
  }
  fail(w, ": pre-tokenizer '", type,
       "' is not supported (mimic reads Split, ByteLevel, Metaspace, Digits, Whitespace, WhitespaceSplit, Sequence)");
}

HfTokenizer::Pipeline::Decode HfTokenizer::Pipeline::decoder(const json& n, int depth) {
  if (n.is_null()) return {};
  const std::string w = where("decoder");
  const std::string type = type_of(n, w, depth);
  auto each = [](std::function<std::string(const std::string&, size_t)> f) -> Decode {
    return [f](std::vector<std::string> tokens) {
      for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = f(tokens[i], i);
      return tokens;
    };
  };
  if (type == "ByteLevel") {
    const auto* map = &u2b;  // the pipeline outlives its decoder
    return each([map](const std::string& t, size_t) { return spelling_bytes(t, *map); });
  }
  if (type == "Metaspace") {
    const std::string rep = json_string(n, "replacement", w);
    MIMIC_CHECK(u::to_u32(rep).size() == 1, w, ": Metaspace's replacement must be one character, got ", quoted(rep));
    std::string scheme = json_string_or(n, "prepend_scheme", w, "");
    if (scheme.empty()) scheme = json_bool_or(n, "add_prefix_space", w, true) ? "always" : "never";
    const bool strip_first = scheme != "never";
    return each([rep, strip_first](const std::string& t, size_t i) {
      std::string s = replace_all(t, rep, " ");
      if (strip_first && i == 0 && !s.empty() && s[0] == ' ') s.erase(0, 1);
      return s;
    });
  }
  if (type == "Replace") {
    const json& pat = json_key(n, "pattern", w);
    MIMIC_CHECK(pat.is_object() && pat.contains("String"), w, ": a Replace decoder with a Regex pattern is not supported");
    const std::string from = json_string(pat, "String", w), to = json_string(n, "content", w);
    return each([from, to](const std::string& t, size_t) { return replace_all(t, from, to); });
  }
  if (type == "ByteFallback") {
    // <0xHH> gives its byte. mimic's decode returns bytes, so an incomplete UTF-8 sequence stays as it is
    // (HF writes U+FFFD for it).
    return each([](const std::string& t, size_t) {
      auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && hex(t[3]) && hex(t[4]))
        return std::string(1, static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16)));
      return t;
    });
  }
  if (type == "Fuse") {
    return [](std::vector<std::string> tokens) {
      std::string all;
      for (const auto& t : tokens) all += t;
      return std::vector<std::string>{all};
    };
  }
  if (type == "Strip") {
    const std::string content = json_string(n, "content", w);
    const auto start = json_int_or(n, "start", w, 0, 0), stop = json_int_or(n, "stop", w, 0, 0);
    MIMIC_CHECK(!content.empty(), w, ": Strip needs a content character");
    return each([content, start, stop](const std::string& t, size_t) {
      std::string s = t;
      for (int64_t k = 0; k < start && s.rfind(content, 0) == 0; ++k) s.erase(0, content.size());
      for (int64_t k = 0; k < stop && s.size() >= content.size() && s.compare(s.size() - content.size(), content.size(), content) == 0; ++k)
        s.erase(s.size() - content.size());
      return s;
    });
  }
  if (type == "Sequence") {
    std::vector<Decode> steps;
    for (const auto& step : json_key(n, "decoders", w))
      if (auto f = decoder(step, depth + 1)) steps.push_back(f);
    return [steps](std::vector<std::string> tokens) {
      for (const auto& f : steps) tokens = f(std::move(tokens));
      return tokens;
    };
  }
  fail(w, ": decoder '", type, "' is not supported (mimic reads ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence)");
}

HfTokenizer::Pipeline::PostProcess HfTokenizer::Pipeline::post_processor(const json& n, int64_t& cls, int64_t& sep, int depth) {
  if (n.is_null()) return {};
  const std::string w = where("post_processor");
  const std::string type = type_of(n, w, depth);
  if (type == "ByteLevel") return {};  // offsets only
  if (type == "TemplateProcessing") {
    std::vector<std::vector<int64_t>> parts;  // empty vector = the sequence itself
    for (const auto& item : json_key(n, "single", w)) {
      if (item.contains("Sequence")) {
        parts.emplace_back();
        continue;
      }
      const std::string name = json_string(json_key(item, "SpecialToken", w + ".single"), "id", w + ".single");
      const json& specials = json_key(n, "special_tokens", w);
      MIMIC_CHECK(specials.contains(name), w, ": special token '", name, "' of the template is not in special_tokens");
      std::vector<int64_t> ids;
      for (const auto& id : json_key(specials[name], "ids", w)) ids.push_back(read_id(id, w + ": an id of " + quoted(name)));
      post_ids.insert(post_ids.end(), ids.begin(), ids.end());
      MIMIC_CHECK(!ids.empty(), w, ": special token '", name, "' has no ids");
      parts.push_back(ids);
    }
    return [parts](std::vector<int64_t> seq) {
      std::vector<int64_t> out;
      for (const auto& p : parts) out.insert(out.end(), p.empty() ? seq.begin() : p.begin(), p.empty() ? seq.end() : p.end());
      return out;
    };
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    auto pair_id = [&](const char* key) {
      const json& v = json_key(n, key, w);
      MIMIC_CHECK(v.is_array() && v.size() == 2, w, ": ", key, " must be [token, id]");
      return read_id(v[1], w + ": the id of " + key);
    };
    cls = pair_id("cls");
    sep = pair_id("sep");
    post_ids.push_back(cls);
    post_ids.push_back(sep);
    const int64_t c = cls, s = sep;
    return [c, s](std::vector<int64_t> seq) {
      seq.insert(seq.begin(), c);
      seq.push_back(s);
      return seq;
    };
  }
  if (type == "Sequence") {
    std::vector<PostProcess> steps;
    for (const auto& step : json_key(n, "processors", w))
      if (auto f = post_processor(step, cls, sep, depth + 1)) steps.push_back(f);
    return [steps](std::vector<int64_t> seq) {
      for (const auto& f : steps) seq = f(std::move(seq));
      return seq;
    };
  }
  fail(w, ": post-processor '", type, "' is not supported (mimic reads TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence)");
}

HfTokenizer::~HfTokenizer() = default;

HfTokenizer::HfTokenizer(const std::string& path, const std::string& config_path) : p_(std::make_unique<Pipeline>()) {
  Pipeline& p = *p_;
  p.path = path;
  const std::string file_text = io::read_text_file(path);
  const json j = json_parse(file_text, path);
  MIMIC_CHECK(j.is_object(), path, ": tokenizer.json must be a JSON object");
  const json& model = json_key(j, "model", path);
  const std::string mw = path + ": model";
  const std::string model_type = model.is_object() && model.contains("type") ? json_string(model, "type", mw) : "BPE";
  MIMIC_CHECK(model_type == "BPE", mw, " type '", model_type,
              "' is not supported (mimic reads BPE models from tokenizer.json; a BERT folder's vocab.txt is read instead)");
  MIMIC_CHECK(json_string_or(model, "continuing_subword_prefix", mw, "").empty() && json_string_or(model, "end_of_word_suffix", mw, "").empty(),
              mw, ": continuing_subword_prefix / end_of_word_suffix are not supported");
  MIMIC_CHECK(json_double_or(model, "dropout", mw, 0.0) == 0.0, mw, ": BPE dropout is a training-time option; give a tokenizer without it");

  // ---- pipeline components (the pre-tokenizer decides whether the vocabulary is byte-level)
  p.normalize = p.normalizer(part(j, "normalizer"));
  p.pre_tokenize = p.pre_tokenizer(part(j, "pre_tokenizer"), byte_level_);
  p.decode = p.decoder(part(j, "decoder"));

  // ---- vocabulary: the model's, then the added tokens (which may repeat a model token with its id)
  const json& vocab = json_key(model, "vocab", mw);
  MIMIC_CHECK(vocab.is_object() && !vocab.empty(), mw, ".vocab must be a non-empty object token → id");
  auto key_of = [&](const std::string& spelling) {  // byte-level: the bytes a spelling stands for
    return byte_level_ ? spelling_bytes(spelling, p.u2b) : spelling;
  };
  auto place = [&](const std::string& spelling, int64_t id, const std::string& where) {
    MIMIC_CHECK(!spelling.empty(), where, ": a token with an empty spelling (id ", id, ")");
    if (static_cast<size_t>(id) >= spelling_.size()) spelling_.resize(id + 1);
    MIMIC_CHECK(spelling_[id].empty() || spelling_[id] == spelling, where, ": id ", id, " is both ", quoted(spelling_[id]), " and ",
                quoted(spelling));
    spelling_[id] = spelling;
  };
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const auto id = read_id(it.value(), mw + ".vocab: the id of token " + quoted(it.key()));
    place(it.key(), id, mw + ".vocab");
    MIMIC_CHECK(p.vocab.emplace(key_of(it.key()), static_cast<int32_t>(id)).second, mw, ".vocab: token ", quoted(it.key()), " appears twice");
  }
  if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
    const std::string aw = path + ": added_tokens";
    MIMIC_CHECK(j["added_tokens"].is_array(), aw, " must be a list");
    for (const auto& a : j["added_tokens"]) {
      MIMIC_CHECK(a.is_object(), aw, ": each entry must be an object");
      Pipeline::Added t{json_string(a, "content", aw), read_id(json_key(a, "id", aw), aw + ": an id"), json_bool_or(a, "lstrip", aw, false),
                        json_bool_or(a, "rstrip", aw, false), json_bool_or(a, "single_word", aw, false)};
      MIMIC_CHECK(!t.content.empty(), aw, ": an added token with empty content");
      place(t.content, t.id, aw);
      p.added_ids[t.content] = t.id;
      p.added.push_back(t);
    }
    for (size_t k = 0; k < p.added.size(); ++k) {
      int32_t node = 0;
      for (unsigned char c : p.added[k].content) {
        auto it = p.trie[node].find(c);
        if (it == p.trie[node].end()) {
          it = p.trie[node].emplace(c, static_cast<int32_t>(p.trie.size())).first;
          p.trie.emplace_back();
          p.trie_token.push_back(-1);
        }
        node = it->second;
      }
      p.trie_token[node] = static_cast<int32_t>(k);  // the same content twice: the last entry, as HF's map keeps it
    }
  }

  // ---- the model's options
  p.byte_fallback = json_bool_or(model, "byte_fallback", mw, false);
  p.fuse_unk = json_bool_or(model, "fuse_unk", mw, false);
  p.ignore_merges = json_bool_or(model, "ignore_merges", mw, false);
  const std::string unk = json_string_or(model, "unk_token", mw, "");
  if (!unk.empty()) {
    auto it = p.vocab.find(key_of(unk));
    MIMIC_CHECK(it != p.vocab.end(), mw, ": unk_token ", quoted(unk), " is not in the vocabulary");
    p.unk = it->second;
    unk_ = p.unk;
  }
  for (int b = 0; b < 256; ++b) {
    auto it = p.vocab.find(std::string(1, static_cast<char>(b)));
    p.byte_id[b] = byte_level_ && it != p.vocab.end() ? it->second : -1;
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    auto f = p.vocab.find(hex);
    p.fallback_id[b] = f != p.vocab.end() ? f->second : -1;
    MIMIC_CHECK(!p.byte_fallback || p.fallback_id[b] >= 0, mw, ": byte_fallback is set but token ", hex, " is missing");
  }

  // ---- merges: "left right" or ["left", "right"], rank = order; both parts and the result in the vocabulary
  const json& merges = json_key(model, "merges", mw);
  MIMIC_CHECK(merges.is_array(), mw, ".merges must be a list");
  size_t index = 0;
  for (const auto& m : merges) {
    std::string left, right;
    if (m.is_string()) {
      const std::string line = m.get<std::string>();
      const size_t sp = line.find(' ');
      MIMIC_CHECK(sp != std::string::npos && sp > 0 && sp + 1 < line.size() && line.find(' ', sp + 1) == std::string::npos, mw,
                  ".merges[", index, "]: expected two tokens separated by one space, got ", quoted(line));
      left = line.substr(0, sp);
      right = line.substr(sp + 1);
    } else {
      MIMIC_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(), mw, ".merges[", index,
                  "]: expected \"a b\" or [\"a\", \"b\"]");
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    }
    auto id = [&](const std::string& t) {
      auto it = p.vocab.find(key_of(t));
      MIMIC_CHECK(it != p.vocab.end(), mw, ".merges[", index, "]: ", quoted(t), " is not in the vocabulary");
      return it->second;
    };
    p.merges.add(id(left), id(right), id(left + right));
    ++index;
  }

  // ---- post-processor and special ids
  p.post_process = p.post_processor(part(j, "post_processor"), cls_, sep_);
  for (int64_t id : p.post_ids)
    MIMIC_CHECK(id < vocab_size() && !spelling_[id].empty(), path, ": post_processor: id ", id, " is not a token of the vocabulary");
  // A table mostly of holes is a broken file (an id of 2,000,000 beside 300 tokens), not a vocabulary to allocate.
  MIMIC_CHECK(vocab_size() <= 2 * static_cast<int64_t>(p.vocab.size() + p.added_ids.size()) + 1024, path, ": ids reach ",
              vocab_size() - 1, " but only ", p.vocab.size() + p.added_ids.size(), " tokens are defined");
  json cfg;
  if (!config_path.empty()) {
    cfg = json_parse(io::read_text_file(config_path), config_path);
    MIMIC_CHECK(cfg.is_object(), config_path, " must be a JSON object");
  }
  auto special = [&](const std::string& key) -> int64_t {
    const std::string t = config_token(cfg, key, config_path);
    if (t.empty()) return -1;
    const int64_t id = token_to_id(t);
    MIMIC_CHECK(id >= 0, config_path, ": ", key, " ", quoted(t), " is not a token of ", path);
    return id;
  };
  eos_ = special("eos_token");
  bos_ = special("bos_token");
  pad_ = special("pad_token");
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64 over the file and the special ids
  for (unsigned char c : file_text + "|" + std::to_string(eos_) + "|" + std::to_string(bos_) + "|" + std::to_string(pad_)) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  digest_ = hex;
}

void HfTokenizer::encode_piece(const std::string& piece, std::vector<int64_t>& out) const {
  const Pipeline& p = *p_;
  if (p.cache.get(piece, out)) return;
  std::vector<int32_t> word;
  auto whole = p.ignore_merges ? p.vocab.find(piece) : p.vocab.end();
  if (whole != p.vocab.end()) {
    word.push_back(whole->second);
  } else if (byte_level_) {
    for (unsigned char c : piece) {
      const int32_t id = p.byte_id[c] >= 0 ? p.byte_id[c] : p.unk;
      if (id >= 0) word.push_back(id);
    }
    p.merges.apply(word);
  } else {
    bool last_unk = false;
    for (const auto& unit : u::decode_utf8(piece)) {
      const std::string ch = piece.substr(unit.begin, unit.end - unit.begin);
      auto it = unit.cp == u::kInvalid ? p.vocab.end() : p.vocab.find(ch);
      if (it != p.vocab.end()) {
        word.push_back(it->second);
        last_unk = false;
      } else if (p.byte_fallback) {
        for (unsigned char c : ch) word.push_back(p.fallback_id[c]);
        last_unk = false;
      } else if (p.unk >= 0) {
        if (!(p.fuse_unk && last_unk)) word.push_back(p.unk);
        last_unk = true;
      }
    }
    p.merges.apply(word);
  }
  out.insert(out.end(), word.begin(), word.end());
  p.cache.put(piece, word);
}

void HfTokenizer::encode_segment(const std::string& text, bool first_segment, std::vector<int64_t>& out) const {
  const Pipeline& p = *p_;
  const std::string normalized = p.normalize ? p.normalize(text) : text;
  if (normalized.empty()) return;
  std::vector<std::string> pieces{normalized};
  if (p.pre_tokenize) pieces = p.pre_tokenize(std::move(pieces), first_segment);
  for (const auto& piece : pieces) encode_piece(piece, out);
}

std::vector<int64_t> HfTokenizer::encode(const std::string& text, bool add_special_tokens) const {
  const Pipeline& p = *p_;
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 3);
  // Added tokens first: at each position the longest one that starts there (HF's leftmost-longest).
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || static_cast<unsigned char>(c) >= 0x80; };
  size_t seg_begin = 0;
  bool first = true;
  for (size_t i = 0; i < text.size() && !p.added.empty();) {
    // the added tokens that start here, by walking the trie; the longest acceptable one wins
    std::vector<int32_t> found;
    for (size_t at = i, node = 0; at < text.size();) {
      auto it = p.trie[node].find(static_cast<unsigned char>(text[at]));
      if (it == p.trie[node].end()) break;
      node = static_cast<size_t>(it->second);
      ++at;
      if (p.trie_token[node] >= 0) found.push_back(p.trie_token[node]);
    }
    const Pipeline::Added* hit = nullptr;
    for (auto k = found.rbegin(); k != found.rend() && !hit; ++k) {
      const auto& a = p.added[static_cast<size_t>(*k)];
      const size_t e = i + a.content.size();
      if (!(a.single_word && ((i > 0 && word_char(text[i - 1])) || (e < text.size() && word_char(text[e]))))) hit = &a;
    }
    if (!hit) {
      ++i;
      continue;
    }
    size_t b = i, e = i + hit->content.size();
    if (hit->lstrip)
      while (b > seg_begin && space(text[b - 1])) --b;
    if (hit->rstrip)
      while (e < text.size() && space(text[e])) ++e;
    if (b > seg_begin) encode_segment(text.substr(seg_begin, b - seg_begin), first, ids);
    first = false;
    ids.push_back(hit->id);
    seg_begin = i = e;
  }
  if (seg_begin < text.size()) encode_segment(text.substr(seg_begin), first, ids);
  if (add_special_tokens && p.post_process) ids = p.post_process(std::move(ids));
  return ids;
}

std::string HfTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (auto id : ids) {
    // A model's vocabulary is often padded past its tokenizer's (Qwen2.5: 151,936 rows, 151,665 tokens); an id
    // without a token decodes to nothing, as in HF, rather than stopping a generation.
    MIMIC_CHECK(id >= 0, "token id ", id, " is negative");
    if (id < vocab_size() && !spelling_[id].empty()) tokens.push_back(spelling_[id]);
  }
  if (p_->decode) tokens = p_->decode(std::move(tokens));
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

std::string HfTokenizer::id_to_token(int64_t id) const {
  MIMIC_CHECK(id >= 0 && id < vocab_size() && !spelling_[id].empty(), "token id ", id, " is not in the vocabulary of ", p_->path,
              " (0..", vocab_size() - 1, ")");
  return spelling_[id];
}

int64_t HfTokenizer::token_to_id(const std::string& token) const {
  auto a = p_->added_ids.find(token);
  if (a != p_->added_ids.end()) return a->second;
  // the model's vocabulary is keyed by bytes when byte-level (a spelling outside the alphabet stands for itself)
  auto it = p_->vocab.find(byte_level_ ? spelling_bytes(token, p_->u2b) : token);
  return it == p_->vocab.end() ? -1 : it->second;
}

}  // namespace mimic::text
