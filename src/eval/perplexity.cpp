#include "mimic/eval/perplexity.h"

#include <torch/torch.h>

#include <cmath>

#include "mimic/core/error.h"
#include "mimic/core/precision.h"
#include "mimic/core/progress.h"
#include "mimic/eval/copy.h"
#include "mimic/models/family.h"
#include "mimic/models/model.h"

namespace mimic::eval {

double ratio_mean_ci95(const std::vector<std::pair<double, double>>& clusters) {
  if (clusters.size() < 2) return std::numeric_limits<double>::quiet_NaN();
  double sums = 0, counts = 0;
  for (const auto& [sum, count] : clusters) sums += sum, counts += count;
  const double w = static_cast<double>(clusters.size()), mean = sums / counts;
  double ss = 0;
  for (const auto& [sum, count] : clusters) ss += (sum - mean * count) * (sum - mean * count);
  // Student's t of W − 1 degrees of freedom, not the normal's 1.96: with 2 windows the interval was 6.5 times too
  // narrow (helper-91's probe); with the test split's hundreds of windows the two agree to a few parts in a thousand
  return student_t95(static_cast<int64_t>(clusters.size()) - 1) * std::sqrt(ss / (w * (w - 1))) / (counts / w);
}

PerplexityResult perplexity(models::Model& model, const std::vector<int64_t>& ids, const PerplexityOptions& options) {
  auto info = model.summary();
  MIMIC_CHECK(info.head == "lm", "perplexity needs a causal language model (", models::causal_family_names(), ", with an LM head); this model is ",
              info.model_type, " with head '", info.head, "'",
              info.head == "cls" ? " (a classifier: `mimic eval --task cls` scores it on labelled data)" : "");
  const int64_t n = static_cast<int64_t>(ids.size());
  MIMIC_CHECK(n >= 2, "perplexity needs at least 2 tokens, the text has ", n);
  const int64_t window = options.window > 0 ? std::min(options.window, info.max_positions) : info.max_positions;
  MIMIC_CHECK(window >= 2, "perplexity window must be at least 2 tokens");
  // at most window − 1: a window's first token has no context inside it, so a window must reach back over at least one
  // scored token for every token but the text's first to be scored (a stride of the whole window skipped one per window:
  // the probe of 2026-12-01)
  const int64_t stride = options.stride > 0 ? std::min(options.stride, window - 1) : std::max<int64_t>(1, window / 2);

  torch::NoGradGuard no_grad;
  auto all = torch::tensor(ids, torch::kLong).to(models::device_of(model));
  const auto unscored = options.unscored.empty() ? at::Tensor() : torch::tensor(options.unscored, torch::kLong).to(all.device());
  PerplexityResult r;
  r.tokens = n;
  r.window = window;
  r.stride = stride;
  double nll_sum = 0;
  std::vector<std::pair<double, double>> per_window;  // (NLL sum, tokens scored) of each window
  int64_t scored_until = 1;  // tokens [1, scored_until) are scored; token 0 has no prediction
  Progress progress("perplexity", n - 1, "tok");
  if (!options.progress) progress.disable();
  for (int64_t begin = 0; scored_until < n; begin += stride) {
    int64_t end = std::min(begin + window, n);
    if (end <= scored_until) continue;
    auto input = all.slice(0, begin, end).unsqueeze(0);
    auto out = model.forward({input, {}, {}, {}});
    // in float: under bf16 (autocast) the logits are bf16, and so were their log-softmax and its sum below, whose
    // last bit at a window's sum of ~3,000 nats is 16 (the NLL came out a whole number: helper-39's review)
    auto logp = torch::log_softmax(float_or_wider(out.logits[0]), -1);  // [L, V]; row i predicts token begin + i + 1
    int64_t first = std::max(scored_until, begin + 1);
    auto targets = all.slice(0, first, end);
    auto rows = logp.slice(0, first - 1 - begin, end - 1 - begin);
    auto target_logp = rows.gather(1, targets.unsqueeze(1));
    int64_t count = end - first;
    if (unscored.defined()) {  // (without: the sum as it always was, bit for bit)
      target_logp = target_logp.squeeze(1).masked_select(torch::logical_not(torch::isin(targets, unscored)));
      count = target_logp.numel();
    }
    const double window_nll = -target_logp.sum().item<double>();
    nll_sum += window_nll;
    per_window.emplace_back(window_nll, static_cast<double>(count));
    r.predicted += count;
    scored_until = end;
    ++r.windows;
    progress.update(r.predicted);
  }
  progress.finish();
  r.seconds = progress.elapsed_seconds();
  MIMIC_CHECK(r.predicted > 0, "the text has no token to score: it holds only the tokens a document opens with");
  r.nll = nll_sum / static_cast<double>(r.predicted);
  r.perplexity = std::exp(r.nll);
  r.nll_ci95 = ratio_mean_ci95(per_window);
  MIMIC_CHECK(std::isfinite(r.perplexity), "perplexity is not finite (nll ", r.nll, ")");
  return r;
}

}  // namespace mimic::eval
