// Passkey retrieval: a random number hidden at a random depth in long filler text, asked for at the end.
// The simplest test of whether a model can fetch one fact from anywhere in its context — what linear
// attention tends to lose and SLA gates claim to restore. Protocol: docs/generate.md.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace mimic::models {
class Model;
class DecodeState;
}  // namespace mimic::models
namespace mimic::text { class Tokenizer; }

namespace mimic::eval {

struct PasskeyPrompt {
  std::vector<int64_t> ids;  // the prompt's tokens: the tokenizer's document start, then encode(text) without special tokens
  std::string text;
  std::string key;
  int64_t key_token = 0;       // index in ids of the first token of the sentence that holds the key
  int64_t filler_sentences = 0;
};

// An introduction, filler sentences (a fixed cycle of short ones) with the key sentence " The pass key is
// KEY. Remember it." after round(depth · n) of the n fillers, then " What is the pass key? The pass key is".
// n is chosen so that the prompt has at most target_tokens tokens and as many as the fillers allow (the gap
// is smaller than the shortest filler sentence). target_tokens too small for the frame is a mimic::Error.
PasskeyPrompt build_passkey_prompt(const text::Tokenizer& tokenizer, int64_t target_tokens, double depth, const std::string& key);
// The fewest tokens build_passkey_prompt takes for `key` (the opening, the introduction, the key's sentence and the
// question, no filler): a shorter target is refused.
int64_t passkey_frame_tokens(const text::Tokenizer& tokenizer, const std::string& key);

// The ids of " KEY" as they continue a prompt (which ends with the question): what encoding the question and the key
// together adds to the question alone. A SentencePiece tokenizer (Mistral's) encodes " 12345" alone with a leading
// "▁▁", a sequence the model never sees after "… is"; for GPT-2's byte-level BPE it is encode(" " + key). A key whose
// tokens merge into the question's is a mimic::Error.
std::vector<int64_t> passkey_answer(const text::Tokenizer& tokenizer, const std::string& key);

// A random key of `digits` decimal digits, the first non-zero.
std::string random_passkey(std::mt19937_64& rng, int64_t digits);

// log p(candidate | prompt) (summed over the candidate's tokens) for each candidate, from a decode state that
// has consumed the prompt and the logits row [V] of its last token; each candidate runs from a clone, so
// `state` is left as it was.
std::vector<double> score_continuations(models::Model& model, const models::DecodeState& state, const at::Tensor& last_logits,
                                        const std::vector<std::vector<int64_t>>& candidates);
// The same from the prompt's ids (prefills a fresh decode state).
std::vector<double> score_continuations(models::Model& model, const std::vector<int64_t>& prompt,
                                        const std::vector<std::vector<int64_t>>& candidates);

// Rank of the true candidate's score among the alternatives' (1 = best); ties count against it.
int64_t rank_of(double truth, const std::vector<double>& alternatives);

// The leading run of digits of `text` after leading spaces ("" if none): what a greedy answer says.
std::string leading_number(const std::string& text);

struct PasskeyOptions {
  std::vector<int64_t> lengths = {128, 256, 512};  // tokens per sequence: prompt + answer
  int64_t trials = 20;                             // per length
  int64_t digits = 5;
  int64_t alternatives = 9;  // K random wrong keys the true key is ranked against (chance 1/(K+1))
  uint64_t seed = 0;
  bool progress = true;
  // keep every trial in its row's `each` (two prompts of up to the length per trial: memory that grows with trials ×
  // length, so only when asked, as `eval --each-trial` does)
  bool each_trial = false;
};

// One trial as scored, so that another implementation can score the same prompts (helper-78's probe of 2026-12-06
// could check the rows' counts only against themselves).
struct PasskeyTrial {
  std::string prompt;  // the prompt's text (its ids: the tokenizer's document start, then the text encoded)
  int64_t prompt_tokens = 0;
  double depth = 0;
  std::string key, decoy;  // the decoy takes the key's place in the calibration's prompt
  std::string decoy_prompt;  // built as the prompt, with the decoy (its fillers may differ where the decoy's tokens do)
  std::vector<std::string> alternatives;
  // log p(" KEY" | prompt) of the key, then of each alternative; the same given the decoy's prompt
  std::vector<double> log_probs, decoy_log_probs;
  int64_t rank = 0, gain_rank = 0;  // of the key among the candidates, by log_probs and by their gains
  std::string answer;              // the greedy continuation's text (its leading number is the answer)
};

struct PasskeyRow {
  int64_t length = 0;
  int64_t trials = 0;
  int64_t exact = 0;         // greedy answers equal to the key
  int64_t ranked_first = 0;  // true key more likely than every alternative
  double mean_rank = 0;      // of the true key, 1 .. K+1
  // Calibrated for each candidate's prior: its gain log p(c | prompt) − log p(c | the same prompt with a decoy
  // key in the key sentence). The true key ranked first by gain, and its mean gain in nats (> 0: the model
  // copies from the context; ≈ 0: it ignores the key).
  int64_t gain_ranked_first = 0;
  double mean_key_gain = 0;
  double mean_prompt_tokens = 0;
  std::vector<PasskeyTrial> each;  // the trials, in order (with PasskeyOptions::each_trial; else empty)
  double exact_accuracy() const { return trials ? static_cast<double>(exact) / trials : 0.0; }
  double rank_accuracy() const { return trials ? static_cast<double>(ranked_first) / trials : 0.0; }
  double gain_rank_accuracy() const { return trials ? static_cast<double>(gain_ranked_first) / trials : 0.0; }
};

struct PasskeyResult {
  std::vector<PasskeyRow> rows;
  double chance = 0;  // 1 / (K + 1)
  double seconds = 0;
};

// For every length and trial (seeded per length: the trials at a length are the same whichever other lengths are
// asked for, so `--lengths 256` and `--lengths 128,256,512` score the same 256-token prompts): a key, a depth
// uniform in [0, 1], the prompt built to length − digits
// − 1 tokens; one prefill, then the greedy answer (digits + 1 tokens, exact match of the leading number) and
// the ranking of the true key's log-likelihood against K distinct random keys; a second prefill of the
// decoy prompt (another key, same depth) for the calibrated gains. A length beyond the model's context, or a
// non-causal model, is a mimic::Error.
PasskeyResult passkey_eval(models::Model& model, const text::Tokenizer& tokenizer, const PasskeyOptions& options);

}  // namespace mimic::eval
