// The Unicode facts the tokenizers need (general categories, lower-casing, canonical decomposition),
// from tables generated out of Python's unicodedata (tools/dev/gen_unicode_tables.py), so that mimic
// classifies characters exactly as the original Python tokenizers do.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mimic::text::unicode {

// Two-letter general category ("Lu", "Nd", "Zs", ...; "Cn" for unassigned).
const char* category(char32_t cp);
bool is_letter(char32_t cp);   // \p{L}
bool is_number(char32_t cp);   // \p{N}
bool is_mark_nonspacing(char32_t cp);  // Mn
// White_Space property: what \s matches in the `regex` module used by GPT-2's encoder.
bool is_white_space(char32_t cp);
// Python's str.isspace(): what str.split() splits on (BERT's whitespace_tokenize).
bool is_python_space(char32_t cp);

// Python's str.lower() of one character (may be several characters, e.g. U+0130).
void append_lower(char32_t cp, std::u32string& out);
// NFD: full canonical decomposition + canonical ordering of combining marks.
std::u32string nfd(const std::u32string& s);

// UTF-8 decoding that never fails: each decoded unit keeps its byte span; an invalid byte becomes a unit
// of its own with cp = kInvalid (so byte-level tokenizers can round-trip arbitrary bytes).
constexpr char32_t kInvalid = 0xFFFFFFFF;
struct Unit {
  char32_t cp;
  uint32_t begin, end;  // byte offsets into the input
};
std::vector<Unit> decode_utf8(const std::string& s);
std::u32string to_u32(const std::string& utf8);  // invalid bytes become U+FFFD
std::string to_utf8(const std::u32string& s);
void append_utf8(char32_t cp, std::string& out);

}  // namespace mimic::text::unicode
