#include "mimic/eval/recall_accuracy.h"

#include <torch/torch.h>

#include <cmath>

#include "mimic/core/error.h"
#include "mimic/core/progress.h"
#include "mimic/data/batches.h"
#include "mimic/models/model.h"

namespace mimic::eval {

RecallAccuracyResult recall_accuracy(models::Model& model, const data::RecallTaskSpec& spec, const RecallAccuracyOptions& o) {
  const auto s = model.summary();
  MIMIC_CHECK(s.head == "lm", "recall accuracy needs a causal language model; this model is ", s.model_type, " with head '", s.head, "'");
  MIMIC_CHECK(s.vocab_size == spec.vocab, "the model's vocabulary has ", s.vocab_size, " tokens, the task ", spec.to_string(), "'s ",
              spec.vocab, ": evaluate a model trained on this task");
  MIMIC_CHECK(spec.seq_len <= s.max_positions, "the task's seq_len ", spec.seq_len, " exceeds ", models::context_words(s));
  MIMIC_CHECK(o.examples >= 1 && o.batch_size >= 1, "recall accuracy needs examples >= 1 and batch size >= 1");
  torch::NoGradGuard no_grad;
  RecallAccuracyResult r;
  Progress bar("recall", o.examples, "example");
  if (!o.progress) bar.disable();
  for (int64_t first = 0; first < o.examples; first += o.batch_size) {
    const int64_t n = std::min(o.batch_size, o.examples - first);
    const auto b = data::to_device(data::recall_batch(spec, o.seed, o.split, first, n), models::device_of(model));
    auto scored = b.labels.ne(-100);
    auto logits = model.forward({b.input_ids, {}, {}, scored}).logits;  // [N, V]: the scored positions in row-major order
    auto predicted = logits.argmax(-1);
    r.correct += predicted.eq(b.labels.index({scored})).sum().item<int64_t>();
    r.queries += scored.sum().item<int64_t>();
    r.examples += n;
    bar.advance(n);
  }
  bar.finish();
  r.seconds = bar.elapsed_seconds();
  const double q = static_cast<double>(r.queries), p = static_cast<double>(r.correct) / q, z = 1.959964;
  r.accuracy = p;
  // Wilson score interval: stays inside [0, 1] and is sensible at accuracies near 0 or 1.
  r.ci95 = z / (1 + z * z / q) * std::sqrt(p * (1 - p) / q + z * z / (4 * q * q));
  return r;
}

}  // namespace mimic::eval
