#include "mimic/train/run_state.h"

#include <torch/torch.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "mimic/core/checked_device.h"
#include "mimic/core/error.h"
#include "mimic/core/json_keys.h"
#include "mimic/io/atomic_file.h"
#include "mimic/io/safetensors.h"

namespace mimic::train::run {

nlohmann::json state_json(const Saved& s) {
  // JSON has no infinity: "no evaluation yet" is stored as null.
  nlohmann::json best = std::isfinite(s.best_eval) ? nlohmann::json(s.best_eval) : nlohmann::json(nullptr);
  return {{"step", s.step}, {"best_eval", best}, {"best_step", s.best_step}, {"data", s.data},
          {"window_loss", s.window_loss}, {"window_n", s.window_n}, {"best_files", s.best_files}};
}

Saved saved_from_json(const nlohmann::json& meta, const std::string& where) {
  Saved s;
  s.step = json_int(meta, "step", where, 0);
  // null: no evaluation yet (JSON has no infinity); required, so a state cut short is not read as "no evaluation"
  s.best_eval = json_key(meta, "best_eval", where).is_null() ? std::numeric_limits<double>::infinity() : json_double(meta, "best_eval", where);
  s.best_step = json_int(meta, "best_step", where, 0);
  s.data = json_key(meta, "data", where);
  // absent in checkpoints written before they were kept: the window then starts at the resume
  s.window_loss = json_double_or(meta, "window_loss", where, 0);
  s.window_n = json_int_or(meta, "window_n", where, 0, 0);
  // absent in checkpoints written before they were kept: nothing to check then
  if (meta.contains("best_files")) {
    const auto& f = meta["best_files"];
    MIMIC_CHECK(f.is_object(), where, ": best_files must be an object (file name → digest), got ", f.type_name());
    for (const auto& [name, digest] : f.items())
      MIMIC_CHECK(digest.is_string() && !name.empty() && name.find('/') == std::string::npos, where,
                  ": best_files holds a bad entry '", name, "'");
    s.best_files = f;
  }
  return s;
}

bool refuse_foreign_checkpoint(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  const auto kind = io::file_kind(path);
  if (!kind) return false;  // unreadable: damage, named by the resume with --fresh as the way out
  std::string what;
  if (*kind == io::kHdf5File) what = "an HDF5 file (a record?)";
  else if (kind->empty()) what = "a safetensors file without mimic's format (a model's weights?)";
  else if (*kind != "mimic-train-checkpoint-1") what = "a " + *kind + " file";
  MIMIC_CHECK(what.empty(), path, " is ", what, ", not a mimic training checkpoint: it is not this run's to resume or replace, --fresh "
              "included; move it out of the way, or give another --out");
  return true;
}

bool holds_a_run(const std::string& out_dir) {
  const fs::path log = fs::path(out_dir) / "log.jsonl";
  std::error_code ec;
  const bool logged = fs::is_regular_file(log, ec) && fs::file_size(log, ec) > 0;
  return refuse_foreign_checkpoint((fs::path(out_dir) / kCheckpoint).string()) || logged;
}

void refuse_another_commands_run(const std::string& out_dir, const std::string& command) {
  if (command.empty()) return;
  const std::string theirs = checkpoint_command(out_dir);
  MIMIC_CHECK(theirs.empty() || theirs == command, out_dir, " holds a ", theirs, " run: ", command, " neither resumes nor replaces another "
              "command's run, --fresh included; move that run out of the way, or give another --out");
}

std::optional<at::Generator> device_generator(const TrainTask& task) {
  if (task.params.empty() || computes_on_cpu(task.params.front().second.device())) return std::nullopt;
  return at::globalContext().defaultGenerator(task.params.front().second.device());
}

void write_checkpoint(const std::string& dir, const std::vector<std::pair<std::string, at::Tensor>>& tensors, const Saved& s,
                      const TrainOptions& o, int world_size, bool state_only) {
  nlohmann::json meta = state_json(s);
  meta["fingerprint"] = o.fingerprint;
  meta["world_size"] = world_size;
  if (!o.command.empty()) meta["command"] = o.command;
  if (state_only) meta["state_only"] = true;
  io::SaveOptions so;
  so.metadata = {{"format", "mimic-train-checkpoint-1"}, {"state", meta.dump()}};
  io::save_safetensors(dir + "/" + kCheckpoint, tensors, so);
}

void save_checkpoint(const std::string& dir, const TrainTask& task, const AdamW& opt, const Saved& s,
                     const TrainOptions& o, int world_size) {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const auto& [name, p] : task.params) tensors.emplace_back("param/" + name, p.detach());
  for (auto& [name, t] : opt.state()) tensors.emplace_back("optim/" + name, t);
  tensors.emplace_back("rng/torch", at::detail::getDefaultCPUGenerator().get_state());
  if (auto g = device_generator(task)) tensors.emplace_back("rng/device", g->get_state());
  write_checkpoint(dir, tensors, s, o, world_size, /*state_only=*/false);
}

void save_state_only_checkpoint(const std::string& dir, const Saved& s, const TrainOptions& o, int world_size) {
  write_checkpoint(dir, {{"rng/torch", at::detail::getDefaultCPUGenerator().get_state()}}, s, o, world_size, /*state_only=*/true);
}

Saved load_checkpoint(const std::string& path, TrainTask& task, AdamW& opt, const TrainOptions& o, int world_size) {
  auto f = io::SafeTensorsFile::open(path);
  auto it = f.metadata().find("state");
  MIMIC_CHECK(it != f.metadata().end(), path, ": not a mimic training checkpoint");
  const std::string where = path + " (its training state)";
  const auto meta = json_parse(it->second, where);
  if (json_key(meta, "fingerprint", where) != o.fingerprint) {
    // name the first setting that differs, not both whole fingerprints (a line of hundreds of characters)
    const auto d = json_first_difference(meta["fingerprint"], o.fingerprint, "the default", o.fingerprint_defaults);
    fail(path, " was written with other settings: ", d ? d->key + " (" + d->first + " then, " + d->second + " now)" : "?",
         "; to resume, run with the settings it was written with (naming any default that has changed since), or --fresh / "
         "another --out to start over");
  }
  // Each rank's share of a batch depends on the number of ranks: another world size would not continue the same
  // run. (Absent in checkpoints written before distributed training: one process.)
  const int64_t written_by = json_int_or(meta, "world_size", where, 1, 1);
  if (written_by != world_size)
    fail(path, " was written by a run of ", written_by, written_by == 1 ? " process" : " processes", ", this one has ", world_size,
         " (WORLD_SIZE): resume with ", written_by, ", or --fresh / another --out to start over");
  if (meta.contains("state_only") && meta["state_only"] == true) {
    Saved s = saved_from_json(meta, where);
    s.state_only = true;
    return s;
  }
  torch::NoGradGuard no_grad;
  for (auto& [name, p] : task.params) {
    std::string key = "param/" + name;
    MIMIC_CHECK(f.contains(key), path, ": checkpoint has no parameter '", name, "'");
    auto t = f.load(key);
    MIMIC_CHECK(t.sizes() == p.sizes(), path, ": parameter '", name, "' has shape ", t.sizes(), ", model has ", p.sizes());
    p.copy_(t);
  }
  std::vector<std::pair<std::string, at::Tensor>> state;
  for (const auto& n : f.names())
    if (n.rfind("optim/", 0) == 0) state.emplace_back(n.substr(6), f.load(n));
  opt.load_state(state);
  auto gen = at::detail::getDefaultCPUGenerator();
  gen.set_state(f.load("rng/torch"));
  if (auto g = device_generator(task); g && f.contains("rng/device")) g->set_state(f.load("rng/device"));
  return saved_from_json(meta, where);
}

void truncate_log(const std::string& path, int64_t step) {
  if (!fs::exists(path)) return;
  const std::string text = io::read_text_file(path);
  std::istringstream is(text);
  std::string line, kept;
  for (int64_t n = 1; std::getline(is, line); ++n) {
    const bool cut_short = is.eof() && !text.empty() && text.back() != '\n';
    if (cut_short) break;
    const std::string where = path + " line " + std::to_string(n);
    const auto j = json_parse(line, where);
    MIMIC_CHECK(j.is_object(), where, ": a log line is a JSON object, got ", j.type_name());
    if (json_int(j, "step", where, 0) <= step) kept += line + "\n";
  }
  io::write_text_atomically(path, kept);
}

void append_log(const std::string& path, const nlohmann::json& j) {
  std::ofstream os(path, std::ios::app);
  os << j.dump() << "\n";
}
}  // namespace mimic::train::run
