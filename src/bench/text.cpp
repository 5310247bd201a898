#include "mimic/bench/text.h"

#include <cstdarg>
#include <cstdio>

namespace mimic::bench {

std::string strf(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

std::string length_name(int64_t t) { return t % 1024 == 0 ? std::to_string(t / 1024) + "K" : std::to_string(t); }

double ratio(double a, double b) { return b > 0 ? a / b : 0; }

}  // namespace mimic::bench
