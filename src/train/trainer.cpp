#include "mimic/train/trainer.h"

#include <torch/torch.h>

#include <algorithm>
#include <csignal>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include "mimic/core/error.h"
#include "mimic/core/precision.h"
#include "mimic/core/json_keys.h"
#include "mimic/core/paths.h"
#include "mimic/core/progress.h"
#include "mimic/distributed/environment.h"
#include "mimic/distributed/group.h"
#include "mimic/io/atomic_file.h"
#include "mimic/io/output_lock.h"
#include "mimic/io/safetensors.h"
#include "mimic/models/model.h"
#include "mimic/train/run_state.h"
#include "mimic/train/stop_signal.h"

namespace mimic::train {

namespace fs = std::filesystem;
using namespace run;  // the checkpoint, log and best export (run_state.h)

// The ranks of a data-parallel run train one run: every rank compares its settings (the fingerprint a checkpoint
// keeps: model, data, seed, schedule, what trains...) with rank 0's before anything is read or written. A rank
// started otherwise ends with one line naming the first difference, and every other rank with one line saying how
// many differ — no rank trains on and no collective is left waiting.
void check_same_settings(distributed::Group& group, const nlohmann::json& mine, const nlohmann::json& defaults) {
  const std::string what = "comparing the ranks' settings";
  const auto lead = json_parse(group.broadcast(mine.dump(), what), "rank 0's settings");
  // the command first: ranks running pretrain and finetune differed first in "arch" by the keys' order (sixth probe)
  std::string diff;
  if (lead.value("command", nlohmann::json()) != mine.value("command", nlohmann::json()))
    diff = "the command: " + lead.value("command", nlohmann::json()).dump() + " on rank 0, " + mine.value("command", nlohmann::json()).dump() + " here";
  else if (const auto d = json_first_difference(lead, mine, "the default", defaults))
    diff = d->key + ": " + d->first + " on rank 0, " + d->second + " here";
  const auto differing = std::llround(group.average(diff.empty() ? 0.0 : 1.0, what) * group.size());
  if (differing == 0) return;
  if (!diff.empty())
    fail("rank ", group.rank(), " was started with other settings than rank 0 (", diff, "): start every rank with the same command");
  fail(differing, differing == 1 ? " rank was" : " ranks were", " started with other settings than rank 0: start every rank with the same command");
}

TrainResult train(TrainTask& task, const TrainOptions& options) {
  // A bf16 run is another run: its precision is part of the settings a checkpoint must match (an fp32 run's
  // fingerprint stays what it was, so checkpoints written before --precision existed resume).
  TrainOptions o = options;
  if (o.precision != Precision::Fp32) o.fingerprint["precision"] = precision_name(o.precision);
  o.fingerprint_defaults["precision"] = precision_name(Precision::Fp32);
  o.fingerprint_defaults["patience"] = 0;
  // When the run evaluates decides its best step (and early stopping): a resume with another --eval-every picked a
  // best step the run's schedule never evaluates, and ranks with other values aborted inside gloo (the probe of
  // 2026-11-27). Checkpoints written before it was kept are refused once, naming it.
  o.fingerprint["eval_every"] = o.eval_every;
  if (o.patience > 0) o.fingerprint["patience"] = o.patience;
  MIMIC_CHECK(!o.out_dir.empty(), "training needs an output directory");
  MIMIC_CHECK(o.steps > 0 && o.grad_accum > 0, "steps and gradient accumulation must be positive");
  // The CLI checks these ranges already (tools/ranges.h); a library user reaches this directly, and
  // `done % checkpoint_every` with 0 was a SIGFPE, a negative or NaN lr a run that silently diverges.
  MIMIC_CHECK(o.checkpoint_every >= 1, "checkpoint_every must be >= 1 (a checkpoint every N steps), got ", o.checkpoint_every);
  MIMIC_CHECK(o.log_every >= 1, "log_every must be >= 1 (a log line every N steps), got ", o.log_every);
  MIMIC_CHECK(o.snapshot_every >= 0, "snapshot_every must be >= 0 (0: no snapshots), got ", o.snapshot_every);
  MIMIC_CHECK(o.patience >= 0, "patience must be >= 0 (0: no early stopping), got ", o.patience);
  MIMIC_CHECK(o.patience == 0 || o.eval_every > 0, "early stopping (patience ", o.patience, ") needs evaluations (eval_every > 0)");
  MIMIC_CHECK(o.warmup >= 0, "warmup must be >= 0 steps, got ", o.warmup);
  MIMIC_CHECK(std::isfinite(o.lr) && o.lr > 0, "the learning rate must be a number > 0, got ", o.lr);
  MIMIC_CHECK(o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1, "min_lr_ratio must lie in [0, 1], got ", o.min_lr_ratio);
  MIMIC_CHECK(std::isfinite(o.adam.weight_decay) && o.adam.weight_decay >= 0, "weight decay must be a number >= 0, got ",
              o.adam.weight_decay);
  MIMIC_CHECK(!std::isnan(o.grad_clip), "grad_clip must be a number (<= 0: off), got ", o.grad_clip);
  MIMIC_CHECK(o.max_skips >= 0, "max_skips must be >= 0, got ", o.max_skips);
  MIMIC_CHECK(o.end_at >= 0 && o.end_at <= o.steps, "end_at must lie in [0, steps = ", o.steps, "] (0: at the end), got ", o.end_at);
  MIMIC_CHECK(!task.params.empty(), "nothing to train: no trainable parameters");
  const int64_t last = o.end_at > 0 ? o.end_at : o.steps;  // the step this run ends at
  // Data parallelism: every rank runs this loop on its share of each batch, the gradients are averaged before
  // clipping and the step, so every rank holds the same parameters after every step. Rank 0 (the lead) alone
  // reads and writes out_dir: checkpoint, log, exports, progress.
  auto& group = task.rank_local ? distributed::single() : distributed::world();
  const bool lead = group.lead();
  MIMIC_CHECK(group.size() == 1 || task.data_parallel, o.label, ": this training job does not run data-parallel (WORLD_SIZE=",
              group.size(), "); run it as one process");
  if (group.size() > 1) {
    // beside what shapes the run, how the ranks exchange gradients: they must agree on it too (the probe of
    // 2026-11-27: ranks started with other --allreduce or --bucket-mb aborted inside gloo), though a run may resume
    // with other values, so these stay out of the checkpoint's fingerprint
    auto settings = o.fingerprint;
    settings["exchange"] = {{"allreduce", o.overlap_allreduce ? "overlap" : "sync"}, {"bucket_mb", o.bucket_mb}};
    // and what rank 0 alone writes where (another rank's --out or --keep-last was silently ignored; other checkpoint
    // intervals ran collectives at other steps)
    settings.update({{"out_dir", o.out_dir},  {"checkpoint_every", o.checkpoint_every}, {"snapshot_every", o.snapshot_every},
                     {"keep_last", o.keep_last}, {"log_every", o.log_every},               {"end_at", o.end_at},
                     {"fresh", o.fresh}});
    settings.update(o.rank_settings);
    if (!o.command.empty()) settings["command"] = o.command;
    check_same_settings(group, settings, o.fingerprint_defaults);
  }
  // A rank-local job of a rank other than 0 (distill's layers) writes inside the folder rank 0 holds for the whole
  // run (OUT.ckpt): it takes no lock of its own there, which the folder's holder would refuse as another command's.
  const bool own_lock = lead && (!task.rank_local || distributed::world().lead());
  const auto lock = own_lock ? io::lock_output_dir(o.out_dir) : io::OutputLock();
  const std::string ckpt = o.out_dir + "/" + kCheckpoint;
  const std::string log = o.out_dir + "/log.jsonl";
  auto log_line = [&](const nlohmann::json& j) {
    if (lead) append_log(log, j);
  };

  // last/: the last step's export, or a link to out_dir when the last step was the best (TrainOptions::keep_last)
  auto export_last = [&](bool last_is_best) {
    const fs::path dir = fs::path(o.out_dir) / "last";
    std::error_code ec;
    if (o.link_last_to_best && last_is_best && task.evaluate) {
      // a last/ of an earlier stage of this run (its model files; the user's own stay, and then so does the folder), or
      // an old link
      if (fs::is_symlink(dir)) {
        fs::remove(dir, ec);
      } else if (fs::is_directory(dir)) {
        models::remove_model_files(dir.string());
        forget_export(o.out_dir, "last");
        if (fs::is_empty(dir, ec)) fs::remove(dir, ec);
      }
      if (!fs::exists(fs::symlink_status(dir))) {
        fs::create_directory_symlink(".", dir);
        return;
      }
      // the user's files keep the folder: the model is exported into it instead of a link
    }
    if (fs::is_symlink(dir)) fs::remove(dir);
    export_recorded(o.out_dir, "last", task);
  };

  AdamW opt(task.params, o.adam);
  Saved s;
  s.best_eval = std::numeric_limits<double>::infinity();
  TrainResult r;
  bool resumed = false;
  std::vector<at::Tensor> params;  // what the collectives send: the parameters in the task's order
  for (const auto& [name, p] : task.params) params.push_back(p);
  // Rank 0's start — fresh or the checkpoint's state — becomes every rank's: the state, the parameters (rank 0's
  // initialisation or the checkpoint's), the optimizer moments and the random generator.
  const std::string start = group.from_lead("receiving rank 0's training state", [&] {
    refuse_another_commands_run(o.out_dir, o.command);
    const bool earlier_run = holds_a_run(o.out_dir);
    check_export_folders(o.out_dir, task, earlier_run);
    if (!o.fresh && fs::exists(ckpt)) {
      try {
        s = load_checkpoint(ckpt, task, opt, o, group.size());
      } catch (const Error& e) {
        // a damaged checkpoint (truncated, edited) names the way out, as a checkpoint of other settings does
        const std::string what = e.what();
        if (what.find("--fresh") != std::string::npos) throw;
        fail(what, "; --fresh starts over (the checkpoint is then replaced), or give another --out");
      }
      if (task.restore_data_state) {
        // The task reads its own position (json_int & co. name the key); the file is named here.
        in_file(ckpt, [&] { task.restore_data_state(s.data); });
      }
      truncate_log(log, s.step);
      resumed = true;
      settle_staged_exports(o.out_dir, task);
      settle_staged_best(o.out_dir, &s, task);
      check_best_files(o.out_dir, s);
    } else {
      // an earlier run of this command left its exports (last/, step-N/ snapshots): a fresh run's folder holds its own
      // alone (a --fresh run kept the earlier run's last/ and snapshots, even of another family: the fifth probe of
      // 2026-11-27). Only where the checkpoint or log shows an earlier run: a folder of your own keeps its folders.
      if (earlier_run) {
        settle_staged_exports(o.out_dir, task);
        remove_earlier_exports(o.out_dir, task);
      }
      // and its model, where out_dir is one: only now, after the folder's checks and the ranks' agreement (removed
      // before them, a refused --fresh had deleted the finished run's model: the thirteenth probe)
      if (task.out_is_model) {
        models::remove_model_files(o.out_dir);
        forget_export(o.out_dir, ".");
      }
      if (fs::exists(log)) fs::remove(log);
      // the log's first line names the command: a run killed before its first checkpoint is still known as that
      // command's (finetune took over a folder holding a pretrain run's log alone: the seventh probe of 2026-11-29)
      if (!o.command.empty()) log_line({{"step", 0}, {"command", o.command}});
      settle_staged_best(o.out_dir, nullptr, task);
    }
    // last, once every check passed: a run from before the book, refused, adopted nothing (its best/ changed since)
    open_export_book(o.out_dir, task, earlier_run);
    return nlohmann::json{{"resumed", resumed}, {"state", state_json(s)}}.dump();
  });
  if (group.size() > 1) {
    if (!lead) {
      const auto j = json_parse(start, "rank 0's training state");
      resumed = json_bool(j, "resumed", "rank 0's training state");
      s = saved_from_json(json_key(j, "state", "rank 0's training state"), "rank 0's training state");
      if (resumed && task.restore_data_state) task.restore_data_state(s.data);
    }
    group.broadcast(params, "receiving rank 0's parameters");
    if (resumed) {
      auto state = opt.state();
      std::vector<at::Tensor> moments;
      for (const auto& [name, t] : state) moments.push_back(t);
      group.broadcast(moments, "receiving rank 0's optimizer state");
      if (!lead) opt.load_state(state);
    }
    auto gen = at::detail::getDefaultCPUGenerator();
    auto rng = gen.get_state();
    group.broadcast({rng}, "receiving rank 0's random state");
    if (!lead) gen.set_state(rng);
  }
  if (resumed) r.resumed_from = s.step;
  // Early stopping, from what the checkpoint holds: `patience` evaluations since the best one.
  auto patience_spent = [&](int64_t step) {
    return o.patience > 0 && step % o.eval_every == 0 && step - s.best_step >= o.patience * o.eval_every;
  };
  if (s.step >= last || (s.step > 0 && patience_spent(s.step))) {
    // The run ended before this one, but may have been killed between its last checkpoint and the export of
    // last/ (found while writing bench/soak.sh: the rerun said "written to last/" and left none). The parameters are the
    // checkpoint's, so exporting again writes what the uninterrupted run wrote.
    if (task.export_model && lead && o.keep_last) {
      MIMIC_CHECK(!s.state_only, o.out_dir, ": this run finished without keeping its last step (no --keep-last), so last/ "
                  "cannot be written now: its best model is ", o.out_dir, " itself; --fresh trains again");
      export_last(s.best_step == s.step);
    }
    r.stopped_early = s.step < last;
    r.finished_earlier = true;
    r.last_loss = std::numeric_limits<double>::quiet_NaN();
    r.steps = s.step;
    r.best_eval = s.best_eval;
    r.best_step = s.best_step;
    return r;
  }

  if (lead && o.note)
    for (const auto& n : o.start_notes) o.note(n);
  // where autocast acts when the run is bf16: the device of the parameters
  const c10::Device device = task.params.front().second.device();
  bool best_staged = false;  // best.new/ holds a best export the next checkpoint records
  auto evaluate_and_export = [&](int64_t step) {
    if (!task.evaluate) return;
    if (task.set_training) task.set_training(false);
    double e;
    {
      torch::NoGradGuard ng;
      AutocastGuard mixed(o.precision, device);
      e = task.evaluate();
    }
    // each rank scored its share of the validation batches
    e = group.average(e, "averaging the validation loss");
    if (task.set_training) task.set_training(true);
    r.last_eval = e;
    log_line({{"step", step}, {"eval_loss", e}});
    if (e < s.best_eval) {
      s.best_eval = e;
      s.best_step = step;
      if (task.export_model && lead) {
        s.best_files = export_recorded(o.out_dir, kStagedBest, task);  // best.new/ cleared first
        best_staged = true;
      }
    }
  };

  // A resumed run did this when it started (its checkpoint holds the best so far).
  if (o.eval_at_start && s.step == 0) evaluate_and_export(0);
  if (task.set_training) task.set_training(true);
  Progress progress(o.label, last, "step");
  if (!o.progress || !lead) progress.disable();
  progress.update(s.step);
  auto t0 = std::chrono::steady_clock::now();
  int64_t tokens = 0, skips = 0;
  double window_loss = s.window_loss;
  int64_t window_n = s.window_n;
  int64_t final_step = last;  // or where early stopping ended the run
  std::optional<distributed::Group::OverlappedAverage> overlapped;
  if (group.size() > 1 && o.overlap_allreduce) overlapped.emplace(group, params, o.bucket_mb);
  // Distributed runs log where a step's time goes: waiting for the gradients' all-reduce (what backward did not
  // hide) and the rest (forward, backward, clipping, the optimizer), summed over the log window, logged per step.
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  double window_allreduce = 0, window_compute = 0, window_early = 0;
  int64_t window_timed = 0;
  // SIGINT (Ctrl-C) or SIGTERM (a job's time limit) during a single-process run: the step under way finishes, a
  // checkpoint holds it, and the run ends with an error saying so; the same command continues it. They ended the
  // process at once, losing the steps since the last checkpoint (helper-55's probe of 2026-12-04). A second signal
  // ends the process at once, as before. Not in a launched run (Environment::launched, a world of one included): a
  // data-parallel run's ranks receive the signal at different steps and would stop at different ones, leaving the
  // others waiting in an all-reduce; and a launcher passes the signal on and ends, and its ranks then receive SIGTERM too (a distill rank's layer, trained
  // alone, stopped "by SIGTERM" after a SIGINT, and rank 0 said nothing: helper-65's probe of 2026-12-05). Made after
  // progress and the log: a signal that arrives before the first step still finishes that step.
  StopOnSignal stop(!distributed::environment().launched());
  auto checkpoint = [&](int64_t done) {
    s.step = done;
    if (task.data_state) s.data = task.data_state();
    s.window_loss = window_loss;
    s.window_n = window_n;
    if (lead) save_checkpoint(o.out_dir, task, opt, s, o, group.size());
    if (lead && best_staged) swap_in_staged_best(o.out_dir, task);
    best_staged = false;
  };
  for (int64_t step = s.step; step < last; ++step) {
    const auto step_t0 = Clock::now();
    double lr = warmup_cosine_lr(step, o.warmup, o.steps, o.lr, o.min_lr_ratio);
    opt.zero_grad();
    double loss_sum = 0;
    for (int64_t m = 0; m < o.grad_accum; ++m) {
      at::Tensor loss;
      {
        AutocastGuard mixed(o.precision, device);  // the forward only: backward runs in the types it recorded
        models::BatchShare share(group.rank(), group.size());  // dropout drawn as one process would (model.h)
        loss = task.micro_batch_loss().to(at::kFloat);
      }
      // only the last micro-batch's gradients are the step's: the earlier ones are partial sums
      if (overlapped && m == o.grad_accum - 1) overlapped->arm();
      (loss / static_cast<double>(o.grad_accum)).backward();
      loss_sum += loss.item<double>();
      tokens += o.tokens_per_micro_batch * group.size();
    }
    double allreduce_seconds = 0, early_fraction = 0;
    if (group.size() > 1) {
      const auto t = Clock::now();
      const std::string what = "averaging the gradients of step " + std::to_string(step + 1);
      if (overlapped) {
        const auto launched = overlapped->finish(what);
        early_fraction = launched.buckets > 0 ? static_cast<double>(launched.in_backward) / launched.buckets : 0;
        loss_sum = group.average(loss_sum, what);
      } else {
        // The reference: everything after backward. Parameters without a gradient (unused in this graph) are left
        // out on every rank alike: the graph is the same.
        auto summed = torch::tensor({loss_sum}, torch::kDouble);
        std::vector<at::Tensor> grads{summed};
        for (const auto& [name, p] : task.params)
          if (p.grad().defined()) grads.push_back(p.grad());
        group.average(grads, what, o.bucket_mb);
        loss_sum = summed.item<double>();
      }
      allreduce_seconds = since(t);
    }
    double loss = loss_sum / static_cast<double>(o.grad_accum);
    double norm = clip_grad_norm(task.params, o.grad_clip);
    if (!std::isfinite(loss) || !std::isfinite(norm)) {
      std::ostringstream what;
      what << "non-finite " << (!std::isfinite(loss) ? "loss" : "gradient") << " at step " << step + 1 << " (loss " << loss
           << ", gradient norm " << norm << ")";
      if (o.on_nonfinite == NonFinite::Stop || ++skips > o.max_skips) {
        progress.finish();
        // a run that saved no checkpoint yet has none to name (it named "step 0", which does not exist)
        std::ostringstream where;
        if (s.step > 0)
          where << "; the last checkpoint (step " << s.step << ") is in " << o.out_dir;
        else
          where << "; no checkpoint was saved yet (the first comes at step "
                << std::min<int64_t>(o.checkpoint_every, last) << "): a rerun starts from the beginning";
        fail(what.str(), o.on_nonfinite == NonFinite::Skip ? " after too many skipped steps" : "", where.str());
      }
      log_line({{"step", step + 1}, {"skipped", what.str()}});
      opt.zero_grad();
      continue;
    }
    skips = 0;
    opt.step(lr);
    if (task.after_step) task.after_step();
    r.last_loss = loss;
    window_loss += loss;
    ++window_n;
    window_allreduce += allreduce_seconds;
    window_compute += since(step_t0) - allreduce_seconds;
    window_early += early_fraction;
    ++window_timed;
    int64_t done = step + 1;
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double tps = secs > 0 ? static_cast<double>(tokens) / secs : 0;
    char extra[128];
    if (o.tokens_per_micro_batch > 0)
      std::snprintf(extra, sizeof(extra), "loss %.4f  lr %.2e  %.0f tok/s", loss, lr, tps);
    else
      std::snprintf(extra, sizeof(extra), "loss %.4f  best eval %.4f", loss, std::isfinite(s.best_eval) ? s.best_eval : loss);
    progress.update(done, extra);
    if (done % o.log_every == 0 || done == last) {
      nlohmann::json line = {{"step", done}, {"loss", window_loss / static_cast<double>(window_n)}, {"lr", lr},
                             {"grad_norm", norm}, {"tokens_per_second", tps}, {"elapsed", secs}};
      if (group.size() > 1) {
        // per step, averaged over the steps of this window that this process ran (a resume starts a new window)
        line["allreduce_seconds"] = window_allreduce / static_cast<double>(window_timed);
        line["compute_seconds"] = window_compute / static_cast<double>(window_timed);
        // the share of the gradient buckets whose all-reduce started during backward (0 with --allreduce sync)
        line["allreduce_overlapped"] = window_early / static_cast<double>(window_timed);
      }
      log_line(line);
      window_loss = 0;
      window_n = 0;
      window_allreduce = window_compute = window_early = 0;
      window_timed = 0;
    }
    if ((o.eval_every > 0 && done % o.eval_every == 0) || done == last) evaluate_and_export(done);
    if (o.snapshot_every > 0 && done % o.snapshot_every == 0 && task.export_model && lead) {
      const std::string snapshot = o.out_dir + "/step-" + std::to_string(done);
      clear_link_at_export(snapshot);
      export_recorded(o.out_dir, "step-" + std::to_string(done), task);
    }
    const bool early = patience_spent(done) && done < last;
    if (done % o.checkpoint_every == 0 || done == last || early) checkpoint(done);
    if (o.signal_after_step == done) std::raise(SIGINT);
    if (const int sig = stop.requested(); sig != 0 && done < last && !early) {
      if (s.step != done) checkpoint(done);
      progress.finish();
      throw Error(detail::concat("stopped by ", stop_signal_name(sig), o.stop_context.empty() ? "" : " ", o.stop_context, " after step ",
                                 done, " of ", last, ": the checkpoint in ", o.out_dir, " holds it; the same command continues the run"),
                  stopped_status(sig));
    }
    if (early) {
      r.stopped_early = true;
      final_step = done;
      break;
    }
    if (o.stop_after > 0 && done - r.resumed_from >= o.stop_after && done < last) {
      progress.finish();
      r.steps = done;
      r.stopped = true;
      return r;
    }
  }
  progress.finish();
  if (task.export_model && lead && o.keep_last) export_last(s.best_step == final_step);
  // A run that reached its schedule's end (or stopped early) never continues: without keep_last its checkpoint
  // sheds the parameters and moments (three times the model) and keeps the state.
  if (lead && !o.keep_last && (last == o.steps || r.stopped_early)) save_state_only_checkpoint(o.out_dir, s, o, group.size());
  // A signal during the last step was announced ("stopping after this step") and then not obeyed: the command went on
  // to its final scoring and exited 0 (helper-63's probe of 2026-12-05). The run's training is done and saved; the
  // command ends as promised, and its rerun finds the run finished and does what follows. A run inside another
  // (a distill layer's) leaves that to the outer one, which records the layer first.
  if (const int sig = stop.requested(); sig != 0 && !stop.nested())
    throw Error(detail::concat("stopped by ", stop_signal_name(sig), " after step ", final_step, " of ", last,
                               ", its last: the run's training is done and ", o.out_dir, " holds it; the same command continues from there"),
                stopped_status(sig));
  r.steps = final_step;
  r.best_eval = s.best_eval;
  r.best_step = s.best_step;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.tokens_per_second = r.seconds > 0 ? static_cast<double>(tokens) / r.seconds : 0;
  return r;
}

void check_run_folder(const std::string& dir, const TrainTask& task, const std::string& command) {
  refuse_another_commands_run(dir, command);
  check_export_folders(dir, task, holds_a_run(dir));
  refuse_foreign_files_in_export_folders(dir, task);
}

void clear_run_folder(const std::string& dir, const TrainTask& task, const std::string& command) {
  check_run_folder(dir, task, command);
  settle_staged_exports(dir, task);
  remove_earlier_exports(dir, task);
  for (const char* name : {kStagedBest, "best"}) remove_export_folder(fs::path(dir) / name, task);
  for (const char* name : {kCheckpoint, "log.jsonl", kExports}) fs::remove(fs::path(dir) / name);
  std::error_code ec;
  if (fs::is_empty(dir, ec)) fs::remove(dir, ec);
}

bool writes_outputs() { return distributed::environment().lead(); }

io::OutputLock lock_run_output(const std::string& out_dir) { return writes_outputs() ? io::lock_output_dir(out_dir) : io::OutputLock(); }

namespace {
// The training state a checkpoint in `out_dir` keeps (its "state" metadata); null when there is none, or it cannot be read.
nlohmann::json checkpoint_state(const std::string& out_dir) {
  try {
    const auto f = io::SafeTensorsFile::open((fs::path(out_dir) / kCheckpoint).string());
    const auto it = f.metadata().find("state");
    if (it == f.metadata().end()) return nullptr;
    auto meta = nlohmann::json::parse(it->second);
    return meta.is_object() ? meta : nlohmann::json(nullptr);
  } catch (const std::exception&) {
    return nullptr;  // damaged: a resume names it and the way out
  }
}

nlohmann::json fingerprint_in(const nlohmann::json& meta) {
  return meta.is_object() && meta.contains("fingerprint") && meta["fingerprint"].is_object() ? meta["fingerprint"] : nlohmann::json::object();
}

// The fingerprint of the checkpoint in `out_dir`; an empty object when there is none that can be read.
nlohmann::json checkpoint_fingerprint(const std::string& out_dir) { return fingerprint_in(checkpoint_state(out_dir)); }
}  // namespace

std::string checkpoint_command(const std::string& out_dir) {
  const fs::path ckpt = fs::path(out_dir) / kCheckpoint;
  std::error_code ec;
  if (!fs::is_regular_file(ckpt, ec)) return read_log_head(out_dir).command;  // no checkpoint yet: the log's first line
  const auto meta = checkpoint_state(out_dir);
  if (meta.is_null()) return "";
  if (meta.contains("command") && meta["command"].is_string()) return meta["command"].get<std::string>();
  const auto fp = fingerprint_in(meta);
  return fp.contains("arch") ? "pretrain" : fp.contains("task") ? "finetune" : "";
}

nlohmann::json model_run_fingerprint(const std::string& model_dir) {
  // The folder as it lies: a link elsewhere to OUT/step-N is OUT/step-N (helper-38's review)
  std::error_code ec;
  fs::path dir = fs::weakly_canonical(fs::absolute(model_dir), ec);
  if (ec) dir = path_identity(model_dir);
  // A run folder (where a finetune promotes its best model, "." in its book): the run's model unless another was
  // copied over it since, or the run has promoted none yet (helper-39's and helper-40's reviews); a run from before
  // the book (no exports.json) is taken at its checkpoint's word, a book that cannot be read vouches for nothing.
  if (auto fp = checkpoint_fingerprint(dir.string()); !fp.empty())
    return holds_recorded_export(dir, ".", dir).value_or(true) ? fp : nlohmann::json::object();
  // An export folder of a run (best/, last/, step-N/) has no checkpoint of its own: the run folder above it has, and its
  // export book lists the folder with the files it holds (helper-37's review: eval of OUT/step-N found nothing; a model
  // copied into step-N/ since is no model of the run's)
  if (holds_recorded_export(dir.parent_path(), dir.filename().string(), dir).value_or(false))
    return checkpoint_fingerprint(dir.parent_path().string());
  return nlohmann::json::object();
}

LogHead read_log_head(const std::string& out_dir) {
  std::ifstream in(fs::path(out_dir) / "log.jsonl");
  std::string first;
  if (!in || !std::getline(in, first) || first.size() > 4096) return {};  // a first line this long is no log of ours
  try {
    const auto j = nlohmann::json::parse(first);
    LogHead head;
    // the line a run writes first, {"step": 0, "command": …}: any JSON-lines log with an integer step (HF's, PyTorch's)
    // was taken for a run of mimic's, replaced, and what its folders held adopted (the fifteenth probe of 2026-11-30)
    head.mimic = j.is_object() && j.contains("step") && j["step"] == 0 && j.contains("command") && j["command"].is_string();
    if (head.mimic) head.command = j["command"].get<std::string>();
    return head;
  } catch (const std::exception&) {
    return {};
  }
}

bool starts_fresh(const TrainOptions& options) {
  return options.fresh || !fs::exists(fs::path(options.out_dir) / kCheckpoint);
}

void promote_best(const std::string& out_dir) {
  const fs::path best = fs::path(out_dir) / "best";
  if (!fs::exists(best)) return;
  const auto lock = io::lock_output_dir(out_dir);
  run::check_before_promotion(out_dir);
  // config.json last: until it is there, a first promotion cut short leaves no directory that looks like a
  // model; a rerun promotes again.
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(best))
    if (e.is_regular_file()) files.push_back(e.path());
  std::stable_partition(files.begin(), files.end(), [](const fs::path& f) { return f.filename() != "config.json"; });
  // a rename within one directory tree is atomic: a promotion cut short leaves the rest in best/, and a rerun
  // moves it. The export book names best/'s files at "." once they are there (until then, a file in out_dir may be
  // one of best/'s: run_state.cpp's check_folder_in_book).
  for (const auto& f : files) io::move_file_durably(f.string(), (fs::path(out_dir) / f.filename()).string());
  run::record_export_at(out_dir, "best", ".");
  remove_export_folder(best, TrainTask{});  // empty by now: every file was moved
  run::forget_export(out_dir, "best");
}

}  // namespace mimic::train
