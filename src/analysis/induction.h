// Induction and previous-token scores of attention weights (Olsson et al. 2022, "In-context learning and
// induction heads"): what makes a head useful for in-context copying, and what a linear map must reproduce to
// keep it.
//  - induction score of a query row t: the weight it puts on the positions j + 1 right after earlier
//    occurrences j < t of its own token (x_j = x_t); averaged over the rows that have such an occurrence.
//    On a record of repeated segments [A A] (record --repeat) this is, for every token of the second copy,
//    the weight on the token after its first occurrence — 1 for a perfect induction head, ≈ 1/t for uniform
//    weights.
//  - previous-token score: the weight of row t on key t − 1, averaged over rows t >= 1: the first half of the
//    two-head induction circuit.
//  - local mass (window W): the weight of row t on keys with |t − j| < W, averaged over real rows: the share a
//    sliding window of W keys would hold — for a hybrid kernel with window W, the window's share of the head's
//    mass; for the teacher, how much of a head a window can serve at all.
// Padded queries and keys do not count. Definitions and their use: docs/report.md.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace mimic::analysis {

// bool [B, T, T]: key j + 1 is an induction target of query t (some j < t has x_j = x_t), for ids [B, T];
// `mask` (bool [B, T], true = real token; undefined = all real) removes padded queries and keys.
at::Tensor induction_targets(const at::Tensor& ids, const at::Tensor& mask);

struct InductionScores {
  std::vector<double> induction, previous_token, local_mass;  // per head (NaN when no row counted; report means them)
  double induction_rows = 0, previous_rows = 0, local_rows = 0;             // rows averaged (per head)
};

// Sums the scores over batches of weights w [B, H, T, T] (rows = queries) with their token ids [B, T].
class InductionAccumulator {
 public:
  explicit InductionAccumulator(int64_t n_head, int64_t local_window = 64);
  void add(const at::Tensor& w, const at::Tensor& ids, const at::Tensor& mask);
  InductionScores result() const;

 private:
  int64_t n_head_, window_;
  std::vector<double> ind_, prev_, local_;
  double ind_rows_ = 0, prev_rows_ = 0, local_rows_ = 0;
};

}  // namespace mimic::analysis
