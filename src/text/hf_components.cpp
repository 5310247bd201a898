// HfTokenizer's components built from tokenizer.json: the normalizer, the pre-tokenizer, the decoder and the
// post-processor (each a function the pipeline runs; hf_tokenizer.h lists what is read and what is refused).
#include "mimic/text/hf_pipeline.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <nlohmann/json.hpp>

#include "mimic/core/error.h"
#include "mimic/core/json_keys.h"
#include "mimic/text/gpt2_bpe.h"
#include "mimic/text/pattern.h"
#include "mimic/text/unicode.h"

namespace mimic::text {

namespace u = unicode;
using json = nlohmann::json;
using hf::quoted;
using hf::read_id;
using hf::spelling_bytes;

namespace {
constexpr int kMaxNesting = 16;                // Sequence inside Sequence: real files nest one level
constexpr size_t kMaxPrepend = 64;             // bytes a Prepend normalizer may add to each segment

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
  // As HF's NormalizedString::split folds them ("the-final--countdown" split on "-": Isolated the - final - - countdown,
  // MergedWithPrevious the- final- - countdown, MergedWithNext the -final - -countdown, Contiguous the - final --
  // countdown): a delimiter joins a neighbour only where that neighbour is no delimiter, and Contiguous joins any two
  // neighbours alike (two gaps meet where `invert` made adjacent matches gaps). Until 2026-12-07 mimic let delimiters in
  // a row lead the next gap together (MergedWithNext: --countdown; Metaspace's "a  b" one piece ▁▁b, where HF has ▁ ▁b).
  for (const auto& g : segs) {
    if (!g.match) {
      // (out is empty before the first segment, the one time last_was_match is false without a gap before)
      const bool join = !out.empty() && ((how == Behavior::MergedWithNext && last_was_match) || (how == Behavior::Contiguous && !last_was_match));
      if (join) out.back().second = g.e;
      else out.emplace_back(g.b, g.e);
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
      case Behavior::MergedWithNext: out.emplace_back(g.b, g.e); break;  // the gap after it, if any, joins it
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

std::string type_of(const json& j, const std::string& where, int depth) {
  MIMIC_CHECK(depth <= kMaxNesting, where, ": Sequence nested deeper than ", kMaxNesting);
  MIMIC_CHECK(j.is_object(), where, " must be an object");
  return json_string(j, "type", where);
}
}  // namespace

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
  if (type == "Whitespace") {
    // HF's \w+|[^\w\s]+ in Rust's regex crate, whose \w is is_regex_word (letter numbers, Other_Alphabetic and the
    // zero-width joiners too, where mimic's patterns take L|M|Nd|Pc) and \s White_Space: runs of word characters and
    // runs of other characters, white space dropped. A joiner in an emoji sequence is a word of its own, as in HF.
    return each([](const std::string& s, bool) {
      enum { kSpace, kWord, kOther };
      std::vector<std::string> out;
      int run = kSpace;
      for (const auto& c : u::decode_utf8(s)) {  // a malformed byte is other
        const bool valid = c.cp != u::kInvalid;
        const int k = valid && u::is_white_space(c.cp) ? kSpace : valid && u::is_regex_word(c.cp) ? kWord : kOther;
        if (k != kSpace) {
          if (k != run) out.emplace_back();
          out.back().append(s, c.begin, c.end - c.begin);
        }
        run = k;
      }
      return out;
    });
  }
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
    decodes_bytes = true;
    const auto* map = &u2b;  // the pipeline outlives its decoder
    return each([map](const std::string& t, size_t) { return spelling_bytes(t, *map); });
  }
  if (type == "Metaspace") {
    const std::string rep = json_string(n, "replacement", w);
    MIMIC_CHECK(u::to_u32(rep).size() == 1, w, ": Metaspace's replacement must be one character, got ", quoted(rep));
    std::string scheme = json_string_or(n, "prepend_scheme", w, "");
    if (scheme.empty()) scheme = json_bool_or(n, "add_prefix_space", w, true) ? "always" : "never";
    const bool strip_first = scheme != "never";
    // HF drops every replacement in the first token (its decode_chain: ▁▁a gives "a"), not one
    return each([rep, strip_first](const std::string& t, size_t i) { return replace_all(t, rep, strip_first && i == 0 ? "" : " "); });
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

}  // namespace mimic::text
