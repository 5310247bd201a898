#include "mimic/finetune/lm.h"

#include <torch/torch.h>

#include <cmath>

#include "mimic/core/error.h"
#include "mimic/core/paths.h"
#include "mimic/core/precision.h"
#include "mimic/core/words.h"
#include "mimic/data/batches.h"
#include "mimic/data/corpus.h"
#include "mimic/data/lm_source.h"
#include "mimic/data/recall_tasks.h"
#include "mimic/data/token_cache.h"
#include "mimic/distributed/environment.h"
#include "mimic/io/output_lock.h"
#include "mimic/models/family.h"
#include "mimic/models/model.h"
#include "mimic/models/tokenizer.h"
#include "mimic/train/lm.h"

namespace mimic::finetune {

LmResult finetune_lm(const LmOptions& o) {
  torch::manual_seed(o.seed);  // dropout draws from the global generator: a run is a function of its seed
  const bool recall = data::is_recall_task(o.corpus);
  MIMIC_CHECK(!recall || !o.test, "--test scores a corpus' test split; evaluate a recall task with mimic eval --task mqar");
  auto tok = recall ? nullptr : models::load_tokenizer(o.model_dir);
  auto prepared = prepare(models::load_model(o.model_dir, o.device), o);
  auto& model = prepared.model;
  const auto summary = model->summary();
  MIMIC_CHECK(summary.family->causal, o.model_dir, ": --task lm finetunes a causal LM (", models::causal_family_names(), "), not ", summary.model_type);
  // unset (0): the default, within a context shorter than it (as record's); a negative one is refused below
  const int64_t seq_len = o.seq_len != 0 ? o.seq_len : std::min<int64_t>(256, summary.max_positions);
  // a recall task's length is the task's own (data::lm_seq_len), which the user may not have given as --seq-len
  MIMIC_CHECK(!recall || seq_len <= summary.max_positions, "the task's seq_len ", seq_len, " exceeds ", models::context_words(summary));
  models::check_seq_len(seq_len, summary.max_positions, summary.context_note);

  // Data parallelism: every rank draws the global batches of --batch-size × ranks rows and trains on its share.
  // Opened before the teacher is read: a task whose ids are not the model's is refused first.
  const auto& env = distributed::environment();
  auto source = data::open_lm_source(o.corpus, {tok.get(), summary.vocab_size, o.model_dir}, seq_len, o.batch_size * env.world_size,
                                     o.seed, o.copy);
  auto teacher = load_teacher(o, *model, o.kd_temperature > 0 ? "distilling toward another teacher"
                                                                   : models::kComparedWithAnotherTeacher);
  // The mean over the fixed validation batches of the loss on share `part` of `parts` of each (the engine averages
  // the ranks' shares; the final scores take whole batches).
  auto validation_loss = [&](models::Model& m, int64_t part, int64_t parts) {
    return source->validation_mean(o.eval_batches, [&](const data::LmBatch& b) {
      return train::causal_lm_loss(m, data::rows_of(b, part, parts)).item<double>();
    });
  };

  train::TrainTask task;
  bind(task, prepared);
  const bool kd = o.kd_temperature > 0;
  MIMIC_CHECK(o.kd_temperature >= 0 && std::isfinite(o.kd_temperature), "--kd must be a temperature > 0 (or 0: off), got ",
              o.kd_temperature);
  MIMIC_CHECK(!kd || teacher.model, "--kd distils the teacher's logits: give the teacher with --teacher");
  MIMIC_CHECK(o.kd_lm_weight >= 0 && o.kd_lm_weight <= 1, "--kd-lm-weight must lie in [0, 1], got ", o.kd_lm_weight);
  MIMIC_CHECK(kd || o.kd_lm_weight == 0, "--kd-lm-weight mixes the LM loss into logit distillation: it needs --kd T");
  task.micro_batch_loss = [&]() {
    auto b = data::rows_of(source->next(), env.rank, env.world_size);
    if (!kd) return train::causal_lm_loss(*model, b);
    return train::causal_lm_kd_loss(*model, *teacher.model, b, o.kd_temperature, o.kd_lm_weight);
  };
  task.evaluate = [&]() { return validation_loss(*model, env.rank, env.world_size); };
  task.data_parallel = true;
  task.data_state = [&]() { return source->position(); };
  task.restore_data_state = [&](const nlohmann::json& j) { source->seek(j); };

  train::TrainOptions t = o.train;
  t.tokens_per_micro_batch = o.batch_size * seq_len;
  t.fingerprint = fingerprint(o);
  t.fingerprint_defaults.update(fingerprint_defaults());
  add_weight_digests(t.fingerprint, *model, teacher, kd, o.model_dir, o.teacher_dir);
  t.fingerprint.update({{"task", "lm"}, {"data", data::data_identity(o.corpus)}, {"seq_len", seq_len}, {"batch_size", o.batch_size},
                        {"eval_batches", o.eval_batches}});
  // the text's tokens, not only its path: a file edited under the same name was resumed into (the probe of 2026-11-27)
  if (const auto d = source->data_digest(); !d.empty()) t.fingerprint["data_digest"] = d;
  // the document start is no target since 2026-12-02 (data::PackedBatches): a run begun before compared its losses
  // with a best validation loss that counted it, lower, so it is not resumed (helper-38's review)
  if (tok && !tok->document_start().empty()) t.fingerprint["document_start_target"] = false;
  t.rank_settings["test"] = o.test;  // rank 0 alone scores the test split: a rank given --test alone had it dropped
  if (o.copy.fraction > 0)
    t.fingerprint["copy"] = {{"fraction", o.copy.fraction}, {"min_span", o.copy.min_span}, {"max_span", o.copy.max_span},
                             {"copies", o.copy.copies}, {"random_fraction", o.copy.random_fraction}, {"random_vocab", o.copy.random_vocab}};
  if (kd) t.fingerprint["kd"] = {{"temperature", o.kd_temperature}, {"lm_weight", o.kd_lm_weight}, {"teacher", path_identity(o.teacher_dir)}};
  // Held until the model is promoted and scored: no other run may write this directory meanwhile.
  const auto lock = train::lock_run_output(t.out_dir);
  // said as the run begins, not after it (helper-68's probe)
  if (const auto n = clamped_note("--eval-batches", o.eval_batches, source->validation_batches(o.eval_batches), "the validation split holds"); !n.empty())
    t.start_notes.push_back(n);
  LmResult r;
  r.trainable = prepared.trainable_described;
  r.trainable_parameters = prepared.trainable_parameters;
  r.train = train::train(task, t);
  r.train.validation_batches = source->validation_batches(o.eval_batches);
  if (r.train.stopped || !train::writes_outputs()) return r;

  train::promote_best(t.out_dir);
  std::vector<int64_t> test_ids;
  auto test_options = o.test_options;
  if (o.test) {
    test_ids = data::corpus_token_cache(o.corpus, data::Split::Test, *tok).ids();
    test_options.unscored = tok->document_start();  // scored as eval scores it
  }
  // in the run's precision, as its evaluations were: the best model's validation loss is the best step's (a bf16 run
  // scored in fp32 printed a validation loss beside its best one that differed in the fourth digit: helper-44's probe)
  auto score = [&](models::Model& m) {
    torch::NoGradGuard no_grad;
    AutocastGuard mixed(t.precision, o.device);
    m.module().eval();
    LmScores s;
    s.validation_loss = validation_loss(m, 0, 1);
    s.validation_perplexity = std::exp(s.validation_loss);
    if (o.test) s.test = eval::perplexity(m, test_ids, test_options);
    return s;
  };
  r.student = score(*models::load_model(t.out_dir, o.device));
  if (teacher.model) r.teacher = score(*teacher.model);
  return r;
}

}  // namespace mimic::finetune
