// The `convert` stage: a converted model saved and reloaded gives identical logits, keeps the teacher's tensors
// byte for byte and its unconverted layers' attention exactly; partial conversion; maps from another model, of
// another shape or for absent layers are refused; damaged converted directories are clear errors.
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <tuple>
#include <nlohmann/json.hpp>

#include "mimic/attention/attention.h"
#include "mimic/attention/linear_kernel.h"
#include "mimic/convert/convert.h"
#include "mimic/distill/distill.h"
#include "mimic/distill/maps_file.h"
#include "mimic/io/atomic_file.h"
#include "mimic/io/safetensors.h"
#include "mimic/io/tensor_store.h"
#include "mimic/models/model.h"
#include "mimic/text/tokenizer.h"
#include "test_util.h"

using mimic::test::TempDir;
namespace fs = std::filesystem;

namespace {

const char* const kText = mimic::test::kDickens;

// Maps distilled (online, 3 epochs) from the tiny GPT-2 fixture (2 layers, 2 heads of 4), with SLA gates so that
// every kind of kernel tensor is exercised; made once per test process.
// Online distillation from the tiny GPT-2 fixture on 8 samples of 16 tokens of kText (written into `dir`), into `out`.
mimic::distill::DistillOptions tiny_distill(const TempDir& dir, const std::string& out) {
  mimic::test::write_bytes(dir.file("t.txt"), mimic::test::text_lines(kText, 20));
  mimic::distill::DistillOptions o;
  o.model_dir = mimic::test::model_with_tokenizer("gpt2-prefixed");
  o.data = dir.file("t.txt");
  o.samples = 8;
  o.seq_len = 16;
  o.batch_size = 4;
  o.val_fraction = 0.25;
  o.progress = false;
  o.out = out;
  return o;
}

// Hybrid maps (window 2, one epoch) distilled into `dir`; the options, for distilling again with others.
mimic::distill::DistillOptions tiny_hybrid_maps(const TempDir& dir) {
  auto d = tiny_distill(dir, dir.file("hybrid.safetensors"));
  d.attention = "hybrid:window=2";
  d.epochs = 1;
  mimic::distill::distill(d);
  return d;
}

const std::string& tiny_maps() {
  static TempDir dir;
  static std::string path = [] {
    auto o = tiny_distill(dir, dir.file("maps.safetensors"));
    o.feature_map = "hedgehog";
    o.sla = true;
    o.epochs = 3;
    mimic::distill::distill(o);
    return o.out;
  }();
  return path;
}

std::string teacher() { return mimic::test::model_with_tokenizer("gpt2-prefixed"); }

at::Tensor logits(mimic::models::Model& m, mimic::attention::AttentionCapture* layer0 = nullptr) {
  torch::NoGradGuard no_grad;
  mimic::models::ForwardInputs in;
  in.input_ids = torch::tensor({{464, 3290, 318, 257, 1332, 13, 632, 373, 262, 1266, 286, 1661}}, torch::kLong);
  if (layer0) m.set_attention_capture(0, layer0);
  auto out = m.forward(in).logits;
  if (layer0) m.set_attention_capture(0, nullptr);
  return out;
}

mimic::convert::ConvertOptions options(const std::string& out, const std::string& layers = "") {
  mimic::convert::ConvertOptions o;
  o.model_dir = teacher();
  o.maps = tiny_maps();
  o.out = out;
  o.layers = layers;
  return o;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const mimic::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(Convert, SavedAndReloadedGivesIdenticalLogitsAndKeepsTheTeacherTensors) {
  TempDir dir;
  auto maps = mimic::distill::DistilledMaps::open(tiny_maps());
  ASSERT_EQ(maps.layers(), (std::vector<int64_t>{0, 1}));
  auto in_memory = mimic::models::load_model(teacher());
  auto r = mimic::convert::convert_model(*in_memory, teacher(), maps, "", false);
  EXPECT_TRUE(r.teacher_checked);
  EXPECT_EQ(r.layers, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(r.summary, "linear (hedgehog, row norm, SLA gates) in layers 0-1");

  auto written = mimic::convert::convert(options(dir.file("conv")));
  auto reloaded = mimic::models::load_model(written.out);
  EXPECT_EQ(reloaded->attention_kernel(0)->kind(), "linear");
  EXPECT_TRUE(torch::equal(logits(*in_memory), logits(*reloaded)));
  // the converted model really differs from the teacher
  auto t = mimic::models::load_model(teacher());
  EXPECT_GT((logits(*t) - logits(*reloaded)).abs().max().item<double>(), 1e-4);
  // the kernels are the distilled ones
  auto k = std::dynamic_pointer_cast<mimic::attention::LinearAttention>(reloaded->attention_kernel(1));
  ASSERT_TRUE(k);
  auto f = mimic::io::SafeTensorsFile::open(tiny_maps());
  EXPECT_TRUE(torch::equal(k->gates->w_k, f.load("layer_01.gates.w_k", at::kFloat)));
  // the teacher's tensors are written unchanged (same keys, dtypes, bytes); the new ones are mimic.attention.*
  auto a = mimic::io::TensorStore::open_dir(teacher()), b = mimic::io::TensorStore::open_dir(written.out);
  size_t extra = 0;
  for (const auto& n : b.names()) {
    if (n.rfind("mimic.attention.", 0) == 0) {
      ++extra;
      continue;
    }
    ASSERT_TRUE(a.contains(n)) << n;
    EXPECT_EQ(a.info(n).dtype, b.info(n).dtype) << n;
    EXPECT_TRUE(torch::equal(a.load(n), b.load(n))) << n;
  }
  EXPECT_EQ(b.names().size() - extra, a.names().size());
  EXPECT_EQ(extra, 2u * 6u);  // per layer: q/k weight and bias of the map, w_q and w_k of the gates
  // the digest of the teacher's own weights is kept (the maps still fit the converted model)
  EXPECT_EQ(mimic::models::model_digest(*reloaded), mimic::models::model_digest(*t));
  // ... and attention_digest tells the conversion from its teacher and from another conversion (finetune's
  // fingerprint holds both: issue 38)
  const auto attention = mimic::models::attention_digest(*reloaded);
  EXPECT_NE(attention, mimic::models::attention_digest(*t));
  EXPECT_EQ(attention, mimic::models::attention_digest(*in_memory));
  auto other = mimic::models::load_model(written.out);
  {
    torch::NoGradGuard no_grad;
    std::dynamic_pointer_cast<mimic::attention::LinearAttention>(other->attention_kernel(1))->gates->w_k.add_(1e-3);
  }
  EXPECT_NE(mimic::models::attention_digest(*other), attention);
  // mimic.json describes every layer and the provenance
  auto j = nlohmann::json::parse(mimic::io::read_text_file(dir.file("conv/mimic.json")));
  EXPECT_EQ(j["format"], "mimic-converted-1");
  EXPECT_EQ(j["attention"].size(), 2u);
  EXPECT_EQ(j["attention"][1]["options"]["feature_map"], "hedgehog");
  EXPECT_EQ(j["provenance"]["conversions"][0]["layers"], nlohmann::json({0, 1}));
  // saved again, it is the same model; every layer back on softmax removes mimic.json
  reloaded->save(dir.file("again"));
  EXPECT_TRUE(torch::equal(logits(*mimic::models::load_model(dir.file("again"))), logits(*in_memory)));
  for (int64_t l = 0; l < 2; ++l) reloaded->set_attention_kernel(l, std::make_shared<mimic::attention::SoftmaxAttention>());
  reloaded->save(dir.file("again"));
  EXPECT_FALSE(fs::exists(dir.file("again/mimic.json")));
  EXPECT_TRUE(torch::equal(logits(*mimic::models::load_model(dir.file("again"))), logits(*t)));
}

// A save over an earlier result that stops between the weights and mimic.json left the new weights beside the old
// description, and the folder loaded as the old kind of attention (helper-50's probe of 2026-12-04: a convert killed
// over another convert's folder, 1 try in 17). config.json, the file every load reads first, is now removed before
// anything is replaced and written last. The stop is made here by a folder where mimic.json's temporary goes (its
// name carries this process's id), so that the write of mimic.json fails after the weights were replaced.
TEST(Convert, ASaveStoppedBeforeItsEndLeavesAFolderThatIsRefusedNotOneThatLoads) {
  TempDir dir;
  const std::string out = dir.file("conv");
  mimic::convert::convert(options(out, "1"));
  auto m = mimic::models::load_model(out);
  const std::string blocker = out + "/mimic.json.tmp." + std::to_string(::getpid());
  fs::create_directories(blocker + "/inside");
  const auto stopped = error_of([&] { m->save(out); });
  EXPECT_NE(stopped.find("mimic.json"), std::string::npos) << stopped;
  EXPECT_TRUE(fs::exists(out + "/model.safetensors"));
  EXPECT_FALSE(fs::exists(out + "/config.json"));
  const auto refused = error_of([&] { mimic::models::load_model(out); });
  EXPECT_NE(refused.find("no config.json beside its weights"), std::string::npos) << refused;
  EXPECT_NE(refused.find("run the command that wrote it again"), std::string::npos) << refused;
  // the same save, unblocked, makes the folder whole again
  fs::remove_all(blocker);
  m->save(out);
  EXPECT_TRUE(torch::equal(logits(*mimic::models::load_model(out)), logits(*m)));
}

// A converted model converted again loses its converted layers' attention (kept heads, caches) to the maps: said in
// the warning, with the --layers that converts only the rest (helper-50's probe of 2026-12-04: without a word).
TEST(Convert, ConvertingAConvertedModelAgainSaysWhichLayersItReplaces) {
  TempDir dir;
  const auto first = mimic::convert::convert(options(dir.file("one"), "1"));
  EXPECT_EQ(first.warning.find("runs converted attention"), std::string::npos) << first.warning;
  auto o = options(dir.file("again"));
  o.model_dir = dir.file("one");
  const auto again = mimic::convert::convert(o);
  EXPECT_NE(again.warning.find("runs converted attention in layer(s) 1 ("), std::string::npos) << again.warning;
  EXPECT_NE(again.warning.find("; --layers 0 converts only its softmax layers"), std::string::npos) << again.warning;
  o.out = dir.file("rest");
  o.layers = "0";
  EXPECT_EQ(mimic::convert::convert(o).warning.find("runs converted attention"), std::string::npos);
}

// The probe reads text: a model folder without a tokenizer is refused saying so, with the placements that need none
// (helper-50's probe of 2026-12-04: only "no tokenizer in DIR").
TEST(Convert, AProbePlacementOnAModelWithoutATokenizerNamesThePlacementsThatNeedNone) {
  TempDir dir;
  auto o = options(dir.file("c"));
  o.model_dir = mimic::test::fixture("models/gpt2-prefixed");  // the committed fixture: weights without tokenizer files
  o.placement.keep_softmax = "auto:1";
  o.placement.rule = "probe";
  const auto e = error_of([&] { mimic::convert::convert(o); });
  EXPECT_NE(e.find("--keep-softmax auto:1 ranks heads by the probe, which reads text"), std::string::npos) << e;
  EXPECT_NE(e.find("or --placement kl, or the heads as a list"), std::string::npos) << e;
  o.placement.rule = "kl";
  EXPECT_NO_THROW(mimic::convert::convert(o));
}

TEST(Convert, PartialConversionLeavesOtherLayersExactlySoftmax) {
  TempDir dir;
  auto r = mimic::convert::convert(options(dir.file("conv"), "1"));
  EXPECT_EQ(r.layers, (std::vector<int64_t>{1}));
  EXPECT_EQ(r.summary, "softmax in layer 0; linear (hedgehog, row norm, SLA gates) in layer 1");
  auto conv = mimic::models::load_model(r.out);
  auto t = mimic::models::load_model(teacher());
  EXPECT_EQ(conv->attention_kernel(0)->kind(), "softmax");
  EXPECT_EQ(conv->attention_kernel(1)->kind(), "linear");
  mimic::attention::AttentionCapture ct, cc;
  auto lt = logits(*t, &ct), lc = logits(*conv, &cc);
  EXPECT_TRUE(torch::equal(ct.o, cc.o));  // layer 0: bit-identical attention output
  EXPECT_GT((lt - lc).abs().max().item<double>(), 1e-4);
  // converting the rest later with the same maps works (the digest ignores kernels) and equals converting all
  auto rest = mimic::convert::convert([&] {
    auto o = options(dir.file("all"), "0");
    o.model_dir = r.out;
    return o;
  }());
  EXPECT_EQ(rest.summary, "linear (hedgehog, row norm, SLA gates) in layers 0-1");
  auto all = mimic::convert::convert(options(dir.file("direct")));
  EXPECT_TRUE(torch::equal(logits(*mimic::models::load_model(rest.out)), logits(*mimic::models::load_model(all.out))));
}

TEST(Convert, KeepSoftmaxAutoKeepsTheHeadsWithTheHighestDistilledKlAndSaysWhy) {
  TempDir dir;
  auto maps = mimic::distill::DistilledMaps::open(tiny_maps());
  // the two worst-fitting heads by the held-out KL distill measured
  std::vector<std::tuple<double, int64_t, int64_t>> all;
  for (int64_t l : {0, 1})
    for (int64_t h = 0; h < 2; ++h) all.emplace_back(maps.head_kl(l)[static_cast<size_t>(h)], l, h);
  std::sort(all.rbegin(), all.rend());
  auto o = options(dir.file("conv"));
  o.placement.keep_softmax = "auto:2";
  o.placement.rule = "kl";
  auto r = mimic::convert::convert(o);
  ASSERT_EQ(r.placement.at("kept").size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(r.placement["kept"][i]["layer"], std::get<1>(all[i]));
    EXPECT_EQ(r.placement["kept"][i]["head"], std::get<2>(all[i]));
    EXPECT_DOUBLE_EQ(r.placement["kept"][i]["kl"].get<double>(), std::get<0>(all[i]));
  }
  EXPECT_DOUBLE_EQ(r.placement["next_kl"].get<double>(), std::get<0>(all[2]));
  auto j = nlohmann::json::parse(mimic::io::read_text_file(dir.file("conv/mimic.json")));
  EXPECT_EQ(j["provenance"]["conversions"][0]["placement"], r.placement);
  // the kept heads compute the teacher's attention exactly; the model reloads with them
  auto conv = mimic::models::load_model(r.out);
  auto t = mimic::models::load_model(teacher());
  const int64_t l = std::get<1>(all[0]), h = std::get<2>(all[0]);
  mimic::attention::AttentionCapture ct, cc;
  auto lt = logits(*t, l == 0 ? &ct : nullptr), lc = logits(*conv, l == 0 ? &cc : nullptr);
  if (l == 0) EXPECT_TRUE(torch::equal(ct.o.select(1, h), cc.o.select(1, h)));
  // a layer whose every head is kept stays softmax; hand-picked lists and bad specs
  auto o2 = options(dir.file("list"));
  o2.placement.keep_softmax = "0.0,0.1,1.1";
  auto r2 = mimic::convert::convert(o2);
  EXPECT_EQ(r2.layers, (std::vector<int64_t>{1}));
  EXPECT_EQ(mimic::models::load_model(r2.out)->attention_kernel(0)->kind(), "softmax");
  EXPECT_EQ(mimic::models::load_model(r2.out)->attention_kernel(1)->kind(), "mixed");
  EXPECT_EQ(r2.warning.find("every head"), std::string::npos);
  // every head kept: nothing converted, and said (a warning, not an error: auto:P% may need every head)
  auto o3 = options(dir.file("every"));
  o3.placement.keep_softmax = "auto:4";
  o3.placement.rule = "kl";
  auto r3 = mimic::convert::convert(o3);
  EXPECT_TRUE(r3.layers.empty());
  EXPECT_NE(r3.warning.find("every head of the layers to convert keeps softmax (--keep-softmax auto:4): nothing is converted"),
            std::string::npos) << r3.warning;
  for (const auto& [spec, msg] : std::vector<std::pair<std::string, std::string>>{{"auto:0", "a number of heads (>= 1)"},
                                                                                  {"auto:5", "K must be in [1, 4]"},
                                                                                  {"auto:0%", "P in (0, 100]"},
                                                                                  {"auto:50%", "only --placement probe measures"},
                                                                                  {"auto:x", "expected auto:K"},
                                                                                  {"1.5", "not a head of a converted layer"},
                                                                                  {"1.1,1.1", "given twice"},
                                                                                  {"1-1", "not LAYER.HEAD"}}) {
    auto bad = options(dir.file("bad"));
    bad.placement.keep_softmax = spec;
    bad.placement.rule = "kl";
    EXPECT_MIMIC_ERROR(mimic::convert::convert(bad), msg);
  }
}

TEST(Convert, ProbePlacementWritesTheModelItMeasuredAndRecordsEveryStep) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 40; ++i) text += std::string(kText) + "\n";  // lines: the probe reads the file's train split
  mimic::test::write_bytes(dir.file("own.txt"), text);
  auto o = options(dir.file("probe"));
  o.placement.keep_softmax = "auto:2";  // the default rule for a causal LM: the probe
  o.placement.calibration.data = dir.file("own.txt");
  o.placement.calibration.segments = 4;
  o.placement.calibration.segment_len = 16;
  o.placement.calibration.passkeys = 2;
  o.placement.progress = false;
  auto r = mimic::convert::convert(o);
  const auto& p = r.placement;
  EXPECT_EQ(p.at("placement"), "probe");
  EXPECT_EQ(p.at("rule"), "auto:2");
  ASSERT_EQ(p.at("steps").size(), 2u);
  ASSERT_EQ(p.at("kept").size(), 2u);
  EXPECT_EQ(p.at("screen").size(), 4u);
  EXPECT_EQ(p.at("calibration").at("source"), "the train split of " + dir.file("own.txt"));
  // the passkey trials are drawn from the seed, so a placement is reproduced with it: recorded (helper-93's probe)
  EXPECT_EQ(p.at("calibration").at("seed"), o.placement.calibration.seed);
  EXPECT_FALSE(p.contains("reference"));  // the teacher as loaded is all softmax
  for (size_t i = 0; i < 2; ++i) {
    const auto& s = p["steps"][i];
    EXPECT_EQ(s["layer"], p["kept"][i]["layer"]);
    EXPECT_EQ(s["head"], p["kept"][i]["head"]);
    EXPECT_GE(s["seconds"].get<double>(), 0.0);
    EXPECT_GE(s["measured"].get<int64_t>(), 0);
    EXPECT_LE(s["passkey_ranked_first"].get<int64_t>(), 2);
    EXPECT_DOUBLE_EQ(s["score_before"].get<double>(), i == 0 ? p["student"]["score"].get<double>() : p["steps"][i - 1]["score"].get<double>());
  }
  // 2 + 2 × 4 screened sets, then at most 3 new ones in the second step (the first step's sets were screened)
  EXPECT_GE(p["measured"].get<int64_t>(), 10);
  EXPECT_LE(p["measured"].get<int64_t>(), 13);
  auto j = nlohmann::json::parse(mimic::io::read_text_file(dir.file("probe/mimic.json")));
  EXPECT_EQ(j["provenance"]["conversions"][0]["placement"], p);
  // the written model is the one the last step measured; the teacher and the all-linear model are its ends
  auto tok = mimic::text::load_tokenizer(teacher());
  auto cal_options = o.placement.calibration;
  auto cal = mimic::convert::probe_calibration(*tok, 64, "", cal_options);
  auto measured = mimic::convert::probe_measure(*mimic::models::load_model(r.out), cal);
  EXPECT_NEAR(measured.copy_gain, p["steps"][1]["copy_gain"].get<double>(), 1e-5);
  EXPECT_NEAR(measured.key_gain, p["steps"][1]["key_gain"].get<double>(), 1e-5);
  EXPECT_NEAR(mimic::convert::probe_measure(*mimic::models::load_model(teacher()), cal).lm_loss, p["teacher"]["lm_loss"].get<double>(),
              1e-5);
  auto linear = mimic::convert::convert(options(dir.file("linear")));
  EXPECT_NEAR(mimic::convert::probe_measure(*mimic::models::load_model(linear.out), cal).copy_gain,
              p["student"]["copy_gain"].get<double>(), 1e-5);
  // the same run again chooses the same heads (the calibration is a function of the seed)
  auto again = mimic::convert::convert([&] {
    auto o2 = o;
    o2.out = dir.file("again");
    return o2;
  }());
  EXPECT_EQ(again.placement["kept"], p["kept"]);
  // a model with a layer converted already, probed in its other layer: its shares are of that model's values, not of
  // the softmax model's — said, and recorded (94% of a model that kept 4% of the teacher's copy gain read as the
  // teacher's: helper-93's probe)
  auto part = mimic::convert::convert(options(dir.file("part"), "0"));
  auto onto = o;
  onto.model_dir = part.out;
  onto.layers = "1";
  onto.out = dir.file("onto");
  onto.placement.keep_softmax = "auto:1";
  auto twice = mimic::convert::convert(onto);
  EXPECT_NE(twice.warning.find("the probe's reference is " + part.out + " as given, whose layer(s) 0 already run converted attention"),
            std::string::npos) << twice.warning;
  EXPECT_NE(twice.placement.value("reference", "").find("whose layer(s) 0 run converted attention"), std::string::npos) << twice.placement.dump();
  // the tiny random teacher copies nothing (gain below 0.05 nats/token), so a share of it is refused, naming the gain
  auto share = o;
  share.out = dir.file("share");
  share.placement.keep_softmax = "auto:100%";
  ASSERT_LT(p["teacher"]["copy_gain"].get<double>(), 0.05);
  EXPECT_MIMIC_ERROR(mimic::convert::convert(share), "no in-context copying to keep a share of");
  auto bad = o;
  bad.out = dir.file("bad");
  bad.placement.calibration.segment_len = 33;
  EXPECT_MIMIC_ERROR(mimic::convert::convert(bad), "--probe-segment-len 33 must lie in 2..32");
  EXPECT_FALSE(fs::exists(dir.file("bad")));
}

TEST(Convert, RefusesMapsOfAnotherModelShapeOrLayer) {
  TempDir dir;
  // another model of the same shape: the teacher with one weight changed
  auto other = mimic::models::load_model(teacher());
  {
    torch::NoGradGuard g;
    auto p = other->module().named_parameters()["h.0.attn.c_attn.weight"];
    p.add_(0.01);
  }
  other->save(dir.file("other"));
  auto o = options(dir.file("x"));
  o.model_dir = dir.file("other");
  auto msg = error_of([&] { mimic::convert::convert(o); });
  EXPECT_NE(msg.find("was distilled from"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not from " + dir.file("other") + " (digest " + mimic::models::model_digest(*other) + ")"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--force"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(dir.file("x")));
  o.force = true;
  auto forced = mimic::convert::convert(o);
  EXPECT_FALSE(forced.teacher_checked);
  EXPECT_EQ(forced.warning.find("--force: " + o.maps + " was distilled from "), 0u) << forced.warning;
  EXPECT_NE(forced.warning.find("not from " + dir.file("other") + " (digest " + mimic::models::model_digest(*other) + ")"), std::string::npos)
      << forced.warning;
  // another shape (BERT, 4 heads? the fixture's heads/dims differ from the maps')
  auto bert = options(dir.file("y"));
  bert.model_dir = mimic::test::model_with_tokenizer("bert-base");
  msg = error_of([&] { mimic::convert::convert(bert); });
  EXPECT_NE(msg.find("maps fit only the model they were distilled from"), std::string::npos) << msg;
  // layers the maps do not hold / the model does not have
  msg = error_of([&] { mimic::convert::convert(options(dir.file("z"), "5")); });
  EXPECT_NE(msg.find("layer 5 does not exist"), std::string::npos) << msg;
  // not a distill output
  auto nd = options(dir.file("w"));
  nd.maps = teacher() + "/model.safetensors";
  msg = error_of([&] { mimic::convert::convert(nd); });
  EXPECT_NE(msg.find("not a mimic distill output"), std::string::npos) << msg;
  // --out is the model itself
  msg = error_of([&] { mimic::convert::convert(options(teacher())); });
  EXPECT_NE(msg.find("is the model directory itself"), std::string::npos) << msg;
}

TEST(Convert, DamagedConvertedDirectoriesAreClearErrors) {
  TempDir dir;
  auto r = mimic::convert::convert(options(dir.file("conv")));
  // kernel tensors without mimic.json
  fs::copy(r.out, dir.file("nojson"), fs::copy_options::recursive);
  fs::remove(dir.file("nojson/mimic.json"));
  auto msg = error_of([&] { mimic::models::load_model(dir.file("nojson")); });
  EXPECT_NE(msg.find("belongs to a converted model"), std::string::npos) << msg;
  // mimic.json for the wrong number of layers
  fs::copy(r.out, dir.file("short"), fs::copy_options::recursive);
  auto j = nlohmann::json::parse(mimic::io::read_text_file(dir.file("short/mimic.json")));
  j["attention"].erase(1);
  mimic::test::write_bytes(dir.file("short/mimic.json"), j.dump());
  msg = error_of([&] { mimic::models::load_model(dir.file("short")); });
  EXPECT_NE(msg.find("describes 1 layers, the model has 2"), std::string::npos) << msg;
  // an unknown map, and a kernel tensor missing from the weights
  fs::copy(r.out, dir.file("badmap"), fs::copy_options::recursive);
  j = nlohmann::json::parse(mimic::io::read_text_file(dir.file("badmap/mimic.json")));
  j["attention"][0]["options"]["feature_map"] = "nope";
  mimic::test::write_bytes(dir.file("badmap/mimic.json"), j.dump());
  msg = error_of([&] { mimic::models::load_model(dir.file("badmap")); });
  EXPECT_NE(msg.find("layer 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("nope"), std::string::npos) << msg;
  fs::copy(r.out, dir.file("nogates"), fs::copy_options::recursive);
  j = nlohmann::json::parse(mimic::io::read_text_file(dir.file("nogates/mimic.json")));
  for (auto& e : j["attention"]) e["options"]["feature_map"] = "elu", e["options"]["gates"] = false;
  mimic::test::write_bytes(dir.file("nogates/mimic.json"), j.dump());
  msg = error_of([&] { mimic::models::load_model(dir.file("nogates")); });
  EXPECT_NE(msg.find("unexpected tensor 'mimic.attention.0."), std::string::npos) << msg;
}

TEST(Convert, CliConvertsAndInfoDescribesTheAttention) {
  TempDir dir;
  auto r = mimic::test::mimic_cli("convert --model " + teacher() + " --maps " + tiny_maps() + " --out " + dir.file("c") +
                                  " --layers 0 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["layers"], nlohmann::json::array({0}));
  EXPECT_EQ(j["teacher_checked"], true);
  // --device cpu converts what the default converts, byte for byte
  auto on_cpu = mimic::test::mimic_cli("convert --model " + teacher() + " --maps " + tiny_maps() + " --out " + dir.file("c-cpu") +
                                       " --layers 0 --json --device cpu");
  ASSERT_EQ(on_cpu.code, 0) << on_cpu.err;
  EXPECT_EQ(mimic::test::read_bytes(dir.file("c-cpu/model.safetensors")), mimic::test::read_bytes(dir.file("c/model.safetensors")));
  auto info = mimic::test::mimic_cli("info " + dir.file("c") + " --json");
  ASSERT_EQ(info.code, 0) << info.err;
  EXPECT_EQ(nlohmann::json::parse(info.out)["attention"], "linear (hedgehog, row norm, SLA gates) in layer 0; softmax in layer 1");
  // eval --teacher: both models on the same text, side by side, with the ratio of perplexities
  auto ev = mimic::test::mimic_cli("eval --model " + dir.file("c") + " --teacher " + teacher() + " --text \"" + kText + "\" --json");
  ASSERT_EQ(ev.code, 0) << ev.err;
  auto e = nlohmann::json::parse(ev.out);
  const double pm = e["model"]["perplexity"], pt = e["teacher"]["perplexity"];
  EXPECT_GT(std::abs(pm - pt), 1e-6);
  EXPECT_NEAR(e["perplexity_ratio"].get<double>(), pm / pt, 1e-12);
  EXPECT_EQ(e["teacher"]["attention"], "softmax in layers 0-1");
  EXPECT_EQ(e["model"]["predicted"], e["teacher"]["predicted"]);
  auto bad = mimic::test::mimic_cli("convert --model " + teacher() + " --maps " + dir.file("none.safetensors") + " --out " + dir.file("d"));
  EXPECT_NE(bad.code, 0);
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
}

// LoLA's sparse cache added to distilled hybrid maps at conversion (--attention-options cache=N), without training:
// the converted layers carry it (info names it, mimic.json saves it, the provenance says where it came from), it
// changes what the model computes, and options that shape the trained tensors, or that the kind does not know, are
// refused in one line.
TEST(Convert, AttentionOptionsAddASparseCacheToHybridMapsWithoutTraining) {
  TempDir dir;
  auto d = tiny_hybrid_maps(dir);
  const std::string base = "convert --model " + teacher() + " --maps " + d.out + " --json --out ";
  auto plain = mimic::test::mimic_cli(base + dir.file("plain"));
  ASSERT_EQ(plain.code, 0) << plain.err;
  auto cached = mimic::test::mimic_cli(base + dir.file("cached") + " --attention-options cache=3");
  ASSERT_EQ(cached.code, 0) << cached.err;
  EXPECT_EQ(nlohmann::json::parse(cached.out)["attention"], "hybrid (hedgehog_softmax, row norm, window 2, sparse cache 3) in layers 0-1");
  auto saved = nlohmann::json::parse(mimic::test::read_bytes(dir.file("cached/mimic.json")));
  EXPECT_EQ(saved["attention"][0]["options"]["cache"], 3);
  EXPECT_EQ(saved["provenance"]["conversions"][0]["attention_options"], nlohmann::json({{"cache", 3}}));
  // a selection interval other than every token is said too (it was not: helper-75's probe of 2026-12-06)
  auto every = mimic::test::mimic_cli(base + dir.file("every") + " --attention-options cache=3,cache_every=2");
  ASSERT_EQ(every.code, 0) << every.err;
  EXPECT_EQ(nlohmann::json::parse(every.out)["attention"], "hybrid (hedgehog_softmax, row norm, window 2, sparse cache 3 every 2 tokens) in layers 0-1");
  auto a = mimic::models::load_model(dir.file("plain")), b = mimic::models::load_model(dir.file("cached"));
  EXPECT_GT((logits(*a) - logits(*b)).abs().max().item<double>(), 1e-5);
  for (const auto& [options, message] : std::vector<std::pair<std::string, std::string>>{
           {"feature_map=elu", "'feature_map' shapes the tensors"},
           // a kernel without a trained tensor of the maps': the learned mix was dropped, exit 0 (helper-75's probe)
           {"mix=fixed", "--attention-options {\"mix\":\"fixed\"}: the hybrid kernel it makes has no place for layer_00.window_logit, "
                         "which " + d.out + " holds trained: distill again with the option instead"},
           {"cache=-1", "hybrid attention option 'cache' must be an integer in [0, 65536]"},
           {"cache", "--attention-options: attention 'cache': 'cache' is not key=value"}}) {
    auto bad = mimic::test::mimic_cli(base + dir.file("bad") + " --attention-options " + options);
    EXPECT_NE(bad.code, 0) << options;
    EXPECT_NE(bad.err.find(message), std::string::npos) << options << ": " << bad.err;
    EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
    // the options named once, and another kind's advice only where the kind lacks the option, which none of these
    // does (the dropped tensor's refusal read "--attention-options {..}: --attention-options {..}: ... another kind's
    // options need maps distilled for it"; cache=-1 had the advice too until helper-83's probe)
    EXPECT_EQ(bad.err.find("--attention-options", bad.err.find("--attention-options") + 1), std::string::npos) << bad.err;
    EXPECT_EQ(bad.err.find("another kind's options"), std::string::npos) << bad.err;
  }
  // and the other way: a kernel that would train a tensor the maps lack (a learned mix on fixed-mix maps) read
  // "MAPS: no tensor 'layer_00.window_logit'", naming no option (helper-82's review)
  const auto learned_maps = d.out;
  d.attention = "hybrid:window=2,mix=fixed";
  d.out = dir.file("fixed-mix.safetensors");
  mimic::distill::distill(d);
  auto learned = mimic::test::mimic_cli("convert --model " + teacher() + " --maps " + d.out + " --out " + dir.file("learned") +
                                        " --attention-options mix=learned");
  EXPECT_NE(learned.code, 0);
  EXPECT_NE(learned.err.find("--attention-options {\"mix\":\"learned\"}: the hybrid kernel it makes trains layer_00.window_logit, which " +
                             d.out + " does not hold: distill again with the option instead"), std::string::npos) << learned.err;
  EXPECT_EQ(std::count(learned.err.begin(), learned.err.end(), '\n'), 1) << learned.err;
  d.out = learned_maps;
  // distilled with the cache (the quadratic form's selection under the CE loss), the maps carry it to the conversion
  d.attention = "hybrid:window=2,cache=3";
  d.out = dir.file("hybrid-cache.safetensors");
  const auto distilled = mimic::distill::distill(d);
  for (const auto& l : distilled.layers) EXPECT_TRUE(std::isfinite(l.after.mean.kl)) << "layer " << l.layer;
  EXPECT_EQ(mimic::distill::DistilledMaps::open(d.out).attention().at("cache"), 3);
  auto from_maps = mimic::test::mimic_cli("convert --model " + teacher() + " --maps " + d.out + " --json --out " + dir.file("from-maps"));
  ASSERT_EQ(from_maps.code, 0) << from_maps.err;
  EXPECT_EQ(nlohmann::json::parse(from_maps.out)["attention"], "hybrid (hedgehog_softmax, row norm, window 2, sparse cache 3) in layers 0-1");
  // the linear kind has no cache: said by the option, with the kind that has one (it read "unknown linear attention
  // option 'cache'", naming neither: helper-60's probe of 2026-12-04), before the model is read
  auto linear = mimic::test::mimic_cli("convert --model " + teacher() + " --maps " + tiny_maps() + " --out " + dir.file("lin") +
                                       " --attention-options cache=3");
  EXPECT_NE(linear.code, 0);
  EXPECT_NE(linear.err.find("--attention-options {\"cache\":3}: LoLA's sparse cache is the hybrid kind's: it needs hybrid maps (distill "
                            "--attention hybrid:window=W); " + tiny_maps() + " holds maps of linear attention"), std::string::npos) << linear.err;
  // another option the kind lacks: the kind's words, and where they come from
  auto other = mimic::test::mimic_cli("convert --model " + teacher() + " --maps " + tiny_maps() + " --out " + dir.file("lin") +
                                      " --attention-options window=3");
  EXPECT_NE(other.err.find("--attention-options {\"window\":3}: unknown linear attention option 'window' (options: "), std::string::npos) << other.err;
  EXPECT_NE(other.err.find("holds maps of linear attention; another kind's options need maps distilled for it"), std::string::npos) << other.err;
  // a value out of range of the kind's own option: the range alone, not another kind's advice (helper-83's probe)
  auto range = mimic::test::mimic_cli("convert --model " + teacher() + " --maps " + d.out + " --out " + dir.file("hyb0") +
                                      " --attention-options window=0");
  EXPECT_NE(range.code, 0);
  EXPECT_NE(range.err.find("--attention-options {\"window\":0}: hybrid attention option 'window' must be an integer in [1, 65536]"),
            std::string::npos) << range.err;
  EXPECT_EQ(std::count(range.err.begin(), range.err.end(), '\n'), 1) << range.err;
  EXPECT_EQ(range.err.find("another kind"), std::string::npos) << range.err;
}

// --cache-heads: LoLA's sparse cache in the listed (or probe-ranked) heads, the hybrid without one in the others —
// written per layer as the hybrid's cache_heads, a layer without such a head without a cache; every head listed is
// the cache everywhere (the same model as --attention-options cache=N alone); the probe ranks the heads on the hybrid
// without the cache; what cannot carry a cache, or asks for both placements, is refused in one line.
TEST(Convert, CacheHeadsGiveTheCacheToTheChosenHeadsAndNoneElsewhere) {
  TempDir dir;
  auto d = tiny_hybrid_maps(dir);
  const std::string base = "convert --model " + teacher() + " --maps " + d.out + " --json --out ";
  auto some = mimic::test::mimic_cli(base + dir.file("some") + " --attention-options cache=3 --cache-heads 0.1,1.0");
  ASSERT_EQ(some.code, 0) << some.err;
  const auto r = nlohmann::json::parse(some.out);
  EXPECT_EQ(r["attention"], "hybrid (hedgehog_softmax, row norm, window 2, sparse cache 3 in heads [1]) in layer 0; "
                            "hybrid (hedgehog_softmax, row norm, window 2, sparse cache 3 in heads [0]) in layer 1");
  EXPECT_EQ(r["placement"]["keeps"], "a sparse cache of 3 keys");
  EXPECT_EQ(r["placement"]["rule"], "list");
  auto saved = nlohmann::json::parse(mimic::test::read_bytes(dir.file("some/mimic.json")));
  EXPECT_EQ(saved["attention"][0]["options"]["cache_heads"], nlohmann::json::array({1}));
  EXPECT_EQ(saved["attention"][1]["options"]["cache_heads"], nlohmann::json::array({0}));
  // one layer's every head: that layer is the cache everywhere, the other has none at all
  auto layer0 = mimic::test::mimic_cli(base + dir.file("layer0") + " --attention-options cache=3 --cache-heads 0.0,0.1");
  ASSERT_EQ(layer0.code, 0) << layer0.err;
  saved = nlohmann::json::parse(mimic::test::read_bytes(dir.file("layer0/mimic.json")));
  EXPECT_EQ(saved["attention"][0]["options"]["cache"], 3);
  EXPECT_FALSE(saved["attention"][0]["options"].contains("cache_heads"));
  EXPECT_FALSE(saved["attention"][1]["options"].contains("cache"));
  EXPECT_FALSE(saved["attention"][1]["options"].contains("cache_every"));
  auto every = mimic::test::mimic_cli(base + dir.file("every") + " --attention-options cache=3 --cache-heads 0.0,0.1,1.0,1.1");
  auto all = mimic::test::mimic_cli(base + dir.file("all") + " --attention-options cache=3");
  auto none = mimic::test::mimic_cli(base + dir.file("none"));
  ASSERT_EQ(every.code + all.code + none.code, 0) << every.err << all.err << none.err;
  auto m_some = mimic::models::load_model(dir.file("some")), m_every = mimic::models::load_model(dir.file("every"));
  auto m_all = mimic::models::load_model(dir.file("all")), m_none = mimic::models::load_model(dir.file("none"));
  EXPECT_EQ((logits(*m_every) - logits(*m_all)).abs().max().item<double>(), 0.0);
  EXPECT_GT((logits(*m_some) - logits(*m_all)).abs().max().item<double>(), 1e-6);
  EXPECT_GT((logits(*m_some) - logits(*m_none)).abs().max().item<double>(), 1e-6);
  // ranked by the probe: one head gets the cache, the other three none
  std::string text;
  for (int i = 0; i < 40; ++i) text += std::string(kText) + "\n";
  mimic::test::write_bytes(dir.file("own.txt"), text);
  auto probed = mimic::test::mimic_cli(base + dir.file("probed") + " --attention-options cache=3 --cache-heads auto:1 --probe-data " +
                                       dir.file("own.txt") + " --probe-segments 4 --probe-segment-len 16 --probe-passkeys 2");
  ASSERT_EQ(probed.code, 0) << probed.err;
  const auto p = nlohmann::json::parse(probed.out)["placement"];
  EXPECT_EQ(p["placement"], "probe");
  ASSERT_EQ(p["kept"].size(), 1u);
  saved = nlohmann::json::parse(mimic::test::read_bytes(dir.file("probed/mimic.json")));
  const int64_t layer = p["kept"][0]["layer"], head = p["kept"][0]["head"];
  EXPECT_EQ(saved["attention"][layer]["options"]["cache_heads"], nlohmann::json::array({head}));
  EXPECT_FALSE(saved["attention"][1 - layer]["options"].contains("cache"));
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {" --cache-heads 0.1", "--cache-heads gives some heads LoLA's sparse cache: it needs hybrid maps and a cache size"},
           {" --attention-options cache=3 --cache-heads 0.2", "--cache-heads: head 0.2 is not a head of a converted layer"},
           {" --attention-options cache=3 --cache-heads auto:0", "--cache-heads: auto:0: expected auto:K"},
           {" --attention-options cache=3 --cache-heads 0.1 --keep-softmax 1.0", "excludes"},
           // the options as given, not with the nulls convert adds for the heads without a cache
           {" --attention-options cache=3,mix=fixed --cache-heads 0.1",
            "--attention-options {\"cache\":3,\"mix\":\"fixed\"}: the hybrid kernel it makes has no place for layer_00.window_logit"}}) {
    auto bad = mimic::test::mimic_cli(base + dir.file("bad") + args);
    EXPECT_NE(bad.code, 0) << args;
    EXPECT_NE(bad.err.find(message), std::string::npos) << args << ": " << bad.err;
    EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
  }
  auto linear = mimic::test::mimic_cli("convert --model " + teacher() + " --maps " + tiny_maps() + " --out " + dir.file("lin") +
                                       " --cache-heads 0.1");
  EXPECT_NE(linear.code, 0);
  EXPECT_NE(linear.err.find("it needs hybrid maps (distill --attention hybrid:window=W); " + tiny_maps() + " holds maps of linear attention"),
            std::string::npos) << linear.err;
  // with the cache's size given too, the same line, not the linear kind's "unknown option 'cache'"
  linear = mimic::test::mimic_cli("convert --model " + teacher() + " --maps " + tiny_maps() + " --out " + dir.file("lin") +
                                  " --attention-options cache=3 --cache-heads 0.1");
  EXPECT_NE(linear.code, 0);
  EXPECT_NE(linear.err.find("holds maps of linear attention"), std::string::npos) << linear.err;
}
