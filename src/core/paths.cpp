#include "mimic/core/paths.h"

#include <cstdlib>
#include <filesystem>

#include "mimic/core/error.h"
#include "mimic/core/version.h"

namespace mimic {

std::string cache_dir() {
  if (const char* c = std::getenv("MIMIC_CACHE"); c && *c) return c;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/mimic";
}

std::string asset_path(const std::string& relative) {
  std::string p = cache_dir() + "/assets/" + relative;
  MIMIC_CHECK(std::filesystem::exists(p), "asset not found: ", p, " (run tools/setup.sh to fetch mimic's assets)");
  return p;
}

const char* const* embedded_model_names() {
  static const char* const names[] = {"gpt2-mini", "bert-mini", "bert-mini-spam", "bert-mini-sotu-era", nullptr};
  return names;
}

bool is_embedded_model_name(const std::string& name) {
  for (auto n = embedded_model_names(); *n; ++n)
    if (name == *n) return true;
  return false;
}

std::string embedded_model_list() {
  std::string list;
  for (auto n = embedded_model_names(); *n; ++n) list += std::string(list.empty() ? "" : ", ") + *n;
  return list;
}

std::string embedded_model_dir(const std::string& name) {
  MIMIC_CHECK(is_embedded_model_name(name), "'", name, "' is not an embedded model (", embedded_model_list(), ")");
  std::string tried;
  auto candidate = [&](const std::string& root) -> bool {
    tried += (tried.empty() ? "" : ", ") + root + "/" + name;
    return std::filesystem::exists(root + "/" + name + "/config.json");
  };
  if (const char* m = std::getenv("MIMIC_MODELS"); m && *m && candidate(m)) return std::string(m) + "/" + name;
  if (candidate(MIMIC_INSTALLED_MODELS_DIR)) return std::string(MIMIC_INSTALLED_MODELS_DIR) + "/" + name;
  if (candidate(MIMIC_SOURCE_MODELS_DIR)) return std::string(MIMIC_SOURCE_MODELS_DIR) + "/" + name;
  fail("embedded model ", name, " not found (looked in ", tried, "; set MIMIC_MODELS to the folder holding it)");
}

std::string path_identity(const std::string& path) {
  if (path.empty()) return path;
  std::string p = std::filesystem::absolute(path).lexically_normal().string();
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

}  // namespace mimic
