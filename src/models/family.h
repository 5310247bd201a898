// Model families (GPT-2, BERT, ...): everything the loader and the pipeline stages need to know about an
// architecture, in one description per family. The registry is families.def; adding a family is one line
// there plus its own files in models/ (its network and its description). Stages ask the family
// (`summary.family->causal`, `lora_targets`, `is_attention_projection`) instead of comparing model_type
// strings or casting to a network class.
#pragma once
#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "mimic/models/config.h"

namespace torch::nn { class Module; }
namespace mimic::io { class TensorStore; }

namespace mimic::models {

class NetworkImpl;

// A projection LoRA adapts (finetune/lora.cpp): the adapter replaces the weight member the module's forward
// multiplies with, so the network code needs no change.
struct LoraTarget {
  std::string name;                // the projection's module name, e.g. "h.0.attn.c_attn"
  at::Tensor* weight = nullptr;    // the module's weight member
  bool transposed = false;         // stored [in, out] (GPT-2's Conv1D) instead of Linear's [out, in]
  std::vector<std::string> slots;  // blocks of the output with their own (A, B): {"q", "k", "v"} or {""}
};

// A block of a parameter that belongs to one attention head: `length` rows (dim 0) or columns (dim 1) from `start`
// of the network parameter `name` (a 1-D bias: dim 0).
struct HeadSlice {
  std::string name;
  int64_t dim = 0, start = 0, length = 0;
};

// Tensors a head ties: network name of the copy → (network name of the tensor it equals, what it is).
using Ties = std::map<std::string, std::pair<std::string, std::string>>;

// A tensor whose shape follows from config.json alone, each dimension with the key that gives it. A loader
// compares these with the weights' header before it builds the network (check_config_against_weights), so that
// a config asking for sizes the file does not hold (n_layer 1000, n_embd 10^6 beside small weights) is refused
// before anything is allocated.
struct SizedDim {
  SizedDim(int64_t size, std::string key, std::string shown = "") : size(size), key(std::move(key)), shown(std::move(shown)) {}
  int64_t size;
  std::string key;    // config.json's key, e.g. "n_embd"
  std::string shown;  // the keys' own values where the size is a product ("num_key_value_heads 2"); empty: key and size
};
struct SizedTensor {
  std::string name;      // network name, e.g. "h.5.mlp.c_fc.weight"
  std::string name_key;  // the key that chose the name ("n_layer" for the last layer's tensors), or ""
  std::vector<SizedDim> shape;
  std::string wanted_by;  // the key whose value asks for this tensor ("attention_bias"), or "": every checkpoint has it
  std::string why = "";   // why the type has it when no key asks ("Qwen2's q/k/v projections have biases"), or ""
};

// What loading with a sequence-classification head (LoadOptions::head = "cls") changes; an empty
// `architecture` means the family has no such head.
struct ClassifierHead {
  std::string architecture;                 // config.json's "architectures" entry written for it
  std::vector<std::string> new_tensors;     // network-name prefixes freshly initialised when the file lacks them
  std::vector<std::string> dropped;         // network-name prefixes of the other heads, not loaded
  std::string storage_reference;            // network name of the tensor whose stored dtype the new tensors take
  std::string weight;                       // the classifier's weight (file key): one row per label
};

class Family {
 public:
  virtual ~Family() = default;

  std::string model_type;         // config.json's model_type, e.g. "gpt2"
  std::string display_name;       // in messages, e.g. "GPT-2"
  // Causal LM (incremental decoding, generation, passkey, LM finetuning) or bidirectional encoder.
  bool causal = false;
  // Inputs are framed as [CLS] tokens [SEP]: a sample of seq_len positions holds seq_len - 2 text tokens.
  bool cls_sep = false;
  ClassifierHead classifier;
  std::string checkpoint_prefix;  // the prefix some checkpoints put before the backbone's keys
  std::string new_prefix;         // the prefix create_model writes (HF's current layout)
  std::string context_key;        // config.json's key for the context length (in messages: "n_positions")
  std::string finetune_preset;    // finetune's default hyper-parameters for it (finetune::preset)
  std::string tokenizer_asset;    // the fetched asset (asset_path) holding its tokenizer files, or "" (none fetched)
  // The tokenizer class HF's AutoTokenizer takes for this model_type where a folder names none (transformers'
  // TOKENIZER_MAPPING, its fast class): LlamaTokenizerFast opens a text with <s> whatever tokenizer.json says
  // (models::load_tokenizer, hf_tokenizer.h); the other families' classes keep the file's post-processor.
  std::string hf_tokenizer_class;
  std::string pretrain_architecture;  // config.json's "architectures" entry of what pretrain trains (its LM / MLM head)
  // Whether config.json's tie_word_embeddings false (an LM head of its own) is read; a family whose LM head is always
  // the token embedding (GPT-2, BERT) refuses it.
  bool lm_head_may_be_untied = false;

  // config.json's family-specific keys → the sizes of `c` (its `family` is set already).
  virtual void read_config(const nlohmann::json& j, const std::string& where, ModelConfig& c) const = 0;
  // config.json's "architectures" names this family implements, with the head each stands for.
  virtual std::vector<std::pair<std::string, Head>> architectures() const = 0;
  // The head an "architectures" name stands for; false when the name is not one of this family's.
  bool head_of_architecture(const std::string& name, Head* head) const;
  // The head and pooler a checkpoint carries (config.json's architectures first, then which tensors it has).
  virtual Head checkpoint_head(const ModelConfig& c, const io::TensorStore& f) const = 0;
  virtual bool checkpoint_pooler(const io::TensorStore& f) const = 0;
  // The head of a freshly initialised model (create_model).
  virtual Head new_head(const ModelConfig& c) const = 0;
  virtual std::shared_ptr<NetworkImpl> make_network(const ModelConfig& c, Head head, bool pooler) const = 0;
  virtual Ties ties(const ModelConfig& c, Head head) const = 0;
  // Tensors that together carry every size of the config: the token, position (and type) tables and the
  // last layer's projections, whose shapes follow from the width, the feed-forward width and the layer count.
  virtual std::vector<SizedTensor> sized_tensors(const ModelConfig& c) const = 0;

  // Parameter-name groups (network names; is_embedding also file keys).
  virtual bool is_embedding(const std::string& name) const = 0;
  // The network name of the learned absolute position table [max_positions, d_model], or "" (rotary positions).
  virtual std::string position_table() const = 0;
  virtual bool is_attention_projection(const std::string& name) const = 0;
  // Checkpoint key map: buffers kept as they are (not parameters), and the network names that take
  // checkpoint_prefix in a prefixed layout (task heads never do).
  virtual bool is_buffer(const std::string& name) const = 0;
  virtual bool takes_prefix(const std::string& name) const = 0;

  // The parts of the query, key, value and output projections (weights and biases) that belong to head `head` of
  // layer `layer`: what that head reads and writes. finetune --freeze-kept-heads keeps them as loaded. Under
  // grouped-query attention a head's key and value rows are its group's, shared with the group's other heads.
  virtual std::vector<HeadSlice> head_slices(const AttentionShape& a, int64_t layer, int64_t head) const = 0;
  // The attention projections LoRA adapts in `net` (a network this family made), in layer order.
  virtual std::vector<LoraTarget> lora_targets(torch::nn::Module& net) const = 0;
};

// Every registered family, in registry order.
const std::vector<const Family*>& families();
// The family of a config.json model_type, or nullptr.
const Family* find_family(const std::string& model_type);
// The family of a model_type; an unknown one is a mimic::Error naming the registered ones.
const Family& family(const std::string& model_type);
// "gpt2 and bert": the registered model types, for messages.
std::string family_names();
// "GPT-2, Llama, ...": the display names of the causal families, for "needs a causal LM (...)" messages.
std::string causal_family_names();

}  // namespace mimic::models
