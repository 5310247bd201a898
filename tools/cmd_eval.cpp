// mimic eval — perplexity of a text or a corpus split under a causal LM (strided windows), or
// classification accuracy / F1 / MCC (--task cls).
#include <cstdio>
#include <iostream>

#include "cli.h"
#include "core/error.h"
#include "data/token_cache.h"
#include "eval/perplexity.h"
#include "finetune/classify.h"
#include "models/model.h"
#include "text/tokenizer.h"

namespace mimic::cli {
namespace {

struct EvalArgs {
  Common common;
  std::string task = "lm", model, data, split = "test";
  std::optional<std::string> text, file;
  eval::PerplexityOptions ppl;
  int64_t seq_len = 128, batch_size = 32;
};

void run_lm(const EvalArgs& a) {
  auto tok = text::load_tokenizer(a.model);
  auto model = models::load_model(a.model);
  std::vector<int64_t> ids;
  if (!a.data.empty()) {
    MIMIC_CHECK(!a.text && !a.file, "give --data (a corpus split) or --text/--file, not both");
    auto cache = data::corpus_token_cache(a.data, data::split_from_name(a.split), *tok);
    ids.assign(cache.data(), cache.data() + cache.size());
  } else {
    ids = tok->encode(read_text_input(a.text, a.file), /*add_special_tokens=*/false);
  }
  auto r = eval::perplexity(*model, ids, a.ppl);
  nlohmann::json j = {{"perplexity", r.perplexity}, {"nll", r.nll},         {"tokens", r.tokens},
                      {"predicted", r.predicted},   {"windows", r.windows}, {"seconds", r.seconds},
                      {"tokens_per_second", r.seconds > 0 ? r.predicted / r.seconds : 0.0}};
  if (!a.data.empty()) j["data"] = a.data + ":" + a.split;
  if (a.common.json) return print_json(j);
  std::printf("tokens %lld (predicted %lld, %lld windows)  perplexity %.4f  (%.1f tok/s)\n", static_cast<long long>(r.tokens),
              static_cast<long long>(r.predicted), static_cast<long long>(r.windows), r.perplexity,
              j["tokens_per_second"].get<double>());
}

void run_cls(const EvalArgs& a) {
  MIMIC_CHECK(!a.data.empty(), "--task cls needs --data (spam, sotu-era or a JSON-lines file)");
  auto data = data::load_classification(a.data);
  auto tok = text::load_tokenizer(a.model);
  auto model = models::load_model(a.model);
  auto s = model->summary();
  MIMIC_CHECK(s.head == "cls", a.model, " is not a classifier (head '", s.head, "'): finetune it with mimic finetune --task cls");
  MIMIC_CHECK(s.num_labels == static_cast<int64_t>(data.labels.size()), a.model, " has ", s.num_labels, " labels, ", a.data,
              " has ", data.labels.size());
  const auto& examples = data.split(data::split_from_name(a.split));
  auto r = finetune::evaluate_classifier(*model, *tok, examples, s.num_labels, a.seq_len, a.batch_size);
  nlohmann::json j = {{"data", a.data + ":" + a.split}, {"n", r.metrics.n},   {"accuracy", r.metrics.accuracy},
                      {"f1", r.metrics.f1},             {"mcc", r.metrics.mcc}, {"loss", r.loss},
                      {"confusion", r.metrics.confusion}, {"labels", data.labels}};
  if (a.common.json) return print_json(j);
  std::printf("%s:%s  n=%lld  accuracy %.4f  F1 %.4f  MCC %.4f  loss %.4f\n", a.data.c_str(), a.split.c_str(),
              static_cast<long long>(r.metrics.n), r.metrics.accuracy, r.metrics.f1, r.metrics.mcc, r.loss);
}

}  // namespace

void register_eval(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  auto* sub = app.add_subcommand("eval", "Evaluate a model: LM perplexity (text, file or corpus split) or classification metrics");
  sub->add_option("--model", args->model, "Model directory")->required()->transform(model_dir_arg());
  sub->add_option("--task", args->task, "lm (perplexity) or cls (accuracy, F1, MCC)")->capture_default_str()->check(CLI::IsMember({"lm", "cls"}));
  sub->add_option("--file", args->file, "Text file to score (lm)");
  sub->add_option("--text", args->text, "Text to score (lm)");
  sub->add_option("--data", args->data, "lm: corpus all|sotu|moby-dick; cls: spam|sotu-era|FILE.jsonl");
  sub->add_option("--split", args->split, "Split of --data: train, validation or test")->capture_default_str();
  sub->add_option("--window", args->ppl.window, "lm: tokens per window (default: the model's context)");
  sub->add_option("--stride", args->ppl.stride, "lm: new tokens scored per window (default: window/2)");
  sub->add_option("--seq-len", args->seq_len, "cls: tokens per example")->capture_default_str();
  sub->add_option("--batch-size", args->batch_size, "cls: examples per batch")->capture_default_str();
  add_common_options(*sub, args->common);
  sub->callback([args]() {
    start(args->common);
    args->task == "cls" ? run_cls(*args) : run_lm(*args);
  });
}

}  // namespace mimic::cli
