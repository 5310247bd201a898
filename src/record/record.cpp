#include "record/record.h"

#include <H5Cpp.h>
#include <zlib.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/hash.h"
#include "core/layers.h"
#include "core/progress.h"
#include "core/runtime.h"
#include "data/classification.h"
#include "data/corpus.h"
#include "data/token_cache.h"
#include "io/atomic_file.h"
#include "models/config.h"
#include "models/family.h"
#include "models/model.h"
#include "attention/attention.h"
#include "text/tokenizer.h"

namespace mimic::record {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kFormat = "mimic-record-1";

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// ------------------------------------------------------------------------------------------ HDF5 helpers
// The innermost message of HDF5's error stack (the most specific one), then the stack is cleared.
std::string h5_error_text(const H5::Exception& e) {
  std::string inner;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned, const H5E_error2_t* err, void* data) -> herr_t {
        auto* s = static_cast<std::string*>(data);
        if (s->empty() && err->desc && *err->desc) *s = err->desc;
        return 0;
      },
      &inner);
  H5Eclear2(H5E_DEFAULT);
  std::string outer = e.getDetailMsg();
  if (inner.empty()) return outer;
  return outer.empty() ? inner : inner + " (" + outer + ")";
}

// IEEE binary16 as an HDF5 type: a copy of float32 with 1 sign, 5 exponent (bias 15), 10 mantissa bits in
// 2 bytes. h5py (numpy) reads it as float16.
H5::FloatType half_type() {
  H5::FloatType t(H5::PredType::IEEE_F32LE);
  t.setFields(15, 10, 5, 0, 10);
  t.setSize(2);
  t.setEbias(15);
  return t;
}

H5::StrType string_type() {
  H5::StrType t(H5::PredType::C_S1, H5T_VARIABLE);
  t.setCset(H5T_CSET_UTF8);
  return t;
}

// Attributes as JSON values: strings (variable-length UTF-8), integers (int64), floats (float64), arrays
// of integers (int64 [n]).
void write_attr(H5::H5Object& obj, const std::string& name, const nlohmann::json& v) {
  if (v.is_string()) {
    if (obj.attrExists(name)) obj.removeAttr(name);
    auto t = string_type();
    obj.createAttribute(name, t, H5::DataSpace(H5S_SCALAR)).write(t, v.get<std::string>());
  } else if (v.is_number_integer()) {
    int64_t x = v.get<int64_t>();
    // integers are rewritten in place (samples_done after every batch)
    auto a = obj.attrExists(name) ? obj.openAttribute(name) : obj.createAttribute(name, H5::PredType::STD_I64LE, H5::DataSpace(H5S_SCALAR));
    a.write(H5::PredType::NATIVE_INT64, &x);
  } else if (v.is_number_float()) {
    double x = v.get<double>();
    auto a = obj.attrExists(name) ? obj.openAttribute(name) : obj.createAttribute(name, H5::PredType::IEEE_F64LE, H5::DataSpace(H5S_SCALAR));
    a.write(H5::PredType::NATIVE_DOUBLE, &x);
  } else if (v.is_array()) {
    if (obj.attrExists(name)) obj.removeAttr(name);
    std::vector<int64_t> xs = v.get<std::vector<int64_t>>();
    hsize_t n = xs.size();
    auto a = obj.createAttribute(name, H5::PredType::STD_I64LE, H5::DataSpace(1, &n));
    if (n) a.write(H5::PredType::NATIVE_INT64, xs.data());
  } else {
    fail("internal: unsupported attribute value for ", name);
  }
}

nlohmann::json read_attr(const H5::H5Object& obj, const std::string& name) {
  if (!obj.attrExists(name)) return nullptr;
  auto a = obj.openAttribute(name);
  auto cls = a.getTypeClass();
  hssize_t n = a.getSpace().getSimpleExtentNpoints();
  bool scalar = a.getSpace().getSimpleExtentNdims() == 0;
  if (cls == H5T_STRING) {
    std::string s;
    a.read(a.getStrType(), s);
    return s;
  }
  if (cls == H5T_INTEGER) {
    std::vector<int64_t> xs(static_cast<size_t>(std::max<hssize_t>(n, 1)));
    if (n) a.read(H5::PredType::NATIVE_INT64, xs.data());
    if (scalar) return xs[0];
    xs.resize(static_cast<size_t>(n));
    return xs;
  }
  if (cls == H5T_FLOAT && scalar) {
    double x = 0;
    a.read(H5::PredType::NATIVE_DOUBLE, &x);
    return x;
  }
  return "<unreadable>";
}

std::string show(const nlohmann::json& v) { return v.is_null() ? "absent" : v.dump(); }

std::string layer_group(int64_t layer) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "layer_%02lld", static_cast<long long>(layer));
  return buf;
}

std::vector<hsize_t> dims_of(const H5::DataSet& ds) {
  auto space = ds.getSpace();
  std::vector<hsize_t> d(static_cast<size_t>(space.getSimpleExtentNdims()));
  space.getSimpleExtentDims(d.data());
  return d;
}

void set_rows(H5::DataSet& ds, hsize_t rows) {
  auto d = dims_of(ds);
  if (d[0] == rows) return;
  d[0] = rows;
  if (H5Dset_extent(ds.getId(), d.data()) < 0) throw H5::DataSetIException("H5Dset_extent", "cannot resize a dataset");
}

// Writing a batch: every sample is one chunk, encoded here exactly as HDF5's filter pipeline would
// (shuffle, then zlib deflate; deflate is skipped for a chunk it would not shrink, which the filter mask
// records, as HDF5 does for its optional filters) — in parallel on LibTorch's threads — and stored with
// H5Dwrite_chunk. Readers decode through the ordinary pipeline.
struct Piece {
  H5::DataSet* ds;
  hsize_t begin;      // first row
  at::Tensor data;    // [rows, ...] contiguous, in the storage type
};

void write_pieces(std::vector<Piece>& pieces, int level) {
  struct Job {
    size_t piece;
    int64_t row;
    std::vector<unsigned char> out;
    uint32_t mask = 0;
  };
  std::vector<Job> jobs;
  for (size_t p = 0; p < pieces.size(); ++p) {
    TORCH_INTERNAL_ASSERT(pieces[p].data.is_contiguous());
    set_rows(*pieces[p].ds, pieces[p].begin + static_cast<hsize_t>(pieces[p].data.size(0)));
    for (int64_t r = 0; r < pieces[p].data.size(0); ++r) jobs.push_back({p, r, {}, 0});
  }
  at::parallel_for(0, static_cast<int64_t>(jobs.size()), 1, [&](int64_t lo, int64_t hi) {
    std::vector<unsigned char> shuffled;
    for (int64_t j = lo; j < hi; ++j) {
      auto& job = jobs[static_cast<size_t>(j)];
      const auto& t = pieces[job.piece].data;
      const size_t elem = static_cast<size_t>(t.element_size());
      const size_t bytes = static_cast<size_t>(t[0].numel()) * elem;
      const auto* src = static_cast<const unsigned char*>(t.data_ptr()) + static_cast<size_t>(job.row) * bytes;
      if (level <= 0) {
        job.out.assign(src, src + bytes);
        continue;
      }
      // shuffle: byte b of element i goes to b * n + i
      const size_t n = bytes / elem;
      shuffled.resize(bytes);
      if (elem == 1) {
        std::memcpy(shuffled.data(), src, bytes);
      } else {
        for (size_t i = 0; i < n; ++i)
          for (size_t b = 0; b < elem; ++b) shuffled[b * n + i] = src[i * elem + b];
      }
      uLongf len = compressBound(static_cast<uLong>(bytes));
      job.out.resize(len);
      int rc = compress2(job.out.data(), &len, shuffled.data(), static_cast<uLong>(bytes), level);
      if (rc == Z_OK && len < bytes) {
        job.out.resize(len);
      } else {
        job.out = shuffled;
        job.mask = 1u << 1;  // the deflate filter (second in the pipeline) was skipped
      }
    }
  });
  for (const auto& job : jobs) {
    const auto& p = pieces[job.piece];
    std::vector<hsize_t> offset(static_cast<size_t>(p.data.dim()), 0);
    offset[0] = p.begin + static_cast<hsize_t>(job.row);
    if (H5Dwrite_chunk(p.ds->getId(), H5P_DEFAULT, job.mask, offset.data(), job.out.size(), job.out.data()) < 0)
      throw H5::DataSetIException("H5Dwrite_chunk", "cannot write a chunk");
  }
}

at::Tensor read_rows(const H5::DataSet& ds, hsize_t begin, hsize_t rows, at::ScalarType st, const H5::DataType& memtype) {
  auto d = dims_of(ds);
  MIMIC_CHECK(begin + rows <= d[0], "rows [", begin, ", ", begin + rows, ") are outside the ", d[0], " rows of ", ds.getObjName());
  std::vector<hsize_t> count = d, start(d.size(), 0);
  count[0] = rows;
  start[0] = begin;
  std::vector<int64_t> shape(count.begin(), count.end());
  auto out = torch::empty(shape, st);
  if (rows == 0) return out;
  auto filespace = ds.getSpace();
  filespace.selectHyperslab(H5S_SELECT_SET, count.data(), start.data());
  H5::DataSpace memspace(static_cast<int>(count.size()), count.data());
  ds.read(out.data_ptr(), memtype, memspace, filespace);
  return out;
}

H5::DataSet create_rows(H5::Group& parent, const std::string& name, const H5::DataType& type, std::vector<hsize_t> row_shape,
                        int compression) {
  std::vector<hsize_t> dims{0}, maxdims{H5S_UNLIMITED}, chunk{1};
  for (auto x : row_shape) {
    dims.push_back(x);
    maxdims.push_back(x);
    chunk.push_back(x);
  }
  H5::DSetCreatPropList plist;
  plist.setChunk(static_cast<int>(chunk.size()), chunk.data());
  if (compression > 0) {
    plist.setShuffle();
    plist.setDeflate(compression);
  }
  H5::DataSpace space(static_cast<int>(dims.size()), dims.data(), maxdims.data());
  return parent.createDataSet(name, type, space, plist);
}

// ------------------------------------------------------------------------------------------ data
// The token stream samples are cut from.
struct Stream {
  std::function<int64_t(int64_t)> at;
  int64_t size = 0;
  std::shared_ptr<void> keep;  // the memory-mapped cache or the token vector
};

bool is_corpus(const std::string& data) {
  auto corpora = data::lm_corpus_names();
  return data == "all" || std::find(corpora.begin(), corpora.end(), data) != corpora.end();
}

bool is_classification(const std::string& data) {
  auto sets = data::classification_names();
  return std::find(sets.begin(), sets.end(), data) != sets.end();
}

Stream open_stream(const RecordOptions& o, const text::Tokenizer& tok, std::string* data_id) {
  Stream s;
  if (is_corpus(o.data)) {
    auto cache = std::make_shared<data::TokenCache>(data::corpus_token_cache(o.data, data::split_from_name(o.split), tok));
    s.size = cache->size();
    const uint16_t* p = cache->data();
    s.at = [p](int64_t i) { return static_cast<int64_t>(p[i]); };
    s.keep = cache;
    *data_id = o.data;
  } else {
    std::string text;
    if (is_classification(o.data)) {
      // A classification data set's texts of the split, in a fixed order that mixes the labels (the files list
      // them grouped), separated by blank lines: the distribution a classifier is finetuned on.
      const auto set = data::load_classification(o.data);
      const auto& examples = set.split(data::split_from_name(o.split));
      std::vector<std::pair<uint64_t, size_t>> order;
      for (size_t i = 0; i < examples.size(); ++i) {
        Hasher h;
        h.bytes(examples[i].text.data(), examples[i].text.size());
        order.push_back({h.h, i});
      }
      std::sort(order.begin(), order.end());
      for (const auto& [hash, i] : order) text += examples[i].text + "\n\n";
      *data_id = o.data;
    } else {
      MIMIC_CHECK(fs::is_regular_file(o.data), "--data ", o.data,
                  ": neither a corpus (all, sotu, moby-dick), a classification data set (spam, sotu-era) nor a text file");
      text = io::read_text_file(o.data);
      MIMIC_CHECK(data::is_valid_utf8(text), o.data, ": not valid UTF-8");
      *data_id = fs::absolute(o.data).lexically_normal().string();
    }
    auto ids = std::make_shared<std::vector<int64_t>>(tok.encode(text, /*add_special_tokens=*/false));
    s.size = static_cast<int64_t>(ids->size());
    const int64_t* p = ids->data();
    s.at = [p](int64_t i) { return p[i]; };
    s.keep = ids;
  }
  MIMIC_CHECK(s.size > 0, "--data ", o.data, " holds no tokens");
  return s;
}

// Word-wise FNV-style hash of bytes (identity of weights and token streams, not cryptographic).
std::string stream_digest(const Stream& s) {
  Hasher h;
  std::vector<int64_t> buf;
  const int64_t step = 1 << 16;
  for (int64_t i = 0; i < s.size; i += step) {
    buf.clear();
    for (int64_t j = i; j < std::min(s.size, i + step); ++j) buf.push_back(s.at(j));
    h.bytes(buf.data(), buf.size() * sizeof(int64_t));
  }
  return h.hex();
}

// Samples: consecutive blocks of the stream (T tokens; a family with cls_sep framing, e.g. BERT: [CLS] + T-2
// tokens + [SEP]); the last block may be shorter: it is padded and masked.
struct Sampler {
  const Stream& stream;
  bool cls_sep;
  int64_t seq_len, block;
  int64_t cls = -1, sep = -1, pad = 0;
  int64_t available() const { return (stream.size + block - 1) / block; }
  std::pair<at::Tensor, at::Tensor> batch(int64_t begin, int64_t count) const {
    auto ids = torch::full({count, seq_len}, pad, torch::kLong);
    auto mask = torch::zeros({count, seq_len}, torch::kLong);
    auto* id = ids.data_ptr<int64_t>();
    auto* m = mask.data_ptr<int64_t>();
    for (int64_t b = 0; b < count; ++b) {
      int64_t start = (begin + b) * block, n = std::min(block, stream.size - start);
      int64_t* row = id + b * seq_len;
      int64_t* mrow = m + b * seq_len;
      int64_t t = 0;
      if (cls_sep) row[t++] = cls;
      for (int64_t i = 0; i < n; ++i) row[t++] = stream.at(start + i);
      if (cls_sep) row[t++] = sep;
      for (int64_t i = 0; i < t; ++i) mrow[i] = 1;
    }
    return {ids, mask};
  }
};

Sampler make_sampler(const Stream& stream, const text::Tokenizer& tok, bool cls_sep, int64_t seq_len) {
  Sampler sampler{stream, cls_sep, seq_len, cls_sep ? seq_len - 2 : seq_len};
  if (cls_sep) {
    sampler.cls = tok.cls_id();
    sampler.sep = tok.sep_id();
    sampler.pad = std::max<int64_t>(tok.pad_id(), 0);
  } else {
    sampler.pad = tok.eos_id() >= 0 ? tok.eos_id() : 0;
  }
  return sampler;
}

// ------------------------------------------------------------------------------------------ the file
const char* const kTensors[] = {"q", "k", "v", "o"};

[[noreturn]] void damaged(const std::string& path, const std::string& why) {
  fail(path, " is damaged and cannot be resumed (", why,
       "): the run that wrote it probably died while writing; delete it or pass --fresh to record again");
}

}  // namespace

RecordResult record(const RecordOptions& o) {
  H5::Exception::dontPrint();
  MIMIC_CHECK(!o.out.empty(), "--out is required");
  MIMIC_CHECK(o.dtype == "f16" || o.dtype == "f32", "--dtype must be f16 or f32, not '", o.dtype, "'");
  MIMIC_CHECK(o.samples >= 0, "--samples must be >= 0 (0: every block of the data)");
  MIMIC_CHECK(o.seq_len >= 0, "--seq-len must be positive");
  MIMIC_CHECK(o.batch_size >= 1, "--batch-size must be >= 1");
  MIMIC_CHECK(o.weights_samples >= 0, "--weights-samples must be >= 0");
  MIMIC_CHECK(o.compression >= 0 && o.compression <= 9, "the gzip level must be 0..9");

  auto tok = text::load_tokenizer(o.model_dir);
  auto model = models::load_model(o.model_dir);
  const auto sum = model->summary();
  const bool cls_sep = sum.family->cls_sep;
  const int64_t seq_len = o.seq_len > 0 ? o.seq_len : std::min<int64_t>(256, sum.max_positions);
  MIMIC_CHECK(seq_len <= sum.max_positions, "--seq-len ", seq_len, " exceeds the model's context of ", sum.max_positions);
  MIMIC_CHECK(!cls_sep || seq_len >= 3, "--seq-len must be at least 3 for ", sum.family->display_name, " ([CLS] token [SEP])");
  const auto layers = parse_layers(o.layers, sum.n_layer);
  const int64_t n_head = sum.n_head, head_dim = sum.d_model / sum.n_head;
  model->module().eval();
  torch::NoGradGuard no_grad;

  // What the kernels see: the scale and causality of every layer (a one-token probe).
  std::vector<attention::AttentionCapture> captures(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) model->set_attention_capture(layers[i], &captures[i]);
  {
    int64_t probe = cls_sep ? tok->cls_id() : 0;
    model->forward({torch::full({1, 1}, probe, torch::kLong), {}, {}, {}});
  }

  std::string data_id;
  Stream stream = open_stream(o, *tok, &data_id);
  Sampler sampler = make_sampler(stream, *tok, cls_sep, seq_len);
  const int64_t available = sampler.available();
  const int64_t target = o.samples > 0 ? std::min(o.samples, available) : available;
  const int64_t K = o.weights_samples;

  // The settings a resumed file must share with this run, in the order they are checked.
  std::vector<std::pair<std::string, nlohmann::json>> settings = {
      {"format", kFormat},
      {"model_type", sum.model_type},
      {"n_layer", sum.n_layer},
      {"n_head", n_head},
      {"head_dim", head_dim},
      {"d_model", sum.d_model},
      {"model_digest", models::model_digest(*model)},
      {"tokenizer", tok->kind()},
      {"causal", captures[0].causal ? 1 : 0},
      {"scale", captures[0].scale},
      {"data", data_id},
      {"split", is_corpus(o.data) || is_classification(o.data) ? data::split_name(data::split_from_name(o.split)) : ""},
      {"data_tokens", stream.size},
      {"data_digest", stream_digest(stream)},
      {"seq_len", seq_len},
      {"layers", layers},
      {"dtype", o.dtype},
      {"weights_samples", K},
  };
  std::string source = fs::absolute(o.model_dir).lexically_normal().string();
  while (source.size() > 1 && source.back() == '/') source.pop_back();

  const H5::FloatType f16 = half_type();
  const H5::DataType store_type = o.dtype == "f16" ? H5::DataType(f16) : H5::DataType(H5::PredType::IEEE_F32LE);
  const H5::DataType mem_type = o.dtype == "f16" ? H5::DataType(f16) : H5::DataType(H5::PredType::NATIVE_FLOAT);
  const at::ScalarType mem_scalar = o.dtype == "f16" ? at::kHalf : at::kFloat;

  RecordResult result;
  result.out = o.out;
  result.seq_len = seq_len;
  result.layers = layers;

  try {
    // A new file is built under a temporary name and renamed once complete and flushed: a file named
    // `out` is always a valid record, possibly with fewer samples than asked.
    if (o.fresh && fs::exists(o.out)) fs::remove(o.out);
    if (!fs::exists(o.out)) {
      auto parent = fs::path(o.out).parent_path();
      if (!parent.empty()) fs::create_directories(parent);
      std::string tmp = o.out + ".tmp";
      {
        H5::H5File f(tmp, H5F_ACC_TRUNC);
        for (const auto& [k, v] : settings) write_attr(f, k, v);
        write_attr(f, "source", source);
        write_attr(f, "mimic_version", mimic_version());
        write_attr(f, "samples_done", int64_t{0});
        write_attr(f, "samples_target", target);
        const hsize_t T = static_cast<hsize_t>(seq_len), H = static_cast<hsize_t>(n_head), D = static_cast<hsize_t>(head_dim);
        create_rows(f, "input_ids", H5::PredType::STD_I32LE, {T}, o.compression);
        create_rows(f, "attention_mask", H5::PredType::STD_U8LE, {T}, o.compression);
        for (size_t i = 0; i < layers.size(); ++i) {
          auto g = f.createGroup(layer_group(layers[i]));
          write_attr(g, "layer", layers[i]);
          write_attr(g, "scale", captures[i].scale);
          for (const char* name : kTensors) create_rows(g, name, store_type, {H, T, D}, o.compression);
          if (K > 0) create_rows(g, "weights", store_type, {H, T, T}, o.compression);
        }
        f.flush(H5F_SCOPE_GLOBAL);
      }
      fs::rename(tmp, o.out);
    }
  } catch (const H5::Exception& e) {
    fail("cannot create ", o.out, ": ", h5_error_text(e));
  }

  // Open (or reopen) the file, check it belongs to this run, and bring every dataset to samples_done rows.
  std::unique_ptr<H5::H5File> file;
  try {
    file = std::make_unique<H5::H5File>(o.out, H5F_ACC_RDWR);
  } catch (const H5::Exception& e) {
    std::string why = h5_error_text(e);
    bool hdf5 = false;
    try {
      hdf5 = H5::H5File::isHdf5(o.out);
    } catch (const H5::Exception&) {
    }
    if (!hdf5) fail(o.out, " exists and is not an HDF5 file (not a mimic record); use another --out");
    if (why.find("already open") != std::string::npos || why.find("unable to lock") != std::string::npos)
      fail(o.out, " is in use (open in another process or handle: ", why, ")");
    damaged(o.out, "HDF5 cannot open it: " + why);
  }
  std::map<std::string, H5::DataSet> sets;  // "input_ids", "layer_03/q", ...
  int64_t done = 0;
  try {
    auto fmt = read_attr(*file, "format");
    MIMIC_CHECK(fmt == kFormat, o.out, " is not a mimic record file (attribute format is ", show(fmt), ", expected \"", kFormat,
                "\"); use another --out");
    for (const auto& [k, v] : settings) {
      auto have = read_attr(*file, k);
      MIMIC_CHECK(have == v, o.out, " was recorded with other settings: ", k, " is ", show(have), " in the file, ", show(v),
                  " for this run (use the same settings to resume, another --out, or --fresh to overwrite)");
    }
    auto d = read_attr(*file, "samples_done");
    MIMIC_CHECK(d.is_number_integer(), o.out, ": attribute samples_done is missing");
    done = d.get<int64_t>();
    MIMIC_CHECK(done <= target, o.out, " already holds ", done, " samples, more than the ", target, " asked for (",
                o.samples > 0 ? "raise --samples" : "the data has no more", ", or use another --out)");
    sets["input_ids"] = file->openDataSet("input_ids");
    sets["attention_mask"] = file->openDataSet("attention_mask");
    for (auto l : layers) {
      for (const char* name : kTensors) sets[layer_group(l) + "/" + name] = file->openDataSet(layer_group(l) + "/" + name);
      if (K > 0) sets[layer_group(l) + "/weights"] = file->openDataSet(layer_group(l) + "/weights");
    }
    // Every sample is one chunk of every dataset. A run killed mid-batch may have grown datasets past
    // samples_done: they are cut back. A run killed while HDF5 was writing its metadata may have lost
    // index entries of recent chunks: samples_done then rolls back to the first sample missing anywhere,
    // and recording continues from there.
    auto rows_of = [&](const std::string& name, int64_t n) {
      const bool w = name.size() > 8 && name.compare(name.size() - 8, 8, "/weights") == 0;
      return static_cast<hsize_t>(w ? std::min(n, K) : n);
    };
    auto chunks_of = [](const H5::DataSet& ds) {
      hsize_t n = 0;
      // the dataset's own dataspace (HDF5 1.10 rejects H5S_ALL here: "invalid dataspace identifier")
      const H5::DataSpace space = ds.getSpace();
      if (H5Dget_num_chunks(ds.getId(), space.getId(), &n) < 0) throw H5::DataSetIException("H5Dget_num_chunks", "cannot count chunks");
      return n;
    };
    int64_t good = done;
    for (auto& [name, ds] : sets) {
      const hsize_t rows = rows_of(name, done), have = dims_of(ds)[0];
      if (have > rows) set_rows(ds, rows);
      if (have >= rows && chunks_of(ds) == rows) continue;
      hsize_t first = std::min(have, rows);
      std::vector<hsize_t> offset(dims_of(ds).size(), 0);
      for (hsize_t r = 0; r < std::min(have, rows); ++r) {
        offset[0] = r;
        unsigned mask = 0;
        haddr_t addr = HADDR_UNDEF;
        hsize_t size = 0;
        if (H5Dget_chunk_info_by_coord(ds.getId(), offset.data(), &mask, &addr, &size) < 0)
          throw H5::DataSetIException("H5Dget_chunk_info_by_coord", "cannot look up a chunk");
        if (addr == HADDR_UNDEF) {
          first = r;
          break;
        }
      }
      good = std::min(good, static_cast<int64_t>(first));
    }
    if (good < done) {
      result.rolled_back = done - good;
      done = good;
      for (auto& [name, ds] : sets) {
        set_rows(ds, rows_of(name, done));
        if (chunks_of(ds) != rows_of(name, done)) damaged(o.out, name + " has fewer chunks than rows");
      }
      write_attr(*file, "samples_done", done);
      file->flush(H5F_SCOPE_GLOBAL);
    }
    // The last complete sample of every dataset must decode.
    for (auto& [name, ds] : sets) {
      const hsize_t rows = rows_of(name, done);
      if (rows == 0) continue;
      const bool ints = name == "input_ids" || name == "attention_mask";
      read_rows(ds, rows - 1, 1, ints ? at::kLong : mem_scalar, ints ? H5::DataType(H5::PredType::NATIVE_INT64) : mem_type);
    }
    if (done > 0) {
      // The samples already recorded must be the ones this run would record.
      auto have = read_rows(sets["input_ids"], 0, static_cast<hsize_t>(done), at::kLong, H5::PredType::NATIVE_INT64);
      auto want = sampler.batch(0, done).first;
      MIMIC_CHECK(torch::equal(have, want), o.out, ": the input_ids already recorded differ from the samples of --data ", o.data,
                  " (other data or tokenization); use another --out or --fresh");
    }
    write_attr(*file, "samples_target", target);
    file->flush(H5F_SCOPE_GLOBAL);
  } catch (const H5::Exception& e) {
    damaged(o.out, "HDF5: " + h5_error_text(e));
  }
  result.resumed_from = done;

  // ---------------------------------------------------------------------------------- the loop
  Progress progress("record", target, "sample");
  progress.update(done);
  const auto loop_start = Clock::now();
  double excluded = 0;
  try {
    for (int64_t s = done; s < target; s += o.batch_size) {
      const int64_t b = std::min(o.batch_size, target - s);
      auto [ids, mask] = sampler.batch(s, b);
      for (auto& c : captures) c.want_weights = s < K;
      auto t0 = Clock::now();
      // The LM / MLM head is not needed: score no position.
      model->forward({ids, mask, {}, torch::zeros({b, seq_len}, torch::kBool)});
      result.forward_seconds += since(t0);

      auto t1 = Clock::now();
      const hsize_t at = static_cast<hsize_t>(s);
      std::vector<Piece> pieces;
      pieces.push_back({&sets["input_ids"], at, ids.to(at::kInt).contiguous()});
      pieces.push_back({&sets["attention_mask"], at, mask.to(at::kByte).contiguous()});
      for (size_t i = 0; i < layers.size(); ++i) {
        const auto& c = captures[i];
        const std::string g = layer_group(layers[i]) + "/";
        const at::Tensor* ts[] = {&c.q, &c.k, &c.v, &c.o};
        for (int j = 0; j < 4; ++j) pieces.push_back({&sets[g + kTensors[j]], at, ts[j]->to(mem_scalar).contiguous()});
        if (s < K) {
          int64_t rows = std::min(b, K - s);
          pieces.push_back({&sets[g + "weights"], at, c.weights.narrow(0, 0, rows).to(mem_scalar).contiguous()});
        }
      }
      write_pieces(pieces, o.compression);
      // Two-phase commit: the batch's chunks and indexes reach the file first, then samples_done (one
      // small in-place write). A kill before the second flush loses only this batch.
      file->flush(H5F_SCOPE_GLOBAL);
      write_attr(*file, "samples_done", s + b);
      file->flush(H5F_SCOPE_GLOBAL);
      result.write_seconds += since(t1);
      result.recorded += b;
      progress.update(s + b);

      if (s == done && o.measure_forward) {
        // The comparison: a plain forward of the same batch, no capture, the full model with its head.
        for (auto l : layers) model->set_attention_capture(l, nullptr);
        auto tf = Clock::now();
        model->forward({ids, mask, {}, {}});
        double sec = since(tf);
        result.forward_tokens_per_second = sec > 0 ? static_cast<double>(b * seq_len) / sec : 0.0;
        for (size_t i = 0; i < layers.size(); ++i) model->set_attention_capture(layers[i], &captures[i]);
        excluded += sec;  // not part of the recording time
      }
    }
  } catch (const H5::Exception& e) {
    fail("writing ", o.out, " failed: ", h5_error_text(e));
  }
  progress.finish();
  result.seconds = since(loop_start) - excluded;
  for (size_t i = 0; i < layers.size(); ++i) model->set_attention_capture(layers[i], nullptr);
  result.samples = done + result.recorded;
  result.tokens = result.recorded * seq_len;
  result.tokens_per_second = result.seconds > 0 ? static_cast<double>(result.tokens) / result.seconds : 0.0;
  try {
    file->close();
  } catch (const H5::Exception& e) {
    fail("closing ", o.out, " failed: ", h5_error_text(e));
  }
  result.file_bytes = static_cast<int64_t>(fs::file_size(o.out));
  return result;
}

// ------------------------------------------------------------------------------------------ reader
struct SampleReader::Impl {
  std::string data_id;
  Stream stream;
  std::unique_ptr<Sampler> sampler;
};

SampleReader::SampleReader(const RecordOptions& o) : impl_(std::make_unique<Impl>()) {
  auto tok = text::load_tokenizer(o.model_dir);
  const auto cfg = models::load_config((fs::path(o.model_dir) / "config.json").string());
  const bool cls_sep = cfg.family->cls_sep;
  const int64_t context = cfg.max_positions;
  const int64_t seq_len = o.seq_len > 0 ? o.seq_len : std::min<int64_t>(256, context);
  MIMIC_CHECK(seq_len <= context, "--seq-len ", seq_len, " exceeds the model's context of ", context);
  MIMIC_CHECK(!cls_sep || seq_len >= 3, "--seq-len must be at least 3 for ", cfg.family->display_name, " ([CLS] token [SEP])");
  impl_->stream = open_stream(o, *tok, &impl_->data_id);
  impl_->sampler = std::make_unique<Sampler>(make_sampler(impl_->stream, *tok, cls_sep, seq_len));
}
SampleReader::~SampleReader() = default;
SampleReader::SampleReader(SampleReader&&) noexcept = default;
int64_t SampleReader::available() const { return impl_->sampler->available(); }
int64_t SampleReader::seq_len() const { return impl_->sampler->seq_len; }
const std::string& SampleReader::data_id() const { return impl_->data_id; }
std::pair<at::Tensor, at::Tensor> SampleReader::batch(int64_t begin, int64_t count) const {
  MIMIC_CHECK(begin >= 0 && count >= 0 && begin + count <= available(), "samples [", begin, ", ", begin + count, ") are outside the ",
              available(), " of --data ", impl_->data_id);
  return impl_->sampler->batch(begin, count);
}

struct RecordReader::Impl {
  std::string path;
  H5::H5File file;
  int64_t samples = 0, seq_len = 0, n_head = 0, head_dim = 0, weights_samples = 0;
  bool causal = false;
  std::vector<int64_t> layers;
  std::map<int64_t, double> scales;
  bool f16 = true;
  std::string source;
  std::string model_digest;
};

RecordReader::RecordReader(const std::string& path) : impl_(std::make_unique<Impl>()) {
  H5::Exception::dontPrint();
  impl_->path = path;
  MIMIC_CHECK(fs::exists(path), path, ": no such file");
  try {
    impl_->file = H5::H5File(path, H5F_ACC_RDONLY);
  } catch (const H5::Exception& e) {
    fail(path, ": cannot open as HDF5 (", h5_error_text(e), ")");
  }
  try {
    auto& f = impl_->file;
    MIMIC_CHECK(read_attr(f, "format") == kFormat, path, " is not a mimic record file");
    impl_->samples = read_attr(f, "samples_done").get<int64_t>();
    impl_->seq_len = read_attr(f, "seq_len").get<int64_t>();
    impl_->n_head = read_attr(f, "n_head").get<int64_t>();
    impl_->head_dim = read_attr(f, "head_dim").get<int64_t>();
    impl_->causal = read_attr(f, "causal").get<int64_t>() != 0;
    impl_->layers = read_attr(f, "layers").get<std::vector<int64_t>>();
    impl_->f16 = read_attr(f, "dtype") == "f16";
    auto src = read_attr(f, "source");
    impl_->source = src.is_string() ? src.get<std::string>() : std::string();
    auto digest = read_attr(f, "model_digest");
    impl_->model_digest = digest.is_string() ? digest.get<std::string>() : std::string();
    impl_->weights_samples = std::min(impl_->samples, read_attr(f, "weights_samples").get<int64_t>());
    for (auto l : impl_->layers) impl_->scales[l] = read_attr(f.openGroup(layer_group(l)), "scale").get<double>();
  } catch (const H5::Exception& e) {
    fail(path, ": unreadable record (", h5_error_text(e), ")");
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": a root attribute is missing or has the wrong type (", e.what(), ")");
  }
}
RecordReader::~RecordReader() = default;
RecordReader::RecordReader(RecordReader&&) noexcept = default;
int64_t RecordReader::samples() const { return impl_->samples; }
int64_t RecordReader::seq_len() const { return impl_->seq_len; }
int64_t RecordReader::n_head() const { return impl_->n_head; }
int64_t RecordReader::head_dim() const { return impl_->head_dim; }
bool RecordReader::causal() const { return impl_->causal; }
const std::vector<int64_t>& RecordReader::layers() const { return impl_->layers; }
int64_t RecordReader::weights_samples() const { return impl_->weights_samples; }
std::string RecordReader::source() const { return impl_->source; }
std::string RecordReader::model_digest() const { return impl_->model_digest; }
double RecordReader::scale(int64_t layer) const {
  auto it = impl_->scales.find(layer);
  MIMIC_CHECK(it != impl_->scales.end(), impl_->path, ": layer ", layer, " was not recorded");
  return it->second;
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
    if (impl_->f16) return read_rows(ds, begin, count, at::kHalf, half_type()).to(at::kFloat);
    return read_rows(ds, begin, count, at::kFloat, H5::PredType::NATIVE_FLOAT);
  } catch (const H5::Exception& e) {
    fail(impl_->path, ": cannot read ", layer_group(layer), "/", name, " (", h5_error_text(e), ")");
  }
}

}  // namespace mimic::record
