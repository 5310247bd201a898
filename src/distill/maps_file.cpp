#include "mimic/distill/maps_file.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>

#include "mimic/attention/distillable.h"
#include "mimic/attention/kinds.h"
#include "mimic/core/error.h"
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
  try {
    m.attention_ = nlohmann::json::parse(get("attention"));
    m.layers_ = nlohmann::json::parse(get("layers")).get<std::vector<int64_t>>();
    m.n_head_ = std::stoll(get("n_head"));
    m.head_dim_ = std::stoll(get("head_dim"));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(path, ": malformed distill metadata (", e.what(), ")");
  }
  m.source_ = md.count("source") ? md.at("source") : "";
  m.model_digest_ = md.count("model_digest") ? md.at("model_digest") : "";
  m.kind_ = md.count("kind") ? md.at("kind") : "linear";  // files written before the kinds registry hold linear attention
  // the kernel must build, and be one distill can have written; its feature map is kept for feature_map()
  m.feature_map_ =
      attention::as_distillable(attention::make_attention_kernel(m.kind_, m.attention_, m.n_head_, m.head_dim_), path + "'s kernel")
          ->feature_map();
  // Every tensor is read once here (maps are small), so that a NaN in any layer is refused when the file is
  // opened, before convert, report or distill --eval-only compute or write anything (load refuses it).
  for (const auto& name : m.file_->names()) m.file_->load(name);
  return m;
}

bool DistilledMaps::has_layer(int64_t layer) const { return std::find(layers_.begin(), layers_.end(), layer) != layers_.end(); }

std::string DistilledMaps::feature_map() const { return feature_map_; }
bool DistilledMaps::sla() const { return attention_.value("gates", false); }
const std::map<std::string, std::string>& DistilledMaps::metadata() const { return file_->metadata(); }

std::vector<double> DistilledMaps::head_kl(int64_t layer) const {
  const auto& md = metadata();
  MIMIC_CHECK(md.count("metrics"), path_, ": no distill metrics (an --eval-only output?): per-head fidelity is unknown");
  nlohmann::json metrics;
  try {
    metrics = nlohmann::json::parse(md.at("metrics"));
    for (const auto& m : metrics) {
      if (m.at("layer").get<int64_t>() != layer) continue;
      std::vector<double> kl;
      for (const auto& h : m.at("after").at("heads")) kl.push_back(h.at("kl").get<double>());
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

std::shared_ptr<attention::DistillableKernel> DistilledMaps::kernel(int64_t layer) const {
  MIMIC_CHECK(has_layer(layer), path_, ": holds no maps for layer ", layer);
  auto k = attention::as_distillable(attention::make_attention_kernel(kind_, attention_, n_head_, head_dim_), path_);
  load_into(*k, layer);
  k->eval();
  return k;
}

}  // namespace mimic::distill
