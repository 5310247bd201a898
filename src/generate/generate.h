// Text generation with a causal LM: greedy or seeded sampling, decoded incrementally (each layer continues
// from its cache: a KV cache for softmax layers, the recurrent state for linear ones) or, as the reference,
// by recomputing the whole sequence at every step.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace mimic::models {
class Model;
class DecodeState;
}  // namespace mimic::models

namespace mimic::generate {

enum class Mode {
  Recurrent,  // prefill the prompt once, then one token per step from the decode state
  Parallel,   // recompute the full sequence at every step (the reference; quadratic)
};
Mode parse_mode(const std::string& name);  // "recurrent" | "parallel"
std::string mode_name(Mode mode);

// Picks the next token from a row of logits [V]: the argmax at temperature 0 (ties: the lowest id), else a
// draw from softmax(logits / temperature) restricted to the top_k largest (0 = all). The draws come from the
// sampler's own generator (std::mt19937_64 seeded with `seed`), so a seed reproduces a run on any thread count.
class Sampler {
 public:
  Sampler(double temperature, int64_t top_k, uint64_t seed);
  int64_t next(const at::Tensor& logits);

 private:
  double temperature_;
  int64_t top_k_;
  std::mt19937_64 rng_;
};

struct GenerateOptions {
  int64_t max_new_tokens = 50;
  double temperature = 0.0;  // 0 = greedy
  int64_t top_k = 0;         // 0 = no cut
  uint64_t seed = 0;
  Mode mode = Mode::Recurrent;
  // Stop after generating any of these (none: stop only at max_new_tokens or the context): the tokenizer's end of text
  // and the model's generation config's (models::end_of_text_ids), as HF's generate stops at every eos_token_id.
  std::vector<int64_t> eos_ids;
  // Called with each new token as soon as it is chosen (streaming output); batch 1 only.
  std::function<void(int64_t id)> on_token;
};

struct GenerateResult {
  std::vector<int64_t> ids;   // the new tokens (an EOS that stopped generation included)
  std::string stop;           // "new_tokens" | "eos" | "context"
  int64_t prompt_tokens = 0;
  double prefill_seconds = 0;  // the prompt's forward pass (which also yields the first token)
  double decode_seconds = 0;   // every later step
  int64_t state_bytes = 0;     // recurrent mode: the decode state's tensor bytes at the end
  double prefill_tokens_per_second() const { return prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0.0; }
  // New tokens after the first (each costs one decoding step) per second of decoding.
  double decode_tokens_per_second() const;
};

// Several continuations decoded together: one forward_step per new token for every row (a [B, 1] batch),
// so the weights are read once per step for all rows. Row b samples with seed + b (row 0 as generate() with
// the same options). A row that has stopped (EOS) is fed its last token until every row has stopped; its
// extra tokens are not part of its result.
struct BatchGenerateResult {
  std::vector<GenerateResult> rows;  // ids and stop per row; the timing fields below are the batch's
  int64_t prompt_tokens = 0;         // per row
  double prefill_seconds = 0, decode_seconds = 0;
  int64_t state_bytes = 0;           // the whole batch's decode state at the end (recurrent mode)
  // New tokens after each row's first, summed over the rows, per second of decoding.
  double decode_tokens_per_second() const;
};
// The prompts must be non-empty and of one length (no padding: every row sits at the same position).
BatchGenerateResult generate_batch(models::Model& model, const std::vector<std::vector<int64_t>>& prompts, const GenerateOptions& options);

// Generates up to max_new_tokens after `prompt` (batch 1). A token is only fed back while its position is
// inside the model's context, so at most context − prompt + 1 tokens come out; reaching that ends generation
// with stop = "context". A prompt longer than the context, an empty prompt or a non-causal model is a
// mimic::Error.
GenerateResult generate(models::Model& model, const std::vector<int64_t>& prompt, const GenerateOptions& options);

// Greedy continuation from a decode state that has consumed a prompt whose last logits row is `last_logits`
// [V]: n tokens (fewer when the context ends), the state advanced over all but the last. Used by evaluations
// that branch several continuations off one prefilled state.
std::vector<int64_t> greedy_continue(models::Model& model, models::DecodeState& state, const at::Tensor& last_logits, int64_t n);

}  // namespace mimic::generate
