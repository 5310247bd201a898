// mimic finetune --task cls --model DIR --data spam|sotu-era|FILE --out DIR — finetune a BERT classifier.
#include <cstdio>

#include "cli.h"
#include "finetune/classify.h"

namespace mimic::cli {
namespace {

struct FinetuneArgs {
  Common common;
  std::string task = "cls";
  finetune::ClassifyOptions o;
};

nlohmann::json metrics_json(const eval::ClassificationMetrics& m) {
  return {{"n", m.n}, {"accuracy", m.accuracy}, {"f1", m.f1}, {"mcc", m.mcc}, {"confusion", m.confusion}};
}

void run(FinetuneArgs& a) {
  start(a.common);
  a.o.seed = a.common.seed;
  auto r = finetune::finetune_classifier(a.o);
  nlohmann::json j = {{"out", a.o.train.out_dir},         {"steps", r.train.steps},
                      {"resumed_from", r.train.resumed_from}, {"best_step", r.train.best_step},
                      {"best_validation_loss", r.train.best_eval}, {"seconds", r.train.seconds},
                      {"validation", metrics_json(r.validation)}, {"test", metrics_json(r.test)}};
  if (a.common.json) return print_json(j);
  std::printf("finetuned %lld steps in %.0f s; best validation loss %.4f at step %lld\n", static_cast<long long>(r.train.steps),
              r.train.seconds, r.train.best_eval, static_cast<long long>(r.train.best_step));
  for (auto [name, m] : {std::pair{"validation", r.validation}, std::pair{"test", r.test}})
    std::printf("%-10s n=%lld  accuracy %.4f  F1 %.4f  MCC %.4f\n", name, static_cast<long long>(m.n), m.accuracy, m.f1, m.mcc);
}

}  // namespace

void register_finetune(CLI::App& app) {
  auto a = std::make_shared<FinetuneArgs>();
  a->o.train.steps = 500;
  a->o.train.warmup = 50;
  a->o.train.lr = 1e-4;
  a->o.train.eval_every = 100;
  a->o.train.adam.weight_decay = 0.01;
  auto* sub = app.add_subcommand("finetune", "Finetune a model on a task (cls: BERT sequence classification)");
  sub->add_option("--task", a->task, "Task: cls")->capture_default_str()->check(CLI::IsMember({"cls"}));
  sub->add_option("--model", a->o.model_dir, "Model directory (a BERT, e.g. MLM-pretrained)")->required()->transform(model_dir_arg());
  sub->add_option("--data", a->o.data, "spam, sotu-era, or a JSON-lines file of {text, label[, split]}")->required();
  sub->add_option("--out", a->o.train.out_dir, "Output directory")->required();
  sub->add_option("--steps", a->o.train.steps, "Optimizer steps")->capture_default_str();
  sub->add_option("--lr", a->o.train.lr, "Peak learning rate")->capture_default_str();
  sub->add_option("--warmup", a->o.train.warmup, "Warm-up steps")->capture_default_str();
  sub->add_option("--batch-size", a->o.batch_size, "Examples per micro-batch")->capture_default_str();
  sub->add_option("--grad-accum", a->o.train.grad_accum, "Micro-batches per step")->capture_default_str();
  sub->add_option("--seq-len", a->o.seq_len, "Tokens per example ([CLS] and [SEP] included)")->capture_default_str();
  sub->add_option("--eval-every", a->o.train.eval_every, "Evaluate on the validation split every N steps")->capture_default_str();
  sub->add_option("--checkpoint-every", a->o.train.checkpoint_every, "Checkpoint every N steps")->capture_default_str();
  sub->add_flag("--freeze-embeddings", a->o.freeze_embeddings,
                "Keep the embeddings (word, position, token type, their LayerNorm) as loaded: not trained, bit-identical to the base model's");
  sub->add_flag("--fresh", a->o.train.fresh, "Ignore an existing checkpoint and start over");
  add_common_options(*sub, a->common);
  sub->callback([a]() { run(*a); });
}

}  // namespace mimic::cli
