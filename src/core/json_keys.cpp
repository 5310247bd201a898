#include "mimic/core/json_keys.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "mimic/core/error.h"
#include "mimic/core/utf8.h"

namespace mimic {

namespace {
// json_parse's SAX handler: nlohmann's own document builder, watching for a key given twice.
struct Watch {
  using json = nlohmann::json;
  nlohmann::detail::json_sax_dom_parser<json> dom;
  std::vector<std::set<std::string>> open;  // the keys of each object being read
  std::string twice;
  explicit Watch(json& out) : dom(out, true) {}
  bool null() { return dom.null(); }
  bool boolean(bool v) { return dom.boolean(v); }
  bool number_integer(json::number_integer_t v) { return dom.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return dom.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) { return dom.number_float(v, s); }
  bool string(json::string_t& v) { return dom.string(v); }
  bool binary(json::binary_t& v) { return dom.binary(v); }
  bool start_object(std::size_t n) {
    open.emplace_back();
    return dom.start_object(n);
  }
  bool key(json::string_t& k) {
    if (!open.empty() && !open.back().insert(k).second && twice.empty()) twice = k;
    return dom.key(k);
  }
  bool end_object() {
    if (!open.empty()) open.pop_back();
    return dom.end_object();
  }
  bool start_array(std::size_t n) { return dom.start_array(n); }
  bool end_array() { return dom.end_array(); }
  bool parse_error(std::size_t position, const std::string& last, const nlohmann::detail::exception& e) {
    return dom.parse_error(position, last, e);
  }
};
}  // namespace

std::string json_dump(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json json_parse(const std::string& text, const std::string& where) {
  // A key given twice in one object: nlohmann keeps the last, other readers (Python's json) do too, some the first,
  // and a hand edit that added a key instead of changing it runs with a value the user did not mean (the probe of
  // 2026-11-27: config.json's n_head twice). Refused by name. Watched through a SAX handler around nlohmann's own
  // document builder: its callback parser (the first way this was done) rescans the enclosing container at each
  // object's end, quadratic in the objects of an array — a 900 KB file of 300,000 empty objects took 5.7 minutes.
  // a NUL byte ended the parse there, and the rest of the file was ignored without a word (the sixth probe)
  if (const auto nul = text.find('\0'); nul != std::string::npos) fail(where, ": malformed JSON: a NUL byte at offset ", nul);
  nlohmann::json j;
  Watch watch(j);
  try {
    nlohmann::json::sax_parse(text, &watch);
  } catch (const nlohmann::json::exception& e) {
    // nlohmann's words without its "[json.exception.parse_error.101] " tag: mimic's one line
    std::string what = e.what();
    if (what.rfind("[json.exception.", 0) == 0 && what.find("] ") != std::string::npos) what = what.substr(what.find("] ") + 2);
    // it quotes the token it read, whole: a 20 MB string with a bad byte at its end put 20 MB on stderr, and a number of
    // 5 million digits ("number overflow parsing '…'") 5 MB (helper-107's and helper-108's probes of 2026-12-07). A long
    // message keeps its start (where: line and column) and its end (where the parser stopped, what it expected).
    if (constexpr size_t kMost = 400; what.size() > kMost)
      what = what.substr(0, 200) + " ... " + what.substr(what.size() - 160) + " (" + std::to_string(what.size()) + " bytes of message, cut)";
    // its "last read" quotes the input's bytes, which may be no UTF-8 (a Latin-1 "café" went to stderr raw: the fifth
    // probe of 2026-11-27): bytes beyond ASCII and control characters are shown as \xHH
    fail(where, ": malformed JSON: ", shown_bytes(what));
  }
  MIMIC_CHECK(watch.twice.empty(), where, ": key '", watch.twice, "' is given twice in one object (give each key once)");
  return j;
}

namespace {
thread_local JsonKeysRead* keys_read = nullptr;
void note_read(const nlohmann::json& j, const std::string& key) {
  if (keys_read) keys_read->note(j, key);
}
}  // namespace

JsonKeysRead::JsonKeysRead(const nlohmann::json& root) : root_(&root), outer_(keys_read) { keys_read = this; }
JsonKeysRead::~JsonKeysRead() { keys_read = outer_; }

const nlohmann::json& json_key(const nlohmann::json& j, const std::string& key, const std::string& where) {
  note_read(j, key);
  MIMIC_CHECK(j.is_object(), where, ": expected a JSON object with key '", key, "', got ", j.dump().substr(0, 80));
  MIMIC_CHECK(j.contains(key), where, ": missing key '", key, "'");
  return j[key];
}

int64_t json_int(const nlohmann::json& j, const std::string& key, const std::string& where, int64_t min, int64_t max) {
  const auto& v = json_key(j, key, where);
  MIMIC_CHECK(v.is_number_integer(), where, ": key '", key, "' must be an integer, got ", v.dump());
  // An unsigned value above INT64_MAX would wrap: compare before converting.
  MIMIC_CHECK(!v.is_number_unsigned() || v.get<uint64_t>() <= static_cast<uint64_t>(max), where, ": key '", key, "' must be at most ",
              max, ", got ", v.dump());
  const int64_t x = v.get<int64_t>();
  MIMIC_CHECK(x >= min, where, ": key '", key, "' must be at least ", min, ", got ", x);
  MIMIC_CHECK(x <= max, where, ": key '", key, "' must be at most ", max, ", got ", x);
  return x;
}

double json_double(const nlohmann::json& j, const std::string& key, const std::string& where) {
  const auto& v = json_key(j, key, where);
  MIMIC_CHECK(v.is_number(), where, ": key '", key, "' must be a number, got ", v.dump());
  return v.get<double>();
}

std::string json_string(const nlohmann::json& j, const std::string& key, const std::string& where) {
  const auto& v = json_key(j, key, where);
  MIMIC_CHECK(v.is_string(), where, ": key '", key, "' must be a string, got ", v.dump());
  return v.get<std::string>();
}

bool json_bool(const nlohmann::json& j, const std::string& key, const std::string& where) {
  const auto& v = json_key(j, key, where);
  MIMIC_CHECK(v.is_boolean(), where, ": key '", key, "' must be true or false, got ", v.dump());
  return v.get<bool>();
}

bool json_has(const nlohmann::json& j, const std::string& key) {
  note_read(j, key);
  return j.is_object() && j.contains(key);
}

bool json_given(const nlohmann::json& j, const std::string& key) {
  note_read(j, key);
  return j.is_object() && j.contains(key) && !j[key].is_null();
}

namespace {
bool absent(const nlohmann::json& j, const std::string& key) { return !json_given(j, key); }
}  // namespace

int64_t json_int_or(const nlohmann::json& j, const std::string& key, const std::string& where, int64_t fallback, int64_t min) {
  return absent(j, key) ? fallback : json_int(j, key, where, min);
}
double json_double_or(const nlohmann::json& j, const std::string& key, const std::string& where, double fallback) {
  return absent(j, key) ? fallback : json_double(j, key, where);
}
std::string json_string_or(const nlohmann::json& j, const std::string& key, const std::string& where, const std::string& fallback) {
  return absent(j, key) ? fallback : json_string(j, key, where);
}
bool json_bool_or(const nlohmann::json& j, const std::string& key, const std::string& where, bool fallback) {
  return absent(j, key) ? fallback : json_bool(j, key, where);
}

std::optional<JsonDifference> json_first_difference(const nlohmann::json& a, const nlohmann::json& b, const std::string& absent,
                                                    const nlohmann::json& defaults) {
  if (a == b) return std::nullopt;
  // Into nested objects and lists of one length, so that a changed rope_theta inside a fingerprint's "network" reads
  // "network.rope_theta (10000.0 then, 500000.0 now)", not the two whole objects (the tenth probe of 2026-11-29: a
  // line of ~600 characters that named no key).
  auto inner = [](const std::string& at, const std::string& part, std::optional<JsonDifference> d) {
    if (d) d->key = d->key.empty() ? at : at + (d->key[0] == '[' ? "" : part) + d->key;
    return d;
  };
  if (a.is_array() && b.is_array() && a.size() == b.size()) {
    for (size_t i = 0; i < a.size(); ++i)
      if (auto d = json_first_difference(a[i], b[i], absent)) return inner("[" + std::to_string(i) + "]", "", std::move(d));
    return std::nullopt;
  }
  // A description made of ", "-separated parts (models::network_description: "activation 3, ln_eps 1e-05, ...,
  // rope_theta 10000"): the part that differs, when both have as many parts.
  if (a.is_string() && b.is_string()) {
    auto parts = [](const std::string& t) {
      std::vector<std::string> out;
      for (size_t at = 0; at <= t.size();) {
        const size_t end = std::min(t.find(", ", at), t.size());
        out.push_back(t.substr(at, end - at));
        at = end + 2;
      }
      return out;
    };
    const auto x = parts(a.get<std::string>()), y = parts(b.get<std::string>());
    if (x.size() > 1 && x.size() == y.size())
      for (size_t i = 0; i < x.size(); ++i)
        if (x[i] != y[i]) return JsonDifference{"", json_dump(x[i], -1), json_dump(y[i], -1)};
  }
  if (!a.is_object() || !b.is_object()) return JsonDifference{"", json_dump(a, -1), json_dump(b, -1)};
  std::set<std::string> sorted;
  for (auto it = a.begin(); it != a.end(); ++it) sorted.insert(it.key());
  for (auto it = b.begin(); it != b.end(); ++it) sorted.insert(it.key());
  // the keys in order, those ending in "digest" last: a digest moves with a setting beside it (another --samples
  // hashes other samples), which names the cause where "source.data_digest" named an opaque hash (helper-87's probe)
  std::vector<std::string> keys;
  const auto is_digest = [](const std::string& k) { return k.size() >= 6 && k.compare(k.size() - 6, 6, "digest") == 0; };
  for (const bool digest : {false, true})
    for (const auto& k : sorted)
      if (is_digest(k) == digest) keys.push_back(k);
  for (const auto& k : keys) {
    if (a.contains(k) && b.contains(k)) {
      const auto& below = defaults.is_object() && defaults.contains(k) ? defaults.at(k) : nlohmann::json::object();
      if (auto d = json_first_difference(a.at(k), b.at(k), absent, below)) return inner(k, ".", std::move(d));
      continue;
    }
    const std::string missing = defaults.is_object() && defaults.contains(k) ? absent + " " + json_dump(defaults.at(k), -1) : absent;
    return JsonDifference{k, a.contains(k) ? json_dump(a.at(k), -1) : missing, b.contains(k) ? json_dump(b.at(k), -1) : missing};
  }
  return std::nullopt;  // equal as text though not as values (e.g. 1 and 1.0)
}

}  // namespace mimic
