// The option vocabulary (docs/cli.md, "Option vocabulary"): one name means one thing in every command. These tests
// walk every command's options as its --help lists them, so a new option that two commands share, or a retired
// spelling offered again, fails here until docs/cli.md's table says what it means.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mimic/core/error.h"
#include "mimic/core/runtime.h"
#include "test_util.h"

namespace {

// The commands of this build: a build without cairo has no report (tools/cmd_missing.cpp stands in for it and takes
// no options), and this binary then holds these tests without report's (tests/CMakeLists.txt).
const std::vector<std::string>& commands() {
  static const std::vector<std::string> all = [] {
    std::vector<std::string> c = {"record",   "distill",         "convert",     "finetune",       "eval",
                                  "generate", "report",          "pretrain",    "export",         "info",
                                  "tokenize", "forward",         "launch",      "bench attention", "bench train",
                                  "bench generate", "bench peer"};
    if (!MIMIC_TESTS_HAVE_REPORT) c.erase(std::find(c.begin(), c.end(), "report"));
    return c;
  }();
  return all;
}

bool built(const std::string& command) { return std::find(commands().begin(), commands().end(), command) != commands().end(); }

// Whether LibTorch sees a GPU here: then the commands that take one accept --device cuda.
bool gpu_here() {
  try {
    mimic::resolve_device("cuda");
    return true;
  } catch (const mimic::Error&) {
    return false;
  }
}

// The options a command's --help offers (CLI11 prints "  -h,--help", "  --model TEXT ..."), up to the heading of the
// retired spellings it lists last.
std::set<std::string> options_of(const std::string& command) {
  auto r = mimic::test::mimic_cli(command + " --help");
  EXPECT_EQ(r.code, 0) << command << ": " << r.err;
  std::set<std::string> names;
  static const std::regex line(R"(^\s+(?:-\w,)?(--[a-z0-9-]+))");
  std::smatch m;
  size_t start = 0;
  while (start < r.out.size()) {
    size_t end = r.out.find('\n', start);
    if (end == std::string::npos) end = r.out.size();
    std::string l = r.out.substr(start, end - start);
    if (l.rfind("Retired spellings", 0) == 0) break;
    if (std::regex_search(l, m, line) && m[1] != "--help") names.insert(m[1]);
    start = end + 1;
  }
  return names;
}

const std::string& cli_md() {
  static const std::string text = mimic::test::read_bytes(std::string(MIMIC_SOURCE_DIR) + "/docs/cli.md");
  return text;
}

// The section of docs/cli.md from `heading` to the next "## ".
std::string section(const std::string& heading) {
  const auto& t = cli_md();
  size_t a = t.find(heading);
  if (a == std::string::npos) return "";
  size_t b = t.find("\n## ", a + heading.size());
  return t.substr(a, b == std::string::npos ? std::string::npos : b - a);
}

// Every `--name` written in the vocabulary section (the table's first column and the sentences under it).
std::set<std::string> vocabulary() {
  std::set<std::string> names;
  const std::string s = section("## Option vocabulary");
  static const std::regex opt(R"(`(--[a-z0-9-]+))");
  for (auto it = std::sregex_iterator(s.begin(), s.end(), opt); it != std::sregex_iterator(); ++it) names.insert((*it)[1]);
  return names;
}

}  // namespace

TEST(CliVocabulary, EveryOptionTwoCommandsShareIsInDocsCliMd) {
  const auto words = vocabulary();
  ASSERT_GT(words.size(), 20u) << "docs/cli.md has no option vocabulary";
  std::map<std::string, std::vector<std::string>> used_by;
  for (const auto& c : commands())
    for (const auto& o : options_of(c)) used_by[o].push_back(c);
  for (const auto& [option, cmds] : used_by) {
    if (cmds.size() < 2) continue;
    std::string list;
    for (const auto& c : cmds) list += " '" + c + "'";
    EXPECT_TRUE(words.count(option)) << option << " is shared by" << list << " but docs/cli.md's vocabulary does not say what it means";
  }
}

// The other direction: a row of the vocabulary table names the commands that take its options, and each of those
// commands offers every option of the row (docs/cli.md said bench generate took --repeats and export --dtype keep
// when neither did: the newcomer probe of 2026-12-01), and names each command that offers them (a row listing commands
// is the whole list). Words in parentheses in the last column are exceptions spelt out, and rows for "every command
// ..." are the test above's.
TEST(CliVocabulary, EachCommandTheTableNamesForAnOptionOffersIt) {
  const std::string s = section("## Option vocabulary");
  static const std::regex opt(R"(`(--[a-z0-9-]+))"), parens(R"(\([^)]*\))");
  std::map<std::string, std::set<std::string>> offered;
  int rows = 0;
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find('\n', start);
    if (end == std::string::npos) end = s.size();
    const std::string line = s.substr(start, end - start);
    start = end + 1;
    if (line.rfind("| `--", 0) != 0) continue;
    const size_t first = line.find(" | "), last = line.rfind(" | ");
    if (first == std::string::npos || last == first) continue;
    const std::string names = line.substr(0, first), who = std::regex_replace(line.substr(last + 3), parens, "");
    std::vector<std::string> cmds;
    for (size_t a = 0; a < who.size();) {
      size_t b = who.find(',', a);
      if (b == std::string::npos) b = who.size();
      std::string c = who.substr(a, b - a);
      c.erase(0, c.find_first_not_of(" |"));
      c.erase(c.find_last_not_of(" |") + 1);
      // a name is a command (report too, where this build has none) or a phrase for many ("every command that ...");
      // a misspelt one ("bench atention") was skipped without a word
      const bool known = built(c) || c == "report" || c.rfind("every command", 0) == 0;
      EXPECT_TRUE(known) << "docs/cli.md: the vocabulary row of " << names << " names '" << c << "', which is no command";
      if (built(c)) cmds.push_back(c);
      a = b + 1;
    }
    if (cmds.empty()) continue;
    ++rows;
    const bool phrase = who.find("every command") != std::string::npos;
    std::string exceptions;  // the last column's words in parentheses, which may name commands with exceptions
    const std::string last_column = line.substr(last + 3);
    for (auto p = std::sregex_iterator(last_column.begin(), last_column.end(), parens); p != std::sregex_iterator(); ++p) exceptions += p->str();
    for (auto it = std::sregex_iterator(names.begin(), names.end(), opt); it != std::sregex_iterator(); ++it) {
      for (const auto& c : cmds) {
        if (!offered.count(c)) offered[c] = options_of(c);
        EXPECT_TRUE(offered[c].count((*it)[1])) << "docs/cli.md: " << c << " takes " << (*it)[1] << ", but its --help does not offer it";
      }
      // and the row names every command that offers its option (a list, not a phrase for many)
      for (const auto& c : commands()) {
        if (phrase || c == "launch" || std::find(cmds.begin(), cmds.end(), c) != cmds.end() ||
            exceptions.find(c) != std::string::npos)
          continue;
        if (!offered.count(c)) offered[c] = options_of(c);
        EXPECT_FALSE(offered[c].count((*it)[1])) << "docs/cli.md: " << c << " offers " << (*it)[1] << ", but the row of " << names
                                                 << " does not name it";
      }
    }
  }
  EXPECT_GT(rows, 20) << "the vocabulary table's rows were not found";
}

TEST(CliVocabulary, EveryCommandTakesThreadsSeedJsonAndDevice) {
  for (const auto& c : commands()) {
    if (c == "launch") continue;  // launch passes its command's own options through
    const auto o = options_of(c);
    for (const char* common : {"--threads", "--seed", "--json", "--device"}) EXPECT_TRUE(o.count(common)) << c << " lacks " << common;
  }
}

// --device cuda where LibTorch sees no GPU (every machine of this suite without one) is one line saying so from every
// command, before anything is read; a name that is no device is one line listing the known ones. With a GPU (the
// device check runs this binary there), the commands that compute on the CPU alone refuse it naming those that take
// one, and the others accept it.
TEST(CliVocabulary, EveryCommandRefusesADeviceItCannotUseInOneLine) {
  for (const auto& c : commands()) {
    if (c == "launch") continue;
    SCOPED_TRACE(c);
    auto cuda = mimic::test::mimic_cli(c + " --device cuda");
    if (gpu_here() && cuda.err.find("computes on the CPU so far") == std::string::npos) {
      // a command that takes a GPU, on a machine with one: the device is accepted (it fails on its missing options,
      // or runs where it needs none: bench attention and bench train did on the 2026-11-27 H100 machine)
      EXPECT_EQ(cuda.err.find("--device"), std::string::npos) << cuda.err;
    } else {
      EXPECT_NE(cuda.code, 0);
      EXPECT_TRUE(cuda.err.find("no CUDA device is available") != std::string::npos || cuda.err.find("computes on the CPU so far") != std::string::npos)
          << cuda.err;
      EXPECT_EQ(std::count(cuda.err.begin(), cuda.err.end(), '\n'), 1) << cuda.err;
    }
    auto bad = mimic::test::mimic_cli(c + " --device gpu0");
    EXPECT_NE(bad.code, 0);
    EXPECT_NE(bad.err.find("unknown device 'gpu0' (known: auto, cpu, cuda, cuda:N, cpu-checked)"), std::string::npos) << bad.err;
  }
}

TEST(CliVocabulary, RetiredSpellingsAreHiddenStillWorkAndSaySo) {
  // docs/cli.md: "`generate --max-new-tokens` (now `--new-tokens`)" ...
  const std::string s = section("## Option vocabulary");
  static const std::regex retired(R"(`((?:bench )?[a-z]+) (--[a-z0-9-]+)`\s+\(now\s+`(--[a-z0-9-]+)`\))");
  mimic::test::TempDir dir;
  int n = 0;
  for (auto it = std::sregex_iterator(s.begin(), s.end(), retired); it != std::sregex_iterator(); ++it, ++n) {
    const std::string command = (*it)[1], old_name = (*it)[2], new_name = (*it)[3];
    SCOPED_TRACE(command + " " + old_name);
    if (!built(command)) continue;
    const auto o = options_of(command);
    EXPECT_FALSE(o.count(old_name)) << "--help offers the retired spelling among the current ones";
    EXPECT_NE(mimic::test::mimic_cli(command + " --help").out.find("Retired spellings"), std::string::npos);
    EXPECT_TRUE(o.count(new_name)) << "--help lacks the new spelling";
    // both at once are refused; a bad value under the old name is refused like one under the new
    if (command == "info") {  // a flag: both at once are refused, the old one alone lists the registry
      auto both = mimic::test::mimic_cli(command + " " + old_name + " " + new_name);
      EXPECT_NE(both.err.find("excludes"), std::string::npos) << both.err;
      auto listed = mimic::test::mimic_cli(command + " " + old_name + " --json");
      EXPECT_EQ(listed.out, mimic::test::mimic_cli(command + " " + new_name + " --json").out);
      EXPECT_NE(listed.err.find("mimic: note: " + old_name + " is now " + new_name), std::string::npos) << listed.err;
      // and what the new one excludes: `info --model m --maps` dropped the model without a word (helper-101's probe)
      for (const std::string other : {"--model gpt2-mini", "gpt2-mini", "--system", "--tensors"}) {
        auto r = mimic::test::mimic_cli(command + " " + other + " " + old_name);
        EXPECT_EQ(r.code, 2) << other << ": " << r.err;
        EXPECT_NE(r.err.find("excludes"), std::string::npos) << other << ": " << r.err;
      }
      continue;
    }
    // the command's required options, so that the refusal is the spellings' (CLI11 checks what is required first)
    const std::string required = command == "generate" ? " --model gpt2-mini --prompt x"
                                 : command == "report" ? " --out " + dir.file("r") + " --pareto " + std::string(MIMIC_SOURCE_DIR) + "/README.md"
                                                       : "";
    auto both = mimic::test::mimic_cli(command + required + " " + old_name + " 1 " + new_name + " 1");
    EXPECT_NE(both.code, 0);
    EXPECT_NE(both.err.find("excludes"), std::string::npos) << both.err;
    auto zero = mimic::test::mimic_cli(command + " " + old_name + " 0");
    EXPECT_NE(zero.code, 0);
    EXPECT_NE(zero.err.find(old_name + ": must be"), std::string::npos) << zero.err;
  }
  EXPECT_EQ(n, 5) << "docs/cli.md should list the five retired spellings";
  // the old spelling does what the new one does, with one line naming the new spelling
  const std::string base = "generate --model gpt2-mini --prompt 'The ship' --threads 1 --json ";
  auto old_run = mimic::test::mimic_cli(base + "--max-new-tokens 3 --batch 2");
  auto new_run = mimic::test::mimic_cli(base + "--new-tokens 3 --batch-size 2");
  ASSERT_EQ(old_run.code, 0) << old_run.err;
  ASSERT_EQ(new_run.code, 0) << new_run.err;
  const auto old_json = nlohmann::json::parse(old_run.out), new_json = nlohmann::json::parse(new_run.out);
  ASSERT_EQ(new_json["rows"].size(), 2u) << new_run.out;
  EXPECT_EQ(old_json["rows"], new_json["rows"]);  // the same tokens and text (timings differ between runs)
  EXPECT_EQ(old_json["batch"], 2);
  EXPECT_NE(old_run.err.find("mimic: note: --max-new-tokens is now --new-tokens"), std::string::npos) << old_run.err;
  EXPECT_NE(old_run.err.find("mimic: note: --batch is now --batch-size"), std::string::npos) << old_run.err;
  EXPECT_EQ(new_run.err.find("mimic: note:"), std::string::npos) << new_run.err;
}

// Integer options are decimal whatever their leading zeros: CLI11 reads "010" as octal 8 (and refuses "09"), so the
// range validators (tools/ranges.h) rewrite the value in decimal and are transforms, not checks — a check's rewrite
// is thrown away (a probe of 2026-11-27 found `--steps 010` training 8 steps although docs/reliability.md said 10).
TEST(CliVocabulary, IntegerOptionsWithLeadingZerosAreDecimal) {
  auto r = mimic::test::mimic_cli("generate --model gpt2-mini --prompt x --new-tokens 010 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["ids"].size(), 10u);
  auto nine = mimic::test::mimic_cli("generate --model gpt2-mini --prompt x --new-tokens 09 --json");
  ASSERT_EQ(nine.code, 0) << nine.err;
  EXPECT_EQ(nlohmann::json::parse(nine.out)["ids"].size(), 9u);
}
