#include "mimic/text/hf_tokenizer.h"

#include "mimic/text/hf_pipeline.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "mimic/core/error.h"
#include "mimic/core/json_keys.h"
#include "mimic/io/atomic_file.h"
#include "mimic/text/bpe.h"
#include "mimic/text/gpt2_bpe.h"
#include "mimic/text/unicode.h"

namespace mimic::text {

namespace u = unicode;
using json = nlohmann::json;
using hf::quoted;
using hf::read_id;
using hf::spelling_bytes;

namespace hf {
std::string quoted(const std::string& s) { return json(s).dump(-1, ' ', true, json::error_handler_t::replace); }

int64_t read_id(const json& v, const std::string& what) {
  MIMIC_CHECK(v.is_number_integer(), what, " must be an integer, got ", v.dump());
  const bool ok = v.is_number_unsigned() ? v.get<uint64_t>() < static_cast<uint64_t>(kMaxId) : (v.get<int64_t>() >= 0 && v.get<int64_t>() < kMaxId);
  MIMIC_CHECK(ok, what, " is ", v.dump(), ", outside 0..", kMaxId - 1);
  return v.get<int64_t>();
}

std::unordered_map<char32_t, char> byte_of_char() {
  std::unordered_map<char32_t, char> u2b;
  const auto b2u = Gpt2Bpe::byte_alphabet();
  for (int b = 0; b < 256; ++b) u2b[b2u[b]] = static_cast<char>(b);
  return u2b;
}

std::string spelling_bytes(const std::string& spelling, const std::unordered_map<char32_t, char>& u2b) {
  std::string bytes;
  for (char32_t c : u::to_u32(spelling)) {
    auto it = u2b.find(c);
    if (it == u2b.end()) return spelling;
    bytes.push_back(it->second);
  }
  return bytes;
}
}  // namespace hf

namespace {
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
}  // namespace

HfTokenizer::~HfTokenizer() = default;

HfTokenizer::HfTokenizer(const std::string& path, const std::string& config_path)
    : HfTokenizer(path, HfTokenizerFolder{config_path, "", "", ""}) {}

HfTokenizer::HfTokenizer(const std::string& path, const HfTokenizerFolder& folder)
    : HfTokenizer(path, io::read_text_file(path), folder) {}

HfTokenizer::HfTokenizer(const std::string& path, const std::string& file_text, const HfTokenizerFolder& folder)
    : HfTokenizer(path, file_text, json_parse(file_text, path), folder) {}

HfTokenizer::HfTokenizer(const std::string& path, const std::string& file_text, const json& j, const HfTokenizerFolder& folder)
    : p_(std::make_unique<Pipeline>()) {
  Pipeline& p = *p_;
  p.path = path;
  MIMIC_CHECK(j.is_object(), path, ": tokenizer.json must be a JSON object");
  const json& model = json_key(j, "model", path);
  const std::string mw = path + ": model";
  const std::string algorithm = model.is_object() && model.contains("type") ? json_string(model, "type", mw) : "BPE";  // the tokenizer's
  MIMIC_CHECK(algorithm == "BPE", mw, " type '", algorithm, "' is not supported (mimic reads BPE models from tokenizer.json)");
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
    std::unordered_map<std::string, std::string> normalized_forms;  // a normalized token's form → its content
    std::unordered_set<int64_t> normalized_ids;
    // HF's reader gives each added token an id of its own making, not the file's (added_vocabulary.rs, add_tokens):
    // the model's where the model has the token, else the number of the model's tokens (its vocabulary's entries, not
    // its largest id + 1), or one past the largest id added so far where that is larger, in the file's order; where the
    // file lists another id, HF warns and keeps the one it made. A file HF wrote always agrees, so one that does not was
    // edited by hand, and mimic refuses it rather than give other ids than HF.
    const auto model_count = static_cast<int64_t>(vocab.size());
    int64_t max_added = -1;
    for (const auto& a : j["added_tokens"]) {
      MIMIC_CHECK(a.is_object(), aw, ": each entry must be an object");
      // HF's reader requires every flag; a file without `normalized` gets transformers' AddedToken default: false for a
      // special token, true for any other
      const bool special = json_bool_or(a, "special", aw, false);
      Pipeline::Added t{json_string(a, "content", aw), read_id(json_key(a, "id", aw), aw + ": an id"), json_bool_or(a, "lstrip", aw, false),
                        json_bool_or(a, "rstrip", aw, false), json_bool_or(a, "single_word", aw, false)};
      MIMIC_CHECK(!t.content.empty(), aw, ": an added token with empty content");
      const bool normalized = json_bool_or(a, "normalized", aw, !special);
      // A content listed twice (HF writes one entry per id, so a hand-edited file): HF keeps the first id and takes the
      // last entry's flags; mimic takes the last entry's flags too, and refuses two ids or two passes for one content
      // rather than guess which the editor meant.
      if (const auto seen = p.added_ids.find(t.content); seen != p.added_ids.end()) {
        MIMIC_CHECK(seen->second == t.id, aw, ": the added token ", quoted(t.content), " is listed with ids ", seen->second, " and ", t.id,
                    " (one entry per token)");
        MIMIC_CHECK(normalized_ids.count(t.id) == static_cast<size_t>(normalized), aw, ": the added token ", quoted(t.content),
                    " is listed twice, once normalized: true and once false (one entry per token)");
      }
      if (!p.added_ids.count(t.content)) {
        const auto in_model = vocab.find(t.content);
        const int64_t hf_id = in_model != vocab.end() ? read_id(in_model.value(), mw + ".vocab: the id of token " + hf::quoted(t.content))
                              : max_added >= 0 && (max_added >= model_count || model_count == 0) ? max_added + 1
                                                                                                  : model_count;
        MIMIC_CHECK(hf_id == t.id, aw, ": the added token ", quoted(t.content), " has id ", t.id, ", but HF's tokenizers gives it id ",
                    hf_id, in_model != vocab.end() ? " (its id in the model's vocabulary)"
                                                   : " (added tokens take the ids after the model's tokens, in the order listed)",
                    " and ignores the file's; correct the id");
        max_added = std::max(max_added, hf_id);
      }
      place(t.content, t.id, aw);
      p.added_ids[t.content] = t.id;
      if (!normalized) {
        p.added_raw.add(std::move(t));
        continue;
      }
      // matched as the normalizer writes it ("Yes" is found in "a YES" by a Lowercase normalizer, and a Prepend
      // normalizer's prefix is part of the token), and decoded so, as HF's tokenizers does since 0.23 ("a <x> b" under
      // Llama 2's normalizer is ▁a ▁<x> ▁b, and the decoder gives "a <x> b" back, where "<x>" alone would lose its
      // space); its name (id_to_token) stays the file's, where 0.23 gives the form. Two tokens of one form, or a token
      // the normalizer empties, are refused by name: HF's tokenizers (0.23.2, measured) loads such a file, matches the
      // first of the two listed and the emptied one nowhere, which is hardly what the file's author meant.
      const std::string raw = t.content;
      if (Pipeline::Origin o; p.normalize) t.content = p.normalize(t.content, o);
      MIMIC_CHECK(!t.content.empty(), aw, ": the normalizer turns the added token ", quoted(raw), " (id ", t.id,
                  ", normalized: true) into nothing; it could match nowhere (give it normalized: false)");
      const auto [seen, fresh] = normalized_forms.emplace(t.content, raw);
      MIMIC_CHECK(fresh || seen->second == raw, aw, ": the added tokens ", quoted(seen->second), " and ", quoted(raw),
                  " (normalized: true) both normalize to ", quoted(t.content), "; HF would match only the first (give one of them normalized: false)");
      normalized_ids.insert(t.id);
      // (not under a decoder with a ByteLevel step, which reads characters of the byte alphabet as bytes: a decomposed
      // "e\u0301" made "é" by NFC would decode to the lone byte 0xE9, where the file's content, which has a character
      // outside the alphabet, decodes whole)
      if (!p.decodes_bytes) p.decode_as[t.id] = t.content;
      p.added_normalized.add(std::move(t));
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
  // tokenizer_config.json, with a legacy folder's special_tokens_map.json over it; `where` names the file each key
  // was read from
  const std::string& config_path = folder.config_path;
  const std::string config_where = config_path.empty() ? path + " (no tokenizer_config.json beside it)" : config_path;
  json cfg = json::object();
  std::map<std::string, std::string> read_from;
  if (!config_path.empty()) {
    cfg = json_parse(io::read_text_file(config_path), config_path);
    MIMIC_CHECK(cfg.is_object(), config_path, " must be a JSON object");
  }
  // transformers reads special_tokens_map.json only where tokenizer_config.json has no added_tokens_decoder (a folder
  // saved before 4.34), and then its tokens replace the config's (PreTrainedTokenizerBase._from_pretrained's legacy
  // branch); a current folder's copy of the map is ignored, as there
  const std::string& map_path = folder.special_tokens_map_path;
  if (!map_path.empty() && !cfg.contains("added_tokens_decoder")) {
    const json map = json_parse(io::read_text_file(map_path), map_path);
    MIMIC_CHECK(map.is_object(), map_path, " must be a JSON object");
    for (const char* key : {"bos_token", "eos_token", "pad_token"})
      if (map.contains(key)) {
        cfg[key] = map[key];
        read_from[key] = map_path;
      }
  }
  auto where = [&](const std::string& key) {
    auto it = read_from.find(key);
    return it == read_from.end() ? config_where : it->second;
  };
  auto special = [&](const std::string& key) -> int64_t {
    const std::string t = config_token(cfg, key, where(key));
    if (t.empty()) return -1;
    const int64_t id = token_to_id(t);
    MIMIC_CHECK(id >= 0, where(key), ": ", key, " ", quoted(t), " is not a token of ", path);
    return id;
  };
  eos_ = special("eos_token");
  bos_ = special("bos_token");
  pad_ = special("pad_token");
  // transformers' Llama tokenizer classes (tokenizer_class LlamaTokenizer or LlamaTokenizerFast, CodeLlama's alike)
  // read the post-processor apart: transformers 4 rebuilds it from tokenizer_config.json's add_bos_token (default true)
  // and add_eos_token (default false) — [bos] text [eos] — whatever tokenizer.json says (LlamaTokenizerFast.__init__
  // calls update_post_processor); transformers 5 keeps tokenizer.json's (it drops the flags when there is a
  // tokenizer.json) and builds [bos] text only where the file has none. A folder saved by either agrees with itself;
  // where the two would encode a text differently, mimic cannot be both, and refuses by name (the review of 2026-12-01).
  // A folder whose tokenizer_config.json names no class gets the one AutoTokenizer picks from config.json (a Llama or
  // Mistral model's is LlamaTokenizerFast, whose defaults then apply).
  std::string flags;          // what the digest must also cover: the flags decide the ids
  const int64_t text_mark = -1;  // a one-token text no vocabulary holds, to see what a post-processor puts around a text
  const std::string named_class = json_string_or(cfg, "tokenizer_class", config_where, "");
  const std::string tokenizer_class = named_class.empty() ? folder.default_class : named_class;
  const std::string class_shown = tokenizer_class + (named_class.empty() ? " (" + folder.default_class_why + ")" : "");
  if (tokenizer_class == "LlamaTokenizer" || tokenizer_class == "LlamaTokenizerFast" || tokenizer_class == "CodeLlamaTokenizer" ||
      tokenizer_class == "CodeLlamaTokenizerFast") {
    // the class's own defaults where the config names no token at all (null names none)
    if (!cfg.contains("bos_token")) bos_ = token_to_id("<s>");
    if (!cfg.contains("eos_token")) eos_ = token_to_id("</s>");
    // absent: the class's default; null reaches the class as None, which adds nothing
    auto flag = [&](const char* key, bool fallback) { return cfg.contains(key) && cfg[key].is_null() ? false : json_bool_or(cfg, key, config_where, fallback); };
    const bool add_bos = flag("add_bos_token", true), add_eos = flag("add_eos_token", false);
    // a token the class would add and the file lacks (a Llama 3 tokenizer.json in a llama folder that names no class:
    // no <s>) would be a new id past the model's embeddings in HF; mimic refuses and says what to name
    auto missing = [&](const char* key, const char* spelling) {
      return cfg.contains(key) ? std::string("no ") + key + " is named" : std::string("the class's ") + key + " " + spelling + " is not a token of " + path;
    };
    MIMIC_CHECK(!add_bos || bos_ >= 0, where("bos_token"), ": add_bos_token is true but ", missing("bos_token", "<s>"), " (", class_shown,
                " adds one; name the folder's bos_token, or its tokenizer_class where it is not a Llama tokenizer)");
    MIMIC_CHECK(!add_eos || eos_ >= 0, where("eos_token"), ": add_eos_token is true but ", missing("eos_token", "</s>"), " (", class_shown,
                " adds one; name the folder's eos_token)");
    auto around = [](int64_t before, int64_t after) -> Pipeline::PostProcess {
      return [before, after](std::vector<int64_t> seq) {
        if (before >= 0) seq.insert(seq.begin(), before);
        if (after >= 0) seq.push_back(after);
        return seq;
      };
    };
    const auto v4 = around(add_bos ? bos_ : -1, add_eos ? eos_ : -1);
    const auto v5 = p.post_process ? p.post_process : around(bos_, -1);
    auto shown = [&](const Pipeline::PostProcess& f) {
      std::string out;
      for (int64_t id : f({text_mark})) out += (out.empty() ? "" : " ") + (id == text_mark ? std::string("TEXT") : spelling_[static_cast<size_t>(id)]);
      return out;
    };
    MIMIC_CHECK(v4({text_mark}) == v5({text_mark}), config_where, ": ", class_shown, ": transformers 4 encodes a text as ", shown(v4),
                " (tokenizer_config.json's add_bos_token ", add_bos ? "true" : "false", ", add_eos_token ", add_eos ? "true" : "false",
                "), transformers 5 as ", shown(v5), " (", p.post_process ? "tokenizer.json's post_processor" : "no post_processor: the class's <s>",
                "): make them agree");
    p.post_process = v4;
    flags = std::string("|") + tokenizer_class + (add_bos ? "+bos" : "") + (add_eos ? "+eos" : "");
  }
  if (p.post_process) {
    // what the post-processor puts before a text: what precedes the marked text (a template's tokens before $A,
    // RobertaProcessing's <s>, any Sequence of them alike)
    const auto around = p.post_process({text_mark});
    const auto at = std::find(around.begin(), around.end(), text_mark);
    MIMIC_CHECK(at != around.end(), path, ": post_processor drops the text it is given");
    start_.assign(around.begin(), at);
  }
  // The revision of mimic's reading: a token cache holds the ids of one file as one revision of mimic read it, so a
  // change that gives any file other ids bumps it (2026-12-07: normalized added tokens, delimiters in a row, the
  // Whitespace pre-tokenizer's \w; reading-3, the same day: Oniguruma's \w in regexes, empty regex matches, Metaspace's
  // "first" by HF's alignments; reading-4: {n}?, (?i:) on ASCII ranges, [\w], empty loop iterations, an lstrip token in
  // the white space the one before took; reading-5: (?i:) by simple case folds, so Llama 3's (?i:'s|...) takes 'ſ), and
  // the caches of earlier revisions are rebuilt on use.
  flags += "|reading-5";
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64 over the file and the special ids
  for (unsigned char c : file_text + "|" + std::to_string(eos_) + "|" + std::to_string(bos_) + "|" + std::to_string(pad_) + flags) {
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

void HfTokenizer::Pipeline::AddedSet::add(Added t) {
  int32_t node = 0;
  for (unsigned char c : t.content) {
    auto it = trie[static_cast<size_t>(node)].find(c);
    if (it == trie[static_cast<size_t>(node)].end()) {
      it = trie[static_cast<size_t>(node)].emplace(c, static_cast<int32_t>(trie.size())).first;
      trie.emplace_back();
      trie_token.push_back(-1);
    }
    node = it->second;
  }
  trie_token[static_cast<size_t>(node)] = static_cast<int32_t>(tokens.size());  // the same content twice (one id): the last entry's flags, as in HF
  tokens.push_back(std::move(t));
}

namespace {
// The character of `s` that ends at byte `end` / starts at byte `at`, decoded (cp kInvalid where the bytes there are no
// well-formed character). A window of four bytes holds any character; a malformed byte before it decodes alone.
u::Unit unit_before(const std::string& s, size_t end) {
  const size_t from = end >= 4 ? end - 4 : 0;
  return u::decode_utf8(s.substr(from, end - from)).back();
}
u::Unit unit_at(const std::string& s, size_t at) { return u::decode_utf8(s.substr(at, 4)).front(); }
bool word_before(const std::string& s, size_t end) {
  if (end == 0) return false;
  const auto c = unit_before(s, end);
  return c.cp != u::kInvalid && u::is_regex_word(c.cp);
}
bool word_at(const std::string& s, size_t at) {
  if (at >= s.size()) return false;
  const auto c = unit_at(s, at);
  return c.cp != u::kInvalid && u::is_regex_word(c.cp);
}

// One pass of added tokens over `text`, as HF's find_matches takes them: its automaton's matches, leftmost-longest and
// each after the last one's own end (`i`, the search); `gap(begin, end)` gets the text between them (from `seg_begin`,
// the end of the last token with its stripped white space), `token(id)` each token, in order. single_word, lstrip
// and rstrip read characters as HF's Rust regexes do: \w and \s are Unicode's (is_regex_word, White_Space).
template <class Gap, class Token>
void split_added(const std::string& text, const HfTokenizer::Pipeline::AddedSet& set, Gap&& gap, Token&& token) {
  size_t seg_begin = 0;
  for (size_t i = 0; i < text.size() && !set.tokens.empty();) {
    // the longest added token that starts here, by walking the trie
    int32_t longest = -1;
    for (size_t at = i, node = 0; at < text.size();) {
      auto it = set.trie[node].find(static_cast<unsigned char>(text[at]));
      if (it == set.trie[node].end()) break;
      node = static_cast<size_t>(it->second);
      ++at;
      if (set.trie_token[node] >= 0) longest = set.trie_token[node];
    }
    if (longest < 0) {
      ++i;
      continue;
    }
    const auto& hit = set.tokens[static_cast<size_t>(longest)];
    const size_t end = i + hit.content.size();
    // A single_word token inside a word is passed over, and the search goes on after it: HF drops the match its
    // automaton found and takes the next one that starts after it, never a shorter token here (mimic took one).
    if (hit.single_word && (word_before(text, i) || word_at(text, end))) {
      i = end;
      continue;
    }
    size_t b = i, e = end;
    if (hit.lstrip) {  // the white space before it, but none a token before took (HF: max(its start, start_offset))
      for (u::Unit c; b > 0 && (c = unit_before(text, b)).cp != u::kInvalid && u::is_white_space(c.cp);) b -= c.end - c.begin;
      b = std::max(b, seg_begin);
    }
    if (hit.rstrip)
      for (u::Unit c; e < text.size() && (c = unit_at(text, e)).cp != u::kInvalid && u::is_white_space(c.cp);) e += c.end - c.begin;
    // A token found inside the white space the one before took with rstrip, whose lstrip then starts it where that
    // ended, covers nothing: HF's split is empty and no token comes of it (an added " " with lstrip and rstrip reads
    // "  " as one token, where mimic gave two).
    if (b >= e) {
      i = end;
      continue;
    }
    if (b > seg_begin) gap(seg_begin, b);
    token(hit.id);
    // The search goes on at the token's own end, not after the white space rstrip took: HF's automaton does, so a token
    // that starts in that white space is still found ("<m>\n\n" with an rstrip <m> and an added "\n": <m> \n \n), and
    // the text after the last token is read from its end, as HF's start_offset (which may fall back so).
    seg_begin = e;
    i = end;
  }
  if (seg_begin < text.size()) gap(seg_begin, text.size());
}
}  // namespace

// A segment between raw added tokens: normalized as a whole, then split by the normalized added tokens (HF's second
// pass: "a YES" with a Lowercase normalizer and an added "Yes" is a, yes), and what lies between those goes through
// the pre-tokenizer and the model. `first_segment`: the segment starts the text, so HF's alignments tie its start to
// the text's first character (Pipeline::Origin, carried through the normalizer and the pre-tokenizer: Metaspace's
// prepend_scheme "first" prepends to the piece still tied to it).
void HfTokenizer::encode_segment(const std::string& text, bool first_segment, std::vector<int64_t>& out) const {
  const Pipeline& p = *p_;
  // the original text's first character (its bytes) is where HF's alignments begin; the normalizer carries it along
  Pipeline::Origin o{first_segment, first_segment && !text.empty() ? u::decode_utf8(text.substr(0, 4)).front().end : 0};
  const std::string normalized = p.normalize ? p.normalize(text, o) : text;
  const size_t origin = o.bytes;
  split_added(
      normalized, p.added_normalized,
      [&](size_t b, size_t e) {
        std::vector<Pipeline::Piece> pieces{{normalized.substr(b, e - b), b < origin ? std::min(origin, e) - b : 0}};
        if (p.pre_tokenize) pieces = p.pre_tokenize(std::move(pieces));
        for (const auto& piece : pieces) encode_piece(piece.text, out);
      },
      [&](int64_t id) { out.push_back(id); });
}

std::vector<int64_t> HfTokenizer::encode(const std::string& text, bool add_special_tokens) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 3);
  // the raw pass: tokens with normalized false, on the text as given; the segments between them go to encode_segment
  split_added(
      text, p_->added_raw, [&](size_t b, size_t e) { encode_segment(text.substr(b, e - b), b == 0, ids); },
      [&](int64_t id) { ids.push_back(id); });
  if (add_special_tokens && p_->post_process) ids = p_->post_process(std::move(ids));
  return ids;
}

std::string HfTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (auto id : ids) {
    // A model's vocabulary is often padded past its tokenizer's (Qwen2.5: 151,936 rows, 151,665 tokens); an id
    // without a token decodes to nothing, as in HF, rather than stopping a generation.
    MIMIC_CHECK(id >= 0, "token id ", id, " is negative");
    if (id >= vocab_size() || spelling_[id].empty()) continue;
    const auto as = p_->decode_as.find(id);
    tokens.push_back(as != p_->decode_as.end() ? as->second : spelling_[id]);
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
