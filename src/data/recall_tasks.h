// Synthetic associative-recall data: the tasks on which linear attention is known to fall behind softmax.
//  - MQAR, multi-query associative recall (Zoology, Arora et al. 2023): P key-value pairs, then every key
//    queried once, at gaps drawn from a power law, in a sea of filler tokens; the model must answer each
//    query with its key's value.
//  - AR, single-query associative recall (Hedgehog App. B.3): key-value pairs (keys may repeat, with one
//    value per key in a sequence) and one query at the end.
// Keys come from [1, V/2), values from [V/2, V), token 0 is the filler; only the answers are scored (every
// other label is -100). Examples are a pure function of (seed, split, index): any example of any split can be
// made alone, in any order, on any machine. Spec strings (`--data mqar:vocab=8192,seq_len=256,pairs=16`),
// layout and sampling: docs/recall.md.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "mimic/data/batches.h"
#include "mimic/data/corpus.h"

namespace mimic::data {

struct RecallTaskSpec {
  std::string kind = "mqar";  // "mqar" | "ar"
  int64_t vocab = 8192;       // V: model vocabulary (keys [1, V/2), values [V/2, V), filler 0)
  int64_t seq_len = 256;      // T: the model's input length (examples hold T + 1 tokens)
  int64_t pairs = 16;         // MQAR: P key-value pairs (and P queries); AR: derived, (T − 1) / 2
  double power_a = 0.01;      // MQAR: query gap i ∈ 1..(T+1−2P)/2 drawn with p(i) ∝ i^(a−1)

  // "mqar" or "ar", optionally followed by ":key=value,..." (keys: vocab, seq_len, pairs (mqar), power_a
  // (mqar)). Unknown keys, malformed values and impossible combinations are a mimic::Error naming them.
  static RecallTaskSpec parse(const std::string& spec);
  std::string to_string() const;  // canonical form, every key written ("mqar:vocab=...,seq_len=...,...")
  void validate() const;
  // Refuses a task whose ids are not all ids of a model of `model_vocab` tokens (`model`: how to name it): one rule
  // for every command that runs a model on a task (record, finetune, eval). A smaller task vocabulary is allowed — its
  // ids are the model's first ones, and eval's argmax over the whole vocabulary counts any other id as a wrong answer.
  // (helper-50's probe of 2026-12-04: finetune trained on vocab 64 in a model of more, then eval refused the same
  // task; record refused a larger one asking whether "the tokenizer" belonged to the model.)
  void check_fits(int64_t model_vocab, const std::string& model) const;
  int64_t queries() const { return kind == "ar" ? 1 : pairs; }
};

// True when `data` names a recall task ("mqar", "ar", or either followed by ':').
bool is_recall_task(const std::string& data);

// The sequence length a language-model run on `data` uses: a recall task's own seq_len (a `given` --seq-len
// that differs is an error naming both), else `value` (the --seq-len given, or the command's default). Checked while the command
// line is read: a default of 256 against a task of 64 failed only after the model was built (fifth probe, F12).
int64_t lm_seq_len(const std::string& data, bool given, int64_t value);

struct RecallExample {
  std::vector<int64_t> tokens;   // T + 1 tokens
  std::vector<int64_t> queries;  // positions t (in 0..T−1) of the query keys: tokens[t + 1] is the answer
};

// Example `index` of `split` for `seed`.
RecallExample make_recall_example(const RecallTaskSpec& spec, uint64_t seed, Split split, int64_t index);

// Examples [first, first + count) as a batch: input_ids = tokens[0:T], labels = tokens[1:T+1] at the query
// positions and -100 elsewhere, attention_mask all ones.
LmBatch recall_batch(const RecallTaskSpec& spec, uint64_t seed, Split split, int64_t first, int64_t count);

}  // namespace mimic::data
