#include "mimic/text/unicode.h"

#include <algorithm>
#include <iterator>

namespace mimic::text::unicode {

namespace {
// Row types of the generated tables.
struct CategoryStart {
  char32_t first;
  uint8_t category;
};
struct Range {
  char32_t first, last;
};
struct SeqEntry {
  char32_t cp;
  uint32_t offset, length;
};
struct CombiningClass {
  char32_t cp;
  uint8_t ccc;
};
struct Composition {
  char32_t first, second, composite;
};
#include "mimic/text/unicode_tables.inc"

static_assert(std::size(kCategoryNames) == static_cast<size_t>(Category::Co) + 1, "Category enum and table disagree");

// The entry of a table sorted by .cp whose cp is `cp`, or nullptr.
template <typename T, size_t N>
const T* find_cp(const T (&table)[N], char32_t cp) {
  auto it = std::lower_bound(std::begin(table), std::end(table), cp, [](const T& e, char32_t c) { return e.cp < c; });
  return it != std::end(table) && it->cp == cp ? it : nullptr;
}

template <size_t N>
bool in_ranges(const Range (&table)[N], char32_t cp) {
  auto it = std::upper_bound(std::begin(table), std::end(table), cp, [](char32_t c, const Range& r) { return c < r.first; });
  return it != std::begin(table) && cp <= std::prev(it)->last;
}

int ccc(char32_t cp) {
  if (cp < 0x300) return 0;  // nothing below the combining diacritics block has a class
  const auto* e = find_cp(kCombiningClass, cp);
  return e ? e->ccc : 0;
}

// Hangul syllables decompose into and compose from conjoining jamo algorithmically (Unicode ch. 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

// The primary composite of (a, b), or 0 when there is none.
char32_t compose_pair(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)  // L + V → LV
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)  // LV + T
    return a + (b - kTBase);
  auto it = std::lower_bound(std::begin(kCompositions), std::end(kCompositions), std::make_pair(a, b),
                             [](const Composition& c, const std::pair<char32_t, char32_t>& k) {
                               return c.first != k.first ? c.first < k.first : c.second < k.second;
                             });
  return it != std::end(kCompositions) && it->first == a && it->second == b ? it->composite : 0;
}
}  // namespace

Category category(char32_t cp) {
  if (cp >= 0x110000) return Category::Cn;
  auto it = std::upper_bound(std::begin(kCategoryStarts), std::end(kCategoryStarts), cp,
                             [](char32_t c, const CategoryStart& s) { return c < s.first; });
  return static_cast<Category>(std::prev(it)->category);  // the first start is U+0000
}

const char* category_name(Category c) { return kCategoryNames[static_cast<int>(c)]; }

bool is_letter(char32_t cp) {
  auto c = category(cp);
  return c >= Category::Lu && c <= Category::Lo;
}
bool is_number(char32_t cp) {
  auto c = category(cp);
  return c >= Category::Nd && c <= Category::No;
}
bool is_punctuation(char32_t cp) {
  auto c = category(cp);
  return c >= Category::Pc && c <= Category::Po;
}
bool is_other(char32_t cp) {
  auto c = category(cp);
  return c == Category::Cn || c >= Category::Cc;
}
bool is_regex_word(char32_t cp) {
  switch (category(cp)) {
    case Category::Lu: case Category::Ll: case Category::Lt: case Category::Lm: case Category::Lo:
    case Category::Nl: case Category::Mn: case Category::Mc: case Category::Me: case Category::Nd: case Category::Pc:
      return true;
    default:
      break;
  }
  return cp == 0x200C || cp == 0x200D || (cp >= 0x24B6 && cp <= 0x24E9) || (cp >= 0x1F130 && cp <= 0x1F149) ||
         (cp >= 0x1F150 && cp <= 0x1F169) || (cp >= 0x1F170 && cp <= 0x1F189);
}
char32_t simple_case_fold(char32_t cp) {
  if (cp < 0x80) return cp >= U'A' && cp <= U'Z' ? cp + 32 : cp;  // ASCII: most of what a (?i: group meets
  // CaseFolding's C+S entries that are not the character's lower case (Unicode 14, listed with Python 3.11: every c below
  // U+20000 whose chr(c).casefold() is one character other than chr(c).lower())
  static const std::pair<char32_t, char32_t> kOwn[] = {
      {0xB5, 0x3BC},   {0x17F, 0x73},   {0x345, 0x3B9},  {0x3C2, 0x3C3},  {0x3D0, 0x3B2},  {0x3D1, 0x3B8},  {0x3D5, 0x3C6},
      {0x3D6, 0x3C0},  {0x3F0, 0x3BA},  {0x3F1, 0x3C1},  {0x3F5, 0x3B5},  {0x1C80, 0x432}, {0x1C81, 0x434}, {0x1C82, 0x43E},
      {0x1C83, 0x441}, {0x1C84, 0x442}, {0x1C85, 0x442}, {0x1C86, 0x44A}, {0x1C87, 0x463}, {0x1C88, 0xA64B}, {0x1E9B, 0x1E61},
      {0x1FBE, 0x3B9}};
  for (const auto& [from, to] : kOwn)
    if (cp == from) return to;
  if (cp >= 0x13A0 && cp <= 0x13F5) return cp;  // Cherokee folds to its capitals
  if (cp >= 0x13F8 && cp <= 0x13FD) return cp - 8;
  if (cp >= 0xAB70 && cp <= 0xABBF) return 0x13A0 + (cp - 0xAB70);
  std::u32string l;
  append_lower(cp, l);
  return l.size() == 1 ? l[0] : cp;
}
bool is_oniguruma_word(char32_t cp) {
  if (cp == 0xB2 || cp == 0xB3 || cp == 0xB9 || (cp >= 0xBC && cp <= 0xBE)) return true;
  return cp != 0x200C && cp != 0x200D && is_regex_word(cp);
}
bool is_white_space(char32_t cp) { return in_ranges(kWhiteSpace, cp); }
bool is_python_space(char32_t cp) { return in_ranges(kPythonSpace, cp); }

void append_lower(char32_t cp, std::u32string& out) {
  if (cp < 0x80) {  // ASCII fast path
    out.push_back(cp >= U'A' && cp <= U'Z' ? cp + 32 : cp);
    return;
  }
  const auto* e = find_cp(kLowerMap, cp);
  if (!e) {
    out.push_back(cp);
    return;
  }
  out.append(kLowerData + e->offset, e->length);
}

std::u32string nfd(const std::u32string& s) {
  std::u32string out;
  out.reserve(s.size());
  for (char32_t cp : s) {
    if (cp < 0xC0) {  // nothing below U+00C0 decomposes
      out.push_back(cp);
    } else if (cp >= kSBase && cp < kSBase + kSCount) {
      char32_t si = cp - kSBase;
      out.push_back(kLBase + si / kNCount);
      out.push_back(kVBase + (si % kNCount) / kTCount);
      if (si % kTCount) out.push_back(kTBase + si % kTCount);
    } else if (const auto* e = find_cp(kDecompMap, cp)) {
      out.append(kDecompData + e->offset, e->length);
    } else {
      out.push_back(cp);
    }
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

std::u32string nfc(const std::u32string& s) {
  std::u32string d = nfd(s);
  // Canonical composition (UAX #15): each character combines with the last starter unless a character
  // between them blocks it (has class 0, or a class >= its own).
  std::u32string out;
  out.reserve(d.size());
  size_t starter = std::u32string::npos;  // position of the last starter in `out`
  int last_ccc = -1;                      // class of the last character appended after that starter
  for (char32_t cp : d) {
    int c = ccc(cp);
    if (starter != std::u32string::npos && (last_ccc < c || (last_ccc == -1 && c == 0))) {
      if (char32_t composite = compose_pair(out[starter], cp)) {
        out[starter] = composite;
        continue;
      }
    }
    if (c == 0) {
      starter = out.size();
      last_ccc = -1;
    } else {
      last_ccc = c;
    }
    out.push_back(cp);
  }
  return out;
}

std::vector<Unit> decode_utf8(const std::string& s) {
  std::vector<Unit> units;
  units.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto n = static_cast<uint32_t>(s.size());
  static const char32_t kMinForLength[5] = {0, 0, 0x80, 0x800, 0x10000};  // shorter forms are overlong
  for (uint32_t i = 0; i < n;) {
    const unsigned c = p[i];
    const uint32_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    bool ok = len > 0 && i + len <= n;
    for (uint32_t k = 1; ok && k < len; ++k) {
      ok = (p[i + k] & 0xC0) == 0x80;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    ok = ok && cp >= kMinForLength[len] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (ok) {
      units.push_back({cp, i, i + len});
      i += len;
    } else {
      units.push_back({kInvalid, i, i + 1});
      ++i;
    }
  }
  return units;
}

std::u32string to_u32(const std::string& utf8) {
  std::u32string out;
  out.reserve(utf8.size());
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
  out.reserve(s.size());
  for (char32_t cp : s) append_utf8(cp, out);
  return out;
}

}  // namespace mimic::text::unicode
