// The regular expressions HF tokenizer.json files split and replace text with (the Split pre-tokenizer,
// the Replace normalizer and decoder): a small backtracking matcher over code points, leftmost-first
// among alternatives and greedy by default — the semantics of Oniguruma, which HF's tokenizers use (transformers.js
// runs the same patterns in JavaScript's engine, whose \w is ASCII's).
//
// Supported: literals and escapes (\r \n \t \f \v \0 \xHH \x{H…} \uHHHH, escaped punctuation), `.`
// (anything but \n), classes [...] with ranges and negation, \s \S (White_Space), \d \D (Nd), \w \W
// (Oniguruma's: unicode::is_oniguruma_word), \p{..} \P{..} with a general category or its one-letter group (L, Lu, N,
// Nd, P, ...), groups ( ) (?: ) and (?i: ) (case-insensitive: ASCII and one-character lower-casing),
// look-ahead (?= ) (?! ), quantifiers ? * + {n} {n,} {n,m} and their lazy forms. Anything else (anchors,
// back-references, look-behind, possessive quantifiers, inline flags) is refused by the constructor with
// a mimic::Error naming it — a tokenizer that needs it is not loaded rather than split differently, and so
// is a pattern of over 1,000 characters or 64 nested groups. Matching recurses per pattern element
// matched; a match deeper than 5,000 (a group repeated thousands of times) stops with an error, as does a
// text whose searches exceed their step budget (find).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace mimic::text {

class Pattern {
 public:
  explicit Pattern(const std::string& regex);
  ~Pattern();
  Pattern(Pattern&&) noexcept;
  Pattern& operator=(Pattern&&) noexcept;

  // The leftmost match starting at or after `from` in s (code points; unicode::kInvalid, a byte outside
  // well-formed UTF-8, matches only negated classes and `.`): true with [begin, end), or false. A match
  // may be empty. `steps` is the work left to the caller's searches (budget_for: 10⁷ + 100 per
  // character): each search draws on it, and a search that exhausts it is a mimic::Error — a caller
  // that splits a whole text passes one budget for all its searches, so that many cheap backtracking
  // searches cannot add up to hours either.
  bool find(const std::u32string& s, size_t from, size_t& begin, size_t& end, uint64_t& steps) const;
  static uint64_t budget_for(size_t characters);

  struct Node;

 private:
  std::string regex_;
  std::unique_ptr<Node> root_;
};

}  // namespace mimic::text
