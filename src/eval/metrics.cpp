#include "mimic/eval/metrics.h"

#include <algorithm>
#include <cmath>

#include "mimic/core/error.h"

namespace mimic::eval {

ClassificationMetrics classification_metrics(const std::vector<int64_t>& predicted, const std::vector<int64_t>& truth,
                                             int64_t k) {
  MIMIC_CHECK(predicted.size() == truth.size(), "metrics: ", predicted.size(), " predictions for ", truth.size(), " labels");
  MIMIC_CHECK(k >= 2, "metrics need at least two classes");
  ClassificationMetrics m;
  m.n = static_cast<int64_t>(truth.size());
  m.confusion.assign(k, std::vector<int64_t>(k, 0));
  for (size_t i = 0; i < truth.size(); ++i) {
    MIMIC_CHECK(truth[i] >= 0 && truth[i] < k && predicted[i] >= 0 && predicted[i] < k, "label out of range");
    m.confusion[truth[i]][predicted[i]]++;
  }
  if (m.n == 0) return m;
  std::vector<double> t(k, 0), p(k, 0), f1(k, 0);
  double correct = 0;
  for (int64_t a = 0; a < k; ++a)
    for (int64_t b = 0; b < k; ++b) {
      t[a] += m.confusion[a][b];
      p[b] += m.confusion[a][b];
      if (a == b) correct += m.confusion[a][b];
    }
  const double n = static_cast<double>(m.n);
  m.accuracy = correct / n;
  for (int64_t c = 0; c < k; ++c) {
    double tp = m.confusion[c][c];
    f1[c] = (t[c] + p[c]) > 0 ? 2 * tp / (t[c] + p[c]) : 0.0;
  }
  if (k == 2) {
    m.f1 = f1[1];
  } else {
    // macro: over the classes that occur, in the labels or the predictions (scikit-learn's default). A class of the
    // head absent from both counted as an F1 of 0, which pulled a subset's score down (0.375 for 0.5: helper-69).
    int64_t present = 0;
    for (int64_t c = 0; c < k; ++c)
      if (t[c] + p[c] > 0) m.f1 += f1[c], ++present;
    m.f1 /= static_cast<double>(present);
  }
  // MCC = (c·s − Σ p_k t_k) / sqrt((s² − Σ p_k²)(s² − Σ t_k²))
  double pt = 0, pp = 0, tt = 0;
  for (int64_t c = 0; c < k; ++c) {
    pt += p[c] * t[c];
    pp += p[c] * p[c];
    tt += t[c] * t[c];
  }
  double denom = std::sqrt((n * n - pp) * (n * n - tt));
  // undefined (0/0) where the labels or the predictions hold one class alone: 0, as scikit-learn reports it
  m.mcc = denom > 0 ? (correct * n - pt) / denom : 0.0;
  return m;
}

std::pair<double, double> wilson95(int64_t k, int64_t n) {
  MIMIC_CHECK(n > 0 && k >= 0 && k <= n, "wilson95: need 0 <= k <= n, n > 0 (got ", k, " of ", n, ")");
  const double z = 1.959963984540054, p = static_cast<double>(k) / static_cast<double>(n), nn = static_cast<double>(n);
  const double denom = 1 + z * z / nn;
  const double centre = (p + z * z / (2 * nn)) / denom;
  const double half = z * std::sqrt(p * (1 - p) / nn + z * z / (4 * nn * nn)) / denom;
  // none right has a lower end of exactly 0 and all right an upper end of 1 (the formula left 3.5e-18 at 0 of 100)
  return {k == 0 ? 0.0 : std::max(0.0, centre - half), k == n ? 1.0 : std::min(1.0, centre + half)};
}

std::string f1_of(const std::vector<std::string>& labels) { return labels.size() == 2 ? labels[1] : "macro"; }

std::string f1_name(const std::vector<std::string>& labels) {
  return labels.size() == 2 ? "F1 (of '" + labels[1] + "')" : "F1 (macro)";
}

}  // namespace mimic::eval
