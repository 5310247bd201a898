// A mean over the values that are defined. NaN means undefined — a head without a Spearman (its normaliser zero on
// every row), a signed student's entropy, a layer a student does not convert — and is left out; an infinity stays in
// (a diverged KL shows as one). NaN where no value is defined. The means over heads and over layers that distill,
// report and report's page print are all this one, so that they cannot disagree on which values count.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>

namespace mimic {

class DefinedMean {
 public:
  void add(double x) {
    if (!std::isnan(x)) sum_ += x, ++n_;
  }
  double value() const { return n_ > 0 ? sum_ / static_cast<double>(n_) : std::numeric_limits<double>::quiet_NaN(); }
  int64_t count() const { return n_; }

 private:
  double sum_ = 0;
  int64_t n_ = 0;
};

}  // namespace mimic
