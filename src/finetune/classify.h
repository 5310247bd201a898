// Sequence classification with BERT: finetuning on the training engine, and evaluation with accuracy,
// F1 and Matthews correlation.
#pragma once
#include <string>

#include "data/classification.h"
#include "eval/metrics.h"
#include "train/trainer.h"

namespace mimic::models { class Model; }
namespace mimic::text { class Tokenizer; }

namespace mimic::finetune {

struct ClassifyOptions {
  std::string model_dir;
  std::string data;          // spam | sotu-era | FILE.jsonl
  int64_t seq_len = 128;     // tokens per example, [CLS] and [SEP] included (longer texts are cut)
  int64_t batch_size = 16;
  uint64_t seed = 0;
  // Keep the embeddings group (models::is_embedding: word, position and token-type embeddings and their
  // LayerNorm) as loaded: no gradients, not in the optimizer, so the result's embedding tensors are the
  // base model's bit for bit.
  bool freeze_embeddings = false;
  train::TrainOptions train;
};

struct ClassifyResult {
  train::TrainResult train;
  eval::ClassificationMetrics validation;  // of the best model
  eval::ClassificationMetrics test;
};

ClassifyResult finetune_classifier(const ClassifyOptions& options);

struct ClassifyEval {
  eval::ClassificationMetrics metrics;
  double loss = 0;
};
// Scores `examples` (batched, no gradients).
ClassifyEval evaluate_classifier(models::Model& model, const text::Tokenizer& tok, const std::vector<data::Example>& examples,
                                 int64_t num_labels, int64_t seq_len, int64_t batch_size);

}  // namespace mimic::finetune
