// Accuracy on synthetic associative recall (MQAR / AR, data/recall_tasks.h): the share of queried keys whose
// value is the model's most likely next token. Only the answers count, as in Zoology.
#pragma once
#include <cstdint>

#include "mimic/data/recall_tasks.h"

namespace mimic::models { class Model; }

namespace mimic::eval {

struct RecallAccuracyOptions {
  int64_t examples = 1000;  // examples of the split, indices 0 .. examples−1
  int64_t batch_size = 32;
  uint64_t seed = 0;        // the task's seed (the split's examples are a function of it)
  data::Split split = data::Split::Test;
  bool progress = true;
  std::string model_name;  // how a refusal names the model (the CLI: its folder; empty: "the model")
};

struct RecallAccuracyResult {
  int64_t examples = 0, queries = 0, correct = 0;
  double accuracy = 0;
  double lo = 0, hi = 1;  // the Wilson 95% interval of the accuracy over queries (eval::wilson95)
  double seconds = 0;
};

// A model whose context is shorter than the task's seq_len, or whose vocabulary does not hold the task's ids
// (data::RecallTaskSpec::check_fits), is a mimic::Error, named by options.model_name (in that order, as record's and finetune's).
RecallAccuracyResult recall_accuracy(models::Model& model, const data::RecallTaskSpec& spec, const RecallAccuracyOptions& options);
// Those checks alone (recall_accuracy makes them first), `model_name` naming the model ("" : "the model").
void check_recall_task(const models::Model& model, const data::RecallTaskSpec& spec, const std::string& model_name);

}  // namespace mimic::eval
