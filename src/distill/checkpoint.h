// distill's checkpoint folder, OUT.ckpt/: done.safetensors holds the run's fingerprint and its finished layers
// (their results and trained tensors); a layer in training has its own train::train folder layer_NN/ (checkpoint,
// log, best/) with before.json, its metrics before training. This file is the one place that knows that layout.
// Internal to distill.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "mimic/distill/distill.h"
#include "mimic/io/output_lock.h"

namespace mimic::distill {

nlohmann::json layer_json(const LayerResult& r);
LayerResult layer_from_json(const nlohmann::json& j);

struct Done {
  std::vector<LayerResult> layers;
  std::vector<std::pair<std::string, at::Tensor>> tensors;  // "layer_NN.<param>"
  void add(const LayerResult& r, const std::vector<std::pair<std::string, at::Tensor>>& layer_tensors);
};

// The command a layer's training run names in its checkpoint and log (TrainOptions::command): another command's run at
// OUT.ckpt/layer_NN, or a layer's run in another command's --out, is refused by either
inline constexpr const char* kLayerRunCommand = "distill";

// The file a layer's training run exports into best/ (train::TrainTask::is_export_file)
inline bool is_layer_export_file(const std::string& name) { return name == "kernel.safetensors"; }

class CheckpointFolder {
 public:
  // The folder of the distillation writing `out` (OUT.ckpt), not yet opened.
  explicit CheckpointFolder(const std::string& out);
  // Locks the folder and `out` (two commands writing one file never both succeed), refuses a folder holding what a
  // distillation does not write (it is someone else's: neither resumed into nor emptied), empties it on --fresh,
  // and reads done.safetensors — refusing one written with another fingerprint, naming the first difference — or
  // writes an empty one, so that any later resume checks the settings first. Rank 0 alone calls it.
  // `defaults`: the values of settings the fingerprint leaves out at their default (json_first_difference names them).
  Done open(bool fresh, const nlohmann::json& fingerprint, const nlohmann::json& defaults = nlohmann::json::object());
  bool resumed() const { return resumed_; }
  void save(const Done& d) const;  // done.safetensors, atomically
  std::string layer_dir(int64_t layer) const;  // layer_NN/, a layer's train::train folder
  const std::string& dir() const { return dir_; }

 private:
  bool is_ours(const std::string& name) const;
  std::string out_, dir_, done_path_;
  nlohmann::json fingerprint_, defaults_;
  bool resumed_ = false;
  io::OutputLock lock_, out_lock_;
};

}  // namespace mimic::distill
