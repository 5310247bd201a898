// python/mimic_torch.py, the plain-PyTorch loader of converted directories (issue 36 item 6), against mimic's own
// forward: gpt2-mini converted with linear attention (hedgehog maps with SLA gates, taylor2) around kept softmax heads
// (the mixed kind) and with LoLCATs' hybrid, each read back by the script from the directory alone; converted BERTs and
// a BERT classifier likewise. The Llama family's
// side (rotary embeddings, grouped-query attention) is LlamaFamily.AFolderWithTokenizerJsonRunsEveryStageOnProse's.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "test_util.h"

using mimic::test::TempDir;

namespace {
// Runs `mimic forward` on `dir` and the script's --check on its output; returns the script's JSON line.
nlohmann::json torch_check(const TempDir& tmp, const std::string& dir, const std::string& text) {
  const std::string out = tmp.file(std::filesystem::path(dir).filename().string() + ".forward.safetensors");
  auto f = mimic::test::mimic_cli("forward --model " + dir + " --text '" + text + "' --out " + out + " --threads 1");
  EXPECT_EQ(f.code, 0) << f.err;
  mimic::test::write_bytes(tmp.file("run.sh"), "/usr/bin/python3 " + std::string(MIMIC_SOURCE_DIR) + "/python/mimic_torch.py " + dir +
                                                   " --check " + out + " >" + tmp.file("py.out") + " 2>&1");
  const int rc = std::system(("bash " + tmp.file("run.sh")).c_str());
  const std::string printed = mimic::test::read_bytes(tmp.file("py.out"));
  EXPECT_EQ(rc, 0) << printed;
  return nlohmann::json::parse(printed.substr(0, printed.find('\n')), nullptr, false);
}

// A mimic command with one thread; false, with the command and its error reported, when it fails (an ASSERT inside a
// lambda returned from the lambda alone, and the test went on to fail on the missing outputs).
bool mimic_ok(const std::string& args) {
  auto r = mimic::test::mimic_cli(args + " --threads 1");
  if (r.code != 0) ADD_FAILURE() << args << "\n" << r.err;
  return r.code == 0;
}

// The script's logits of `dir` equal mimic's within 1e-4 (float32 mimic against the script's float64), over at least 30
// tokens (past the hybrid window of 8: its linear part counts), with the layers' kinds `kinds`.
void expect_torch_matches(const TempDir& tmp, const std::string& dir, const nlohmann::json& kinds) {
  const std::string text = "It is a truth universally acknowledged that the Congress of the United States shall assemble at least once "
                           "in every year, and the Congress of the United States shall";
  const auto j = torch_check(tmp, dir, text);
  ASSERT_TRUE(j.is_object()) << dir;
  EXPECT_EQ(j["kinds"], kinds) << dir;
  EXPECT_LT(j["max_relative_error"].get<double>(), 1e-4) << dir;
  EXPECT_GE(j["tokens"].get<int>(), 30) << dir;
}
}  // namespace

TEST(EmbeddedModels, ThePyTorchLoaderComputesConvertedModelsAsMimicDoes) {
  if (!mimic::test::python_has("torch")) GTEST_SKIP() << "python3 with torch not available";
  TempDir dir;
  ASSERT_TRUE(mimic_ok("record --model gpt2-mini --data sotu --split train --samples 4 --seq-len 64 --out " + dir.file("r.h5")));
  ASSERT_TRUE(mimic_ok("distill --record " + dir.file("r.h5") + " --feature-map hedgehog --sla --epochs 1 --out " + dir.file("hh.safetensors")));
  ASSERT_TRUE(mimic_ok("convert --model gpt2-mini --maps " + dir.file("hh.safetensors") + " --keep-softmax 2.4,3.1,3.3 --out " + dir.file("mixed")));
  ASSERT_TRUE(mimic_ok("distill --record " + dir.file("r.h5") + " --attention hybrid:window=8 --epochs 1 --out " + dir.file("hy.safetensors")));
  ASSERT_TRUE(mimic_ok("convert --model gpt2-mini --maps " + dir.file("hy.safetensors") + " --out " + dir.file("hybrid")));
  ASSERT_TRUE(mimic_ok("distill --record " + dir.file("r.h5") + " --feature-map taylor2 --epochs 1 --layers 0-2 --out " + dir.file("t2.safetensors")));
  ASSERT_TRUE(mimic_ok("convert --model gpt2-mini --maps " + dir.file("t2.safetensors") + " --out " + dir.file("taylor")));
  expect_torch_matches(dir, dir.file("mixed"), {"linear", "mixed"});
  expect_torch_matches(dir, dir.file("hybrid"), {"hybrid"});
  expect_torch_matches(dir, dir.file("taylor"), {"linear", "softmax"});
  // the configured activation, not GPT-2's default (the tenth probe: relu was computed as gelu_new, exit 0)
  std::filesystem::copy(dir.file("taylor"), dir.file("relu"), std::filesystem::copy_options::recursive);
  auto config = nlohmann::json::parse(mimic::test::read_bytes(dir.file("relu/config.json")));
  config["activation_function"] = "relu";
  mimic::test::write_bytes(dir.file("relu/config.json"), config.dump());
  expect_torch_matches(dir, dir.file("relu"), {"linear", "softmax"});
  // ids outside the vocabulary are refused in one line, not wrapped (Python's negative indexing) or a traceback
  mimic::test::write_bytes(dir.file("neg.sh"), "/usr/bin/python3 " + std::string(MIMIC_SOURCE_DIR) + "/python/mimic_torch.py " +
                                                 dir.file("relu") + " --ids 1,-2,3 >" + dir.file("neg.out") + " 2>&1");
  EXPECT_NE(std::system(("bash " + dir.file("neg.sh")).c_str()), 0);
  EXPECT_EQ(mimic::test::read_bytes(dir.file("neg.out")), "mimic_torch.py: error: token ids must lie in [0, 50257), got -2..3\n");
  // what the script cannot compute it refuses by name
  mimic::test::write_bytes(dir.file("bad.sh"), "cd " + dir.file("mixed") + " && sed -i 's/\"kind\": \"linear\"/\"kind\": \"delta\"/' mimic.json && "
                                                 "/usr/bin/python3 " + std::string(MIMIC_SOURCE_DIR) + "/python/mimic_torch.py " + dir.file("mixed") +
                                                 " --ids 1,2,3 >" + dir.file("bad.out") + " 2>&1");
  EXPECT_NE(std::system(("bash " + dir.file("bad.sh")).c_str()), 0);
  EXPECT_NE(mimic::test::read_bytes(dir.file("bad.out")).find("attention kind 'delta' (layer 0) is not supported by mimic_torch.py"),
            std::string::npos) << mimic::test::read_bytes(dir.file("bad.out"));
}

// BERT: bidirectional kernels (linear with kept softmax heads, and the hybrid's two-sided window), the masked-LM head
// over the vocabulary, and a classifier's labels (bert-mini-spam) through the pooler.
TEST(EmbeddedModels, ThePyTorchLoaderComputesConvertedBertAsMimicDoes) {
  if (!mimic::test::python_has("torch")) GTEST_SKIP() << "python3 with torch not available";
  TempDir dir;
  ASSERT_TRUE(mimic_ok("record --model bert-mini --data sotu --split train --samples 4 --seq-len 64 --out " + dir.file("r.h5")));
  ASSERT_TRUE(mimic_ok("distill --record " + dir.file("r.h5") + " --feature-map hedgehog --sla --epochs 1 --out " + dir.file("hh.safetensors")));
  ASSERT_TRUE(mimic_ok("convert --model bert-mini --maps " + dir.file("hh.safetensors") + " --keep-softmax 1.4,2.1 --out " + dir.file("mixed")));
  ASSERT_TRUE(mimic_ok("distill --record " + dir.file("r.h5") + " --attention hybrid:window=8 --epochs 1 --out " + dir.file("hy.safetensors")));
  ASSERT_TRUE(mimic_ok("convert --model bert-mini --maps " + dir.file("hy.safetensors") + " --out " + dir.file("hybrid")));
  expect_torch_matches(dir, dir.file("mixed"), {"linear", "mixed"});
  expect_torch_matches(dir, dir.file("hybrid"), {"hybrid"});
  expect_torch_matches(dir, std::string(MIMIC_SOURCE_DIR) + "/examples/models/bert-mini-spam", {"softmax"});
}
