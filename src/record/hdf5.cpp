#include "mimic/record/hdf5.h"

#include <torch/torch.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "mimic/core/error.h"
#include "mimic/core/utf8.h"
#include "mimic/core/json_keys.h"

namespace mimic::record {

namespace {
H5::StrType string_type() {
  H5::StrType t(H5::PredType::C_S1, H5T_VARIABLE);
  t.setCset(H5T_CSET_UTF8);
  return t;
}
}  // namespace

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
  return h5_error_words(inner, e.getDetailMsg());
}

std::string h5_error_words(const std::string& inner_text, const std::string& outer_text) {
  auto one_line = [](const std::string& s) {
    std::string out;
    for (char c : s) {
      const bool space = c == '\n' || c == '\r' || c == '\t' || c == ' ';
      if (space && (out.empty() || out.back() == ' ')) continue;
      out += space ? ' ' : c;
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
  };
  std::string inner = one_line(inner_text), outer = one_line(outer_text);
  const std::string quoted = "error message = '";
  if (const auto at = inner.find(quoted); at != std::string::npos) {
    const auto from = at + quoted.size(), to = inner.find('\'', from);
    const std::string system = inner.substr(from, to == std::string::npos ? std::string::npos : to - from);
    int code = 0;
    if (const auto e = inner.find("errno = "); e != std::string::npos) code = std::atoi(inner.c_str() + e + 8);
    // HDF5 locks a file it writes (flock): a second writer — another process, or the same file through a hard
    // link, which mimic's per-name output lock cannot see — hears EAGAIN, which alone read as a damaged file (F11)
    const bool locked = inner.rfind("unable to lock file", 0) == 0;
    inner = code == ENOSPC || code == EDQUOT ? "the disk is full (" + system + ")"
            : locked && (code == EAGAIN || code == EWOULDBLOCK)
                ? "another process is writing it (HDF5's file lock: " + system + ")"
            : locked ? "another process is writing it, or the file system refuses HDF5's file lock (" + system +
                           "; HDF5_USE_FILE_LOCKING=FALSE turns the lock off)"
                     : system;
  }
  // a file cut short: HDF5's addresses ("eof = 3000, sblock->base_addr = 0, stored_eof = …") said nothing a user
  // acts on (the eighteenth probe of 2026-11-30)
  if (inner.rfind("truncated file", 0) == 0) inner = "the file is cut short (a copy or a write that did not finish?)";
  if (inner.empty()) return outer;
  return outer.empty() ? inner : inner + " (" + outer + ")";
}

// A copy of float32 with 1 sign, 5 exponent (bias 15), 10 mantissa bits in
// 2 bytes. h5py (numpy) reads it as float16.
H5::FloatType half_type() {
  H5::FloatType t(H5::PredType::IEEE_F32LE);
  t.setFields(15, 10, 5, 0, 10);
  t.setSize(2);
  t.setEbias(15);
  return t;
}

void write_attr(H5::H5Object& obj, const std::string& name, const nlohmann::json& v) {
  if (v.is_null()) {  // an absent setting: no attribute (read_attr gives null back)
    if (obj.attrExists(name)) obj.removeAttr(name);
  } else if (v.is_string()) {
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
    // HDF5's C++ read into a std::string takes exactly one value: a variable-length string array would have it
    // write one pointer per element into a single one, and a string without a value (a null dataspace) leaves
    // the pointer it frees unset. Only a scalar holding one string is read; anything else is not mimic's.
    if (!scalar || n != 1) return "<unreadable>";
    std::string s;
    a.read(a.getStrType(), s);
    // A damaged or foreign file's bytes that are not UTF-8 would reach JSON (a checkpoint, --json, a report's
    // metrics) and stop the command with nlohmann's type_error.316 (found by hand after fuzz_record's finding,
    // 2026-11-27): such a value reads as unreadable, like a string of a shape mimic never writes.
    if (!is_valid_utf8(s)) return "<not UTF-8>";
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

// json_dump: a string attribute of a damaged or foreign file may hold bytes that are not UTF-8 (fuzz_record found
// nlohmann's type_error.316 escaping the reader, 2026-11-27)
std::string show(const nlohmann::json& v) { return v.is_null() ? "absent" : json_dump(v, -1); }

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

int64_t first_nonfinite_row(const at::Tensor& t) {
  if (t.numel() == 0) return -1;
  const auto bad = (~at::isfinite(t)).reshape({t.size(0), -1}).any(1);
  return bad.any().item<bool>() ? bad.nonzero()[0][0].item<int64_t>() : -1;
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

}  // namespace mimic::record
