#include "mimic/core/words.h"

#include <algorithm>
#include <cstdio>

namespace mimic {

namespace {
// Levenshtein distance: insertions, deletions and substitutions of one byte each
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}
}  // namespace

std::string nearest_name(const std::string& word, const std::vector<std::string>& names, size_t most) {
  std::string nearest;
  // a few letters off, by the word's length: a typo, not another name
  size_t best = (most > 0 ? most : std::max<size_t>(2, word.size() / 4 + 1)) + 1;
  for (const auto& name : names)
    if (const size_t d = edit_distance(word, name); d < best) best = d, nearest = name;
  return nearest;
}

std::string clamped_note(const std::string& option, int64_t asked, int64_t used, const std::string& what) {
  if (used >= asked) return "";
  return option + " " + std::to_string(asked) + " is more than " + what + " (" + std::to_string(used) + "): using " + std::to_string(used);
}

std::string count_of(int64_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many.empty() ? one + "s" : many);
}

std::string byte_size(double bytes) {
  char size[48];
  if (bytes >= 1e9) std::snprintf(size, sizeof size, "%.2f GB", bytes / 1e9);
  else if (bytes >= 1e6) std::snprintf(size, sizeof size, "%.1f MB", bytes / 1e6);
  else std::snprintf(size, sizeof size, "%.0f kB", bytes / 1e3);
  return size;
}

}  // namespace mimic
