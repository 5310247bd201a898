// Causal language-model finetuning of GPT-2 (plain or converted) on the public-domain corpora: packed
// blocks from the token caches as pretrain uses them, validation loss on a fixed slice of the validation
// split, best/last exports, exact resume; optionally the test split's perplexity and a teacher side by side.
#pragma once
#include <optional>
#include <string>

#include "mimic/data/batches.h"
#include "mimic/eval/perplexity.h"
#include "mimic/finetune/finetune.h"

namespace mimic::finetune {

struct LmOptions : FinetuneOptions {
  std::string corpus = "all";  // all | sotu | moby-dick
  int64_t seq_len = 0;         // tokens per block (0: min(256, the model's context); a recall task needs its own)
  int64_t batch_size = 8;
  int64_t eval_batches = 10;   // validation batches per evaluation
  // Blocks in which an earlier span recurs (data/batches.h), as pretrain takes them: a second stage shown text to copy
  // keeps the in-context recall that prose alone lets it forget (docs/finetune.md). Validation stays plain prose.
  data::CopyCurriculum copy;
  bool test = false;           // also score the test split (strided windows, as `mimic eval` does)
  // Logit distillation from the teacher (teacher_dir, run in-process): 0 = off, else its temperature T; the loss is
  // kd_lm_weight · LM loss + (1 − kd_lm_weight) · T²·KL(teacher ‖ student) (train/lm.h).
  double kd_temperature = 0;
  double kd_lm_weight = 0;
  eval::PerplexityOptions test_options;
};

struct LmScores {
  double validation_loss = 0;        // mean next-token loss on the fixed validation slice
  double validation_perplexity = 0;  // exp(validation_loss)
  std::optional<eval::PerplexityResult> test;
};

struct LmResult {
  train::TrainResult train;
  LmScores student;                 // the best model (by validation loss), as saved in out_dir
  std::optional<LmScores> teacher;  // with teacher_dir
  std::string trainable;            // what trained (describe_trainable)
  int64_t trainable_parameters = 0;  // Prepared::trainable_parameters
};

// Runs (or resumes) the finetuning. out_dir becomes the best model's directory, beside checkpoint.safetensors and
// log.jsonl (and last/ with train.keep_last; train::TrainOptions).
LmResult finetune_lm(const LmOptions& options);

}  // namespace mimic::finetune
