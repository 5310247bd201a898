// The `record` stage: the HDF5 file holds exactly what the softmax kernels consumed and produced (checked
// by recomputing softmax(q kᵀ·scale + mask) v from the stored tensors, read back with the HDF5 C++ API),
// resumes after a SIGKILL to the same content as an uninterrupted run, refuses other settings, and is
// readable by h5py.
#include <H5Cpp.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <torch/torch.h>

#include <functional>

#include <cstdlib>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "mimic/attention/attention.h"
#include "mimic/attention/kinds.h"
#include "mimic/core/layers.h"
#include "mimic/data/classification.h"
#include "mimic/data/corpus.h"
#include "mimic/models/model.h"
#include "mimic/record/hdf5.h"
#include "mimic/record/record.h"
#include "mimic/record/writer.h"
#include "test_util.h"
#include "mimic/text/tokenizer.h"

using mimic::test::TempDir;

namespace {

std::string gpt2_dir() { return mimic::test::model_with_tokenizer("gpt2-prefixed"); }
std::string bert_dir() { return mimic::test::model_with_tokenizer("bert-mlm"); }

const char* kText =
    "Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in my purse, "
    "and nothing particular to interest me on shore, I thought I would sail about a little and see the watery "
    "part of the world. It is a way I have of driving off the spleen and regulating the circulation.";

// The token stream `record --data FILE --split S` reads, as data::corpus_token_cache writes a user's text: each
// document's part of split S (data::load_text_data's cleaned text) encoded without special tokens and followed by
// the tokenizer's document separator (EOS; [SEP] for BERT, which has none).
std::vector<int64_t> split_stream(const std::string& model_dir, const std::string& file, mimic::data::Split split) {
  auto tok = mimic::text::load_tokenizer(model_dir);
  std::vector<int64_t> ids;
  for (const auto& d : mimic::data::load_text_data(file)) {
    if (d.split != split) continue;
    auto part = tok->encode(d.text, /*add_special_tokens=*/false);
    ids.insert(ids.end(), part.begin(), part.end());
    ids.push_back(tok->eos_id() >= 0 ? tok->eos_id() : tok->sep_id());
  }
  return ids;
}

// ---- reading with the HDF5 C++ API directly (independent of mimic's reader)
at::Tensor read_dataset(const H5::H5File& f, const std::string& path, at::ScalarType st = at::kFloat) {
  auto ds = f.openDataSet(path);
  auto space = ds.getSpace();
  std::vector<hsize_t> dims(static_cast<size_t>(space.getSimpleExtentNdims()));
  space.getSimpleExtentDims(dims.data());
  auto out = torch::empty(std::vector<int64_t>(dims.begin(), dims.end()), st);
  if (out.numel() == 0) return out;
  // HDF5 converts the stored float16 (or float32) to native float itself.
  const H5::DataType& mem = st == at::kFloat ? static_cast<const H5::DataType&>(H5::PredType::NATIVE_FLOAT)
                                             : static_cast<const H5::DataType&>(H5::PredType::NATIVE_INT64);
  ds.read(out.data_ptr(), mem);
  return out;
}

int64_t int_attr(const H5::H5Object& o, const std::string& name) {
  int64_t v = 0;
  o.openAttribute(name).read(H5::PredType::NATIVE_INT64, &v);
  return v;
}
double double_attr(const H5::H5Object& o, const std::string& name) {
  double v = 0;
  o.openAttribute(name).read(H5::PredType::NATIVE_DOUBLE, &v);
  return v;
}
std::string string_attr(const H5::H5Object& o, const std::string& name) {
  auto a = o.openAttribute(name);
  std::string s;
  a.read(a.getStrType(), s);
  return s;
}
size_t storage_size(const H5::H5File& f, const std::string& path) { return f.openDataSet(path).getDataType().getSize(); }

// softmax(q kᵀ·scale + causal + key padding) v, and the weights, from stored float tensors.
std::pair<at::Tensor, at::Tensor> softmax_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                    const at::Tensor& mask, double scale, bool causal) {
  auto scores = torch::matmul(q.to(at::kDouble), k.to(at::kDouble).transpose(-1, -2)) * scale;
  const int64_t t = q.size(2);
  auto allowed = mask.to(at::kBool).view({q.size(0), 1, 1, t}).expand({q.size(0), q.size(1), t, t});
  if (causal) allowed = allowed & torch::ones({t, t}, torch::kBool).tril();
  scores = scores.masked_fill(allowed.logical_not(), -std::numeric_limits<double>::infinity());
  auto w = torch::softmax(scores, -1);
  return {torch::matmul(w, v.to(at::kDouble)).to(at::kFloat), w.to(at::kFloat)};
}

mimic::record::RecordOptions options(const std::string& model, const std::string& data, const std::string& out) {
  mimic::record::RecordOptions o;
  o.model_dir = model;
  o.data = data;
  o.out = out;
  o.seq_len = 16;
  o.samples = 0;
  o.batch_size = 3;
  o.measure_forward = false;
  return o;
}

// Checks a record file against the model: ids are the data's blocks, stored q/k/v are what the kernels
// consumed (f16 rounding), o and the weights are softmax attention of the stored q, k, v.
void check_round_trip(const std::string& path, const std::string& model_dir, const std::vector<int64_t>& stream, bool bert) {
  H5::H5File f(path, H5F_ACC_RDONLY);
  const int64_t n = int_attr(f, "samples_done"), t = int_attr(f, "seq_len"), h = int_attr(f, "n_head"),
                dh = int_attr(f, "head_dim"), k_samples = int_attr(f, "weights_samples");
  const bool causal = int_attr(f, "causal") != 0;
  EXPECT_EQ(string_attr(f, "format"), "mimic-record-1");
  EXPECT_EQ(string_attr(f, "model_type"), bert ? "bert" : "gpt2");
  EXPECT_EQ(causal, !bert);
  EXPECT_DOUBLE_EQ(double_attr(f, "scale"), 1.0 / std::sqrt(static_cast<double>(dh)));
  EXPECT_EQ(int_attr(f, "n_layer"), 2);
  auto ids = read_dataset(f, "input_ids", at::kLong);
  auto mask = read_dataset(f, "attention_mask", at::kLong);
  EXPECT_EQ(storage_size(f, "input_ids"), 4u);
  EXPECT_EQ(storage_size(f, "attention_mask"), 1u);
  ASSERT_EQ(ids.sizes(), (std::vector<int64_t>{n, t}));
  // samples = consecutive blocks of the stream; the last one padded and masked
  const int64_t block = bert ? t - 2 : t;
  ASSERT_EQ(n, (static_cast<int64_t>(stream.size()) + block - 1) / block);
  int64_t real = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t len = std::min<int64_t>(block, static_cast<int64_t>(stream.size()) - i * block), p = 0;
    if (bert) EXPECT_EQ(ids[i][p++].item<int64_t>(), 101);
    for (int64_t j = 0; j < len; ++j) EXPECT_EQ(ids[i][p++].item<int64_t>(), stream[static_cast<size_t>(i * block + j)]);
    if (bert) EXPECT_EQ(ids[i][p++].item<int64_t>(), 102);
    EXPECT_EQ(mask[i].sum().item<int64_t>(), p) << "sample " << i;
    EXPECT_EQ(mask[i].narrow(0, 0, p).min().item<int64_t>(), 1);
    real += p;
  }
  EXPECT_LT(real, n * t) << "the test data should end with a padded sample";

  // what the kernels consumed, recomputed with the library
  auto model = mimic::models::load_model(model_dir);
  model->module().eval();
  torch::NoGradGuard ng;
  std::vector<mimic::attention::AttentionCapture> caps(2);
  for (int l = 0; l < 2; ++l) model->set_attention_capture(l, &caps[l]);
  model->forward({ids, mask, {}, {}});
  for (int l = 0; l < 2; ++l) {
    const std::string g = "layer_0" + std::to_string(l) + "/";
    SCOPED_TRACE(g);
    for (const char* name : {"q", "k", "v", "o", "weights"}) EXPECT_EQ(storage_size(f, g + name), 2u) << name;  // f16
    auto q = read_dataset(f, g + "q"), k = read_dataset(f, g + "k"), v = read_dataset(f, g + "v"), o = read_dataset(f, g + "o");
    auto w = read_dataset(f, g + "weights");
    ASSERT_EQ(q.sizes(), (std::vector<int64_t>{n, h, t, dh}));
    ASSERT_EQ(o.sizes(), (std::vector<int64_t>{n, h, t, dh}));
    ASSERT_EQ(w.sizes(), (std::vector<int64_t>{std::min(n, k_samples), h, t, t}));
    const double scale = double_attr(f.openGroup(g), "scale");
    EXPECT_DOUBLE_EQ(scale, caps[l].scale);
    // the stored tensors are the kernel's inputs and output to float16 precision
    EXPECT_TRUE(torch::allclose(q, caps[l].q, 2e-3, 1e-4));
    EXPECT_TRUE(torch::allclose(k, caps[l].k, 2e-3, 1e-4));
    EXPECT_TRUE(torch::allclose(v, caps[l].v, 2e-3, 1e-4));
    EXPECT_TRUE(torch::allclose(o, caps[l].o, 2e-3, 1e-4));
    // softmax attention of the stored q, k, v reproduces the stored o and weights, at real query positions
    auto [o_ref, w_ref] = softmax_attention(q, k, v, mask, scale, causal);
    auto real_q = mask.to(at::kBool).view({n, 1, t, 1});
    auto od = (o_ref - o).abs().masked_fill(real_q.logical_not(), 0);
    EXPECT_LT(od.max().item<double>(), 5e-3 * std::max(1.0, o.abs().max().item<double>()));
    auto wk = w_ref.narrow(0, 0, w.size(0));
    auto wd = (wk - w).abs().masked_fill(real_q.narrow(0, 0, w.size(0)).logical_not(), 0);
    EXPECT_LT(wd.max().item<double>(), 2e-3);
    // masked keys get no weight
    auto keys = mask.narrow(0, 0, w.size(0)).to(at::kBool).view({w.size(0), 1, 1, t}).expand_as(w);
    auto masked = w.masked_select(keys.logical_not());
    if (masked.numel() > 0) EXPECT_EQ(masked.abs().max().item<float>(), 0.0f);
  }
}

bool equal_files(const std::string& a, const std::string& b, std::string* why) {
  H5::H5File fa(a, H5F_ACC_RDONLY), fb(b, H5F_ACC_RDONLY);
  std::vector<std::string> names = {"input_ids", "attention_mask"};
  for (int l = 0; l < 2; ++l)
    for (const char* n : {"q", "k", "v", "o", "weights"}) names.push_back("layer_0" + std::to_string(l) + "/" + n);
  for (const auto& n : names) {
    auto x = read_dataset(fa, n), y = read_dataset(fb, n);
    if (!torch::equal(x, y)) {
      *why = n + " differs";
      return false;
    }
  }
  if (int_attr(fa, "samples_done") != int_attr(fb, "samples_done")) {
    *why = "samples_done differs";
    return false;
  }
  return true;
}

int64_t samples_done(const std::string& path) {
  H5::H5File f(path, H5F_ACC_RDONLY);
  return int_attr(f, "samples_done");
}

}  // namespace

TEST(Record, Gpt2RoundTripReproducesSoftmax) {
  TempDir dir;
  // 21 lines: the train part (lines 1-19) and its separator end in a padded sample of 16 (20 lines fill 81 exactly)
  mimic::test::write_bytes(dir.file("t.txt"), mimic::test::text_lines(kText, 21));
  auto o = options(gpt2_dir(), dir.file("t.txt"), dir.file("g.h5"));
  o.weights_samples = 2;
  std::vector<std::string> notes;
  o.note = [&](const std::string& s) { notes.push_back(s); };
  auto r = mimic::record::record(o);
  auto stream = split_stream(gpt2_dir(), dir.file("t.txt"), mimic::data::Split::Train);  // --split train, the default
  // --samples 0 (every sample) says what it will write before it starts (it wrote 3 GB without a word: helper-57):
  // 2 layers × (q, k, v, o of 2 heads × 16 × 4) + 2 layers × 2 samples' weights (2 heads × 16 × 16), f16
  {
    const mimic::record::RecordReader rd(o.out);
    ASSERT_EQ(rd.n_head() * rd.head_dim(), 8);
    char size[32];
    std::snprintf(size, sizeof size, "%.0f kB", (r.samples * 2 * 4 * 2 * 16 * 4 * 2 + 2 * 2 * 2 * 16 * 16 * 2) / 1e3);
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_EQ(notes[0], "--samples 0 takes every sample of the data: " + std::to_string(r.samples) + " samples of 16 tokens, up to " + size +
                            " before compression (q, k, v and o of 2 layers, and the weights of the first samples); --samples N takes fewer");
  }
  EXPECT_EQ(r.samples, (static_cast<int64_t>(stream.size()) + 15) / 16);
  EXPECT_EQ(r.recorded, r.samples);
  EXPECT_EQ(r.resumed_from, 0);
  EXPECT_EQ(r.tokens, r.samples * 16);
  EXPECT_GT(r.file_bytes, 0);
  check_round_trip(o.out, gpt2_dir(), stream, /*bert=*/false);
  {
    // mimic's reader sees the same
    mimic::record::RecordReader rd(o.out);
    EXPECT_EQ(rd.samples(), r.samples);
    EXPECT_EQ(rd.layers(), (std::vector<int64_t>{0, 1}));
    EXPECT_TRUE(rd.causal());
    EXPECT_EQ(rd.weights_samples(), 2);
    H5::H5File f(o.out, H5F_ACC_RDONLY);
    EXPECT_TRUE(torch::equal(rd.read(1, "o", 1, 2), read_dataset(f, "layer_01/o").narrow(0, 1, 2)));
    EXPECT_TRUE(torch::equal(rd.input_ids(0, 2), read_dataset(f, "input_ids", at::kLong).narrow(0, 0, 2)));
    // the file is in use while open
    EXPECT_MIMIC_ERROR(mimic::record::record(o), "is in use");
  }
  {
    // the same file under another name (a hard link), while another writer holds HDF5's lock on it (a flock, as
    // HDF5 takes): mimic's output lock is per name and cannot see it; the file is "in use", not "damaged" (F11)
    const std::string link = dir.file("link.h5");
    std::filesystem::create_hard_link(o.out, link);
    const int fd = ::open(o.out.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
    auto through_link = o;
    through_link.out = link;
    EXPECT_MIMIC_ERROR(mimic::record::record(through_link), "is in use (open in another process or handle: another process is writing it");
    ::close(fd);
    std::filesystem::remove(link);
  }
  // a rerun of the same command finds nothing left to do
  auto again = mimic::record::record(o);
  EXPECT_EQ(again.recorded, 0);
  EXPECT_EQ(again.resumed_from, r.samples);
}

// A damaged or foreign record's string attribute that is not UTF-8 reached JSON (report's metrics, distill's maps and
// checkpoint) and stopped the command with nlohmann's type_error.316 (2026-11-27, after fuzz_record's finding): it
// reads as unreadable, and the commands run or refuse in mimic's words. A record given where a safetensors file
// belongs is named as HDF5 (it was an "absurd header length").
TEST(Record, StringAttributesThatAreNotUtf8ReadAsUnreadableAndARecordIsNoSafetensorsFile) {
  TempDir dir;
  mimic::test::write_bytes(dir.file("t.txt"), mimic::test::text_lines(kText, 21));
  auto o = options(gpt2_dir(), dir.file("t.txt"), dir.file("g.h5"));
  mimic::record::record(o);
  {
    H5::H5File f(o.out, H5F_ACC_RDWR);
    f.removeAttr("source");
    mimic::record::write_attr(f, "source", std::string("/models/gpt\xff\xfe"));
    EXPECT_EQ(mimic::record::read_attr(f, "source"), "<not UTF-8>");
    EXPECT_EQ(mimic::record::read_attr(f, "format"), "mimic-record-1");
  }
  if (MIMIC_TESTS_HAVE_REPORT) {  // a build without cairo has no report (the GPU machines' builds)
    auto report = mimic::test::mimic_cli("report --record " + o.out + " --out " + dir.file("rep") + " --json --threads 1");
    EXPECT_EQ(report.code, 0) << report.err;
  }
  auto distill = mimic::test::mimic_cli("distill --record " + o.out + " --epochs 1 --out " + dir.file("m.safetensors") + " --json --threads 1");
  EXPECT_EQ(distill.code, 0) << distill.err;
  auto info = mimic::test::mimic_cli("info " + o.out);
  EXPECT_EQ(info.err, "mimic: error: " + o.out + ": an HDF5 file (a mimic record?), not a safetensors file\n");
}

// --fresh replaces a record and nothing else: it deleted a user's file, a maps file or a forward's tensors under the
// --out name, exit 0 (the fifth probe of 2026-11-27). A record is still replaced.
TEST(Record, FreshReplacesOnlyARecord) {
  TempDir dir;
  mimic::test::write_bytes(dir.file("t.txt"), mimic::test::text_lines(kText, 21));
  mimic::test::write_bytes(dir.file("notes.h5"), "my notes");
  auto o = options(gpt2_dir(), dir.file("t.txt"), dir.file("notes.h5"));
  o.fresh = true;
  EXPECT_MIMIC_ERROR(mimic::record::record(o), "notes.h5 exists and is not a mimic record: --fresh replaces only a record");
  EXPECT_EQ(mimic::test::read_bytes(dir.file("notes.h5")), "my notes");
  o.out = dir.file("r.h5");
  o.fresh = false;
  mimic::record::record(o);
  o.fresh = true;
  EXPECT_EQ(mimic::record::record(o).resumed_from, 0);
}

TEST(Record, BertRoundTripWithPaddedSample) {
  TempDir dir;
  mimic::test::write_bytes(dir.file("t.txt"), mimic::test::text_lines(kText, 20));
  auto o = options(bert_dir(), dir.file("t.txt"), dir.file("b.h5"));
  o.weights_samples = 100;  // more than there are: all of them
  auto r = mimic::record::record(o);
  auto stream = split_stream(bert_dir(), dir.file("t.txt"), mimic::data::Split::Train);
  check_round_trip(o.out, bert_dir(), stream, /*bert=*/true);
  H5::H5File f(o.out, H5F_ACC_RDONLY);
  EXPECT_EQ(read_dataset(f, "layer_00/weights").size(0), r.samples);
}

// A user's text file is split as every command splits it (data::load_text_data: the first 90% of its characters
// train, the next 5% validate, the last 5% test, cut at line breaks), and record reads the part --split names alone:
// maps distilled on a file's train part are never scored (eval --data FILE --split test) on lines they were fitted to.
TEST(Record, AUsersTextFileRecordsOnlyTheSplitItNames) {
  TempDir dir;
  const std::string file = dir.file("t.txt");
  mimic::test::write_bytes(file, mimic::test::text_lines(kText, 20));
  auto tok = mimic::text::load_tokenizer(gpt2_dir());
  // the real tokens of a record of `split`, in order
  auto recorded = [&](const std::string& split) {
    auto o = options(gpt2_dir(), file, dir.file(split + ".h5"));
    o.split = split;
    const auto r = mimic::record::record(o);
    H5::H5File f(o.out, H5F_ACC_RDONLY);
    auto real = read_dataset(f, "input_ids", at::kLong).masked_select(read_dataset(f, "attention_mask", at::kLong).to(at::kBool));
    // the positions of padding counted (helper-81's probe: "1 sample of 256 tokens" where the split held 91)
    EXPECT_EQ(r.padded, r.tokens - real.numel()) << split;
    return std::vector<int64_t>(real.data_ptr<int64_t>(), real.data_ptr<int64_t>() + real.numel());
  };
  const auto train = recorded("train"), test = recorded("test");
  EXPECT_EQ(train, split_stream(gpt2_dir(), file, mimic::data::Split::Train));
  // the CLI says it: a note, and the JSON's padded_tokens
  auto cli = mimic::test::mimic_cli("record --model " + gpt2_dir() + " --data " + file + " --split test --seq-len 64 --json --out " + dir.file("cli.h5"));
  ASSERT_EQ(cli.code, 0) << cli.err;
  const auto j = nlohmann::json::parse(cli.out);
  const int64_t padded = j.at("padded_tokens"), positions = j.at("samples").get<int64_t>() * 64;
  EXPECT_EQ(j.at("tokens"), positions);
  EXPECT_EQ(padded, positions - static_cast<int64_t>(split_stream(gpt2_dir(), file, mimic::data::Split::Test).size()));
  EXPECT_GT(padded, 0);
  EXPECT_NE(cli.err.find("mimic: note: " + std::to_string(padded) + " of the " + std::to_string(positions) +
                         " token positions recorded now are padding"), std::string::npos) << cli.err;
  EXPECT_EQ(test, split_stream(gpt2_dir(), file, mimic::data::Split::Test));
  // the parts, written out: lines 1-18 train, line 20 tests (line 19 validates), each followed by the separator
  std::string lines_1_to_18 = mimic::test::text_lines(kText, 18);
  lines_1_to_18.pop_back();  // the cleaned part ends without its line break
  auto expected_train = tok->encode(lines_1_to_18, false), expected_test = tok->encode("20. " + std::string(kText), false);
  expected_train.push_back(tok->eos_id());
  expected_test.push_back(tok->eos_id());
  EXPECT_EQ(train, expected_train);
  EXPECT_EQ(test, expected_test);
  // disjoint: no line of one split is read by the other
  const std::string train_text = tok->decode(train), test_text = tok->decode(test);
  EXPECT_EQ(train_text.find("19. "), std::string::npos);
  EXPECT_EQ(train_text.find("20. "), std::string::npos);
  EXPECT_EQ(test_text.find("18. "), std::string::npos);
  EXPECT_EQ(test_text.find("19. "), std::string::npos);
  // a text too short to give every split a word of its own is refused, naming the file
  mimic::test::write_bytes(dir.file("one.txt"), "Call me Ishmael.\n");
  EXPECT_MIMIC_ERROR(mimic::record::record(options(gpt2_dir(), dir.file("one.txt"), dir.file("one.h5"))),
                     "one.txt: too short to split into train, validation and test");
  EXPECT_FALSE(std::filesystem::exists(dir.file("one.h5")));
}

TEST(Record, ClassificationSetRecordsTheSplitsTextsWithBothLabels) {
  TempDir dir;
  auto o = options(gpt2_dir(), "spam", dir.file("s.h5"));
  o.split = "validation";
  o.seq_len = 64;
  o.samples = 40;
  mimic::record::record(o);
  H5::H5File f(o.out, H5F_ACC_RDONLY);
  EXPECT_EQ(string_attr(f, "data"), "spam");
  EXPECT_EQ(string_attr(f, "split"), "validation");
  auto ids = read_dataset(f, "input_ids", at::kLong).reshape(-1);
  ASSERT_EQ(ids.numel(), 40 * 64);
  const auto text = mimic::text::load_tokenizer(gpt2_dir())->decode(std::vector<int64_t>(
      ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel()));
  // whole messages of the split follow each other, and the files' grouping by label is mixed up
  const auto set = mimic::data::load_classification("spam");
  int found[2] = {0, 0};
  for (const auto& ex : set.validation)
    if (ex.text.size() >= 80 && text.find(ex.text.substr(0, 80)) != std::string::npos) ++found[ex.label];
  EXPECT_GE(found[0] + found[1], 3);
  EXPECT_GE(found[0], 1);
  EXPECT_GE(found[1], 1);
  // the training split is another stream
  auto train = options(gpt2_dir(), "spam", dir.file("t.h5"));
  train.seq_len = 64;
  train.samples = 1;
  mimic::record::record(train);
  EXPECT_NE(string_attr(H5::H5File(train.out, H5F_ACC_RDONLY), "data_digest"), string_attr(f, "data_digest"));
  // a JSON-lines set of one's own is recorded the same way: its texts, not its braces and keys (it was read as prose,
  // then refused as such: the probes of 2026-12-01)
  std::string lines;
  for (int i = 0; i < 60; ++i)
    lines += "{\"text\": \"message number " + std::to_string(i) + " about the weather\", \"label\": \"" + (i % 2 ? "a" : "b") + "\"}\n";
  mimic::test::write_bytes(dir.file("Own.JSONL"), lines);
  auto own = options(gpt2_dir(), dir.file("Own.JSONL"), dir.file("j.h5"));
  own.split = "train";
  own.seq_len = 16;
  own.samples = 2;
  mimic::record::record(own);
  auto own_ids = read_dataset(H5::H5File(own.out, H5F_ACC_RDONLY), "input_ids", at::kLong).reshape(-1);
  const auto own_text = mimic::text::load_tokenizer(gpt2_dir())->decode(
      std::vector<int64_t>(own_ids.data_ptr<int64_t>(), own_ids.data_ptr<int64_t>() + own_ids.numel()));
  EXPECT_NE(own_text.find("about the weather"), std::string::npos) << own_text;
  EXPECT_EQ(own_text.find("label"), std::string::npos) << own_text;
}

TEST(Record, Float32StorageLayersAndExtension) {
  TempDir dir;
  auto o = options(gpt2_dir(), "moby-dick", dir.file("a.h5"));
  o.split = "test";
  o.samples = 5;
  o.dtype = "f32";
  o.layers = "1";
  mimic::record::record(o);
  {
    H5::H5File f(o.out, H5F_ACC_RDONLY);
    EXPECT_FALSE(f.nameExists("layer_00"));
    EXPECT_EQ(storage_size(f, "layer_01/q"), 4u);
    EXPECT_FALSE(f.nameExists("layer_01/weights"));
    EXPECT_EQ(string_attr(f, "split"), "test");
    EXPECT_EQ(string_attr(f, "data"), "moby-dick");
  }
  // a larger --samples appends: the result equals a file recorded at once
  o.samples = 11;
  auto r = mimic::record::record(o);
  EXPECT_EQ(r.resumed_from, 5);
  EXPECT_EQ(r.recorded, 6);
  auto once = o;
  once.out = dir.file("b.h5");
  once.batch_size = 4;  // batches do not change the content
  mimic::record::record(once);
  H5::H5File a(o.out, H5F_ACC_RDONLY), b(once.out, H5F_ACC_RDONLY);
  for (const char* n : {"input_ids", "layer_01/q", "layer_01/k", "layer_01/v", "layer_01/o"})
    EXPECT_TRUE(torch::allclose(read_dataset(a, n), read_dataset(b, n), 1e-5, 1e-6)) << n;
  // fewer samples than the file holds is refused
  a.close();
  b.close();
  o.samples = 3;
  EXPECT_MIMIC_ERROR(mimic::record::record(o), "already holds 11 samples");
}

// A recall task's record extends too: its stream is its first --samples examples, each the same whatever their number
// (the token count of that stream was a setting, so 2 then 4 samples was "recorded with other settings": the eighth
// probe of 2026-11-29); the extended file equals one recorded at once.
TEST(Record, ARecallTaskRecordExtendsToMoreSamplesAsOneRecordedAtOnce) {
  TempDir dir;
  auto o = options(gpt2_dir(), "mqar:vocab=64,seq_len=16,pairs=2", dir.file("a.h5"));
  o.seq_len = 16;
  o.samples = 2;
  mimic::record::record(o);
  o.samples = 5;
  auto r = mimic::record::record(o);
  EXPECT_EQ(r.resumed_from, 2);
  EXPECT_EQ(r.recorded, 3);
  auto once = o;
  once.out = dir.file("b.h5");
  mimic::record::record(once);
  {
    H5::H5File a(o.out, H5F_ACC_RDONLY), b(once.out, H5F_ACC_RDONLY);
    EXPECT_TRUE(torch::equal(read_dataset(a, "input_ids"), read_dataset(b, "input_ids")));
    EXPECT_TRUE(torch::allclose(read_dataset(a, "layer_01/q"), read_dataset(b, "layer_01/q"), 1e-5, 1e-6));
  }
  // another task is another record
  auto other = o;
  other.data = "mqar:vocab=64,seq_len=16,pairs=3";
  EXPECT_MIMIC_ERROR(mimic::record::record(other), "other settings");
}

// Extending a file with another --gzip (the probe of 2026-11-27: level 4, then 0, wrote raw chunks into deflated
// datasets and every later read failed, exit 0): the appended chunks keep the file's own level, either way round, and
// the result reads back as the file recorded at once.
TEST(Record, ExtendingAFileWithAnotherGzipLevelKeepsTheFilesOwnLevel) {
  for (const auto& [first, then] : std::vector<std::pair<int, int>>{{4, 0}, {0, 4}}) {
    TempDir dir;
    auto o = options(gpt2_dir(), "moby-dick", dir.file("a.h5"));
    o.samples = 3;
    o.layers = "1";
    o.compression = first;
    EXPECT_EQ(mimic::record::record(o).gzip, first);
    o.samples = 6;
    o.compression = then;
    const auto r = mimic::record::record(o);
    EXPECT_EQ(r.resumed_from, 3);
    EXPECT_EQ(r.gzip, first) << "the appended chunks took --gzip " << then;
    auto once = o;
    once.out = dir.file("b.h5");
    mimic::record::record(once);
    mimic::record::RecordReader a(o.out), b(once.out);
    ASSERT_EQ(a.samples(), 6);
    EXPECT_TRUE(torch::equal(a.attention_mask(0, 6), b.attention_mask(0, 6)));
    EXPECT_TRUE(torch::equal(a.input_ids(0, 6), b.input_ids(0, 6)));
    EXPECT_TRUE(torch::allclose(a.read(1, "q", 0, 6), b.read(1, "q", 0, 6), 1e-5, 1e-6)) << first << " then " << then;
  }
}

TEST(Record, MismatchedSettingsAndDamagedFilesAreRefused) {
  TempDir dir;
  mimic::test::write_bytes(dir.file("t.txt"), mimic::test::text_lines(kText, 20));
  auto o = options(gpt2_dir(), dir.file("t.txt"), dir.file("r.h5"));
  o.samples = 2;
  mimic::record::record(o);
  auto with = [&](auto change) {
    auto x = o;
    x.samples = 4;
    change(x);
    return x;
  };
  EXPECT_MIMIC_ERROR(mimic::record::record(with([](auto& x) { x.seq_len = 8; })), "seq_len is 16 in the file, 8 for this run");
  EXPECT_MIMIC_ERROR(mimic::record::record(with([](auto& x) { x.layers = "0"; })), "layers is [0,1] in the file, [0] for this run");
  EXPECT_MIMIC_ERROR(mimic::record::record(with([](auto& x) { x.dtype = "f32"; })), "dtype");
  EXPECT_MIMIC_ERROR(mimic::record::record(with([](auto& x) { x.weights_samples = 1; })), "weights_samples");
  EXPECT_MIMIC_ERROR(mimic::record::record(with([&](auto& x) { x.model_dir = bert_dir(); })), "model_type");
  EXPECT_MIMIC_ERROR(mimic::record::record(with([&](auto& x) { x.data = "moby-dick"; })), "data is");
  // the same architecture with other weights
  {
    auto m = mimic::models::load_model(gpt2_dir());
    torch::NoGradGuard ng;
    m->module().parameters()[0].add_(1.0f);
    m->save(dir.file("other"));
  }
  EXPECT_MIMIC_ERROR(mimic::record::record(with([&](auto& x) { x.model_dir = dir.file("other"); })), "model_digest");
  // the same settings still resume, --fresh starts over
  EXPECT_EQ(mimic::record::record(with([](auto&) {})).resumed_from, 2);
  auto fresh = with([&](auto& x) {
    x.fresh = true;
    x.seq_len = 8;
  });
  EXPECT_EQ(mimic::record::record(fresh).resumed_from, 0);
  // not HDF5, not a record, damaged
  mimic::test::write_bytes(dir.file("junk.h5"), "not hdf5 at all");
  EXPECT_MIMIC_ERROR(mimic::record::record(with([&](auto& x) { x.out = dir.file("junk.h5"); })), "is not an HDF5 file");
  { H5::H5File(dir.file("other.h5"), H5F_ACC_TRUNC).createGroup("x"); }
  const auto other = mimic::test::read_bytes(dir.file("other.h5"));
  EXPECT_MIMIC_ERROR(mimic::record::record(with([&](auto& x) { x.out = dir.file("other.h5"); })), "not a mimic record file");
  // neither is opened for writing: an empty file became an HDF5 stub before it was refused (the sixth probe)
  EXPECT_EQ(mimic::test::read_bytes(dir.file("other.h5")), other);
  mimic::test::write_bytes(dir.file("empty.h5"), "");
  EXPECT_MIMIC_ERROR(mimic::record::record(with([&](auto& x) { x.out = dir.file("empty.h5"); })), "is not an HDF5 file");
  EXPECT_EQ(std::filesystem::file_size(dir.file("empty.h5")), 0u);
  auto bytes = mimic::test::read_bytes(o.out);
  mimic::test::write_bytes(dir.file("cut.h5"), bytes.substr(0, bytes.size() / 2));
  // damaged: deleting it is the way out (--fresh replaces only what it can read as a record, and says so)
  EXPECT_MIMIC_ERROR(mimic::record::record(with([&](auto& x) { x.out = dir.file("cut.h5"); })), "is damaged and cannot be resumed");
  EXPECT_MIMIC_ERROR(mimic::record::record(with([&](auto& x) { x.out = dir.file("cut.h5"); })), "delete it to record again");
  EXPECT_MIMIC_ERROR(mimic::record::RecordReader(dir.file("junk.h5")), "cannot open as HDF5");
  // a converted model's record says so: its outputs are its attention's, not a softmax teacher's (it passed as one:
  // helper-57's probe of 2026-12-04); a softmax model's says nothing
  {
    auto m = mimic::models::load_model(gpt2_dir());
    const auto s = m->summary();
    m->set_attention_kernel(1, mimic::attention::kernel_from_spec("linear", s.n_head, s.head_dim));
    m->save(dir.file("conv"));
  }
  auto c = o;
  c.model_dir = dir.file("conv");
  c.out = dir.file("conv.h5");
  const auto converted = mimic::record::record(c).converted_attention;
  EXPECT_EQ(converted, mimic::models::attention_summary(*mimic::models::load_model(dir.file("conv"))));
  EXPECT_NE(converted.find("linear"), std::string::npos) << converted;
  auto plain = o;
  plain.out = dir.file("plain.h5");
  EXPECT_EQ(mimic::record::record(plain).converted_attention, "");
  EXPECT_MIMIC_ERROR(mimic::parse_layers("0,7", 2), "layer 7 does not exist");
  EXPECT_MIMIC_ERROR(mimic::parse_layers("a", 2), "not a layer number");
  EXPECT_EQ(mimic::parse_layers("1,0-1", 3), (std::vector<int64_t>{0, 1}));
}

// A record whose attributes disagree with its datasets (or with sanity) is refused when it is opened, naming the
// attribute or dataset: never a crash or an unbounded allocation in distill or report later (issue 20's probe
// found a SIGSEGV for a rank-0 q and for layers = [], and gigabytes for n_head 1e9).
TEST(Record, AttributesThatDisagreeWithTheDatasetsAreRefusedWhenTheRecordIsOpened) {
  TempDir dir;
  mimic::test::write_bytes(dir.file("t.txt"), mimic::test::text_lines(kText, 20));
  auto o = options(gpt2_dir(), dir.file("t.txt"), dir.file("r.h5"));
  o.samples = 2;
  mimic::record::record(o);
  EXPECT_NO_THROW(mimic::record::RecordReader{o.out});
  const auto good = mimic::test::read_bytes(o.out);
  // damage(F): a copy of the good record changed by F, opened
  auto damaged = [&](const std::function<void(H5::H5File&)>& change) {
    mimic::test::write_bytes(dir.file("d.h5"), good);
    {
      H5::H5File f(dir.file("d.h5"), H5F_ACC_RDWR);
      change(f);
    }
    return mimic::record::RecordReader(dir.file("d.h5"));
  };
  auto set = [](const char* name, const nlohmann::json& v) {
    return [=](H5::H5File& f) {
      f.removeAttr(name);
      mimic::record::write_attr(f, name, v);
    };
  };
  EXPECT_MIMIC_ERROR(damaged(set("layers", nlohmann::json::array())), "lists no layers");
  EXPECT_MIMIC_ERROR(damaged(set("layers", {1, 1})), "layer 1 is listed twice");
  EXPECT_MIMIC_ERROR(damaged(set("n_head", 1000000000)), "n_head 1000000000 is out of range");
  EXPECT_MIMIC_ERROR(damaged(set("n_head", 4)), "dataset layer_00/q has shape");
  EXPECT_MIMIC_ERROR(damaged(set("samples_done", 10000000)), "dataset input_ids has shape");
  EXPECT_MIMIC_ERROR(damaged(set("seq_len", 0)), "seq_len 0 is out of range");
  EXPECT_MIMIC_ERROR(damaged([](H5::H5File& f) {
                       f.unlink("layer_00/q");
                       f.openGroup("layer_00").createDataSet("q", H5::PredType::NATIVE_FLOAT, H5::DataSpace(H5S_SCALAR));
                     }),
                     "dataset layer_00/q has shape []");
  EXPECT_MIMIC_ERROR(damaged([](H5::H5File& f) { f.unlink("layer_01/v"); }), "dataset layer_01/v is missing");
  // values formats.md bounds, read without a word until helper-98's probe (2026-12-06): report wrote NaN metrics with
  // exit 0 from a NaN scale, and a causal of 2 or an n_layer of 0 beside its layer groups passed
  EXPECT_MIMIC_ERROR(damaged(set("causal", 2)), "root attribute 'causal' must be 0 or 1, got 2");
  EXPECT_MIMIC_ERROR(damaged(set("n_layer", 0)), "root attribute 'n_layer' 0 is out of range [1, 100000]");
  EXPECT_MIMIC_ERROR(damaged(set("n_layer", 1)), "root attribute 'layers' names layer 1, beyond the teacher's n_layer 1");
  for (const double bad : {std::nan(""), 0.0, -0.5}) {
    EXPECT_MIMIC_ERROR(damaged([=](H5::H5File& f) {
                         auto g = f.openGroup("layer_01");
                         g.removeAttr("scale");
                         mimic::record::write_attr(g, "scale", bad);
                       }),
                       "attribute 'scale' of layer_01 must be a positive number");
  }
  // rows claimed but never written: every dataset extended to 10^8 samples, samples_done raised, no chunk written (a
  // 1 MB file read as HDF5's zeros by report, and distill asked for 1.1 TiB)
  EXPECT_MIMIC_ERROR(damaged([](H5::H5File& f) {
                       const hsize_t n = 100000000;
                       std::vector<std::string> names = {"input_ids", "attention_mask"};
                       for (const char* l : {"layer_00", "layer_01"})
                         for (const char* x : {"q", "k", "v", "o"}) names.push_back(std::string(l) + "/" + x);
                       for (const auto& name : names) {
                         auto ds = f.openDataSet(name);
                         auto d = mimic::record::dims_of(ds);
                         d[0] = n;
                         ds.extend(d.data());
                       }
                       f.removeAttr("samples_done");
                       mimic::record::write_attr(f, "samples_done", static_cast<int64_t>(n));
                     }),
                     "dataset input_ids holds data for 2 of the 100000000 chunks its 100000000 rows need: a damaged record");
  // every dataset is checked, not the first alone: a third sample written to input_ids and attention_mask only
  EXPECT_MIMIC_ERROR(damaged([](H5::H5File& f) {
                       for (const char* l : {"layer_00", "layer_01"})
                         for (const char* x : {"q", "k", "v", "o"}) {
                           auto ds = f.openDataSet(std::string(l) + "/" + x);
                           auto d = mimic::record::dims_of(ds);
                           d[0] = 3;
                           ds.extend(d.data());
                         }
                       for (const auto& [name, type] : std::vector<std::pair<std::string, H5::PredType>>{
                                {"input_ids", H5::PredType::NATIVE_INT32}, {"attention_mask", H5::PredType::NATIVE_UINT8}}) {
                         auto ds = f.openDataSet(name);
                         auto d = mimic::record::dims_of(ds);
                         std::vector<int32_t> row(d[1], 1);
                         std::vector<uint8_t> mask_row(d[1], 1);
                         d[0] = 3;
                         ds.extend(d.data());
                         H5::DataSpace file_space = ds.getSpace();
                         const hsize_t start[2] = {2, 0}, count[2] = {1, d[1]};
                         file_space.selectHyperslab(H5S_SELECT_SET, count, start);
                         H5::DataSpace mem(2, count);
                         if (name == "input_ids")
                           ds.write(row.data(), type, mem, file_space);
                         else
                           ds.write(mask_row.data(), type, mem, file_space);
                       }
                       f.removeAttr("samples_done");
                       mimic::record::write_attr(f, "samples_done", int64_t{3});
                     }),
                     "dataset layer_00/q holds data for 2 of the 3 chunks its 3 rows need");
  // the storage types formats.md gives: an int32 k or float input_ids was read as if it were f16 and int32 (helper-71)
  auto replaced = [&](const std::string& name, const H5::PredType& type) {
    return [=](H5::H5File& f) {
      const auto dims = mimic::record::dims_of(f.openDataSet(name));
      f.unlink(name);
      f.createDataSet(name, type, H5::DataSpace(static_cast<int>(dims.size()), dims.data()));
    };
  };
  EXPECT_MIMIC_ERROR(damaged(replaced("layer_01/k", H5::PredType::NATIVE_INT32)),
                     "dataset layer_01/k is stored as integer of 4 bytes, but the record's attributes say f16");
  EXPECT_MIMIC_ERROR(damaged(replaced("input_ids", H5::PredType::NATIVE_FLOAT)), "dataset input_ids is stored as float of 4 bytes, but the "
                                                                                 "record's attributes say int32");
  EXPECT_MIMIC_ERROR(damaged(set("dtype", "f64")), "root attribute 'dtype' must be \"f16\" or \"f32\", got \"f64\"");
  // a value that is not finite is damage: one NaN in a q blanked a head of report's table with exit 0 (helper-71)
  auto nan_in = [&](int64_t sample) {
    return [=](H5::H5File& f) {
      auto ds = f.openDataSet("layer_00/q");
      auto q = mimic::record::read_rows(ds, 0, 2, at::kHalf, mimic::record::half_type());
      q[sample][1][3][0] = std::numeric_limits<float>::quiet_NaN();
      H5::DataSpace space = ds.getSpace();
      ds.write(q.data_ptr(), mimic::record::half_type(), space, space);
    };
  };
  auto damaged_nan = damaged(nan_in(1));
  EXPECT_NO_THROW(damaged_nan.read(0, "q", 0, 1));  // sample 0 is whole
  EXPECT_MIMIC_ERROR(damaged_nan.read(0, "q", 0, 2), "d.h5: layer_00/q holds a value that is not finite (NaN or infinite) in sample 1: the "
                                                     "record is damaged or the teacher's values exceed f16's 65504 (record it again, with --dtype f32)");
  EXPECT_NO_THROW(damaged_nan.read(0, "k", 0, 2));
}

// f16 holds values up to 65504: a teacher's larger q is refused before its batch is written, naming the way out (such
// a value was stored as infinity, which a reader now refuses as damage), and the samples before it stay recorded.
TEST(Record, AValueBeyondF16sRangeIsRefusedBeforeItsBatchIsWritten) {
  TempDir dir;
  mimic::record::RecordOptions o;
  o.out = dir.file("w.h5");
  o.dtype = "f16";
  mimic::record::RecordLayout layout;
  layout.settings = {{"format", "mimic-record-1"}};
  layout.target = 4;
  layout.seq_len = 3;
  layout.n_head = 1;
  layout.head_dim = 2;
  layout.layers = {0};
  layout.scales = {0.5};
  mimic::record::RecordWriter w(o, layout, [](int64_t) { return at::Tensor(); });
  mimic::attention::AttentionCapture c;
  c.q = c.k = c.v = c.o = torch::ones({2, 1, 3, 2});
  const auto ids = torch::zeros({2, 3}, torch::kLong);
  const auto mask = torch::ones({2, 3}, torch::kBool);
  w.write_batch(0, ids, mask, {c});
  c.q = c.q.clone();
  c.q[1][0][2][1] = 1e5;
  EXPECT_MIMIC_ERROR(w.write_batch(2, ids, mask, {c}), "layer 0's q in sample 3 exceeds f16's range (65504): record with --dtype f32");
  c.q[1][0][2][1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_MIMIC_ERROR(w.write_batch(2, ids, mask, {c}), "layer 0's q in sample 3 is not finite (NaN or infinite) in the teacher's forward");
  w.close();
  EXPECT_EQ(int_attr(H5::H5File(o.out, H5F_ACC_RDONLY), "samples_done"), 2);
}

// Found by fuzzing records (bench/fuzz): a root attribute holding an array of strings, or a string without a value, made
// HDF5 write several pointers into one (a crash in free), and a float where an integer belongs was converted to int64
// (undefined for 1e300). Both are refused when the record is opened, naming the attribute.
TEST(Record, StringArraysAndFloatCountsInTheRootAttributesAreRefused) {
  TempDir dir;
  mimic::test::write_bytes(dir.file("t.txt"), mimic::test::text_lines(kText, 20));
  auto o = options(gpt2_dir(), dir.file("t.txt"), dir.file("r.h5"));
  o.samples = 1;
  mimic::record::record(o);
  const auto good = mimic::test::read_bytes(o.out);
  auto damaged = [&](const std::function<void(H5::H5File&)>& change) {
    mimic::test::write_bytes(dir.file("d.h5"), good);
    {
      H5::H5File f(dir.file("d.h5"), H5F_ACC_RDWR);
      change(f);
    }
    return mimic::record::RecordReader(dir.file("d.h5"));
  };
  const H5::StrType vstr(H5::PredType::C_S1, H5T_VARIABLE);
  auto strings = [&](const char* name) {
    return [=](H5::H5File& f) {
      f.removeAttr(name);
      const char* values[3] = {"a", "bb", "ccc"};
      hsize_t n = 3;
      f.createAttribute(name, vstr, H5::DataSpace(1, &n)).write(vstr, values);
    };
  };
  EXPECT_MIMIC_ERROR(damaged(strings("format")), "is not a mimic record file");
  EXPECT_NO_THROW(damaged(strings("source")));  // an optional string: unreadable means unknown
  EXPECT_MIMIC_ERROR(damaged([&](H5::H5File& f) {
                       f.removeAttr("format");
                       f.createAttribute("format", vstr, H5::DataSpace(H5S_NULL));
                     }),
                     "is not a mimic record file");
  auto set = [](const char* name, const nlohmann::json& v) {
    return [=](H5::H5File& f) {
      f.removeAttr(name);
      mimic::record::write_attr(f, name, v);
    };
  };
  EXPECT_MIMIC_ERROR(damaged(set("samples_done", 1e300)), "root attribute 'samples_done' must be an integer, got 1e+300");
  EXPECT_MIMIC_ERROR(damaged(set("weights_samples", "all")), "root attribute 'weights_samples' must be an integer, got \"all\"");
  // every attribute is read checked, by name, not through nlohmann's conversions (whose text named no attribute)
  EXPECT_MIMIC_ERROR(damaged(set("layers", "0,1")), "root attribute 'layers' must be a list of layer indices (integers), got \"0,1\"");
  EXPECT_MIMIC_ERROR(damaged(set("layers", 1.5)), "root attribute 'layers' must be a list of layer indices (integers), got 1.5");
  EXPECT_MIMIC_ERROR(damaged([](H5::H5File& f) { f.removeAttr("layers"); }), "root attribute 'layers' must be a list of layer indices (integers), got absent");
  EXPECT_MIMIC_ERROR(damaged(set("layers", std::vector<int64_t>{0, 7})), "root attribute 'layers' names layer 7, beyond the teacher's n_layer 2");
  EXPECT_MIMIC_ERROR(damaged([](H5::H5File& f) { f.unlink("layer_01"); }), "root attribute 'layers' names layer 1 but group layer_01 is missing");
  EXPECT_MIMIC_ERROR(damaged([](H5::H5File& f) {
                       auto g = f.openGroup("layer_00");
                       g.removeAttr("scale");
                       mimic::record::write_attr(g, "scale", "big");
                     }),
                     "attribute 'scale' of layer_00 must be a positive number (the teacher's 1/sqrt(head_dim) as a rule), got \"big\"");
}

// Through the CLI: a run killed with SIGKILL at an arbitrary moment, started again with the same command,
// ends with the same datasets as an uninterrupted run.
// HDF5's message when a write finds the disk full, as record got it on a 512 kB tmpfs (2026-11-27): several lines,
// a pointer, the bytes "actually written" as 2^64 − 1. mimic says it in one line, naming the full disk; another
// system error is named as the system names it; HDF5's own messages pass through on one line.
TEST(Record, HdfErrorsBecomeOneLineAndAFullDiskIsNamed) {
  const std::string enospc =
      "file write failed: time = Fri Nov 27 01:18:48 2026\n, filename = '/tmp/tiny/r.h5', file descriptor = 4, errno = 28, error "
      "message = 'No space left on device', buf = 0x560ffc678c80, total write size = 1489, bytes this sub-write = 1489, bytes "
      "actually written = 18446744073709551615, offset = 0";
  EXPECT_EQ(mimic::record::h5_error_words(enospc, "cannot write a chunk"), "the disk is full (No space left on device) (cannot write a chunk)");
  const std::string eio = "file write failed: time = x\n, filename = 'f', file descriptor = 4, errno = 5, error message = 'Input/output error', buf = 0x1";
  EXPECT_EQ(mimic::record::h5_error_words(eio, ""), "Input/output error");
  EXPECT_EQ(mimic::record::h5_error_words("unable to open file\n  (truncated)", "H5File open"), "unable to open file (truncated) (H5File open)");
  EXPECT_EQ(mimic::record::h5_error_words("truncated file: eof = 3000, sblock->base_addr = 0, stored_eof = 9000", "H5File open"),
            "the file is cut short (a copy or a write that did not finish?) (H5File open)");
  EXPECT_EQ(mimic::record::h5_error_words("", "H5Dwrite failed"), "H5Dwrite failed");
}

// --device cpu (and auto, the default, on a machine without a GPU) records what a run without the option records.
TEST(Record, DeviceCpuRecordsWhatTheDefaultRecords) {
  // where a GPU is visible the default computes there, and its record differs from the CPU's in the last bits
  // (docs/gpu.md): nothing to compare bit for bit
  if (torch::cuda::is_available()) GTEST_SKIP() << "a GPU is visible: the default records on it";
  TempDir dir;
  const std::string args = "record --model " + gpt2_dir() + " --data moby-dick --samples 24 --seq-len 32 --batch-size 8 --weights-samples 4 "
                           "--threads 1 --json --out ";
  auto plain = mimic::test::mimic_cli(args + dir.file("a.h5"));
  ASSERT_EQ(plain.code, 0) << plain.err;
  auto cpu = mimic::test::mimic_cli(args + dir.file("b.h5") + " --device cpu");
  ASSERT_EQ(cpu.code, 0) << cpu.err;
  std::string why;
  EXPECT_TRUE(equal_files(dir.file("a.h5"), dir.file("b.h5"), &why)) << why;
}

// A run killed between a batch's chunks and its commit, after HDF5 had written those datasets' extents and chunk
// indexes out of its cache, resumes to the same content. Its chunks lay past the end of allocation that the last
// commit had recorded; cutting the extra rows freed that space as though it were inside the file, and the resumed
// run's next chunk, placed there, was refused: "writing b.h5 failed: addr overflow, addr = 2044357, size=135,
// eoa=2044357 (cannot write a chunk)" (CI of 2026-12-04; about 1 resume in 25 in a kill soak).
TEST(Record, AKilledRunWhoseLastBatchReachedTheFileResumesToTheSameContent) {
  TempDir dir;
  auto o = options(gpt2_dir(), "moby-dick", dir.file("full.h5"));
  o.samples = 30;
  o.batch_size = 4;
  o.weights_samples = 6;
  auto full = o;
  mimic::record::record(full);
  // a copy of the file as the kill found it, in the middle of the batch of samples 12-15
  auto killed = o;
  killed.out = dir.file("run.h5");
  killed.testing_before_commit = [&](int64_t first) {
    if (first == 12) std::filesystem::copy_file(killed.out, dir.file("killed.h5"));
  };
  mimic::record::record(killed);
  ASSERT_TRUE(std::filesystem::exists(dir.file("killed.h5")));
  EXPECT_EQ(samples_done(dir.file("killed.h5")), 12);
  EXPECT_NO_THROW(mimic::record::RecordReader{dir.file("killed.h5")});  // its datasets grown past samples_done: readable
  auto resume = o;
  resume.out = dir.file("killed.h5");
  mimic::record::RecordResult r;
  ASSERT_NO_THROW(r = mimic::record::record(resume));
  EXPECT_EQ(r.resumed_from, 12);
  EXPECT_EQ(r.samples, 30);
  std::string why;
  EXPECT_TRUE(equal_files(dir.file("full.h5"), dir.file("killed.h5"), &why)) << why;
  EXPECT_TRUE(equal_files(dir.file("full.h5"), dir.file("run.h5"), &why)) << why;
}

TEST(Record, CliResumesAfterKillToTheSameContent) {
  TempDir dir;
  const std::string args = "record --model " + gpt2_dir() +
                           " --data moby-dick --samples 2000 --seq-len 64 --batch-size 4 --weights-samples 6 --threads 1 --json --out ";
  auto full = mimic::test::mimic_cli(args + dir.file("a.h5"));
  ASSERT_EQ(full.code, 0) << full.err;
  auto j = nlohmann::json::parse(full.out);
  EXPECT_EQ(j["samples"], 2000);
  EXPECT_EQ(j["tokens"], 2000 * 64);
  for (const char* key : {"seconds", "tokens_per_second", "forward_tokens_per_second", "file_bytes"}) EXPECT_GT(j[key].get<double>(), 0) << key;

  // Kill the second run once its progress line announces 200 samples or more, then rerun the same command. A batch
  // is committed to the file (samples_done flushed) before the progress counts it, so the file holds at least 200
  // samples, on a fast machine or a slow one. (A fixed sleep after the file appeared did neither reliably.)
  const std::string b = dir.file("b.h5"), progress = dir.file("b.progress");
  const std::string seen = "grep -aqE \"[ ]([2-9][0-9]{2}|1[0-9]{3})/2000 sample\" " + progress;
  const std::string cmd = "MIMIC_PROGRESS=1 " + std::string(MIMIC_CLI) + " " + args + b + " >/dev/null 2>" + progress +
                          " </dev/null & pid=$!; while kill -0 $pid 2>/dev/null && ! " + seen +
                          "; do sleep 0.005; done; kill -9 $pid 2>/dev/null; wait $pid";
  std::system(("bash -c '" + cmd + "' 2>/dev/null").c_str());
  ASSERT_TRUE(std::filesystem::exists(b)) << "the run was killed before its file existed";
  int64_t done = samples_done(b);
  EXPECT_GE(done, 200) << "killed before the samples it announced";
  EXPECT_LT(done, 2000) << "the run was not interrupted";
  auto resumed = mimic::test::mimic_cli(args + b);
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  auto rj = nlohmann::json::parse(resumed.out);
  EXPECT_EQ(rj["resumed_from"], done);
  EXPECT_EQ(rj["samples"], 2000);
  std::string why;
  EXPECT_TRUE(equal_files(dir.file("a.h5"), b, &why)) << why;

  // CLI conventions: help and one-line errors
  auto help = mimic::test::mimic_cli("record --help");
  for (const char* opt : {"--model", "--data", "--out", "--samples", "--seq-len", "--layers", "--weights-samples", "--dtype", "--threads",
                          "--seed", "--json"})
    EXPECT_NE(help.out.find(opt), std::string::npos) << opt;
  auto bad = mimic::test::mimic_cli("record --model " + gpt2_dir() + " --data moby-dick --seq-len 32 --out " + b);
  EXPECT_NE(bad.code, 0);
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
  EXPECT_NE(bad.err.find("seq_len is 64 in the file, 32 for this run"), std::string::npos) << bad.err;
}

TEST(Record, H5pyReadsTheFile) {
  if (!mimic::test::python_has("h5py")) GTEST_SKIP() << "python3 with h5py not available";
  TempDir dir;
  mimic::test::write_bytes(dir.file("t.txt"), mimic::test::text_lines(kText, 20));
  auto o = options(gpt2_dir(), dir.file("t.txt"), dir.file("g.h5"));
  o.weights_samples = 1;
  auto r = mimic::record::record(o);
  mimic::test::write_bytes(dir.file("check.py"), R"(
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
a = f.attrs
assert a["format"] == "mimic-record-1" and a["model_type"] == "gpt2", dict(a)
n, t, h, d = int(a["samples_done"]), int(a["seq_len"]), int(a["n_head"]), int(a["head_dim"])
assert n == int(sys.argv[2])
assert f["input_ids"].dtype == np.int32 and f["input_ids"].shape == (n, t)
assert f["attention_mask"].dtype == np.uint8
for name in ("q", "k", "v", "o"):
    ds = f["layer_01"][name]
    assert ds.dtype == np.float16, ds.dtype
    assert ds.shape == (n, h, t, d) and ds.chunks == (1, h, t, d) and ds.compression == "gzip" and ds.shuffle
w = f["layer_00/weights"][:]
assert w.dtype == np.float16 and w.shape == (1, h, t, t)
assert abs(w.astype(np.float32).sum(-1) - 1).max() < 1e-2
q, k, v, o = (f["layer_00"][x][:].astype(np.float32) for x in "qkvo")
s = q @ k.transpose(0, 1, 3, 2) * f["layer_00"].attrs["scale"]
s = np.where(np.tril(np.ones((t, t), bool)), s, -np.inf)
p = np.exp(s - s.max(-1, keepdims=True)); p /= p.sum(-1, keepdims=True)
m = f["attention_mask"][:].astype(bool)[:, None, :, None]
assert np.abs(np.where(m, p @ v - o, 0)).max() < 5e-3
print("ok")
)");
  mimic::test::write_bytes(dir.file("run.sh"), "/usr/bin/python3 " + dir.file("check.py") + " " + o.out + " " + std::to_string(r.samples) +
                                                   " >" + dir.file("py.out") + " 2>&1");
  int rc = std::system(("bash " + dir.file("run.sh")).c_str());
  EXPECT_EQ(rc, 0) << mimic::test::read_bytes(dir.file("py.out"));
  EXPECT_EQ(mimic::test::read_bytes(dir.file("py.out")), "ok\n");
}
