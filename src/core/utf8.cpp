#include "mimic/core/utf8.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>

namespace mimic {

std::string shown_bytes(const std::string& s) {
  std::string shown;
  for (const unsigned char c : s) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "\\x%02X", c);
    shown += c >= 0x20 && c < 0x7F ? std::string(1, static_cast<char>(c)) : std::string(hex);
  }
  return shown;
}

std::string shown_excerpt(const std::string& s, size_t most) {
  const bool plain = is_valid_utf8(s) && std::none_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7F; });
  std::string shown = plain ? s : shown_bytes(s);
  if (shown.size() <= most) return shown;
  size_t cut = most;
  while (cut > 0 && (static_cast<unsigned char>(shown[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
  return shown.substr(0, cut) + "… (" + std::to_string(s.size()) + " bytes)";
}

bool is_valid_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    unsigned c = p[i];
    if (c < 0x80) { ++i; continue; }
    size_t len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
    else return false;
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

std::string without_byte_order_mark(std::string s) {
  if (s.compare(0, 3, "\xEF\xBB\xBF") == 0) s.erase(0, 3);
  return s;
}

std::string text_with_newlines(const std::string& s) {
  const std::string raw = without_byte_order_mark(s);
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '\r') out.push_back(raw[i]);
    else if (i + 1 >= raw.size() || raw[i + 1] != '\n') out.push_back('\n');
  }
  return out;
}

}  // namespace mimic
