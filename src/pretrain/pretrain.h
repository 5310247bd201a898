// Pretraining mimic's own small GPT-2 (causal LM) and BERT (masked LM) on the public-domain corpora,
// on the training engine. Writes a HF-layout directory that every mimic command reads.
#pragma once
#include <c10/core/Device.h>
#include <nlohmann/json.hpp>
#include <string>

#include "mimic/data/batches.h"
#include "mimic/train/trainer.h"

namespace mimic::pretrain {

struct PretrainOptions {
  std::string arch;                 // "gpt2" | "bert"
  nlohmann::json config;            // HF config.json content (sizes); vocab_size is set from the tokenizer
  std::string config_source = "model config";  // what messages call it ("--config my.json")
  std::string corpus = "all";       // "all" | "sotu" | "moby-dick", or a recall task ("mqar:...", "ar:...";
                                    // data/recall_tasks.h): then the model's vocabulary is the task's, it has no
                                    // tokenizer, and only the answers are scored
  // The attention of every layer ("softmax", "linear:<map>", "sla:<map>", or any kind of the registry with its
  // options, "delta", "hybrid:window=64"; attention::kernel_from_spec), in its
  // chunked form for training; the saved model is a converted directory when it is not softmax.
  std::string attention = "softmax";
  // Non-empty: continue from this model directory's weights (same architecture; `config` is then taken from it)
  // instead of a fresh initialisation.
  std::string init;
  data::CopyCurriculum copy;        // training blocks only; validation stays plain prose
  // How a fresh model's learned position table starts: "normal" (the family's random initialisation) or
  // "sinusoidal" (Vaswani et al.'s sin/cos table, scaled to an RMS of 0.02 like the token embeddings). The
  // table stays a learned parameter (the checkpoint layout is unchanged); sinusoids make "the key k positions
  // back" a linear function of the embeddings, so previous-token heads, the first half of an induction
  // circuit, need not first be learned from a random table.
  std::string position_init = "normal";
  // RMS of the sinusoidal table's entries. 0.02 matches the token embeddings' initialisation; then the position
  // signal is a tenth of the token signal once those have grown (measured on the first gpt2-mini: row norms 0.15
  // vs 1.34), too weak for a previous-token head to form quickly. Larger values make position a strong signal.
  double position_scale = 0.02;
  int64_t seq_len = 0;              // 0: min(256, the model's context); a recall task's own
  int64_t batch_size = 16;
  int64_t eval_batches = 20;        // validation batches per evaluation
  uint64_t seed = 0;
  c10::Device device = c10::Device(c10::kCPU);  // where the model trains (--device); initialised on the CPU, then moved
  train::TrainOptions train;        // steps, lr, schedule, out_dir, ...
};
// `mimic pretrain`'s weight decay unless --weight-decay says otherwise (a checkpoint's fingerprint omits it then)
inline constexpr double kPretrainWeightDecay = 0.1;

// Refuses what the options alone (with --arch's family) rule out, before anything is read: the position table's
// options, a recall task with --init or a bidirectional family, BERT's shortest block. pretrain() calls it first;
// the CLI calls it too, so that these are usage errors (said before --out is looked at).
void check_options(const PretrainOptions& options);

// Runs (or resumes) pretraining; the final model is in out_dir/last, and the best (validation loss) is moved from
// out_dir/best into out_dir itself at the end (config.json, model.safetensors, tokenizer files) so that out_dir is
// a model directory.
train::TrainResult pretrain(const PretrainOptions& options);

}  // namespace mimic::pretrain
