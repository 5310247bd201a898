// Language-model perplexity of a token sequence with strided windows over the model's context.
#pragma once
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace mimic::models { class Model; }

namespace mimic::eval {

struct PerplexityOptions {
  int64_t window = 0;  // tokens per forward pass; 0 = the model's context length
  int64_t stride = 0;  // new tokens scored per window; 0 = window / 2
  // Target ids not scored: a document's opening (Tokenizer::document_start, a Llama's <s>) is format the tokenizer
  // puts before every text, predicted for free after the previous document's end, not text; lm-eval, scoring each
  // document after its BOS, never scores it either. Empty: every token is scored.
  std::vector<int64_t> unscored;
  bool progress = true;
};

struct PerplexityResult {
  double perplexity = 0;
  double nll = 0;           // mean negative log-likelihood (nats) per predicted token
  int64_t tokens = 0;       // tokens in the text
  int64_t predicted = 0;    // tokens scored (all but the first, which has no prediction, and the unscored ids)
  int64_t windows = 0;
  int64_t window = 0, stride = 0;  // as run: a requested window is cut to the model's context, a stride to the window − 1
  // Half-width of the mean NLL's 95% interval, the windows taken as independent clusters of tokens (each window's
  // NLL sum against its token count: the ratio estimator's standard error). Neighbouring windows share text, so
  // it is a rough measure of how much the text sample moves the result. NaN with fewer than 2 windows.
  double nll_ci95 = std::numeric_limits<double>::quiet_NaN();
  double seconds = 0;
};

// The 95% half-width of a ratio mean Σ sums / Σ counts over clusters (sum, count) — the ratio estimator's standard
// error times Student's t of W − 1 degrees of freedom (copy.h's student_t95): t · sqrt(Σ (sum − mean·count)² /
// (W (W − 1))) / mean count. NaN for fewer than 2 clusters.
double ratio_mean_ci95(const std::vector<std::pair<double, double>>& clusters);

// Scores every token but the first exactly once. Window w covers [begin, end) with end - begin ≤ window;
// it scores the tokens not scored by the previous window, each predicted from the context inside w
// (the first window scores tokens 1..end-1). Nothing is prepended: `ids` opens with a BOS where the caller puts
// one (eval puts the tokenizer's document start, as token caches do). Needs a causal LM.
PerplexityResult perplexity(models::Model& model, const std::vector<int64_t>& ids, const PerplexityOptions& options = {});

}  // namespace mimic::eval
