// Classification metrics from predicted and true labels.
#pragma once
#include <cstdint>
#include <vector>

namespace mimic::eval {

struct ClassificationMetrics {
  int64_t n = 0;
  double accuracy = 0;
  double f1 = 0;        // binary: F1 of class 1; more classes: macro-F1
  double mcc = 0;       // Matthews correlation (multi-class form of Gorodkin), 0 when undefined
  std::vector<std::vector<int64_t>> confusion;  // [true][predicted]
};

ClassificationMetrics classification_metrics(const std::vector<int64_t>& predicted, const std::vector<int64_t>& truth,
                                             int64_t num_labels);

}  // namespace mimic::eval
