// HfTokenizer's components built from tokenizer.json: the normalizer, the pre-tokenizer, the decoder and the
// post-processor (each a function the pipeline runs; hf_tokenizer.h lists what is read and what is refused).
#include "mimic/text/hf_pipeline.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
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

// A Split/Replace "pattern": {"String": s} or {"Regex": r}. Returns the matches' byte spans as HF's find_matches
// takes them from Oniguruma (the onig crate's find_iter): empty ones too ("x*" matches "abxxc" at 0, 1, 2–4 and 5: HF's
// Replace of it by "-" gives "-a-b-c-", and a Split cuts there), except an empty match where the last match ended.
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
    if (s.empty()) return out;  // HF: an empty text has no match, not the empty one
    const Units us(s);
    size_t b, e;
    uint64_t budget = Pattern::budget_for(us.cps.size());  // one for the whole text: many cheap searches add up too
    size_t last_end = SIZE_MAX;                           // where the last match ended (none yet)
    try {
      for (size_t from = 0; from <= us.cps.size() && regex_->find(us.cps, from, b, e, budget);) {
        if (e == b && e == last_end) {  // the empty match right after a match: skipped, the search goes on a character on
          ++from;
          continue;
        }
        out.emplace_back(us.at[b], us.at[e]);
        last_end = from = e;
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

// HF's NormalizedString::split, fold for fold: the text cut into the matches and the gaps between them (an empty
// match is an entry too, and marks a cut), `invert` swapping which are which, then per behavior: Isolated keeps every
// entry, Removed drops the matches, Contiguous joins neighbours alike, MergedWithPrevious joins a match to the entry
// before it unless that is a match too, MergedWithNext (folded from the end) to the one after it; empty pieces are
// dropped. ("the-final--countdown" split on "-": Isolated the - final - - countdown, MergedWithPrevious the- final- -
// countdown, MergedWithNext the -final - -countdown, Contiguous the - final -- countdown.) Returns the pieces' spans.
std::vector<std::pair<size_t, size_t>> split(const std::string& s, const std::vector<std::pair<size_t, size_t>>& matches,
                                             Behavior how, bool invert) {
  struct Entry {
    size_t b, e;
    bool match;
  };
  std::vector<Entry> entries;
  size_t prev = 0;
  for (auto [b, e] : matches) {
    if (b != prev) entries.push_back({prev, b, invert});
    entries.push_back({b, e, !invert});
    prev = e;
  }
  if (prev != s.size() || s.empty()) entries.push_back({prev, s.size(), invert});
  std::vector<Entry> kept;  // match = to be removed
  bool previous_match = false;
  switch (how) {
    case Behavior::Isolated:
      for (auto x : entries) kept.push_back({x.b, x.e, false});
      break;
    case Behavior::Removed: kept = entries; break;
    case Behavior::Contiguous:
      for (auto x : entries) {
        if (x.match == previous_match && !kept.empty()) kept.back().e = x.e;
        else kept.push_back({x.b, x.e, false});
        previous_match = x.match;
      }
      break;
    case Behavior::MergedWithPrevious:
      for (auto x : entries) {
        if (x.match && !previous_match && !kept.empty()) kept.back().e = x.e;
        else kept.push_back({x.b, x.e, false});
        previous_match = x.match;
      }
      break;
    case Behavior::MergedWithNext:
      for (auto x = entries.rbegin(); x != entries.rend(); ++x) {
        if (x->match && !previous_match && !kept.empty()) kept.back().b = x->b;
        else kept.push_back({x->b, x->e, false});
        previous_match = x->match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
  }
  std::vector<std::pair<size_t, size_t>> pieces;
  for (const auto& k : kept)
    if (!k.match && k.e > k.b) pieces.emplace_back(k.b, k.e);
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

// Every normalizer also carries the origin along (Pipeline::Origin): how many leading bytes of its output HF's
// alignments tie to the original text's first character. A character a step puts in place of others is tied to the
// last byte it replaces (HF's transform_range), one it inserts at the very start of the text to the start itself,
// one it prepends to the first character: so Replace of "a" by "-" keeps the origin, of "ab" by "-" or of "a" by
// nothing moves it past, and so does Strip of leading white space (measured with HF's tokenizers 0.23.2).
HfTokenizer::Pipeline::Normalize HfTokenizer::Pipeline::normalizer(const json& n, int depth) {
  if (n.is_null()) return {};
  const std::string w = where("normalizer");
  const std::string type = type_of(n, w, depth);
  // a step that maps characters to characters: the origin is what the leading characters it covered became
  auto per_character = [](std::function<std::string(const std::string&)> f) -> Normalize {
    return [f](const std::string& s, Origin& o) {
      std::string out = f(s);
      if (o.bytes > 0) {
        o.bytes = std::min(out.size(), o.bytes >= s.size() ? out.size() : f(s.substr(0, o.bytes)).size());
        // to the end of the character it ends in: NFC's é from "e" and U+0301 is tied to the start whole
        while (o.bytes < out.size() && (static_cast<unsigned char>(out[o.bytes]) & 0xC0) == 0x80) ++o.bytes;
      }
      return out;
    };
  };
  if (type == "NFC" || type == "NFD") {
    const bool compose = type == "NFC";
    return per_character([compose](const std::string& s) {
      if (ascii(s)) return s;
      return map_valid_runs(s, [compose](const std::u32string& r) { return compose ? u::nfc(r) : u::nfd(r); });
    });
  }
  if (type == "Lowercase") {
    return per_character([](const std::string& s) {
      return map_valid_runs(s, [](const std::u32string& r) {
        std::u32string out;
        for (char32_t c : r) u::append_lower(c, out);
        return out;
      });
    });
  }
  if (type == "Prepend") {
    const std::string prefix = json_string(n, "prepend", w);
    MIMIC_CHECK(prefix.size() <= kMaxPrepend, w, ": Prepend of ", prefix.size(), " bytes (at most ", kMaxPrepend, ")");
    return [prefix](const std::string& s, Origin& o) {
      if (s.empty()) return s;
      if (o.bytes > 0) o.bytes += prefix.size();
      return prefix + s;
    };
  }
  if (type == "Replace") {
    const Matcher m(json_key(n, "pattern", w), w);
    const std::string content = json_string(n, "content", w);
    return [m, content](const std::string& s, Origin& o) {
      std::string out;
      const size_t origin = o.bytes;
      size_t prev = 0, tied = 0;                 // tied: the output's leading bytes still tied to the origin
      bool open = origin > 0 || o.text_start;  // every output byte so far is tied to it
      for (auto [b, e] : m.spans(s)) {
        if (open && b > origin) {  // the gap before the match reaches past the tied bytes
          tied += origin > prev ? origin - prev : 0;
          open = false;
        }
        if (open) tied += b - prev;
        out.append(s, prev, b - prev).append(content);
        // the content is tied to the last byte it replaces (the start itself, for an insertion there)
        if (open && !content.empty()) {
          if (e == 0 || e - 1 < origin) tied += content.size();
          else open = false;
        }
        prev = e;
      }
      if (open) tied += std::min(origin > prev ? origin - prev : 0, s.size() - prev);
      o.bytes = tied;
      return out.append(s, prev, std::string::npos);
    };
  }
  if (type == "Strip") {
    const bool left = json_bool_or(n, "strip_left", w, true), right = json_bool_or(n, "strip_right", w, true);
    return [left, right](const std::string& s, Origin& o) {
      const Units us(s);
      size_t b = 0, e = us.cps.size();
      auto space = [&](size_t i) { return us.cps[i] != u::kInvalid && u::is_white_space(us.cps[i]); };
      while (left && b < e && space(b)) ++b;
      while (right && e > b && space(e - 1)) --e;
      o.bytes = std::min<size_t>(o.bytes > us.at[b] ? o.bytes - us.at[b] : 0, us.at[e] - us.at[b]);
      return s.substr(us.at[b], us.at[e] - us.at[b]);
    };
  }
  if (type == "Sequence") {
    std::vector<Normalize> steps;
    for (const auto& step : json_key(n, "normalizers", w))
      if (auto f = normalizer(step, depth + 1)) steps.push_back(f);
    return [steps](const std::string& s, Origin& o) {
      std::string out = s;
      for (const auto& f : steps) out = f(out, o);
      return out;
    };
  }
  fail(w, ": normalizer '", type, "' is not supported (mimic reads NFC, NFD, Lowercase, Prepend, Replace, Strip, Sequence)");
}

namespace {
using Piece = HfTokenizer::Pipeline::Piece;
// The pieces a step cut from `s` at byte spans (in order), each with its share of the origin.
std::vector<Piece> pieces_at(const std::string& s, size_t origin, const std::vector<std::pair<size_t, size_t>>& spans) {
  std::vector<Piece> out;
  for (auto [b, e] : spans) out.push_back({s.substr(b, e - b), b < origin ? std::min(origin, e) - b : 0});
  return out;
}
std::vector<Piece> split_piece(const Piece& in, const std::vector<std::pair<size_t, size_t>>& matches, Behavior how, bool invert) {
  return pieces_at(in.text, in.origin, split(in.text, matches, how, invert));
}
}  // namespace

HfTokenizer::Pipeline::PreTokenize HfTokenizer::Pipeline::pre_tokenizer(const json& n, bool& byte_level, int depth) {
  if (n.is_null()) return {};
  const std::string w = where("pre_tokenizer");
  const std::string type = type_of(n, w, depth);
  auto each = [](std::function<std::vector<Piece>(const Piece&)> f) -> PreTokenize {
    return [f](std::vector<Piece> pieces) {
      std::vector<Piece> out;
      for (const auto& piece : pieces) {
        auto parts = f(piece);
        out.insert(out.end(), std::make_move_iterator(parts.begin()), std::make_move_iterator(parts.end()));
      }
      return out;
    };
  };
  // a Split by a {"String"} or {"Regex"} pattern (Digits and WhitespaceSplit are Splits by a fixed regex)
  auto split_by = [&](const json& pattern, Behavior how, bool invert) {
    const Matcher m(pattern, w);
    return each([m, how, invert](const Piece& p) { return split_piece(p, m.spans(p.text), how, invert); });
  };
  auto by_pattern = [&](const std::string& regex, Behavior how, bool invert) { return split_by(json{{"Regex", regex}}, how, invert); };
  if (type == "Split")
    return split_by(json_key(n, "pattern", w), behavior_of(json_string(n, "behavior", w), w), json_bool_or(n, "invert", w, false));
  if (type == "ByteLevel") {
    byte_level = true;
    const bool prefix = json_bool_or(n, "add_prefix_space", w, true), regex = json_bool_or(n, "use_regex", w, true);
    return each([prefix, regex](const Piece& p) {
      // (the space is tied to the piece's first character, as every prepended character is)
      const bool add = prefix && (p.text.empty() || p.text[0] != ' ');
      const Piece t{add ? " " + p.text : p.text, p.origin > 0 && add ? p.origin + 1 : p.origin};
      if (!regex) return std::vector<Piece>{t};
      std::vector<std::pair<size_t, size_t>> spans;
      size_t at = 0;  // GPT-2's pattern cuts the whole text into consecutive pieces
      for (const auto& piece : Gpt2Bpe::pretokenize(t.text)) spans.emplace_back(at, at + piece.size()), at += piece.size();
      return pieces_at(t.text, t.origin, spans);
    });
  }
  if (type == "Metaspace") {
    const std::string rep = json_string(n, "replacement", w);
    MIMIC_CHECK(u::to_u32(rep).size() == 1, w, ": Metaspace's replacement must be one character, got ", quoted(rep));
    std::string scheme = json_string_or(n, "prepend_scheme", w, "");
    if (scheme.empty()) scheme = json_bool_or(n, "add_prefix_space", w, true) ? "always" : "never";
    MIMIC_CHECK(scheme == "always" || scheme == "first" || scheme == "never", w, ": unknown prepend_scheme '", scheme, "'");
    const bool do_split = json_bool_or(n, "split", w, true);
    return each([rep, scheme, do_split](const Piece& p) {
      Piece t{replace_all(p.text, " ", rep), p.origin};
      if (t.origin > 0) t.origin = replace_all(p.text.substr(0, p.origin), " ", rep).size();
      // "first": the piece HF's alignments tie to the original text's first character (HF: offsets_original().0 == 0),
      // so not one after a Strip took the text's leading white space or a WhitespaceSplit before this step did
      if ((scheme == "always" || (scheme == "first" && p.origin > 0)) && t.text.rfind(rep, 0) != 0) {
        t.text = rep + t.text;
        if (t.origin > 0) t.origin += rep.size();
      }
      if (!do_split) return std::vector<Piece>{t};
      std::vector<std::pair<size_t, size_t>> at;
      for (size_t pos = 0; (pos = t.text.find(rep, pos)) != std::string::npos; pos += rep.size()) at.emplace_back(pos, pos + rep.size());
      return split_piece(t, at, Behavior::MergedWithNext, false);
    });
  }
  if (type == "Digits") {
    const bool single = json_bool_or(n, "individual_digits", w, false);
    return by_pattern("\\p{N}", single ? Behavior::Isolated : Behavior::Contiguous, false);
  }
  if (type == "Whitespace") {
    // HF's \w+|[^\w\s]+ in Rust's regex crate, whose \w is is_regex_word (letter numbers, Other_Alphabetic and the
    // zero-width joiners too) and \s White_Space: runs of word characters and runs of other characters, white space
    // dropped. A joiner in an emoji sequence is a word of its own, as in HF.
    return each([](const Piece& p) {
      enum { kSpace, kWord, kOther };
      std::vector<std::pair<size_t, size_t>> spans;
      int run = kSpace;
      for (const auto& c : u::decode_utf8(p.text)) {  // a malformed byte is other
        const bool valid = c.cp != u::kInvalid;
        const int k = valid && u::is_white_space(c.cp) ? kSpace : valid && u::is_regex_word(c.cp) ? kWord : kOther;
        if (k != kSpace) {
          if (k != run) spans.emplace_back(c.begin, c.begin);
          spans.back().second = c.end;
        }
        run = k;
      }
      return pieces_at(p.text, p.origin, spans);
    });
  }
  if (type == "WhitespaceSplit") return by_pattern("\\S+", Behavior::Removed, true);
  if (type == "Sequence") {
    std::vector<PreTokenize> steps;
    for (const auto& step : json_key(n, "pretokenizers", w)) {
      // after a ByteLevel step HF's later steps see the byte alphabet (Ġ for a space), where mimic maps bytes only in the
      // model: such a file is refused (the tokenizers of the families mimic reads put ByteLevel last)
      MIMIC_CHECK(!byte_level, w, ": a step after ByteLevel in a Sequence is not supported (mimic reads ByteLevel as the last step)");
      if (auto f = pre_tokenizer(step, byte_level, depth + 1)) steps.push_back(f);
    }
    return [steps](std::vector<Piece> pieces) {
      for (const auto& f : steps) pieces = f(std::move(pieces));
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
