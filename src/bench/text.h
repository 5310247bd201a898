// Small text helpers the benchmark reports share: printf into a std::string, lengths as "512" / "16K", and a
// ratio that is 0 when the divisor is not positive (a form that was not measured).
#pragma once
#include <cstdint>
#include <string>

namespace mimic::bench {

std::string strf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string length_name(int64_t t);  // "512", "1K", "16K"
double ratio(double a, double b);    // a / b, or 0 when b <= 0

}  // namespace mimic::bench
