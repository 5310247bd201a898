// RecordReader: an attention record file read back (distill, report, convert).
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <numeric>

#include "mimic/core/error.h"
#include "mimic/io/atomic_file.h"
#include "mimic/record/hdf5.h"
#include "mimic/record/record.h"

namespace mimic::record {

namespace fs = std::filesystem;

struct RecordReader::Impl {
  std::string path;
  H5::H5File file;
  int64_t samples = 0, seq_len = 0, n_head = 0, head_dim = 0, weights_samples = 0;
  int64_t target = 0;  // samples_target (samples when absent)
  bool causal = false;
  std::vector<int64_t> layers;
  std::map<int64_t, double> scales;
  std::map<int64_t, std::string> converted;
  bool f16 = true;
  std::string source;
  std::string model_digest;
  std::string data_digest;
  std::string data;
};

RecordReader::RecordReader(const std::string& path) : impl_(std::make_unique<Impl>()) {
  H5::Exception::dontPrint();
  impl_->path = path;
  MIMIC_CHECK(fs::exists(path), path, ": no such file");
  io::require_regular_file(path);  // a FIFO would block HDF5's open forever
  try {
    impl_->file = H5::H5File(path, H5F_ACC_RDONLY);
  } catch (const H5::Exception& e) {
    fail(path, ": cannot open as HDF5 (", h5_error_text(e), ")");
  }
  try {
    auto& f = impl_->file;
    MIMIC_CHECK(read_attr(f, "format") == kFormat, path, " is not a mimic record file");
    // An integer attribute must be stored as one: converting a float (1e300) to int64 would be undefined.
    auto integer = [&](const char* name) {
      const auto v = read_attr(f, name);
      MIMIC_CHECK(v.is_number_integer(), path, ": root attribute '", name, "' must be an integer, got ", show(v));
      return v.get<int64_t>();
    };
    impl_->samples = integer("samples_done");
    impl_->seq_len = integer("seq_len");
    impl_->n_head = integer("n_head");
    impl_->head_dim = integer("head_dim");
    const int64_t causal = integer("causal");
    // 2 was read as causal and -1 too, where formats.md says 0 or 1 (helper-98's probe of 2026-12-06)
    MIMIC_CHECK(causal == 0 || causal == 1, path, ": root attribute 'causal' must be 0 or 1, got ", causal);
    impl_->causal = causal == 1;
    const auto layers = read_attr(f, "layers");
    MIMIC_CHECK(layers.is_array() && std::all_of(layers.begin(), layers.end(), [](const auto& l) { return l.is_number_integer(); }),
                path, ": root attribute 'layers' must be a list of layer indices (integers), got ", show(layers));
    for (const auto& l : layers) impl_->layers.push_back(l.get<int64_t>());
    // the teacher's layer count bounds the layers recorded (n_layer 0 beside layer groups was read without a word:
    // helper-98's probe); files of other writers may leave it out
    if (!read_attr(f, "n_layer").is_null()) {
      const int64_t n_layer = integer("n_layer");
      MIMIC_CHECK(n_layer >= 1 && n_layer <= 100000, path, ": root attribute 'n_layer' ", n_layer, " is out of range [1, 100000]");
      for (const auto l : impl_->layers)
        MIMIC_CHECK(l < n_layer, path, ": root attribute 'layers' names layer ", l, ", beyond the teacher's n_layer ", n_layer);
    }
    const auto dtype = read_attr(f, "dtype");
    MIMIC_CHECK(dtype == "f16" || dtype == "f32", path, ": root attribute 'dtype' must be \"f16\" or \"f32\", got ", show(dtype));
    impl_->f16 = dtype == "f16";
    auto src = read_attr(f, "source");
    impl_->source = src.is_string() ? src.get<std::string>() : std::string();
    auto digest = read_attr(f, "model_digest");
    impl_->model_digest = digest.is_string() ? digest.get<std::string>() : std::string();
    auto data = read_attr(f, "data_digest");
    impl_->data_digest = data.is_string() ? data.get<std::string>() : std::string();
    const auto data_name = read_attr(f, "data");
    impl_->data = data_name.is_string() ? data_name.get<std::string>() : std::string();
    impl_->weights_samples = std::min(impl_->samples, integer("weights_samples"));
    const auto target = read_attr(f, "samples_target");
    impl_->target = target.is_number_integer() ? target.get<int64_t>() : impl_->samples;
    for (auto l : impl_->layers) {
      MIMIC_CHECK(f.nameExists(layer_group(l)), path, ": root attribute 'layers' names layer ", l, " but group ", layer_group(l), " is missing");
      const auto scale = read_attr(f.openGroup(layer_group(l)), "scale");
      // a NaN scale made report's metrics NaN with exit 0, and distill blame the map (helper-98's probe)
      MIMIC_CHECK(scale.is_number() && std::isfinite(scale.get<double>()) && scale.get<double>() > 0, path, ": attribute 'scale' of ",
                  layer_group(l), " must be a positive number (the teacher's 1/sqrt(head_dim) as a rule), got ",
                  // nlohmann shows NaN and infinities as null
                  scale.is_number() && !std::isfinite(scale.get<double>()) ? std::to_string(scale.get<double>()) : show(scale));
      impl_->scales[l] = scale.get<double>();
      const auto converted = read_attr(f.openGroup(layer_group(l)), "converted");
      MIMIC_CHECK(converted.is_null() || converted.is_string(), path, ": attribute 'converted' of ", layer_group(l), " must be a string, got ",
                  show(converted));
      if (converted.is_string()) impl_->converted[l] = converted.get<std::string>();
    }
    check_shapes();
  } catch (const Error&) {
    throw;
  } catch (const H5::Exception& e) {
    fail(path, ": unreadable record (", h5_error_text(e), ")");
  }
}
// The root attributes bound every later read and allocation, so they are checked against sane limits and against
// what the datasets really hold, here, once: a damaged or hostile file is an error naming what disagrees, never a
// crash or gigabytes of allocation later.
void RecordReader::check_shapes() const {
  const auto& r = *impl_;
  const auto& path = r.path;
  MIMIC_CHECK(r.samples >= 0 && r.samples <= (int64_t{1} << 31), path, ": samples_done ", r.samples, " is out of range");
  MIMIC_CHECK(r.seq_len >= 1 && r.seq_len <= (int64_t{1} << 20), path, ": seq_len ", r.seq_len, " is out of range [1, 2^20]");
  MIMIC_CHECK(r.n_head >= 1 && r.n_head <= 4096, path, ": n_head ", r.n_head, " is out of range [1, 4096]");
  MIMIC_CHECK(r.head_dim >= 1 && r.head_dim <= 65536, path, ": head_dim ", r.head_dim, " is out of range [1, 65536]");
  MIMIC_CHECK(r.weights_samples >= 0, path, ": weights_samples ", r.weights_samples, " is negative");
  MIMIC_CHECK(!r.layers.empty(), path, ": the record lists no layers (root attribute 'layers' is empty)");
  for (size_t i = 0; i < r.layers.size(); ++i) {
    MIMIC_CHECK(r.layers[i] >= 0 && r.layers[i] < 100000, path, ": layer index ", r.layers[i], " is out of range");
    MIMIC_CHECK(std::count(r.layers.begin(), r.layers.end(), r.layers[i]) == 1, path, ": layer ", r.layers[i], " is listed twice");
  }
  // every dataset: its rank and row shape as the attributes say, at least as many rows as they claim, and its storage
  // type. An int32 k or float input_ids was read as if it were what formats.md says (helper-71's probe).
  enum class Stored { Ids, Mask, Values };
  auto expect = [&](const std::string& name, std::vector<hsize_t> row, int64_t rows, Stored kind = Stored::Values) {
    MIMIC_CHECK(r.file.nameExists(name), path, ": dataset ", name, " is missing");
    const auto ds = r.file.openDataSet(name);
    const auto d = dims_of(ds);
    std::vector<hsize_t> want{static_cast<hsize_t>(rows)};
    want.insert(want.end(), row.begin(), row.end());
    bool ok = d.size() == want.size() && d[0] >= want[0];
    for (size_t i = 1; ok && i < d.size(); ++i) ok = d[i] == want[i];
    MIMIC_CHECK(ok, path, ": dataset ", name, " has shape ", nlohmann::json(d).dump(), ", but the record's attributes say [>=", rows,
                std::accumulate(row.begin(), row.end(), std::string(), [](std::string a, hsize_t x) { return a + ", " + std::to_string(x); }),
                "]");
    const auto cls = ds.getTypeClass();
    const size_t bytes = ds.getDataType().getSize();
    const char* want_type = kind == Stored::Ids ? "int32" : kind == Stored::Mask ? "uint8" : r.f16 ? "f16" : "f32";
    const bool type_ok = kind == Stored::Values ? cls == H5T_FLOAT && bytes == (r.f16 ? 2u : 4u)
                                                : cls == H5T_INTEGER && bytes == (kind == Stored::Ids ? 4u : 1u);
    MIMIC_CHECK(type_ok, path, ": dataset ", name, " is stored as ", cls == H5T_FLOAT ? "float" : cls == H5T_INTEGER ? "integer" : "another type",
                " of ", bytes, " bytes, but the record's attributes say ", want_type);
    // the rows claimed were written: a file of 1 MB whose datasets were only extended to 10^8 samples read as zeros
    // (HDF5's fill value) in report, and distill asked for 1.1 TiB (helper-98's probe). record writes every sample as one
    // chunk of every dataset; another layout must hold its rows' bytes.
    const H5::DSetCreatPropList plist = ds.getCreatePlist();
    if (plist.getLayout() == H5D_CHUNKED) {
      std::vector<hsize_t> chunk(d.size());
      plist.getChunk(static_cast<int>(chunk.size()), chunk.data());
      hsize_t per_row = 1;  // chunks a block of chunk[0] rows spans
      for (size_t i = 1; i < d.size(); ++i) per_row *= (d[i] + chunk[i] - 1) / std::max<hsize_t>(chunk[i], 1);
      const hsize_t needed = (static_cast<hsize_t>(rows) + chunk[0] - 1) / std::max<hsize_t>(chunk[0], 1) * per_row;
      hsize_t written = 0;
      const H5::DataSpace space = ds.getSpace();
      MIMIC_CHECK(H5Dget_num_chunks(ds.getId(), space.getId(), &written) >= 0, path, ": dataset ", name, ": cannot count its chunks");
      MIMIC_CHECK(written >= needed, path, ": dataset ", name, " holds data for ", written, " of the ", needed, " chunks its ", rows,
                  " rows need: a damaged record (its size claims rows that were never written; a record killed while HDF5 wrote "
                  "its index is rolled back and continued by the same mimic record command)");
    } else {
      const hsize_t row_bytes = std::accumulate(row.begin(), row.end(), static_cast<hsize_t>(bytes), std::multiplies<hsize_t>());
      MIMIC_CHECK(ds.getStorageSize() >= row_bytes * static_cast<hsize_t>(rows), path, ": dataset ", name, " stores ", ds.getStorageSize(),
                  " bytes, less than its ", rows, " rows need: a damaged record (its size claims rows that were never written)");
    }
  };
  const auto T = static_cast<hsize_t>(r.seq_len), H = static_cast<hsize_t>(r.n_head), D = static_cast<hsize_t>(r.head_dim);
  expect("input_ids", {T}, r.samples, Stored::Ids);
  expect("attention_mask", {T}, r.samples, Stored::Mask);
  for (auto l : r.layers) {
    for (const char* name : {"q", "k", "v", "o"}) expect(layer_group(l) + "/" + name, {H, T, D}, r.samples);
    if (r.weights_samples > 0) expect(layer_group(l) + "/weights", {H, T, T}, r.weights_samples);
  }
}

RecordReader::~RecordReader() = default;
RecordReader::RecordReader(RecordReader&&) noexcept = default;
int64_t RecordReader::samples() const { return impl_->samples; }
// A killed record's file under its final name is the documented way to resume it, and readers used it without a word
// (helper-71's probe: report's held-out last 10% were other samples than the finished record's would be).
std::string RecordReader::unfinished() const {
  if (impl_->target <= impl_->samples) return "";
  return detail::concat(impl_->path, " holds ", impl_->samples, " of the ", impl_->target, " samples its record was to take: a record stopped ",
                        "before its end (the same mimic record command continues it)");
}
int64_t RecordReader::seq_len() const { return impl_->seq_len; }
int64_t RecordReader::n_head() const { return impl_->n_head; }
int64_t RecordReader::head_dim() const { return impl_->head_dim; }
bool RecordReader::causal() const { return impl_->causal; }
const std::vector<int64_t>& RecordReader::layers() const { return impl_->layers; }
int64_t RecordReader::weights_samples() const { return impl_->weights_samples; }
std::string RecordReader::source() const { return impl_->source; }
std::string RecordReader::model_digest() const { return impl_->model_digest; }
std::string RecordReader::data_digest() const { return impl_->data_digest; }
std::string RecordReader::data() const { return impl_->data; }
double RecordReader::scale(int64_t layer) const {
  auto it = impl_->scales.find(layer);
  MIMIC_CHECK(it != impl_->scales.end(), impl_->path, ": layer ", layer, " was not recorded");
  return it->second;
}

std::string RecordReader::converted(int64_t layer) const {
  auto it = impl_->converted.find(layer);
  return it == impl_->converted.end() ? std::string() : it->second;
}

at::Tensor RecordReader::input_ids(int64_t begin, int64_t count) const {
  MIMIC_CHECK(begin >= 0 && count >= 0 && begin + count <= impl_->samples, "samples [", begin, ", ", begin + count,
              ") are outside the ", impl_->samples, " of ", impl_->path);
  try {
    return read_rows(impl_->file.openDataSet("input_ids"), begin, count, at::kLong, H5::PredType::NATIVE_INT64);
  } catch (const H5::Exception& e) {
    fail(impl_->path, ": cannot read input_ids (", h5_error_text(e), ")");
  }
}

at::Tensor RecordReader::attention_mask(int64_t begin, int64_t count) const {
  MIMIC_CHECK(begin >= 0 && count >= 0 && begin + count <= impl_->samples, "samples [", begin, ", ", begin + count,
              ") are outside the ", impl_->samples, " of ", impl_->path);
  try {
    return read_rows(impl_->file.openDataSet("attention_mask"), begin, count, at::kByte, H5::PredType::NATIVE_UINT8).to(at::kBool);
  } catch (const H5::Exception& e) {
    fail(impl_->path, ": cannot read attention_mask (", h5_error_text(e), ")");
  }
}

at::Tensor RecordReader::read(int64_t layer, const std::string& name, int64_t begin, int64_t count) const {
  scale(layer);  // checks the layer
  const bool w = name == "weights";
  MIMIC_CHECK(w || name == "q" || name == "k" || name == "v" || name == "o", "unknown record tensor '", name, "'");
  const int64_t limit = w ? impl_->weights_samples : impl_->samples;
  MIMIC_CHECK(begin >= 0 && count >= 0 && begin + count <= limit, impl_->path, ": samples [", begin, ", ", begin + count,
              ") of ", name, " are outside the ", limit, " stored");
  try {
    auto ds = impl_->file.openDataSet(layer_group(layer) + "/" + name);
    auto t = impl_->f16 ? read_rows(ds, begin, count, at::kHalf, half_type()).to(at::kFloat)
                        : read_rows(ds, begin, count, at::kFloat, H5::PredType::NATIVE_FLOAT);
    // A NaN or infinity in a record is damage, not data: one NaN in a q blanked a whole head of report's table and
    // exited 0 (helper-71's probe). Refused naming the sample (what f16 cannot hold is infinite there).
    if (const int64_t row = first_nonfinite_row(t); row >= 0) {
      fail(impl_->path, ": ", layer_group(layer), "/", name, " holds a value that is not finite (NaN or infinite) in sample ", begin + row,
           ": the record is damaged", impl_->f16 ? " or the teacher's values exceed f16's 65504 (record it again, with --dtype f32)"
                                                 : " (record it again)");
    }
    return t;
  } catch (const H5::Exception& e) {
    fail(impl_->path, ": cannot read ", layer_group(layer), "/", name, " (", h5_error_text(e), ")");
  }
}

}  // namespace mimic::record
