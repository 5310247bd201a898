#include <torch/torch.h>

#include <cstring>

#include "mimic/io/safetensors.h"
#include "test_util.h"

using mimic::io::DType;
using mimic::io::SafeTensorsFile;
using mimic::test::TempDir;

namespace {
// Builds a safetensors file by hand (independently of the writer) from a header string and data bytes.
std::string raw_file(const std::string& header, const std::string& data, uint64_t claimed_len = UINT64_MAX) {
  uint64_t n = claimed_len == UINT64_MAX ? header.size() : claimed_len;
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}
std::string f32_bytes(std::initializer_list<float> xs) {
  std::string s(xs.size() * 4, '\0');
  size_t i = 0;
  for (float x : xs) std::memcpy(&s[4 * i++], &x, 4);
  return s;
}
}  // namespace

TEST(SafeTensors, ReadsHandWrittenFile) {
  TempDir dir;
  std::string header =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]},)"
      R"("a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})";
  mimic::test::write_bytes(dir.file("x.safetensors"), raw_file(header, f32_bytes({1.f, 2.f, 3.f, -4.5f, 8.25f})));
  auto f = SafeTensorsFile::open(dir.file("x.safetensors"));
  EXPECT_EQ(f.metadata().at("format"), "pt");
  ASSERT_EQ(f.names(), (std::vector<std::string>{"a", "b"}));  // file order
  auto a = f.load("a");
  auto b = f.load("b");
  EXPECT_TRUE(torch::equal(a, torch::tensor({1.f, 2.f, 3.f})));
  EXPECT_TRUE(torch::equal(b, torch::tensor({-4.5f, 8.25f})));
  EXPECT_EQ(f.load("b", at::kDouble).scalar_type(), at::kDouble);
  EXPECT_MIMIC_ERROR(f.info("c"), "no tensor named 'c'");
}

TEST(SafeTensors, RoundTripAllDtypes) {
  TempDir dir;
  torch::manual_seed(0);
  std::vector<std::pair<std::string, at::Tensor>> ts = {
      {"f32", torch::randn({3, 4})},
      {"f16", torch::randn({5}).to(at::kHalf)},
      {"bf16", torch::randn({2, 2, 2}).to(at::kBFloat16)},
      {"i64", torch::arange(7, torch::kLong) - 3},
      {"i32", torch::arange(6, torch::kInt).reshape({2, 3})},
      {"u8", torch::arange(4, torch::kByte)},
      {"scalar", torch::tensor(3.5f)},
      {"empty", torch::zeros({0, 4})},
      {"noncontig", torch::randn({4, 3}).t()},
  };
  mimic::io::SaveOptions opt;
  opt.metadata = {{"k", "v"}};
  mimic::io::save_safetensors(dir.file("rt.safetensors"), ts, opt);
  auto f = SafeTensorsFile::open(dir.file("rt.safetensors"));
  EXPECT_EQ(f.metadata().at("k"), "v");
  for (const auto& [name, t] : ts) {
    auto back = f.load(name);
    EXPECT_EQ(back.scalar_type(), t.scalar_type()) << name;
    EXPECT_EQ(back.sizes(), t.sizes()) << name;
    EXPECT_TRUE(torch::equal(back, t)) << name;
  }
  EXPECT_EQ(f.info("bf16").dtype, DType::BF16);
  // Converting floats to F16 storage on save.
  opt.convert_floats = true;
  opt.store_as = DType::F16;
  mimic::io::save_safetensors(dir.file("h.safetensors"), ts, opt);
  auto h = SafeTensorsFile::open(dir.file("h.safetensors"));
  EXPECT_EQ(h.info("f32").dtype, DType::F16);
  EXPECT_EQ(h.info("i64").dtype, DType::I64);
  EXPECT_TRUE(torch::allclose(h.load("f32", at::kFloat), ts[0].second, 1e-2, 1e-3));
  // The data section starts 8-byte aligned.
  auto bytes = mimic::test::read_bytes(dir.file("rt.safetensors"));
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u);
  // No temporary file left behind.
  int files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 2);
}

TEST(SafeTensors, BrokenFilesGiveCleanErrors) {
  TempDir dir;
  auto check = [&](const std::string& bytes, const std::string& needle) {
    mimic::test::write_bytes(dir.file("bad.safetensors"), bytes);
    EXPECT_MIMIC_ERROR(SafeTensorsFile::open(dir.file("bad.safetensors")), needle);
  };
  const std::string ok_header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string data = f32_bytes({1.f, 2.f});
  check("", "truncated");
  check("abc", "truncated");
  check(raw_file(ok_header, data, 1ull << 60), "not a safetensors file (its first 8 bytes give a header of ");
  check(raw_file(ok_header, data, ok_header.size() + 100), "runs past the end of the file");
  check(raw_file(ok_header, data).substr(0, 8 + ok_header.size() + 4), "run past the end of the data");
  check(raw_file("{not json", ""), "bad.safetensors: its header: malformed JSON: ");
  // in mimic's words: nlohmann's "[json.exception.parse_error.101]" tag leaked into the line (helper-50's probe)
  mimic::test::write_bytes(dir.file("bad.safetensors"), raw_file("{{{", ""));
  try {
    SafeTensorsFile::open(dir.file("bad.safetensors"));
    ADD_FAILURE() << "a header of {{{ was read";
  } catch (const mimic::Error& e) {
    EXPECT_EQ(std::string(e.what()).find("json.exception"), std::string::npos) << e.what();
  }
  // a tensor named twice is refused, not read as the last of its entries
  check(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", data),
        "key 'a' is given twice");
  check(raw_file("[1,2]", ""), "not a JSON object");
  check(raw_file(R"({"a":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", data), "unknown safetensors dtype 'F33'");
  check(raw_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data), "does not match dtype");
  check(raw_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data), "non-negative");
  check(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", data), "begin > end");
  check(raw_file(R"({"a":{"dtype":"F32","shape":[2]}})", data), "data_offsets must be");
  check(raw_file(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", data), "dtype");
  check(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})", data),
        "overlap");
  check(raw_file(R"({"a":{"dtype":"F32","shape":[4611686018427387904, 8],"data_offsets":[0,8]}})", data), "overflow");
  // beside a 0 the size is 0, and a dimension past int64 wrapped to a negative one LibTorch refused in its words (helper-61)
  check(raw_file(R"({"a":{"dtype":"F32","shape":[9223372036854775808, 0],"data_offsets":[0,0]}})", ""),
        "tensor 'a': shape entry 9223372036854775808 exceeds 2^63 - 1");
  check(raw_file(R"({"__metadata__":{"x":1}})", ""), "not a string");
  EXPECT_MIMIC_ERROR(SafeTensorsFile::open(dir.file("missing.safetensors")), "cannot open");
  EXPECT_MIMIC_ERROR(SafeTensorsFile::open(dir.path().string()), "not a regular file");
}

TEST(SafeTensors, WriterRejectsBadInput) {
  TempDir dir;
  EXPECT_MIMIC_ERROR(mimic::io::save_safetensors(dir.file("d.safetensors"), {{"a", torch::ones(1)}, {"a", torch::ones(1)}}),
                     "duplicate tensor name 'a'");
  EXPECT_MIMIC_ERROR(mimic::io::save_safetensors(dir.file("d.safetensors"), {{"", torch::ones(1)}}), "invalid tensor name");
  EXPECT_MIMIC_ERROR(mimic::io::save_safetensors(dir.file("d.safetensors"), {{"c", torch::ones(1, torch::kComplexFloat)}}),
                     "cannot store");
}
