// mimic pretrain --arch gpt2|bert|llama|mistral|qwen2|qwen3 --config C.json --data CORPUS --out DIR — train mimic's own small models.
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli.h"
#include "mimic/core/error.h"
#include "mimic/core/json_keys.h"
#include "mimic/io/atomic_file.h"
#include "mimic/io/safetensors.h"
#include "mimic/models/family.h"
#include "mimic/data/corpus.h"
#include "mimic/data/recall_tasks.h"
#include "mimic/pretrain/pretrain.h"
#include "mimic/train/trainer.h"
#include "ranges.h"

namespace mimic::cli {
namespace {

struct PretrainArgs {
  Common common;
  const CLI::Option* warmup_option = nullptr;
  const CLI::Option* seq_len_option = nullptr;
  std::string config_path;
  pretrain::PretrainOptions o;
  bool resume = false;
};

void run(PretrainArgs& a) {
  // what the command line alone decides, before --out is looked at (a folder holding another command's run was named
  // instead, exit 1: the sixteenth probe)
  MIMIC_USAGE_CHECK(a.o.train.end_at <= a.o.train.steps, "--end-at: must be in [0, --steps = ", a.o.train.steps,
                    "] (a step of the --steps schedule; 0: its end), got ", a.o.train.end_at);
  MIMIC_USAGE_CHECK(a.config_path.empty() != a.o.init.empty(), "give --config (a fresh model) or --init (continue a model), one of them");
  // not given: 0, the model's context up to 256 (pretrain decides it once the config is read), or the task's
  const bool seq_len_given = a.seq_len_option->count() > 0;
  a.o.seq_len = usage_checked([&] { return data::lm_seq_len(a.o.corpus, seq_len_given, seq_len_given ? a.o.seq_len : 0); });
  // what the options and --arch alone decide are usage errors too (helper-56's probe: some exited 1, from the library)
  usage_checked([&] { pretrain::check_options(a.o); });
  const std::string warmup_note = fit_warmup(a.warmup_option, a.o.train.warmup, a.o.train.steps);
  start(a.common);
  // said as the training begins (the trainer's start notes), not after its end (helper-68's probe)
  if (!warmup_note.empty()) a.o.train.start_notes.push_back(warmup_note);
  a.o.train.note = print_note;
  refuse_out_over_inputs(a.o.train.out_dir, {{"--config", a.config_path}, {"--init", a.o.init}, {"--data", a.o.corpus}});
  // the folder locked before it is checked and held to the end, as convert, export and report do: checked first and
  // locked once the model had loaded (~1 s later), an export, a report or another run finishing in between was
  // replaced or mixed with, both exiting 0 (the eleventh probe of 2026-11-30)
  const auto lock = train::lock_run_output(a.o.train.out_dir);
  refuse_foreign_output(a.o.train.out_dir, OutputKind::TrainingRun, "pretrain");
  a.o.train.command = "pretrain";
  if (a.o.train.snapshot_every > a.o.train.steps)  // wrote no snapshot without a word (the thirteenth probe)
    std::fprintf(stderr, "mimic: note: --snapshot-every %lld is more than --steps (%lld): no snapshot is written\n",
                 static_cast<long long>(a.o.train.snapshot_every), static_cast<long long>(a.o.train.steps));
  if (!a.config_path.empty()) {
    // a model's weights or a record given here read as "malformed JSON" (the fifteenth probe of 2026-11-30)
    if (const auto kind = io::file_kind(a.config_path))
      fail("--config ", a.config_path, " is ", *kind == io::kHdf5File ? "an HDF5 file (a record?)" : "a safetensors file (weights?)",
           ", not a config.json: give the model's config.json (its sizes, HF keys)");
    a.o.config = json_parse(io::read_text_file(a.config_path), a.config_path);
    a.o.config_source = "--config " + a.config_path;
  }
  a.o.seed = a.common.seed;
  a.o.device = a.common.on;
  // rank 0 alone acts on these: another rank's were dropped without a word (the fourth probe of 2026-11-27)
  a.o.train.rank_settings.update({{"resume", a.resume}, {"json", a.common.json}});
  if (a.resume && train::writes_outputs())  // rank 0 reads the checkpoint (other machines may have none)
    MIMIC_CHECK(std::filesystem::exists(a.o.train.out_dir + "/checkpoint.safetensors"), "--resume: no checkpoint in ",
                a.o.train.out_dir);
  auto r = pretrain::pretrain(a.o);
  if (!train::writes_outputs()) return;  // rank 0 prints the run's result
  const auto number = [&](double v) { return r.finished_earlier ? nlohmann::json() : nlohmann::json(v); };
  nlohmann::json j = {{"out", a.o.train.out_dir},        {"steps", r.steps},
                      {"resumed_from", r.resumed_from},  {"finished_earlier", r.finished_earlier},
                      {"last_loss", number(r.last_loss)}, {"best_eval_loss", r.best_eval},
                      {"best_step", r.best_step},        {"seconds", r.seconds},
                      {"tokens_per_second", number(r.tokens_per_second)}};
  if (a.common.json) return print_json(j);
  // a rerun of a finished run trains nothing: it says so instead of a last loss and speed of 0
  if (r.finished_earlier)
    std::printf("the run in %s finished earlier (%lld steps): nothing to train (--fresh trains again); best validation loss %.4f at step %lld\n",
                a.o.train.out_dir.c_str(), static_cast<long long>(r.steps), r.best_eval, static_cast<long long>(r.best_step));
  else
    std::printf("trained %lld steps%s: last loss %.4f, best validation loss %.4f at step %lld, %.0f tok/s, %.0f s\n",
                static_cast<long long>(r.steps), resumed_note(r.resumed_from).c_str(), r.last_loss, r.best_eval,
                static_cast<long long>(r.best_step), r.tokens_per_second, r.seconds);
  std::cout << "model written to " << a.o.train.out_dir << " (best), " << a.o.train.out_dir << "/last (last)\n";
}

}  // namespace

void register_pretrain(CLI::App& app) {
  auto a = std::make_shared<PretrainArgs>();
  a->o.train.steps = 2000;
  a->o.train.warmup = 100;
  a->o.train.lr = 1e-3;
  a->o.train.adam.weight_decay = pretrain::kPretrainWeightDecay;
  a->o.train.adam.beta2 = 0.95;
  auto* sub = app.add_subcommand("pretrain", "Pretrain a small GPT-2 or Llama-family causal LM or a BERT (masked LM) on the public-domain "
                                              "corpora or your own text, or a causal LM on a recall task");
  std::vector<std::string> types;  // the registry's model types (models/families.def)
  for (const models::Family* f : models::families()) types.push_back(f->model_type);
  sub->add_option("--arch", a->o.arch, "The model family: " + models::family_names() +
                                           " (on prose each trains with the tokenizer set-up fetches for it: GPT-2's, BERT's, Mistral's for "
                                           "llama and mistral, Qwen's for qwen2 and qwen3)")
      ->required()
      ->check(CLI::IsMember(types));
  sub->add_option("--config", a->config_path, "config.json with the sizes (HF keys) of a fresh model")->check(input_file_arg("the model's config.json"));
  sub->add_option("--init", a->o.init, "Continue from this model's weights instead of a fresh model (no --config)")
      ->transform(model_dir_arg());
  add_copy_options(*sub, a->o.copy);
  sub->add_option("--position-init", a->o.position_init,
                  "A fresh model's position table: normal (random) or sinusoidal (sin/cos, still learned; docs/data.md)")
      ->capture_default_str()
      ->check(CLI::IsMember({"normal", "sinusoidal"}));
  sub->add_option("--position-scale", a->o.position_scale,
                  "With --position-init sinusoidal: the RMS of the table's entries (0.02 = the token embeddings' init)")
      ->capture_default_str()
      ->transform(range::real(0, 10, /*open_low=*/true));
  sub->add_option("--data", a->o.corpus,
                  "Corpus (" + data::lm_corpus_choices() + "), your own text (a UTF-8 file or a folder of .txt files, split 90/5/5 by position: docs/data.md) or a recall task: mqar[:vocab=V,seq_len=T,pairs=P,power_a=A] or ar[:vocab=V,seq_len=T] "
                  "(docs/recall.md)")
      ->capture_default_str()
      ->check([](const std::string& v) -> std::string {
        if (data::is_lm_corpus(v) || data::is_recall_task(v) || data::is_text_data(v)) return "";
        return "--data must be " + data::lm_corpus_choices() + ", a text file or folder, mqar[:...] or ar[:...], got '" + v +
               "' (no such file or folder)";
      });
  sub->add_option("--attention", a->o.attention,
                  "Attention of every layer of a fresh model: softmax, linear:<map>, sla:<map> (a feature map of the registry), or an attention kind with its options (delta, hybrid:window=64, linear:feature_map=elu,norm=l2; docs/attention.md)")
      ->capture_default_str()
      ->check(attention_spec_arg(/*student=*/false));
  sub->add_option("--out", a->o.train.out_dir, "Output directory (model, checkpoint, log)")->required()->check(out_dir_arg());
  sub->add_option("--steps", a->o.train.steps, "Optimizer steps (the learning-rate schedule's length)")->capture_default_str()->transform(range::steps());
  sub->add_option("--end-at", a->o.train.end_at,
                  "End the run at this step of the --steps schedule, as if it were the last (curriculum stages; 0: at --steps)")
      ->capture_default_str()
      ->transform(range::steps_or_zero());
  a->seq_len_option = sub->add_option("--seq-len", a->o.seq_len, "Tokens per sequence, at most the model's context (default: min(256, the context); a recall task's: its seq_len)")
      ->transform(range::tokens(2));
  sub->add_option("--batch-size", a->o.batch_size, "Sequences per micro-batch")->capture_default_str()->transform(range::batch());
  sub->add_option("--grad-accum", a->o.train.grad_accum, "Micro-batches per step")->capture_default_str()->transform(range::batch());
  add_allreduce_options(*sub, a->o.train.overlap_allreduce, a->o.train.bucket_mb);
  add_precision_option(*sub, a->o.train.precision, a->common);
  sub->add_option("--lr", a->o.train.lr, "Peak learning rate")->capture_default_str()->transform(range::learning_rate());
  a->warmup_option = sub->add_option("--warmup", a->o.train.warmup, "Warm-up steps (at most --steps; the default is cut to a tenth of a shorter run)")
                         ->capture_default_str()
                         ->transform(range::steps_or_zero());
  sub->add_option("--weight-decay", a->o.train.adam.weight_decay, "AdamW weight decay (not on biases and norms)")
      ->capture_default_str()
      ->transform(range::weight_decay());
  sub->add_option("--eval-every", a->o.train.eval_every, "Evaluate every N steps (0: only at the end)")
      ->capture_default_str()
      ->transform(range::steps_or_zero());
  sub->add_option("--eval-batches", a->o.eval_batches, "Validation batches per evaluation")->capture_default_str()->transform(range::count(1));
  sub->add_option("--checkpoint-every", a->o.train.checkpoint_every, "Checkpoint every N steps")->capture_default_str()->transform(range::steps());
  sub->add_option("--snapshot-every", a->o.train.snapshot_every, "Also export the model every N steps to OUT/step-N (0: never)")
      ->capture_default_str()
      ->transform(range::steps_or_zero());
  auto* resume = sub->add_flag("--resume", a->resume, "Require an existing checkpoint to resume (a rerun resumes by itself when one exists)");
  // both at once trained afresh (the sixth probe of 2026-11-28); finetune refused them already
  sub->add_flag("--fresh", a->o.train.fresh, "Ignore an existing checkpoint and start over")->excludes(resume);
  add_common_options(*sub, a->common, Devices::Any);
  a->common.ranks = true;  // data-parallel (docs/distributed.md)
  sub->callback([a, sub]() {
    refuse_copy_shape_without_copies(copy_shape_option_given(*sub), a->o.copy);
    run(*a);
  });
}

}  // namespace mimic::cli
