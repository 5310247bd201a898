// Checked reads of JSON keys, for every JSON document mimic reads: config.json and mimic.json, and its own state
// files (training and distillation checkpoints' state, data positions, maps metadata, token-cache indexes). A
// missing key, or a value of the wrong type or outside its range, is a mimic::Error naming `where` (the file, and
// the part of it) and the key, never nlohmann's raw exception text. Every reader goes through these: a fuzzed
// config.json showed what one unchecked `get<>` costs.
#pragma once
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "mimic/core/error.h"

namespace mimic {

// `text` parsed; malformed JSON is "WHERE: malformed JSON: ...".
nlohmann::json json_parse(const std::string& text, const std::string& where);

// `j` as text (indented by `indent`; -1: one line) whatever its strings hold: bytes that are not UTF-8 (a generated
// text cut inside a character, GPT-2's byte tokens) become U+FFFD instead of nlohmann's type_error.316, which
// surfaced after a generate's whole work (the probe of 2026-11-27). What every --json result is printed with.
std::string json_dump(const nlohmann::json& j, int indent = 2);

// The value of `key`, which must be present (any type).
const nlohmann::json& json_key(const nlohmann::json& j, const std::string& key, const std::string& where);
// An integer in [min, max].
int64_t json_int(const nlohmann::json& j, const std::string& key, const std::string& where, int64_t min = 1,
                 int64_t max = std::numeric_limits<int64_t>::max());
double json_double(const nlohmann::json& j, const std::string& key, const std::string& where);  // any number
std::string json_string(const nlohmann::json& j, const std::string& key, const std::string& where);
bool json_bool(const nlohmann::json& j, const std::string& key, const std::string& where);
// Whether `key` holds a value: present and not null (what the _or forms below fall back on is the opposite).
bool json_given(const nlohmann::json& j, const std::string& key);
// Whether `key` is present, null or not (j.contains, noted as read: see JsonKeysRead).
bool json_has(const nlohmann::json& j, const std::string& key);
// The _or forms: `fallback` when the key is absent or null (HF configs write null for "the default").
int64_t json_int_or(const nlohmann::json& j, const std::string& key, const std::string& where, int64_t fallback, int64_t min = 1);
double json_double_or(const nlohmann::json& j, const std::string& key, const std::string& where, double fallback);
std::string json_string_or(const nlohmann::json& j, const std::string& key, const std::string& where, const std::string& fallback);
bool json_bool_or(const nlohmann::json& j, const std::string& key, const std::string& where, bool fallback);

// While one lives, the keys of `root` (the object itself, not the objects inside it) that json_key, json_given and
// the readers above are asked for are noted in it (on its thread; they nest, the innermost noting): the top-level keys
// a family's config reader knows, present or not, so that a key of a hand-written config.json that none of them reads
// can be told from a misspelling of one (models::refuse_misspelt_keys). Nested objects' keys ("type" inside
// rope_scaling) are not the config's: noted, HF's top-level "dtype" read as a misspelt "type" (helper-37's review).
class JsonKeysRead {
 public:
  explicit JsonKeysRead(const nlohmann::json& root);
  ~JsonKeysRead();
  JsonKeysRead(const JsonKeysRead&) = delete;
  JsonKeysRead& operator=(const JsonKeysRead&) = delete;
  const std::set<std::string>& keys() const { return keys_; }
  void note(const nlohmann::json& j, const std::string& key) {
    if (&j == root_) keys_.insert(key);
  }

 private:
  const nlohmann::json* root_;
  std::set<std::string> keys_;
  JsonKeysRead* outer_;
};

// The first key (in sorted order, keys ending in "digest" after the others: a digest moves with the setting that
// names the cause) whose value differs between two objects — settings compared at a resume or
// between ranks — with both values as JSON (`absent` where an object lacks the key: a fingerprint leaves out a setting
// at its default, so its callers say "the default" — "absent on rank 0" named a default given explicitly as missing,
// the eighteenth probe of 2026-11-30); none when they are equal.
// Nested objects and lists of one length are followed to the value that differs ("network.config.rope_theta",
// "layers[2]"); two descriptions made of ", "-separated parts of one count ("activation 3, ln_eps 1e-05, ...") by the
// part that differs. Two documents that are not both objects differ at key "".
// `defaults` (an object, nested as the documents are) holds the values of keys left out at their default: an absent
// key found there reads `absent` and its value ("the default \"fp32\""), so that a resume refused after
// `--precision fp32` was typed names fp32, not only a default.
struct JsonDifference {
  std::string key, first, second;
};
std::optional<JsonDifference> json_first_difference(const nlohmann::json& first, const nlohmann::json& second,
                                                    const std::string& absent = "absent",
                                                    const nlohmann::json& defaults = nlohmann::json::object());

// Runs `read`, which reads part of a document through the functions above and names only that part, and
// prefixes a mimic::Error it throws with `path`: the message names the file too.
template <typename F>
decltype(auto) in_file(const std::string& path, F&& read) {
  try {
    return read();
  } catch (const Error& e) {
    fail(path, ": ", e.what());
  }
}

}  // namespace mimic
