// Sequence classification with BERT: finetuning on the training engine, and evaluation with accuracy,
// F1 and Matthews correlation.
#pragma once
#include <string>
#include <vector>

#include "mimic/data/classification.h"
#include "mimic/eval/metrics.h"
#include "mimic/finetune/finetune.h"

namespace mimic::models { class Model; }
namespace mimic::text { class Tokenizer; }

namespace mimic::finetune {

// model_dir: a BERT (MLM-pretrained, a classifier, or either converted); a classifier's head is kept when
// its labels match, created otherwise. teacher_dir: a classifier with the same labels.
struct ClassifyOptions : FinetuneOptions {
  std::string data;          // spam | sotu-era | FILE.jsonl
  int64_t seq_len = 0;       // tokens per example, [CLS] and [SEP] included (longer texts are cut; 0: min(128, the context))
  int64_t batch_size = 16;
};

struct ClassifyScores {
  eval::ClassificationMetrics validation;
  eval::ClassificationMetrics test;  // n = 0 when the data has no test split
};

struct ClassifyResult {
  train::TrainResult train;
  ClassifyScores student;                 // of the best model (by validation loss), as saved
  std::optional<ClassifyScores> teacher;  // with teacher_dir
  std::string trainable;                  // what trained (describe_trainable)
  int64_t trainable_parameters = 0;       // Prepared::trainable_parameters
  std::vector<std::string> labels;        // the data's labels in id order: the confusion matrices' order, F1's class
};

ClassifyResult finetune_classifier(const ClassifyOptions& options);

// Refuses a model whose family has no sequence-classification head (GPT-2, the Llama family), naming the families
// that have one — before any data or weights are read. (eval's "not a classifier: finetune it with --task cls" sent a
// GPT-2's user to a finetune that then said "needs a BERT tokenizer": the probe of 2026-12-02.) `option`, when given,
// names the option that gave the folder ("--teacher").
void require_classifier_family(const std::string& model_dir, const std::string& option = "");

// The example length of a classification run or evaluation: seq_len, or (0) min(128, the model's context); refused
// beyond the context, naming --seq-len.
int64_t example_length(int64_t seq_len, int64_t context);

// The ids a classifier reads for `text`: [CLS], the text's first seq_len - 2 tokens, [SEP] (seq_len >= 3). `cut` counts
// the texts that lost tokens. Only the head is tokenized, whatever the text's length (Tokenizer::encode_head).
std::vector<int64_t> example_ids(const text::Tokenizer& tok, const std::string& text, int64_t seq_len, int64_t& cut);
// The same for an example of a data set, refusing a text with no tokens, named by the example's doc_id (FILE:LINE).
std::vector<int64_t> example_ids(const text::Tokenizer& tok, const data::Example& e, int64_t seq_len, int64_t& cut);
// Refuses a tokenizer that does not frame a text as [CLS] text [SEP] (BERT's WordPiece does; a tokenizer.json may have
// a [CLS] and a [PAD] yet another post-processor), naming `where`.
void require_classifier_tokenizer(const text::Tokenizer& tok, const std::string& where);

struct ClassifyEval {
  eval::ClassificationMetrics metrics;
  double loss = 0;
  int64_t cut = 0;  // examples longer than seq_len tokens ([CLS] and [SEP] included), scored on their first seq_len
};
// The note on `cut` of `n` texts (`what`: "training texts", "texts of spam:test") longer than `seq_len` tokens, or "" when
// none is: finetune says it of its training set, eval of the split it scores (silent before helper-76's probe of
// 2026-12-06). `context`: the model's, the longest --seq-len there is.
std::string cut_texts_note(int64_t cut, int64_t n, const std::string& what, int64_t seq_len, int64_t context);
// Scores `examples` (batched, no gradients), each cut to seq_len tokens (0: min(128, the model's context)).
ClassifyEval evaluate_classifier(models::Model& model, const text::Tokenizer& tok, const std::vector<data::Example>& examples,
                                 int64_t num_labels, int64_t seq_len, int64_t batch_size);

}  // namespace mimic::finetune
