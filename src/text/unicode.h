// The Unicode facts the tokenizers need (general categories, white space, lower-casing, canonical
// decomposition and composition), from tables generated out of Python's unicodedata
// (tools/dev/gen_unicode_tables.py, Unicode 14.0), so that mimic classifies characters exactly as the
// original Python tokenizers do.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mimic::text::unicode {

// General categories, in the order of the generated table (kCategoryNames).
enum class Category : uint8_t {
  Cn, Lu, Ll, Lt, Lm, Lo, Mn, Mc, Me, Nd, Nl, No, Pc, Pd, Ps, Pe, Pi,
  Pf, Po, Sm, Sc, Sk, So, Zs, Zl, Zp, Cc, Cf, Cs, Co
};

Category category(char32_t cp);       // Cn for unassigned code points and anything past U+10FFFF
const char* category_name(Category c);  // "Lu", "Nd", ...
bool is_letter(char32_t cp);       // \p{L}
bool is_number(char32_t cp);       // \p{N}
bool is_punctuation(char32_t cp);  // \p{P}
bool is_other(char32_t cp);        // \p{C}: Cc, Cf, Cs, Co, Cn
// What \w matches in Rust's regex crate, which Hugging Face's tokenizers use to tell whether an added token with
// single_word stands alone: Alphabetic (letters, letter numbers, and the symbols of Other_Alphabetic that are no marks:
// the circled and squared Latin letters), marks, decimal digits, connector punctuation, and the joiners U+200C/U+200D.
// (Of this project's Unicode 14 tables: a character assigned since is no word character here, where Rust's may be.)
bool is_regex_word(char32_t cp);
// What \w matches in Oniguruma, which runs the regexes of a tokenizer.json (Split, Replace): Alphabetic, marks,
// decimal digits and connector punctuation as above, but not the joiners, and below U+0100 its Latin-1 table, which
// also takes the superscripts and fractions ² ³ ¹ ¼ ½ ¾ (measured on HF's tokenizers 0.23.2 over every code point
// these tables assign: HfRust.RegexClassesTakeTheCodePointsOnigurumaTakes).
bool is_oniguruma_word(char32_t cp);
// White_Space property: what \s matches in the `regex` module used by GPT-2's encoder.py.
bool is_white_space(char32_t cp);
// Python's str.isspace() (White_Space plus U+001C..U+001F): what str.split() splits on.
bool is_python_space(char32_t cp);

// Python's str.lower() of one character on its own (may give several characters: U+0130 → "i̇").
// No context-dependent rule applies to a lone character (Greek final sigma needs a neighbour).
void append_lower(char32_t cp, std::u32string& out);
// Unicode's simple case folding (CaseFolding.txt's C and S mappings): the lower case of one character where that is
// one character, but µ → μ, ſ → s, ς → σ, the Greek symbol variants, Cyrillic's rounded letters, and Cherokee's small
// letters to its capitals. What Oniguruma's (?i: compares, as far as one character goes (its ß ↔ ss is not done).
char32_t simple_case_fold(char32_t cp);
// NFD: full canonical decomposition, then canonical ordering of combining marks.
std::u32string nfd(const std::u32string& s);
// NFC: NFD, then canonical composition (primary composites and Hangul syllables).
std::u32string nfc(const std::u32string& s);

// UTF-8 decoding that never fails: each unit keeps its byte span; a byte that does not start a
// well-formed sequence (stray continuation byte, truncated or overlong sequence, surrogate, > U+10FFFF)
// becomes a unit of its own with cp = kInvalid, exactly the bytes Python's errors="surrogateescape"
// escapes one by one.
constexpr char32_t kInvalid = 0xFFFFFFFF;
struct Unit {
  char32_t cp;
  uint32_t begin, end;  // byte offsets into the input
};
std::vector<Unit> decode_utf8(const std::string& s);
std::u32string to_u32(const std::string& utf8);  // invalid bytes become U+FFFD, one per byte
std::string to_utf8(const std::u32string& s);
void append_utf8(char32_t cp, std::string& out);

}  // namespace mimic::text::unicode
