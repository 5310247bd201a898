// Sharded checkpoints (reading and writing), `mimic export` (storage type, sharding, determinism) and
// finetuning with frozen embeddings.
#include <torch/torch.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

#include "mimic/io/safetensors.h"
#include "mimic/io/tensor_store.h"
#include "mimic/models/model.h"
#include "test_util.h"

using mimic::io::TensorStore;
using mimic::test::mimic_cli;
using mimic::test::read_bytes;
using mimic::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::string fixture_model(const std::string& name) { return mimic::test::fixture("models/" + name); }

nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(read_bytes(path)); }
void write_json(const std::string& path, const nlohmann::json& j) { mimic::test::write_bytes(path, j.dump(2)); }

// The same tensors with the same dtypes and the same bytes.
void expect_same_tensors(const TensorStore& a, const TensorStore& b, const std::function<bool(const std::string&)>& which = {}) {
  std::set<std::string> na, nb;
  for (const auto& n : a.names())
    if (!which || which(n)) na.insert(n);
  for (const auto& n : b.names())
    if (!which || which(n)) nb.insert(n);
  ASSERT_EQ(na, nb);
  for (const auto& n : na) {
    EXPECT_EQ(a.info(n).dtype, b.info(n).dtype) << n;
    auto ta = a.load(n), tb = b.load(n);
    ASSERT_EQ(ta.sizes(), tb.sizes()) << n;
    EXPECT_EQ(0, std::memcmp(ta.data_ptr(), tb.data_ptr(), ta.numel() * ta.element_size())) << n;
  }
}

mimic::models::ForwardOutputs run(mimic::models::Model& m, const at::Tensor& ids) {
  torch::NoGradGuard ng;
  return m.forward({ids, {}, {}, {}});
}

// A failing command prints exactly one line, "mimic: error: ...", and exits non-zero.
void expect_one_line_error(const mimic::test::RunResult& r, const std::string& needle) {
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("mimic: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

const char* kShard1 = "model-00001-of-00002.safetensors";
const char* kShard2 = "model-00002-of-00002.safetensors";

}  // namespace

TEST(ShardedCheckpoint, RoundTripIsLosslessAndTheIndexDescribesTheShards) {
  for (const char* name : {"bert-mlm", "bert-cls", "gpt2-prefixed"}) {
    SCOPED_TRACE(name);
    TempDir dir;
    auto model = mimic::models::load_model(fixture_model(name));
    mimic::models::SaveOptions so;
    so.shards = {mimic::models::embeddings_group()};
    model->save(dir.file("m"), so);
    EXPECT_FALSE(fs::exists(dir.file("m/model.safetensors")));
    auto index = read_json(dir.file("m/model.safetensors.index.json"));
    auto original = TensorStore::open_dir(fixture_model(name));
    auto sharded = TensorStore::open_dir(dir.file("m"));
    EXPECT_TRUE(sharded.sharded());
    ASSERT_EQ(sharded.files().size(), 2u);
    EXPECT_EQ(fs::path(sharded.files()[0]).filename(), kShard1);
    EXPECT_EQ(fs::path(sharded.files()[1]).filename(), kShard2);
    // the first shard holds exactly the embeddings, the second the rest; the index says so
    auto first = mimic::io::SafeTensorsFile::open(dir.file("m/") + kShard1);
    std::set<std::string> embeddings;
    for (const auto& n : original.names())
      if (mimic::models::is_embedding(n)) embeddings.insert(n);
    EXPECT_FALSE(embeddings.empty());
    auto first_names = first.names();
    EXPECT_EQ(std::set<std::string>(first_names.begin(), first_names.end()), embeddings);
    EXPECT_EQ(first.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
    uint64_t total = 0;
    ASSERT_EQ(index["weight_map"].size(), original.names().size());
    for (const auto& n : original.names()) {
      EXPECT_EQ(index["weight_map"][n], embeddings.count(n) ? kShard1 : kShard2) << n;
      total += original.info(n).end - original.info(n).begin;
    }
    EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), total);
    // same tensors, same bytes; the model reads back with the same outputs
    expect_same_tensors(original, sharded);
    auto again = mimic::models::load_model(dir.file("m"));
    auto ids = torch::randint(1, 97, {2, 9}, torch::kLong);
    EXPECT_TRUE(torch::equal(run(*model, ids).last_hidden_state, run(*again, ids).last_hidden_state));
    // also through the index path and `mimic info`
    EXPECT_EQ(mimic::models::load_model(dir.file("m/model.safetensors.index.json"))->summary().parameters, model->summary().parameters);
    if (std::string(name) == "bert-mlm") {
      auto info = mimic_cli("info " + dir.file("m") + " --json");
      ASSERT_EQ(info.code, 0) << info.err;
      EXPECT_EQ(nlohmann::json::parse(info.out)["weights"]["shards"].size(), 2u);
      EXPECT_EQ(nlohmann::json::parse(info.out)["weights"]["tensors"], original.names().size());
      // the text names the shards, and each tensor's with --tensors (the JSON alone did: helper-80's probe)
      auto text = mimic_cli("info " + dir.file("m") + " --tensors");
      ASSERT_EQ(text.code, 0) << text.err;
      for (const char* shard : {kShard1, kShard2}) EXPECT_NE(text.out.find(std::string("  shard         ") + shard + "\n"), std::string::npos) << text.out;
      EXPECT_NE(text.out.find("bert.embeddings.word_embeddings.weight  F16 [30522,8]  " + std::string(kShard1) + "\n"), std::string::npos) << text.out;
    }
    // saving again in the other layout replaces the weights of the first
    again->save(dir.file("m"));
    EXPECT_TRUE(fs::exists(dir.file("m/model.safetensors")));
    for (const char* f : {"model.safetensors.index.json", kShard1, kShard2}) EXPECT_FALSE(fs::exists(dir.file("m/") + f)) << f;
    again->save(dir.file("m"), so);
    EXPECT_FALSE(fs::exists(dir.file("m/model.safetensors")));
    expect_same_tensors(original, TensorStore::open_dir(dir.file("m")));
  }
}

// Found by fuzzing the index (bench/fuzz): a shard name the file system refuses (longer than NAME_MAX) made the existence
// check throw std::filesystem's exception; such a shard is now missing like any other.
TEST(ShardedCheckpoint, AShardNameTheFileSystemRefusesIsAMissingShard) {
  TempDir dir;
  const std::string name(300, 'x');
  mimic::test::write_bytes(dir.file("model.safetensors.index.json"), nlohmann::json{{"weight_map", {{"a", name}}}}.dump());
  EXPECT_MIMIC_ERROR(TensorStore::open_index(dir.file("model.safetensors.index.json")), "missing shard file '" + name + "'");
}

TEST(ShardedCheckpoint, BrokenShardsNameTheProblem) {
  TempDir dir;
  mimic::models::SaveOptions so;
  so.shards = {mimic::models::embeddings_group()};
  auto model = mimic::models::load_model(fixture_model("bert-cls"));
  int k = 0;
  auto fresh = [&]() {
    auto d = dir.file("m" + std::to_string(k++));
    model->save(d, so);
    return d;
  };
  const std::string kIndex = "/model.safetensors.index.json";
  auto missing = fresh();
  fs::remove(missing + "/" + kShard2);
  EXPECT_MIMIC_ERROR(mimic::models::load_model(missing), std::string("missing shard file '") + kShard2 + "'");
  // a tensor moved to a shard that does not exist is that shard's problem, not its first shard's (which then holds it
  // unassigned): the checkpoint probe of 2026-12-01
  auto to_none = fresh();
  auto tn = read_json(to_none + kIndex);
  tn["weight_map"]["bert.embeddings.word_embeddings.weight"] = "model-00003-of-00003.safetensors";
  write_json(to_none + kIndex, tn);
  EXPECT_MIMIC_ERROR(mimic::models::load_model(to_none),
                     "missing shard file 'model-00003-of-00003.safetensors' (" + to_none + "/model-00003-of-00003.safetensors), which the "
                     "weight_map names for 'bert.embeddings.word_embeddings.weight'");
  auto absent = fresh();
  auto j = read_json(absent + kIndex);
  j["weight_map"]["bert.embeddings.extra.weight"] = kShard1;
  write_json(absent + kIndex, j);
  EXPECT_MIMIC_ERROR(mimic::models::load_model(absent),
                     std::string("tensor 'bert.embeddings.extra.weight' is listed in shard '") + kShard1 + "' but that file has no such tensor");
  auto unlisted = fresh();
  j = read_json(unlisted + kIndex);
  j["weight_map"].erase("classifier.bias");
  write_json(unlisted + kIndex, j);
  EXPECT_MIMIC_ERROR(mimic::models::load_model(unlisted), "holds tensor 'classifier.bias' which the weight_map does not assign to it");
  auto moved = fresh();  // the index says the other shard
  j = read_json(moved + kIndex);
  j["weight_map"]["classifier.bias"] = kShard1;
  write_json(moved + kIndex, j);
  EXPECT_MIMIC_ERROR(mimic::models::load_model(moved), "tensor 'classifier.bias' is listed in shard");
  auto bad_json = fresh();
  mimic::test::write_bytes(bad_json + kIndex, "{\"weight_map\": {");
  EXPECT_MIMIC_ERROR(mimic::models::load_model(bad_json), "model.safetensors.index.json: malformed JSON");
  auto no_map = fresh();
  write_json(no_map + kIndex, {{"metadata", {{"total_size", 1}}}});
  EXPECT_MIMIC_ERROR(mimic::models::load_model(no_map), "no \"weight_map\" object");
  auto escape = fresh();
  j = read_json(escape + kIndex);
  j["weight_map"]["classifier.bias"] = "../model.safetensors";
  write_json(escape + kIndex, j);
  EXPECT_MIMIC_ERROR(mimic::models::load_model(escape), "not a plain file name");
  // the checks of a single file hold across shards: a tensor gone from index and shard is missing
  auto gone = fresh();
  j = read_json(gone + kIndex);
  j["weight_map"].erase("classifier.bias");
  write_json(gone + kIndex, j);
  auto f = mimic::io::SafeTensorsFile::open(gone + "/" + kShard2);
  std::vector<std::pair<std::string, at::Tensor>> ts;
  for (const auto& n : f.names())
    if (n != "classifier.bias") ts.emplace_back(n, f.load(n));
  mimic::io::save_safetensors(gone + "/" + kShard2, ts);
  EXPECT_MIMIC_ERROR(mimic::models::load_model(gone), "missing tensor 'classifier.bias'");
  // and a command names the problem in one line
  auto r = mimic_cli("info " + missing);
  expect_one_line_error(r, kShard2);
}

TEST(Export, F16AndBf16LoadAndMatchTheF32ModelToRounding) {
  TempDir dir;
  for (const char* name : {"bert-base", "gpt2-plain"}) {  // float32 fixtures
    SCOPED_TRACE(name);
    const std::string src = fixture_model(name), out = dir.file(std::string(name) + "-f16");
    auto r = mimic_cli("export --model " + src + " --out " + out + " --dtype f16 --json");
    ASSERT_EQ(r.code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_FALSE(j["sharded"].get<bool>());
    EXPECT_EQ(j["files"][0]["file"], "model.safetensors");
    auto f16 = mimic::models::load_model(out);
    for (const auto& t : TensorStore::open_dir(out).tensors())
      if (t.dtype != mimic::io::DType::I64) EXPECT_EQ(t.dtype, mimic::io::DType::F16) << t.name;
    EXPECT_EQ(read_json(out + "/config.json")["torch_dtype"], "float16");
    // the f32 model with its weights rounded to fp16 computes exactly what the export does
    auto f32 = mimic::models::load_model(src);
    auto rounded = mimic::models::load_model(src);
    {
      torch::NoGradGuard ng;
      for (auto& p : rounded->module().parameters()) p.copy_(p.to(torch::kHalf).to(torch::kFloat));
    }
    auto ids = torch::randint(1, 97, {2, 12}, torch::kLong);
    auto a = run(*f32, ids), b = run(*f16, ids), c = run(*rounded, ids);
    EXPECT_TRUE(torch::equal(b.last_hidden_state, c.last_hidden_state));
    double err = (a.last_hidden_state - b.last_hidden_state).abs().max().item<double>();
    EXPECT_GT(err, 0.0);
    EXPECT_LT(err, 1e-2);
    auto head = [](const mimic::models::ForwardOutputs& o) { return o.logits.defined() ? o.logits : o.pooled; };
    EXPECT_TRUE(torch::equal(head(b), head(c)));
    EXPECT_TRUE(torch::allclose(head(a), head(b), 1e-2, 1e-2));
    // f32 storage: exactly the same outputs; bf16: stored as BF16, outputs to bf16 rounding
    const std::string x = dir.file(name);
    mimic::models::SaveOptions so;
    so.dtype = mimic::io::DType::F32;
    f32->save(x + "-f32", so);
    EXPECT_TRUE(torch::equal(run(*mimic::models::load_model(x + "-f32"), ids).last_hidden_state, a.last_hidden_state));
    f16->save(x + "-back-f32", so);  // f16 → f32 is exact
    EXPECT_TRUE(torch::equal(run(*mimic::models::load_model(x + "-back-f32"), ids).last_hidden_state, b.last_hidden_state));
    so.dtype = mimic::io::DType::BF16;
    so.shards = {mimic::models::embeddings_group()};
    f32->save(x + "-bf16", so);
    for (const auto& t : TensorStore::open_dir(x + "-bf16").tensors())
      if (t.dtype != mimic::io::DType::I64) EXPECT_EQ(t.dtype, mimic::io::DType::BF16) << t.name;
    EXPECT_TRUE(torch::allclose(run(*mimic::models::load_model(x + "-bf16"), ids).last_hidden_state, a.last_hidden_state, 5e-2, 5e-2));
  }
}

// A weight beyond float16's range is refused before anything is written, naming the tensor and its size and the
// types that hold it: it was stored as infinity and the export then refused on loading as a diverged run, after it
// had replaced an earlier export in the folder (helper-54's probe of 2026-12-04). bf16 holds it.
TEST(Export, AWeightThatSixteenBitStorageMakesInfiniteIsRefusedBeforeTheFolderChanges) {
  TempDir dir;
  mimic::models::SaveOptions f32;
  f32.dtype = mimic::io::DType::F32;
  auto m = mimic::models::load_model(mimic::test::model_with_tokenizer("gpt2-plain"));
  m->save(dir.file("fine"), f32);
  auto first = mimic_cli("export --model " + dir.file("fine") + " --out " + dir.file("out") + " --dtype f16 --threads 1");
  ASSERT_EQ(first.code, 0) << first.err;
  // its summary counts the elements in words, by storage type (a JSON object there read as a byte count: helper-68)
  int64_t f16_elements = 0;
  for (const auto& t : TensorStore::open_dir(dir.file("out")).tensors())
    if (t.dtype == mimic::io::DType::F16) f16_elements += t.numel();
  EXPECT_NE(first.out.find(" bytes (" + std::to_string(f16_elements) + " F16 elements"), std::string::npos) << first.out;
  const auto earlier = read_bytes(dir.file("out/model.safetensors"));
  {
    torch::NoGradGuard ng;
    m->module().named_parameters()["h.0.mlp.c_fc.bias"][3].fill_(1e6);
  }
  m->save(dir.file("big"), f32);
  auto r = mimic_cli("export --model " + dir.file("big") + " --out " + dir.file("out") + " --dtype f16 --threads 1");
  expect_one_line_error(r, "tensor 'h.0.mlp.c_fc.bias' holds a value of magnitude 1e+06 that float16 storage makes infinite (its largest "
                           "value is 65504; from 65520 on a value rounds to infinity): store the weights as bf16 or f32");
  EXPECT_EQ(read_bytes(dir.file("out/model.safetensors")), earlier);  // the earlier export as it was
  EXPECT_NO_THROW(mimic::models::load_model(dir.file("out")));
  auto b = mimic_cli("export --model " + dir.file("big") + " --out " + dir.file("out-bf16") + " --dtype bf16 --threads 1");
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(mimic::models::load_model(dir.file("out-bf16"))->module().named_parameters()["h.0.mlp.c_fc.bias"][3].item<double>(), 999424.0);
  // a model loaded as float16 keeps its type on a plain save: a value grown beyond the range is refused there too
  auto h = mimic::models::load_model(dir.file("out"));
  {
    torch::NoGradGuard ng;
    h->module().named_parameters()["h.0.mlp.c_fc.bias"][3].fill_(7e4);
  }
  EXPECT_MIMIC_ERROR(h->save(dir.file("kept")), "tensor 'h.0.mlp.c_fc.bias' holds a value that float16 storage makes infinite");
  EXPECT_FALSE(fs::exists(dir.file("kept/config.json")));
  // the limits are where rounding to nearest (ties to even) reaches infinity, not the largest values: a float16 65519
  // is stored as 65504 and was refused; bfloat16 storage was not checked, and 3.4e38 was written as infinity, the
  // model then refused on loading as diverged (helper-84's probe of 2026-12-06)
  const auto export_with = [&](double value, const std::string& dtype, const std::string& name) {
    {
      torch::NoGradGuard ng;
      m->module().named_parameters()["h.0.mlp.c_fc.bias"][3].fill_(value);
    }
    m->save(dir.file(name + "-in"), f32);
    return mimic_cli("export --model " + dir.file(name + "-in") + " --out " + dir.file(name) + " --dtype " + dtype + " --threads 1");
  };
  const auto stored = [&](const std::string& name) {
    return mimic::models::load_model(dir.file(name))->module().named_parameters()["h.0.mlp.c_fc.bias"][3].item<double>();
  };
  ASSERT_EQ(export_with(65519, "f16", "f16-65519").code, 0);
  EXPECT_EQ(stored("f16-65519"), 65504.0);
  expect_one_line_error(export_with(65520, "f16", "f16-65520"), "holds a value of magnitude 65520 that float16 storage makes infinite");
  ASSERT_EQ(export_with(3.39e38, "bf16", "bf16-fits").code, 0);
  EXPECT_EQ(stored("bf16-fits"), 3.3895313892515355e38);
  auto over = export_with(3.4e38, "bf16", "bf16-over");
  expect_one_line_error(over, "tensor 'h.0.mlp.c_fc.bias' holds a value of magnitude 3.4e+38 that bfloat16 storage makes infinite (its largest "
                              "value is 3.38953e+38; from 3.39615e+38 on a value rounds to infinity): store the weights as f32");
  EXPECT_FALSE(fs::exists(dir.file("bf16-over/config.json")));
}

// A folder whose tokenizer mimic cannot read is said to be one: info shows the tokenizer (or why none) and export
// notes that its copy has none either; it described and exported such a folder as complete, and generate then
// refused the copy (helper-54's probe of 2026-12-04).
TEST(Export, InfoShowsAModelsTokenizerOrWhyNoneAndExportNotesAFolderWithout) {
  TempDir dir;
  const std::string src = mimic::test::model_with_tokenizer("gpt2-plain");
  auto whole = nlohmann::json::parse(mimic_cli("info " + src + " --json --threads 1").out);
  EXPECT_EQ(whole["tokenizer"], nlohmann::json({{"kind", "gpt2-bpe"}, {"vocab_size", 50257}}));
  fs::create_directories(dir.file("m"));
  for (const auto& e : fs::directory_iterator(src))
    if (e.path().filename() != "vocab.json") fs::copy_file(e.path(), dir.file("m/" + e.path().filename().string()));
  auto j = nlohmann::json::parse(mimic_cli("info " + dir.file("m") + " --json --threads 1").out);
  EXPECT_TRUE(j["tokenizer"].is_null()) << j.dump();
  EXPECT_NE(j["tokenizer_problem"].get<std::string>().find("vocab.json is missing"), std::string::npos) << j.dump();
  EXPECT_NE(mimic_cli("info " + dir.file("m") + " --threads 1").out.find("\n  tokenizer     none: "), std::string::npos);
  auto r = mimic_cli("export --model " + dir.file("m") + " --out " + dir.file("x") + " --threads 1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("mimic: note: " + dir.file("m") + " has no tokenizer mimic reads ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the export has none either"), std::string::npos) << r.err;
  EXPECT_EQ(mimic_cli("export --model " + src + " --out " + dir.file("y") + " --threads 1").err.find("note"), std::string::npos);
  // convert said nothing and wrote the unreadable files as the converted model's (helper-72's probe): the same note
  // (on the prefixed fixture, whose tokenizer reads the distillation's text within its vocabulary)
  const std::string teacher = mimic::test::model_with_tokenizer("gpt2-prefixed");
  fs::create_directories(dir.file("m2"));
  for (const auto& e : fs::directory_iterator(teacher))
    if (e.path().filename() != "vocab.json") fs::copy_file(e.path(), dir.file("m2/" + e.path().filename().string()));
  const std::string maps = mimic::test::initial_gpt2_maps();  // of the same weights as m2's
  auto c = mimic_cli("convert --model " + dir.file("m2") + " --maps " + maps + " --out " + dir.file("c") + " --threads 1");
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.err.find("mimic: note: " + dir.file("m2") + " has no tokenizer mimic reads ("), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("the converted model has none either"), std::string::npos) << c.err;
  EXPECT_EQ(mimic_cli("convert --model " + teacher + " --maps " + maps + " --out " + dir.file("c2") + " --threads 1").err.find("note"), std::string::npos);
  // a sharded folder's index file names the folder: its tokenizer is the folder's (it said "a weights file alone")
  ASSERT_EQ(mimic_cli("export --model " + src + " --out " + dir.file("s") + " --shard-embeddings --threads 1").code, 0);
  auto index = nlohmann::json::parse(mimic_cli("info " + dir.file("s/model.safetensors.index.json") + " --json --threads 1").out);
  EXPECT_EQ(index["tokenizer"], whole["tokenizer"]) << index.dump();
}

// A model loaded from fp16 and then trained holds float32 values: saving it as f32 keeps them exactly (they are
// not first rounded to the type the tensors were loaded with); the default save stores the loaded types.
TEST(Export, F32SaveOfAnF16LoadedModelKeepsItsValues) {
  TempDir dir;
  mimic::models::SaveOptions f16;
  f16.dtype = mimic::io::DType::F16;
  mimic::models::load_model(fixture_model("gpt2-plain"))->save(dir.file("h"), f16);
  auto m = mimic::models::load_model(dir.file("h"));
  {
    torch::NoGradGuard ng;
    for (auto& p : m->module().parameters()) p.mul_(1 + 3e-4).add_(3e-6);  // "training": off the fp16 grid
  }
  mimic::models::SaveOptions f32;
  f32.dtype = mimic::io::DType::F32;
  m->save(dir.file("f32"), f32);
  m->save(dir.file("keep"));
  auto exact = mimic::models::load_model(dir.file("f32"));
  auto rounded = mimic::models::load_model(dir.file("keep"));
  auto want = m->module().named_parameters(), got = exact->module().named_parameters(), low = rounded->module().named_parameters();
  ASSERT_EQ(want.size(), got.size());
  int off_grid = 0;
  for (const auto& kv : want) {
    EXPECT_TRUE(torch::equal(got[kv.key()], kv.value())) << kv.key();
    EXPECT_TRUE(torch::equal(low[kv.key()], kv.value().to(torch::kHalf).to(torch::kFloat))) << kv.key();
    off_grid += !torch::equal(low[kv.key()], kv.value());
  }
  EXPECT_GT(off_grid, 10);
  for (const auto& t : TensorStore::open_dir(dir.file("keep")).tensors())
    if (t.dtype != mimic::io::DType::I64) EXPECT_EQ(t.dtype, mimic::io::DType::F16) << t.name;
}

TEST(Export, SameModelGivesByteIdenticalFilesAndErrorsAreOneLine) {
  TempDir dir;
  const std::string src = mimic::test::model_with_tokenizer("bert-mlm");
  for (const char* out : {"a", "b"}) {
    auto r = mimic_cli("export --model " + src + " --out " + dir.file(out) + " --dtype f16 --shard-embeddings --threads 1 --seed 5");
    ASSERT_EQ(r.code, 0) << r.err;
  }
  for (const char* f : {kShard1, kShard2, "model.safetensors.index.json", "config.json", "vocab.txt"})
    EXPECT_EQ(read_bytes(dir.file(std::string("a/") + f)), read_bytes(dir.file(std::string("b/") + f))) << f;
  EXPECT_EQ(read_bytes(dir.file("a/vocab.txt")), read_bytes(src + "/vocab.txt"));  // tokenizer files come along
  auto h = mimic_cli("export --help");
  EXPECT_EQ(h.code, 0);
  for (const char* opt : {"--threads", "--seed", "--json", "--dtype", "--shard-embeddings"}) EXPECT_NE(h.out.find(opt), std::string::npos) << opt;
  expect_one_line_error(mimic_cli("export --model " + src + " --out " + src), "is the input --model");
  fs::create_directories(dir.file("empty"));
  fs::copy_file(src + "/config.json", dir.file("empty/config.json"));
  expect_one_line_error(mimic_cli("export --model " + dir.file("empty") + " --out " + dir.file("c") + " --json"),
                        "no model.safetensors (nor model.safetensors.index.json)");
}

// Finetuning a classifier with --freeze-embeddings: the embeddings stay the base model's bit for bit (so a
// sharded export's embeddings shard is byte-identical to the base model's), the rest trains, the
// checkpoint holds the trainable tensors only, and a killed run resumes exactly.
TEST(FinetuneFreezeEmbeddings, EmbeddingsStayBitIdenticalAndRunsResume) {
  TempDir dir;
  mimic::test::write_word_decided_jsonl(dir.file("t.jsonl"));
  const std::string base = mimic::test::model_with_tokenizer("bert-mlm");
  const std::string args = "finetune --task cls --model " + base + " --data " + dir.file("t.jsonl") +
                           " --steps 100 --warmup 2 --lr 1e-2 --batch-size 4 --seq-len 16 --eval-every 50 --checkpoint-every 2"
                           " --threads 1 --freeze-embeddings --dtype keep --keep-last --json --out ";  // keep: the stored bytes too;
                           // --keep-last: the whole final checkpoint, compared below
  auto ft = mimic_cli(args + dir.file("a"));
  ASSERT_EQ(ft.code, 0) << ft.err;

  auto base_w = TensorStore::open_dir(base);
  auto tuned = TensorStore::open_dir(dir.file("a"));
  expect_same_tensors(base_w, tuned, mimic::models::is_embedding);
  int changed = 0;
  for (const auto& n : tuned.names())
    if (base_w.contains(n) && !mimic::models::is_embedding(n)) changed += !torch::equal(base_w.load(n), tuned.load(n));
  EXPECT_GT(changed, 10);
  // the checkpoint: parameters and AdamW moments of the trainable tensors only
  auto ck = mimic::io::SafeTensorsFile::open(dir.file("a/checkpoint.safetensors"));
  int params = 0;
  for (const auto& n : ck.names()) {
    EXPECT_EQ(n.find("embeddings."), std::string::npos) << n;
    params += n.rfind("param/", 0) == 0;
  }
  EXPECT_GT(params, 10);
  // the same command again resumes from the checkpoint (optimizer state included) and has nothing to do;
  // without --freeze-embeddings the checkpoint is refused
  auto again = mimic_cli(args + dir.file("a"));
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(nlohmann::json::parse(again.out)["resumed_from"], 100);
  std::string unfrozen = args;
  unfrozen.replace(unfrozen.find(" --freeze-embeddings"), 20, "");
  expect_one_line_error(mimic_cli(unfrozen + dir.file("a")), "other settings");

  // Killed once it announces step 10 (logged before its checkpoint; checkpoints every 2 steps: step 8 or later is on
  // disk), then restarted: the final checkpoint equals the uninterrupted one.
  ASSERT_TRUE(mimic::test::kill_once_logged(args + dir.file("b"), dir.file("b/log.jsonl"), 10))
      << "the run was never killed: it ended by itself three times, or failed";
  auto first = mimic::io::SafeTensorsFile::open(dir.file("b/checkpoint.safetensors"));
  const int stopped_at = nlohmann::json::parse(first.metadata().at("state"))["step"].get<int>();
  EXPECT_GE(stopped_at, 8) << "killed before the step it announced";
  EXPECT_LT(stopped_at, 100) << "the run was not interrupted: the resume path was not exercised";
  auto resumed = mimic_cli(args + dir.file("b"));
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_EQ(nlohmann::json::parse(resumed.out)["resumed_from"], stopped_at);
  auto a = mimic::io::SafeTensorsFile::open(dir.file("a/checkpoint.safetensors"));
  auto b = mimic::io::SafeTensorsFile::open(dir.file("b/checkpoint.safetensors"));
  ASSERT_EQ(a.names(), b.names());
  for (const auto& n : a.names()) EXPECT_TRUE(torch::equal(a.load(n), b.load(n))) << n;
  expect_same_tensors(base_w, TensorStore::open_dir(dir.file("b")), mimic::models::is_embedding);

  // Sharded exports of the base model and of the classifier share their embeddings shard byte for byte.
  mimic::models::SaveOptions so;  // what `mimic export --dtype f16 --shard-embeddings` does
  so.dtype = mimic::io::DType::F16;
  so.shards = {mimic::models::embeddings_group()};
  mimic::models::load_model(base)->save(dir.file("base-x"), so);
  mimic::models::load_model(dir.file("a"))->save(dir.file("a-x"), so);
  EXPECT_EQ(read_bytes(dir.file("base-x/") + kShard1), read_bytes(dir.file("a-x/") + kShard1));
  EXPECT_NE(read_bytes(dir.file("base-x/") + kShard2), read_bytes(dir.file("a-x/") + kShard2));
}
