#include "mimic/distill/checkpoint.h"

#include <torch/torch.h>

#include <filesystem>

#include "mimic/core/error.h"
#include "mimic/core/json_keys.h"
#include "mimic/distill/maps_file.h"
#include "mimic/io/safetensors.h"
#include "mimic/train/trainer.h"

namespace fs = std::filesystem;

namespace mimic::distill {

using analysis::LayerMetrics;

namespace {
const char* kDoneFormat = "mimic-distill-checkpoint-2";
const char* kDoneName = "done.safetensors";
}  // namespace

nlohmann::json layer_json(const LayerResult& r) {
  return {{"layer", r.layer},     {"trained", r.trained},           {"epochs_run", r.epochs_run},
          {"steps", r.steps},     {"best_epoch", r.best_epoch},     {"best_val_loss", analysis::json_number(r.best_val_loss)},
          {"before", r.before.to_json()}, {"after", r.after.to_json()}};
}

LayerResult layer_from_json(const nlohmann::json& j) {
  LayerResult r;
  const std::string where = "a finished layer's state";
  r.layer = json_int(j, "layer", where, 0);
  r.trained = json_bool(j, "trained", where);
  r.epochs_run = json_int(j, "epochs_run", where, 0);
  r.steps = json_int(j, "steps", where, 0);
  r.best_epoch = json_int(j, "best_epoch", where, 0);
  r.best_val_loss = analysis::number_from_json(j, "best_val_loss");
  r.before = LayerMetrics::from_json(json_key(j, "before", where));
  r.after = LayerMetrics::from_json(json_key(j, "after", where));
  return r;
}

void Done::add(const LayerResult& r, const std::vector<std::pair<std::string, at::Tensor>>& layer_tensors) {
  layers.push_back(r);
  for (const auto& [n, x] : layer_tensors) tensors.emplace_back(layer_prefix(r.layer) + "." + n, x);
}

bool is_checkpoint_folder(const std::string& dir) {
  std::error_code ec;
  const auto done = fs::path(dir) / kDoneName;
  if (!fs::is_regular_file(done, ec)) return false;
  try {
    const auto md = io::SafeTensorsFile::open(done.string()).metadata();
    return md.count("format") && md.at("format") == kDoneFormat;
  } catch (const Error&) {
    return false;  // not distill's file: the folder is somebody else's
  }
}

CheckpointFolder::CheckpointFolder(const std::string& out)
    : out_(out), dir_(out + ".ckpt"), done_path_(dir_ + "/" + kDoneName) {}

std::string CheckpointFolder::layer_dir(int64_t layer) const { return dir_ + "/" + layer_prefix(layer); }

// What a distillation keeps there: done.safetensors (and its writer's temporaries) and one folder per layer, by the
// names layer_prefix() gives (layer_NN, two digits or more).
bool CheckpointFolder::is_ours(const std::string& name) const {
  if (name == kDoneName || name.rfind(std::string(kDoneName) + ".tmp.", 0) == 0) return true;
  const std::string stem = layer_prefix(0).substr(0, layer_prefix(0).size() - 2);  // "layer_"
  return name.size() >= stem.size() + 2 && name.rfind(stem, 0) == 0 && name.find_first_not_of("0123456789", stem.size()) == std::string::npos;
}

void CheckpointFolder::save(const Done& d) const {
  std::vector<std::pair<std::string, at::Tensor>> t;
  for (const auto& [n, x] : d.tensors) t.emplace_back("done/" + n, x);
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& r : d.layers) layers.push_back(layer_json(r));
  io::SaveOptions so;
  so.metadata = {{"format", kDoneFormat}, {"state", nlohmann::json{{"fingerprint", fingerprint_}, {"done", layers}}.dump()}};
  io::save_safetensors(done_path_, t, so);
}

Done CheckpointFolder::open(bool fresh, const nlohmann::json& fingerprint, const nlohmann::json& defaults) {
  fingerprint_ = fingerprint;
  defaults_ = defaults;
  if (fs::exists(dir_) && !fs::is_directory(dir_)) {
    // A file there is an older mimic's checkpoint only if it says so; --fresh removes that, never a file of the user's
    // (the tenth probe: any file was called a checkpoint, and the --fresh suggested deleted it).
    bool ours = false;
    try {
      const auto f = io::SafeTensorsFile::open(dir_);
      const auto it = f.metadata().find("format");
      ours = it != f.metadata().end() && it->second.rfind("mimic", 0) == 0;
    } catch (const Error&) {
    }
    MIMIC_CHECK(ours, dir_, " is a file that is not a mimic checkpoint, where distill keeps its checkpoint folder: move it, or give "
                "another --out");
    if (fresh) fs::remove(dir_);
  }
  MIMIC_CHECK(!fs::exists(dir_) || fs::is_directory(dir_), dir_, " is a checkpoint of an older mimic (one file); pass --fresh to start over");
  // The folder stands for the whole run (it and --out): locked before anything is written, and emptied rather than
  // removed by --fresh, so that the lock stays on the folder the run goes on to use.
  out_lock_ = io::lock_output_file(out_);  // first: it refuses a folder another run holds, before OUT.ckpt is made in it
  lock_ = io::lock_output_dir(dir_);
  // Anything else there is not this command's to resume into or to delete with --fresh (the probe of 2026-11-27:
  // --fresh emptied a folder holding a user's files).
  std::vector<fs::path> layers;
  for (const auto& e : fs::directory_iterator(dir_)) {
    const std::string name = e.path().filename().string();
    MIMIC_CHECK(is_ours(name), dir_, " holds ", name, ", which a distillation does not write: it is not this run's checkpoint folder "
                "(distill keeps its checkpoint in OUT.ckpt); move it, or choose another --out");
    std::error_code ec;
    if (name == kDoneName || name.rfind(std::string(kDoneName) + ".tmp.", 0) == 0) continue;
    // a layer's run was written through a link there, outside --out (the fifteenth probe of 2026-11-30)
    MIMIC_CHECK(!e.is_symlink(ec), e.path().string(), " is a link, where distill keeps a layer's run: it would write through it; remove "
                "the link, or choose another --out");
    if (e.is_directory(ec)) layers.push_back(e.path());  // a file there fails that layer's run, naming it
  }
  if (fresh) {
    // each layer's folder is a training run's: what it wrote there goes, as a fresh training run removes its own, after
    // every layer is checked (a kernel copied into best/ or last/, a note of the user's, went with remove_all before)
    train::TrainTask layer_run;
    layer_run.is_export_file = is_layer_export_file;
    for (const auto& l : layers) train::check_run_folder(l.string(), layer_run, kLayerRunCommand);
    for (const auto& l : layers) {
      fs::remove(l / "before.json");
      train::clear_run_folder(l.string(), layer_run, kLayerRunCommand);
    }
    for (const auto& e : fs::directory_iterator(dir_))
      if (!fs::is_directory(e.path())) fs::remove(e.path());  // done.safetensors and its writer's temporaries
  }
  Done d;
  if (!fs::exists(done_path_)) {
    save(d);  // the settings are checked first on any resume
    return d;
  }
  resumed_ = true;
  auto f = io::SafeTensorsFile::open(done_path_);
  auto fmt = f.metadata().find("format");
  auto st = f.metadata().find("state");
  MIMIC_CHECK(fmt != f.metadata().end() && fmt->second == kDoneFormat && st != f.metadata().end(), done_path_,
              ": not a mimic distillation checkpoint");
  const std::string where = done_path_ + " (its state)";
  const auto state = json_parse(st->second, where);
  const auto& saved = json_key(state, "fingerprint", where);
  if (saved != fingerprint) {
    const auto diff = saved.is_object() ? json_first_difference(saved, fingerprint, "the default", defaults_) : std::nullopt;
    fail(done_path_, " belongs to a distillation with other settings: ",
         diff ? diff->key + " (" + diff->first + " then, " + diff->second + " now)" : saved.dump(),
         "; to resume, run with the settings it was written with (naming any default that has changed since), or pass --fresh "
         "(or another --out) to start over");
  }
  const auto& done = json_key(state, "done", where);
  MIMIC_CHECK(done.is_array(), where, ": key 'done' must be a list of finished layers, got ", done.dump().substr(0, 80));
  for (const auto& r : done) d.layers.push_back(in_file(done_path_, [&] { return layer_from_json(r); }));
  for (const auto& n : f.names())
    if (n.rfind("done/", 0) == 0) d.tensors.emplace_back(n.substr(5), f.load(n));
  return d;
}

}  // namespace mimic::distill
