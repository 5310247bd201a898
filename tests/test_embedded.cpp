// The embedded models (examples/models/, made by recipes/pretrain-mini.sh): they load with the documented
// shapes, and `mimic eval` reproduces the test metrics they shipped with (metrics.json) and the README.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "test_util.h"

using mimic::test::mimic_cli;

namespace {

std::string model_dir(const std::string& name) { return std::string(MIMIC_SOURCE_DIR) + "/examples/models/" + name; }

nlohmann::json shipped_metrics(const std::string& name, const std::string& file = "metrics.json") {
  return nlohmann::json::parse(mimic::test::read_bytes(model_dir(name) + "/" + file));
}

nlohmann::json run_json(const std::string& args) {
  auto r = mimic_cli(args + " --json");
  EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
  return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

std::string fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

const std::string& readme() {
  static const std::string text = mimic::test::read_bytes(std::string(MIMIC_SOURCE_DIR) + "/README.md");
  return text;
}

}  // namespace

TEST(EmbeddedModels, LoadWithTheirDocumentedShapes) {
  struct Expect {
    std::string name, arch;
    int64_t layers, width, heads;
  };
  for (const auto& e : std::vector<Expect>{{"gpt2-mini", "gpt2", 6, 192, 8},
                                           {"bert-mini", "bert", 4, 256, 8},
                                           {"bert-mini-spam", "bert", 4, 256, 8},
                                           {"bert-mini-sotu-era", "bert", 4, 256, 8}}) {
    SCOPED_TRACE(e.name);
    auto info = run_json("info " + model_dir(e.name));
    EXPECT_EQ(info.value("model_type", ""), e.arch) << info.dump();
    EXPECT_EQ(info.value("n_layer", 0), e.layers) << info.dump();
    EXPECT_EQ(info.value("d_model", 0), e.width) << info.dump();
    EXPECT_EQ(info.value("n_head", 0), e.heads) << info.dump();
    EXPECT_EQ(info.value("max_positions", 0), 512) << info.dump();
    // found by name as well (the source tree's examples/models, or $MIMIC_MODELS / the installed copy)
    EXPECT_EQ(run_json("info " + e.name).value("n_layer", 0), e.layers);
  }
  auto r = mimic_cli("info bert-mini-nope");
  EXPECT_NE(r.code, 0);
}

TEST(EmbeddedModels, ClassifiersShareBertMinisEmbeddingShard) {
  // frozen embeddings: the classifiers' first shard is bert-mini's, stored once (a symlink)
  const std::string shard = "model-00001-of-00002.safetensors";
  auto base = mimic::test::read_bytes(model_dir("bert-mini") + "/" + shard);
  ASSERT_FALSE(base.empty());
  for (const std::string name : {"bert-mini-spam", "bert-mini-sotu-era"}) {
    // compared as a bool: gtest prints a failed EXPECT_EQ of two strings as a diff, here of 10 MB of binary (the GPU
    // check's log of 2026-11-30 grew to 86 MB with it)
    const auto bytes = mimic::test::read_bytes(model_dir(name) + "/" + shard);
    EXPECT_TRUE(bytes == base) << name << ": " << bytes.size() << " bytes against bert-mini's " << base.size();
  }
}

TEST(EmbeddedModels, Gpt2MiniReproducesItsTestPerplexity) {
  auto shipped = shipped_metrics("gpt2-mini");
  auto now = run_json("eval --model " + model_dir("gpt2-mini") + " --data all --split test");
  EXPECT_EQ(now["tokens"], shipped["tokens"]);
  EXPECT_NEAR(now["perplexity"].get<double>(), shipped["perplexity"].get<double>(), 1e-4 * shipped["perplexity"].get<double>());
  EXPECT_NE(readme().find(fixed(shipped["perplexity"].get<double>(), 1)), std::string::npos)
      << "README does not state the test perplexity " << fixed(shipped["perplexity"].get<double>(), 1);
  EXPECT_LT(shipped["perplexity"].get<double>(), 400.0);  // a trained model, far from the vocabulary size
}

TEST(EmbeddedModels, Gpt2MiniCopiesRepeatedHeldOutProseAtTheShippedGain) {
  // issue 17's teacher: it recalls from its context. The options are the recipe's (copy.json).
  auto shipped = shipped_metrics("gpt2-mini", "copy.json");
  auto now = run_json("eval --task copy --model " + model_dir("gpt2-mini") +
                      " --data all --split test --segments 32 --segment-len 128 --threads 2 --seed 1");
  ASSERT_TRUE(now.contains("model")) << now.dump();
  const double gain = shipped["model"]["copy_gain"].get<double>();
  EXPECT_NEAR(now["model"]["copy_gain"].get<double>(), gain, 1e-3);
  EXPECT_GE(gain, 2.0) << "below issue 17's target of 2 nats/token";
  EXPECT_NE(readme().find(fixed(gain, 2)), std::string::npos) << "README does not state the copy gain " << fixed(gain, 2);
}

TEST(EmbeddedModels, Gpt2MiniRetrievesThePasskeyAsShipped) {
  auto shipped = shipped_metrics("gpt2-mini", "passkey.json");
  auto now = run_json("eval --task passkey --model " + model_dir("gpt2-mini") +
                      " --lengths 128,256,512 --trials 100 --threads 2 --seed 1");
  ASSERT_EQ(now["rows"].size(), shipped["rows"].size());
  for (size_t i = 0; i < shipped["rows"].size(); ++i) {
    const auto& s = shipped["rows"][i];
    SCOPED_TRACE(s["length"].get<int64_t>());
    // the same keys, seed and thread count as the shipped run (recipes/pretrain-mini.sh): the same ranks, but for one
    // trial whose two best candidates another machine's BLAS kernels may round the other way
    EXPECT_LE(std::abs(now["rows"][i]["ranked_first"].get<int64_t>() - s["ranked_first"].get<int64_t>()), 1)
        << now["rows"][i]["ranked_first"] << " vs shipped " << s["ranked_first"];
    const double share = s["ranked_first"].get<double>() / s["trials"].get<double>();
    EXPECT_NE(readme().find(fixed(100 * share, 0) + "%"), std::string::npos)
        << "README does not state passkey retrieval " << fixed(100 * share, 0) << "%";
    if (s["length"] == 256) EXPECT_GE(share, 0.8) << "below issue 17's target at 256 tokens";
  }
}

TEST(EmbeddedModels, ClassifiersReproduceTheirTestMetrics) {
  for (const std::string task : {"spam", "sotu-era"}) {
    SCOPED_TRACE(task);
    const std::string name = "bert-mini-" + task;
    auto shipped = shipped_metrics(name);
    // scored at 256, the length it was trained at, without being told: its config.json keeps the length (helper-81's
    // probe: the default 128 gave 0.839 for spam's 0.849 unless --seq-len 256 was given)
    auto now = run_json("eval --task cls --model " + model_dir(name) + " --data " + task + " --split test");
    EXPECT_EQ(now["seq_len"], 256);
    ASSERT_EQ(now["n"], shipped["n"]);
    const double n = shipped["n"].get<double>();
    // Another machine (its BLAS kernels, its thread count) may round a text that sits at the decision boundary the
    // other way: at most one text may change class. One move changes accuracy by 1/n but F1 and MCC by more (spam's
    // F1 by 0.009, where 1/n is 0.003), so the confusion matrices are what is compared, and the metrics only where
    // they agree.
    ASSERT_EQ(now["confusion"].size(), shipped["confusion"].size());
    int64_t moved = 0;
    for (size_t r = 0; r < shipped["confusion"].size(); ++r) {
      int64_t now_row = 0, shipped_row = 0;  // the texts of true class r: the data's, which no machine changes
      for (size_t c = 0; c < shipped["confusion"][r].size(); ++c) {
        moved += std::abs(now["confusion"][r][c].get<int64_t>() - shipped["confusion"][r][c].get<int64_t>());
        now_row += now["confusion"][r][c].get<int64_t>();
        shipped_row += shipped["confusion"][r][c].get<int64_t>();
      }
      EXPECT_EQ(now_row, shipped_row) << "the test split's texts of class " << r << " are not the shipped run's";
    }
    EXPECT_LE(moved, 2) << "more than one test text changed class: " << now["confusion"].dump() << " vs shipped " << shipped["confusion"].dump();
    for (const char* key : {"accuracy", "f1", "mcc"}) {
      // one text moved changes spam's F1 and MCC by up to 0.011 (every move of its matrix, worked out)
      EXPECT_NEAR(now[key].get<double>(), shipped[key].get<double>(), moved == 0 ? 1e-9 : 0.02) << key;
      EXPECT_NE(readme().find(fixed(shipped[key].get<double>(), 3)), std::string::npos)
          << "README does not state " << key << " = " << fixed(shipped[key].get<double>(), 3);
    }
    // a trained classifier: better than always answering the test set's most frequent class, and a clear
    // positive correlation with the labels
    double majority = 0;
    for (const auto& row : shipped["confusion"]) {
      double count = 0;
      for (const auto& c : row) count += c.get<double>();
      majority = std::max(majority, count / n);
    }
    EXPECT_GT(shipped["accuracy"].get<double>(), majority + 0.05);
    EXPECT_GT(shipped["mcc"].get<double>(), 0.25);
  }
}
