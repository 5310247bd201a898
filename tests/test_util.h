// Small helpers shared by the tests.
#pragma once
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "mimic/core/error.h"

// MIMIC_TEST_UNDER_ASAN: the tests are built with AddressSanitizer (tools/sanitize.sh), whose malloc replaces glibc's
#if defined(__SANITIZE_ADDRESS__)  // GCC's -fsanitize=address
#define MIMIC_TEST_UNDER_ASAN 1
#elif defined(__has_feature)  // clang's
#if __has_feature(address_sanitizer)
#define MIMIC_TEST_UNDER_ASAN 1
#endif
#endif

namespace mimic::test {

// A fresh temporary folder, removed when the object goes out of scope.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() / ("mimic-test-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream os(path, std::ios::binary | std::ios::trunc);
  os.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream is(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(is), std::istreambuf_iterator<char>());
}

// Sets an environment variable for the scope of the object (or only saves it, until set or unset), then restores it:
// the tests after, in the same process, see the suite's own value.
class ScopedEnv {
 public:
  explicit ScopedEnv(std::string name) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
  }
  ScopedEnv(std::string name, const std::string& value) : ScopedEnv(std::move(name)) { set(value); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv() {
    if (old_) ::setenv(name_.c_str(), old_->c_str(), 1);
    else ::unsetenv(name_.c_str());
  }
  void set(const std::string& value) { ::setenv(name_.c_str(), value.c_str(), 1); }
  void unset() { ::unsetenv(name_.c_str()); }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// Gives `sig` its default disposition for the scope of the object, then puts back the one before: a test that raises
// SIGINT must not depend on how the suite was started (a job a script starts with `&` ignores SIGINT, and mimic, as a
// shell's command does, leaves an ignored signal ignored).
class DefaultSignal {
 public:
  explicit DefaultSignal(int sig) : sig_(sig) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(sig, &dfl, &before_);
  }
  DefaultSignal(const DefaultSignal&) = delete;
  DefaultSignal& operator=(const DefaultSignal&) = delete;
  ~DefaultSignal() { ::sigaction(sig_, &before_, nullptr); }

 private:
  int sig_;
  struct sigaction before_ {};
};

struct RunResult {
  int code;
  std::string out, err;
};
// Runs `mimic ARGS` through the shell, capturing stdout and stderr. With a time limit, a run that has not
// ended by then is killed and exits with 124 (timeout(1)): a blocking reader fails a test instead of hanging it.
inline RunResult mimic_cli(const std::string& args, int timeout_seconds = 0) {
  TempDir dir;
  std::string cmd = (timeout_seconds > 0 ? "timeout " + std::to_string(timeout_seconds) + " " : std::string()) + std::string(MIMIC_CLI) +
                    " " + args + " >" + dir.file("out") + " 2>" + dir.file("err") + " </dev/null";
  int status = std::system(cmd.c_str());
  return {WEXITSTATUS(status), read_bytes(dir.file("out")), read_bytes(dir.file("err"))};
}

// Runs `mimic ARGS` in the background and kills it (SIGKILL) as soon as the training log `log` (OUT/log.jsonl)
// announces step `step`: a point the run has surely passed, on a fast machine or a slow one, and — with many steps
// after it — one it has almost surely not finished past. (A fixed sleep after some file appears did neither reliably.)
// The poll shares its core with the run (the suite pins each shard to one), so a run with little work after `step`
// may still end first: then its output folder (the log's) is removed and the run started again, up to three times.
// True once a run was killed; false when the last run ended by itself (its folder kept) or failed (not tried again).
inline bool kill_once_logged(const std::string& args, const std::string& log, int step) {
  const std::string seen = "grep -q \"step.:" + std::to_string(step) + "[,}]\" " + log + " 2>/dev/null";
  const std::string cmd = std::string(MIMIC_CLI) + " " + args + " >/dev/null 2>&1 </dev/null & pid=$!; " +
                          "while kill -0 $pid 2>/dev/null && ! " + seen + "; do sleep 0.005; done; " +
                          "kill -9 $pid 2>/dev/null; wait $pid; case $? in 137) exit 0;; 0) exit 3;; *) exit 4;; esac";
  for (int attempt = 0;; ++attempt) {
    const int status = std::system(("bash -c '" + cmd + "' 2>/dev/null").c_str());
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (code != 3 || attempt == 2) return code == 0;  // 0: SIGKILL (137) ended it; 3: it ended by itself; 4: it failed
    std::filesystem::remove_all(std::filesystem::path(log).parent_path());  // again, afresh
  }
}

// A public-domain paragraph (Dickens) for tests that record or distill a tiny model on real text.
inline constexpr const char* kDickens =
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of foolishness, "
    "it was the epoch of belief, it was the epoch of incredulity, it was the season of Light, it was the season of "
    "Darkness, it was the spring of hope, it was the winter of despair, we had everything before us, we had nothing "
    "before us, we were all going direct to Heaven, we were all going direct the other way.";

// `copies` numbered lines of `paragraph` ("1. <paragraph>\n", "2. <paragraph>\n", ...): a user's text as --data splits
// it (data::load_text_data: by position, at line breaks, the first 90% of the characters train, the next 5% validate,
// the last 5% test), which needs each 5% to hold a line of its own. Of 20 copies lines 1-18 train, line 19 validates
// and line 20 tests. The numbers make every line differ, so that a split's text is found in no other split.
inline std::string text_lines(const std::string& paragraph, int copies) {
  std::string text;
  for (int i = 1; i <= copies; ++i) text += std::to_string(i) + ". " + paragraph + "\n";
  return text;
}

inline std::string fixture(const std::string& rel) { return std::string(MIMIC_TEST_FIXTURES) + "/" + rel; }

// Whether /usr/bin/python3 imports `module` (Debian's python3-torch, python3-h5py): the tests that check mimic's files
// with them skip where it does not (the GPU machines' python3 has neither; this project's machines have both).
inline bool python_has(const std::string& module) {
  return std::system(("/usr/bin/python3 -c 'import " + module + "' >/dev/null 2>&1").c_str()) == 0;
}

// A fixture model directory completed with the real tokenizer files (which the committed fixtures leave
// out to stay small): tests/fixtures/models/<name> + the fetched GPT-2 or BERT vocabulary. Made once per
// test process.
std::string model_with_tokenizer(const std::string& name);

// Hedgehog maps of the prefixed GPT-2 fixture (model_with_tokenizer("gpt2-prefixed")) written as initialised (0 epochs,
// online on a few lines of Dickens): a valid distill output for tests that convert. Made once per test process.
const std::string& initial_gpt2_maps();

// Rewrites, through `edit`, the JSON document a safetensors file holds in its metadata key `key` (a training or
// distillation checkpoint's "state"): for tests of mimic's own state files.
void edit_safetensors_json(const std::string& path, const std::string& key, const std::function<void(nlohmann::json&)>& edit);

// A tiny classification set decided by one word ("wonderful" = 1, "terrible" = 0): 40 JSON lines with fixed
// train / validation / test splits, written to `path`.
inline void write_word_decided_jsonl(const std::string& path) {
  std::string lines;
  for (int i = 0; i < 40; ++i)
    lines += nlohmann::json{{"text", std::string(i % 2 ? "a wonderful day " : "a terrible day ") + std::to_string(i)},
                            {"label", i % 2},
                            {"split", i % 4 == 0 ? "test" : i % 4 == 1 ? "validation" : "train"}}.dump() + "\n";
  write_bytes(path, lines);
}

}  // namespace mimic::test

// Expects `stmt` to throw mimic::Error whose message contains `needle` (and, the _STATUS form, whose exit status,
// the CLI's, is `status`).
#define EXPECT_MIMIC_ERROR_STATUS(stmt, needle, status)                                           \
  do {                                                                                            \
    try {                                                                                         \
      stmt;                                                                                       \
      ADD_FAILURE() << "expected mimic::Error containing '" << (needle) << "', nothing thrown";   \
    } catch (const ::mimic::Error& e) {                                                           \
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)                            \
          << "message: " << e.what() << "\n  expected to contain: " << (needle);                  \
      if ((status) >= 0) EXPECT_EQ(e.exit_status(), (status)) << "message: " << e.what();        \
    }                                                                                             \
  } while (0)
#define EXPECT_MIMIC_ERROR(stmt, needle) EXPECT_MIMIC_ERROR_STATUS(stmt, needle, -1)
