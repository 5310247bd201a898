#include "mimic/models/checkpoint.h"

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "mimic/core/error.h"
#include "mimic/io/safetensors.h"
#include "mimic/io/tensor_store.h"
#include "mimic/models/model.h"

namespace mimic::models {

namespace {

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }
bool ends_with(const std::string& s, const std::string& e) {
  return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
}

std::string strip(const std::string& key, const std::string& prefix) {
  return !prefix.empty() && starts_with(key, prefix) ? key.substr(prefix.size()) : key;
}

std::string rename_gamma_beta(const std::string& name) {
  if (ends_with(name, "LayerNorm.gamma")) return name.substr(0, name.size() - 5) + "weight";
  if (ends_with(name, "LayerNorm.beta")) return name.substr(0, name.size() - 4) + "bias";
  return name;
}

std::string show_shape(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

void load_weights(const Family& family, const io::TensorStore& f, std::vector<std::pair<std::string, at::Tensor>> params,
                  const std::map<std::string, std::pair<std::string, std::string>>& ties, KeyLayout& layout,
                  Passthrough& passthrough, const LoadRules& rules) {
  auto matches = [](const std::vector<std::string>& prefixes, const std::string& name) {
    for (const auto& p : prefixes)
      if (starts_with(name, p)) return true;
    return false;
  };
  const std::string where = f.path() + ": ";
  const std::string& prefix = family.checkpoint_prefix;
  layout = KeyLayout();
  layout.metadata = f.metadata();
  for (const auto& n : f.names()) {
    if (starts_with(n, prefix)) layout.prefix = prefix;
    if (ends_with(n, "LayerNorm.gamma")) layout.gamma_beta = true;
  }
  std::map<std::string, at::Tensor> by_name(params.begin(), params.end());
  std::set<std::string> loaded;
  std::map<std::string, at::Tensor> tied_copies;
  std::map<std::string, std::string> key_of;  // network name → the file key that gave it
  torch::NoGradGuard no_grad;
  for (const auto& key : f.names()) {
    const auto& info = f.info(key);
    layout.dtypes[key] = info.dtype;
    std::string name = rename_gamma_beta(strip(key, layout.prefix));
    if (matches(rules.ignored, name)) {
      layout.dtypes.erase(key);
      continue;
    }
    // one tensor under two keys (with and without the prefix, or gamma beside weight): the later one won without
    // a word, whichever it was (a probe of 2026-12-01 doubled a LayerNorm's prefixed copy: perplexity 38.6 → 124.5)
    const auto [first, fresh] = key_of.emplace(name, key);
    MIMIC_CHECK(fresh, f.file_of(key), ": tensors '", first->second, "'",
                f.file_of(first->second) == f.file_of(key) ? "" : " (in " + f.file_of(first->second) + ")", " and '", key, "' are both ",
                family.display_name, "'s '", name, "': keep one of them");
    if (ties.count(name)) {
      MIMIC_CHECK(at::isFloatingType(io::to_scalar_type(info.dtype)), f.file_of(key), ": tensor '", key, "' is stored as ",
                  io::dtype_name(info.dtype), ": a weight is a floating-point tensor (F32, F16, BF16 or F64)");
      layout.tied.push_back(name);
      tied_copies[name] = f.load(key, at::kFloat);
      continue;
    }
    if (family.is_buffer(name)) {
      passthrough.emplace_back(key, f.load(key));
      continue;
    }
    auto it = by_name.find(name);
    const std::string in_file = f.file_of(key) + ": ";
    MIMIC_CHECK(it != by_name.end(), in_file, "unexpected tensor '", key, "' (not part of this ", family.display_name,
                " model; check config.json's architectures and sizes)");
    auto& p = it->second;
    MIMIC_CHECK(info.shape == p.sizes().vec(), in_file, "tensor '", key, "' has shape ", c10::IntArrayRef(info.shape),
                ", expected ", p.sizes());
    // a weight stored as integers or booleans was cast and run, and export wrote it back as it was (helper-61's probe)
    MIMIC_CHECK(!p.is_floating_point() || at::isFloatingType(io::to_scalar_type(info.dtype)), in_file, "tensor '", key, "' is stored as ",
                io::dtype_name(info.dtype), ": a weight is a floating-point tensor (F32, F16, BF16 or F64)");
    p.copy_(f.load(key, at::kFloat));
    loaded.insert(name);
  }
  for (const auto& [name, p] : params)
    MIMIC_CHECK(loaded.count(name) || matches(rules.may_be_missing, name), where, "missing tensor '",
                (layout.prefix.empty() || !family.takes_prefix(name) ? "" : layout.prefix) + name, "'");
  for (const auto& [name, copy] : tied_copies) {
    const auto& target = by_name.at(ties.at(name).first);
    // named by the file's keys (it read 'embed_tokens.weight' for model.embed_tokens.weight: helper-80's probe)
    const auto file_key = [&](const std::string& n) { return key_of.count(n) ? key_of.at(n) : n; };
    MIMIC_CHECK(copy.sizes() == target.sizes(), where, "tied tensor '", file_key(name), "' has shape ", copy.sizes(), ", expected ",
                target.sizes());
    MIMIC_CHECK(torch::equal(copy, target), where, "tensor '", file_key(name), "' should equal '", file_key(ties.at(name).first),
                "' (tied weights) but differs");
  }
}

std::vector<std::pair<std::string, at::Tensor>> weights_to_save(const Family& family, const std::vector<std::pair<std::string, at::Tensor>>& params,
                                                              const std::map<std::string, std::pair<std::string, std::string>>& ties,
                                                              const KeyLayout& layout, const Passthrough& passthrough,
                                                              bool as_loaded) {
  std::map<std::string, at::Tensor> by_name(params.begin(), params.end());
  auto file_key = [&](const std::string& name) {
    std::string key = name;
    if (layout.gamma_beta) {
      if (ends_with(key, "LayerNorm.weight")) key = key.substr(0, key.size() - 6) + "gamma";
      else if (ends_with(key, "LayerNorm.bias")) key = key.substr(0, key.size() - 4) + "beta";
    }
    return (family.takes_prefix(name) ? layout.prefix : std::string()) + key;
  };
  auto stored = [&](const std::string& key, const at::Tensor& t) {
    auto it = layout.dtypes.find(key);
    at::Tensor out = t.detach();
    if (as_loaded && it != layout.dtypes.end() && out.is_floating_point()) out = out.to(io::to_scalar_type(it->second));
    return out;
  };
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& [name, t] : params) {
    std::string key = file_key(name);
    out.emplace_back(key, stored(key, t));
  }
  for (const auto& name : layout.tied) out.emplace_back(file_key(name), stored(file_key(name), by_name.at(ties.at(name).first)));
  for (const auto& [key, t] : passthrough) out.emplace_back(key, t);
  return out;
}

std::string internal_name(const Family& family, const std::string& key, std::string* kind) {
  std::string name = rename_gamma_beta(strip(key, family.checkpoint_prefix));
  if (kind) *kind = family.is_buffer(name) ? "buffer" : "param";
  return name;
}

void check_config_against_weights(const Family& family, const ModelConfig& c, const io::TensorStore& f, const std::string& config_path) {
  std::map<std::string, std::string> key_of;  // network name → file key
  for (const auto& key : f.names()) key_of.emplace(internal_name(family, key, nullptr), key);
  const std::string weights = std::filesystem::path(f.path()).filename().string();
  const bool prefixed = !family.checkpoint_prefix.empty() &&
                        std::any_of(key_of.begin(), key_of.end(), [&](const auto& kv) { return kv.first != kv.second && kv.second.rfind(family.checkpoint_prefix, 0) == 0; });
  for (const SizedTensor& t : family.sized_tensors(c)) {
    auto it = key_of.find(t.name);
    if (it == key_of.end()) {
      // named as the file would name it (with the family's prefix where its other keys carry it), and a key left out
      // of config.json as absent (it read "null")
      const auto shown = [&](const std::string& name) { return (prefixed && family.takes_prefix(name) ? family.checkpoint_prefix : "") + name; };
      const auto value = [&](const std::string& key) {
        return c.raw.contains(key) ? c.raw[key].dump() : std::string("absent (its default asks for it)");
      };
      // a last-layer tensor the first layer lacks too is missing from every layer: not a matter of the layer count (a
      // Qwen2 file without its q/k/v biases was told it held fewer layers: the Llama-family probe of 2026-12-01)
      const std::string last = "." + std::to_string(c.n_layer - 1) + ".", at = t.name_key.empty() ? "" : t.name;
      const size_t cut = at.find(last);
      const std::string first = cut == std::string::npos ? "" : at.substr(0, cut) + ".0." + at.substr(cut + last.size());
      const bool in_none = !first.empty() && !key_of.count(first);
      if (!t.wanted_by.empty())
        fail(config_path, ": ", t.wanted_by, " is ", value(t.wanted_by), ", but ", weights, " has no tensor '", shown(in_none ? first : t.name), "'",
             in_none ? " (in any layer)" : "");
      if (!t.name_key.empty() && !in_none)
        fail(config_path, ": ", t.name_key, " is ", value(t.name_key), ", but ", weights, " has no tensor '", shown(t.name), "' (", weights,
             " holds fewer layers)");
      fail(config_path, ": ", weights, " has no tensor '", shown(in_none ? first : t.name), "'", in_none ? " (in any layer)" : "",
           t.why.empty() ? ", which every " + family.display_name + " checkpoint holds" : ": " + t.why);
    }
    const auto& shape = f.info(it->second).shape;
    std::vector<int64_t> want;
    for (const auto& d : t.shape) want.push_back(d.size);
    if (shape.size() == want.size() && std::equal(shape.begin(), shape.end(), want.begin())) continue;
    // Name the first key whose size the file disagrees with.
    for (size_t i = 0; i < t.shape.size(); ++i)
      if (i >= shape.size() || shape[i] != t.shape[i].size)
        fail(config_path, ": ", t.shape[i].key, " asks for '", it->second, "' of shape ", show_shape(want), ", but ", weights, " holds ",
             show_shape(shape), " (", t.shape[i].shown.empty() ? t.shape[i].key + " " + std::to_string(t.shape[i].size) : t.shape[i].shown,
             " disagrees with the weights)");
    fail(config_path, ": '", it->second, "' is ", show_shape(shape), " in ", weights, ", the config asks for ", show_shape(want));
  }
  // Weights holding more layers than the config: the tensors of one layer past its last are present (this was found
  // only as an "unexpected tensor" of the load, naming neither the key nor its value: the tenth probe of 2026-11-29).
  ModelConfig more = c;
  more.n_layer = c.n_layer + 1;
  for (const SizedTensor& t : family.sized_tensors(more))
    if (!t.name_key.empty() && key_of.count(t.name))
      fail(config_path, ": ", t.name_key, " is ", c.raw.value(t.name_key, nlohmann::json()).dump(), ", but ", weights, " holds a tensor '", key_of.at(t.name),
           "' (", weights, " holds more layers)");
}

namespace {
// Whether one .safetensors file's metadata holds mimic's mark; an unreadable file holds none.
bool carries_mark(const std::string& path) {
  try {
    const auto md = io::SafeTensorsFile::open(path).metadata();
    auto it = md.find(kWrittenByKey);
    return it != md.end() && it->second == "mimic";
  } catch (const Error&) {
    return false;
  }
}
}  // namespace

// (declared in model.h, beside the writer that puts the mark in)
bool written_by_mimic(const std::string& dir) {
  // the weights as a load finds them (io::TensorStore: model.safetensors, or the shards the index names, checked)
  try {
    for (const auto& f : io::TensorStore::open_dir(dir).files())
      if (carries_mark(f)) return true;
  } catch (const Error&) {
    // no weights, or an index naming missing shards: no mark
  }
  return false;
}

std::vector<std::string> unmarked_weights_files(const std::string& dir) {
  std::vector<std::string> names;
  bool marked = false;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!io::is_weights_file(name) || !e.is_regular_file(ec)) continue;
    names.push_back(name);
    if (name != io::kIndexFile && carries_mark(e.path().string())) marked = true;  // any shard's, in a set
  }
  if (marked) return {};
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace mimic::models
