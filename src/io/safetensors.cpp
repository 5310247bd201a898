#include "mimic/io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "mimic/core/error.h"
#include "mimic/core/json_keys.h"
#include "mimic/core/utf8.h"
#include "mimic/io/atomic_file.h"

namespace mimic::io {

// The first 8 bytes of every HDF5 file (a mimic record): what open() and file_kind() tell one by.
constexpr char kHdf5Signature[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};

namespace {
struct DTypeRow {
  DType dtype;
  const char* name;
  size_t size;
  at::ScalarType scalar;
};
constexpr DTypeRow kDTypes[] = {
    {DType::F32, "F32", 4, at::kFloat},  {DType::F16, "F16", 2, at::kHalf},   {DType::BF16, "BF16", 2, at::kBFloat16},
    {DType::I64, "I64", 8, at::kLong},   {DType::I32, "I32", 4, at::kInt},    {DType::I16, "I16", 2, at::kShort},
    {DType::I8, "I8", 1, at::kChar},     {DType::U8, "U8", 1, at::kByte},     {DType::BOOL, "BOOL", 1, at::kBool},
    {DType::F64, "F64", 8, at::kDouble},
};
const DTypeRow& row(DType d) {
  for (const auto& r : kDTypes)
    if (r.dtype == d) return r;
  fail("safetensors: invalid dtype enum");
}
// Largest header we accept: real checkpoints have headers of a few hundred KB.
constexpr uint64_t kMaxHeader = 100ull << 20;
}  // namespace

const char* dtype_name(DType d) { return row(d).name; }
size_t dtype_size(DType d) { return row(d).size; }
at::ScalarType to_scalar_type(DType d) { return row(d).scalar; }

DType dtype_from_name(const std::string& s) {
  for (const auto& r : kDTypes)
    if (s == r.name) return r.dtype;
  fail("unknown safetensors dtype '", s, "'");
}

DType from_scalar_type(at::ScalarType t) {
  for (const auto& r : kDTypes)
    if (r.scalar == t) return r.dtype;
  fail("safetensors cannot store tensors of type ", c10::toString(t));
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

struct SafeTensorsFile::Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr && addr != MAP_FAILED) munmap(addr, size);
  }
};

SafeTensorsFile::~SafeTensorsFile() = default;

SafeTensorsFile SafeTensorsFile::open(const std::string& path) {
  SafeTensorsFile f;
  f.path_ = path;
  auto where = [&]() { return path + ": "; };
  int fd = open_regular_file(path);
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    fail("cannot read ", path, ": ", std::strerror(errno));
  }
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    fail(where(), "truncated safetensors file (", size, " bytes, less than the 8-byte header length)");
  }
  f.map_ = std::make_shared<Mapping>();
  f.map_->addr = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  MIMIC_CHECK(f.map_->addr != MAP_FAILED, where(), "mmap failed: ", std::strerror(errno));
  f.map_->size = size;
  const auto* base = static_cast<const uint8_t*>(f.map_->addr);

  // a mimic record (HDF5) given where a safetensors file belongs (`info r.h5`, `--maps r.h5`) read its signature as
  // an "absurd header length" (issue 38): named for what it is
  MIMIC_CHECK(std::memcmp(base, kHdf5Signature, 8) != 0, where(), "an HDF5 file (a mimic record?), not a safetensors file");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | base[i];  // little-endian u64
  // (a text file's first 8 bytes read as such a length: "absurd header length" did not say what the file is)
  if (n > kMaxHeader) {
    // `info my-text.txt` read the first words as a header length of 7 * 10^18 bytes: a text file is named as one
    // (UTF-8 beyond ASCII counts as text; the bytes are shown escaped, so that the error stays one line)
    const bool text = std::all_of(base, base + 8, [](uint8_t c) {
      return (c >= 0x20 && c != 0x7f && c != 0xc0 && c != 0xc1 && c < 0xf5) || c == '\n' || c == '\r' || c == '\t';  // no byte UTF-8 never uses
    });
    if (text) fail(where(), "a text file (it begins '", shown_bytes(std::string(reinterpret_cast<const char*>(base), 8)), "'), not a safetensors file");
    fail(where(), "not a safetensors file (its first 8 bytes give a header of ", n, " bytes, beyond the limit of ", kMaxHeader, ")");
  }
  MIMIC_CHECK(n <= size - 8, where(), "header length ", n, " runs past the end of the file (", size, " bytes)");
  f.data_ = base + 8 + n;
  f.data_size_ = size - 8 - n;

  // through mimic's JSON reader: nlohmann's own message carried its "[json.exception.parse_error.101]" tag and quoted
  // the header's bytes raw (helper-50's probe of 2026-12-04); a tensor named twice is refused, not taken as the last
  const nlohmann::json header = json_parse(std::string(reinterpret_cast<const char*>(base + 8), n), path + ": its header");
  MIMIC_CHECK(header.is_object(), where(), "header is not a JSON object");

  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const auto& v = it.value();
    if (name == "__metadata__") {
      MIMIC_CHECK(v.is_object(), where(), "__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        MIMIC_CHECK(m.value().is_string(), where(), "__metadata__ value of '", m.key(), "' is not a string");
        f.metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    auto bad = [&](const std::string& what) { fail(where(), "tensor '", name, "': ", what); };
    if (!v.is_object()) bad("entry is not an object");
    if (!v.contains("dtype") || !v["dtype"].is_string()) bad("missing or non-string dtype");
    if (!v.contains("shape") || !v["shape"].is_array()) bad("missing or non-array shape");
    if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2) bad("data_offsets must be [begin, end]");
    TensorInfo t;
    t.name = name;
    try {
      t.dtype = dtype_from_name(v["dtype"].get<std::string>());
    } catch (const Error& e) {
      bad(e.what());
    }
    uint64_t numel = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<int64_t>() >= 0)) bad("shape entries must be non-negative integers");
      uint64_t s = d.get<uint64_t>();
      // beyond int64 a shape wrapped to a negative size, which LibTorch refused in its own words (helper-61's probe)
      if (s > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) bad("shape entry " + std::to_string(s) + " exceeds 2^63 - 1");
      if (s != 0 && numel > std::numeric_limits<uint64_t>::max() / s) bad("shape overflows");
      numel *= s;
      t.shape.push_back(static_cast<int64_t>(s));
    }
    for (const auto& o : v["data_offsets"])
      if (!o.is_number_unsigned() && !(o.is_number_integer() && o.get<int64_t>() >= 0)) bad("data_offsets must be non-negative integers");
    t.begin = v["data_offsets"][0].get<uint64_t>();
    t.end = v["data_offsets"][1].get<uint64_t>();
    if (t.begin > t.end) bad("data_offsets begin > end");
    if (t.end > f.data_size_)
      bad("data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "] run past the end of the data (" +
          std::to_string(f.data_size_) + " bytes)");
    size_t es = dtype_size(t.dtype);
    if (numel > std::numeric_limits<uint64_t>::max() / es) bad("byte size overflows");
    if (t.end - t.begin != numel * es)
      bad("byte length " + std::to_string(t.end - t.begin) + " does not match dtype " + dtype_name(t.dtype) + " x shape (" +
          std::to_string(numel * es) + " bytes)");
    f.tensors_.push_back(std::move(t));
  }
  std::sort(f.tensors_.begin(), f.tensors_.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 0; i < f.tensors_.size(); ++i) {
    if (i > 0 && f.tensors_[i].begin < f.tensors_[i - 1].end && f.tensors_[i].begin != f.tensors_[i].end)
      fail(where(), "tensors '", f.tensors_[i - 1].name, "' and '", f.tensors_[i].name, "' overlap");
    f.index_[f.tensors_[i].name] = i;
  }
  return f;
}

std::vector<std::string> SafeTensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& t : tensors_) out.push_back(t.name);
  return out;
}

const TensorInfo& SafeTensorsFile::info(const std::string& name) const {
  auto it = index_.find(name);
  MIMIC_CHECK(it != index_.end(), path_, ": no tensor named '", name, "'");
  return tensors_[it->second];
}

at::Tensor SafeTensorsFile::load(const std::string& name) const {
  const auto& t = info(name);
  auto out = torch::empty(t.shape, torch::TensorOptions().dtype(to_scalar_type(t.dtype)));
  if (t.end > t.begin) std::memcpy(out.data_ptr(), data_ + t.begin, t.end - t.begin);
  // Model weights, distilled maps and checkpoints are all read here, so a NaN or infinity is refused once,
  // when it is read: before any command computes from it (generate decoded garbage) or writes an output.
  if (out.is_floating_point() && out.numel() > 0 && !out.isfinite().all().item<bool>()) {
    const int64_t bad = out.numel() - out.isfinite().sum().item<int64_t>();
    fail(path_, ": tensor '", name, "' holds ", bad, " NaN or infinite value", bad == 1 ? "" : "s", " (of ", out.numel(),
         "); weights must be finite numbers (the run that wrote the file probably diverged: use an earlier checkpoint)");
  }
  return out;
}

at::Tensor SafeTensorsFile::load(const std::string& name, at::ScalarType as) const {
  auto t = load(name);
  return t.scalar_type() == as ? t : t.to(as);
}

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                      const SaveOptions& options) {
  std::vector<std::pair<std::string, at::Tensor>> items;
  items.reserve(tensors.size());
  for (const auto& [name, t0] : tensors) {
    MIMIC_CHECK(!name.empty() && name != "__metadata__", "invalid tensor name '", name, "'");
    MIMIC_CHECK(t0.defined(), "tensor '", name, "' is undefined");
    at::Tensor t = t0.detach().to(torch::kCPU);
    if (options.convert_floats && t.is_floating_point()) t = t.to(to_scalar_type(options.store_as));
    items.emplace_back(name, t.contiguous());
  }
  std::sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 1; i < items.size(); ++i)
    MIMIC_CHECK(items[i].first != items[i - 1].first, "duplicate tensor name '", items[i].first, "'");

  nlohmann::json header = nlohmann::json::object();
  if (!options.metadata.empty()) header["__metadata__"] = options.metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : items) {
    uint64_t bytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    header[name] = {{"dtype", dtype_name(from_scalar_type(t.scalar_type()))},
                    {"shape", t.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // keep the data section 8-byte aligned

  write_file_atomically(path, [&](std::ostream& os) {
    uint64_t n = h.size();
    char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    os.write(len, 8);
    os.write(h.data(), static_cast<std::streamsize>(h.size()));
    for (const auto& [name, t] : items)
      os.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.numel() * t.element_size()));
  });
}

std::optional<std::string> file_kind(const std::string& path) {
  char head[8] = {};
  std::ifstream(path, std::ios::binary).read(head, sizeof head);
  if (std::memcmp(head, kHdf5Signature, 8) == 0) return std::string(kHdf5File);
  try {
    const auto md = SafeTensorsFile::open(path).metadata();
    const auto it = md.find("format");
    return it == md.end() ? std::string() : it->second;
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace mimic::io
