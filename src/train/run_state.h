// The state a training run keeps in its output folder (internal to src/train/: trainer.cpp's train(), run_state.cpp and
// exports.cpp): the checkpoint (parameters, optimizer moments, random states and the run's numbers, written under its
// final name only complete) and the journal log.jsonl in run_state.cpp; the staged best export, the export book
// (exports.json) and the stagings in exports.cpp. Not an API: nothing outside src/train/ includes it.
#pragma once
#include <ATen/core/Generator.h>

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mimic/train/optimizer.h"
#include "mimic/train/trainer.h"

namespace mimic::train::run {

namespace fs = std::filesystem;

inline constexpr const char* kCheckpoint = "checkpoint.safetensors";

struct Saved {
  int64_t step = 0;
  double best_eval = 0;
  int64_t best_step = 0;
  nlohmann::json data;
  // The log's loss is a mean over the steps since the last log line. A checkpoint between two log lines keeps
  // the steps summed so far, so that a resumed run logs the mean the uninterrupted one logs (found by
  // bench/soak.sh: the line after a resume averaged only the steps since the resume).
  double window_loss = 0;
  int64_t window_n = 0;
  // A finished run's checkpoint without keep_last: the state alone, no parameters or moments (TrainOptions::keep_last)
  bool state_only = false;
  // The files of the best export (best/, later promoted into out_dir by finetune and pretrain): name → file_digest.
  // A rerun of a finished run checks them, so that it never reports a run's result over files changed since.
  nlohmann::json best_files = nlohmann::json::object();
};

// The training state as the checkpoint stores it, and as rank 0 hands it to the other ranks at the start.
nlohmann::json state_json(const Saved& s);

Saved saved_from_json(const nlohmann::json& meta, const std::string& where);

// name → digest of the regular files an export wrote into `dir`
nlohmann::json file_digests(const fs::path& dir);

// A finished run's best export is in out_dir/best, or promoted into out_dir (a promotion cut short leaves some of
// each): every file must be there with the bytes the run wrote. A rerun checks this before it reports the run's
// result, and a resumed run before it trains on: best/ changes only after the checkpoint that records it (below,
// kStagedBest), so it always holds what the checkpoint says.
void check_best_files(const std::string& out_dir, const Saved& s);

// A new best model is exported into best.new/ and takes best/'s place only once a checkpoint records its digests: a
// run killed between the export and that checkpoint leaves best/ as its last checkpoint knows it, and a resume can
// check best/ (a foreign model copied into an unfinished run's best/ was promoted as the run's result: issue 38).
// Before, a run killed in that window resumed with a best/ newer than its checkpoint.
inline constexpr const char* kStagedBest = "best.new";

// best.new/ into best/'s place (remove_all then rename: a kill between the two leaves best.new/ alone, which the
// resume finishes).
void swap_in_staged_best(const std::string& out_dir, const TrainTask& task);

// Another command's file at the checkpoint's name (a record, maps, a model's weights: known by its bytes) is refused,
// --fresh or not: the refusal said "--fresh starts over", and that --fresh replaced it (the fifteenth probe of
// 2026-11-30). A checkpoint that cannot be read at all is damage, which the resume names and --fresh replaces.
// Returns whether `path` holds a checkpoint that can be read (a mimic training checkpoint).
bool refuse_foreign_checkpoint(const std::string& path);

// Whether out_dir holds a training run: a checkpoint that can be read, or a log with something in it. A damaged
// checkpoint alone, or an empty log, is no evidence of one: with them, a fresh start removed the models a folder's
// export folders held as the run's (the sixteenth probe of 2026-11-30); such a folder is checked as one without a run.
bool holds_a_run(const std::string& out_dir);

// Another command's run in out_dir (its checkpoint's or log's command) is refused, --fresh included: distill's layer
// runs named none, and pretrain --fresh replaced one copied into its folder, distill --fresh a finetune run (the
// sixteenth probe). `command` "" (a library caller naming none) checks nothing.
void refuse_another_commands_run(const std::string& out_dir, const std::string& command);

// Before a promotion into out_dir: every file there at a model's name is the one the book records (a model copied into
// the folder while the run trained was replaced by the promotion: the sixteenth probe)
void check_before_promotion(const std::string& out_dir);

// best/ and best.new/ hold what the run exported there (a model's files), nothing else: checked when a run starts,
// fresh or resumed, so that a file of the user's placed there is named and refused before any training (a fresh
// finetune removed best/ with the notes in it: the tenth probe) rather than removed or promoted into the folder.
// `earlier_run`: out_dir holds a run (its checkpoint or log). Without one, the export folders are nobody's this run
// knows: any that holds something (another command's export, conversion, report or run placed there) is refused,
// --fresh or not — a fresh start replaced or removed them, exit 0 (the thirteenth probe of 2026-11-30). With one, every
// file there at a name the run's exports write must be the one its export book (kExports, below) records.
void check_export_folders(const std::string& out_dir, const TrainTask& task, bool earlier_run);
// The export book, out_dir/exports.json: what the run wrote into each folder it exports into — best.new, best, last,
// step-N, and "." (out_dir itself, where finetune and pretrain promote the best model) — as folder → {file → digest},
// or folder → null while an export there is under way (the run's, whatever it left). A run removes or replaces a file
// there only when the book records it with those bytes: a model copied by hand into a finished run's best/, last/ or
// step-N/ was removed by --fresh or replaced by a rerun, exit 0 (the fourteenth probe of 2026-11-30). A run folder from
// before the book (a checkpoint or log, no exports.json) adopts what its folders hold, as the run's: the rule before it.
inline constexpr const char* kExports = "exports.json";
// Every file in dir's export folders (best, best.new, last, step-N, their stagings) is one the run's exports write:
// before a folder is cleared (distill --fresh), so that a file of the user's there is named before anything goes. (Kept,
// it kept its folder once the run's files went, and the run started on the cleared folder refused it as nobody's: the
// sixteenth probe of 2026-11-30.)
void refuse_foreign_files_in_export_folders(const std::string& dir, const TrainTask& task);
// Whether `dir` holds the files the export book of run folder `run` records under `entry` ("." for the run folder
// itself, "best", "step-N", ...), each with the bytes recorded: false when the book records nothing there (a run that
// has not promoted or exported it yet, or was cut short), and when the book there cannot be read (a link, damaged or
// edited: it vouches for nothing); nullopt when there is no book (a run from before it). Never throws for a book: a
// question asked of any folder (model_run_fingerprint), not a run's check.
std::optional<bool> holds_recorded_export(const fs::path& run, const std::string& entry, const fs::path& dir);
// What an export is written into before it moves into its folder: best.part, last.part, step-N.part (export_recorded)
inline constexpr const char* kStaging = ".part";
// At a run's start, once its checks passed: an export cut short while it was written (its staging's entry null) is
// removed, one written whole is moved into its folder (a kill during the move).
void settle_staged_exports(const std::string& out_dir, const TrainTask& task);

// At a run's start, once its checks passed and an earlier run's exports were settled (removed by a fresh start, a
// staged best swapped in): the book read (adopted or begun where there is none) and written back, so that every later
// export and removal updates it.
void open_export_book(const std::string& out_dir, const TrainTask& task, bool earlier_run);
// task.export_model into out_dir/folder, recorded: written into out_dir/folder + kStaging (the book's entry for it null
// while it is written, its digests once it is whole), then moved into the folder. Returns the digests.
nlohmann::json export_recorded(const std::string& out_dir, const std::string& folder, const TrainTask& task);
// The book's entry for `folder` dropped (its files removed)
void forget_export(const std::string& out_dir, const std::string& folder);
// The book's entry for `from` given to `to` as well, merged over what `to` records (its files renamed or moved there)
void record_export_at(const std::string& out_dir, const std::string& from, const std::string& to);

// A snapshot's folder, out_dir/step-N, made ready just before the export: a link placed there while the run trained
// is removed (never what it names: a link made after the start's check was written through, the thirteenth probe).
void clear_link_at_export(const std::string& dir);
// An export folder removed: a link alone (never what it points to), else the files the export writes
// (task.is_export_file) and then the folder, which must be empty by then (a mimic::Error naming what is left otherwise).
void remove_export_folder(const std::filesystem::path& dir, const TrainTask& task);

// At a run's start: a staged best/ its checkpoint records (killed after the checkpoint, before the swap) is swapped in;
// one it does not record (killed before that checkpoint, or a fresh start) is removed.
void settle_staged_best(const std::string& out_dir, const Saved* s, const TrainTask& task);

// What an earlier run in out_dir exported beside its best model: last/ (a folder, or the link to out_dir) and the
// step-N/ snapshots.
void remove_earlier_exports(const std::string& out_dir, const TrainTask& task);

// The generator of the GPU the parameters are on (dropout there draws from it, not from the CPU's), or none: a
// checkpoint keeps its state beside the CPU generator's, so that a run resumed on the same device continues.
std::optional<at::Generator> device_generator(const TrainTask& task);

// What every checkpoint's state says of the run beside the step's numbers: which run (fingerprint), how many
// processes, which command; and the file written under its final name with them.
void write_checkpoint(const std::string& dir, const std::vector<std::pair<std::string, at::Tensor>>& tensors, const Saved& s,
                      const TrainOptions& o, int world_size, bool state_only);

void save_checkpoint(const std::string& dir, const TrainTask& task, const AdamW& opt, const Saved& s,
                     const TrainOptions& o, int world_size);

// What a finished run without keep_last keeps: its state, so that a rerun ends at once (the random state only
// because a checkpoint file holds at least one tensor).
void save_state_only_checkpoint(const std::string& dir, const Saved& s, const TrainOptions& o, int world_size);

Saved load_checkpoint(const std::string& path, TrainTask& task, AdamW& opt, const TrainOptions& o, int world_size);

// Keeps only log lines of steps up to `step` (a killed run may have logged past its last checkpoint). Only the
// last line may be cut short — a kill mid-append leaves it without its newline — and only it is dropped unread;
// any other line that is not a JSON object with an integer `step` means the log was damaged or edited, and is an
// error naming the line rather than a line silently lost from the run's history.
void truncate_log(const std::string& path, int64_t step);

// The log is a journal, appended to a line at a time rather than replaced: a run killed mid-line leaves at
// most a partial last line, which truncate_log drops when the run resumes.
void append_log(const std::string& path, const nlohmann::json& j);

}  // namespace mimic::train::run
