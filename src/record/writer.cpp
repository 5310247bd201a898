#include "mimic/record/writer.h"

#include <torch/torch.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>

#include "mimic/attention/attention.h"
#include "mimic/core/error.h"
#include "mimic/core/json_keys.h"
#include "mimic/core/runtime.h"
#include "mimic/io/atomic_file.h"
#include "mimic/record/hdf5.h"

namespace mimic::record {

namespace fs = std::filesystem;

namespace {
[[noreturn]] void damaged(const std::string& path, const std::string& why) {
  fail(path, " is damaged and cannot be resumed (", why,
       "): the run that wrote it probably died while writing; delete it to record again (--fresh replaces only a file it can "
       "read as a record)");
}
// The gzip level of a dataset's deflate filter (create_rows writes shuffle + deflate, or no filter at all): 0 for none.
int deflate_level(const H5::DataSet& ds) {
  const H5::DSetCreatPropList plist = ds.getCreatePlist();
  for (int i = 0; i < plist.getNfilters(); ++i) {
    unsigned flags = 0, config = 0, cd[4] = {0, 0, 0, 0};
    size_t n = 4;
    char name[64];
    if (H5Pget_filter2(plist.getId(), static_cast<unsigned>(i), &flags, &n, cd, sizeof(name), name, &config) == H5Z_FILTER_DEFLATE)
      return n > 0 && cd[0] >= 1 && cd[0] <= 9 ? static_cast<int>(cd[0]) : 6;
  }
  return 0;
}
}  // namespace

struct RecordWriter::Impl {
  std::string out;
  int compression = 0;
  RecordLayout layout;
  H5::FloatType f16 = half_type();
  H5::DataType store_type, mem_type;
  at::ScalarType mem_scalar = at::kHalf;
  std::unique_ptr<H5::H5File> file;
  std::map<std::string, H5::DataSet> sets;  // "input_ids", "layer_03/q", ...
  int64_t done = 0;
  int64_t rolled_back = 0;
  std::function<void(int64_t)> before_commit;  // RecordOptions::testing_before_commit

  // Gives up the file's handles without closing them (see write_batch): deliberately leaked.
  void abandon() {
    new std::map<std::string, H5::DataSet>(std::move(sets));
    sets.clear();
    (void)file.release();
  }

  // Builds the file when it does not exist (or `fresh`).
  void create(bool fresh) {
    const auto& layers = layout.layers;
    const int64_t K = layout.weights_samples, target = layout.target, seq_len = layout.seq_len, n_head = layout.n_head,
                  head_dim = layout.head_dim;
    try {
      // A new file is built under a temporary name and renamed once complete and flushed: a file named
      // `out` is always a valid record, possibly with fewer samples than asked.
      // --fresh replaces a record, never another file: it took a maps file, a forward's tensors and a user's own file
      // under that name, exit 0 (the fifth probe of 2026-11-27)
      if (fresh && fs::exists(out)) {
        bool record = false;
        try {
          if (H5::H5File::isHdf5(out)) record = read_attr(H5::H5File(out, H5F_ACC_RDONLY), "format") == kFormat;
        } catch (const H5::Exception&) {
        }
        MIMIC_CHECK(record, out, " exists and is not a mimic record: --fresh replaces only a record; use another --out, or move that file "
                    "out of the way first");
        fs::remove(out);
      }
      if (!fs::exists(out)) {
        auto parent = fs::path(out).parent_path();
        if (!parent.empty()) fs::create_directories(parent);
        const std::string tmp = io::temporary_path(out);
        {
          H5::H5File f(tmp, H5F_ACC_TRUNC);
          for (const auto& [k, v] : layout.settings) write_attr(f, k, v);
          write_attr(f, "source", layout.source);
          write_attr(f, "mimic_version", mimic_version());
          write_attr(f, "samples_done", int64_t{0});
          write_attr(f, "samples_target", target);
          const hsize_t T = static_cast<hsize_t>(seq_len), H = static_cast<hsize_t>(n_head), D = static_cast<hsize_t>(head_dim);
          create_rows(f, "input_ids", H5::PredType::STD_I32LE, {T}, compression);
          create_rows(f, "attention_mask", H5::PredType::STD_U8LE, {T}, compression);
          for (size_t i = 0; i < layers.size(); ++i) {
            auto g = f.createGroup(layer_group(layers[i]));
            write_attr(g, "layer", layers[i]);
            write_attr(g, "scale", layout.scales[i]);
            if (i < layout.converted.size() && !layout.converted[i].empty()) write_attr(g, "converted", layout.converted[i]);
            for (const char* name : kTensors) create_rows(g, name, store_type, {H, T, D}, compression);
            if (K > 0) create_rows(g, "weights", store_type, {H, T, T}, compression);
          }
          f.flush(H5F_SCOPE_GLOBAL);
        }
        io::commit_temporary(tmp, out);
      } else if (!fs::is_regular_file(out)) {
        io::require_regular_file(out);  // a FIFO would block HDF5's open
      }
    } catch (const H5::Exception& e) {
      fail("cannot create ", out, ": ", h5_error_text(e));
    }
  }

  // Opens (or reopens) the file, checks it belongs to this run, and brings every dataset to samples_done rows.
  void reopen(int64_t samples_asked, const std::string& data, const std::function<at::Tensor(int64_t)>& expected_ids) {
    const auto& layers = layout.layers;
    const int64_t K = layout.weights_samples, target = layout.target;
    // Nothing but a record is opened for writing: an empty file opened read-write became an HDF5 stub before the
    // format check refused it (the sixth probe of 2026-11-28), so the signature and the format are read first, the
    // file opened read-only.
    // a file that may not be read is no proof of a foreign file ("not an HDF5 file"): said as what it is
    if (const int fd = ::open(out.c_str(), O_RDONLY | O_NONBLOCK); fd < 0)
      fail(out, " cannot be opened to read it (", std::strerror(errno), "): the file is left as it is; make it readable, or give another --out");
    else
      ::close(fd);
    bool hdf5 = false;
    try {
      hdf5 = H5::H5File::isHdf5(out);
    } catch (const H5::Exception&) {
    }
    if (!hdf5) fail(out, " exists and is not an HDF5 file (not a mimic record); use another --out");
    auto open = [&](unsigned mode) {
      try {
        return std::make_unique<H5::H5File>(out, mode);
      } catch (const H5::Exception& e) {
        std::string why = h5_error_text(e);
        if (why.find("already open") != std::string::npos || why.find("another process is writing it") != std::string::npos)
          fail(out, " is in use (open in another process or handle: ", why, ")");
        // A record that may not be written is not damaged: deleting it, as the damaged line says, would lose it
        // (the probe of 2026-12-02: a chmod 444 record, run as a user, read "damaged ... delete it").
        for (const char* denied : {"Permission denied", "Operation not permitted", "Read-only file system"})
          if (why.find(denied) != std::string::npos)
            fail(out, " cannot be opened to extend it (", denied, "): the file is left as it is; make it writable, or give another --out");
        damaged(out, "HDF5 cannot open it: " + why);
      }
    };
    try {
      auto fmt = read_attr(*open(H5F_ACC_RDONLY), "format");
      MIMIC_CHECK(fmt == kFormat, out, " is not a mimic record file (attribute format is ", show(fmt), ", expected \"", kFormat,
                  "\"); use another --out");
    } catch (const H5::Exception& e) {
      damaged(out, "HDF5: " + h5_error_text(e));
    }
    file = open(H5F_ACC_RDWR);
    try {
      // A run killed between two flushes had written the chunks of its last batch (and perhaps index nodes that
      // name them) past the end of allocation its last flush recorded. Cutting those rows below freed that space as
      // though it lay inside the file, the next chunk was placed there, and HDF5 refused to write it ("addr overflow,
      // addr = …, eoa = …", 3 resumes in about 120 of a kill soak, once in CI). The end of allocation is first moved
      // to the file's end, so that what the killed run wrote counts as allocated: freed, reused or left unused, never
      // handed out beyond the end.
      if (H5Fincrement_filesize(file->getId(), 0) < 0) throw H5::FileIException("H5Fincrement_filesize", "cannot extend the end of allocation");
      for (const auto& [k, v] : layout.settings) {
        auto have = read_attr(*file, k);
        if ((k == "network" || k == "attention") && have.is_null()) continue;  // files recorded before they were kept resume as before
        if (have == v) continue;
        // a description ("activation 3, ..., rope_theta 10000") names the part that differs, not both whole lines
        const auto d = json_first_difference(have, v);
        const std::string was = d ? d->first : show(have), now = d ? d->second : show(v);
        fail(out, " was recorded with other settings: ", k, " is ", was, " in the file, ", now,
             " for this run (use the same settings to resume, another --out, or --fresh to overwrite)");
      }
      auto d = read_attr(*file, "samples_done");
      MIMIC_CHECK(d.is_number_integer(), out, ": attribute samples_done is missing");
      done = d.get<int64_t>();
      MIMIC_CHECK(done <= target, out, " already holds ", done, " samples, more than the ", target, " asked for (",
                  samples_asked > 0 ? "raise --samples" : "the data has no more", ", or use another --out)");
      sets["input_ids"] = file->openDataSet("input_ids");
      sets["attention_mask"] = file->openDataSet("attention_mask");
      compression = deflate_level(sets["input_ids"]);
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
        rolled_back = done - good;
        done = good;
        for (auto& [name, ds] : sets) {
          set_rows(ds, rows_of(name, done));
          if (chunks_of(ds) != rows_of(name, done)) damaged(out, name + " has fewer chunks than rows");
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
        auto want = expected_ids(done);
        MIMIC_CHECK(torch::equal(have, want), out, ": the input_ids already recorded differ from the samples of --data ", data,
                    " (other data or tokenization); use another --out or --fresh");
      }
      write_attr(*file, "samples_target", target);
      file->flush(H5F_SCOPE_GLOBAL);
    } catch (const H5::Exception& e) {
      damaged(out, "HDF5: " + h5_error_text(e));
    }
  }
};

RecordWriter::RecordWriter(const RecordOptions& o, const RecordLayout& layout, const std::function<at::Tensor(int64_t)>& expected_ids)
    : impl_(std::make_unique<Impl>()) {
  H5::Exception::dontPrint();
  auto& m = *impl_;
  m.out = o.out;
  m.compression = o.compression;
  m.layout = layout;
  m.store_type = o.dtype == "f16" ? H5::DataType(m.f16) : H5::DataType(H5::PredType::IEEE_F32LE);
  m.mem_type = o.dtype == "f16" ? H5::DataType(m.f16) : H5::DataType(H5::PredType::NATIVE_FLOAT);
  m.mem_scalar = o.dtype == "f16" ? at::kHalf : at::kFloat;
  m.before_commit = o.testing_before_commit;
  m.create(o.fresh);
  m.reopen(o.samples, o.data, expected_ids);
}

RecordWriter::~RecordWriter() = default;
int64_t RecordWriter::samples_done() const { return impl_->done; }
int64_t RecordWriter::rolled_back() const { return impl_->rolled_back; }
int RecordWriter::compression() const { return impl_->compression; }

void RecordWriter::write_batch(int64_t s, const at::Tensor& ids, const at::Tensor& mask, const std::vector<attention::AttentionCapture>& captures) {
  auto& m = *impl_;
  const auto& layers = m.layout.layers;
  const int64_t K = m.layout.weights_samples, b = ids.size(0);
  auto& sets = m.sets;
  const auto mem_scalar = m.mem_scalar;
  try {
    const hsize_t at = static_cast<hsize_t>(s);
    // Nothing that is not finite is stored: a reader refuses it as damage, so it is refused here, before this batch is
    // written, naming what overflowed: a value beyond f16's 65504 (the teacher's own are finite) or the teacher's.
    auto stored = [&](const at::Tensor& x, int64_t layer, const char* name) {
      auto y = x.to(mem_scalar);
      if (const int64_t row = first_nonfinite_row(y); row >= 0) {
        const bool teacher = first_nonfinite_row(x) >= 0;
        fail("layer ", layer, "'s ", name, " in sample ", s + row, teacher ? " is not finite (NaN or infinite) in the teacher's forward: the model "
             "or its input is broken" : " exceeds f16's range (65504): record with --dtype f32");
      }
      return host(y);
    };
    std::vector<Piece> pieces;
    pieces.push_back({&sets["input_ids"], at, host(ids.to(at::kInt))});
    pieces.push_back({&sets["attention_mask"], at, host(mask.to(at::kByte))});
    for (size_t i = 0; i < layers.size(); ++i) {
      const auto& c = captures[i];
      const std::string g = layer_group(layers[i]) + "/";
      const at::Tensor* ts[] = {&c.q, &c.k, &c.v, &c.o};
      static_assert(std::size(ts) == std::size(kTensors), "one captured tensor per recorded name");
      // converted where they were computed, then one host copy each (the chunks are compressed on the CPU)
      for (size_t j = 0; j < std::size(kTensors); ++j) pieces.push_back({&sets[g + kTensors[j]], at, stored(*ts[j], layers[i], kTensors[j])});
      if (s < K) {
        int64_t rows = std::min(b, K - s);
        pieces.push_back({&sets[g + "weights"], at, stored(c.weights.narrow(0, 0, rows), layers[i], "weights")});
      }
    }
    write_pieces(pieces, m.compression);
    if (m.before_commit) {
      for (auto& [name, ds] : sets)
        if (H5Dflush(ds.getId()) < 0) throw H5::DataSetIException("H5Dflush", "cannot flush " + name);
      m.before_commit(s);
    }
    // Two-phase commit: the batch's chunks and indexes reach the file first, then samples_done (one
    // small in-place write). A kill before the second flush loses only this batch.
    m.file->flush(H5F_SCOPE_GLOBAL);
    write_attr(*m.file, "samples_done", s + b);
    m.file->flush(H5F_SCOPE_GLOBAL);
  } catch (const H5::Exception& e) {
    // A file whose write failed (a full disk) cannot be closed: H5File's destructor printed a second line
    // ("H5Fclose failed") before mimic's one. Its handles are left open to the end of the process instead (the
    // CLI ends with _Exit after an error, so HDF5's own close at exit, which crashed on them, does not run).
    m.abandon();
    fail("writing ", m.out, " failed: ", h5_error_text(e));
  }
}

void RecordWriter::close() {
  try {
    impl_->file->close();
  } catch (const H5::Exception& e) {
    fail("closing ", impl_->out, " failed: ", h5_error_text(e));
  }
}

}  // namespace mimic::record
