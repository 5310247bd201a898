// mimic eval --model DIR --file F — perplexity of a text under a causal LM (strided windows).
#include <cstdio>
#include <iostream>

#include "cli.h"
#include "eval/perplexity.h"
#include "models/model.h"
#include "text/tokenizer.h"

namespace mimic::cli {
namespace {

struct EvalArgs {
  Common common;
  std::string model;
  std::optional<std::string> text, file;
  eval::PerplexityOptions ppl;
};

void run(const EvalArgs& a) {
  start(a.common);
  auto input = read_text_input(a.text, a.file);
  auto tok = text::load_tokenizer(a.model);
  auto model = models::load_model(a.model);
  auto ids = tok->encode(input, /*add_special_tokens=*/false);
  auto r = eval::perplexity(*model, ids, a.ppl);
  nlohmann::json j = {{"perplexity", r.perplexity}, {"nll", r.nll},         {"tokens", r.tokens},
                      {"predicted", r.predicted},   {"windows", r.windows}, {"seconds", r.seconds},
                      {"tokens_per_second", r.seconds > 0 ? r.predicted / r.seconds : 0.0}};
  if (a.common.json) return print_json(j);
  std::printf("tokens %lld (predicted %lld, %lld windows)  perplexity %.4f  (%.1f tok/s)\n", static_cast<long long>(r.tokens),
              static_cast<long long>(r.predicted), static_cast<long long>(r.windows), r.perplexity,
              j["tokens_per_second"].get<double>());
}

}  // namespace

void register_eval(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  auto* sub = app.add_subcommand("eval", "Evaluate a model: perplexity of a text under a causal LM");
  sub->add_option("--model", args->model, "Model directory")->required()->check(CLI::ExistingDirectory);
  sub->add_option("--file", args->file, "Text file to score");
  sub->add_option("--text", args->text, "Text to score");
  sub->add_option("--window", args->ppl.window, "Tokens per window (default: the model's context)");
  sub->add_option("--stride", args->ppl.stride, "New tokens scored per window (default: window/2)");
  add_common_options(*sub, args->common);
  sub->callback([args]() { run(*args); });
}

}  // namespace mimic::cli
