// safetensors reader and writer (https://github.com/huggingface/safetensors format):
//   8 bytes little-endian u64 N | N bytes JSON header | data
// The header maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to
// the start of the data section) plus an optional "__metadata__" map of strings.
// The reader memory-maps the file and checks every offset, length and shape against the file before use;
// a broken file is a mimic::Error naming the problem. Nothing here executes pickles.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mimic::io {

enum class DType { F32, F16, BF16, I64, I32, I16, I8, U8, BOOL, F64 };

const char* dtype_name(DType d);            // "F32", ...
DType dtype_from_name(const std::string& s);  // throws mimic::Error on an unknown name
size_t dtype_size(DType d);
at::ScalarType to_scalar_type(DType d);
DType from_scalar_type(at::ScalarType t);   // throws for types safetensors cannot store

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets into the data section
  uint64_t end = 0;
  int64_t numel() const;
};

class SafeTensorsFile {
 public:
  // Opens and validates a file. Throws mimic::Error (naming the file and the problem) on a truncated
  // file, an absurd header length, malformed JSON, an unknown dtype, offsets past the end or
  // overlapping, or a byte length that does not match dtype × shape.
  static SafeTensorsFile open(const std::string& path);

  const std::string& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Tensor names in file order (sorted by data offset).
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const { return index_.count(name) > 0; }
  const TensorInfo& info(const std::string& name) const;  // throws if absent
  const std::vector<TensorInfo>& tensors() const { return tensors_; }

  // Copies a tensor out of the mapping (the result owns its memory). With `as` set, converts to that
  // dtype (e.g. F16 storage loaded as float32). A floating tensor holding a NaN or an infinity is a
  // mimic::Error naming the file and the tensor.
  at::Tensor load(const std::string& name) const;
  at::Tensor load(const std::string& name, at::ScalarType as) const;

  SafeTensorsFile(SafeTensorsFile&&) noexcept = default;
  SafeTensorsFile& operator=(SafeTensorsFile&&) noexcept = default;
  ~SafeTensorsFile();

 private:
  SafeTensorsFile() = default;
  struct Mapping;
  std::string path_;
  std::shared_ptr<Mapping> map_;
  const uint8_t* data_ = nullptr;  // start of the data section
  uint64_t data_size_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Writes tensors (any order; written sorted by name) with optional metadata. Tensors are written in
// their own dtype unless `store_as` is given for floating tensors (e.g. F16 storage of float32 weights).
// Written to a temporary file beside `path` and renamed, so a reader never sees a half-written file.
struct SaveOptions {
  std::map<std::string, std::string> metadata;
  bool convert_floats = false;
  DType store_as = DType::F32;  // used when convert_floats is set
};
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                      const SaveOptions& options = {});

// What a file's bytes show it to be, for naming another command's result found where a command writes: kHdf5File for
// an HDF5 file (a record), a safetensors file's `format` ("" for one without), or nullopt for neither (damaged, or
// another kind of file). Reads the signature and the header only.
inline constexpr const char* kHdf5File = "HDF5";
std::optional<std::string> file_kind(const std::string& path);

}  // namespace mimic::io
