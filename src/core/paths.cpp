#include "core/paths.h"

#include <cstdlib>
#include <filesystem>

#include "core/error.h"

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

}  // namespace mimic
