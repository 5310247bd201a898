// The `report` stage: the metrics equal hand-computed values and distill's own evaluation, a student that is
// the teacher scores KL 0 and monotonicity 1, the figures decode (PNG, by cairo) and parse (SVG), the page
// links only files that exist, and headless Chromium renders it.
#include <H5Cpp.h>
#include <cairo.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "mimic/convert/convert.h"
#include "mimic/analysis/metrics.h"
#include "mimic/distill/distill.h"
#include "mimic/eval/metrics.h"
#include "mimic/models/model.h"
#include "mimic/record/record.h"
#include "mimic/report/figures.h"
#include "mimic/report/pareto.h"
#include "mimic/report/plot.h"
#include "mimic/report/quality.h"
#include "mimic/report/report.h"
#include "mimic/record/hdf5.h"
#include "test_util.h"

using mimic::test::TempDir;
namespace analysis = mimic::analysis;
namespace dist = mimic::distill;
namespace fs = std::filesystem;

namespace {

const char* const kText = mimic::test::kDickens;

// A record of a tiny fixture model (2 layers, 2 heads of 4): GPT-2 (causal) or BERT (bidirectional, the last
// sample padded). Made once per test process.
std::string tiny_record(const std::string& model) {
  static TempDir dir;
  static std::map<std::string, std::string> made;
  auto it = made.find(model);
  if (it != made.end()) return it->second;
  mimic::test::write_bytes(dir.file("t.txt"), mimic::test::text_lines(kText, 20));
  mimic::record::RecordOptions o;
  o.model_dir = mimic::test::model_with_tokenizer(model);
  o.data = dir.file("t.txt");
  o.out = dir.file(model + ".h5");
  o.seq_len = 16;
  o.samples = 0;
  o.batch_size = 4;
  o.measure_forward = false;
  mimic::record::record(o);
  return made[model] = o.out;
}

// Hedgehog maps distilled on the tiny GPT-2 record (made once).
std::string tiny_maps() {
  static TempDir dir;
  static std::string path = [] {
    dist::DistillOptions o;
    o.record = tiny_record("gpt2-prefixed");
    o.feature_map = "hedgehog";
    o.out = dir.file("hh.safetensors");
    o.epochs = 10;
    o.batch_size = 4;
    o.progress = false;
    dist::distill(o);
    return o.out;
  }();
  return path;
}

struct Png {
  int width = 0, height = 0;
  double variance = 0;      // of the grey levels, over every pixel
  double non_white = 0;     // fraction of pixels that are not (almost) white
};

// Decodes a PNG with cairo's reader.
Png read_png(const std::string& path) {
  cairo_surface_t* s = cairo_image_surface_create_from_png(path.c_str());
  EXPECT_EQ(cairo_surface_status(s), CAIRO_STATUS_SUCCESS) << path;
  Png p;
  if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS) return p;
  p.width = cairo_image_surface_get_width(s);
  p.height = cairo_image_surface_get_height(s);
  const int stride = cairo_image_surface_get_stride(s);
  const unsigned char* data = cairo_image_surface_get_data(s);
  double sum = 0, sq = 0, nw = 0;
  for (int y = 0; y < p.height; ++y)
    for (int x = 0; x < p.width; ++x) {
      const uint32_t px = *reinterpret_cast<const uint32_t*>(data + y * stride + 4 * x);
      const double g = (((px >> 16) & 255) + ((px >> 8) & 255) + (px & 255)) / 3.0;
      sum += g, sq += g * g, nw += g < 245;
    }
  const double n = static_cast<double>(p.width) * p.height;
  p.variance = sq / n - (sum / n) * (sum / n);
  p.non_white = nw / n;
  cairo_surface_destroy(s);
  return p;
}

// XML well-formedness, enough for cairo's SVG: every tag closes in order, attributes are quoted, one root.
bool well_formed_xml(const std::string& s, std::string* why) {
  std::vector<std::string> open;
  size_t i = 0, roots = 0;
  auto bad = [&](const std::string& w) {
    *why = w + " at byte " + std::to_string(i);
    return false;
  };
  while ((i = s.find('<', i)) != std::string::npos) {
    if (s.compare(i, 4, "<!--") == 0) {
      i = s.find("-->", i);
      if (i == std::string::npos) return bad("unclosed comment");
      continue;
    }
    if (s.compare(i, 2, "<?") == 0 || s.compare(i, 2, "<!") == 0) {
      i = s.find('>', i);
      if (i == std::string::npos) return bad("unclosed declaration");
      continue;
    }
    size_t end = i + 1;
    char quote = 0;
    for (; end < s.size(); ++end) {
      if (quote) {
        if (s[end] == quote) quote = 0;
      } else if (s[end] == '"' || s[end] == '\'') {
        quote = s[end];
      } else if (s[end] == '>') {
        break;
      } else if (s[end] == '<') {
        return bad("'<' inside a tag");
      }
    }
    if (end >= s.size()) return bad("unclosed tag");
    std::string tag = s.substr(i + 1, end - i - 1);
    if (tag.empty()) return bad("empty tag");
    if (tag[0] == '/') {
      std::string name = tag.substr(1, tag.find_first_of(" \t\n") - 1);
      if (open.empty() || open.back() != name) return bad("</" + name + "> closes " + (open.empty() ? "nothing" : open.back()));
      open.pop_back();
    } else if (tag.back() != '/') {
      if (open.empty()) ++roots;
      open.push_back(tag.substr(0, tag.find_first_of(" \t\n")));
    } else if (open.empty()) {
      ++roots;
    }
    i = end + 1;
  }
  if (!open.empty()) return bad("<" + open.back() + "> never closed");
  if (roots != 1) return bad(std::to_string(roots) + " root elements");
  return true;
}

mimic::report::ReportOptions options(const std::string& out) {
  mimic::report::ReportOptions o;
  o.record = tiny_record("gpt2-prefixed");
  o.out = out;
  o.progress = false;
  return o;
}

// A delta student (weights of any sign, no distribution) distilled for an epoch on the tiny GPT-2 record into `out`.
dist::DistillOptions delta_student(const std::string& out) {
  dist::DistillOptions d;
  d.record = tiny_record("gpt2-prefixed");
  d.attention = "delta";
  d.feature_map.clear();
  d.loss = "mse";
  d.epochs = 1;
  d.batch_size = 4;
  d.progress = false;
  d.out = out;
  dist::distill(d);
  return d;
}

const nlohmann::json& row(const mimic::report::ReportResult& r, const std::string& source, int64_t layer, int64_t head) {
  for (const auto& x : r.rows)
    if (x.at("source") == source && x.at("layer") == layer && x.at("head") == head) return x;
  static nlohmann::json none;
  ADD_FAILURE() << "no row " << source << " " << layer << " " << head;
  return none;
}

}  // namespace

TEST(ReportMetrics, HandComputedEntropyKlCeSpearmanTopK) {
  // one head, T = 3, bidirectional, every key visible; every row: teacher a = (1/2, 1/4, 1/4), student
  // w = (0.2, 0.3, 0.5), scores (3, 1, 2)
  analysis::TeacherBatch b;
  b.q = torch::zeros({1, 1, 3, 1});
  b.k = torch::zeros({1, 1, 3, 1});
  b.causal = false;
  auto a = torch::tensor({0.5, 0.25, 0.25}, torch::kDouble).view({1, 1, 1, 3}).repeat({1, 1, 3, 1});
  auto w = torch::tensor({0.2, 0.3, 0.5}, torch::kDouble).view({1, 1, 1, 3}).repeat({1, 1, 3, 1});
  auto s = torch::tensor({3.0, 1.0, 2.0}, torch::kDouble).view({1, 1, 1, 3}).repeat({1, 1, 3, 1});
  analysis::MetricsAccumulator acc(0, 1, 2);
  acc.add_weights(a, w.log(), s, b);
  auto m = acc.result().heads.at(0);
  const double h = -(0.5 * std::log(0.5) + 2 * 0.25 * std::log(0.25));
  const double ce = -(0.5 * std::log(0.2) + 0.25 * std::log(0.3) + 0.25 * std::log(0.5));
  EXPECT_NEAR(m.entropy_softmax, h, 1e-12);
  EXPECT_NEAR(m.entropy_linear, -(0.2 * std::log(0.2) + 0.3 * std::log(0.3) + 0.5 * std::log(0.5)), 1e-12);
  EXPECT_NEAR(m.ce, ce, 1e-12);
  EXPECT_NEAR(m.kl, ce - h, 1e-12);
  // ranks of the scores (3, 1, 2) against the student's (1, 2, 3): ρ = 1 − 6·Σd²/(n(n²−1)) = 1 − 6·6/24
  EXPECT_NEAR(m.spearman, -0.5, 1e-12);
  EXPECT_NEAR(m.top_k_softmax, 0.75, 1e-12);
  EXPECT_NEAR(m.top_k_linear, 0.8, 1e-12);
  // the JSON carries the top-k masses only when they were computed
  EXPECT_TRUE(acc.result().to_json().at("mean").contains("top_k_linear"));
  EXPECT_FALSE(analysis::MetricsAccumulator(0, 1).result().to_json().at("mean").contains("top_k_linear"));
}

// The means over heads and over layers: each value over the heads (layers) that have it — a kept head (no values), a
// head without a Spearman — and NaN where none has it (a signed student's entropy).
TEST(ReportMetrics, MeansAreOverTheHeadsThatHaveTheValue) {
  mimic::report::HeadValues a, b, kept;
  a.entropy = 1.0, a.spearman = 0.5, a.induction = 0.2;
  b.entropy = 2.0, b.induction = 0.4;  // no Spearman
  const auto m = mimic::report::mean_where_defined({a, b, kept});
  EXPECT_DOUBLE_EQ(m.entropy, 1.5);
  EXPECT_DOUBLE_EQ(m.spearman, 0.5);
  EXPECT_NEAR(m.induction, 0.3, 1e-15);
  EXPECT_TRUE(std::isnan(m.kl));
  EXPECT_TRUE(std::isnan(mimic::report::mean_where_defined({}).entropy));
}

TEST(ReportMetrics, UniformRowsHaveEntropyLogN) {
  // q = 0: every score is 0, the teacher is uniform over the visible keys; causal row i sees i + 1 keys
  analysis::TeacherBatch b;
  b.q = torch::zeros({1, 2, 5, 3});
  b.k = torch::randn({1, 2, 5, 3});
  b.causal = true;
  b.scale = 0.5;
  auto a = analysis::teacher_weights(b);
  analysis::MetricsAccumulator acc(0, 2, 1);
  acc.add_weights(a, a.clamp_min(std::numeric_limits<float>::min()).log(), torch::matmul(b.q, b.k.transpose(-1, -2)), b);
  auto m = acc.result();
  double want = 0;
  for (int i = 1; i <= 5; ++i) want += std::log(i) / 5;
  EXPECT_NEAR(m.mean.entropy_softmax, want, 1e-6);
  EXPECT_NEAR(m.mean.entropy_linear, want, 1e-6);
  double top1 = 0;
  for (int i = 1; i <= 5; ++i) top1 += 1.0 / i / 5;
  EXPECT_NEAR(m.mean.top_k_softmax, top1, 1e-6);
  // a full (bidirectional) row of n keys: log n exactly
  b.causal = false;
  analysis::MetricsAccumulator full(0, 2);
  auto u = analysis::teacher_weights(b);
  full.add_weights(u, u.log(), torch::zeros({1, 2, 5, 5}), b);
  EXPECT_NEAR(full.result().mean.entropy_softmax, std::log(5.0), 1e-6);
}

TEST(Report, MatchesDistillAndWritesEveryFile) {
  TempDir dir;
  auto o = options(dir.file("out"));
  o.maps = {tiny_maps()};
  o.baselines = {"elu"};
  // a converted model: layer 1 runs the hedgehog maps, layer 0 keeps softmax (= the teacher)
  mimic::convert::ConvertOptions co;
  co.model_dir = mimic::test::model_with_tokenizer("gpt2-prefixed");
  co.maps = tiny_maps();
  co.layers = "1";
  co.out = dir.file("converted");
  mimic::convert::convert(co);
  o.models = {co.out};
  // quality: one model's eval results by hand (perplexity with its interval, copy gain); the converted model has none
  mimic::test::write_bytes(dir.file("ppl.json"), R"({"perplexity": 177.2, "nll": 5.177, "predicted": 96417, "data": "all:test",
                                                      "perplexity_ci95": [172.0, 182.6], "attention": "softmax in layers 0-1"})");
  mimic::test::write_bytes(dir.file("copy.json"), R"({"task": "copy", "segments": 32, "segment_len": 128,
                                                       "model": {"copy_gain": 3.65, "copy_gain_ci95": 0.11}})");
  o.evals = {"teacher=" + dir.file("ppl.json"), "teacher=" + dir.file("copy.json")};
  auto r = mimic::report::report(o);
  ASSERT_EQ(r.quality.size(), 2u);  // the teacher's row, then the converted model's, without numbers
  EXPECT_EQ(r.quality[0]["label"], "teacher");
  EXPECT_EQ(r.quality[0]["perplexity"]["value"], 177.2);
  EXPECT_EQ(r.quality[0]["copy_gain"]["share"], 1.0);
  EXPECT_EQ(r.quality[1]["label"], "converted");
  EXPECT_FALSE(r.quality[1].contains("perplexity"));
  {
    const auto page = mimic::test::read_bytes(dir.file("out/report.html"));
    EXPECT_NE(page.find("<h2>Quality</h2>"), std::string::npos);
    EXPECT_NE(page.find("<td>177.2</td><td>172.0&ndash;182.6</td><td>3.65 &plusmn; 0.11</td><td>100%</td>"), std::string::npos);
    EXPECT_LT(page.find("<h2>Quality</h2>"), page.find("<h2>Sources</h2>"));
  }
  // the default samples are distill's held-out ones; the metrics equal distill --eval-only's
  dist::DistillOptions e;
  e.record = o.record;
  e.eval_only = true;
  e.maps = tiny_maps();
  e.progress = false;
  auto ev = dist::distill(e);
  EXPECT_EQ(static_cast<int64_t>(r.samples.size()), ev.val_samples);
  e.maps.clear();
  e.feature_map = "elu";
  auto ev_elu = dist::distill(e);
  ASSERT_EQ(r.layers, (std::vector<int64_t>{0, 1}));
  ASSERT_EQ(r.sources.size(), 4u);
  EXPECT_EQ(r.sources[1].at("name"), "hedgehog");
  EXPECT_EQ(r.sources[2].at("name"), "elu (untrained)");
  for (size_t l = 0; l < 2; ++l)
    for (int64_t h = 0; h < 2; ++h) {
      const auto& d = ev.layers[l].after.heads[static_cast<size_t>(h)];
      const auto& x = row(r, "hedgehog", static_cast<int64_t>(l), h);
      EXPECT_NEAR(x.at("kl").get<double>(), d.kl, 1e-6);
      EXPECT_NEAR(x.at("ce").get<double>(), d.ce, 1e-6);
      EXPECT_NEAR(x.at("entropy").get<double>(), d.entropy_linear, 1e-6);
      EXPECT_NEAR(x.at("spearman").get<double>(), d.spearman, 1e-6);
      EXPECT_NEAR(row(r, "softmax", static_cast<int64_t>(l), h).at("entropy").get<double>(), d.entropy_softmax, 1e-6);
      EXPECT_NEAR(row(r, "elu (untrained)", static_cast<int64_t>(l), h).at("kl").get<double>(),
                  ev_elu.layers[l].after.heads[static_cast<size_t>(h)].kl, 1e-6);
      // the converted model: its linear layer 1 is the maps; its softmax layer 0 is the teacher, not the model's
      // linear attention, and has no numbers (they entered the model's mean as KL 0: the eighth probe of 2026-11-29)
      const auto& conv = row(r, "converted", static_cast<int64_t>(l), h);
      if (l == 0) {
        EXPECT_TRUE(conv.at("kl").is_null()) << conv.dump();
        EXPECT_TRUE(conv.at("spearman").is_null()) << conv.dump();
      } else {
        EXPECT_NEAR(conv.at("kl").get<double>(), d.kl, 1e-6);
        EXPECT_NEAR(conv.at("spearman").get<double>(), d.spearman, 1e-6);
      }
      EXPECT_NEAR(row(r, "softmax", static_cast<int64_t>(l), h).at("spearman").get<double>(), 1.0, 1e-6);
      // trained hedgehog is closer to softmax than untrained elu
      EXPECT_LT(x.at("kl").get<double>(), row(r, "elu (untrained)", static_cast<int64_t>(l), h).at("kl").get<double>());
    }
  // the mean row is the mean over heads
  EXPECT_NEAR(row(r, "hedgehog", 1, -1).at("kl").get<double>(), ev.layers[1].after.mean.kl, 1e-6);

  // files: CSV (one line per source × layer × (heads + mean)), JSON, figures, page
  const fs::path out = o.out;
  for (const auto& f : r.files) EXPECT_TRUE(fs::exists(out / f)) << f;
  auto csv = mimic::test::read_bytes((out / "metrics.csv").string());
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 4 * 2 * 3);
  // the header names the k and window computed: the default window of 64 keys cut to the record's 16 tokens
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "source,kind,layer,head,entropy,kl,ce,spearman,top_8_mass,induction,previous_token,local_mass_16");
  // induction and previous-token scores are weights: in [0, 1] for the teacher and every student
  // (the parsed document is a named variable: a range-for over a temporary's member would read freed memory)
  auto j = nlohmann::json::parse(mimic::test::read_bytes((out / "metrics.json").string()));
  for (const auto& m : j.at("metrics")) {
    if (m.at("previous_token").is_null()) continue;
    EXPECT_GE(m.at("previous_token").get<double>(), 0.0);
    EXPECT_LE(m.at("previous_token").get<double>(), 1.0 + 1e-9);
  }
  EXPECT_EQ(j.at("metrics").size(), 4u * 2 * 3);
  EXPECT_EQ(j.at("record").at("causal"), true);
  int pngs = 0, svgs = 0;
  for (const auto& f : r.files) {
    const auto path = (out / f).string();
    if (fs::path(f).extension() == ".png") {
      ++pngs;
      auto p = read_png(path);
      EXPECT_GT(p.width, 300) << f;
      EXPECT_GT(p.height, 200) << f;
      EXPECT_GT(p.variance, 100.0) << f;  // not blank
      EXPECT_GT(p.non_white, 0.03) << f;
    }
    if (fs::path(f).extension() == ".svg") {
      ++svgs;
      std::string why;
      auto svg = mimic::test::read_bytes(path);
      EXPECT_TRUE(well_formed_xml(svg, &why)) << f << ": " << why;
      EXPECT_NE(svg.find("<svg"), std::string::npos) << f;
    }
  }
  // heatmaps of layers 0 and 1 (first, middle = last), entropy, monotonicity, KL grid, induction grid
  EXPECT_EQ(pngs, 6);
  EXPECT_EQ(svgs, 6);
  // the page links exactly files that exist, and every figure
  auto html = mimic::test::read_bytes((out / "report.html").string());
  std::regex link("(src|href)=\"([^\"]+)\"");
  std::set<std::string> linked;
  for (std::sregex_iterator it(html.begin(), html.end(), link), end; it != end; ++it) {
    const std::string target = (*it)[2];
    if (target[0] == '#') continue;  // a place on the page itself
    EXPECT_EQ(target.find("://"), std::string::npos) << "network link " << target;
    EXPECT_TRUE(fs::exists(out / target)) << "broken link " << target;
    linked.insert(target);
  }
  for (const auto& f : r.files)
    if (f != "report.html") EXPECT_TRUE(linked.count(f)) << f << " is not linked from report.html";
}

// A converted model's head that kept softmax is the teacher's, as a layer that kept it is: no numbers, and out of
// its layer's mean (helper-50's probe of 2026-12-04: the kept heads' KL 0 entered the means, and a model kept in 2 of
// its heads read KL 0.04 against its own maps' 0.22).
TEST(Report, AHeadThatKeptSoftmaxHasNoNumbersAndStaysOutOfItsLayersMean) {
  TempDir dir;
  auto o = options(dir.file("out"));
  o.maps = {tiny_maps()};
  mimic::convert::ConvertOptions co;
  co.model_dir = mimic::test::model_with_tokenizer("gpt2-prefixed");
  co.maps = tiny_maps();
  co.placement.keep_softmax = "1.0";  // layer 1: head 0 keeps softmax, head 1 runs the maps; layer 0 all maps
  co.out = dir.file("kept");
  mimic::convert::convert(co);
  o.models = {co.out};
  const auto r = mimic::report::report(o);
  const auto& kept = row(r, "kept", 1, 0);
  for (const char* k : {"kl", "ce", "entropy", "spearman", "top_k_mass", "induction", "previous_token", "local_mass"})
    EXPECT_TRUE(kept.at(k).is_null()) << k << ": " << kept.dump();
  // the converted head is the maps' head, and the layer's mean is that head alone
  for (const char* k : {"kl", "ce", "entropy", "spearman", "top_k_mass", "induction", "previous_token", "local_mass"}) {
    const auto maps = row(r, "hedgehog", 1, 1).at(k), conv = row(r, "kept", 1, 1).at(k), mean = row(r, "kept", 1, -1).at(k);
    ASSERT_FALSE(maps.is_null()) << k;
    EXPECT_NEAR(conv.get<double>(), maps.get<double>(), 1e-6) << k;
    EXPECT_NEAR(mean.get<double>(), maps.get<double>(), 1e-6) << k;
  }
  EXPECT_GT(row(r, "kept", 1, -1).at("kl").get<double>(), 0.0);
  // a layer with every head converted keeps the mean of its heads, the maps'
  EXPECT_NEAR(row(r, "kept", 0, -1).at("kl").get<double>(), row(r, "hedgehog", 0, -1).at("kl").get<double>(), 1e-6);
  // the CSV leaves the kept head's cells empty
  const auto csv = mimic::test::read_bytes(dir.file("out/metrics.csv"));
  EXPECT_NE(csv.find("\"kept\",model,1,0,,,,,,,,\n"), std::string::npos) << csv;

  // a --model without results: its Quality row names its attention, and the page says how to add results (it printed
  // an empty sentence ". ." and an empty attention cell: helper-57's probe of 2026-12-04)
  const auto attention = mimic::models::attention_summary(*mimic::models::load_model(co.out));
  ASSERT_EQ(r.quality.size(), 1u);
  EXPECT_EQ(r.quality[0]["attention"], attention);
  const auto html = mimic::test::read_bytes(dir.file("out/report.html"));
  EXPECT_NE(html.find("<p>No quality results given for these models: "), std::string::npos) << html;
  EXPECT_EQ(html.find(". . docs"), std::string::npos);
  // another model's results under its label are refused (they were shown as its own), its own are its row's
  auto with_eval = [&](const std::string& out, const std::string& eval_attention) {
    auto e = options(dir.file(out));
    e.maps = o.maps;
    e.models = {co.out};
    mimic::test::write_bytes(dir.file(out + ".json"), nlohmann::json({{"perplexity", 300.0}, {"predicted", 1000}, {"attention", eval_attention}}).dump());
    e.evals = {"kept=" + dir.file(out + ".json")};
    return e;
  };
  EXPECT_MIMIC_ERROR(mimic::report::report(with_eval("other", "linear (hedgehog, row norm) in layers 0-1")),
                     "--eval kept=" + dir.file("other.json") + ": its model computes linear (hedgehog, row norm) in layers 0-1, while --model " +
                         co.out + " (the label 'kept') computes " + attention + ": one label per model");
  EXPECT_FALSE(std::filesystem::exists(dir.file("other")));
  const auto own = mimic::report::report(with_eval("own", attention));
  EXPECT_EQ(own.quality[0]["perplexity"]["value"], 300.0);
  EXPECT_EQ(own.quality[0]["attention"], attention);
}

// The Quality section's inputs: what `mimic eval --json` prints for --task lm, copy and passkey (also inside
// {"model": ...} of a run with --teacher), one row per label in first-seen order; passkey shares get the Wilson
// interval (0/10: 0–27.8%, the textbook value; 59/100: 49.2–68.1%); a share of the reference's copy gain only when
// that gain's interval stays above zero; malformed or foreign files are one-line errors naming the file.
TEST(ReportQuality, EvalResultsBecomeOneRowPerLabelWithIntervals) {
  namespace rep = mimic::report;
  auto [lo0, hi0] = mimic::eval::wilson95(0, 10);
  EXPECT_EQ(lo0, 0.0);
  EXPECT_NEAR(hi0, 0.27753, 1e-5);
  // none right and all right end at exactly 0 and 1 (0 of 100 left 3.5e-18: helper-53's probe)
  EXPECT_EQ(mimic::eval::wilson95(0, 100).first, 0.0);
  EXPECT_EQ(mimic::eval::wilson95(100, 100).second, 1.0);
  auto [lo59, hi59] = mimic::eval::wilson95(59, 100);
  EXPECT_NEAR(lo59, 0.49201, 1e-5);
  EXPECT_NEAR(hi59, 0.68133, 1e-5);
  TempDir dir;
  auto put = [&](const std::string& name, const std::string& text) {
    mimic::test::write_bytes(dir.file(name), text);
    return dir.file(name);
  };
  const auto ppl = put("ppl.json", R"({"perplexity": 200.0, "nll": 5.3, "predicted": 1000})");
  const auto copy_t = put("copy_t.json", R"({"task": "copy", "segments": 8, "segment_len": 64, "model": {"copy_gain": 2.0, "copy_gain_ci95": 0.5}})");
  const auto copy_s = put("copy_s.json", R"({"task": "copy", "segments": 8, "segment_len": 64, "model": {"copy_gain": 0.5, "copy_gain_ci95": 0.2},
                                             "teacher": {"copy_gain": 2.0, "copy_gain_ci95": 0.5}})");
  const auto pk = put("pk.json", R"({"task": "passkey", "chance": 0.1, "rows": [{"length": 128, "trials": 100, "ranked_first": 59},
                                                                          {"length": 256, "trials": 10, "ranked_first": 0}]})");
  auto rows = rep::read_quality({"teacher=" + copy_t, "student=" + ppl, "student=" + copy_s, "student=" + pk});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].label, "teacher");
  EXPECT_EQ(rows[1].copy_gain, 0.5);  // the model's side, not the teacher's
  EXPECT_EQ(rows[1].perplexity, 200.0);
  EXPECT_TRUE(std::isnan(rows[1].perplexity_lo));  // eval gave no interval
  ASSERT_EQ(rows[1].passkey.size(), 2u);
  EXPECT_NEAR(rows[1].passkey[0].lo, 0.49201, 1e-5);
  auto j = rep::quality_json(rows);
  EXPECT_EQ(j[1]["copy_gain"]["share_of"], "teacher");
  EXPECT_DOUBLE_EQ(j[1]["copy_gain"]["share"].get<double>(), 0.25);
  EXPECT_EQ(j[1]["passkey"][1]["ranked_first"], 0);
  const auto html = rep::quality_html(rows);
  EXPECT_NE(html.find("<td>0.50 &plusmn; 0.20</td><td>25%</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("59/100 (49&ndash;68%)"), std::string::npos) << html;
  // a label from the file's name; a reference gain whose interval reaches zero gives no share
  const auto noisy = put("noisy.json", R"({"task": "copy", "segments": 8, "segment_len": 64, "model": {"copy_gain": 0.015, "copy_gain_ci95": 0.03}})");
  auto n = rep::quality_json(rep::read_quality({noisy, "student=" + copy_t}));
  EXPECT_EQ(n[0]["label"], "noisy");
  EXPECT_TRUE(n[1]["copy_gain"]["share"].is_null());
  EXPECT_NE(rep::quality_html(rep::read_quality({noisy, "student=" + copy_t})).find("n/a"), std::string::npos);
  // one segment: eval writes a null interval, read as none — no share of it, "no interval" on the page (report
  // refused the file eval wrote: helper-94's probe)
  const auto one = put("one.json", R"({"task": "copy", "segments": 1, "segment_len": 87, "model": {"copy_gain": 1.5, "copy_gain_ci95": null,
                                      "copy_gain_sd": null}})");
  auto o1 = rep::quality_json(rep::read_quality({one, "student=" + copy_t}));
  EXPECT_EQ(o1[0]["copy_gain"]["value"], 1.5);
  EXPECT_TRUE(o1[0]["copy_gain"]["ci95"].is_null()) << o1.dump();
  EXPECT_TRUE(o1[1]["copy_gain"]["share"].is_null()) << o1.dump();  // a reference must be known above zero
  EXPECT_NE(rep::quality_html(rep::read_quality({one})).find("<td>1.50 (one segment: no interval)</td>"), std::string::npos);
  // a --teacher run alone: its teacher's side becomes the first row, "teacher", and the reference of the shares
  auto t = rep::quality_json(rep::read_quality({"final=" + copy_s}));
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0]["label"], "teacher");
  EXPECT_EQ(t[0]["copy_gain"]["value"], 2.0);
  EXPECT_DOUBLE_EQ(t[1]["copy_gain"]["share"].get<double>(), 0.25);
  // errors
  EXPECT_MIMIC_ERROR(rep::read_quality({"a=" + ppl, "a=" + ppl}), "a second perplexity result for 'a'");
  // an accuracy without a task is a classifier's: the key it lacks is named (it was "not an eval result ... no accuracy")
  EXPECT_MIMIC_ERROR(rep::read_quality({put("x.json", R"({"accuracy": 0.9})")}), "x.json: missing key 'n'");
  // a classifier's accuracy (with F1 and MCC; Wilson's interval over its examples) and a recall task's (eval's interval
  // over its queries), each in a row: a BERT user's report had attention metrics only (helper-52's probe of 2026-12-04)
  const auto cls = put("cls.json", R"({"model": {"data": "t.jsonl:test", "n": 100, "accuracy": 0.59, "f1": 0.5, "mcc": 0.2, "loss": 0.6},
                                       "teacher": {"data": "t.jsonl:test", "n": 100, "accuracy": 0.8, "f1": 0.75, "mcc": 0.6, "loss": 0.4},
                                       "accuracy_ratio": 0.7375})");
  const auto mqar = put("mqar.json", R"({"task": "mqar", "data": "mqar:vocab=64", "model": {"accuracy": 0.25, "accuracy_ci95": [0.2, 0.3],
                                         "queries": 600, "correct": 150}})");
  auto acc = rep::read_quality({"bert=" + cls, "recall=" + mqar});
  ASSERT_EQ(acc.size(), 3u);
  EXPECT_EQ(acc[0].label, "teacher");
  EXPECT_EQ(acc[1].accuracy_task, "cls");
  EXPECT_NEAR(acc[1].accuracy_lo, lo59, 1e-12);  // 59 of 100, as above
  EXPECT_NEAR(acc[1].accuracy_hi, hi59, 1e-12);
  auto ja = rep::quality_json(acc);
  EXPECT_EQ(ja[0]["accuracy"]["value"], 0.8);
  EXPECT_EQ(ja[1]["accuracy"]["mcc"], 0.2);
  EXPECT_EQ(ja[2]["accuracy"]["task"], "mqar");
  EXPECT_EQ(ja[2]["accuracy"]["ci95"], (nlohmann::json{0.2, 0.3}));
  EXPECT_EQ(ja[2]["accuracy"]["n"], 600);
  EXPECT_FALSE(ja[2]["accuracy"].contains("mcc"));
  const auto acc_html = rep::quality_html(acc);
  EXPECT_NE(acc_html.find("<td class=l>bert</td><td>0.590</td><td>0.492&ndash;0.681</td><td>0.500</td><td>0.200</td>"), std::string::npos) << acc_html;
  EXPECT_NE(acc_html.find("<td class=l>recall</td><td>0.250</td><td>0.200&ndash;0.300</td><td>&ndash;</td><td>&ndash;</td>"), std::string::npos)
      << acc_html;
  EXPECT_NE(acc_html.find("recall: accuracy over 600 queried keys of mqar:vocab=64"), std::string::npos) << acc_html;
  EXPECT_MIMIC_ERROR(rep::read_quality({"a=" + cls, "a=" + cls}), "a second accuracy result for 'a'");
  EXPECT_MIMIC_ERROR(rep::read_quality({put("acc.json", R"({"data": "x", "n": 10, "accuracy": 1.5, "f1": 0, "mcc": 0})")}), "accuracy must lie in [0, 1]");
  // numbers no eval prints are refused (helper-53's probe: an interval [0.9, 0.1] and an F1 of 7 were shown as given)
  EXPECT_MIMIC_ERROR(rep::read_quality({put("f1.json", R"({"n": 10, "accuracy": 0.5, "f1": 7, "mcc": 0})")}), "f1 must lie in [0, 1], got 7");
  EXPECT_MIMIC_ERROR(rep::read_quality({put("mcc.json", R"({"n": 10, "accuracy": 0.5, "f1": 0.5, "mcc": -3})")}), "mcc must lie in [-1, 1], got -3");
  EXPECT_MIMIC_ERROR(rep::read_quality({put("nomcc.json", R"({"n": 10, "accuracy": 0.5, "f1": 0.5})")}), "nomcc.json: missing key 'mcc'");
  for (const char* ci : {"[0.9, 0.1]", "[-5, 7]", "[0.0, 0.037]"})
    EXPECT_MIMIC_ERROR(rep::read_quality({put("ci.json", std::string(R"({"task": "mqar", "model": {"accuracy": 0.25, "queries": 600, "accuracy_ci95": )") + ci + "}}")}),
                       "accuracy_ci95 must be [low, high] around the accuracy 0.25 within [0, 1]");
  // one row is one model: results of two attentions under one label, or two teachers' in the row 'teacher', are refused
  const auto lin = put("lin.json", R"({"perplexity": 300.0, "predicted": 1000, "attention": "linear (hedgehog, row norm) in layers 0-5"})");
  const auto soft = put("soft.json", R"({"task": "copy", "segments": 8, "segment_len": 64, "model": {"copy_gain": 2.0, "copy_gain_ci95": 0.5,
                                           "attention": "softmax in layers 0-5"}})");
  EXPECT_MIMIC_ERROR(rep::read_quality({"m=" + lin, "m=" + soft}), "soft.json: its model computes softmax in layers 0-5, the row 'm' (" + lin +
                                                                       ") linear (hedgehog, row norm) in layers 0-5: one label per model");
  const auto other_t = put("other_t.json", R"({"task": "copy", "segments": 8, "segment_len": 64, "model": {"copy_gain": 0.5, "copy_gain_ci95": 0.2},
                                               "teacher": {"copy_gain": 3.0, "copy_gain_ci95": 0.5}})");
  EXPECT_MIMIC_ERROR(rep::read_quality({"a=" + copy_s, "b=" + other_t}), "other_t.json: its teacher's result differs from the row 'teacher' (" + copy_s);
  EXPECT_EQ(rep::read_quality({"a=" + copy_s, "b=" + copy_s}).size(), 3u);  // the same teacher twice is read once
  // ... also where another --threads summed it in another order (its last digits differ)
  const auto rounded_t = put("rounded_t.json", R"({"task": "copy", "segments": 8, "segment_len": 64, "model": {"copy_gain": 0.7, "copy_gain_ci95": 0.2},
                                                   "teacher": {"copy_gain": 2.0000003, "copy_gain_ci95": 0.49999998}})");
  const auto read_once = rep::read_quality({"a=" + copy_s, "b=" + rounded_t});
  ASSERT_EQ(read_once.size(), 3u);
  EXPECT_EQ(read_once[0].label, "teacher");
  EXPECT_EQ(read_once[0].copy_gain, 2.0);  // the first file's
  EXPECT_MIMIC_ERROR(rep::read_quality({put("bad.json", "{")}), "malformed JSON");
  // a record given where an eval result belongs is named for what it is (not "a NUL byte at offset 8")
  EXPECT_MIMIC_ERROR(rep::read_quality({tiny_record("gpt2-prefixed")}), ": an HDF5 file (a mimic record?), not an eval result");
  EXPECT_MIMIC_ERROR(rep::read_quality({dir.file("missing.json")}), "no file");
  EXPECT_MIMIC_ERROR(rep::read_quality({put("over.json", R"({"task": "passkey", "rows": [{"length": 8, "trials": 5, "ranked_first": 6}]})")}),
                     "ranked_first");
  EXPECT_MIMIC_ERROR(rep::read_quality({put("ci.json", R"({"perplexity": 9, "predicted": 5, "perplexity_ci95": 3})")}), "perplexity_ci95");
}

TEST(Report, BidirectionalPaddedRecordAndChosenHeads) {
  TempDir dir;
  auto o = options(dir.file("out"));
  o.record = tiny_record("bert-mlm");
  o.baselines = {"performer", "relu"};
  o.heads = "1";
  o.layers = "1";
  o.samples = 3;  // the last sample is padded
  o.plot_sample = mimic::record::RecordReader(o.record).samples() - 1;
  auto r = mimic::report::report(o);
  EXPECT_EQ(r.heads, (std::vector<int64_t>{1}));
  EXPECT_EQ(r.rows.size(), 3u * 1 * 2);
  for (const auto& x : r.rows) {
    EXPECT_TRUE(x.at("entropy").is_number()) << x.dump();
    EXPECT_GT(x.at("top_k_mass").get<double>(), 0.0);
    EXPECT_LE(x.at("top_k_mass").get<double>(), 1.0 + 1e-6);
  }
  EXPECT_FALSE(r.rows[0].at("entropy").get<double>() > r.uniform_entropy + 1e-9);  // nothing beats uniform weights
  EXPECT_TRUE(fs::exists(fs::path(o.out) / "heatmaps_layer01.png"));
  EXPECT_TRUE(fs::exists(fs::path(o.out) / "kl_grid.svg"));
}

// A report that ends midway over an earlier one (killed while it drew its figures, helper-63's probe of 2026-12-05)
// left the earlier page and metrics.json beside the new figures: a page describing one run showing another's. The
// earlier page goes before anything is written and the new one comes last: here a figure that cannot be written
// (its name is a folder) ends the run after the first figures, and no page is left to show them.
TEST(Report, AReportEndingMidwayOverAnEarlierOneLeavesNoPageBesideTheNewFigures) {
  TempDir dir;
  auto o = options(dir.file("out"));
  o.layers = "0,1";
  mimic::report::report(o);
  for (const char* f : {"report.html", "metrics.json", "heatmaps_layer01.png", "monotonicity.png"})
    ASSERT_TRUE(fs::exists(fs::path(o.out) / f)) << f;
  fs::remove(fs::path(o.out) / "monotonicity.png");
  fs::create_directories(fs::path(o.out) / "monotonicity.png");  // written after the heat maps and the entropy figure
  o.layers = "0";
  EXPECT_THROW(mimic::report::report(o), mimic::Error);
  EXPECT_FALSE(fs::exists(fs::path(o.out) / "report.html"));
  EXPECT_FALSE(fs::exists(fs::path(o.out) / "metrics.json"));
  // the rerun, the way clear, is one report: the earlier report's layer 1 figures gone
  fs::remove(fs::path(o.out) / "monotonicity.png");
  auto r = mimic::report::report(o);
  EXPECT_EQ(r.layers, (std::vector<int64_t>{0}));
  EXPECT_TRUE(fs::exists(fs::path(o.out) / "report.html"));
  EXPECT_FALSE(fs::exists(fs::path(o.out) / "heatmaps_layer01.png"));
  EXPECT_EQ(nlohmann::json::parse(mimic::test::read_bytes(o.out + "/metrics.json"))["layers"], nlohmann::json::array({0}));
}

// A student whose weights are no distribution (delta's) has no entropy, KL or top-k mass: the printed table says "-"
// and why, as distill's does, where it printed "nan" (helper-50's probe of 2026-12-04).
TEST(ReportCli, AStudentWhoseWeightsAreNoDistributionPrintsADashNotNan) {
  TempDir dir;
  const auto d = delta_student(dir.file("delta.safetensors"));
  const auto r = mimic::test::mimic_cli("report --record " + d.record + " --maps " + d.out + " --out " + dir.file("out"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("nan"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(-: undefined for a student whose weights are no distribution"), std::string::npos) << r.out;
  // the teacher's row keeps its numbers; the student is named by its kind, which runs no feature map
  EXPECT_NE(r.out.find("softmax "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\ndelta "), std::string::npos) << r.out;
}

// A student whose weights may be negative (delta): report's single samples and distill's batches of 1, 2 and 64 give
// the same Spearman head by head, and CE and KL stay undefined in both. (The rule that makes it so — rank such a
// student by its weights in every batch — has its own test with teeth, DistillMetrics.ASignedStudentIsRankedBy…:
// a delta student's samples nearly always hold a negative weight, so this one would pass under the old rule too.)
TEST(Report, ASignedStudentRanksAsDistillRanksItWhateverTheBatch) {
  TempDir dir;
  const auto d = delta_student(dir.file("delta.safetensors"));
  auto o = options(dir.file("out"));
  o.maps = {d.out};
  const auto r = mimic::report::report(o);
  for (const int64_t batch : {1, 2, 64}) {
    dist::DistillOptions e;
    e.record = d.record;
    e.eval_only = true;
    e.maps = d.out;
    e.feature_map.clear();
    e.batch_size = batch;
    e.progress = false;
    const auto ev = dist::distill(e);
    ASSERT_EQ(static_cast<int64_t>(r.samples.size()), ev.val_samples);
    ASSERT_GE(ev.val_samples, 2) << "one sample would not show batches";
    for (size_t l = 0; l < 2; ++l)
      for (int64_t h = 0; h < 2; ++h) {
        const auto& x = row(r, "delta", static_cast<int64_t>(l), h);
        const auto& m = ev.layers[l].after.heads[static_cast<size_t>(h)];
        ASSERT_TRUE(std::isfinite(m.spearman)) << "batch " << batch << " layer " << l << " head " << h;
        EXPECT_NEAR(x.at("spearman").get<double>(), m.spearman, 1e-6) << "batch " << batch << " layer " << l << " head " << h;
        EXPECT_TRUE(std::isnan(m.kl) && std::isnan(m.ce)) << m.kl << " " << m.ce;
        EXPECT_TRUE(!x.contains("kl") || x.at("kl").is_null()) << x;
      }
  }
}

// A record stopped before its end is its final file, the documented way to resume it: report and distill used it without
// a word, their held-out samples other than the finished record's (helper-71's probe). Each says so in a note.
TEST(ReportCli, ARecordStoppedBeforeItsEndIsNotedByReportAndDistill) {
  TempDir dir;
  std::filesystem::copy_file(tiny_record("gpt2-prefixed"), dir.file("r.h5"));
  int64_t n = 0;
  {
    mimic::record::RecordReader whole(dir.file("r.h5"));  // closed before the file is changed
    n = whole.samples();
    EXPECT_EQ(whole.unfinished(), "");
  }
  {
    H5::H5File f(dir.file("r.h5"), H5F_ACC_RDWR);
    f.removeAttr("samples_target");
    mimic::record::write_attr(f, "samples_target", nlohmann::json(n + 5));
  }
  const std::string note = dir.file("r.h5") + " holds " + std::to_string(n) + " of the " + std::to_string(n + 5) +
                           " samples its record was to take: a record stopped before its end (the same mimic record command continues it)";
  EXPECT_EQ(mimic::record::RecordReader(dir.file("r.h5")).unfinished(), note);
  const auto r = mimic::test::mimic_cli("report --record " + dir.file("r.h5") + " --out " + dir.file("out"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("mimic: note: " + note), std::string::npos) << r.err;
  dist::DistillOptions d;
  d.record = dir.file("r.h5");
  d.epochs = 1;
  d.batch_size = 4;
  d.progress = false;
  d.out = dir.file("maps.safetensors");
  std::vector<std::string> notes;
  d.note = [&](const std::string& s) { notes.push_back(s); };
  dist::distill(d);
  EXPECT_EQ(notes, std::vector<std::string>{note});
}

// Maps, or a converted model, are scored only on the record of the teacher they came from: by the digests the maps
// file and the converted model's provenance keep (helper-50's probe of 2026-12-04: another model's record, of the
// same shapes, gave a full table, and distill --eval-only its numbers).
TEST(Report, MapsOrAModelFromAnotherTeacherAreRefusedByTheirDigests) {
  TempDir dir;
  const std::string other = tiny_record("bert-mlm");  // 2 layers, 2 heads of 4, as the GPT-2 fixture the maps came from
  auto o = options(dir.file("out"));
  o.record = other;
  o.maps = {tiny_maps()};
  EXPECT_MIMIC_ERROR(mimic::report::report(o), "not from the teacher of " + other);
  mimic::convert::ConvertOptions co;
  co.model_dir = mimic::test::model_with_tokenizer("gpt2-prefixed");
  co.maps = tiny_maps();
  co.out = dir.file("converted");
  mimic::convert::convert(co);
  o.maps = {};
  o.models = {co.out};
  EXPECT_MIMIC_ERROR(mimic::report::report(o), "converted from a teacher of digest");
  dist::DistillOptions e;
  e.record = other;
  e.eval_only = true;
  e.maps = tiny_maps();
  e.progress = false;
  EXPECT_MIMIC_ERROR(dist::distill(e), "not from the teacher of " + other);
  // on their own teacher's record both are reported
  o.record = tiny_record("gpt2-prefixed");
  o.maps = {tiny_maps()};
  EXPECT_NO_THROW(mimic::report::report(o));
}

TEST(Report, ErrorsAreClear) {
  TempDir dir;
  auto o = options(dir.file("out"));
  o.baselines = {"nope"};
  EXPECT_MIMIC_ERROR(mimic::report::report(o), "nope");
  o.baselines = {};
  o.layers = "5";
  EXPECT_MIMIC_ERROR(mimic::report::report(o), "--layers");
  o.layers = "all";
  o.heads = "0-9";
  EXPECT_MIMIC_ERROR(mimic::report::report(o), "--heads '0-9'");
  o.heads = "all";
  o.plot_sample = 0;  // not among the last 10%
  EXPECT_MIMIC_ERROR(mimic::report::report(o), "--plot-sample 0");
  o.plot_sample = -1;
  o.maps = {dir.file("missing.safetensors")};
  EXPECT_MIMIC_ERROR(mimic::report::report(o), "no file");
  // a model that was never converted: every layer is the teacher (it was reported as a copy of softmax, KL 0: the
  // eighth probe of 2026-11-29)
  o.maps = {};
  o.models = {mimic::test::model_with_tokenizer("gpt2-prefixed")};
  EXPECT_MIMIC_ERROR(mimic::report::report(o), "no layer among the reported ones [0,1] runs linear attention");
  EXPECT_FALSE(fs::exists(o.out));
}

TEST(ReportCli, HelpJsonAndHeadlessChromium) {
  auto help = mimic::test::mimic_cli("report --help");
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("--baseline"), std::string::npos);
  TempDir dir;
  auto run = mimic::test::mimic_cli("report --record " + tiny_record("gpt2-prefixed") + " --maps hh=" + tiny_maps() +
                                    " --baseline elu --out " + dir.file("out") + " --json --threads 1");
  ASSERT_EQ(run.code, 0) << run.err;
  auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j.at("sources")[1].at("name"), "hh");
  auto bad = mimic::test::mimic_cli("report --record " + tiny_record("gpt2-prefixed") + " --baseline nope --out " + dir.file("x"));
  EXPECT_NE(bad.code, 0);
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;

  // the page renders in a real browser: headless Chromium's screenshot is not blank
  if (std::system("command -v chromium >/dev/null 2>&1") != 0) GTEST_SKIP() << "chromium is not installed (tools/setup.sh installs it)";
  const std::string shot = dir.file("shot.png");
  const std::string cmd = "chromium --headless --disable-gpu --no-sandbox --hide-scrollbars --screenshot=" + shot +
                          " --window-size=1200,1600 file://" + fs::absolute(dir.file("out/report.html")).string() + " >" +
                          dir.file("chromium.log") + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << mimic::test::read_bytes(dir.file("chromium.log"));
  auto p = read_png(shot);
  EXPECT_EQ(p.width, 1200);
  EXPECT_GT(p.variance, 50.0);
  EXPECT_GT(p.non_white, 0.02);  // text, tables and the first figure
}

TEST(ReportPlot, NiceTicksAndLabels) {
  auto t = mimic::report::nice_ticks(3.68, 4.64, 6);
  ASSERT_EQ(t.size(), 5u);  // 3.8, 4.0, ..., 4.6
  EXPECT_NEAR(t.front(), 3.8, 1e-12);
  EXPECT_NEAR(t.back(), 4.6, 1e-12);
  EXPECT_EQ(mimic::report::tick_label(t.back(), t[1] - t[0]), "4.6");
  EXPECT_EQ(mimic::report::tick_label(-7.5, 2.5), "-7.5");
  EXPECT_EQ(mimic::report::tick_label(1000, 500), "1000");
  EXPECT_EQ(mimic::report::tick_label(0.05, 0.01), "0.05");
  // no ticks asked, none given (a log axis draws its own; one linear tick would label 1000 kB "3")
  EXPECT_TRUE(mimic::report::nice_ticks(2.3, 3.1, 0).empty());
  EXPECT_EQ(mimic::report::nice_ticks(2.3, 3.1, 1).size(), 1u);
  // colour maps: the ends are viridis' dark violet and yellow; NaN is grey
  EXPECT_NEAR(mimic::report::viridis(0).b, 84 / 255.0, 1e-9);
  EXPECT_NEAR(mimic::report::viridis(1).r, 253 / 255.0, 1e-9);
  EXPECT_NEAR(mimic::report::heat(NAN).g, 0.85, 1e-9);
}

// report --pareto: a table of results becomes one figure (PNG + SVG) with a curve per method on a log x axis; a
// malformed table names the key at fault.
// Titles and panel labels fit their room (issue 37: heatmap titles were clipped): a string that fits is drawn as
// given; a longer one shrinks, to 60% of its size at most; beyond that its middle gives way to "…", keeping whole
// UTF-8 characters and both ends.
TEST(ReportPlot, LongTitlesShrinkThenLoseTheirMiddleToFit) {
  using mimic::report::fitted;
  using mimic::report::text_width;
  auto* surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 8, 8);
  auto* cr = cairo_create(surface);
  auto [a, size_a] = fitted(cr, "layer 3", 14, 500);
  EXPECT_EQ(a, "layer 3");
  EXPECT_EQ(size_a, 14);
  const std::string t = "Attention weights, layer 3, sample 57: first 64 queries (rows) x keys (columns)";
  const double w = text_width(cr, t, 17, true);
  auto [b, size_b] = fitted(cr, t, 17, 0.8 * w, true);
  EXPECT_EQ(b, t);
  EXPECT_LT(size_b, 17);
  EXPECT_LE(text_width(cr, b, size_b, true), 0.8 * w);
  auto [c, size_c] = fitted(cr, t, 17, 0.3 * w, true);
  EXPECT_NEAR(size_c, 0.6 * 17, 1e-12);
  EXPECT_NE(c.find("\u2026"), std::string::npos);
  EXPECT_EQ(c.substr(0, 9), "Attention");
  EXPECT_EQ(c.back(), ')');
  EXPECT_LE(text_width(cr, c, size_c, true), 0.3 * w);
  // multi-byte characters are dropped whole: what remains is valid UTF-8
  const std::string dots = "q·k − max · q·k − max · q·k − max · q·k − max · q·k − max";
  auto [d, size_d] = fitted(cr, dots, 13, 0.4 * text_width(cr, dots, 13));
  EXPECT_LE(text_width(cr, d, size_d), 0.4 * text_width(cr, dots, 13));
  for (size_t i = 0; i < d.size();) {
    const auto lead = static_cast<unsigned char>(d[i]);
    const size_t len = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 0;
    ASSERT_GT(len, 0u) << "a continuation byte starts a character at " << i << " in " << d;
    for (size_t k = 1; k < len; ++k) ASSERT_EQ(static_cast<unsigned char>(d[i + k]) & 0xC0, 0x80) << d;
    i += len;
  }
  cairo_destroy(cr);
  cairo_surface_destroy(surface);
}

TEST(ReportPareto, DrawsOneCurvePerMethodAndRefusesMalformedTables) {
  TempDir dir;
  nlohmann::json t = {{"title", "state against copy gain kept"},
                      {"x_label", "decoding state at 512 tokens (kB)"},
                      {"y_label", "copy gain kept (share of the teacher's)"},
                      {"x_log", true},
                      {"series", {{{"name", "probe"}, {"points", {{{"x", 300}, {"y", 0.1}, {"label", "K=0"}}, {{"x", 700}, {"y", 0.9}, {"label", "K=8"}}}}},
                                  {{"name", "kl"}, {"points", {{{"x", 300}, {"y", 0.1}}, {{"x", 700}, {"y", 0.2}}}}}}},
                      {"reference", {{"y", 1.0}, {"label", "teacher"}}}};
  mimic::test::write_bytes(dir.file("t.json"), t.dump());
  auto files = mimic::report::write_pareto(dir.file("t.json"), dir.file("fig"));
  ASSERT_EQ(files.size(), 2u);
  auto png = read_png(files[0]);
  EXPECT_EQ(png.width, 940);
  EXPECT_EQ(png.height, 500);
  EXPECT_GT(png.non_white, 0.01);
  const auto svg = mimic::test::read_bytes(files[1]);
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  auto bad = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& msg) {
    auto b = t;
    edit(b);
    mimic::test::write_bytes(dir.file("b.json"), b.dump());
    EXPECT_MIMIC_ERROR(mimic::report::write_pareto(dir.file("b.json"), dir.file("bad")), msg);
  };
  bad([](nlohmann::json& b) { b["series"] = nlohmann::json::array(); }, "non-empty array");
  bad([](nlohmann::json& b) { b["series"][0]["points"][0]["x"] = 0; }, "x must be > 0 on a log axis");
  bad([](nlohmann::json& b) { b["series"][1].erase("name"); }, "series[1]");
  auto cli = mimic::test::mimic_cli("report --pareto " + dir.file("t.json") + " --record " + dir.file("t.json") + " --out " + dir.file("x"));
  EXPECT_NE(cli.code, 0);
  EXPECT_NE(cli.err.find("one of them"), std::string::npos) << cli.err;
}
