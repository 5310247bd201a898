// The model facade used by the CLI and the pipeline stages: load a HF-layout directory, run it, save it.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "mimic/io/tensor_store.h"

namespace torch::nn { class Module; }
namespace mimic::attention {
class AttentionKernelImpl;
class KernelCache;
struct AttentionCapture;
}  // namespace mimic::attention

namespace mimic::models {

struct ForwardInputs {
  at::Tensor input_ids;       // int64 [B, T]
  at::Tensor attention_mask;  // optional int64/bool [B, T], 1 = real token; undefined = all real
  at::Tensor token_type_ids;  // optional int64 [B, T] (BERT); undefined = zeros
  // Optional bool [B, T]: run the LM / MLM head only at these positions; logits are then [N, V] in
  // row-major order of the true positions (masked-LM training scores ~15% of the tokens).
  at::Tensor logits_positions;
  // false: skip the LM head (logits stay undefined), for a loss that applies the head itself to
  // last_hidden_state with Model::lm_head_weight() (train/lm_head_loss.h). Networks without such a head ignore it.
  bool lm_head = true;
};

struct ForwardOutputs {
  at::Tensor last_hidden_state;  // float [B, T, d] (after GPT-2's ln_f)
  at::Tensor logits;             // GPT-2: LM logits [B, T, V]; BERT: MLM logits [B, T, V] or classifier
                                 // logits [B, num_labels] when that head exists; undefined otherwise
  at::Tensor pooled;             // BERT pooler output [B, d] when the pooler exists
};

class Family;  // models/family.h

struct ModelSummary {
  const Family* family = nullptr;  // what the stages ask (causal, LoRA targets, ...) instead of model_type
  std::string model_type;   // the family's model_type: "gpt2" | "bert" | "llama" | ...
  std::string head;         // "lm" | "mlm" | "cls" | "none"
  int64_t n_layer = 0, n_head = 0, d_model = 0, d_ff = 0, vocab_size = 0, max_positions = 0;
  int64_t n_kv_head = 0, head_dim = 0;  // key/value heads (n_head without grouped-query attention), a head's width
  bool qkv_bias = false;                // the Llama family's q/k/v biases are there (Qwen2, attention_bias)
  int64_t num_labels = 0;   // classifier only
  std::vector<std::string> labels;  // classifier only: its label names by id (ModelConfig::labels; empty: unnamed)
  int64_t classifier_seq_len = 0;   // classifier only: the length it was finetuned at, if its config says (ModelConfig)
  int64_t parameters = 0;   // unique parameters (tied weights counted once)
  std::string rotary;       // the rotary settings as read ("theta 500000, llama3 scaling: factor 32, ..."); "" without rotation
  std::string context_note; // why max_positions is not the config's context key (ModelConfig::context_note; empty: it is)
};

// How Model::save writes the weights.
struct SaveOptions {
  // Store every floating tensor as this type (F32, F16 or BF16; config.json's torch_dtype follows);
  // unset: each tensor in the type it was loaded with.
  std::optional<io::DType> dtype;
  // Non-empty: a sharded checkpoint (model-0000i-of-0000n.safetensors + model.safetensors.index.json),
  // one shard per group (by file key) and a last one with the rest; empty: one model.safetensors.
  std::vector<io::ShardGroup> shards;
};

// How a refusal names a model's context: "the model's context of 4096 (sliding_window; max_position_embeddings 32768)"
// — with where a context capped below the config's key comes from (`note`: ModelSummary/ModelConfig::context_note),
// so that a Mistral's 4,096 is not taken for a misread 32,768.
std::string context_words(int64_t context, const std::string& note);
std::string context_words(const ModelSummary& s);

// The one check of a --seq-len against a model, so that record, distill, finetune and eval word it alike and
// refuse it before any work (a classifier's over-long length failed inside the model's forward, naming no option):
// at least `least` tokens (`least_why` says why, e.g. "[CLS] token [SEP]"; may be empty), at most `context`
// (`context_note`: why it is capped, as context_words).
void check_seq_len(int64_t seq_len, int64_t context, const std::string& context_note, int64_t least = 2, const std::string& least_why = "");

// True for the embedding tensors (by network name or file key) of any registered family (Family::is_embedding):
// BERT's "embeddings." group (word, position and token-type embeddings, their LayerNorm, the position_ids
// buffer), GPT-2's wte and wpe.
bool is_embedding(const std::string& name);
// The shard group of those tensors ("embeddings").
io::ShardGroup embeddings_group();

// Where incremental decoding of a causal model stands: one kernel cache per layer (softmax: the KV cache,
// growing; linear: the recurrent state, constant) and the number of tokens consumed. Made by
// Model::new_decode_state for the kernels the model has at that moment; clone() gives an independent state
// (linear states are shared until replaced; KV caches, written in place, are copied).
class DecodeState {
 public:
  DecodeState();
  ~DecodeState();
  DecodeState(DecodeState&&) noexcept;
  DecodeState& operator=(DecodeState&&) noexcept;
  int64_t position() const { return position_; }
  int64_t bytes() const;  // tensor bytes held by the caches
  DecodeState clone() const;
  std::vector<std::unique_ptr<attention::KernelCache>> layers;
  int64_t batch = 0;  // fixed by the first forward_step

 private:
  friend class Model;
  int64_t position_ = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual ModelSummary summary() const = 0;
  virtual ForwardOutputs forward(const ForwardInputs& in) = 0;
  // Tensors under the names and in the key layout they were loaded from (e.g. with or without the
  // `transformer.` prefix, LayerNorm gamma/beta or weight/bias), ready for save_safetensors.
  virtual std::vector<std::pair<std::string, at::Tensor>> state_dict() const = 0;
  virtual torch::nn::Module& module() = 0;
  // The LM head's weight [V, d] when the head is exactly logits = last_hidden_state · weightᵀ (GPT-2: the token
  // embedding it is tied to, the parameter itself, so gradients through it train the embedding); undefined when
  // the model has no such head (BERT's MLM head adds a transform and a bias, a classifier is no LM head).
  virtual at::Tensor lm_head_weight() { return {}; }
  // Writes config.json + the weights (+ the tokenizer files and generation_config.json of the source directory) to `dir`, replacing
  // weights of the other layout (model.safetensors vs. shards and index) left there by an earlier save.
  // Every file is written atomically, while this process holds `dir` (io::lock_output_dir).
  virtual void save(const std::string& dir, const SaveOptions& options) const = 0;
  void save(const std::string& dir) const { save(dir, SaveOptions{}); }

  // Attention per layer: replace the kernel (softmax by default) or attach a capture that receives the
  // per-head q, k, v, outputs (and weights on request) of every forward pass; nullptr detaches it.
  virtual void set_attention_kernel(int64_t layer, std::shared_ptr<attention::AttentionKernelImpl> kernel) = 0;
  virtual std::shared_ptr<attention::AttentionKernelImpl> attention_kernel(int64_t layer) const = 0;
  virtual void set_attention_capture(int64_t layer, attention::AttentionCapture* capture) = 0;

  // Where a converted model came from (teacher, maps, finetuning runs): free-form JSON saved in mimic.json
  // under "provenance" (docs/convert.md). Empty for models that were never converted.
  virtual nlohmann::json& provenance() = 0;
  virtual const nlohmann::json& provenance() const = 0;
  // Incremental decoding (causal LMs; a BERT model is a mimic::Error). forward_step runs the tokens `ids`
  // [B, T] that follow what `state` has seen (position embeddings at state.position() ...; a prompt in one
  // call, then one token per call) and returns their LM logits [B, T, V], equal to the rows of forward()
  // over the whole sequence. Each layer continues from its cache (AttentionKernelImpl::forward_cached), so
  // mixed softmax / linear models work. The state's position may not pass the model's context. Runs without
  // gradients (inference only).
  std::unique_ptr<DecodeState> new_decode_state();
  at::Tensor forward_step(const at::Tensor& ids, DecodeState& state);

 protected:
  // The network's part of forward_step: the logits of `ids` run from `state` (whose position it may read).
  virtual at::Tensor forward_cached(const at::Tensor& ids, DecodeState& state) = 0;
};

// Dropout in a data-parallel run. While a BatchShare lives on this thread, the networks' dropout draws its noise for
// the whole global batch — `parts` equal shares, this forward's rows being share `part` — and applies its own rows, so
// that the ranks of a run together draw the masks one process with the whole batch draws, and their random generators
// advance as its does. Each rank drew a mask for its own rows: every rank the same ones (their generators are rank
// 0's), none equal to one process's, so a classifier trained on 2 ranks ended 0.024 off one process's loss (helper-79's
// probe of 2026-12-06). The cost: each rank draws `parts` times the noise (Bernoulli draws, 6.9 ns per element on a
// CPU core here, on one thread) and keeps its own rows. The training engine holds one around every micro-batch's forward.
class BatchShare {
 public:
  BatchShare(int64_t part, int64_t parts);
  ~BatchShare();
  BatchShare(const BatchShare&) = delete;
  BatchShare& operator=(const BatchShare&) = delete;

 private:
  int64_t part_before_, parts_before_;
};

// Converted models. A directory whose layers do not all run softmax attention holds, beside config.json,
// a `mimic.json` (format mimic-converted-1): per layer the attention kind and the options that rebuild
// its kernel (attention::make_attention_kernel), and the provenance. The kernels' parameters and buffers
// are stored with the weights as `mimic.attention.<layer>.<name>` (float32), the original tensors
// unchanged. load_model reads such directories; Model::save writes them (and removes a stale mimic.json
// when every layer runs softmax again). Layout: docs/convert.md.
inline constexpr const char* kConvertedFile = "mimic.json";
inline constexpr const char* kConvertedFormat = "mimic-converted-1";
inline constexpr const char* kKernelPrefix = "mimic.attention.";
// The mark mimic's model writers put in the weights' metadata ({"written_by": "mimic"} beside HF's {"format": "pt"},
// the only key HF's loaders read; in a sharded model, in the last shard): convert and export replace a model in their
// --out only where it carries it, so that a user's checkpoint given as --out is refused, not overwritten (the
// Llama-family probe of 2026-12-01: a Qwen folder was replaced by a Mistral beside the Qwen's generation_config.json).
inline constexpr const char* kWrittenByKey = "written_by";
// Whether the model in `dir` (its model.safetensors, or a shard its index names) carries that mark; false where there
// are no weights or they cannot be read.
bool written_by_mimic(const std::string& dir);
// The weights files in `dir` (model.safetensors, shards, their index), sorted, where none of them carries the mark;
// empty where there are none, or mimic wrote them.
std::vector<std::string> unmarked_weights_files(const std::string& dir);

// Removes from `dir` the files a model folder is made of — config.json, weights (whole or sharded), mimic.json,
// tokenizer files — before a training run that starts fresh there writes its own: what an earlier run left would be
// read as part of the new model (a stale mimic.json made a softmax model load as linear attention). Other files (the
// user's) stay. A resumed run keeps them: they are its own promotions.
void remove_model_files(const std::string& dir);
// Whether a file name is one of those (what an export or a training run's best/ may hold).
bool is_model_file(const std::string& name);
// Refuses, naming it, an entry of `dir` at a name a model's file takes (is_model_file, or `also`) that is no regular
// file — a folder made as config.json, a link to nothing — before anything is written there: found at the write,
// it left half a model (export, convert), or the model was saved beside it and failed to load (a finetune kept a
// dangling tokenizer.json: the eleventh probe of 2026-11-30). Also a file at a weights name that is no model's weights:
// another command's result (a forward output, maps, a record) there was replaced, or removed as a stale shard, exit 0
// (the thirteenth and fourteenth probes) — known by its bytes: HDF5, or safetensors of a mimic-* format. Nothing when
// `dir` is no folder.
void refuse_odd_model_file_names(const std::string& dir, const std::function<bool(const std::string&)>& also = nullptr);

// Per layer: {"layer", "kind", "options"}.
nlohmann::json attention_layers(const Model& model);
// One line for people: "linear (hedgehog, row, SLA gates) in layers 0-5; softmax in 6-11".
// One layer's attention in those words when it is converted ("linear (hedgehog, row norm)", a mixed layer's with its
// softmax heads); "" when the layer computes the reference attention (softmax).
std::string converted_layer_attention(const Model& model, int64_t layer);
std::string attention_summary(const Model& model);
// A digest of the model's own weights as stored (names, storage types and bytes; kernel tensors excluded, so a
// converted model keeps its teacher's digest until it is finetuned). Records and distill outputs carry it.
std::string model_digest(const Model& model);
// The model_digest of each teacher a converted model was converted from (its provenance's conversions, in order;
// empty for a model never converted, or one whose mimic.json predates the digests): what tells whether a record,
// a maps file or a --teacher belongs to it.
std::vector<std::string> conversion_teachers(const Model& model);
// Whether a model of `digest` may be the teacher of a model converted from `converted_from` (conversion_teachers):
// one of them, or either unknown (a model never converted, an older mimic.json, a record without a digest).
bool may_be_teacher(const std::vector<std::string>& converted_from, const std::string& digest);
// How finetune (without --kd) and eval end that note: the teacher is only scored beside the model.
inline constexpr const char* kComparedWithAnotherTeacher = "the numbers side by side compare with another model than its own teacher";
// "" when `teacher` (of digest `teacher_digest`, from `teacher_dir`) may be the model the one at `model_dir` was
// converted from (`converted_from`: its conversion_teachers; may_be_teacher, and attention softmax in every layer);
// else a sentence naming both: what finetune and eval say before they distil toward, or compare with, another teacher.
// A converted teacher keeps its softmax teacher's digest (model_digest leaves the kernels out), so its attention
// tells it apart (a finetuned student against its unfinetuned self went without a note: helper-53's probe).
std::string other_teacher(const std::vector<std::string>& converted_from, const std::string& model_dir, const Model& teacher,
                          const std::string& teacher_digest, const std::string& teacher_dir);
// What model_digest leaves out that shapes the forward pass: the config.json fields beyond the weights' shapes
// (activation, epsilon, attention scaling, sizes, heads) of the model at `model_path` (a folder, or a weights file
// with config.json beside it), for people and fingerprints; the same weights under another config compute otherwise.
std::string network_description(const std::string& model_path);
// A digest of every layer's attention as it computes: its kind, its options (config_json) and the kernel's own
// tensors (a converted model's feature maps, gates, window weights). Two conversions of one teacher share
// model_digest and differ here.
std::string attention_digest(const Model& model);

// Loads config.json + model.safetensors from a HF-layout directory (or a model.safetensors path with
// config.json beside it); without model.safetensors, a sharded checkpoint (model.safetensors.index.json
// and the shards it names; see io::TensorStore). Every expected tensor is checked: a missing, unexpected
// or mis-shaped tensor is a mimic::Error naming it.
struct LoadOptions {
  // "" : the head the checkpoint has. "cls": BERT sequence classification with `labels` — pooler and
  // classifier come from the checkpoint when it has them (with that many labels), are freshly initialised
  // otherwise, and other heads (MLM, next-sentence) are dropped; config.json is updated accordingly.
  std::string head;
  std::vector<std::string> labels;
  // With head "cls" and > 0: the example length the classifier is to be trained at, kept in its config.json
  // (ModelConfig::classifier_seq_len), so that eval scores it at that length wherever its files are copied.
  int64_t classifier_seq_len = 0;
  uint64_t seed = 0;  // for freshly initialised heads
  // Where the model computes: its parameters, buffers and kernels are moved there once loaded (read and
  // initialised on the CPU, so a seed gives the same start on any device).
  c10::Device device = c10::Device(c10::kCPU);
};
std::unique_ptr<Model> load_model(const std::string& dir, const LoadOptions& options = {});
// Loads with everything default but the device.
std::unique_ptr<Model> load_model(const std::string& dir, c10::Device device);

// The device a model computes on: where its parameters are (the CPU for a model without any). Inputs are moved
// there by the stage that feeds them (data::to_device); outputs come back on it.
c10::Device device_of(Model& model);
// One row of token ids, int64 [1, T], on `device`: a prompt or a continuation to feed.
at::Tensor token_row(const std::vector<int64_t>& ids, c10::Device device);

// A new model with freshly initialised weights (normal(0, 0.02); GPT-2's residual projections scaled by
// 1/sqrt(2·n_layer)) from the content of a config.json; "architectures" picks the head. When saved, the
// tokenizer files of `tokenizer_dir` are copied beside the weights. Keys are written in HF's current
// layout (GPT-2 without prefix, BERT with "bert." and LayerNorm weight/bias), float32 unless
// `fp16_storage`.
// `where` names the config in messages ("--config my.json").
std::unique_ptr<Model> create_model(const std::string& config_json, const std::string& tokenizer_dir, bool fp16_storage = false,
                                    const std::string& where = "model config");

}  // namespace mimic::models
