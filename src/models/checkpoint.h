// Reading and writing HF checkpoint files: the key layouts found in the wild, mapped to the networks'
// parameter names, with every tensor checked.
#pragma once
#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "mimic/io/safetensors.h"
#include "mimic/io/tensor_store.h"
#include "mimic/models/family.h"

namespace mimic::models {

// How a file spells its keys, remembered so that saving writes the same layout back. The family supplies
// the rest of the key map (its checkpoint prefix, buffers and which names take the prefix).
struct KeyLayout {
  std::string prefix;             // the family's checkpoint_prefix ("transformer.", "bert.") or ""
  bool gamma_beta = false;        // BERT LayerNorm.gamma/beta instead of weight/bias
  std::vector<std::string> tied;  // tied copies present in the file (lm_head.weight, cls.predictions.decoder.*)
  std::map<std::string, io::DType> dtypes;  // per file key
  std::map<std::string, std::string> metadata;
};

// Tensors of a file that are kept but not parameters (attn.bias / attn.masked_bias buffers,
// embeddings.position_ids): written back unchanged.
using Passthrough = std::vector<std::pair<std::string, at::Tensor>>;

// The network parameter name of a file key (prefix removed, gamma/beta renamed), or "" for keys that are
// buffers or tied copies. Sets *kind to "param", "buffer" or "tied".
std::string internal_name(const Family& family, const std::string& key, std::string* kind);

// Compares the shapes config.json asks for (family.sized_tensors) with the shapes in the weights' header, before
// the network is built: a config whose sizes the file does not hold is a mimic::Error naming `config_path` and the
// key, instead of an allocation sized by the config alone (n_layer 1000 or n_embd 10^6 beside small weights).
void check_config_against_weights(const Family& family, const ModelConfig& c, const io::TensorStore& f, const std::string& config_path);

// Copies the checkpoint's tensors (one file or the shards of a sharded checkpoint) into `params` (network
// names → tensors, converted to float32). Throws mimic::Error naming the first missing, unexpected or
// mis-shaped tensor, or a tied copy that differs.
// `may_be_missing`: network-name prefixes whose parameters keep their fresh initialisation when the file
// lacks them (a new task head); `ignored`: network-name prefixes of file tensors to drop (a head not used).
struct LoadRules {
  std::vector<std::string> may_be_missing;
  std::vector<std::string> ignored;
};
void load_weights(const Family& family, const io::TensorStore& f, std::vector<std::pair<std::string, at::Tensor>> params,
                  const std::map<std::string, std::pair<std::string, std::string>>& ties, KeyLayout& layout, Passthrough& passthrough,
                  const LoadRules& rules = {});

// The file keys and tensors to save, in the remembered layout; each parameter in the dtype it was loaded
// with (`as_loaded`) or as it is in memory (float32: for a save that converts every tensor to one type).
std::vector<std::pair<std::string, at::Tensor>> weights_to_save(const Family& family, const std::vector<std::pair<std::string, at::Tensor>>& params,
                                                              const std::map<std::string, std::pair<std::string, std::string>>& ties,
                                                              const KeyLayout& layout, const Passthrough& passthrough,
                                                              bool as_loaded = true);

}  // namespace mimic::models
