// mimic — convert pretrained softmax-attention transformers into linear-attention models.
// Each subcommand lives in its own tools/cmd_*.cpp file; this file wires them up and turns every error
// into one line on stderr and a non-zero exit.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "mimic/core/words.h"
#include "mimic/core/error.h"
#include "mimic/core/progress.h"
#include "mimic/core/runtime.h"
#include "mimic/data/corpus.h"
#include "mimic/distributed/environment.h"

namespace {
// LibTorch's c10::Error messages carry a multi-line backtrace: keep the first line.
std::string first_line(const char* what) {
  std::string s(what ? what : "unknown error");
  auto nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}
}  // namespace

// After an error has been printed: the process ends here, without the exit handlers. HDF5 cannot close a file whose
// write failed (a full disk): its own close at exit then crashed with SIGSEGV after mimic's one-line error (the probe
// of 2026-11-27). Everything mimic writes is complete under its final name or a temporary by now (destructors ran
// while the exception unwound), so nothing is lost by skipping them.
[[noreturn]] static void end_after_error(int status = 1) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(status);
}

// A usage error: "mimic: error: MESSAGE" and exit status 2. In a launched run every rank parses the same command line
// and finds the same mistake in it: rank 0 alone says it (the launcher gives it time to: distributed/launch.h), so
// that one mistake is one line, not one per rank.
// Whether this process speaks for the run: rank 0 of a distributed one, or a process alone. What every rank finds
// alike (a usage error, the help asked for) is said by rank 0 alone.
static bool speaks_for_the_run() {
  try {
    const auto& e = mimic::distributed::environment();
    return !e.distributed() || e.rank == 0;
  } catch (const mimic::Error&) {
    return true;  // a malformed RANK or WORLD_SIZE: every process says what it finds
  }
}

static int usage_error(const std::string& message) {
  if (speaks_for_the_run()) std::fprintf(stderr, "mimic: error: %s\n", message.c_str());
  return 2;
}

namespace {
// Whether the line asks for help (--help, -h) — or, with `version`, for --version — before any -- (after it the
// words are another program's, as in `mimic launch -n 2 -- ...`'s).
bool line_asks_help(int argc, char** argv, bool version) {
  for (int i = 1; i < argc && std::strcmp(argv[i], "--") != 0; ++i)
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h") || (version && !std::strcmp(argv[i], "--version"))) return true;
  return false;
}
// The command (or bench's subcommand) whose help the line asks for, else null.
const CLI::App* help_asked(CLI::App& app, int argc, char** argv) {
  if (!line_asks_help(argc, argv, false)) return nullptr;
  CLI::App* named = nullptr;
  CLI::App* level = &app;
  for (int i = 1; i < argc && std::strcmp(argv[i], "--") != 0; ++i) {
    if (level != nullptr && argv[i][0] != '-') {
      auto subs = level->get_subcommands([&](const CLI::App* c) { return c->check_name(argv[i]); });
      level = subs.empty() ? nullptr : subs.front();
      if (level != nullptr) named = level;
    }
  }
  return named;
}
// The words CLI11 puts before a subcommand's name in its usage line: "mimic" for distill, "mimic bench" for its kinds.
std::string help_prefix(const CLI::App& app, const CLI::App* sub) {
  std::string prefix;
  for (const CLI::App* p = sub->get_parent(); p != nullptr; p = p->get_parent())
    prefix = p->get_name() + (prefix.empty() ? "" : " " + prefix);
  return prefix.empty() ? app.get_name() : prefix;
}

// LibTorch's allocator says "[enforce fail at alloc_cpu.cpp:75] err == 0. DefaultCPUAllocator: can't allocate memory:
// you tried to allocate N bytes..." (the sixth probe of 2026-11-28): said in mimic's words, with the size.
std::string in_mimics_words(const std::string& what) {
  static const std::regex alloc(R"(can't allocate memory: you tried to allocate (\d+) bytes)");
  std::smatch m;
  if (std::regex_search(what, m, alloc)) {
    const double gib = std::stod(m[1].str()) / (1024.0 * 1024.0 * 1024.0);
    char buf[160];
    std::snprintf(buf, sizeof buf, "out of memory: one tensor of %.3g GiB was asked for; give smaller sizes (lengths, batch, widths)", gib);
    return buf;
  }
  return what;
}

// An exception no thread caught (LibTorch's rendezvous client threw "Connection reset by peer" from a thread of its
// own, and the process aborted with "terminate called after throwing ...": the sixth probe): one line, exit 1.
[[noreturn]] void on_terminate() {
  std::string what = "an internal thread failed";
  auto e = std::current_exception();
  if (!e) {  // no exception: a defect (a joinable thread destroyed, ...): said, then the abort and its core dump kept
    std::fputs("mimic: error: internal error: std::terminate without an exception\n", stderr);
    std::abort();
  }
  {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      what += ": " + first_line(x.what());
    } catch (...) {
    }
  }
  std::fprintf(stderr, "mimic: error: %s%s\n", mimic::distributed::rank_prefix().c_str(), in_mimics_words(what).c_str());
  std::fflush(stderr);
  std::_Exit(1);
}
}  // namespace

int main(int argc, char** argv) {
  std::set_terminate(on_terminate);
  CLI::App app{"mimic: convert pretrained softmax-attention transformers (GPT-2, BERT, the Llama family) into linear-attention models"};
  app.name("mimic");  // the usage line says "mimic", however the binary was called
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("mimic ") + mimic::mimic_version());
  // The pipeline's commands first, in the order a conversion runs them; then the tools around them.
  for (auto reg : {mimic::cli::register_record, mimic::cli::register_distill, mimic::cli::register_convert,
                   mimic::cli::register_finetune, mimic::cli::register_eval, mimic::cli::register_generate,
                   mimic::cli::register_report, mimic::cli::register_pretrain, mimic::cli::register_export,
                   mimic::cli::register_info, mimic::cli::register_tokenize, mimic::cli::register_forward,
                   mimic::cli::register_bench, mimic::cli::register_launch})
    reg(app);
  app.footer(
      "A conversion, end to end (the embedded gpt2-mini; any GPT-2 directory works the same; README, 'Convert your own model'):\n"
      "  mimic record   --model gpt2-mini --data all --out rec.h5\n"
      "  mimic distill  --record rec.h5 --feature-map hedgehog --out maps.safetensors\n"
      "  mimic convert  --model gpt2-mini --maps maps.safetensors --keep-softmax auto:8 --out converted\n"
      "  mimic finetune --task lm --model converted --teacher gpt2-mini --kd 1 --data all --out finetuned\n"
      "  mimic eval     --model finetuned --data all --split test\n"
      "  mimic generate --model finetuned --prompt \"The whale\"\n"
      "  mimic report   --record rec.h5 --maps maps.safetensors --out report\n"
      "Each command's options: mimic COMMAND --help");
  if (argc == 1) {  // no command: what there is to run, instead of a one-line complaint (once in a launch)
    if (speaks_for_the_run()) std::fputs(app.help().c_str(), stdout);
    return 1;
  }
  // Every path, prompt and option mimic keeps ends up in JSON (results, mimic.json, checkpoints' state), which holds
  // UTF-8 only: an argument that is not UTF-8 is refused here, in one line, before any work (it surfaced as
  // nlohmann's "type_error.316" after the work, and convert left a model folder without its mimic.json).
  for (int i = 1; i < argc; ++i)
    if (!mimic::data::is_valid_utf8(argv[i])) {
      return usage_error("argument " + std::to_string(i) + " ('" + mimic::data::shown_bytes(argv[i]) +
                         "') is not valid UTF-8: mimic's results and files are JSON, which holds UTF-8 only; give paths and text in UTF-8");
    }
  // The environment's settings are refused here, before any command, when mistyped: MIMIC_PROGRESS is read when a
  // command's first progress starts, minutes in; MIMIC_CPU_ALLOCATOR by init_runtime, which `launch` never calls
  // (its ranks would each fail). --help and --version answer whatever they hold.
  for (const std::string& bad : {mimic::progress_setting_problem(), mimic::cpu_allocator_setting_problem()})
    if (!bad.empty() && !line_asks_help(argc, argv, true)) return usage_error(mimic::distributed::rank_prefix() + bad);
  // A word that is none of `parent`'s commands (the top level's or a command's, as bench's): named with the nearest
  // and the choices. CLI11 said "A subcommand is required" (the eighth probe of 2026-11-29), and `bench atention`
  // was answered "bench: unknown option '--threads'" (helper-56's probe of 2026-12-04).
  auto unknown_word = [](const CLI::App& parent, const std::string& word, const std::string& whose) -> std::string {
    const auto own = parent.get_subcommands([](const CLI::App*) { return true; });
    if (own.empty() || std::any_of(own.begin(), own.end(), [&](const CLI::App* c) { return c->check_name(word); })) return "";
    std::string names;
    std::vector<std::string> commands;
    for (const CLI::App* c : own) {
      names += (names.empty() ? "" : ", ") + c->get_name();
      commands.push_back(c->get_name());
    }
    const std::string nearest = mimic::nearest_name(word, commands);
    return "unknown " + whose + "command '" + word + "' (" + (nearest.empty() ? "" : "did you mean " + nearest + "? ") + "the " + whose +
           "commands: " + names + ")";
  };
  if (argv[1][0] != '-')
    if (const std::string wrong = unknown_word(app, argv[1], ""); !wrong.empty()) return usage_error(wrong);
  if (argc > 2 && argv[2][0] != '-')
    for (const CLI::App* c : app.get_subcommands([&](const CLI::App* s) { return s->check_name(argv[1]); }))
      if (const std::string wrong = unknown_word(*c, argv[2], c->get_name() + " "); !wrong.empty()) return usage_error(wrong);
  // (an unknown option's line names the help to read; a list's ends as CLI11's parse errors do: helper-58's probe)
  if (const std::string wrong = mimic::cli::unknown_option(app, argc, argv); !wrong.empty()) return usage_error(wrong);
  if (const std::string wrong = mimic::cli::list_item_problem(app, argc, argv); !wrong.empty()) return usage_error(wrong + " (see --help)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return speaks_for_the_run() ? app.exit(e) : 0;  // --help, --version (once in a launch)
    // CLI11 checks the options' values before it looks for --help: `distill --record r.h5 --help`, typed before r.h5
    // existed, answered "--record: no such file" (the review of 2026-12-02). Help asked for is shown whatever else
    // the line holds (the command's words, up to a --, name whose help).
    if (const CLI::App* asked = help_asked(app, argc, argv)) {
      if (speaks_for_the_run()) std::fputs(asked->help(help_prefix(app, asked)).c_str(), stdout);
      return 0;
    }
    // a usage error is one line like every other error (CLI11's own output adds a "Run with --help" line); an option
    // given twice reads "--threads: At Most 1 required but received 2" in CLI11's words
    std::string what = first_line(e.what());
    static const std::regex twice(R"(^(-[^:]+): At Most 1 required but received (\d+)$)");
    std::smatch m;
    if (std::regex_match(what, m, twice)) what = m[1].str() + " is given " + m[2].str() + " times: give it once";
    // a word no option takes: CLI11 lists such words in reverse order ("The following arguments were not expected: 2 x")
    static const std::regex extras(R"(^The following arguments? (?:was|were) not expected: (.*)$)");
    if (std::regex_match(what, m, extras)) {
      std::vector<std::string> words;
      std::istringstream in(m[1].str());
      for (std::string w; in >> w;) words.insert(words.begin(), "'" + w + "'");
      std::string list;
      for (const auto& w : words) list += (list.empty() ? "" : ", ") + w;
      what = std::string(words.size() == 1 ? "an argument no option takes: " : "arguments no option takes: ") + list +
             " (each value follows the option it belongs to)";
    }
    // `mimic bench` alone: CLI11's "A subcommand is required" named neither the command nor its subcommands
    if (what == "A subcommand is required") {
      const CLI::App* level = &app;
      for (auto subs = app.get_subcommands(); !subs.empty(); subs = level->get_subcommands()) level = subs.front();
      std::string names;
      for (const CLI::App* c : level->get_subcommands([](const CLI::App*) { return true; })) names += (names.empty() ? "" : ", ") + c->get_name();
      // (and `mimic --threads 1` alone, CLI11's capitalised words too: helper-60's probe)
      what = (level != &app ? "mimic " + level->get_name() + " needs one of its commands: " : std::string("mimic needs a command: ")) + names;
    }
    // one code for every usage error, as mimic's own checks before parsing give (CLI11's are 105 to 114 by kind:
    // the eighth probe of 2026-11-29 found six of them); an error found while working is 1
    return usage_error(what + " (see --help)");
  } catch (const mimic::Error& e) {
    // in a distributed run the rank leads the line: several ranks may print to one terminal
    std::fprintf(stderr, "mimic: error: %s%s\n", mimic::distributed::rank_prefix().c_str(), e.what());
    end_after_error(e.exit_status());  // 1, or 128 + N for a run signal N stopped with a checkpoint
  } catch (const std::filesystem::filesystem_error& e) {
    // The options' paths are checked while parsing (cli::path_arg); this is the backstop for a path the library
    // made: its own words, one line, instead of "filesystem error: ...".
    if (e.path1().empty())
      std::fprintf(stderr, "mimic: error: %s\n", first_line(e.what()).c_str());
    else
      std::fprintf(stderr, "mimic: error: %s: %s\n", e.path1().c_str(), e.code().message().c_str());
    end_after_error();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "mimic: error: out of memory\n");
    end_after_error();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mimic: error: %s%s\n", mimic::distributed::rank_prefix().c_str(), in_mimics_words(first_line(e.what())).c_str());
    end_after_error();
  }
  return 0;
}
