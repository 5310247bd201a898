// A benchmark's target (issue 21's and earlier ones): what was checked, whether it was met, and the numbers.
// Every benchmark report lists its targets in this one form, in its text and its JSON.
#pragma once
#include <string>

namespace mimic::bench {

struct TargetResult {
  std::string name;    // e.g. "linear fwd+bwd >= 10x faster than softmax at 16K"
  std::string status;  // "PASS", "MISS" or "n/a" (not measured, e.g. --max-len below 16K)
  std::string detail;  // the measured numbers, or why it was not measured
  double value = 0;    // the measured quantity (ratio, share, length); 0 when n/a
  double limit = 0;    // the bound it is checked against
};

}  // namespace mimic::bench
