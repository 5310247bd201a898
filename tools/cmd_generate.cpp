// mimic generate --model DIR [--prompt TEXT] — continue a text (or start one) with a causal LM, greedy or sampled, decoding
// incrementally (KV cache / recurrent state) or by recomputing the sequence (--mode parallel, the reference).
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "cli.h"
#include "mimic/core/error.h"
#include "mimic/core/precision.h"
#include "mimic/core/words.h"
#include "mimic/generate/generate.h"
#include "mimic/models/family.h"
#include "mimic/models/model.h"
#include "mimic/models/tokenizer.h"
#include "ranges.h"

namespace mimic::cli {
namespace {

struct GenerateArgs {
  Common common;
  Precision precision = Precision::Fp32;  // --precision: autocast around decoding
  std::string model, prompt, mode = "recurrent";
  int64_t batch = 1;
  generate::GenerateOptions options;
};

void run(GenerateArgs& a) {
  // a cut of the sampled distribution means nothing to greedy decoding (it was ignored without a word)
  MIMIC_USAGE_CHECK(a.options.top_k == 0 || a.options.temperature > 0, "--top-k ", a.options.top_k,
              " cuts the distribution sampling draws from; greedy decoding (--temperature 0, the default) takes the most likely "
              "token: give --temperature T > 0 as well, or leave --top-k out");
  start(a.common);
  AutocastGuard mixed(a.precision, a.common.on);
  auto tok = models::load_tokenizer(a.model);
  auto model = models::load_model(a.model, a.common.on);
  auto& o = a.options;
  // a cut beyond the vocabulary is no cut: said, and the cut the sampler applies is what --json reports
  const int64_t vocab = model->summary().vocab_size;
  note_clamped("--top-k", o.top_k, std::min(o.top_k, vocab), "the model's vocabulary");
  o.top_k = std::min(o.top_k, vocab);
  o.seed = a.common.seed;
  o.mode = generate::parse_mode(a.mode);
  o.eos_ids = models::end_of_text_ids(a.model, *tok, vocab);
  // The prompt as the tokenizer encodes a text, its special tokens included, as HF's generate(**tokenizer(prompt)) reads
  // it: the beginning-of-text token where the tokenizer's post-processor adds one (Mistral's and Llama 2's <s>; left out,
  // the continuation was another model's: the Llama-family probe of 2026-12-01); GPT-2's and Qwen's add none.
  auto prompt = tok->encode(a.prompt, /*add_special_tokens=*/true);
  const auto s = model->summary();
  if (a.prompt.empty() && s.family->causal && s.head == "lm") {  // (any other model: generate_batch names what it is)
    // no --prompt: the model writes a document from its start, after the beginning-of-text token (GPT-2's
    // <|endoftext|> ends one document and begins the next); "--prompt is required" and "leave the empty --prompt out"
    // sent a newcomer in a circle (the probe of 2026-12-01)
    // (where the tokenizer opens a text itself, the empty prompt's encoding holds it already: Mistral's <s>)
    const int64_t start_id = tok->bos_id() >= 0 ? tok->bos_id() : tok->eos_id();
    MIMIC_CHECK(!prompt.empty() || start_id >= 0, a.model, ": its tokenizer has no beginning- or end-of-text token to start a text from: give --prompt TEXT");
    if (prompt.empty()) prompt = {start_id};
  }
  const bool stream = a.batch == 1 && !a.common.json && isatty(STDOUT_FILENO) == 1;
  std::string shown;  // the generated text printed so far
  std::vector<int64_t> ids;
  if (stream) {
    std::fputs(a.prompt.c_str(), stdout);
    std::fflush(stdout);
    o.on_token = [&](int64_t id) {
      if (std::find(o.eos_ids.begin(), o.eos_ids.end(), id) != o.eos_ids.end()) return;
      ids.push_back(id);
      auto text = tok->decode_after(prompt, ids);  // decoded whole: a character split over tokens appears once complete
      if (text.size() > shown.size() && text.compare(0, shown.size(), shown) == 0) {
        std::fputs(text.c_str() + shown.size(), stdout);
        std::fflush(stdout);
        shown = text;
      }
    };
  }
  auto batch = generate::generate_batch(*model, std::vector<std::vector<int64_t>>(static_cast<size_t>(a.batch), prompt), o);
  auto text_of = [&](const generate::GenerateResult& r) {
    auto ids = r.ids;
    if (r.stop == "eos") ids.pop_back();
    return tok->decode_after(prompt, ids);  // after the prompt: a SentencePiece continuation keeps its opening space
  };
  const auto& r = batch.rows[0];
  const auto text = text_of(r);
  // The first new token comes from the prompt's pass: with one new token (--new-tokens 1, an end of text or the context
  // at once) no step decoded, and no speed is measured (it printed 0.0 tok/s, read as slow: helper-54's probe)
  const bool stepped = std::any_of(batch.rows.begin(), batch.rows.end(), [](const generate::GenerateResult& x) { return x.ids.size() > 1; });
  nlohmann::json timing = {{"prefill_seconds", batch.prefill_seconds},
                           {"decode_seconds", batch.decode_seconds},
                           {"prefill_tokens_per_second", batch.prefill_seconds > 0 ? a.batch * batch.prompt_tokens / batch.prefill_seconds : 0.0},
                           {"decode_tokens_per_second", stepped ? nlohmann::json(batch.decode_tokens_per_second()) : nlohmann::json()}};
  if (a.common.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& x : batch.rows) rows.push_back({{"text", text_of(x)}, {"ids", x.ids}, {"stop", x.stop}});
    // The first row's fields at the top, as for batch 1; every row under "rows".
    return print_json({{"prompt", a.prompt},
                       {"prompt_ids", prompt},
                       {"text", text},
                       {"ids", r.ids},
                       {"stop", r.stop},
                       {"batch", a.batch},
                       {"rows", rows},
                       {"mode", a.mode},
                       {"temperature", o.temperature},
                       {"top_k", o.top_k},
                       {"seed", o.seed},
                       // parallel decoding keeps no state (each step reruns the sequence): null, not a 0 read as "free"
                       {"state_bytes", o.mode == generate::Mode::Recurrent ? nlohmann::json(batch.state_bytes) : nlohmann::json()},
                       {"timing", timing}});
  }
  if (stream) {
    if (text.size() > shown.size()) std::fputs(text.c_str() + shown.size(), stdout);
    std::fputs("\n", stdout);
  } else {
    for (size_t b = 0; b < batch.rows.size(); ++b) {
      if (a.batch > 1) std::printf("--- %zu (seed %llu)\n", b, static_cast<unsigned long long>(o.seed + b));
      std::printf("%s%s\n", a.prompt.c_str(), text_of(batch.rows[b]).c_str());
    }
  }
  if (r.stop == "context")
    std::fprintf(stderr, "stopped: reached %s\n", models::context_words(model->summary()).c_str());
  char decode_speed[64] = "no decoding step";
  if (stepped) std::snprintf(decode_speed, sizeof decode_speed, "%.1f tok/s", batch.decode_tokens_per_second());
  std::fprintf(stderr, "%s: batch %lld, prompt %s %.1f tok/s, %zu new %s per row %s (stop: %s)\n", a.mode.c_str(),
               static_cast<long long>(a.batch), count_of(batch.prompt_tokens, "token").c_str(), timing["prefill_tokens_per_second"].get<double>(),
               r.ids.size(), r.ids.size() == 1 ? "token" : "tokens", decode_speed, r.stop.c_str());
}

}  // namespace

void register_generate(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  auto* sub = app.add_subcommand("generate", "Continue a prompt with a causal LM (greedy or sampled; KV cache / recurrent state)");
  sub->add_option("--model", args->model, "Model directory (a causal LM: GPT-2 or the Llama family, softmax or converted, any attention kind)")->required()->transform(model_dir_arg());
  sub->add_option("--prompt", args->prompt, "The text to continue (left out: a text from its start, after the tokenizer's beginning-of-text token)")
      ->transform(range::non_empty_text());
  auto* new_tokens = sub->add_option("--new-tokens", args->options.max_new_tokens, "Tokens to generate at most (fewer at EOS or when the context ends)")
                         ->capture_default_str()
                         ->transform(range::tokens(1));
  retire_spelling(*sub, sub->add_option("--max-new-tokens", args->options.max_new_tokens)->transform(range::tokens(1)), new_tokens);
  sub->add_option("--temperature", args->options.temperature, "0 = greedy; > 0 samples from softmax(logits / T)")
      ->capture_default_str()
      ->transform(range::real(0, 100));
  sub->add_option("--top-k", args->options.top_k, "Sample among the K most likely tokens only (0 = all)")
      ->capture_default_str()
      ->transform(range::integer(0, range::kMaxTokens));
  auto* batch = sub->add_option("--batch-size", args->batch,
                                "Continuations of the prompt decoded together (row i samples with seed + i; greedy rows are identical)")
                    ->capture_default_str()
                    ->transform(range::integer(1, 4096));
  retire_spelling(*sub, sub->add_option("--batch", args->batch)->transform(range::integer(1, 4096)), batch);
  sub->add_option("--mode", args->mode, "recurrent (KV cache / recurrent state) or parallel (recompute every step, the reference)")
      ->capture_default_str()
      ->check(CLI::IsMember({"recurrent", "parallel"}));
  add_precision_option(*sub, args->precision, args->common);
  add_common_options(*sub, args->common, Devices::Any);
  sub->callback([args]() { run(*args); });
}

}  // namespace mimic::cli
