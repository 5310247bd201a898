#include "mimic/attention/kinds.h"

#include <algorithm>
#include <regex>
#include <cctype>

#include <torch/torch.h>

#include "mimic/attention/distillable.h"
#include "mimic/attention/feature_map.h"
#include "mimic/core/error.h"

namespace mimic::attention {

#define MIMIC_ATTENTION_KIND(id, role, summary, options) AttentionKernel make_##id##_kernel(const nlohmann::json&, int64_t, int64_t);
#include "mimic/attention/kinds.def"
#undef MIMIC_ATTENTION_KIND

namespace {
using Factory = AttentionKernel (*)(const nlohmann::json&, int64_t, int64_t);
struct Entry {
  AttentionKindInfo info;
  Factory make;
};
const std::vector<Entry>& registry() {
  static const std::vector<Entry> entries = {
#define MIMIC_ATTENTION_KIND(id, role, summary, options) {{#id, KindRole::role, summary, options}, &make_##id##_kernel},
#include "mimic/attention/kinds.def"
#undef MIMIC_ATTENTION_KIND
  };
  return entries;
}

std::string kind_names() {
  std::string known;
  for (const auto& e : registry()) known += (known.empty() ? "" : ", ") + e.info.name;
  return known;
}

const Entry& entry(const std::string& name) {
  for (const auto& e : registry())
    if (e.info.name == name) return e;
  fail("unknown attention kind '", name, "' (known: ", kind_names(), ")");
}
}  // namespace

const std::vector<AttentionKindInfo>& attention_kinds() {
  static const std::vector<AttentionKindInfo> infos = [] {
    std::vector<AttentionKindInfo> v;
    for (const auto& e : registry()) v.push_back(e.info);
    return v;
  }();
  return infos;
}

const AttentionKindInfo& attention_kind(const std::string& name) { return entry(name).info; }

bool AttentionKindInfo::takes_option(const std::string& key) const {
  // (", "-separated in kinds.def; each key whole: "gate" is not taken by "gates")
  size_t at = 0;
  while (at < options.size()) {
    const size_t end = std::min(options.find(", ", at), options.size());
    if (options.compare(at, end - at, key) == 0) return true;
    at = end + 2;
  }
  return false;
}

void fail_unknown_option(const std::string& kind, const std::string& key) {
  const auto& info = attention_kind(kind);
  // each parser asks the list first, so a listed key reaches its closing refusal only when the parser forgot to read it
  // (AttentionKinds.EveryRegisteredKind… catches that): not the user's mistake, said as such
  MIMIC_CHECK(!info.takes_option(key), "attention kind '", kind, "' lists option '", key,
              "' in kinds.def but does not read it (a defect in mimic: please report it)");
  fail("unknown ", kind, " attention option '", key, "' (options: ", info.options, ")");
}

AttentionKernel make_attention_kernel(const std::string& kind, const nlohmann::json& options, int64_t n_head, int64_t head_dim) {
  const auto& e = entry(kind);
  auto k = e.make(options.is_null() ? nlohmann::json::object() : options, n_head, head_dim);
  // The registry's promise, checked where kernels are born: a distillable kind implements the interface.
  MIMIC_CHECK(e.info.role != KindRole::Distillable || std::dynamic_pointer_cast<DistillableKernel>(k),
              "attention kind '", kind, "' is registered as distillable but does not implement DistillableKernel");
  return k;
}

nlohmann::json canonical_options(const std::string& kind, const nlohmann::json& options, int64_t n_head, int64_t head_dim) {
  return make_attention_kernel(kind, options, n_head, head_dim)->config_json();
}

bool is_reference(const AttentionKernelImpl& kernel) { return attention_kind(kernel.kind()).role == KindRole::Reference; }

std::shared_ptr<DistillableKernel> as_distillable(const AttentionKernel& kernel, const std::string& what) {
  MIMIC_CHECK(kernel != nullptr, what, ": no attention kernel");
  auto d = std::dynamic_pointer_cast<DistillableKernel>(kernel);
  MIMIC_CHECK(d != nullptr, what, " runs attention kind '", kernel->kind(), "', which has no distillable form (",
              attention_kind(kernel->kind()).summary, ")");
  return d;
}

nlohmann::json parse_spec_options(const std::string& rest, const std::string& spec) {
  nlohmann::json options = nlohmann::json::object();
  MIMIC_CHECK(!rest.empty(), "attention '", spec, "': expected KIND:key=value[,key=value...] after the colon");
  size_t at = 0;
  while (at <= rest.size()) {
    // the next comma outside brackets: a list value (decay=[0.5,0.9]) holds commas of its own, and was cut at its
    // first ("'0.9]' is not key=value": helper-99's probe of 2026-12-06)
    size_t comma = at;
    for (int depth = 0; comma < rest.size() && !(rest[comma] == ',' && depth == 0); ++comma) {
      depth += (rest[comma] == '[' || rest[comma] == '{') - (rest[comma] == ']' || rest[comma] == '}');
      // a stray closing bracket would keep every later comma from splitting, and the message name the wrong option
      MIMIC_CHECK(depth >= 0, "attention '", spec, "': '", rest[comma], "' at '", rest.substr(at, comma + 1 - at), "' closes no bracket");
    }
    const std::string item = rest.substr(at, comma - at);
    const auto eq = item.find('=');
    MIMIC_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < item.size(), "attention '", spec, "': '", item,
                "' is not key=value");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    // JSON skips blanks around a value (window= 3 read as 3); an option of the command line takes none
    MIMIC_CHECK(std::isspace(static_cast<unsigned char>(value.front())) == 0 && std::isspace(static_cast<unsigned char>(value.back())) == 0 &&
                    std::isspace(static_cast<unsigned char>(key.front())) == 0 && std::isspace(static_cast<unsigned char>(key.back())) == 0,
                "attention '", spec, "': '", item, "' has blanks around its key or value: write key=value without them");
    MIMIC_CHECK(!options.contains(key), "attention '", spec, "': option '", key, "' given twice");
    auto parsed = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
    // Leading zeros are decimal, as in every integer option and recall-task spec (window=010 is 10); JSON refuses
    // them, and the text "010" was then refused as not an integer while mqar:seq_len=010 meant 10.
    if (parsed.is_discarded() && value.size() > 1 && value.size() <= 18 &&
        value.find_first_not_of("0123456789", value[0] == '-' ? 1 : 0) == std::string::npos && value != "-")
      parsed = std::stoll(value);
    // Decimals JSON refuses and every real option of the command line takes (.5, 5., -.5e-1): window_weight=.5 was
    // refused while --lr .5 was not (the fourth probe of 2026-11-27). Hexadecimal, inf and nan stay refused.
    static const std::regex decimal(R"(-?(\d+\.\d*|\.\d+)([eE][+-]?\d+)?)");
    if (parsed.is_discarded() && std::regex_match(value, decimal)) parsed = std::stod(value);
    MIMIC_CHECK(!parsed.is_discarded() || (value.front() != '[' && value.front() != '{'), "attention '", spec, "': '", item,
                "': its value is no JSON ", value.front() == '[' ? "list" : "object",
                " (write it as JSON: brackets closed, numbers such as 0.5 with a digit before the point)");
    options[key] = parsed.is_discarded() ? nlohmann::json(value) : parsed;
    at = comma + 1;
  }
  return options;
}

KindSpec parse_kind_spec(const std::string& spec) {
  KindSpec ks;
  const auto colon = spec.find(':');
  ks.kind = attention_kind(spec.substr(0, colon)).name;  // an unknown kind: the error lists the known ones
  if (colon == std::string::npos) return ks;
  ks.options = parse_spec_options(spec.substr(colon + 1), spec);
  return ks;
}

AttentionKernel kernel_from_spec(const std::string& spec, int64_t n_head, int64_t head_dim) {
  const auto colon = spec.find(':');
  const std::string form = spec.substr(0, colon);
  const std::string rest = colon == std::string::npos ? "" : spec.substr(colon + 1);
  // the short forms: linear:<map>, sla:<map> (a map's name, no key=value)
  if ((form == "linear" || form == "sla") && !rest.empty() && rest.find('=') == std::string::npos) {
    nlohmann::json options = {{"feature_map", rest}, {"gates", form == "sla"}};
    return make_attention_kernel("linear", options, n_head, head_dim);
  }
  const bool known = std::any_of(attention_kinds().begin(), attention_kinds().end(),
                                 [&](const AttentionKindInfo& k) { return k.name == form; });
  MIMIC_CHECK(known, "attention '", spec, "': expected softmax, linear:<map>, sla:<map> or KIND[:key=value,...] (kinds: ", kind_names(),
              "; maps: ", [] {
    std::string names;
    for (const auto& m : feature_maps()) names += (names.empty() ? "" : ", ") + m.name;
    return names;
  }(), ")");
  const auto ks = parse_kind_spec(spec);
  return make_attention_kernel(ks.kind, ks.options, n_head, head_dim);
}

}  // namespace mimic::attention
