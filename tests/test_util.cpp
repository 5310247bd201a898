#include "test_util.h"

#include <map>

#include "mimic/core/paths.h"
#include "mimic/distill/distill.h"
#include "mimic/io/safetensors.h"

namespace mimic::test {

std::string model_with_tokenizer(const std::string& name) {
  static TempDir root;
  static std::map<std::string, std::string> made;
  auto it = made.find(name);
  if (it != made.end()) return it->second;
  namespace fs = std::filesystem;
  // The assets are found before anything is copied: on a machine without them every call says "asset not found"
  // (a half-made copy would make the next call fail on "File exists" instead).
  const bool gpt2 = name.rfind("gpt2", 0) == 0;
  std::vector<std::string> assets;
  for (const char* f : gpt2 ? std::vector<const char*>{"vocab.json", "merges.txt"} : std::vector<const char*>{"vocab.txt"})
    assets.push_back(asset_path(std::string(gpt2 ? "gpt2/" : "bert-base-uncased/") + f));
  auto dst = root.file(name);
  fs::copy(fixture("models/" + name), dst, fs::copy_options::recursive);
  for (const auto& a : assets) fs::copy_file(a, dst + "/" + fs::path(a).filename().string());
  return made[name] = dst;
}

const std::string& initial_gpt2_maps() {
  static TempDir dir;
  static const std::string path = [] {
    write_bytes(dir.file("t.txt"), text_lines(kDickens, 20));
    distill::DistillOptions o;
    o.model_dir = model_with_tokenizer("gpt2-prefixed");
    o.data = dir.file("t.txt");
    o.samples = 4;
    o.seq_len = 16;
    o.feature_map = "hedgehog";
    o.epochs = 0;
    o.batch_size = 2;
    o.val_fraction = 0.5;
    o.progress = false;
    o.out = dir.file("maps.safetensors");
    distill::distill(o);
    return o.out;
  }();
  return path;
}

void edit_safetensors_json(const std::string& path, const std::string& key, const std::function<void(nlohmann::json&)>& edit) {
  auto f = io::SafeTensorsFile::open(path);
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const auto& n : f.names()) tensors.emplace_back(n, f.load(n));
  auto j = nlohmann::json::parse(f.metadata().at(key));
  edit(j);
  io::SaveOptions so;
  so.metadata = f.metadata();
  so.metadata[key] = j.dump();
  io::save_safetensors(path, tensors, so);
}

}  // namespace mimic::test
