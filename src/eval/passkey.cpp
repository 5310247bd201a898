#include "mimic/eval/passkey.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include "mimic/core/error.h"
#include "mimic/core/words.h"
#include "mimic/core/runtime.h"
#include "mimic/core/progress.h"
#include "mimic/generate/generate.h"
#include "mimic/models/family.h"
#include "mimic/models/model.h"
#include "mimic/text/tokenizer.h"

namespace mimic::eval {

namespace {

const char* kIntro = "A pass key is hidden somewhere in the long text below. Find it and remember it: you will be asked for it at the end.";
const char* kQuestion = " What is the pass key? The pass key is";
// Short, plain, repetitive sentences: nothing in them looks like a number or a key.
const std::vector<std::string> kFillers = {" The grass is green.", " The sky is blue.",     " The sun is warm.",
                                           " The river runs on.",  " Here we go again.",    " There and back again.",
                                           " The hills are quiet.", " The day is long."};

std::string key_sentence(const std::string& key) { return " The pass key is " + key + ". Remember it."; }
int64_t count(const text::Tokenizer& tok, const std::string& s) { return static_cast<int64_t>(tok.encode(s, false).size()); }
// The tokens `s` adds after the introduction: a SentencePiece tokenizer (Mistral's) prepends "▁" to a text it starts,
// so a sentence counted alone took one token more than it adds inside the prompt, and prompts came out ~15% short
// of their target. For GPT-2's byte-level BPE, which splits before each space, both counts are the same.
int64_t count_after_intro(const text::Tokenizer& tok, const std::string& s) { return count(tok, kIntro + s) - count(tok, kIntro); }

}  // namespace

int64_t passkey_frame_tokens(const text::Tokenizer& tok, const std::string& key) {
  // the prompt opens as a document does (Llama's <s>), as generate's prompt and the texts the model trained on do
  const auto opening = static_cast<int64_t>(tok.document_start().size());
  return opening + count(tok, kIntro) + count_after_intro(tok, key_sentence(key)) + count_after_intro(tok, kQuestion);
}

PasskeyPrompt build_passkey_prompt(const text::Tokenizer& tok, int64_t target_tokens, double depth, const std::string& key) {
  MIMIC_CHECK(depth >= 0 && depth <= 1, "passkey depth must be in [0, 1], got ", depth);
  const int64_t frame = passkey_frame_tokens(tok, key);
  const auto opening = static_cast<int64_t>(tok.document_start().size());
  MIMIC_CHECK(target_tokens >= frame, "a passkey prompt of ", target_tokens, " tokens is too short: the question and key alone take ",
              frame);
  std::vector<int64_t> sizes;
  for (const auto& f : kFillers) sizes.push_back(count_after_intro(tok, f));
  // fillers in cycle order while they fit; at the end any shorter one that still fits closes the gap
  std::vector<size_t> chosen;
  int64_t left = target_tokens - frame;
  for (size_t c = 0;; ++c) {
    size_t pick = c % kFillers.size();
    if (sizes[pick] > left) {
      auto it = std::find_if(sizes.begin(), sizes.end(), [&](int64_t n) { return n <= left; });
      if (it == sizes.end()) break;
      pick = static_cast<size_t>(it - sizes.begin());
    }
    chosen.push_back(pick);
    left -= sizes[pick];
  }
  const auto n = static_cast<int64_t>(chosen.size());
  const auto at = static_cast<int64_t>(std::llround(depth * static_cast<double>(n)));
  PasskeyPrompt p;
  p.key = key;
  p.filler_sentences = n;
  p.text = kIntro;
  for (int64_t i = 0; i <= n; ++i) {
    if (i == at) {
      p.key_token = opening + count(tok, p.text);
      p.text += key_sentence(key);
    }
    if (i < n) p.text += kFillers[chosen[static_cast<size_t>(i)]];
  }
  p.text += kQuestion;
  p.ids = tok.encode_document(p.text);
  return p;
}

std::vector<int64_t> passkey_answer(const text::Tokenizer& tok, const std::string& key) {
  const auto question = tok.encode(kQuestion, false), both = tok.encode(std::string(kQuestion) + " " + key, false);
  MIMIC_CHECK(both.size() > question.size() && std::equal(question.begin(), question.end(), both.begin()), "the tokenizer merges the pass key ",
              key, " into the question's last token: its answer has no tokens of its own");
  return {both.begin() + static_cast<std::ptrdiff_t>(question.size()), both.end()};
}

std::string random_passkey(std::mt19937_64& rng, int64_t digits) {
  MIMIC_CHECK(digits >= 1 && digits <= 18, "passkey digits must be 1..18, got ", digits);
  std::string key;
  for (int64_t i = 0; i < digits; ++i) key += static_cast<char>('0' + (i == 0 ? 1 + rng() % 9 : rng() % 10));
  return key;
}

std::vector<double> score_continuations(models::Model& model, const models::DecodeState& state, const at::Tensor& last_logits,
                                        const std::vector<std::vector<int64_t>>& candidates) {
  torch::NoGradGuard no_grad;
  // read from host copies: one per scored row, not one wait per token on a GPU
  const auto first = host(torch::log_softmax(last_logits.to(torch::kDouble), -1));
  const int64_t vocab = first.numel();
  const auto device = models::device_of(model);
  std::vector<double> scores;
  for (const auto& c : candidates) {
    MIMIC_CHECK(!c.empty(), "a scored continuation needs at least one token");
    for (auto id : c) MIMIC_CHECK(id >= 0 && id < vocab, "a scored continuation's token ", id, " is outside the vocabulary of ", vocab);
    double s = first.data_ptr<double>()[c[0]];
    if (c.size() > 1) {
      auto branch = state.clone();
      const auto lp = host(torch::log_softmax(model.forward_step(models::token_row({c.begin(), c.end() - 1}, device), branch)[0].to(torch::kDouble), -1));
      for (size_t i = 1; i < c.size(); ++i) s += lp.data_ptr<double>()[static_cast<int64_t>(i - 1) * vocab + c[i]];
    }
    scores.push_back(s);
  }
  return scores;
}

std::vector<double> score_continuations(models::Model& model, const std::vector<int64_t>& prompt,
                                        const std::vector<std::vector<int64_t>>& candidates) {
  auto state = model.new_decode_state();
  auto logits = model.forward_step(models::token_row(prompt, models::device_of(model)), *state);
  return score_continuations(model, *state, logits[0][-1], candidates);
}

int64_t rank_of(double truth, const std::vector<double>& alternatives) {
  return 1 + std::count_if(alternatives.begin(), alternatives.end(), [&](double a) { return !(a < truth); });
}

std::string leading_number(const std::string& text) {
  size_t i = text.find_first_not_of(' ');
  if (i == std::string::npos) return "";
  size_t j = i;
  while (j < text.size() && text[j] >= '0' && text[j] <= '9') ++j;
  return text.substr(i, j - i);
}

PasskeyResult passkey_eval(models::Model& model, const text::Tokenizer& tok, const PasskeyOptions& opt) {
  const auto s = model.summary();
  MIMIC_CHECK(s.family->causal, "passkey retrieval needs a causal LM (", models::causal_family_names(), "); this is a ", s.model_type, " model");
  MIMIC_CHECK(opt.trials >= 1, "passkey trials must be >= 1, got ", opt.trials);
  MIMIC_CHECK(opt.alternatives >= 1, "passkey alternatives must be >= 1, got ", opt.alternatives);
  MIMIC_CHECK(!opt.lengths.empty(), "passkey needs at least one length");
  // The shortest prompt: the instructions, the key sentence and the question with no filler, then the key's digits
  // and the space before them. Keys tokenize to different lengths: the longest key sentence of 256 drawn keys (a
  // fixed stream, apart from the trials'), plus one token of margin, so that a length passed here fits every trial.
  int64_t key_part = 0;
  {
    std::mt19937_64 keys(12345);
    for (int i = 0; i < 256; ++i) key_part = std::max(key_part, count(tok, key_sentence(random_passkey(keys, opt.digits))));
  }
  const int64_t shortest = static_cast<int64_t>(tok.document_start().size()) + count(tok, kIntro) + key_part + count(tok, kQuestion) +
                           opt.digits + 2;
  for (auto len : opt.lengths) {
    MIMIC_CHECK(len <= s.max_positions, "passkey length ", len, " exceeds ", models::context_words(s));
    MIMIC_CHECK(len >= shortest, "passkey length ", len, " is too short: the instructions, the key and the question alone take about ",
                shortest, " tokens (give lengths of at least ", shortest, ")");
  }
  const double max_keys = std::pow(10.0, static_cast<double>(opt.digits)) * 0.9;
  // the limit and the way out in numbers (helper-58's probe of 2026-12-04: "8 alternatives need longer keys than 1
  // digits", where 9 keys of one digit exist and 3 alternatives are the most)
  if (static_cast<double>(opt.alternatives + 1) > max_keys / 2) {
    const auto most = static_cast<int64_t>(std::floor(max_keys / 2)) - 1;
    int64_t digits = opt.digits;
    while (static_cast<double>(opt.alternatives + 1) > std::pow(10.0, static_cast<double>(digits)) * 0.9 / 2) ++digits;
    fail("--alternatives ", opt.alternatives, ": keys of ", count_of(opt.digits, "digit"), " allow at most ", most,
         " (a key and its alternatives take at most half of the ", static_cast<int64_t>(max_keys), " keys of that length, so that they are "
         "drawn distinct); give --alternatives ", most, " or fewer, or --digits ", digits);
  }

  const auto t0 = std::chrono::steady_clock::now();
  PasskeyResult r;
  r.chance = 1.0 / static_cast<double>(opt.alternatives + 1);
  Progress bar("passkey", static_cast<int64_t>(opt.lengths.size()) * opt.trials, "trial");
  if (!opt.progress) bar.disable();
  for (auto len : opt.lengths) {
    // One stream per (seed, length): a length's trials must not depend on the lengths scored before it (they did
    // until 2026-11-26, when one stream ran through all lengths: the teacher read 77% at 256 alone, 85% after 128).
    std::seed_seq seq{static_cast<uint32_t>(opt.seed), static_cast<uint32_t>(opt.seed >> 32), static_cast<uint32_t>(len)};
    std::mt19937_64 rng(seq);
    PasskeyRow row_result;
    row_result.length = len;
    double rank_sum = 0, prompt_sum = 0, gain_sum = 0;
    for (int64_t t = 0; t < opt.trials; ++t) {
      const std::string key = random_passkey(rng, opt.digits);
      const double depth = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
      std::set<std::string> keys{key};
      std::vector<std::vector<int64_t>> candidates{passkey_answer(tok, key)};
      std::vector<std::string> alternatives;  // in the candidates' order
      while (static_cast<int64_t>(keys.size()) <= opt.alternatives) {
        auto alt = random_passkey(rng, opt.digits);
        if (keys.insert(alt).second) {
          candidates.push_back(passkey_answer(tok, alt));
          alternatives.push_back(alt);
        }
      }
      std::string decoy;
      do decoy = random_passkey(rng, opt.digits);
      while (keys.count(decoy));
      auto p = build_passkey_prompt(tok, len - opt.digits - 1, depth, key);
      prompt_sum += static_cast<double>(p.ids.size());
      PasskeyTrial trial;
      trial.prompt = p.text;
      trial.prompt_tokens = static_cast<int64_t>(p.ids.size());
      trial.depth = depth;
      trial.key = key;
      trial.decoy = decoy;

      auto state = model.new_decode_state();
      auto last = model.forward_step(models::token_row(p.ids, models::device_of(model)), *state)[0][-1];
      auto scores = score_continuations(model, *state, last, candidates);
      const int64_t rank = rank_of(scores[0], {scores.begin() + 1, scores.end()});
      rank_sum += static_cast<double>(rank);
      row_result.ranked_first += rank == 1;
      auto gains = scores;
      const auto decoyed = build_passkey_prompt(tok, len - opt.digits - 1, depth, decoy);
      trial.decoy_prompt = decoyed.text;
      auto priors = score_continuations(model, decoyed.ids, candidates);
      for (size_t c = 0; c < gains.size(); ++c) gains[c] -= priors[c];
      trial.gain_rank = rank_of(gains[0], {gains.begin() + 1, gains.end()});
      row_result.gain_ranked_first += trial.gain_rank == 1;
      gain_sum += gains[0];
      auto answer = generate::greedy_continue(model, *state, last, opt.digits + 1);
      trial.answer = tok.decode(answer);
      row_result.exact += leading_number(trial.answer) == key;
      ++row_result.trials;
      trial.alternatives = std::move(alternatives);
      trial.rank = rank;
      trial.log_probs = scores;
      trial.decoy_log_probs = priors;
      if (opt.each_trial) row_result.each.push_back(std::move(trial));
      bar.advance(1, "length " + std::to_string(len));
    }
    row_result.mean_rank = rank_sum / static_cast<double>(opt.trials);
    row_result.mean_key_gain = gain_sum / static_cast<double>(opt.trials);
    row_result.mean_prompt_tokens = prompt_sum / static_cast<double>(opt.trials);
    r.rows.push_back(std::move(row_result));
  }
  bar.finish();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace mimic::eval
