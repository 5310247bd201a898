// Classification metrics from predicted and true labels, and the interval of a share of trials.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
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

// Which class `f1` is of, by the labels in id order: the second of two ("spam" in ham/spam), else "macro" — the
// `f1_of` of eval's and finetune's --json; and the name their tables print: "F1 (of 'spam')", "F1 (macro)".
std::string f1_of(const std::vector<std::string>& labels);
std::string f1_name(const std::vector<std::string>& labels);

// The 95% Wilson score interval of k successes in n trials (n > 0): inside [0, 1], and not centred on k/n — near 0 or
// 1 the share's distance to each end differs (0 of 10: 0–27.8%), so it is given as its two ends, never as k/n ± a width.
std::pair<double, double> wilson95(int64_t k, int64_t n);

}  // namespace mimic::eval
