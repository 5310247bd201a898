// What every finetuning task shares: which parameters train (--train, LoRA, frozen embeddings), the
// paper's presets, the checkpoint fingerprint, and the model hand-off to the training engine.
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mimic/finetune/lora.h"
#include "mimic/train/trainer.h"

namespace mimic::models { class Model; }

namespace mimic::finetune {

// Which parameters train.
//   all          every parameter (kernels' included)
//   attention    the attention blocks: the q, k, v and output projections (weights and biases) and the
//                layer's kernel parameters (feature maps, SLA gates)
//   feature-maps the kernels' parameters only (a softmax model has none: an error)
// With LoRA the adapted projections' own weights and biases are frozen and the LoRA matrices train, together
// with whatever else the selection names (default with LoRA: feature-maps, i.e. LoRA + kernels). A
// classifier's head (pooler, classifier) trains under every selection, and --freeze-embeddings removes the
// embeddings from any selection.
enum class TrainSet { All, Attention, FeatureMaps };
TrainSet train_set_from_name(const std::string& name);  // all | attention | feature-maps
const char* train_set_name(TrainSet s);

// The Hedgehog paper's finetuning settings (App. C.2): GPT-2 (pretrained conversion, next-token prediction):
// AdamW, lr 6e-4, weight decay 0.01 (no schedule stated: the engine's warm-up + cosine to 10%); BERT
// (finetuned conversion): lr 1e-5, weight decay 0, cosine schedule (to zero).
//
// And mimic's own second stage of a conversion, `kd` — the default whenever `--kd` is given: logit distillation from
// the original teacher at lr 3e-4 with half the blocks holding a copied span (the copy curriculum), every weight
// training. Measured on gpt2-mini (docs/finetune.md, "A second stage that keeps recall"; validation split): with 8
// heads kept by the probe it keeps the converted model's copy gain (3.26 → 3.30 nats/token; 3.36 at lr 1e-4, within
// the interval of ±0.10) where lr 6e-4 loses some (3.15), at perplexity 193.3 (1e-4: 193.9); all-linear, the rate is
// what counts: 195.9 at 3e-4, 200.5 at 1e-4 (the copy blocks cost 0.2–0.5 there). The LM loss alone at 6e-4 erased
// recall on an earlier placement.
struct Preset {
  double lr = 0;
  double weight_decay = 0;
  double min_lr_ratio = 0;
  double copy_fraction = 0;  // the copy curriculum's share of blocks (causal LM on a prose corpus; --copy-fraction overrides)
};
Preset preset(const std::string& name);  // gpt2 | bert | kd (a family's finetune_preset names its default; --kd picks kd)

// Network parameter names: the kernels' parameters, a classifier's head (the attention projections are the
// model family's: models::Family::is_attention_projection).
bool is_kernel_parameter(const std::string& name);
bool is_classifier_head(const std::string& name);

struct FinetuneOptions {
  std::string model_dir;
  std::string teacher_dir;              // evaluated side by side at the end when set
  std::optional<TrainSet> train_set;    // unset: all, or feature-maps with LoRA
  LoraOptions lora;
  // Keep the embeddings group (models::Family::is_embedding) as loaded: no gradients, not in the optimizer, so the
  // result's embedding tensors are the base model's bit for bit.
  bool freeze_embeddings = false;
  // Keep the heads a conversion kept softmax as loaded: their query, key, value and output-projection blocks
  // (models::Family::head_slices) get no gradient and are put back after every step. What a second stage may not
  // move when it must not erase the recall those heads carry (QK-Restore's observation). A converted model only;
  // not with LoRA (whose adapters would move those blocks anyway).
  bool freeze_kept_heads = false;
  // Storage of the exported weights: float32 by default, so trained values are kept as trained (a model
  // loaded from fp16 would otherwise round every update); unset: each tensor in the type it was loaded with.
  std::optional<io::DType> export_dtype = io::DType::F32;
  uint64_t seed = 0;
  // Where the model, its teacher and LoRA adapters compute and the batches go (--device); the CPU by default.
  c10::Device device = c10::Device(c10::kCPU);
  // One export on disk by default: the best model, promoted into out_dir; no last/ and a state-only final checkpoint
  // (train::TrainOptions::keep_last). keep_last brings last/ back, as a link to out_dir when the last step was the best.
  train::TrainOptions train = [] {
    train::TrainOptions t;
    t.keep_last = false;
    t.link_last_to_best = true;
    return t;
  }();
  // Said at once, before training, where a run may be what the user did not mean (a --teacher other than the model
  // a converted student came from): the CLI prints it on stderr; unset, nothing is said. Rank 0 only.
  std::function<void(const std::string&)> note;
  TrainSet effective_train_set() const { return train_set.value_or(lora.rank > 0 ? TrainSet::FeatureMaps : TrainSet::All); }
};

// The model as it trains: LoRA-wrapped when asked, every parameter outside the selection frozen
// (requires_grad off), and the trainable ones named for the engine (network names, LoRA matrices after them).
struct Prepared {
  std::unique_ptr<models::Model> model;
  std::vector<std::pair<std::string, at::Tensor>> trainable;
  int64_t frozen = 0;  // parameter tensors kept as loaded
  models::SaveOptions save;  // how the exports are written (options.export_dtype)
  int64_t frozen_heads = 0;  // heads kept as loaded (freeze_kept_heads)
  std::function<void()> after_step;  // puts the frozen heads' blocks back (TrainTask::after_step)
  std::string trainable_described;  // describe_trainable, of this model
  int64_t trainable_parameters = 0;  // the elements of the tensors that train (a frozen kept head's blocks among them)
};
Prepared prepare(std::unique_ptr<models::Model> model, const FinetuneOptions& options);

// Fills the task's parameters, training switch and export from `prepared` (the task keeps a reference).
void bind(train::TrainTask& task, Prepared& prepared);

// The teacher of options.teacher_dir (no model when unset), checked before any training: the same architecture
// and vocabulary as `student`. Its digest (models::model_digest) is read once, for the note on a teacher other than
// a converted student's own and for the checkpoint's fingerprint: hashing a large teacher's weights takes seconds.
struct Teacher {
  std::unique_ptr<models::Model> model;
  std::string digest;
};
// `what_it_means`: how the note on a teacher other than a converted student's own ends (what the run does with it).
Teacher load_teacher(const FinetuneOptions& options, models::Model& student, const std::string& what_it_means);

// The settings a checkpoint must share to be resumed, common to every task: model, seed, schedule,
// selection, LoRA; the task adds its data settings.
nlohmann::json fingerprint(const FinetuneOptions& options);
// The values of the keys fingerprint() leaves out at their default (train::TrainOptions::fingerprint_defaults).
nlohmann::json fingerprint_defaults();

// Adds the digests of the weights the run starts from and distils from (models::model_digest), and of what else
// makes the starting model compute as it does (models::network_description of its config.json,
// models::attention_digest of its layers' attention: issue 38 found a resume onto the same weights under another
// config or other feature maps): a rerun whose model or teacher folder now holds another model under the same path
// does not continue the old run, and the ranks of a distributed run find out that they loaded different models.
// The teacher's only when it trains the model (`distils`: --kd); a teacher that is only scored beside it at the end
// changes nothing the run computes (helper-55's probe of 2026-12-04: a finished run rerun with --teacher to compare
// was refused as a run with other settings).
void add_weight_digests(nlohmann::json& fingerprint, models::Model& model, const Teacher& teacher, bool distils, const std::string& model_dir,
                        const std::string& teacher_dir);

// A one-line description of what trains ("all", "attention + LoRA r=8 scale=2", ...). `has_kernels`: whether the
// model holds kernel parameters (LoRA's default set, feature-maps, trains LoRA alone on a plain model); `head`: whether
// a classifier's head (pooler, classifier) trains, which it does under every selection — named beside any but all
// ("LoRA r=4 scale=2" hid a head of two thirds of the trainable parameters: helper-92's probe).
std::string describe_trainable(const FinetuneOptions& options, bool has_kernels, bool head = false);
// --freeze-embeddings where the embeddings do not train anyway (--train attention|feature-maps, LoRA's default set),
// or where the run found none held (`holds_nothing`): the refusal, "" when the flag holds something. The options alone
// decide the first, which the CLI says as a usage error (it exited 1: helper-60's probe of 2026-12-04).
std::string freeze_embeddings_refusal(const FinetuneOptions& options, bool holds_nothing = false);
// --freeze-kept-heads with --lora: the library's refusal, which the CLI says as a usage error (the line alone decides it)
inline constexpr const char* kFreezeKeptHeadsWithLora =
    "--freeze-kept-heads keeps the kept heads' projections as loaded; LoRA's adapters would move them: use one of the two";

}  // namespace mimic::finetune
