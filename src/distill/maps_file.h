// A distill output (maps.safetensors, format mimic-distill-1; docs/distill.md) opened for use: which layers it
// holds, the attention they run, the teacher they were distilled from, and the trained kernel of each layer.
// Used by `convert`, `distill --eval-only --maps` and `report`.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mimic::io { class SafeTensorsFile; }
namespace mimic::attention {
class AttentionKernelImpl;
class DistillableKernel;
}

namespace mimic::distill {

class DistilledMaps {
 public:
  // Opens and checks the file (format, metadata, every tensor finite); a file that is no distill output, or
  // holds a NaN or an infinity, is a mimic::Error naming it.
  static DistilledMaps open(const std::string& path);

  const std::string& path() const { return path_; }
  const std::vector<int64_t>& layers() const { return layers_; }
  bool has_layer(int64_t layer) const;
  int64_t n_head() const { return n_head_; }
  int64_t head_dim() const { return head_dim_; }
  // The attention kind (kinds.def) and its options: make_attention_kernel(kind(), attention(), ...) builds it.
  const std::string& kind() const { return kind_; }
  const nlohmann::json& attention() const { return attention_; }
  std::string feature_map() const;
  bool sla() const;
  const std::string& source() const { return source_; }              // the teacher as named when distilling
  const std::string& model_digest() const { return model_digest_; }  // models::model_digest of the teacher ("" if unknown)
  const std::map<std::string, std::string>& metadata() const;
  // The held-out KL(softmax ‖ student) of each head of a distilled layer after training, as distill measured it
  // (metadata "metrics"); a layer without it is a mimic::Error.
  std::vector<double> head_kl(int64_t layer) const;

  // The trained kernel of a distilled layer, in eval mode; a layer the file does not hold, or a missing or
  // mis-shaped tensor, is a mimic::Error naming it.
  // `overrides`: options merged into the file's (convert --attention-options, e.g. LoLA's training-free cache=64);
  // those that shape the trained tensors (feature_map, map_options, gates) are refused, as is any other that makes a
  // kernel without a place for one of the layer's trained tensors (gate=false on gated delta maps, mix=fixed on a
  // learned mix); a null removes the file's
  // option of that name (the hybrid's cache, for the heads convert --cache-heads leaves without one).
  std::shared_ptr<attention::DistillableKernel> kernel(int64_t layer, const nlohmann::json& overrides = nlohmann::json::object()) const;
  // The file's attention options with `overrides` merged in, as kernel() builds from them; an override of an option
  // that shapes the trained tensors is a mimic::Error saying so.
  nlohmann::json options_with(const nlohmann::json& overrides) const;
  // Copies the layer's tensors into an existing kernel of the same configuration.
  void load_into(attention::AttentionKernelImpl& kernel, int64_t layer) const;
  // Whether the maps came from another teacher than `other` (a model, or "the teacher of" a record), by the two digests
  // (models::model_digest): "" when they match or either is unknown, else a sentence naming both. Scores of maps on
  // another model's q and k mean nothing, and read as numbers all the same (helper-50's probe of 2026-12-04: report,
  // distill --eval-only); convert refuses such maps unless forced.
  std::string teacher_mismatch(const std::string& other_digest, const std::string& other) const;
  // Refuses maps of another teacher: the mismatch above, then `what_to_do`.
  void check_teacher(const std::string& other_digest, const std::string& other, const std::string& what_to_do) const;

 private:
  std::string path_, source_, model_digest_, kind_, feature_map_;
  std::vector<int64_t> layers_;
  int64_t n_head_ = 0, head_dim_ = 0;
  nlohmann::json attention_;
  std::shared_ptr<io::SafeTensorsFile> file_;
};

// Name of a layer's tensors in the output: "layer_03".
std::string layer_prefix(int64_t layer);

}  // namespace mimic::distill
