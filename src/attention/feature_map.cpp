#include "mimic/attention/feature_map.h"

#include <algorithm>
#include <cmath>

#include "mimic/core/error.h"

namespace mimic::attention {

#define MIMIC_FEATURE_MAP(id, summary) FeatureMap make_##id##_map(const FeatureMapSpec&);
#include "mimic/attention/maps/maps.def"
#undef MIMIC_FEATURE_MAP

namespace {
using Factory = FeatureMap (*)(const FeatureMapSpec&);
struct Entry {
  FeatureMapInfo info;
  Factory make;
};
const std::vector<Entry>& registry() {
  static const std::vector<Entry> entries = {
#define MIMIC_FEATURE_MAP(id, summary) {{#id, summary}, &make_##id##_map},
#include "mimic/attention/maps/maps.def"
#undef MIMIC_FEATURE_MAP
  };
  return entries;
}
}  // namespace

const std::vector<FeatureMapInfo>& feature_maps() {
  static const std::vector<FeatureMapInfo> infos = [] {
    std::vector<FeatureMapInfo> v;
    for (const auto& e : registry()) v.push_back(e.info);
    return v;
  }();
  return infos;
}

FeatureMap make_feature_map(const FeatureMapSpec& spec) {
  MIMIC_CHECK(spec.n_head >= 1 && spec.head_dim >= 1, "feature map '", spec.name, "': n_head and head_dim must be positive (got ",
              spec.n_head, ", ", spec.head_dim, ")");
  MIMIC_CHECK(spec.options.is_object(), "feature map '", spec.name, "': options must be a JSON object, got ", spec.options.dump());
  for (const auto& e : registry())
    if (e.info.name == spec.name) return e.make(spec);
  std::string known;
  for (const auto& e : registry()) known += (known.empty() ? "" : ", ") + e.info.name;
  fail("unknown feature map '", spec.name, "' (known: ", known, ")");
}

MapOptions::MapOptions(const FeatureMapSpec& spec) : spec_(spec) {}

const nlohmann::json* MapOptions::find(const std::string& key) {
  used_.push_back(key);
  auto it = spec_.options.find(key);
  return it == spec_.options.end() ? nullptr : &*it;
}

void check_map_size(const std::string& map, int64_t n_head, int64_t in, int64_t out) {
  // in double: the product of three checked-elsewhere int64 values may overflow int64
  const double n = static_cast<double>(n_head) * static_cast<double>(in) * static_cast<double>(out);
  MIMIC_CHECK(n <= static_cast<double>(kMaxMapParameters), "feature map '", map, "': ", n_head, " heads x ", in, " x ", out,
              " is more than the ", kMaxMapParameters, " parameters a map may hold (use fewer features)");
}

double MapOptions::number(const std::string& key, double fallback) {
  const auto* j = find(key);
  if (!j) return fallback;
  MIMIC_CHECK(j->is_number(), "feature map '", spec_.name, "': option '", key, "' must be a number, got ", j->dump());
  const double v = j->get<double>();
  MIMIC_CHECK(std::isfinite(v), "feature map '", spec_.name, "': option '", key, "' must be a finite number, got ", j->dump());
  return v;
}

int64_t MapOptions::integer(const std::string& key, int64_t fallback) {
  const auto* j = find(key);
  if (!j) return fallback;
  MIMIC_CHECK(j->is_number_integer(), "feature map '", spec_.name, "': option '", key, "' must be an integer, got ", j->dump());
  return j->get<int64_t>();
}

int64_t MapOptions::integer(const std::string& key, int64_t fallback, int64_t lo, int64_t hi) {
  const bool given = spec_.options.contains(key);
  const int64_t v = integer(key, fallback);
  MIMIC_CHECK(!given || (v >= lo && v <= hi), "feature map '", spec_.name, "': option '", key, "' must be in [", lo, ", ", hi,
              "], got ", spec_.options.at(key).dump());
  return v;
}

bool MapOptions::flag(const std::string& key, bool fallback) {
  const auto* j = find(key);
  if (!j) return fallback;
  MIMIC_CHECK(j->is_boolean(), "feature map '", spec_.name, "': option '", key, "' must be true or false, got ", j->dump());
  return j->get<bool>();
}

std::string MapOptions::text(const std::string& key, const std::string& fallback) {
  const auto* j = find(key);
  if (!j) return fallback;
  MIMIC_CHECK(j->is_string(), "feature map '", spec_.name, "': option '", key, "' must be a string, got ", j->dump());
  return j->get<std::string>();
}

void MapOptions::finish() const {
  for (auto it = spec_.options.begin(); it != spec_.options.end(); ++it) {
    if (std::find(used_.begin(), used_.end(), it.key()) != used_.end()) continue;
    std::string known;
    for (const auto& k : used_) known += (known.empty() ? "" : ", ") + k;
    fail("feature map '", spec_.name, "': unknown option '", it.key(), "' (options: ", known.empty() ? "none" : known, ")");
  }
}

}  // namespace mimic::attention
