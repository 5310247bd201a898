// Text-classification data sets with real labels and fixed splits: `spam` (SpamAssassin ham vs spam)
// and `sotu-era` (State of the Union passages labelled by era), or a user's JSON-lines file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "mimic/data/corpus.h"

namespace mimic::data {

struct Example {
  std::string text;
  int64_t label = 0;
  std::string doc_id;  // the document the example comes from (splits never separate a document)
};

struct ClassificationData {
  std::string name;
  std::string source;  // what errors name: the file's path, or the built-in set's name
  std::vector<std::string> labels;  // label names, index = label id
  // The file's labels are integers, the ids themselves (a JSON-lines "label": 1): a classifier's output 1 whatever
  // its id2label calls it, never matched as the name "1". `labels` then names the ids "0" … "max".
  bool labels_are_ids = false;
  std::string metric;               // the headline metric besides accuracy: "f1" (binary) or "mcc"
  std::vector<Example> train, validation, test;
  // JSON-lines rows without a "split" of their own, which their text placed (load_classification)
  int64_t split_by_text = 0;
  // Texts given twice or more with different labels (a JSON-lines file's), and the lines of the first such pair
  // ("FILE:3 and FILE:9"): allowed — the rows may be meant so — but said by the commands, as a copy-paste slip trains
  // a classifier toward both labels without a sign (helper-52's probe of 2026-12-04).
  int64_t conflicting_texts = 0;
  std::string first_conflict;
  // "FILE: N texts are given with different labels (first at …)", or "" when none is.
  std::string conflict_note() const;
  const std::vector<Example>& split(Split s) const;
  // A digest of the label names and of every split's texts and labels: a resume compares it, so a data file whose
  // contents changed under the same path is named rather than trained on.
  std::string digest() const;
};

// "spam", "sotu-era", or a path to a JSON-lines file with {"text": ..., "label": ...} per line (label a
// string or an integer; optional "split": train|validation|test (or val); a row without one goes 90/5/5 by a hash of
// its text alone, so that the same rows split the same whatever the file's path, name or order, and two rows of one
// text without a "split" are never in two splits).
ClassificationData load_classification(const std::string& name_or_file);
// Puts `d`'s label ids in a classifier's order: `model_labels` are its names by id (models::ModelConfig::labels,
// from id2label/label2id), `model_num_labels` its outputs. Every label of the data must be one of them (else a
// mimic::Error naming the unknown label and listing the model's); d.labels becomes model_labels and each example's
// id follows its name. Empty model_labels (an unnamed classifier) leave names as they are. Integer labels
// (labels_are_ids) are the ids: each must be below model_num_labels, and d.labels become the model's (or "0" …
// "k-1"). `model` names the model in messages; `way_out` ends the message on unknown labels (finetune's: a new task
// starts from a model without a classifier; eval's and a teacher's differ: the probe of 2026-12-04).
void align_labels(ClassificationData& d, const std::vector<std::string>& model_labels, int64_t model_num_labels, const std::string& model,
                  const std::string& way_out = "to train a new task, start from a model without a classifier");

// The built-in data sets: {"spam", "sotu-era"}.
std::vector<std::string> classification_names();
// THE answer to "is --data a classification set?": a built-in set's name, or an existing file named *.jsonl (any case).
bool is_classification_data(const std::string& data);

// The eras of `sotu-era` (first and last year of each class), chosen so the classes hold about a quarter
// of the passages each.
struct Era {
  int first, last;
  const char* name;
};
const std::vector<Era>& sotu_eras();

}  // namespace mimic::data
