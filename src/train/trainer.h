// The training engine: AdamW + warm-up/cosine schedule, gradient clipping and accumulation, periodic
// evaluation with best and last exports, exact resume from atomic checkpoints, non-finite detection,
// progress (a bar on a terminal, a line a minute in a log) and a JSON-lines metrics log. Used by pretrain, finetune and distill.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "mimic/core/precision.h"
#include "mimic/distributed/group.h"
#include "mimic/io/output_lock.h"
#include "mimic/train/optimizer.h"

namespace mimic::train {

enum class NonFinite { Stop, Skip };

struct TrainOptions {
  int64_t steps = 1000;           // optimizer steps: the length of the learning-rate schedule
  // > 0: the run ends at this step of the `steps`-long schedule, as if it were its last (final evaluation,
  // checkpoint, export of last/). A curriculum stage that hands over to the next one part-way through its
  // schedule is then a reproducible recipe line, not a run someone stopped by hand. A rerun with a larger
  // value (<= steps) continues the same schedule.
  int64_t end_at = 0;
  int64_t warmup = 100;
  double lr = 3e-4;
  double min_lr_ratio = 0.1;      // cosine decays to lr·min_lr_ratio
  AdamWOptions adam;              // adam.lr is ignored (the schedule sets it)
  double grad_clip = 1.0;         // <= 0: off
  int64_t grad_accum = 1;         // micro-batches per optimizer step
  int64_t eval_every = 100;       // steps; <= 0: only at the end
  int64_t checkpoint_every = 50;  // steps
  int64_t log_every = 10;
  // > 0: also export the model every N steps to out_dir/step-N (a model directory), so that a long run's
  // progress can be measured on any metric afterwards, not only the validation loss that picks best/.
  int64_t snapshot_every = 0;
  // > 0: early stopping. Training ends once this many evaluations in a row have not improved on the best
  // validation loss (needs eval_every > 0). Decided from the step and the best step alone, both in the
  // checkpoint, so a resumed run stops where the uninterrupted one did.
  int64_t patience = 0;
  // Also evaluate before the first step (logged as step 0), so that the starting weights compete for best/:
  // a run that only makes the model worse keeps (and exports) its start, with best_step 0. Patience then counts
  // from that evaluation. Distill uses it (a map must not come out worse than it went in).
  bool eval_at_start = false;
  std::string label = "train";  // the progress bar's name
  int64_t tokens_per_micro_batch = 0;  // for tokens/s
  std::string out_dir;
  bool fresh = false;             // ignore an existing checkpoint instead of resuming from it
  // The command training ("pretrain", "finetune"), kept in the checkpoint beside the fingerprint: a run of one
  // command never resumes or replaces (--fresh) another's (checkpoint_command).
  std::string command;
  // In a distributed run: average the gradients while backward runs (distributed::Group::OverlappedAverage, the
  // default), or after it (Group::average: the simple synchronous reference, `--allreduce sync`). The two give
  // the same parameters (tests/test_distributed.cpp).
  bool overlap_allreduce = true;
  double bucket_mb = distributed::kDefaultBucketMb;  // the largest gradient bucket, one all-reduce each
  // fp32, or bf16 mixed precision: autocast on the parameters' device around every micro-batch's forward and every
  // evaluation (mimic/core/precision.h says what stays float). Part of the fingerprint when not fp32.
  Precision precision = Precision::Fp32;
  NonFinite on_nonfinite = NonFinite::Stop;
  int64_t max_skips = 10;         // with Skip: consecutive skipped steps before stopping
  bool progress = true;
  // > 0: return after this many steps of this call (counted from where it resumed) as if the process were
  // killed there (no export, no checkpoint beyond the regular ones), so that tests can resume an interrupted run.
  int64_t stop_after = 0;
  // > 0: raise SIGINT after this step, as Ctrl-C there would (tests of the stop a signal asks for)
  int64_t signal_after_step = 0;
  // Where a run stops, for the line a signal's stop ends with when the run is part of a bigger one ("in layer 3":
  // a distill layer's run; empty: the command's own run)
  std::string stop_context;
  // Sentences for the user (a setting cut to the data: "warm-up cut to …"), said by rank 0 through `note` as the
  // training begins — after every check that may refuse the run (a note above a one-line refusal made it two lines)
  // and before the first step (printed at the run's end, they came hours late: helper-68's probe)
  std::vector<std::string> start_notes;
  std::function<void(const std::string&)> note;
  // What a run keeps at its end beside best/ (which the caller promotes into out_dir): last/, the last step's
  // export, and the whole final checkpoint. Off (finetune's default): neither — a finished run's checkpoint keeps
  // its state alone (step, best step, data position), enough for a rerun to see that the run is done: its
  // parameters are the last step's, not the best's, and its optimizer moments can never be used again (the
  // schedule's steps are part of the fingerprint). A run ended by end_at or stop_after keeps its whole checkpoint
  // either way: it can continue.
  bool keep_last = true;
  // With keep_last: when the last step was also the best, last/ is a link to out_dir (where the caller promotes
  // best/) instead of a second copy of the same weights.
  bool link_last_to_best = false;
  // Settings that must match for a checkpoint to be resumed (model, data, seed...): stored in it. train() adds the
  // evaluation schedule (eval_every, patience), which decides the best step.
  nlohmann::json fingerprint = nlohmann::json::object();
  // The values of settings the fingerprint leaves out at their default (so that older checkpoints resume), named when
  // a resume or a rank finds one set: {"position_init": "normal"}. train() adds its own (precision, patience).
  nlohmann::json fingerprint_defaults = nlohmann::json::object();
  // Settings the ranks of one run must share beyond the fingerprint, though a resume may change them (a command's
  // own, e.g. finetune's --test); train() adds where the run writes (out_dir, checkpoint and snapshot intervals,
  // keep_last) and how the ranks exchange gradients.
  nlohmann::json rank_settings = nlohmann::json::object();
};

// What to train: the trainer owns the loop, the task owns model and data.
struct TrainTask {
  std::vector<std::pair<std::string, at::Tensor>> params;  // trainable parameters, named
  std::function<at::Tensor()> micro_batch_loss;             // forward on the next micro-batch: scalar loss
  std::function<double()> evaluate;                         // validation loss (lower is better)
  std::function<void(bool training)> set_training;          // dropout on/off
  std::function<nlohmann::json()> data_state;               // where the data stream stands
  std::function<void(const nlohmann::json&)> restore_data_state;
  std::function<void(const std::string& dir)> export_model; // write a usable model (HF layout) to dir
  // out_dir itself becomes the model (promote_best: finetune, pretrain): a fresh start removes an earlier model's
  // files there, after the folder's checks and the ranks' agreement
  bool out_is_model = false;
  // The names of the files export_model writes (a model's by default: models::is_model_file): what best/ and
  // best.new/ may hold; anything else there is the user's, refused when a run starts rather than removed.
  std::function<bool(const std::string& name)> is_export_file;
  // Called after every optimizer step: finetune puts the blocks it freezes inside trained tensors back as loaded
  // (their gradients are masked, but AdamW's decoupled weight decay would still shrink them).
  std::function<void()> after_step;
  // In a distributed run (distributed::environment(), several processes): the task trains on its rank's share of
  // every global batch (data::rows_of) and `evaluate` returns the mean over its share of the validation batches;
  // the engine averages gradients and validation losses over the ranks. A task without it refuses such a run.
  bool data_parallel = false;
  // Trained by this process alone even in a distributed run (distill gives each rank layers of its own): no
  // collective, and this process reads and writes out_dir whatever its rank (on ranks other than 0 without locking it:
  // it lies inside a folder rank 0 holds).
  bool rank_local = false;
};

struct TrainResult {
  int64_t steps = 0;
  int64_t resumed_from = 0;  // step the run resumed from (0: fresh)
  bool stopped = false;      // ended by TrainOptions::stop_after
  bool stopped_early = false;  // ended by TrainOptions::patience
  // the run had ended before this call, which trained nothing (last_loss is then NaN: no step ran; seconds and
  // tokens_per_second are 0)
  bool finished_earlier = false;
  double last_loss = 0;
  double best_eval = 0;
  int64_t best_step = 0;
  double last_eval = 0;
  double seconds = 0;
  double tokens_per_second = 0;
  // the batches an evaluation averaged, set by the task's command (pretrain, finetune --task lm): fewer than asked
  // when the validation split holds fewer, which the command notes before the run (0: not set)
  int64_t validation_batches = 0;
};

// Runs (or resumes) training. Files in out_dir: checkpoint.safetensors (everything needed to resume
// exactly: parameters, optimizer moments, step, RNG state, data position; written atomically),
// log.jsonl (one JSON object per logged step or evaluation), best/ and last/ (export_model output).
TrainResult train(TrainTask& task, const TrainOptions& options);

// The lock a stage takes on its output directory around train() and what follows it: taken by the rank that
// writes there (rank 0, or the only process); the other ranks of a distributed run write nothing and get none.
io::OutputLock lock_run_output(const std::string& out_dir);

// Whether train() with these options starts from step 0: --fresh, or no checkpoint in out_dir yet.
bool starts_fresh(const TrainOptions& options);

// The command whose run left the checkpoint in `out_dir` ("pretrain", "finetune"; read from checkpoints written
// before it was kept: a pretrain fingerprint names an `arch`, a finetune one a `task`) — without a checkpoint, the
// command log.jsonl's first line names (a run killed before its first checkpoint) — or "" when neither says (a
// damaged checkpoint is the resume's own error).
std::string checkpoint_command(const std::string& out_dir);

// The settings the training run that wrote the model in `model_dir` was started with (TrainOptions::fingerprint: a
// finetune's "task", "data", "data_digest", …): the checkpoint's there, or, for one of a run's export folders (best/,
// last/, step-N/), the run folder's above it. Links are followed, and a folder counts as the run's only while it holds
// the files the run's export book records there ("." for the run folder itself; a run from before the book is taken at
// its checkpoint's word). An empty object when no checkpoint that can be read says. eval reads it to tell when a
// classifier is scored on the file it was finetuned on, changed since.
nlohmann::json model_run_fingerprint(const std::string& model_dir);

// A training run's folder `dir` (distill keeps one per layer, OUT.ckpt/layer_NN) checked as a start checks it: a file at
// an export's name that the run's export book does not record, a link where it exports, another command's file at the
// checkpoint's name, a file in an export folder (last/, best/, step-N/, …) that is not one the run's exports write — each
// refused, naming it. clear_run_folder then removes what the run wrote there (checkpoint, log, export book, its
// exports) and the folder if that leaves it empty; the user's own files beside them stay (distill --fresh removed the
// layer folders whole, models copied there and notes included: the fifteenth probe).
// `command`: the command whose runs the folder may hold (TrainOptions::command); another's is refused.
void check_run_folder(const std::string& dir, const TrainTask& task, const std::string& command);
void clear_run_folder(const std::string& dir, const TrainTask& task, const std::string& command);

// The first line of `out_dir`/log.jsonl: `mimic` when it is a training log of mimic's (the line a run writes first,
// {"step": 0, "command": …}), and `command`, the command it names. A missing, empty,
// unreadable or foreign log gives {false, ""}. One reader for both questions asked of it: whose run is this folder
// (checkpoint_command), and may a fresh run replace the log (the CLI's output-folder check).
struct LogHead {
  bool mimic = false;
  std::string command;
};
LogHead read_log_head(const std::string& out_dir);

// The ranks of one run compare `mine` (the settings that shape it) with rank 0's before anything is read or written:
// a rank started otherwise ends with one line naming the first difference, every other rank with one line saying
// how many differ. train() calls it for data-parallel runs; a stage whose ranks split other work (distill's layers)
// calls it itself. `defaults`: the values of settings `mine` leaves out at their default (json_first_difference).
void check_same_settings(distributed::Group& group, const nlohmann::json& mine, const nlohmann::json& defaults = nlohmann::json::object());

// Whether this process writes the run's files and prints its results: rank 0, or the only process.
bool writes_outputs();

// Makes out_dir itself a model directory: moves the files of out_dir/best (when it exists) into it, each by an
// atomic rename, config.json last, and removes best/ (one copy of the weights on disk, not two; a run resumed
// later writes best/ again when it finds a better model).
void promote_best(const std::string& out_dir);
}  // namespace mimic::train
