// The weights of a model directory as one set of named tensors, whether they sit in one safetensors file
// (model.safetensors) or in the shards of a sharded checkpoint (HF's layout for big models:
// model.safetensors.index.json = {"metadata": {"total_size": N}, "weight_map": {tensor: shard file}} plus
// the shard files, e.g. model-00001-of-00002.safetensors). Writing sharded checkpoints is here too.
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "mimic/io/safetensors.h"

namespace mimic::io {

extern const char* const kWeightsFile;  // "model.safetensors"
extern const char* const kIndexFile;    // "model.safetensors.index.json"
// Whether a file name is a checkpoint's weights: kWeightsFile, kIndexFile or a shard "model-0000i-of-0000n.safetensors".
bool is_weights_file(const std::string& name);

class TensorStore {
 public:
  // One safetensors file.
  static TensorStore open_file(const std::string& path);
  // A sharded checkpoint from its index file. Every shard named in weight_map must exist beside the index
  // and hold exactly the tensors the index assigns to it (a tensor the index lists but its shard lacks, or
  // a shard tensor the index does not list, is an error); a malformed index is an error naming it.
  static TensorStore open_index(const std::string& index_path);
  // A model directory's weights: model.safetensors, else model.safetensors.index.json (HF's order).
  static TensorStore open_dir(const std::string& dir);
  // True when `dir` holds weights open_dir can read.
  static bool has_weights(const std::string& dir);

  const std::string& path() const { return path_; }   // the file, or the index
  bool sharded() const { return sharded_; }
  std::vector<std::string> files() const;              // the safetensors files, in shard order
  // Metadata of the files (a sharded checkpoint: the union over its shards, earlier shards first).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Tensor names in storage order (shard by shard, each in file order).
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const { return where_.count(name) > 0; }
  const TensorInfo& info(const std::string& name) const;  // offsets relative to its own file; throws if absent
  const std::string& file_of(const std::string& name) const;
  std::vector<TensorInfo> tensors() const;               // in storage order

  at::Tensor load(const std::string& name) const;
  at::Tensor load(const std::string& name, at::ScalarType as) const;

 private:
  TensorStore() = default;
  void add(SafeTensorsFile f);
  std::string path_;
  bool sharded_ = false;
  std::vector<SafeTensorsFile> files_;
  std::map<std::string, size_t> where_;  // tensor → index into files_
  std::map<std::string, std::string> metadata_;
};

// A group of tensors written to its own shard, chosen by file key.
struct ShardGroup {
  std::string name;                                  // for messages ("embeddings")
  std::function<bool(const std::string& key)> match;
};

// HF's shard file name: model-00001-of-00002.safetensors (1-based).
std::string shard_file_name(size_t index, size_t count);

// Writes a sharded checkpoint into `dir`: one shard per group (a tensor goes to the first group matching
// it; empty groups are an error) and a last shard with the rest (left out when nothing remains), then the
// index (written last, atomically). Group shards carry only {"format": "pt"} as metadata, so that the same
// tensors always give the same bytes; the last shard carries options.metadata. Returns the shard file names.
std::vector<std::string> save_sharded(const std::string& dir, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                                      const std::vector<ShardGroup>& groups, const SaveOptions& options = {});

// Removes the weight files of `dir` not named in `keep`: model.safetensors, model.safetensors.index.json
// and HF-named shards (model-NNNNN-of-NNNNN.safetensors), so that a directory saved again in another
// layout holds one set of weights. `among`: only files of these names (what `dir` held before a save began), not one
// another writer placed there since.
void remove_stale_weights(const std::string& dir, const std::vector<std::string>& keep, const std::set<std::string>* among = nullptr);

}  // namespace mimic::io
