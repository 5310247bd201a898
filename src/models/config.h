// A model's config.json (HF format), parsed and checked.
#pragma once
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "mimic/core/json_keys.h"

namespace mimic::models {

class Family;  // models/family.h
enum class Activation { GeluTanh, GeluExact, Relu, Silu };
// Which task head a model carries.
enum class Head { None, Lm, Mlm, Cls, Pretraining /* BERT MLM + next-sentence head */ };

const char* head_name(Head h);

// The attention's sizes: what a head's blocks of the projections follow from (Family::head_slices).
struct AttentionShape {
  int64_t d_model = 0, n_head = 0, n_kv_head = 0, head_dim = 0;
  bool qkv_bias = false;  // the query, key and value projections' biases are parameters of their own (the Llama family's)
};

// The config.json keys a family read each size from (GPT-2's "n_embd", BERT's "hidden_size", ...), for messages: a
// refusal names the key the file holds and its value, never a paraphrase ("the layer-norm epsilon" for rms_norm_eps:
// the tenth probe of 2026-11-29). Empty: the family has no key for it (the size is fixed or derived).
struct ConfigKeys {
  std::string n_layer, n_head, n_kv_head, d_model, d_ff, vocab_size, max_positions, ln_eps, dropout;
};

// The config.json key under which a classifier keeps the length it was finetuned at (ModelConfig::classifier_seq_len).
inline constexpr const char* kClassifierSeqLenKey = "mimic_classifier_seq_len";

struct ModelConfig {
  const Family* family = nullptr;        // from model_type (the registry in families.def)
  ConfigKeys keys;                       // where read_config found each size
  std::set<std::string> keys_read;       // every key the family's read_config asked for, present or not
  int64_t n_layer = 0, n_head = 0, d_model = 0, d_ff = 0, vocab_size = 0, max_positions = 0;
  int64_t type_vocab_size = 0;  // BERT
  int64_t num_labels = 0;       // BERT classifier
  // id2label's names by id (HF's label2id is its inverse); empty when absent or HF's placeholders LABEL_0, LABEL_1, …
  // A classifier's labels are matched by these names, never by the order of a data set's labels.
  std::vector<std::string> labels;
  // The example length a classifier was finetuned at (its --seq-len, [CLS] and [SEP] included), which eval scores it at
  // by default: config.json's mimic_classifier_seq_len, written by `finetune --task cls` (0: not said)
  int64_t classifier_seq_len = 0;
  double ln_eps = 1e-5;
  double dropout = 0.1;  // residual/embedding dropout in training mode (resid_pdrop / hidden_dropout_prob);
                         // attention-probability dropout is not applied (kernels may not form weights)
  Activation activation = Activation::GeluTanh;
  bool scale_attn_weights = true;        // GPT-2: divide scores by sqrt(head_dim)
  bool scale_attn_by_layer_idx = false;  // GPT-2: also divide by layer index + 1
  Head head = Head::None;                // from "architectures" (Head::None when absent: decided by the weights)
  bool head_from_config = false;
  nlohmann::json raw;                    // the file as read (saved back unchanged)

  // Grouped-query attention and a head width of its own (the Llama family; 0: as many KV heads as query heads, and
  // d_model / n_head): n_kv_head KV heads each serve n_head / n_kv_head query heads.
  int64_t n_kv_head = 0, explicit_head_dim = 0;
  // Rotary position embeddings (the Llama family; rope_theta 0: none, positions are a learned table). HF's rope_scaling:
  // "" (none), "linear" (the frequencies divided by rope_factor) or "llama3" (by band: rope_low_freq_factor,
  // rope_high_freq_factor and rope_original_positions, the context the model was trained at).
  double rope_theta = 0;
  std::string rope_scaling;
  double rope_factor = 1, rope_low_freq_factor = 1, rope_high_freq_factor = 4;
  int64_t rope_original_positions = 0;
  bool tie_word_embeddings = true;  // the LM head is the token embedding (GPT-2, BERT always; the Llama family by config)
  bool qkv_bias = false;            // biases on the query, key and value projections (Qwen2; attention_bias in Llama, Qwen3)
  bool o_bias = false;              // a bias on the output projection (attention_bias in Llama and Qwen3)
  bool qk_norm = false;             // an RMSNorm over each head of q and k before the rotation (Qwen3)
  // Where max_positions comes from when it is not the context key's value (empty: it is): a sliding window shorter
  // than max_position_embeddings (Mistral-7B-v0.1: 4096 of 32768) caps the context at the window, where windowed and
  // full softmax attention are the same computation. Shown by `mimic info`.
  std::string context_note;

  int64_t head_dim() const { return explicit_head_dim > 0 ? explicit_head_dim : d_model / n_head; }
  int64_t kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  AttentionShape attention_shape() const { return {d_model, n_head, kv_heads(), head_dim(), qkv_bias}; }
};

// Parses config.json; a missing or ill-typed key, an unsupported model_type/activation, or sizes that do
// not fit together is a mimic::Error naming the key and the file.
ModelConfig parse_config(const nlohmann::json& j, const std::string& where = "config.json");
ModelConfig load_config(const std::string& path);
// A key of `j` that the family does not read but that is one or two letters from a key it reads and `j` lacks
// (n_iner for n_inner, rope_thetha for rope_theta) refused as a misspelling, naming both: the family's default
// took the misspelt key's place without a word (the probe of 2026-12-02). For configs people write (pretrain
// --config); HF's own configs hold many keys mimic does not read, which this leaves alone unless they are that near.
void refuse_misspelt_keys(const nlohmann::json& j, const ModelConfig& c, const std::string& where);

// The families' read_config read every key through the checked readers of core/json_keys.h (json_int, ...).
// An activation name (gelu_new, gelu, relu, ...) read from `key`.
Activation config_activation(const std::string& name, const std::string& where, const std::string& key);

}  // namespace mimic::models
