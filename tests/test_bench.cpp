// `mimic bench attention` end to end on a tiny configuration: the JSON report has every field and the
// measured numbers are positive; the text report has its tables; bad options are one-line errors.
#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include "mimic/bench/attention_bench.h"
#include "mimic/bench/measure.h"
#include "test_util.h"

using mimic::test::TempDir;

namespace {
struct BenchRun {
  int code;
  std::string out, err;
};
// Runs `mimic ARGS` through the shell, capturing stdout and stderr.
BenchRun run_cli(const std::string& args) {
  TempDir dir;
  std::string cmd = std::string(MIMIC_CLI) + " " + args + " >" + dir.file("out") + " 2>" + dir.file("err") + " </dev/null";
  int status = std::system(cmd.c_str());
  return {WEXITSTATUS(status), mimic::test::read_bytes(dir.file("out")), mimic::test::read_bytes(dir.file("err"))};
}
// One thread: the test stays quick on a machine busy with other work.
const char* kTiny = "bench attention --max-len 1024 --repeats 1 --threads 1";
}  // namespace

TEST(Bench, AttentionJsonHasEveryFieldAndPositiveNumbers) {
  auto r = run_cli(std::string(kTiny) + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["benchmark"], "attention");
  const auto& c = j["config"];
  EXPECT_EQ(c["head_dim"], 64);
  EXPECT_EQ(c["feature_map"], "hedgehog");
  EXPECT_EQ(c["feature_dim"], 128);
  EXPECT_EQ(c["threads"], 1);
  EXPECT_EQ(c["repeats"], 1);
  EXPECT_EQ(c["max_len"], 1024);
  EXPECT_EQ(c["chunk"], 64);
  EXPECT_TRUE(j["timing"].is_string());
  EXPECT_TRUE(j["memory"].is_string());

  ASSERT_EQ(j["lengths"].size(), 2u);
  EXPECT_EQ(j["lengths"][0]["T"], 512);
  EXPECT_EQ(j["lengths"][1]["T"], 1024);
  for (const auto& l : j["lengths"]) {
    for (const char* form : {"softmax", "linear"}) {
      const auto& f = l[form];
      ASSERT_TRUE(f["measured"].get<bool>()) << l.dump();
      for (const char* key : {"fwd_ms", "fwdbwd_ms", "fwd_peak_mb", "fwdbwd_peak_mb"})
        EXPECT_GT(f[key].get<double>(), 0) << form << " " << key << " at T=" << l["T"];
      // backward keeps the gradients and the saved activations: it never needs less than the forward alone
      EXPECT_GE(f["fwdbwd_peak_mb"].get<double>(), f["fwd_peak_mb"].get<double>()) << form;
    }
    EXPECT_GT(l["ratio_fwd"].get<double>(), 0);
    EXPECT_GT(l["ratio_fwdbwd"].get<double>(), 0);
  }
  // softmax materialises [T, T] scores: 4 MB of fp32 at 1K, so its forward peak is at least that
  EXPECT_GE(j["lengths"][1]["softmax"]["fwd_peak_mb"].get<double>(), 1024.0 * 1024 * 4 / 1e6);

  ASSERT_EQ(j["decode"].size(), 6u);
  int64_t expect = 1024;
  for (const auto& d : j["decode"]) {
    EXPECT_EQ(d["context"], expect);
    expect *= 2;
    EXPECT_GT(d["softmax_us"].get<double>(), 0);
    EXPECT_GT(d["linear_us"].get<double>(), 0);
    EXPECT_GT(d["softmax_mean_us"].get<double>(), 0);
    EXPECT_GT(d["linear_mean_us"].get<double>(), 0);
    EXPECT_GT(d["ratio"].get<double>(), 0);
  }

  ASSERT_EQ(j["targets"].size(), 3u);
  const std::set<std::string> statuses = {"PASS", "MISS", "n/a"};
  for (const auto& t : j["targets"]) {
    EXPECT_TRUE(t["name"].is_string());
    EXPECT_TRUE(statuses.count(t["status"].get<std::string>())) << t.dump();
    EXPECT_FALSE(t["detail"].get<std::string>().empty());
    EXPECT_GT(t["limit"].get<double>(), 0);
  }
  EXPECT_EQ(j["targets"][0]["status"], "n/a");  // 16K is beyond --max-len 1024
  EXPECT_NE(j["targets"][1]["status"], "n/a");  // 512 and 1K measured
  EXPECT_NE(j["targets"][2]["status"], "n/a");  // decoding at 1K and 32K always measured
  EXPECT_GT(j["targets"][2]["value"].get<double>(), 0);
}

TEST(Bench, AttentionTextReport) {
  // The formatting alone, on made-up numbers (the CLI run above covers the measuring).
  mimic::bench::AttentionBenchResult r;
  r.threads = 2;
  r.feature_dim = 128;
  r.timing_method = "median";
  r.memory_method = "allocator";
  mimic::bench::FormResult sm{true, "", 40.0, 120.0, 4.2, 14.2}, lin{true, "", 2.0, 6.0, 2.4, 2.8}, skipped;
  skipped.skipped = "needs about 30.0 GB";
  r.lengths = {{512, sm, lin}, {32768, skipped, lin}};
  r.decode = {{1024, 60.0, 70.0, 61.0, 72.0}, {32768, 2000.0, 71.0, 2100.0, 73.0}};
  r.targets = {{"crossover <= 1K", "PASS", "linear fwd+bwd faster from T = 512 on", 512, 1024}};
  auto text = mimic::bench::format_report(r);
  for (const char* s : {"forward and forward+backward", "recurrent decoding", "targets", "PASS  crossover <= 1K: linear",
                        "   512 |      40.00       2.00   20.0x |     120.00       6.00   20.0x |       4.2       2.4 |      14.2       2.8",
                        "softmax 32K skipped: needs about 30.0 GB", "     32K |     2000.0       71.0   28.2x |     2100.0       73.0"})
    EXPECT_NE(text.find(s), std::string::npos) << s << "\n" << text;
}

TEST(Bench, AttentionHelpAndErrors) {
  auto h = run_cli("bench attention --help");
  EXPECT_EQ(h.code, 0);
  for (const char* opt : {"--threads", "--seed", "--json", "--max-len", "--repeats", "--chunk"})
    EXPECT_NE(h.out.find(opt), std::string::npos) << opt;

  auto bad = run_cli("bench attention --max-len 100");
  EXPECT_NE(bad.code, 0);
  EXPECT_EQ(bad.err.rfind("mimic: error: ", 0), 0u) << bad.err;
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
  EXPECT_NE(bad.err.find("--max-len"), std::string::npos) << bad.err;
  EXPECT_NE(run_cli("bench").code, 0);  // `bench` needs a benchmark name
}

TEST(BenchMeasure, PeakBytesCountWhatTheRunAllocatedAndTheMedianIsTheMiddleValue) {
  // 4 MB of floats allocated, kept while a second 1 MB tensor lives, then both dropped inside the run.
  auto s = mimic::bench::measure(3, {}, [] {
    auto a = torch::empty({1000000}, torch::kFloat);
    auto b = torch::empty({250000}, torch::kFloat);
    a.fill_(1);
    b.fill_(2);
  });
  EXPECT_GE(s.peak_bytes, 5000000);
  EXPECT_LT(s.peak_bytes, 5200000);  // nothing else of that size
  EXPECT_GE(s.ms, 0.0);
  auto quiet = mimic::bench::measure_once({}, [] {});
  EXPECT_EQ(quiet.peak_bytes, 0);
  EXPECT_DOUBLE_EQ(mimic::bench::median({5, 1, 3}), 3.0);
  EXPECT_DOUBLE_EQ(mimic::bench::median({4, 1, 3, 2}), 2.5);
}
