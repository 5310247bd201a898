#include "mimic/io/tensor_store.h"

#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "mimic/core/error.h"
#include "mimic/core/json_keys.h"
#include "mimic/io/atomic_file.h"

namespace mimic::io {

namespace fs = std::filesystem;

const char* const kWeightsFile = "model.safetensors";
const char* const kIndexFile = "model.safetensors.index.json";

void TensorStore::add(SafeTensorsFile f) {
  for (const auto& [k, v] : f.metadata()) metadata_.emplace(k, v);
  const size_t i = files_.size();
  for (const auto& t : f.tensors()) {
    auto [it, fresh] = where_.emplace(t.name, i);
    MIMIC_CHECK(fresh, path_, ": tensor '", t.name, "' is in both ", files_[it->second].path(), " and ", f.path());
  }
  files_.push_back(std::move(f));
}

TensorStore TensorStore::open_file(const std::string& path) {
  TensorStore s;
  s.path_ = path;
  s.add(SafeTensorsFile::open(path));
  return s;
}

TensorStore TensorStore::open_index(const std::string& index_path) {
  TensorStore s;
  s.path_ = index_path;
  s.sharded_ = true;
  const std::string where = index_path + ": ";
  const nlohmann::json j = json_parse(read_text_file(index_path), index_path);  // mimic's reader: no nlohmann tag (helper-61)
  MIMIC_CHECK(j.is_object(), where, "not a JSON object");
  MIMIC_CHECK(!j.contains("metadata") || j["metadata"].is_object() || j["metadata"].is_null(), where, "\"metadata\" is not an object");
  MIMIC_CHECK(j.contains("weight_map") && j["weight_map"].is_object(), where, "no \"weight_map\" object");
  const auto& map = j["weight_map"];
  MIMIC_CHECK(!map.empty(), where, "\"weight_map\" lists no tensors");
  std::map<std::string, std::set<std::string>> by_shard;  // sorted: HF names sort in shard order
  for (auto it = map.begin(); it != map.end(); ++it) {
    MIMIC_CHECK(it.value().is_string(), where, "weight_map entry of '", it.key(), "' is not a file name");
    const auto shard = it.value().get<std::string>();
    MIMIC_CHECK(!shard.empty() && shard != "." && shard != ".." && shard.find('/') == std::string::npos &&
                    shard.find('\\') == std::string::npos,
                where, "weight_map entry of '", it.key(), "' is not a plain file name: '", shard, "'");
    by_shard[shard].insert(it.key());
  }
  const fs::path dir = fs::path(index_path).parent_path();
  // every shard file first: a tensor moved to a shard that does not exist was named as one the shard it came from
  // holds unassigned, which sent the user to the wrong file (the checkpoint probe of 2026-12-01)
  for (const auto& [shard, names] : by_shard) {
    const auto file = (dir / shard).string();
    std::error_code ec;  // a name the file system refuses (too long, ...) is a missing shard, not an exception
    MIMIC_CHECK(fs::is_regular_file(file, ec), where, "missing shard file '", shard, "' (", file, "), which the weight_map names for '",
                *names.begin(), "'", names.size() > 1 ? " and " + std::to_string(names.size() - 1) + " more" : "");
  }
  for (const auto& [shard, names] : by_shard) {
    auto f = SafeTensorsFile::open((dir / shard).string());
    for (const auto& n : names)
      MIMIC_CHECK(f.contains(n), where, "tensor '", n, "' is listed in shard '", shard, "' but that file has no such tensor");
    for (const auto& t : f.tensors())
      MIMIC_CHECK(names.count(t.name), where, "shard '", shard, "' holds tensor '", t.name,
                  "' which the weight_map does not assign to it");
    s.add(std::move(f));
  }
  return s;
}

TensorStore TensorStore::open_dir(const std::string& dir) {
  const fs::path d(dir);
  if (fs::exists(d / kWeightsFile)) return open_file((d / kWeightsFile).string());
  MIMIC_CHECK(fs::exists(d / kIndexFile), dir, ": no ", kWeightsFile, " (nor ", kIndexFile, ")");
  return open_index((d / kIndexFile).string());
}

bool TensorStore::has_weights(const std::string& dir) {
  return fs::exists(fs::path(dir) / kWeightsFile) || fs::exists(fs::path(dir) / kIndexFile);
}

std::vector<std::string> TensorStore::files() const {
  std::vector<std::string> out;
  for (const auto& f : files_) out.push_back(f.path());
  return out;
}

std::vector<std::string> TensorStore::names() const {
  std::vector<std::string> out;
  for (const auto& f : files_)
    for (const auto& t : f.tensors()) out.push_back(t.name);
  return out;
}

std::vector<TensorInfo> TensorStore::tensors() const {
  std::vector<TensorInfo> out;
  for (const auto& f : files_) out.insert(out.end(), f.tensors().begin(), f.tensors().end());
  return out;
}

const TensorInfo& TensorStore::info(const std::string& name) const {
  auto it = where_.find(name);
  MIMIC_CHECK(it != where_.end(), path_, ": no tensor named '", name, "'");
  return files_[it->second].info(name);
}

const std::string& TensorStore::file_of(const std::string& name) const {
  auto it = where_.find(name);
  MIMIC_CHECK(it != where_.end(), path_, ": no tensor named '", name, "'");
  return files_[it->second].path();
}

at::Tensor TensorStore::load(const std::string& name) const {
  auto it = where_.find(name);
  MIMIC_CHECK(it != where_.end(), path_, ": no tensor named '", name, "'");
  return files_[it->second].load(name);
}

at::Tensor TensorStore::load(const std::string& name, at::ScalarType as) const {
  auto it = where_.find(name);
  MIMIC_CHECK(it != where_.end(), path_, ": no tensor named '", name, "'");
  return files_[it->second].load(name, as);
}

std::string shard_file_name(size_t index, size_t count) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", index, count);
  return buf;
}

std::vector<std::string> save_sharded(const std::string& dir, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                                      const std::vector<ShardGroup>& groups, const SaveOptions& options) {
  using Tensors = std::vector<std::pair<std::string, at::Tensor>>;
  std::vector<Tensors> parts(groups.size() + 1);
  for (const auto& item : tensors) {
    size_t g = 0;
    while (g < groups.size() && !groups[g].match(item.first)) ++g;
    parts[g].push_back(item);
  }
  for (size_t g = 0; g < groups.size(); ++g)
    MIMIC_CHECK(!parts[g].empty(), "shard group '", groups[g].name, "' matches no tensor");
  if (parts.back().empty()) parts.pop_back();
  MIMIC_CHECK(!parts.empty(), "no tensors to save");

  fs::create_directories(dir);
  nlohmann::json weight_map = nlohmann::json::object();
  uint64_t total = 0;
  std::vector<std::string> names;
  for (size_t i = 0; i < parts.size(); ++i) {
    const auto name = shard_file_name(i + 1, parts.size());
    SaveOptions so = options;
    if (i < groups.size()) so.metadata = {{"format", "pt"}};
    save_safetensors((fs::path(dir) / name).string(), parts[i], so);
    for (const auto& [key, t] : parts[i]) {
      weight_map[key] = name;
      const auto st = options.convert_floats && t.is_floating_point() ? to_scalar_type(options.store_as) : t.scalar_type();
      total += static_cast<uint64_t>(t.numel()) * c10::elementSize(st);
    }
    names.push_back(name);
  }
  nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  write_text_atomically((fs::path(dir) / kIndexFile).string(), index.dump(2) + "\n");
  return names;
}

bool is_weights_file(const std::string& name) {
  static const std::regex shard(R"(model-\d{5}-of-\d{5}\.safetensors)");
  return name == kWeightsFile || name == kIndexFile || std::regex_match(name, shard);
}

void remove_stale_weights(const std::string& dir, const std::vector<std::string>& keep, const std::set<std::string>* among) {
  const std::set<std::string> kept(keep.begin(), keep.end());
  std::vector<fs::path> stale;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const auto name = e.path().filename().string();
    if (is_weights_file(name) && !kept.count(name) && (!among || among->count(name)) && e.is_regular_file()) stale.push_back(e.path());
  }
  for (const auto& p : stale) fs::remove(p);
}

}  // namespace mimic::io
