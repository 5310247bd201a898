#include "mimic/models/config.h"

#include <algorithm>
#include <typeinfo>
#include <cmath>

#include "mimic/core/error.h"
#include "mimic/core/json_keys.h"
#include "mimic/core/words.h"
#include "mimic/io/atomic_file.h"
#include "mimic/models/family.h"

namespace mimic::models {

const char* head_name(Head h) {
  switch (h) {
    case Head::None: return "none";
    case Head::Lm: return "lm";
    case Head::Mlm: return "mlm";
    case Head::Cls: return "cls";
    case Head::Pretraining: return "pretraining";
  }
  return "?";
}

Activation config_activation(const std::string& name, const std::string& where, const std::string& key) {
  // HF's names for each formula (gelu_accurate is the tanh form too); the error lists every name taken
  static const std::pair<const char*, Activation> names[] = {
      {"gelu_new", Activation::GeluTanh}, {"gelu_pytorch_tanh", Activation::GeluTanh}, {"gelu_fast", Activation::GeluTanh},
      {"gelu_accurate", Activation::GeluTanh}, {"gelu", Activation::GeluExact}, {"gelu_python", Activation::GeluExact}, {"relu", Activation::Relu},
      {"silu", Activation::Silu}, {"swish", Activation::Silu}};
  std::string known;
  for (const auto& [n, a] : names) {
    if (name == n) return a;
    known += (known.empty() ? "" : ", ") + std::string(n);
  }
  fail(where, ": unsupported ", key, " '", name, "' (supported: ", known, ")");
}

ModelConfig parse_config(const nlohmann::json& j, const std::string& where) {
  MIMIC_CHECK(j.is_object(), where, ": not a JSON object");
  MIMIC_CHECK(j.contains("model_type"), where, ": missing key 'model_type'");
  MIMIC_CHECK(j["model_type"].is_string(), where, ": key 'model_type' must be a string naming the family (", family_names(), "), got ", json_dump(j["model_type"], -1));
  ModelConfig c;
  c.raw = j;
  const std::string type = j["model_type"].get<std::string>();
  c.family = find_family(type);
  MIMIC_CHECK(c.family, where, ": unsupported model_type '", type, "' (mimic reads ", family_names(), ")");
  // The families read their keys with the config_* readers, which name a key of the wrong type; this catch is
  // the backstop for any other JSON access, so a config of the wrong shape is never more than a refused file.
  try {
    JsonKeysRead read(j);
    c.family->read_config(j, where, c);
    c.keys_read = read.keys();
  } catch (const nlohmann::json::exception& e) {
    fail(where, ": a key of the ", type, " config has the wrong type (", e.what(), ")");
  }
  // Each refusal below names the key the file holds and its value (c.keys: the family's own names).
  const ConfigKeys& k = c.keys;
  // a head width of its own (Qwen3's head_dim) need not divide the hidden size; otherwise the heads share it
  MIMIC_CHECK(c.explicit_head_dim > 0 || c.d_model % c.n_head == 0, where, ": ", k.d_model, " ", c.d_model, " is not divisible by ",
              k.n_head, " ", c.n_head, " (each head takes an equal share of the width)");
  // an absent key's default is the type's (Qwen2's 32), which the file does not show: said so
  const bool kv_absent = !k.n_kv_head.empty() && !j.contains(k.n_kv_head);
  MIMIC_CHECK(c.kv_heads() >= 1 && c.n_head % c.kv_heads() == 0, where, ": ", k.n_head, " ", c.n_head, " is not a multiple of ",
              k.n_kv_head.empty() ? "the key/value heads" : k.n_kv_head, kv_absent ? " (absent: the default) " : " ", c.kv_heads(),
              " (the query heads fall into equal groups, one per key/value head)");
  // Sizes beyond any published model, whatever their key is called: a model is allocated from them before any weight
  // is read (pretrain --config n_layer 100000 allocated and trained a 100,000-layer model: the seventh probe of
  // 2026-11-29). The largest published models lie well inside (Llama 3.1 405B: 126 layers, width 16,384, 128 heads,
  // inner 53,248; vocabularies to ~260k; contexts to ~1M tokens).
  struct Bound {
    int64_t value, max;
    const std::string& key;
    const char* what;
  };
  for (const Bound& b : {Bound{c.n_layer, 1024, k.n_layer, "layers"}, Bound{c.n_head, 1024, k.n_head, "heads"},
                         Bound{c.d_model, 65536, k.d_model, "hidden size"}, Bound{c.d_ff, 262144, k.d_ff, "inner (MLP) size"},
                         Bound{c.vocab_size, 1 << 24, k.vocab_size, "vocabulary size"},
                         Bound{c.max_positions, 1 << 24, k.max_positions, "context"}})
    MIMIC_CHECK(b.value <= b.max, where, ": ", b.key, " ", b.value, " is beyond any published model's ", b.what, ": mimic reads at most ", b.max);
  // Ranges every family's numbers must lie in, whatever their key is called (layer_norm_epsilon, layer_norm_eps, …):
  // a negative epsilon ran and wrote all-NaN logits, a negative dropout was accepted.
  MIMIC_CHECK(std::isfinite(c.ln_eps) && c.ln_eps > 0 && c.ln_eps < 1, where, ": ", k.ln_eps, " ", c.ln_eps,
              " is a normalisation epsilon and must lie in (0, 1)");
  MIMIC_CHECK(std::isfinite(c.dropout) && c.dropout >= 0 && c.dropout < 1, where, ": ", k.dropout, " ", c.dropout,
              " is a dropout probability and must lie in [0, 1)");
  // The dropout keys mimic does not apply (attention-probability dropout, classifier dropout, …) still say what the
  // checkpoint was trained with: a number outside [0, 1) there is a broken config, refused like the one it reads
  // (the probe of 2026-11-27: attn_pdrop 1.5 and classifier_dropout 2 were accepted).
  for (const auto& [key, value] : j.items()) {
    const bool dropout = key.find("dropout") != std::string::npos ||
                         (key.size() >= 5 && key.compare(key.size() - 5, 5, "pdrop") == 0);
    if (!dropout || value.is_null()) continue;
    MIMIC_CHECK(value.is_number() && std::isfinite(value.get<double>()) && value.get<double>() >= 0 && value.get<double>() < 1, where,
                ": ", key, " is a dropout probability and must lie in [0, 1), got ", value.dump());
  }
  // HF keys that change what the model computes, which mimic does not implement: refused rather than ignored (the
  // probe of 2026-11-27: BERT with is_decoder true ran bidirectional, exit 0)
  auto refuse_true = [&](const char* key, const char* what) {
    MIMIC_CHECK(!j.contains(key) || j[key].is_null() || j[key] == false, where, ": ", key, " ", j.contains(key) ? j[key].dump() : "",
                ": ", what, ", which mimic does not implement");
  };
  // a causal family is a decoder already (HF's GPT-2 ignores the key); an encoder made causal is what mimic lacks
  if (!c.family->causal) refuse_true("is_decoder", ("a decoder-style (causal) " + c.family->display_name).c_str());
  refuse_true("add_cross_attention", "cross-attention layers");
  if (j.contains("problem_type") && !j["problem_type"].is_null())
    MIMIC_CHECK(j["problem_type"] == "single_label_classification", where, ": problem_type ", j["problem_type"].dump(),
                ": mimic's classifiers are single-label (problem_type single_label_classification)");
  // token ids the config names must be tokens of the model (a pad_token_id beyond the vocabulary loaded: the fourth
  // probe of 2026-11-27); null is HF's "none", and a list (several end tokens) holds ids
  for (const char* key : {"pad_token_id", "bos_token_id", "eos_token_id"}) {
    if (!j.contains(key) || j[key].is_null()) continue;
    const auto ids = j[key].is_array() ? j[key] : nlohmann::json::array({j[key]});
    for (const auto& id : ids)
      MIMIC_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < c.vocab_size, where, ": ", key, " ",
                  j[key].dump(), " is not a token of the model's vocabulary (", k.vocab_size, " ", c.vocab_size, ": ids 0 to ", c.vocab_size - 1, ")");
  }
  MIMIC_CHECK(c.num_labels >= 0 && c.num_labels <= 1'000'000, where, ": num_labels must lie in [0, 10^6], got ", c.num_labels);
  c.classifier_seq_len = json_int_or(j, kClassifierSeqLenKey, where, 0, 3);
  // label2id: an object name → id, or nothing (a list or a string was accepted and ignored: the fourth probe of
  // 2026-11-27). Without an id2label it names the labels itself (it was ignored, the data mapped by sort order).
  MIMIC_CHECK(!j.contains("label2id") || j["label2id"].is_null() || j["label2id"].is_object(), where,
              ": label2id must be an object {name: id, ...}, got ", j.contains("label2id") ? j["label2id"].type_name() : "");
  if ((!j.contains("id2label") || j["id2label"].is_null()) && j.contains("label2id") && j["label2id"].is_object() &&
      !j["label2id"].empty()) {
    const auto& m = j["label2id"];
    std::vector<std::string> names(m.size());
    bool defaults = true;
    for (const auto& [name, id] : m.items()) {
      MIMIC_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < static_cast<int64_t>(m.size()) &&
                      names[static_cast<size_t>(id.get<int64_t>())].empty() && !name.empty(),
                  where, ": label2id's ids must be 0 to ", m.size() - 1, " once each, got ", id.dump(), " for '", name, "'");
      names[static_cast<size_t>(id.get<int64_t>())] = name;
      defaults = defaults && name == "LABEL_" + id.dump();
    }
    if (!defaults) c.labels = names;
  }
  if (j.contains("id2label") && !j["id2label"].is_null()) {
    const auto& m = j["id2label"];
    MIMIC_CHECK(m.is_object(), where, ": id2label must be an object {\"0\": name, ...}");
    std::vector<std::string> names(m.size());
    std::vector<bool> seen(m.size(), false);
    for (const auto& [key, value] : m.items()) {
      size_t used = 0;
      int64_t id = -1;
      try {
        id = std::stoll(key, &used);
      } catch (const std::exception&) {
      }
      // spelled as HF writes them: " 0", "+0" and "00" were read as 0 (the fourth probe of 2026-11-27)
      MIMIC_CHECK(used == key.size() && id >= 0 && id < static_cast<int64_t>(m.size()) && key == std::to_string(id) &&
                      !seen[static_cast<size_t>(id)],
                  where, ": id2label's keys must be the ids 0 to ", m.size() - 1, " once each, written as decimals (\"0\", \"1\", ...), got '",
                  key, "'");
      MIMIC_CHECK(value.is_string() && !value.get<std::string>().empty(), where, ": id2label[", key, "] must be a name");
      seen[static_cast<size_t>(id)] = true;
      names[static_cast<size_t>(id)] = value.get<std::string>();
    }
    // a name twice would send two ids' data to one of them (label2id is not read: HF configs in the wild carry a default
    // one beside named id2label entries)
    for (size_t i = 0; i < names.size(); ++i)
      for (size_t k = 0; k < i; ++k)
        MIMIC_CHECK(names[i] != names[k], where, ": id2label names '", names[i], "' twice (ids ", k, " and ", i, "): every label needs its own name");
    // label2id, where it names the same labels, must give them the same ids: a contradicting one (ham ↔ spam) was
    // accepted and id2label used, so data labelled by the other mapping scored against swapped names (the probe of
    // 2026-11-27). HF's default label2id (LABEL_0, LABEL_1, … left beside named id2label entries, common in configs in
    // the wild) names nothing and is not read.
    if (j.contains("label2id") && j["label2id"].is_object()) {
      bool defaults = true;
      for (const auto& [name, id] : j["label2id"].items()) defaults = defaults && name.rfind("LABEL_", 0) == 0;
      for (const auto& [name, id] : j["label2id"].items()) {
        if (defaults) break;
        const auto at = std::find(names.begin(), names.end(), name);
        MIMIC_CHECK(at != names.end(), where, ": label2id names '", name, "', which id2label does not: the two must name the same labels");
        const int64_t expected = at - names.begin();
        MIMIC_CHECK(id.is_number_integer() && id.get<int64_t>() == expected, where, ": label2id gives '", name, "' the id ", id.dump(),
                    ", id2label the id ", expected, ": the two must agree");
      }
    }
    // HF writes LABEL_0, LABEL_1, … when a model's labels have no names: those name nothing to match a data set by
    bool hf_default_names = true;
    for (size_t i = 0; i < names.size(); ++i) hf_default_names = hf_default_names && names[i] == "LABEL_" + std::to_string(i);
    if (!hf_default_names) c.labels = names;
  }
  // a string (a hand-edited config) was passed over, the head then decided by the weights alone; transformers reads
  // the first element of a list
  MIMIC_CHECK(!j.contains("architectures") || j["architectures"].is_null() || j["architectures"].is_array(), where,
              ": architectures must be a list naming the model class (e.g. [\"GPT2LMHeadModel\"]), got ", json_dump(j["architectures"], -1));
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty()) {
    MIMIC_CHECK(j["architectures"][0].is_string(), where, ": architectures[0] must be a string naming the model class, got ",
                json_dump(j["architectures"][0], -1));
    const std::string a = j["architectures"][0].get<std::string>();
    // The model's own family's names, or those of a family built by the same code (the Llama family's model types
    // share one network: a qwen2 config saying LlamaForCausalLM is that network). Any other name is refused: its head
    // was decided by the weights, and a BertForTokenClassification ran as a sentence classifier (logits [1, 2] for
    // [1, T, 2]), a bert config saying GPT2LMHeadModel as a bare encoder (the checkpoint probe of 2026-12-01).
    c.head_from_config = false;
    for (const Family* f : families())
      if (typeid(*f) == typeid(*c.family) && f->head_of_architecture(a, &c.head)) {
        c.head_from_config = true;
        break;
      }
    if (!c.head_from_config) {
      std::string known;
      for (const auto& [name, head] : c.family->architectures()) known += (known.empty() ? "" : ", ") + name;
      fail(where, ": architectures names '", a, "', which mimic's ", c.family->display_name, " does not implement (it implements ",
           known, ")");
    }
  }
  // A family whose language-model head is its token embedding (ties(): GPT-2's LM head, BERT's MLM decoder) reads no
  // other: an untied head in a config was ignored, and pretrain wrote such a config beside tied weights, which HF then
  // loads with a random head (the eighth probe of 2026-11-29). A classifier (or a bare encoder) has no such head.
  const bool lm_head = !c.head_from_config || c.head == Head::Lm || c.head == Head::Mlm || c.head == Head::Pretraining;
  if (lm_head && j.contains("tie_word_embeddings") && j["tie_word_embeddings"] == false && !c.family->lm_head_may_be_untied)
    fail(where, ": tie_word_embeddings false: a language-model head apart from the token embedding, which mimic's ", type,
         " does not implement (its head is the token embedding)");
  return c;
}

ModelConfig load_config(const std::string& path) {
  return parse_config(json_parse(io::read_text_file(path), path), path);
}

void refuse_misspelt_keys(const nlohmann::json& j, const ModelConfig& c, const std::string& where) {
  std::vector<std::string> absent;
  for (const auto& key : c.keys_read)
    if (!j.contains(key)) absent.push_back(key);
  for (const auto& [key, value] : j.items()) {
    if (c.keys_read.count(key)) continue;
    // two edits at most, whatever the length: embd_pdrop is HF's own key three from resid_pdrop
    const std::string meant = nearest_name(key, absent, 2);
    MIMIC_CHECK(meant.empty(), where, ": ", key, " is no key mimic reads in a ", c.family->display_name, " config: did you mean ", meant,
                "? (absent, it takes its default)");
  }
}

}  // namespace mimic::models
