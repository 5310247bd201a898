// Fidelity metrics of linear attention against its softmax teacher (ce, KL, entropies, Spearman
// monotonicity, top-k mass, output mse), per head and layer: what distill reports before and after training
// and what report tabulates and draws.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "mimic/analysis/teacher.h"

namespace mimic::analysis {

// Fidelity of a student on teacher batches, per head.
struct HeadMetrics {
  double ce = 0, kl = 0, entropy_softmax = 0, entropy_linear = 0, spearman = 0;
  // with top_k > 0: the mass of the k largest weights of a row (all of it when the row sees <= k keys)
  double top_k_softmax = 0, top_k_linear = 0;
};
struct LayerMetrics {
  int64_t layer = 0;
  int64_t top_k = 0;  // 0: top-k masses not computed (and not in the JSON)
  std::vector<HeadMetrics> heads;
  HeadMetrics mean;  // over heads
  double mse = 0;    // per-head output vs teacher output, mean over real rows, heads, dims
  nlohmann::json to_json() const;
  static LayerMetrics from_json(const nlohmann::json& j);  // to_json's output read back
};

// Accumulates the metrics over batches (sums per head, then divides by the real query rows). When a map with
// features of any sign (Sign::Any) gives some negative weight (identity does; taylor2's kernel is positive),
// the linear weights are no distribution: ce, kl, entropy_linear and top_k_linear are then NaN (null in JSON);
// spearman and mse stay defined (spearman ranks the weights of a student whose weights may be negative themselves, in
// every batch, over the rows whose weights are all finite). top_k > 0 also accumulates the top-k masses.
class MetricsAccumulator {
 public:
  MetricsAccumulator(int64_t layer, int64_t n_head, int64_t top_k = 0);
  void add(attention::DistillableKernel& student, const TeacherBatch& batch);
  // The same from weights directly: a (teacher), log_a_hat (student), scores (q·k·scale), [B, H, T, T]; `signed_weights`:
  // the student's weights where they may be negative (weights_may_be_negative: spearman ranks them, and the accumulator
  // is marked signed once a visible one is negative), else undefined. Chosen by the kind, not by the batch, so that
  // distill's batches and report's single samples rank the same rows the same way. log_a_hat floors the weights and
  // their divisor (FLT_MIN), so ranking it tied every negative weight into one rank and, in a row whose divisor is
  // negative, followed the positive weights up where the weights themselves go down: a delta head's spearman read
  // 0.41 for 0.32, identity's 0.78 for −0.90 (helper-87's probe).
  void add_weights(const at::Tensor& a, const at::Tensor& log_a_hat, const at::Tensor& scores, const TeacherBatch& batch,
                   const at::Tensor& signed_weights = at::Tensor());
  LayerMetrics result() const;

 private:
  int64_t layer_, n_head_, top_k_;
  std::vector<double> ce_, ent_s_, ent_l_, rho_, rho_rows_, top_s_, top_l_;
  double rows_ = 0, mse_sum_ = 0, mse_count_ = 0;
  bool signed_ = false;  // a map with features of any sign: ce, kl, entropy_linear are undefined (NaN)
};

// The mass of the k largest entries of every row of w (last dimension), [...]: Σ of the top min(k, T) values.
at::Tensor top_k_mass(const at::Tensor& w, int64_t k);

// Spearman rank correlation of x and y along the last dimension over the positions where `valid` holds
// (ties get their average rank), for every row; rows with fewer than two valid positions or a constant
// side yield NaN. x, y: [..., T]; valid: bool broadcastable to them. Returns [...] (double).
at::Tensor spearman_rows(const at::Tensor& x, const at::Tensor& y, const at::Tensor& valid);

// A metric in JSON: the number, or null when it is undefined (NaN); number_from_json reads it back (null → NaN).
nlohmann::json json_number(double x);
double number_from_json(const nlohmann::json& j, const char* key);

}  // namespace mimic::analysis
