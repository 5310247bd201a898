#include "text/unicode.h"

#include <algorithm>
#include <cstring>

namespace mimic::text::unicode {

namespace {
struct CategoryRange {
  uint32_t first, last;
  uint8_t category;
};
struct SeqEntry {
  uint32_t cp, offset, length;
};
struct CombiningClass {
  uint32_t cp;
  uint8_t ccc;
};
#include "text/unicode_tables.inc"

template <typename T>
const T* find_entry(const T* begin, const T* end, uint32_t cp) {
  auto it = std::lower_bound(begin, end, cp, [](const T& e, uint32_t c) { return e.cp < c; });
  return it != end && it->cp == cp ? it : nullptr;
}

int category_index(char32_t cp) {
  if (cp >= 0x110000) return 0;
  const auto* b = std::begin(kCategoryRanges);
  const auto* e = std::end(kCategoryRanges);
  auto it = std::upper_bound(b, e, static_cast<uint32_t>(cp), [](uint32_t c, const CategoryRange& r) { return c < r.first; });
  return (it - 1)->category;
}

int ccc(char32_t cp) {
  const auto* e = find_entry(std::begin(kCombiningClass), std::end(kCombiningClass), cp);
  return e ? e->ccc : 0;
}

// Hangul syllable decomposition (Unicode ch. 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr int kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;
}  // namespace

const char* category(char32_t cp) { return kCategoryNames[category_index(cp)]; }
bool is_letter(char32_t cp) { return category(cp)[0] == 'L'; }
bool is_number(char32_t cp) { return category(cp)[0] == 'N'; }
bool is_mark_nonspacing(char32_t cp) { return std::strcmp(category(cp), "Mn") == 0; }

bool is_white_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool is_python_space(char32_t cp) { return is_white_space(cp) || (cp >= 0x1C && cp <= 0x1F); }

void append_lower(char32_t cp, std::u32string& out) {
  const auto* e = find_entry(std::begin(kLowerMap), std::end(kLowerMap), cp);
  if (!e) {
    out.push_back(cp);
    return;
  }
  for (uint32_t i = 0; i < e->length; ++i) out.push_back(kLowerData[e->offset + i]);
}

std::u32string nfd(const std::u32string& s) {
  std::u32string out;
  out.reserve(s.size());
  for (char32_t cp : s) {
    if (cp >= kSBase && cp < kSBase + kSCount) {
      int si = static_cast<int>(cp - kSBase);
      out.push_back(kLBase + si / kNCount);
      out.push_back(kVBase + (si % kNCount) / kTCount);
      if (si % kTCount) out.push_back(kTBase + si % kTCount);
      continue;
    }
    const auto* e = find_entry(std::begin(kDecompMap), std::end(kDecompMap), cp);
    if (!e) {
      out.push_back(cp);
      continue;
    }
    for (uint32_t i = 0; i < e->length; ++i) out.push_back(kDecompData[e->offset + i]);
  }
  // Canonical ordering: stable sort of every run of non-starters by combining class.
  for (size_t i = 0; i < out.size();) {
    if (ccc(out[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < out.size() && ccc(out[j]) != 0) ++j;
    std::stable_sort(out.begin() + static_cast<std::ptrdiff_t>(i), out.begin() + static_cast<std::ptrdiff_t>(j),
                     [](char32_t a, char32_t b) { return ccc(a) < ccc(b); });
    i = j;
  }
  return out;
}

std::vector<Unit> decode_utf8(const std::string& s) {
  std::vector<Unit> units;
  units.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const uint32_t n = static_cast<uint32_t>(s.size());
  uint32_t i = 0;
  while (i < n) {
    unsigned c = p[i];
    uint32_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    bool ok = len > 0 && i + len <= n;
    for (uint32_t k = 1; ok && k < len; ++k) {
      ok = (p[i + k] & 0xC0) == 0x80;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    static const char32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (ok && (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))) ok = false;
    if (!ok) {
      units.push_back({kInvalid, i, i + 1});
      ++i;
      continue;
    }
    units.push_back({cp, i, i + len});
    i += len;
  }
  return units;
}

std::u32string to_u32(const std::string& utf8) {
  std::u32string out;
  for (const auto& u : decode_utf8(utf8)) out.push_back(u.cp == kInvalid ? 0xFFFD : u.cp);
  return out;
}

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string to_utf8(const std::u32string& s) {
  std::string out;
  for (char32_t cp : s) append_utf8(cp, out);
  return out;
}

}  // namespace mimic::text::unicode
