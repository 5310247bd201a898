// What a model is, for people and for fingerprints: its layers' attention in a line, the digests of its weights and of
// its attention, its network's settings beyond the weights' shapes, and the teachers a converted model came from.
// Declared in model.h; apart from the loading and saving there, as none of it touches a file but config.json.
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "mimic/attention/attention.h"
#include "mimic/attention/kinds.h"
#include "mimic/core/hash.h"
#include "mimic/core/runtime.h"
#include "mimic/models/config.h"
#include "mimic/models/model.h"

namespace mimic::models {

namespace fs = std::filesystem;

nlohmann::json attention_layers(const Model& model) {
  nlohmann::json out = nlohmann::json::array();
  const int64_t n = model.summary().n_layer;
  for (int64_t l = 0; l < n; ++l) {
    auto k = model.attention_kernel(l);
    nlohmann::json e = {{"layer", l}, {"kind", k->kind()}};
    auto options = k->config_json();
    if (!options.empty()) e["options"] = options;
    out.push_back(e);
  }
  return out;
}

namespace {
std::string ranges(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    s += (s.empty() ? "" : ",") + std::to_string(v[i]) + (j > i ? "-" + std::to_string(v[j]) : "");
    i = j + 1;
  }
  return s;
}
}  // namespace

namespace {
// A kernel's description from its saved options: the map and normalisation, gates, decay, a window; a kernel
// that wraps another (options "kind" + "options", e.g. mixed) describes the wrapped one inside its own.
std::string describe_kernel(const std::string& kind, const nlohmann::json& o) {
  std::string what = kind;
  if (!o.is_object() || o.empty()) return what;
  if (o.contains("kind") && o.contains("options")) {
    what += " (softmax heads " + o.value("softmax_heads", nlohmann::json::array()).dump() + "; " +
            describe_kernel(o["kind"].get<std::string>(), o["options"]) + ")";
    return what;
  }
  if (!o.contains("feature_map")) {  // a kind without a map (delta): its options as saved
    std::string list;
    for (auto it = o.begin(); it != o.end(); ++it) list += (list.empty() ? "" : ", ") + it.key() + " " + it.value().dump();
    return what + " (" + list + ")";
  }
  what += " (" + o.value("feature_map", std::string("?"));
  // the map's own options, as --map-options gave them: taylor of order 3 read "taylor" as order 2 does (helper-75's
  // probe of 2026-12-06)
  if (const auto m = o.find("map_options"); m != o.end() && m->is_object())
    for (auto it = m->begin(); it != m->end(); ++it) what += " " + it.key() + "=" + (it->is_string() ? it->get<std::string>() : it->dump());
  what += ", " + o.value("norm", std::string("row")) + " norm";
  if (o.value("gates", false)) what += ", SLA gates";
  if (o.value("decay", nlohmann::json(false)).is_array()) what += ", decay";  // to_json: false or the per-head list
  if (o.contains("window")) what += ", window " + o["window"].dump();
  if (o.contains("cache"))
    what += ", sparse cache " + o["cache"].dump() + (o.value("cache_every", 1) != 1 ? " every " + o["cache_every"].dump() + " tokens" : "") +
            (o.contains("cache_heads") ? " in heads " + o["cache_heads"].dump() : "");
  return what + ")";
}
}  // namespace

std::string converted_layer_attention(const Model& model, int64_t layer) {
  const auto k = model.attention_kernel(layer);
  if (!k || attention::is_reference(*k)) return "";
  return describe_kernel(k->kind(), k->config_json());
}

std::string attention_summary(const Model& model) {
  // group layers with identical kernel descriptions, in order of first appearance
  std::vector<std::pair<std::string, std::vector<int64_t>>> groups;
  for (const auto& e : attention_layers(model)) {
    const std::string what = describe_kernel(e["kind"].get<std::string>(), e.value("options", nlohmann::json::object()));
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == what; });
    if (it == groups.end()) groups.push_back({what, {}}), it = groups.end() - 1;
    it->second.push_back(e["layer"].get<int64_t>());
  }
  std::string s;
  for (const auto& [what, layers] : groups) s += (s.empty() ? "" : "; ") + what + " in layer" + (layers.size() > 1 ? "s " : " ") + ranges(layers);
  return s;
}

std::vector<std::string> conversion_teachers(const Model& model) {
  std::vector<std::string> digests;
  const auto& prov = model.provenance();
  if (prov.is_object() && prov.contains("conversions") && prov["conversions"].is_array())
    for (const auto& c : prov["conversions"])
      if (c.is_object() && c.contains("teacher_digest") && c["teacher_digest"].is_string()) digests.push_back(c["teacher_digest"]);
  return digests;
}

bool may_be_teacher(const std::vector<std::string>& converted_from, const std::string& digest) {
  return converted_from.empty() || digest.empty() || std::find(converted_from.begin(), converted_from.end(), digest) != converted_from.end();
}

std::string other_teacher(const std::vector<std::string>& converted_from, const std::string& model_dir, const Model& teacher,
                          const std::string& teacher_digest, const std::string& teacher_dir) {
  if (converted_from.empty()) return "";
  const int64_t layers = teacher.summary().n_layer;
  for (int64_t l = 0; l < layers; ++l)
    if (!attention::is_reference(*teacher.attention_kernel(l)))
      return "--teacher " + teacher_dir + " is a converted model (" + attention_summary(teacher) + "), not the model " + model_dir +
             " was converted from (digest " + converted_from.back() + ")";
  if (may_be_teacher(converted_from, teacher_digest)) return "";
  return "--teacher " + teacher_dir + " (digest " + teacher_digest + ") is not the model " + model_dir + " was converted from (digest " +
         converted_from.back() + ")";
}

std::string model_digest(const Model& model) {
  Hasher h;
  for (const auto& [name, t] : model.state_dict()) {
    if (name.rfind(kKernelPrefix, 0) == 0) continue;
    h.bytes(name.data(), name.size());
    auto c = host(t);
    h.bytes(c.data_ptr(), c.numel() * c.element_size());
  }
  return h.hex();
}

std::string network_description(const std::string& model_path) {
  const fs::path p(model_path);
  const fs::path dir = fs::is_directory(p) ? p : p.parent_path();
  const auto c = load_config((dir / "config.json").string());
  std::ostringstream s;
  s << "activation " << static_cast<int>(c.activation) << ", ln_eps " << c.ln_eps << ", scale " << c.scale_attn_weights << "/"
    << c.scale_attn_by_layer_idx << ", d_ff " << c.d_ff << ", positions " << c.max_positions << ", vocab " << c.vocab_size << ", heads "
    << c.n_head;
  // the rotary settings change the network without changing a weight (the tenth probe: a record and a finetune resumed
  // over a rope_theta edit); GPT-2's and BERT's descriptions stay as records and checkpoints hold them
  if (c.rope_theta > 0) {
    s << ", rope_theta " << c.rope_theta;
    if (!c.rope_scaling.empty())
      s << ", rope_scaling " << c.rope_scaling << " " << c.rope_factor << " " << c.rope_low_freq_factor << " " << c.rope_high_freq_factor << " "
        << c.rope_original_positions;
  }
  return s.str();
}

std::string attention_digest(const Model& model) {
  Hasher h;
  const int64_t layers = model.summary().n_layer;  // summary() counts the parameters: once, not per layer
  for (int64_t l = 0; l < layers; ++l) {
    const auto kernel = model.attention_kernel(l);
    const std::string what = kernel ? kernel->kind() + " " + kernel->config_json().dump() : "softmax";
    h.bytes(what.data(), what.size() + 1);
  }
  for (const auto& [name, t] : model.state_dict()) {
    if (name.rfind(kKernelPrefix, 0) != 0) continue;
    h.bytes(name.data(), name.size());
    auto c = host(t);
    h.bytes(c.data_ptr(), c.numel() * c.element_size());
  }
  return h.hex();
}

}  // namespace mimic::models
