// mimic's one exception type. Every failure a user can cause (bad file, bad option, bad shape) is
// reported by throwing mimic::Error with a message that names the problem; the CLI prints it as one
// line on stderr and exits non-zero.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace mimic {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, int exit_status = 1) : std::runtime_error(message), exit_status_(exit_status) {}
  // The status the CLI exits with when this error ends a command: 1, or 128 + N for a run that signal N stopped
  // (SIGINT 130, SIGTERM 143), the status a shell gives a command the signal ended, so that a script tells a run
  // stopped by Ctrl-C or a job's time limit (its checkpoint holds it) from one that failed.
  int exit_status() const { return exit_status_; }

 private:
  int exit_status_;
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

// Throw mimic::Error with the streamed arguments as message.
template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(detail::concat(args...));
}

}  // namespace mimic

// MIMIC_CHECK(cond, "message ", value, ...): throw mimic::Error unless cond holds.
#define MIMIC_CHECK(cond, ...)                 \
  do {                                         \
    if (!(cond)) ::mimic::fail(__VA_ARGS__);   \
  } while (0)
