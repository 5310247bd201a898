// In-context copy: how much better a causal LM predicts a passage the second time it reads it. A segment A
// of L tokens is run as [A A]; the first-copy NLL is the mean NLL of A's tokens 1..L-1 in the first copy
// (the same as A scored alone: the model is causal), the second-copy NLL the mean NLL of the same tokens in
// the second copy, and the copy gain their difference (nats/token). A model with induction heads predicts
// the repeat almost perfectly (gain ≈ the first-copy NLL); one that ignores its context gains ≈ 0. This is
// the recall that linear attention is known to lose. Protocol: docs/recall.md.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace mimic::models { class Model; }

namespace mimic::eval {

struct CopyOptions {
  int64_t segments = 32;      // N
  int64_t segment_len = 128;  // L (the model runs 2L tokens)
  int64_t batch_size = 8;     // segments per forward pass
  // Ids before each run, [opening A A]: the tokenizer's document start (Tokenizer::document_start), so that a model
  // trained with a BOS before every text (a Llama's <s>) reads the run as it reads a text; none for GPT-2. The
  // same tokens of A are scored with or without it.
  std::vector<int64_t> opening;
  bool progress = true;
};

struct CopyResult {
  int64_t segments = 0, segment_len = 0;
  int64_t scored = 0;         // tokens scored per copy and segment (L - 1)
  double first_nll = 0;       // mean over segments of the per-segment means (nats/token)
  double second_nll = 0;
  double gain = 0;            // first_nll - second_nll
  // sample standard deviation of the per-segment gains, and the half-width of the 95% confidence interval of their
  // mean (Student t); NaN for one segment, which gives no interval (it was 0, "± 0.000", and a teacher's gain passed as
  // significantly above zero: helper-58's probe of 2026-12-04)
  double gain_sd = std::numeric_limits<double>::quiet_NaN();
  double gain_ci95 = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> segment_first, segment_second;  // per segment
  double seconds = 0;
};

// N non-overlapping segments of L tokens, evenly spaced over `ids` (the first at 0, the last ending at the
// end). Too few tokens for N × L, N < 1 or L < 2 is a mimic::Error; `text` is what its message calls the ids.
std::vector<std::vector<int64_t>> copy_segments(const std::vector<int64_t>& ids, int64_t segments, int64_t segment_len,
                                                const std::string& text = "the text");
// `ids` without `opening` at its front (a token stream opens with its first document's start, which every run
// brings itself: cut from the stream, the first segment would open with it twice).
std::vector<int64_t> without_opening(std::vector<int64_t> ids, const std::vector<int64_t>& opening);

// Rows [opening A A] of segments [first, first + count), int64 [count, |opening| + 2L] on the CPU: the runs copy_eval
// scores, and convert's placement probe alike.
at::Tensor copy_runs(const std::vector<std::vector<int64_t>>& segments, int64_t first, int64_t count, const std::vector<int64_t>& opening);

// Runs every segment doubled (after options.opening) and reduces as described above. A non-causal model, a segment
// whose doubled length and the opening exceed the model's context, or segments of unequal length is a mimic::Error.
CopyResult copy_eval(models::Model& model, const std::vector<std::vector<int64_t>>& segments, const CopyOptions& options);

// The two-sided 95% quantile of Student's t with `df` degrees of freedom (df >= 1), e.g. 12.706 at 1,
// 2.045 at 29, → 1.960.
double student_t95(int64_t df);

}  // namespace mimic::eval
