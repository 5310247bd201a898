#include "mimic/text/pattern.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <vector>

#include "mimic/core/error.h"
#include "mimic/text/unicode.h"

namespace mimic::text {

namespace u = unicode;

namespace {
// A class item: a code-point range, a set of general categories, White_Space or Oniguruma's \w; possibly negated (\S,
// \P{..}, \W).
struct Item {
  // Word: \w outside a class; ClassWord: \w inside one, where Oniguruma leaves out its Latin-1 table's ² ³ ¹ ¼ ½ ¾
  enum Kind : uint8_t { Range, Categories, Space, Word, ClassWord } kind = Range;
  bool negated = false;
  char32_t lo = 0, hi = 0;
  uint32_t categories = 0;  // bit c set: category c (unicode::Category's order)
};

uint32_t bit(u::Category c) { return 1u << static_cast<int>(c); }

// The general categories a \p{..} name stands for: a two-letter category or its one-letter group.
uint32_t category_mask(const std::string& name, const std::string& regex) {
  uint32_t mask = 0;
  for (int c = 0; c <= static_cast<int>(u::Category::Co); ++c) {
    const std::string cat = u::category_name(static_cast<u::Category>(c));
    if (cat == name || (name.size() == 1 && cat[0] == name[0])) mask |= 1u << c;
  }
  MIMIC_CHECK(mask != 0, "pattern '", regex, "': unknown Unicode property \\p{", name, "}");
  return mask;
}

bool item_matches(const Item& it, char32_t cp) {
  bool in;
  switch (it.kind) {
    case Item::Range: in = cp >= it.lo && cp <= it.hi; break;
    case Item::Categories: in = cp != u::kInvalid && (it.categories & bit(u::category(cp))) != 0; break;
    case Item::Word: in = cp != u::kInvalid && u::is_oniguruma_word(cp); break;
    case Item::ClassWord: in = cp != u::kInvalid && cp != 0x200C && cp != 0x200D && u::is_regex_word(cp); break;
    default: in = cp != u::kInvalid && u::is_white_space(cp); break;
  }
  return in != it.negated;
}

// The characters whose case fold is f, f itself left out (Oniguruma's (?i: takes a character wherever any of its
// fold's characters would match: (?i:[A-Z]) takes "a" and the Kelvin sign, (?i:s) takes ſ). Case pairs all lie below
// U+20000.
const std::vector<char32_t>& folded_to(char32_t f) {
  static const auto* const by_fold = [] {
    auto* m = new std::unordered_map<char32_t, std::vector<char32_t>>;
    for (char32_t c = 0; c < 0x20000; ++c)
      if (const char32_t g = u::simple_case_fold(c); g != c) (*m)[g].push_back(c);
    return m;
  }();
  static const std::vector<char32_t> none;
  // ASCII from an array: Llama 3's (?i:'s|'t|...) meets every character of a text, and a hash lookup for each slowed
  // its tokenizer measurably (an unpublished check under load: the same ids either way)
  static const auto* const ascii = [] {
    auto* a = new std::vector<std::vector<char32_t>>(0x80);
    for (char32_t c = 0; c < 0x80; ++c)
      if (const auto it = by_fold->find(c); it != by_fold->end()) (*a)[c] = it->second;
    return a;
  }();
  if (f < 0x80) return (*ascii)[f];
  const auto it = by_fold->find(f);
  return it == by_fold->end() ? none : it->second;
}

char32_t simple_lower(char32_t cp) {
  if (cp < 0x80) return (cp >= U'A' && cp <= U'Z') ? cp + 32 : cp;
  std::u32string l;
  u::append_lower(cp, l);
  return l.size() == 1 ? l[0] : cp;
}
}  // namespace

struct Pattern::Node {
  enum Kind : uint8_t { Set, Seq, Alt, Repeat, Look } kind = Seq;
  // Set
  std::vector<Item> items;
  bool negated = false, icase = false;
  // Seq, Alt: children; Repeat, Look: kids[0]
  std::vector<Node> kids;
  int min = 0, max = 0;  // Repeat; max < 0: unbounded
  bool greedy = true;
  bool negative = false;  // Look: (?! ) rather than (?= )

  bool matches(char32_t cp) const {
    bool in = false;
    for (const auto& it : items) {
      if (item_matches(it, cp) || (icase && cp != u::kInvalid && folded_matches(it, cp))) {
        in = true;
        break;
      }
    }
    return in != negated;
  }
  // (?i: as Oniguruma compares: the item takes the character where it takes any character of the same case fold
  // (simple folding: ß ↔ ss, which spans two characters, is not done)
  static bool folded_matches(const Item& it, char32_t cp) {
    const char32_t f = u::simple_case_fold(cp);
    if (item_matches(it, f)) return true;
    for (char32_t c : folded_to(f))
      if (item_matches(it, c)) return true;
    return false;
  }
};

namespace {
using Node = Pattern::Node;

// The pattern in a message: JSON-quoted and cut, so that a message stays one sensible line.
std::string shown_pattern(const std::string& regex) {
  return nlohmann::json(regex.size() > 80 ? regex.substr(0, 80) + "..." : regex).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
}

class Parser {
 public:
  explicit Parser(const std::string& regex) : regex_(regex), p_(u::to_u32(regex)) {
    MIMIC_CHECK(p_.size() <= kMaxLength, "pattern of ", p_.size(), " characters (at most ", kMaxLength, ")");
  }

  Node parse() {
    Node n = alternation(false);
    MIMIC_CHECK(i_ == p_.size(), where(), "unbalanced ')'");
    return n;
  }

 private:
  std::string where() const { return "pattern " + shown_pattern(regex_) + " at character " + std::to_string(i_) + ": "; }
  bool more() const { return i_ < p_.size(); }
  char32_t peek() const { return p_[i_]; }
  bool eat(char32_t c) {
    if (more() && p_[i_] == c) return ++i_, true;
    return false;
  }
  bool eat(const std::u32string& s) {
    if (p_.compare(i_, s.size(), s) == 0) return i_ += s.size(), true;
    return false;
  }

  Node alternation(bool icase) {
    Node alt;
    alt.kind = Node::Alt;
    alt.kids.push_back(sequence(icase));
    while (eat(U'|')) alt.kids.push_back(sequence(icase));
    return alt.kids.size() == 1 ? std::move(alt.kids[0]) : alt;
  }

  Node sequence(bool icase) {
    Node seq;
    seq.kind = Node::Seq;
    while (more() && peek() != U'|' && peek() != U')') seq.kids.push_back(quantified(icase));
    return seq;
  }

  Node quantified(bool icase) {
    Node atom_node = atom(icase);
    int lo, hi;
    bool fixed = false, counted_form = false;  // fixed: {n}, without a comma
    if (eat(U'?')) lo = 0, hi = 1;
    else if (eat(U'*')) lo = 0, hi = -1;
    else if (eat(U'+')) lo = 1, hi = -1;
    else if (more() && peek() == U'{' && counted(lo, hi, fixed)) {
      counted_form = true;
    } else {
      return atom_node;
    }
    MIMIC_CHECK(atom_node.kind != Node::Look, where(), "a quantified look-ahead is not supported");
    // Oniguruma compiles a counted loop one of two ways, and where its body can match nothing they differ from each other
    // and from mimic ((?:a|b??){2}a on "baa"): refused rather than matched otherwise
    MIMIC_CHECK(!(counted_form && atom_node.kind != Node::Set && can_be_empty(atom_node)), where(),
                "a counted repeat {..} of something that can match nothing is not supported");
    Node rep;
    rep.kind = Node::Repeat;
    rep.min = lo;
    rep.max = hi;
    rep.greedy = !(more() && peek() == U'?');
    // Oniguruma's Ruby syntax, which HF uses, reads {n}? as ({n})?: optional, not a lazy {n} (as {n,m}? is lazy)
    if (!rep.greedy && fixed) {
      ++i_;
      rep.greedy = true;
      rep.kids.push_back(std::move(atom_node));
      Node optional;
      optional.kind = Node::Repeat;
      optional.min = 0;
      optional.max = 1;
      optional.kids.push_back(std::move(rep));
      MIMIC_CHECK(!(more() && (peek() == U'+' || (peek() == U'{' && count_at(i_)))), where(),
                  "a quantifier after a quantifier (possessive or nested) is not supported");
      return optional;
    }
    if (!rep.greedy) ++i_;
    // a+{2}, a{2}{3}: Oniguruma nests them; a++ is possessive, a{2}+ a nested loop in its Ruby syntax: all refused
    MIMIC_CHECK(!(more() && (peek() == U'+' || (peek() == U'{' && count_at(i_)))), where(),
                "a quantifier after a quantifier (possessive or nested) is not supported");
    rep.kids.push_back(std::move(atom_node));
    return rep;
  }

  // Whether the text at `at` is a repeat count Oniguruma reads as one: {n}, {n,}, {n,m} or {,m}.
  bool count_at(size_t at) const {
    size_t k = at + 1, digits = 0;
    while (k < p_.size() && p_[k] >= U'0' && p_[k] <= U'9') ++k, ++digits;
    if (k < p_.size() && p_[k] == U',')
      for (++k; k < p_.size() && p_[k] >= U'0' && p_[k] <= U'9'; ++k) ++digits;
    return digits > 0 && k < p_.size() && p_[k] == U'}';
  }
  // Whether a node can match the empty text.
  static bool can_be_empty(const Node& n) {
    switch (n.kind) {
      case Node::Set: return false;
      case Node::Seq: return std::all_of(n.kids.begin(), n.kids.end(), can_be_empty);
      case Node::Alt: return std::any_of(n.kids.begin(), n.kids.end(), can_be_empty);
      case Node::Repeat: return n.min == 0 || can_be_empty(n.kids[0]);
      default: return true;  // a look-ahead
    }
  }

  // {n} {n,} {n,m}; a '{' that does not start one is refused (Oniguruma would read it as a literal).
  bool counted(int& lo, int& hi, bool& fixed) {
    ++i_;
    auto number = [&](int& v) {
      const size_t start = i_;
      v = 0;
      while (more() && peek() >= U'0' && peek() <= U'9') {
        v = v * 10 + static_cast<int>(peek() - U'0');
        MIMIC_CHECK(v <= 100000, where(), "repeat count too large");
        ++i_;
      }
      return i_ > start;
    };
    MIMIC_CHECK(number(lo), where(), "'{' must start a repeat count {n}, {n,} or {n,m} (write \\{ for the character)");
    hi = lo;
    fixed = !eat(U',');
    if (!fixed && !number(hi)) hi = -1;
    MIMIC_CHECK(eat(U'}'), where(), "unterminated repeat count");
    MIMIC_CHECK(hi < 0 || hi >= lo, where(), "repeat count {", lo, ",", hi, "} is empty");
    return true;
  }

  Node set_of(Item it, bool icase) {
    Node n;
    n.kind = Node::Set;
    n.icase = icase;
    n.items.push_back(it);
    return n;
  }
  static Item range(char32_t lo, char32_t hi) {
    Item it;
    it.lo = lo;
    it.hi = hi;
    return it;
  }
  Item literal(char32_t c, bool icase) {
    return range(icase ? simple_lower(c) : c, icase ? simple_lower(c) : c);
  }

  Node atom(bool icase) {
    MIMIC_CHECK(more(), where(), "unexpected end");
    const char32_t c = p_[i_++];
    switch (c) {
      case U'(': return group(icase);
      case U'[': return klass(icase);
      case U'.': {
        Node n = set_of(range(U'\n', U'\n'), false);
        n.negated = true;
        return n;
      }
      case U'\\': {
        Item it = escape(false);
        if (it.kind == Item::Range && it.lo == it.hi) it = literal(it.lo, icase);
        return set_of(it, icase && it.kind == Item::Range);
      }
      case U'^':
      case U'$': fail(where(), "anchors ^ and $ are not supported");
      case U'*':
      case U'+':
      case U'?': fail(where(), "a quantifier with nothing before it");
      case U'{':  // a repeat count with nothing before it makes HF refuse the file; "{x}" is the text
        MIMIC_CHECK(!count_at(i_ - 1), where(), "a quantifier with nothing before it");
        return set_of(literal(c, icase), icase);
      default: return set_of(literal(c, icase), icase);
    }
  }

  Node group(bool icase) {
    MIMIC_CHECK(++depth_ <= kMaxNesting, where(), "groups nested deeper than ", kMaxNesting);
    Node inner;
    if (eat(U"?:")) {
      inner = alternation(icase);
    } else if (eat(U"?i:")) {
      inner = alternation(true);
    } else if (eat(U"?=") || eat(U"?!")) {
      const bool negative = p_[i_ - 1] == U'!';
      Node look;
      look.kind = Node::Look;
      look.negative = negative;
      look.kids.push_back(alternation(icase));
      inner = std::move(look);
    } else {
      MIMIC_CHECK(!(more() && peek() == U'?'), where(), "this group construct is not supported (only (?:, (?i:, (?= and (?!)");
      inner = alternation(icase);  // a capture: what it captured does not matter for splitting
    }
    MIMIC_CHECK(eat(U')'), where(), "missing ')'");
    --depth_;
    return inner;
  }

  // After a backslash: a character class escape or one literal character.
  Item escape(bool in_class) {
    MIMIC_CHECK(more(), where(), "pattern ends with a backslash");
    const char32_t c = p_[i_++];
    Item it;
    switch (c) {
      case U's': case U'S': it.kind = Item::Space; it.negated = c == U'S'; return it;
      case U'd': case U'D':
        it.kind = Item::Categories; it.categories = bit(u::Category::Nd); it.negated = c == U'D'; return it;
      case U'w': case U'W':  // Oniguruma's, not a set of categories: letter numbers and ½ are word characters, U+200D not
        it.kind = in_class ? Item::ClassWord : Item::Word;
        it.negated = c == U'W';
        return it;
      case U'p': case U'P': {
        std::string name;
        if (eat(U'{')) {
          while (more() && peek() != U'}') name += static_cast<char>(p_[i_++]);
          MIMIC_CHECK(eat(U'}'), where(), "unterminated \\p{");
        } else {
          MIMIC_CHECK(more(), where(), "\\p needs a property");
          name = static_cast<char>(p_[i_++]);
        }
        it.kind = Item::Categories;
        it.categories = category_mask(name, regex_);
        it.negated = c == U'P';
        return it;
      }
      case U'r': return range(U'\r', U'\r');
      case U'n': return range(U'\n', U'\n');
      case U't': return range(U'\t', U'\t');
      case U'f': return range(U'\f', U'\f');
      case U'v': return range(U'\v', U'\v');
      case U'0': return range(0, 0);
      case U'x': case U'u': {
        const bool braces = c == U'x' && eat(U'{');
        const size_t digits = braces ? 8 : (c == U'x' ? 2 : 4);
        char32_t v = 0;
        size_t n = 0;
        for (; n < digits && more() && std::isxdigit(static_cast<int>(peek() < 0x80 ? peek() : 0)); ++n, ++i_) {
          const char32_t h = peek();
          v = v * 16 + static_cast<char32_t>(h <= U'9' ? h - U'0' : (h | 0x20) - U'a' + 10);
        }
        MIMIC_CHECK(n > 0 && (braces || n == digits), where(), "malformed \\", static_cast<char>(c), " escape");
        MIMIC_CHECK(!braces || eat(U'}'), where(), "unterminated \\x{");
        MIMIC_CHECK(v <= 0x10FFFF, where(), "code point past U+10FFFF");
        return range(v, v);
      }
      default:
        MIMIC_CHECK(!((c >= U'a' && c <= U'z') || (c >= U'A' && c <= U'Z') || (c >= U'1' && c <= U'9')), where(),
                    "the escape \\", static_cast<char>(c), " is not supported", in_class ? " in a class" : "");
        return range(c, c);  // an escaped punctuation character stands for itself
    }
  }

  Item next_literal() {
    const char32_t c = p_[i_++];
    return range(c, c);
  }

  Node klass(bool icase) {
    Node n;
    n.kind = Node::Set;
    n.icase = icase;
    n.negated = eat(U'^');
    bool first = true;
    while (true) {
      MIMIC_CHECK(more(), where(), "unterminated character class");
      if (peek() == U']' && !first) {
        ++i_;
        break;
      }
      first = false;
      MIMIC_CHECK(!(peek() == U'[' && i_ + 1 < p_.size() && p_[i_ + 1] == U':'), where(), "POSIX classes [:..:] are not supported");
      MIMIC_CHECK(!(peek() == U'&' && i_ + 1 < p_.size() && p_[i_ + 1] == U'&'), where(), "class intersection && is not supported");
      // Oniguruma reads [a[b]] as a class inside a class (mimic read a literal "[" and ended the class at the first "]")
      MIMIC_CHECK(peek() != U'[', where(), "a class inside a class ([a[b]]) is not supported (write \\[ for the character)");
      Item lo = eat(U'\\') ? escape(true) : next_literal();
      const bool single = lo.kind == Item::Range && lo.lo == lo.hi;
      if (single && more() && peek() == U'-' && i_ + 1 < p_.size() && p_[i_ + 1] != U']') {
        ++i_;
        MIMIC_CHECK(peek() != U'[', where(), "a class inside a class ([a[b]]) is not supported (write \\[ for the character)");
        Item hi = eat(U'\\') ? escape(true) : next_literal();
        MIMIC_CHECK(hi.kind == Item::Range && hi.lo == hi.hi && hi.lo >= lo.lo, where(), "bad class range");
        lo.hi = hi.lo;
      }
      if (icase && lo.kind == Item::Range) {
        lo.lo = lo.lo == lo.hi ? simple_lower(lo.lo) : lo.lo;
        lo.hi = lo.lo > lo.hi ? lo.lo : lo.hi;
      }
      n.items.push_back(lo);
    }
    return n;
  }

  static constexpr size_t kMaxLength = 1000;  // tokenizers' patterns are about 100
  static constexpr int kMaxNesting = 64;  // the parser recurses per group: a hostile pattern must not exhaust the stack
  std::string regex_;
  std::u32string p_;
  size_t i_ = 0;
  int depth_ = 0;
};

// Bounds on one match, so that a hostile pattern stops with an error instead of running for hours or
// exhausting the stack. The patterns tokenizers ship stay far below both: they repeat single characters
// (counted without recursion), and their backtracking is linear in a piece.
constexpr uint64_t kBaseSteps = 10'000'000;  // node visits (and characters counted) for a text, plus kStepsPerChar per character
constexpr uint64_t kStepsPerChar = 100;
constexpr int kMaxDepth = 5000;              // nested match calls: each pattern element matched, each group iteration

// Backtracking: each node matches at i and calls the continuation with every end it can reach, in
// preference order, until the continuation accepts.
class Matcher {
 public:
  Matcher(const std::u32string& s, const std::string& regex, uint64_t& steps) : s_(s), regex_(regex), steps_(steps) {}
  using Cont = std::function<bool(size_t)>;

  bool match(const Node& n, size_t i, const Cont& k) const {
    spend(1);
    MIMIC_CHECK(depth_ < kMaxDepth, "pattern ", shown(), " nests its match deeper than ", kMaxDepth,
                " (a group repeated thousands of times, or a very long sequence)");
    struct Depth {
      int& d;
      explicit Depth(int& x) : d(++x) {}
      ~Depth() { --d; }
    } guard(depth_);
    switch (n.kind) {
      case Node::Set: return i < s_.size() && n.matches(s_[i]) && k(i + 1);
      case Node::Seq: return seq(n, 0, i, k);
      case Node::Alt:
        for (const auto& kid : n.kids)
          if (match(kid, i, k)) return true;
        return false;
      case Node::Repeat: return n.kids[0].kind == Node::Set ? repeat_set(n, i, k) : repeat(n, 0, i, k);
      default: {
        const bool hit = match(n.kids[0], i, [](size_t) { return true; });
        return hit != n.negative && k(i);
      }
    }
  }

 private:
  bool seq(const Node& n, size_t idx, size_t i, const Cont& k) const {
    if (idx == n.kids.size()) return k(i);
    return match(n.kids[idx], i, [&](size_t j) { return seq(n, idx + 1, j, k); });
  }
  // A repeated single character (\p{L}+, \s*): count the run, then try its lengths in order.
  bool repeat_set(const Node& n, size_t i, const Cont& k) const {
    const Node& c = n.kids[0];
    size_t run = 0;
    while (i + run < s_.size() && (n.max < 0 || run < static_cast<size_t>(n.max)) && c.matches(s_[i + run])) ++run;
    spend(run);
    const size_t lo = static_cast<size_t>(n.min);
    if (run < lo) return false;
    if (n.greedy) {
      for (size_t r = run + 1; r-- > lo;)
        if (k(i + r)) return true;
    } else {
      for (size_t r = lo; r <= run; ++r)
        if (k(i + r)) return true;
    }
    return false;
  }
  bool repeat(const Node& n, int count, size_t i, const Cont& k) const {
    const bool may_stop = count >= n.min, may_go = n.max < 0 || count < n.max;
    // An iteration that matched nothing ends the loop and the match goes on after it, as in Oniguruma (mimic refused
    // such an iteration and backtracked into the body's other choices: (?:|s)* took "ss" where Oniguruma takes "").
    auto again = [&](size_t j) { return j == i && count >= n.min ? k(j) : repeat(n, count + 1, j, k); };
    if (!n.greedy && may_stop && k(i)) return true;
    if (may_go && match(n.kids[0], i, again)) return true;
    return n.greedy && may_stop && k(i);
  }

  void spend(uint64_t n) const {
    MIMIC_CHECK(steps_ >= n, "pattern ", shown(), " backtracks too much on a text of ", s_.size(), " characters (its step budget is spent)");
    steps_ -= n;
  }
  std::string shown() const { return shown_pattern(regex_); }

  const std::u32string& s_;
  const std::string& regex_;
  uint64_t& steps_;
  mutable int depth_ = 0;
};
}  // namespace

Pattern::Pattern(const std::string& regex) : regex_(regex), root_(std::make_unique<Node>(Parser(regex).parse())) {}
Pattern::~Pattern() = default;
Pattern::Pattern(Pattern&&) noexcept = default;
Pattern& Pattern::operator=(Pattern&&) noexcept = default;

uint64_t Pattern::budget_for(size_t characters) { return kBaseSteps + kStepsPerChar * static_cast<uint64_t>(characters); }

bool Pattern::find(const std::u32string& s, size_t from, size_t& begin, size_t& end, uint64_t& steps) const {
  const Matcher m(s, regex_, steps);
  for (size_t i = from; i <= s.size(); ++i) {
    size_t e = 0;
    if (m.match(*root_, i, [&](size_t j) { return e = j, true; })) {
      begin = i;
      end = e;
      return true;
    }
  }
  return false;
}

}  // namespace mimic::text
