// The `distill` stage: teach linear attention to mimic a softmax teacher, layer by layer (Hedgehog,
// Zhang et al. 2024, Eq. 3 and App. C.2; SLA head gates, arXiv 2602.01744 Eq. 3–7).
//
// Every layer is trained on its own, teacher-forced: the student (a distillable kernel, attention/distillable.h: a feature map,
// optionally SLA gates) reads the teacher's own q, k, v — from a record file (docs/formats.md) or captured
// on the fly from the model — and is scored against the softmax weights recomputed from q, k with the
// recorded scale, causal mask and key padding. One loss function (distill_loss) serves both sources.
// Output format and metrics: docs/distill.md.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mimic/core/precision.h"
#include "mimic/analysis/metrics.h"

namespace mimic::attention { class DistillableKernel; }

namespace mimic::distill {

enum class LossKind { CE, MSE, CEMSE };
LossKind parse_loss(const std::string& name);  // "ce", "mse", "ce+mse"
std::string loss_name(LossKind k);

struct LossSpec {
  LossKind kind = LossKind::CE;
  double ce_weight = 1.0;
  double mse_weight = 1.0;
};

struct LossValue {
  at::Tensor total;  // scalar, differentiable
  at::Tensor ce;     // scalar (undefined unless ce is part of the loss)
  at::Tensor mse;    // scalar (undefined unless mse is part of the loss)
};

// THE distillation loss (offline and online). A ce loss on negative weights (a sign-free map) is a mimic::Error. ce: mean over real query rows, heads and samples of
// −Σ_j a_ij log â_ij (a: teacher weights, â: the student's quadratic-form weights; masked keys carry no
// target mass). mse: mean over real query rows, heads, samples and dimensions of (ô − o)², ô the student's
// per-head output. ce+mse: ce_weight·ce + mse_weight·mse.
LossValue distill_loss(attention::DistillableKernel& student, const analysis::TeacherBatch& batch, const LossSpec& spec);

struct DistillOptions {
  // the teacher: a record file, or (online) a model and data
  std::string record;
  std::string model_dir, data, split = "train";
  int64_t samples = 64, seq_len = 0;  // online mode only
  std::function<void(const std::string&)> note;  // a sentence for the user before the work (a setting cut to the data)
  // the student: a distillable attention kind with its own options ("linear", "hybrid:window=64"; kinds.h
  // parse_kind_spec), the feature map and gates every such kind takes
  std::string attention = "linear";
  // empty: the kind's own (linear: hedgehog, hybrid: hedgehog_softmax); default_feature_map says which
  std::string feature_map;
  nlohmann::json map_options = nlohmann::json::object();
  bool sla = false;
  std::string train = "";  // maps | gates | both; "" = maps, or both with --sla
  // training
  std::string loss = "ce";
  double ce_weight = 1.0, mse_weight = 1.0;
  int64_t epochs = 10;
  double lr = 1e-2, weight_decay = 0.0;
  int64_t batch_size = 8;
  double val_fraction = 0.1;
  int64_t patience = 0;  // epochs without a better validation loss before stopping (0 = never)
  std::string layers = "all";
  uint64_t seed = 0;
  c10::Device device = c10::Device(c10::kCPU);  // where the students train and the online teacher runs (--device)
  Precision precision = Precision::Fp32;         // the students' training steps (--precision; metrics stay fp32)
  std::string out;  // maps.safetensors; checkpoint: out + ".ckpt"
  bool fresh = false;  // ignore (and replace) an existing checkpoint
  // evaluation only
  bool eval_only = false;
  std::string maps;  // trained maps to evaluate (else the untrained --feature-map)
  bool progress = true;
  // testing: stop (as if killed) after this many epochs in total across layers (0 = never)
  int64_t stop_after_epochs = 0;
  // testing: raise SIGINT once this many layers are distilled and recorded in this run (0 = never)
  int64_t signal_after_layers = 0;
  // testing: raise SIGINT after this step of each layer's training (0 = never)
  int64_t signal_after_step = 0;
};

struct LayerResult {
  int64_t layer = 0;
  // best_epoch: the epoch whose map is kept (lowest validation loss); 0 = no epoch beat the untrained map,
  // which is then the layer's result (its `after` equals its `before`).
  int64_t epochs_run = 0, best_epoch = 0, steps = 0;
  bool trained = false;  // false: nothing to train (a parameter-free map without gates)
  double best_val_loss = 0;
  analysis::LayerMetrics before, after;
};

struct DistillResult {
  std::string out;
  std::string student;  // the student's feature map, or its kind when it runs none (delta)
  std::vector<LayerResult> layers;
  bool resumed = false;
  bool interrupted = false;  // stop_after_epochs hit
  double seconds = 0;
  int64_t train_samples = 0, val_samples = 0;
  int64_t samples = 0;  // every sample read (val_samples overlaps train_samples with --val-fraction 0)
  // whether the validation samples are apart from the training ones (not with --val-fraction 0 or a 1-sample record)
  bool held_out() const { return train_samples + val_samples <= samples; }
  nlohmann::json to_json() const;
};

// Trains (or with eval_only, evaluates). Throws mimic::Error for bad options or files.
DistillResult distill(const DistillOptions& options);

// The feature map an attention spec's kind ("hybrid:window=8") runs when none is given: its options' feature_map as
// the kind fills it in (linear: hedgehog, hybrid: hedgehog_softmax); empty for a kind that runs no map at its own
// level (delta; mixed, whose student's options carry it). distill runs options.feature_map, or this when it is empty.
std::string default_feature_map(const std::string& attention);

// Whether `dir` is a distillation's checkpoint folder (OUT.ckpt, known by its done.safetensors in distill's format).
// Other commands refuse to write inside one: distill resumes into, and --fresh empties, a folder of its own files only.
bool is_checkpoint_folder(const std::string& dir);

// layer_prefix (the output's tensor names) and DistilledMaps (reading an output): distill/maps_file.h.

// An untrained student as distill builds it for a layer: the kernel of a distillable attention kind
// (kinds.def) with these options, with the random state a given (seed, layer) gives (performer's
// projection), so evaluations with the same seed agree. A kind that is not distillable is a mimic::Error.
std::shared_ptr<attention::DistillableKernel> untrained_student(const std::string& kind, const nlohmann::json& options,
                                                                int64_t n_head, int64_t head_dim, uint64_t seed, int64_t layer);


}  // namespace mimic::distill
