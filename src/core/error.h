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
  explicit Error(const std::string& message) : std::runtime_error(message) {}
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
