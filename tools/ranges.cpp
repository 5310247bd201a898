#include "ranges.h"

#include <regex>
#include <vector>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>

#include "mimic/core/runtime.h"

namespace mimic::cli::range {
namespace {

// Bounds as a reader would write them: 10^9 rather than 1000000000, 2^20 rather than 1048576.
std::string show(int64_t v) {
  if (v >= 10000) {
    int64_t p = 1;
    int k = 0;
    while (p < v && p <= std::numeric_limits<int64_t>::max() / 10) p *= 10, ++k;
    if (p == v) return "10^" + std::to_string(k);
  }
  if (v >= (int64_t{1} << 20) && (v & (v - 1)) == 0) {
    int k = 0;
    while ((int64_t{1} << k) < v) ++k;
    return "2^" + std::to_string(k);
  }
  return std::to_string(v);
}

std::string show(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// Decimal digits, a minus sign at most (a "+" is refused, as the kind and recall-task specs refuse it: the sixth probe
// of 2026-11-28 found --steps +2 accepted), nothing else. CLI11 itself reads integers with strtoll(…, 0), where
// "010" is 8 and "0x10" is 16; the validator rewrites the accepted text to its decimal value so that what the
// option receives is what the user typed.
template <typename T>
bool parse_decimal(std::string s, T& out) {
  if (s.empty() || s[0] == '+') return false;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && ptr == end;
}

}  // namespace

CLI::Validator integer(int64_t lo, int64_t hi, const std::string& note) {
  const std::string range = "[" + show(lo) + ", " + show(hi) + "]";
  return CLI::Validator(
      [lo, hi, range, note](std::string& input) -> std::string {
        int64_t v = 0;
        if (parse_decimal(input, v) && v >= lo && v <= hi) {
          input = std::to_string(v);
          return {};
        }
        return "must be an integer in " + range + (note.empty() ? "" : " (" + note + ")") + ", got " + input;
      },
      range);
}

CLI::Validator real(double lo, double hi, bool open_low, bool open_high) {
  const std::string range = (open_low ? "(" : "[") + show(lo) + ", " + show(hi) + (open_high ? ")" : "]");
  return CLI::Validator(
      [=](std::string& input) -> std::string {
        // Decimal notation only: CLI11 reads with strtod, which also takes hexadecimal floats (0x1p3 is 8) and
        // leading blanks (' 1'): both were accepted silently (the probe of 2026-11-27).
        static const std::regex decimal(R"(^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$)");
        double v = 0;
        std::smatch m;
        const bool number = std::regex_match(input, m, decimal) && CLI::detail::lexical_cast(input, v) && std::isfinite(v);
        // a number too small for a double reads as 0, which many options take as "off" (--temperature 1e-400 decoded
        // greedily: the eighth probe of 2026-11-29)
        if (number && v == 0 && m[1].str().find_first_of("123456789") != std::string::npos)
          return "must be a number in " + range + ", got " + input + ", which is too small to tell from 0 in double precision";
        // a subnormal number is no value to compute with (its reciprocal is infinite): --kd 1e-310 ran, its loss NaN
        // at step 1 (the fourteenth probe of 2026-11-30)
        if (number && v != 0 && std::fabs(v) < std::numeric_limits<double>::min())
          return "must be a number in " + range + ", got " + input + ", which is too small to compute with in double precision";
        if (number && (open_low ? v > lo : v >= lo) && (open_high ? v < hi : v <= hi)) return {};
        return "must be a number in " + range + ", got " + input;
      },
      range);
}

CLI::Validator kd_temperature(bool zero_is_off) {
  const CLI::Validator on = real(0.01, 100);
  if (!zero_is_off) return on;
  return CLI::Validator(
      [on](std::string& input) -> std::string {
        double v = 1;
        if (CLI::detail::lexical_cast(input, v) && v == 0 && input.find_first_of("123456789") == std::string::npos) return {};
        std::string e = on(input);  // its words, the off value added ("..., which is too small to compute with" kept)
        const std::string range = "a number in [0.01, 100]";
        if (const auto at = e.find(range); at != std::string::npos) e.replace(at, range.size(), "0 (off) or " + range);
        return e;
      },
      "0 or [0.01, 100]");
}

CLI::Validator steps() { return integer(1, kMaxSteps); }
CLI::Validator steps_or_zero() { return integer(0, kMaxSteps); }
CLI::Validator batch() { return integer(1, kMaxBatch); }
CLI::Validator tokens(int64_t lo) { return integer(lo, kMaxTokens); }
CLI::Validator index_list() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (s.find_first_not_of(" \t") == std::string::npos) return "an empty list selects nothing: give all or a list like 0,2,4-5";
        // '0, 1' is the list 0,1: the blanks go here, at the boundary (the stages' parsers read digits only, so such a
        // list passed this check and was refused after the model had loaded: the seventh probe of 2026-11-29)
        s.erase(std::remove_if(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t'; }), s.end());
        if (s == "all") return {};
        static const std::regex list(R"(^\s*\d+\s*(-\s*\d+\s*)?(,\s*\d+\s*(-\s*\d+\s*)?)*$)");
        if (!std::regex_match(s, list)) return "must be all or a list like 0,2,4-5, got '" + s + "'";
        // an index twice (0,0 or 2,1-3) or a range that runs backwards (5-2) was taken without a word (the fourth
        // probe of 2026-11-27)
        std::vector<std::pair<long long, long long>> spans;
        static const std::regex item(R"(\s*(\d+)\s*(?:-\s*(\d+)\s*)?)");
        std::stringstream items(s);
        for (std::string one; std::getline(items, one, ',');) {
          std::smatch m;
          std::regex_match(one, m, item);
          if (m[1].length() > 9 || m[2].length() > 9) return "'" + one + "' is beyond any layer";
          const long long a = std::stoll(m[1].str()), b = m[2].matched ? std::stoll(m[2].str()) : a;
          if (b < a) return "the range '" + one + "' runs backwards: write " + std::to_string(b) + "-" + std::to_string(a);
          for (const auto& [lo, hi] : spans)
            if (a <= hi && lo <= b) return "names " + std::to_string(std::max(a, lo)) + " twice in '" + s + "'";
          spans.emplace_back(a, b);
        }
        return {};
      },
      "all|LIST");
}
CLI::Validator non_empty() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (s.find_first_not_of(" \t\n\r") == std::string::npos) return "an empty value means nothing here: leave the option out instead";
        return {};
      },
      // no name of its own: --help showed "TEXT:TEXT:SPEC" for an option this and another validator check
      "");
}
CLI::Validator non_empty_text(const std::string& instead) {
  return CLI::Validator([instead](std::string& s) -> std::string { return s.empty() ? "an empty value means nothing here: " + instead : ""; },
                        "");
}
CLI::Validator count(int64_t lo) { return integer(lo, kMaxCount); }
// Learning rates far above 1 only diverge; the cap catches a misplaced exponent (1e3 for 1e-3).
CLI::Validator learning_rate() { return real(0, 10, /*open_low=*/true); }
CLI::Validator weight_decay() { return real(0, 10); }
CLI::Validator fraction() { return real(0, 1); }
// A petabyte is far above any machine this runs on; the cap catches a value given in bytes instead of GB.
CLI::Validator gigabytes() { return real(0, 1e6); }

// More threads than cores only slows LibTorch down; 4 per core leaves room for experiments, and a typo
// (--threads 100000) no longer spawns hundreds of OpenMP threads.
CLI::Validator threads() {
  const int64_t cap = 4 * static_cast<int64_t>(std::max(1, available_cores()));
  return integer(0, cap, "0: all cores; at most 4 per core");
}

// As for threads: more processes than cores only share them; 4 per core leaves room for tests of many ranks.
CLI::Validator processes() {
  const int64_t cap = 4 * static_cast<int64_t>(std::max(1, available_cores()));
  return integer(1, cap, "at most 4 per core");
}
CLI::Validator port() { return integer(1, 65535); }
CLI::Validator seconds() { return integer(1, 86400, "at most a day"); }

CLI::Validator seed() {
  const std::string range = "[0, 2^64 - 1]";
  return CLI::Validator(
      [range](std::string& input) -> std::string {
        uint64_t v = 0;
        if (parse_decimal(input, v)) {
          input = std::to_string(v);
          return {};
        }
        return "must be an integer in " + range + ", got " + input;
      },
      range);
}

}  // namespace mimic::cli::range
