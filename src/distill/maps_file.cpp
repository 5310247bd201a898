#include "mimic/distill/maps_file.h"

#include <limits>
#include <map>
#include <set>

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>

#include "mimic/attention/distillable.h"
#include "mimic/attention/kinds.h"
#include "mimic/core/error.h"
#include "mimic/core/json_keys.h"
#include "mimic/io/safetensors.h"

namespace mimic::distill {

std::string layer_prefix(int64_t layer) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "layer_%02lld", static_cast<long long>(layer));
  return buf;
}

DistilledMaps DistilledMaps::open(const std::string& path) {
  DistilledMaps m;
  m.path_ = path;
  m.file_ = std::make_shared<io::SafeTensorsFile>(io::SafeTensorsFile::open(path));
  const auto& md = m.file_->metadata();
  auto get = [&](const char* key) -> const std::string& {
    auto it = md.find(key);
    MIMIC_CHECK(it != md.end(), path, ": no metadata '", key, "' (not a complete mimic distill output)");
    return it->second;
  };
  MIMIC_CHECK(md.count("format") && md.at("format") == "mimic-distill-1", path,
              ": not a mimic distill output (metadata format mimic-distill-1 expected; make one with `mimic distill`)");
  // A whole decimal number in [1, hi]: the kernel built below allocates by n_head and head_dim, so a file cannot
  // make it ask for more than a real layer has (record files bound their heads the same way).
  auto count = [&](const char* key, int64_t hi) {
    const std::string& v = get(key);
    size_t used = 0;
    int64_t x = 0;
    try {
      x = std::stoll(v, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    MIMIC_CHECK(used == v.size() && x >= 1 && x <= hi, path, ": metadata '", key, "' must be an integer in [1, ", hi, "], got '", v, "'");
    return x;
  };
  try {
    // json_parse: one line naming the file (nlohmann's "[json.exception.parse_error.101] ..." showed through)
    m.attention_ = json_parse(get("attention"), path + ": metadata 'attention'");
    const auto layers = json_parse(get("layers"), path + ": metadata 'layers'");
    MIMIC_CHECK(layers.is_array(), path, ": metadata 'layers' must be a list of layer indices, got ", layers.dump());
    for (const auto& l : layers) {
      // an integer in range: get<int64_t> of a float like 1e300 would be undefined
      MIMIC_CHECK(l.is_number_integer() && l.get<int64_t>() >= 0 && l.get<int64_t>() < 100000, path,
                  ": metadata 'layers' must hold layer indices in [0, 100000), got ", l.dump());
      m.layers_.push_back(l.get<int64_t>());
    }
    m.n_head_ = count("n_head", 4096);
    m.head_dim_ = count("head_dim", 1024);
    MIMIC_CHECK(m.n_head_ * m.head_dim_ <= 65536, path, ": n_head x head_dim = ", m.n_head_ * m.head_dim_,
                " is wider than any layer mimic converts (at most 65536)");
    // 'sla' says what the attention's gates say (distill writes both); "7" was converted without a word (helper-98)
    if (md.count("sla")) {
      const bool gates = m.attention_.is_object() && m.attention_.value("gates", false) == true;
      MIMIC_CHECK(md.at("sla") == (gates ? "1" : "0"), path, ": metadata 'sla' is '", md.at("sla"), "', but its attention ",
                  gates ? "has" : "has no", " SLA gates (", gates ? "1" : "0", " expected)");
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(path, ": malformed distill metadata (", e.what(), ")");
  }
  m.source_ = md.count("source") ? md.at("source") : "";
  m.model_digest_ = md.count("model_digest") ? md.at("model_digest") : "";
  m.kind_ = md.count("kind") ? md.at("kind") : "linear";  // files written before the kinds registry hold linear attention
  // the kernel must build, and be one distill can have written; its feature map is kept for feature_map()
  // (an unknown map named in the file: the message names the file, as every other refusal of it does)
  attention::AttentionKernel kernel;
  try {
    kernel = attention::make_attention_kernel(m.kind_, m.attention_, m.n_head_, m.head_dim_);
    m.feature_map_ = attention::as_distillable(kernel, path + "'s kernel")->feature_map();
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.rfind(path, 0) == 0) throw;
    fail(path, ": ", what);
  }
  // Every tensor is one of a listed layer's kernel's, stored as a floating-point type where the kernel's is: a tensor
  // no kernel has, and a feature map stored as I32 over a float's bytes, were converted without a word (a model
  // file's refuse both: helper-61's probe of 2026-12-04).
  std::map<std::string, bool> floating;  // a kernel tensor's name within its layer → whether it is floating-point
  for (const auto& p : kernel->named_parameters()) floating[p.key()] = p.value().is_floating_point();
  for (const auto& b : kernel->named_buffers()) floating[b.key()] = b.value().is_floating_point();
  std::map<std::string, bool> expected;
  for (int64_t l : m.layers_)
    for (const auto& [name, fp] : floating) expected[layer_prefix(l) + "." + name] = fp;
  for (const auto& name : m.file_->names()) {
    const auto it = expected.find(name);
    MIMIC_CHECK(it != expected.end(), path, ": unexpected tensor '", name, "' (no ", m.kind_, " kernel of the layers it lists, ",
                nlohmann::json(m.layers_).dump(), ", has it)");
    const auto dtype = m.file_->info(name).dtype;
    MIMIC_CHECK(!it->second || at::isFloatingType(io::to_scalar_type(dtype)), path, ": tensor '", name, "' is stored as ", io::dtype_name(dtype),
                ": it is a floating-point tensor (F32, F16, BF16 or F64)");
  }
  // Every tensor is read once here (maps are small), so that a NaN in any layer is refused when the file is
  // opened, before convert, report or distill --eval-only compute or write anything (load refuses it).
  for (const auto& name : m.file_->names()) m.file_->load(name);
  return m;
}

bool DistilledMaps::has_layer(int64_t layer) const { return std::find(layers_.begin(), layers_.end(), layer) != layers_.end(); }

std::string DistilledMaps::feature_map() const { return feature_map_; }

std::string DistilledMaps::teacher_mismatch(const std::string& other_digest, const std::string& other) const {
  if (model_digest_.empty() || other_digest.empty() || model_digest_ == other_digest) return "";
  return path_ + " was distilled from " + (source_.empty() ? "another model" : source_) + " (digest " + model_digest_ + "), not from " +
         other + " (digest " + other_digest + ")";
}
void DistilledMaps::check_teacher(const std::string& other_digest, const std::string& other, const std::string& what_to_do) const {
  const auto mismatch = teacher_mismatch(other_digest, other);
  MIMIC_CHECK(mismatch.empty(), mismatch, ": ", what_to_do);
}
bool DistilledMaps::sla() const { return attention_.value("gates", false); }
const std::map<std::string, std::string>& DistilledMaps::metadata() const { return file_->metadata(); }

std::vector<double> DistilledMaps::head_kl(int64_t layer) const {
  const auto& md = metadata();
  MIMIC_CHECK(md.count("metrics"), path_, ": no distill metrics (an --eval-only output?): per-head fidelity is unknown");
  nlohmann::json metrics;
  try {
    const std::string where = path_ + " (its metrics)";
    metrics = json_parse(md.at("metrics"), where);  // mimic's reader: nlohmann's tag stayed out (helper-61)
    for (const auto& m : metrics) {
      if (json_key(m, "layer", where) != layer) continue;  // compared as JSON: a float layer is never converted to int64
      std::vector<double> kl;
      // null: undefined (a student whose weights are no distribution, the delta kind's): NaN
      for (const auto& h : json_key(json_key(m, "after", where), "heads", where))
        kl.push_back(h.is_object() && h.contains("kl") && h["kl"].is_null() ? std::numeric_limits<double>::quiet_NaN() : json_double(h, "kl", where));
      MIMIC_CHECK(static_cast<int64_t>(kl.size()) == n_head_, path_, ": layer ", layer, "'s metrics hold ", kl.size(), " heads, not ",
                  n_head_);
      return kl;
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(path_, ": malformed distill metrics (", e.what(), ")");
  }
  fail(path_, ": no distill metrics for layer ", layer);
}

void DistilledMaps::load_into(attention::AttentionKernelImpl& kernel, int64_t layer) const {
  MIMIC_CHECK(has_layer(layer), path_, ": holds no maps for layer ", layer);
  torch::NoGradGuard no_grad;
  const std::string prefix = layer_prefix(layer) + ".";
  auto load = [&](const std::string& name, at::Tensor dst) {
    const std::string key = prefix + name;
    MIMIC_CHECK(file_->contains(key), path_, ": no tensor '", key, "'");
    at::Tensor t = file_->load(key, at::kFloat);
    MIMIC_CHECK(t.sizes() == dst.sizes(), path_, ": tensor '", key, "' has shape ", t.sizes(), ", expected ", dst.sizes());
    dst.copy_(t);
  };
  for (auto& p : kernel.named_parameters()) load(p.key(), p.value());
  for (auto& b : kernel.named_buffers()) load(b.key(), b.value());
}

nlohmann::json DistilledMaps::options_with(const nlohmann::json& overrides) const {
  MIMIC_CHECK(overrides.is_object(), "attention options must be a JSON object, got ", overrides.dump());
  auto options = attention_;
  for (auto it = overrides.begin(); it != overrides.end(); ++it) {
    MIMIC_CHECK(it.key() != "feature_map" && it.key() != "map_options" && it.key() != "gates", "--attention-options: '", it.key(),
                "' shapes the tensors ", path_, " holds: distill again with it instead");
    if (it.value().is_null()) {
      options.erase(it.key());  // null removes an option of the maps' (JSON merge patch, RFC 7396)
    } else {
      options[it.key()] = it.value();
    }
  }
  return options;
}

std::shared_ptr<attention::DistillableKernel> DistilledMaps::kernel(int64_t layer, const nlohmann::json& overrides) const {
  MIMIC_CHECK(has_layer(layer), path_, ": holds no maps for layer ", layer);
  auto k = attention::as_distillable(attention::make_attention_kernel(kind_, options_with(overrides), n_head_, head_dim_), path_);
  // Every trained tensor of the layer has its place in the kernel the options make: gate=false on gated delta maps,
  // or mix=fixed on a hybrid's learned mix, made a kernel without w_alpha or window_logit, and the trained values
  // were dropped with exit 0 (helper-75's probe of 2026-12-06). (The file's own options use every tensor it holds:
  // open() checks that.)
  if (!overrides.empty()) {
    const std::string prefix = layer_prefix(layer) + ".";
    std::set<std::string> own;
    for (const auto& p : k->named_parameters()) own.insert(prefix + p.key());
    for (const auto& b : k->named_buffers()) own.insert(prefix + b.key());
    std::string dropped, lacking;
    for (const auto& name : file_->names())
      if (name.rfind(prefix, 0) == 0 && !own.count(name)) dropped += (dropped.empty() ? "" : ", ") + name;
    for (const auto& name : own)
      if (!file_->contains(name)) lacking += (lacking.empty() ? "" : ", ") + name;
    // the options as the user gave them: the nulls are convert's own removals of a cache (without_cache)
    nlohmann::json given = nlohmann::json::object();
    for (auto it = overrides.begin(); it != overrides.end(); ++it)
      if (!it.value().is_null()) given[it.key()] = it.value();
    MIMIC_CHECK(dropped.empty(), "--attention-options ", given.dump(), ": the ", kind_, " kernel it makes has no place for ", dropped,
                ", which ", path_, " holds trained: distill again with the option instead");
    // and the other way: mix=learned on a fixed mix, gate=true on ungated delta maps read "MAPS: no tensor
    // 'layer_00.window_logit'", naming no option (helper-82's review of 2026-12-06)
    MIMIC_CHECK(lacking.empty(), "--attention-options ", given.dump(), ": the ", kind_, " kernel it makes trains ", lacking, ", which ",
                path_, " does not hold: distill again with the option instead");
  }
  load_into(*k, layer);
  k->eval();
  return k;
}

}  // namespace mimic::distill
