// HDF5 attention records: RecordReader on a record written here through the HDF5 library, a valid small record
// bent by the input. The input (read with FuzzedDataProvider; an empty input gives the valid record) chooses the
// root attributes' values and HDF5 types (absent, another type, a string array, huge numbers) and each dataset's
// shape and type (absent, another rank, extra rows); the reader then opens it and reads up to two samples of
// every tensor, as distill and report do. Mutating bytes of the HDF5 file itself would mostly exercise HDF5's
// own parser, which is not mimic's code.
#include <H5Cpp.h>
#include <fuzzer/FuzzedDataProvider.h>
#include <torch/torch.h>

#include <algorithm>
#include <functional>

#include "fuzz_util.h"
#include "mimic/record/hdf5.h"
#include "mimic/record/record.h"

namespace {

struct Writer {
  FuzzedDataProvider& in;

  int64_t small(int64_t lo, int64_t hi) { return in.ConsumeIntegralInRange<int64_t>(lo, hi); }

  // An attribute: usually the valid value, else something else of the input's choosing.
  void attr(H5::H5Object& obj, const std::string& name, const std::function<void()>& valid) {
    const H5::DataSpace scalar(H5S_SCALAR);
    const H5::StrType vstr(H5::PredType::C_S1, H5T_VARIABLE);
    switch (small(0, 13)) {
      case 4: return;  // absent
      case 5: {
        int64_t x = in.ConsumeIntegral<int64_t>();
        obj.createAttribute(name, H5::PredType::STD_I64LE, scalar).write(H5::PredType::NATIVE_INT64, &x);
        return;
      }
      case 6: {
        double x = in.ConsumeFloatingPoint<double>();
        obj.createAttribute(name, H5::PredType::IEEE_F64LE, scalar).write(H5::PredType::NATIVE_DOUBLE, &x);
        return;
      }
      case 7: {
        obj.createAttribute(name, vstr, scalar).write(vstr, in.ConsumeRandomLengthString(24));
        return;
      }
      case 8: {
        std::vector<int64_t> xs(static_cast<size_t>(small(0, 4)));
        for (auto& x : xs) x = small(-2, 5);
        hsize_t n = xs.size();
        auto a = obj.createAttribute(name, H5::PredType::STD_I64LE, H5::DataSpace(1, &n));
        if (n) a.write(H5::PredType::NATIVE_INT64, xs.data());
        return;
      }
      case 9: {  // an array of variable-length strings
        const std::string s0 = in.ConsumeRandomLengthString(8), s1 = in.ConsumeRandomLengthString(8);
        const char* ptrs[2] = {s0.c_str(), s1.c_str()};
        hsize_t n = 2;
        obj.createAttribute(name, vstr, H5::DataSpace(1, &n)).write(vstr, ptrs);
        return;
      }
      case 10: {  // a 2-D integer array
        int32_t xs[4] = {1, 0, 2, 3};
        hsize_t dims[2] = {2, 2};
        obj.createAttribute(name, H5::PredType::STD_I32LE, H5::DataSpace(2, dims)).write(H5::PredType::NATIVE_INT32, xs);
        return;
      }
      case 11: {  // an array of fixed-length strings
        const H5::StrType fstr(H5::PredType::C_S1, 4);
        hsize_t n = 3;
        obj.createAttribute(name, fstr, H5::DataSpace(1, &n)).write(fstr, "abcdefghijkl");
        return;
      }
      case 12: {  // a string with no value (a null dataspace)
        obj.createAttribute(name, vstr, H5::DataSpace(H5S_NULL));
        return;
      }
      case 13: {  // an empty integer array
        hsize_t n = 0;
        obj.createAttribute(name, H5::PredType::STD_I64LE, H5::DataSpace(1, &n));
        return;
      }
      default: valid();
    }
  }
  void int_attr(H5::H5Object& obj, const std::string& name, int64_t v) {
    attr(obj, name, [&] { obj.createAttribute(name, H5::PredType::STD_I64LE, H5::DataSpace(H5S_SCALAR)).write(H5::PredType::NATIVE_INT64, &v); });
  }
  void str_attr(H5::H5Object& obj, const std::string& name, const std::string& v) {
    const H5::StrType vstr(H5::PredType::C_S1, H5T_VARIABLE);
    attr(obj, name, [&] { obj.createAttribute(name, vstr, H5::DataSpace(H5S_SCALAR)).write(vstr, v); });
  }

  // A dataset: usually of `shape` and `type`, else absent, of another rank or type, or with more rows.
  void dataset(H5::Group& parent, const std::string& name, std::vector<hsize_t> shape, const H5::DataType& type) {
    const int64_t mode = small(0, 6);
    if (mode == 3) return;
    if (mode == 4) {
      shape.resize(static_cast<size_t>(small(0, 4)));
      for (auto& d : shape) d = static_cast<hsize_t>(small(0, 4));
    } else if (mode == 5 && !shape.empty()) {
      shape[0] += static_cast<hsize_t>(small(1, 3));
    }
    H5::DataSpace space = shape.empty() ? H5::DataSpace(H5S_SCALAR) : H5::DataSpace(static_cast<int>(shape.size()), shape.data());
    const H5::StrType vstr(H5::PredType::C_S1, H5T_VARIABLE);
    const int64_t t = small(0, 5);
    const H5::DataType& dtype = t == 3 ? static_cast<const H5::DataType&>(H5::PredType::IEEE_F64LE)
                                : t == 4 ? static_cast<const H5::DataType&>(H5::PredType::STD_I32BE)
                                : t == 5 ? static_cast<const H5::DataType&>(vstr)
                                         : type;
    H5::DSetCreatPropList props;
    if (!shape.empty() && small(0, 1)) {  // chunked, one chunk per row, as the writer stores them
      std::vector<hsize_t> chunk(shape);
      chunk[0] = 1;
      for (auto& c : chunk) c = std::max<hsize_t>(c, 1);
      props.setChunk(static_cast<int>(chunk.size()), chunk.data());
    }
    parent.createDataSet(name, dtype, space, props);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  H5::Exception::dontPrint();
  FuzzedDataProvider in(data, size);
  Writer w{in};
  const std::string path = mimic::fuzz::scratch() + "/record.h5";
  try {
    H5::H5File f(path, H5F_ACC_TRUNC);
    const int64_t S = w.small(1, 3), T = w.small(1, 4), H = w.small(1, 3), D = w.small(1, 4), W = w.small(0, S);
    const bool f16 = w.small(0, 3) != 3;
    std::vector<int64_t> layers = {0};
    if (w.small(0, 1)) layers.push_back(w.small(1, 2));
    w.str_attr(f, "format", "mimic-record-1");
    w.int_attr(f, "samples_done", S);
    w.int_attr(f, "seq_len", T);
    w.int_attr(f, "n_head", H);
    w.int_attr(f, "head_dim", D);
    w.int_attr(f, "causal", 1);
    w.attr(f, "layers", [&] {
      hsize_t n = layers.size();
      f.createAttribute("layers", H5::PredType::STD_I64LE, H5::DataSpace(1, &n)).write(H5::PredType::NATIVE_INT64, layers.data());
    });
    w.str_attr(f, "dtype", f16 ? "f16" : "f32");
    w.str_attr(f, "source", "gpt2-mini");
    w.str_attr(f, "model_digest", "0123abcd");
    w.int_attr(f, "weights_samples", W);
    const auto u = [](int64_t x) { return static_cast<hsize_t>(x); };
    w.dataset(f, "input_ids", {u(S), u(T)}, H5::PredType::STD_I64LE);
    w.dataset(f, "attention_mask", {u(S), u(T)}, H5::PredType::STD_U8LE);
    const H5::DataType value_type = f16 ? static_cast<H5::DataType>(mimic::record::half_type()) : static_cast<H5::DataType>(H5::PredType::IEEE_F32LE);
    for (auto l : layers) {
      char name[32];
      std::snprintf(name, sizeof(name), "layer_%02lld", static_cast<long long>(l));
      if (w.small(0, 9) == 9) continue;  // a listed layer without its group
      H5::Group g = f.createGroup(name);
      w.attr(g, "scale", [&] {
        double x = 0.5;
        g.createAttribute("scale", H5::PredType::IEEE_F64LE, H5::DataSpace(H5S_SCALAR)).write(H5::PredType::NATIVE_DOUBLE, &x);
      });
      for (const char* t : {"q", "k", "v", "o"}) w.dataset(g, t, {u(S), u(H), u(T), u(D)}, value_type);
      if (W > 0 || w.small(0, 3) == 3) w.dataset(g, "weights", {u(W), u(H), u(T), u(T)}, value_type);
    }
  } catch (const H5::Exception&) {
    return 0;  // an input the writer here cannot express (e.g. a name twice): nothing to read
  }
  MIMIC_FUZZ_EXPECT_ERRORS({
    mimic::record::RecordReader r(path);
    const int64_t n = std::min<int64_t>(r.samples(), 2);
    r.input_ids(0, n);
    r.attention_mask(0, n);
    for (auto l : r.layers()) {
      r.scale(l);
      for (const char* t : {"q", "k", "v", "o"}) r.read(l, t, 0, n);
      if (r.weights_samples() > 0) r.read(l, "weights", 0, std::min<int64_t>(r.weights_samples(), 2));
    }
  });
  return 0;
}
