// mimic finetune --task lm|cls --model DIR --data ... --out DIR — finetune a GPT-2 (causal LM) or a BERT
// classifier, plain or converted: every parameter, the attention blocks, the feature maps, or LoRA.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "cli.h"
#include "mimic/data/corpus.h"
#include "mimic/core/error.h"
#include "mimic/eval/metrics.h"
#include "mimic/core/words.h"
#include "mimic/data/recall_tasks.h"
#include "mimic/finetune/classify.h"
#include "mimic/finetune/lm.h"
#include "mimic/models/config.h"
#include "mimic/models/family.h"
#include "mimic/train/trainer.h"
#include "ranges.h"

namespace mimic::cli {
namespace {

struct FinetuneArgs {
  Common common;
  const CLI::Option* warmup_option = nullptr;
  std::string task;
  std::string preset;  // empty: the model family's (models::Family::finetune_preset)
  std::string train_set;
  std::string data;
  finetune::FinetuneOptions f;
  std::optional<double> lr, weight_decay, min_lr_ratio;
  std::optional<int64_t> batch_size, seq_len;
  int64_t eval_batches = 10;
  bool test = false;
  bool resume = false;
  double kd = 0, kd_lm_weight = 0;
  data::CopyCurriculum copy;
  std::string dtype = "f32";
  bool copy_given = false;  // --copy-fraction on the command line (the kd preset's copy share applies otherwise)
  std::string copy_shape_given;  // copy_shape_option_given
  bool eval_batches_given = false;
};

nlohmann::json metrics_json(const eval::ClassificationMetrics& m) {
  return {{"n", m.n}, {"accuracy", m.accuracy}, {"f1", m.f1}, {"mcc", m.mcc}, {"confusion", m.confusion}};
}

nlohmann::json scores_json(const finetune::ClassifyScores& s) {
  // null where the data has no test rows: its zeros read as an accuracy of 0 (helper-52's probe of 2026-12-04)
  return {{"validation", metrics_json(s.validation)}, {"test", s.test.n > 0 ? metrics_json(s.test) : nlohmann::json()}};
}

nlohmann::json scores_json(const finetune::LmScores& s) {
  nlohmann::json j = {{"validation", {{"loss", s.validation_loss}, {"perplexity", s.validation_perplexity}}}};
  if (s.test) j["test"] = {{"perplexity", s.test->perplexity}, {"nll", s.test->nll}, {"predicted", s.test->predicted}};
  return j;
}

// "student    teacher" columns; the teacher's column only when there is one. The labels' column is `width` wide: 30,
// or a long class name's ("validation F1 (of 'not_entailment')" ran past 30: the review of session 56).
void print_row(int width, const std::string& label, double student, const std::optional<double>& teacher, const char* fmt = "%12.4f") {
  std::printf("  %-*s", width, label.c_str());
  std::printf(fmt, student);
  if (teacher) std::printf(fmt, *teacher);
  std::printf("\n");
}

void print_header(int width, bool teacher) { std::printf("  %-*s%12s%s\n", width, "", "student", teacher ? "     teacher" : ""); }

// "gpt2 for GPT-2, Llama, Mistral, Qwen2, Qwen3; bert for BERT": each preset with the families it is the default of
// (the help named GPT-2's and BERT's alone, so a Llama's default was left to guess)
std::string presets_by_family() {
  std::vector<std::pair<std::string, std::string>> by;  // preset → display names, in the registry's order
  for (const auto* f : models::families()) {
    auto it = std::find_if(by.begin(), by.end(), [&](const auto& p) { return p.first == f->finetune_preset; });
    if (it == by.end()) by.emplace_back(f->finetune_preset, f->display_name);
    else it->second += ", " + f->display_name;
  }
  std::string s;
  for (const auto& [preset, names] : by) s += (s.empty() ? "" : "; ") + preset + " for " + names;
  return s;
}

// The preset of the model's family; when config.json cannot be read, any preset: the stage reports the model's
// problem in its own words.
std::string family_preset(const std::string& model_dir) {
  try {
    return models::load_config(model_dir + "/config.json").family->finetune_preset;
  } catch (const Error&) {
    return models::families().front()->finetune_preset;
  }
}

void run(FinetuneArgs& a) {
  // what depends on the command line only is refused before any model is loaded (the probe of 2026-11-27: after), and
  // before --out is looked at (a folder holding another command's run was named instead, exit 1: the sixteenth probe)
  MIMIC_USAGE_CHECK(a.f.lora.rank > 0 || a.f.lora.alpha == 0, "--lora-alpha needs --lora R");
  MIMIC_USAGE_CHECK(a.f.lora.rank == 0 || !a.f.freeze_kept_heads, finetune::kFreezeKeptHeadsWithLora);
  if (!a.train_set.empty()) a.f.train_set = finetune::train_set_from_name(a.train_set);
  if (const auto refusal = finetune::freeze_embeddings_refusal(a.f); !refusal.empty()) MIMIC_USAGE_CHECK(false, refusal);
  MIMIC_USAGE_CHECK(a.kd == 0 || !a.f.teacher_dir.empty(), "--kd distils the teacher's logits: give the teacher with --teacher");
  MIMIC_USAGE_CHECK(a.kd > 0 || a.kd_lm_weight == 0, "--kd-lm-weight mixes the LM loss into logit distillation: it needs --kd T");
  const std::string warmup_note = fit_warmup(a.warmup_option, a.f.train.warmup, a.f.train.steps);
  start(a.common);
  // said as the training begins (the trainer's start notes), not after its end (helper-68's probe)
  if (!warmup_note.empty()) a.f.train.start_notes.push_back(warmup_note);
  a.f.train.note = print_note;
  refuse_out_over_inputs(a.f.train.out_dir, {{"--model", a.f.model_dir}, {"--teacher", a.f.teacher_dir}, {"--data", a.data}});
  // the folder locked before it is checked and held to the end, as convert, export and report do: checked first and
  // locked once the model had loaded (~1 s later), an export, a report or another run finishing in between was
  // replaced or mixed with, both exiting 0 (the eleventh probe of 2026-11-30)
  const auto lock = train::lock_run_output(a.f.train.out_dir);
  refuse_foreign_output(a.f.train.out_dir, OutputKind::TrainingRun, "finetune");
  a.f.train.command = "finetune";
  auto& f = a.f;
  f.seed = a.common.seed;
  f.device = a.common.on;
  f.note = print_note;
  // --kd is a conversion's second stage: its preset (lr 3e-4, copy blocks) unless another is named.
  const std::string preset_name = !a.preset.empty() ? a.preset : a.kd > 0 ? "kd" : family_preset(f.model_dir);
  auto p = finetune::preset(preset_name);
  double copy_fraction = 0;
  f.train.lr = a.lr.value_or(p.lr);
  f.train.adam.weight_decay = a.weight_decay.value_or(p.weight_decay);
  f.train.min_lr_ratio = a.min_lr_ratio.value_or(p.min_lr_ratio);
  f.export_dtype = storage_dtype_arg(a.dtype);
  if (a.resume && train::writes_outputs())  // rank 0 reads the checkpoint (other machines may have none)
    MIMIC_CHECK(std::filesystem::exists(f.train.out_dir + "/checkpoint.safetensors"), "--resume: no checkpoint in ", f.train.out_dir);
  // rank 0 alone acts on these: another rank's were dropped without a word (the fourth probe of 2026-11-27)
  f.train.rank_settings.update({{"resume", a.resume}, {"json", a.common.json}});

  train::TrainResult tr;
  std::string trainable;  // what trained, as the run described it
  int64_t trainable_parameters = 0;
  nlohmann::json student, teacher;
  std::vector<std::string> labels;  // cls: the data's, in id order
  if (a.task == "lm") {
    finetune::LmOptions o;
    static_cast<finetune::FinetuneOptions&>(o) = f;
    o.corpus = a.data;
    o.seq_len = usage_checked([&] { return data::lm_seq_len(a.data, a.seq_len.has_value(), a.seq_len.value_or(0)); });
    o.batch_size = a.batch_size.value_or(8);
    o.eval_batches = a.eval_batches;
    o.test = a.test;
    o.kd_temperature = a.kd;
    o.kd_lm_weight = a.kd_lm_weight;
    o.copy = a.copy;
    // The preset's copy blocks need a prose corpus; a recall task (mqar:, ar:) has its own sequences.
    if (!a.copy_given && p.copy_fraction > 0 && !data::is_recall_task(a.data)) o.copy.fraction = p.copy_fraction;
    copy_fraction = o.copy.fraction;
    refuse_copy_shape_without_copies(a.copy_shape_given, o.copy);
    // before the model loads (the data source says the same, after it: the fourth probe of 2026-11-27)
    MIMIC_USAGE_CHECK(o.copy.fraction == 0 || !data::is_recall_task(a.data), "the copy curriculum applies to prose corpora, not to ", a.data,
                      ": leave --copy-fraction out");
    auto r = finetune::finetune_lm(o);
    tr = r.train;
    trainable = r.trainable;
    trainable_parameters = r.trainable_parameters;
    student = scores_json(r.student);
    if (r.teacher) teacher = scores_json(*r.teacher);
  } else {
    MIMIC_USAGE_CHECK(!a.test, "--test is for --task lm (cls always scores the test split when the data has one)");
    MIMIC_USAGE_CHECK(a.kd == 0 && a.kd_lm_weight == 0, "--kd and --kd-lm-weight are for --task lm, not cls");
    MIMIC_USAGE_CHECK(a.copy.fraction == 0 && a.copy_shape_given.empty(), "the copy curriculum (--copy-*) is for --task lm, not cls");
    MIMIC_USAGE_CHECK(!a.eval_batches_given, "--eval-batches is for --task lm (cls scores the whole validation split)");
    // before any model loads, as the other refusals here (the probe of 2026-11-27: after)
    MIMIC_USAGE_CHECK(!a.seq_len || *a.seq_len >= 3, "--seq-len must be at least 3 for classification ([CLS] token [SEP]), got ", *a.seq_len);
    finetune::ClassifyOptions o;
    static_cast<finetune::FinetuneOptions&>(o) = f;
    o.data = a.data;
    o.seq_len = a.seq_len.value_or(0);  // 0: min(128, the model's context)
    o.batch_size = a.batch_size.value_or(16);
    auto r = finetune::finetune_classifier(o);
    tr = r.train;
    trainable = r.trainable;
    trainable_parameters = r.trainable_parameters;
    student = scores_json(r.student);
    if (r.teacher) teacher = scores_json(*r.teacher);
    labels = r.labels;
  }

  if (!train::writes_outputs()) return;  // rank 0 prints the run's result
  nlohmann::json j = {{"out", f.train.out_dir},
                      {"task", a.task},
                      {"trainable", trainable},
                      {"trainable_parameters", trainable_parameters},
                      {"preset", preset_name},
                      {"copy_fraction", copy_fraction},
                      {"lr", f.train.lr},
                      {"weight_decay", f.train.adam.weight_decay},
                      {"min_lr_ratio", f.train.min_lr_ratio},
                      {"steps", tr.steps},
                      {"resumed_from", tr.resumed_from},
                      {"best_step", tr.best_step},
                      {"last", f.train.keep_last ? nlohmann::json(f.train.out_dir + "/last") : nlohmann::json()},
                      {"best_validation_loss", std::isfinite(tr.best_eval) ? nlohmann::json(tr.best_eval) : nlohmann::json()},
                      {"finished_earlier", tr.finished_earlier},
                      {"last_loss", tr.finished_earlier ? nlohmann::json() : nlohmann::json(tr.last_loss)},
                      {"seconds", tr.seconds},
                      {"tokens_per_second", tr.finished_earlier ? nlohmann::json() : nlohmann::json(tr.tokens_per_second)}};
  j.update(student);
  if (!teacher.is_null()) j["teacher"] = teacher;
  // the confusion matrices' order and the class F1 is of, as eval --json gives them (docs/finetune.md said `labels`
  // was here; it was not: helper-92's probe)
  if (a.task == "cls") j["labels"] = labels, j["f1_of"] = eval::f1_of(labels);
  if (a.common.json) return print_json(j);

  // a rerun of a finished run trains nothing: it says so instead of a speed of 0
  if (tr.finished_earlier)
    std::printf("the run in %s finished earlier (%lld steps): nothing to train (--fresh trains again)\n", f.train.out_dir.c_str(),
                static_cast<long long>(tr.steps));
  else
    std::printf("finetuned %lld steps%s in %.0f s, %.0f tok/s; trainable: %s (%lld parameters); preset %s (lr %g%s); best validation "
                "loss %.4f at step %lld\n",
                static_cast<long long>(tr.steps), resumed_note(tr.resumed_from).c_str(), tr.seconds, tr.tokens_per_second,
                trainable.c_str(), static_cast<long long>(trainable_parameters), preset_name.c_str(), f.train.lr,
                copy_fraction > 0 ? (", copy blocks " + std::to_string(static_cast<int>(std::lround(copy_fraction * 100))) + "%").c_str() : "",
                tr.best_eval, static_cast<long long>(tr.best_step));
  const bool t = !teacher.is_null();
  auto teacher_at = [&](const nlohmann::json::json_pointer& ptr) -> std::optional<double> {
    if (!t || !teacher.contains(ptr)) return std::nullopt;
    return teacher.at(ptr).get<double>();
  };
  const std::string f1 = eval::f1_name(labels);  // cls: F1 says which class it is of, as eval prints it
  const int width = std::max<int>(30, static_cast<int>(std::string("validation ").size() + f1.size()));
  print_header(width, t);
  using ptr = nlohmann::json::json_pointer;
  if (a.task == "lm") {
    print_row(width, "validation perplexity", student["validation"]["perplexity"], teacher_at(ptr("/validation/perplexity")), "%12.2f");
    if (student.contains("test"))
      print_row(width, "test perplexity", student["test"]["perplexity"], teacher_at(ptr("/test/perplexity")), "%12.2f");
    // an eval of the model on the validation split scored another perplexity, and read as a faulty export (helper-55's
    // probe of 2026-12-04): the two numbers say what they score
    std::printf("(validation: the run's %s (--eval-batches), its selection score; mimic eval --split validation "
                "scores the whole split%s)\n",
                count_of(tr.validation_batches > 0 ? tr.validation_batches : a.eval_batches, "fixed batch", "fixed batches").c_str(),
                student.contains("test") ? "; test: the whole test split, as eval scores it" : "");
  } else {
    for (const char* split : {"validation", "test"}) {
      if (student[split].is_null()) continue;  // no test rows
      for (const char* m : {"accuracy", "f1", "mcc"}) {
        std::string label = std::string(split) + " " + (std::string(m) == "f1" ? f1 : std::string(m) == "mcc" ? "MCC" : m);
        print_row(width, label, student[split][m], teacher_at(ptr(std::string("/") + split + "/" + m)));
      }
    }
  }
  const std::string last = !f.train.keep_last ? "" : tr.best_step == tr.steps ? ", also as " + f.train.out_dir + "/last (a link: the last step was the best)"
                                                                           : ", the last step's in " + f.train.out_dir + "/last";
  std::printf("model written to %s (best by validation loss, step %lld)%s\n", f.train.out_dir.c_str(), static_cast<long long>(tr.best_step), last.c_str());
}

}  // namespace

void register_finetune(CLI::App& app) {
  auto a = std::make_shared<FinetuneArgs>();
  auto& t = a->f.train;
  t.steps = 500;
  t.warmup = 50;
  t.eval_every = 100;
  auto* sub = app.add_subcommand("finetune", "Finetune a model, plain or converted: a causal LM (lm: GPT-2, the Llama family) or BERT sequence classification (cls)");
  sub->add_option("--task", a->task, "lm (a causal LM: GPT-2 or the Llama family; next-token prediction) or cls (BERT sequence classification)")
      ->required()->check(CLI::IsMember({"lm", "cls"}));
  sub->add_option("--model", a->f.model_dir, "Model directory or embedded model (plain or converted)")->required()->transform(model_dir_arg());
  sub->add_option("--data", a->data, "lm: " + data::lm_corpus_choices() + ", your own text (a UTF-8 file or a folder of .txt files, split 90/5/5 by position: docs/data.md) or a recall task mqar[:...] / ar[:...]; cls: spam, sotu-era, or a JSON-lines file of {text, label[, split]}")->required()->check(data_arg());
  sub->add_option("--out", t.out_dir, "Output directory: the best model, the checkpoint (its state alone once the run is done) and the log")->required()->check(out_dir_arg());
  sub->add_option("--preset", a->preset, "Hyper-parameters: gpt2 (Hedgehog: lr 6e-4, weight decay 0.01), bert (Hedgehog: lr 1e-5, "
                                         "weight decay 0, cosine to 0) or kd (a conversion's second stage: lr 3e-4, weight decay 0.01, "
                                         "--copy-fraction 0.5); default: kd with --kd, else the model family's (" + presets_by_family() + "); flags override")
      ->check(CLI::IsMember({"gpt2", "bert", "kd"}));
  sub->add_option("--train", a->train_set, "What trains: all, attention (q, k, v, o projections + kernels) or feature-maps (kernels only); "
                                           "default all, or feature-maps with --lora")
      ->check(CLI::IsMember({"all", "attention", "feature-maps"}));
  sub->add_option("--lora", a->f.lora.rank, "LoRA rank on the q, k, v, o projections (0: off); merged into the weights on export")
      ->transform(range::integer(0, 4096));
  sub->add_option("--lora-alpha", a->f.lora.alpha, "LoRA alpha (scale alpha/rank; 0, the default: the rank, scale 1)")->transform(range::real(0, 65536));
  sub->add_option("--teacher", a->f.teacher_dir, "Evaluate this model on the same data at the end, side by side (and distill it with --kd)")
      ->transform(model_dir_arg());
  sub->add_option("--kd", a->kd,
                  "lm: train on the teacher's logits, T²·KL(teacher ‖ student) at temperature T (in [0.01, 100]; 0: off; needs --teacher)")
      ->capture_default_str()
      ->transform(range::kd_temperature(/*zero_is_off=*/true));
  sub->add_option("--kd-lm-weight", a->kd_lm_weight, "lm, with --kd: weight w in [0, 1] of the LM loss, mixed as w·LM + (1 − w)·KD")
      ->capture_default_str()
      ->transform(range::fraction());
  // --help showed "=0", where the kd preset (--kd's default) trains with half the blocks copied (helper-60)
  char kd_copy[32];
  std::snprintf(kd_copy, sizeof kd_copy, "%g", finetune::preset("kd").copy_fraction);
  add_copy_options(*sub, a->copy, std::string("0, or the preset's (kd: ") + kd_copy + ") on a prose corpus");
  sub->add_option("--steps", t.steps, "Optimizer steps")->capture_default_str()->transform(range::steps());
  sub->add_option("--lr", a->lr, "Peak learning rate (default: the preset's)")->transform(range::learning_rate());
  sub->add_option("--weight-decay", a->weight_decay, "AdamW weight decay, not on biases and norms (default: the preset's)")->transform(range::weight_decay());
  sub->add_option("--min-lr-ratio", a->min_lr_ratio, "Cosine decay floor as a fraction of --lr (default: the preset's)")->transform(range::fraction());
  a->warmup_option = sub->add_option("--warmup", t.warmup, "Warm-up steps (at most --steps; the default is cut to a tenth of a shorter run)")
                         ->capture_default_str()
                         ->transform(range::steps_or_zero());
  sub->add_option("--batch-size", a->batch_size, "Sequences (lm, default 8) or examples (cls, default 16) per micro-batch")->transform(range::batch());
  sub->add_option("--grad-accum", t.grad_accum, "Micro-batches per step")->capture_default_str()->transform(range::batch());
  add_allreduce_options(*sub, t.overlap_allreduce, t.bucket_mb);
  add_precision_option(*sub, t.precision, a->common);
  sub->add_option("--seq-len", a->seq_len, "Tokens per sequence (lm, default min(256, the model's context); a recall task's: its seq_len) or example, [CLS] and [SEP] included (cls, default min(128, the context); at least 3)")
      ->transform(range::tokens(2));
  sub->add_option("--eval-every", t.eval_every, "Evaluate on the validation split every N steps (0: only at the end)")
      ->capture_default_str()
      ->transform(range::steps_or_zero());
  sub->add_option("--eval-batches", a->eval_batches, "lm: validation batches per evaluation")->capture_default_str()->transform(range::count(1));
  sub->add_option("--checkpoint-every", t.checkpoint_every, "Checkpoint every N steps")->capture_default_str()->transform(range::steps());
  sub->add_flag("--test", a->test, "lm: also score the test split at the end (strided windows, as mimic eval)");
  sub->add_flag("--freeze-embeddings", a->f.freeze_embeddings,
                "Keep the embeddings (word, position, token type, their LayerNorm) as loaded: not trained, bit-identical to the base model's");
  sub->add_flag("--freeze-kept-heads", a->f.freeze_kept_heads,
                "A converted model's heads that kept softmax stay as loaded: their q, k, v and output-projection blocks do not train "
                "(under grouped-query attention a kept head's k and v rows are its KV group's: the group's converted heads read them frozen too)");
  sub->add_option("--dtype", a->dtype, "Storage of the exported weights: f32, f16, bf16, or keep (each tensor as loaded)")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "keep"}))->capture_default_str();
  // the exclusion declared, so that --help shows it as pretrain's does (helper-81's probe: only pretrain's said it)
  auto* resume = sub->add_flag("--resume", a->resume, "Require an existing checkpoint to resume (a rerun resumes by itself when one exists)");
  sub->add_flag("--fresh", t.fresh, "Ignore an existing checkpoint and start over")->excludes(resume);
  sub->add_flag("--keep-last", t.keep_last,
                "Also keep the last step's model in OUT/last (a link to OUT when the last step was the best) and the whole final checkpoint");
  add_common_options(*sub, a->common, Devices::Any);
  a->common.ranks = true;  // data-parallel (docs/distributed.md)
  sub->callback([a, sub]() {
    a->copy_given = sub->get_option("--copy-fraction")->count() > 0;
    a->copy_shape_given = copy_shape_option_given(*sub);
    a->eval_batches_given = sub->get_option("--eval-batches")->count() > 0;
    run(*a);
  });
}

}  // namespace mimic::cli
