// GPT-2 and BERT against reference outputs of an independent PyTorch implementation
// (tests/fixtures/gen_model_fixtures.py), in every key layout the fixtures cover.
#include <torch/torch.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "mimic/attention/attention.h"
#include "mimic/io/safetensors.h"
#include "mimic/models/family.h"
#include "mimic/models/model.h"
#include "mimic/models/networks.h"
#include "mimic/core/paths.h"
#include "mimic/text/tokenizer.h"
#include "test_util.h"

using mimic::io::SafeTensorsFile;
using mimic::models::ForwardInputs;
using mimic::test::TempDir;
namespace fs = std::filesystem;

namespace {
const char* kFixtures[] = {"gpt2-prefixed", "gpt2-plain", "bert-mlm", "bert-cls", "bert-base"};

std::string model_dir(const std::string& name) { return mimic::test::fixture("models/" + name); }

ForwardInputs reference_inputs(const SafeTensorsFile& ref) {
  ForwardInputs in{ref.load("input_ids"), ref.load("attention_mask"), {}, {}};
  if (ref.contains("token_type_ids")) in.token_type_ids = ref.load("token_type_ids");
  return in;
}

// Compares outputs at real (unpadded) positions.
void expect_close(const at::Tensor& got, const at::Tensor& want, const at::Tensor& mask, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  auto g = got, w = want;
  if (mask.defined() && got.dim() >= 2 && got.size(1) == mask.size(1)) {
    auto m = mask.to(torch::kBool);
    g = got.index({m});
    w = want.index({m});
  }
  double err = (g - w).abs().max().item<double>();
  EXPECT_LT(err, 1e-4) << what << ": max abs error " << err;
}

// Rewrites model.safetensors of a copied model through `edit` on its tensor list.
void edit_weights(const std::string& dir, const std::function<void(std::vector<std::pair<std::string, at::Tensor>>&)>& edit) {
  auto f = SafeTensorsFile::open(dir + "/model.safetensors");
  std::vector<std::pair<std::string, at::Tensor>> ts;
  for (const auto& n : f.names()) ts.emplace_back(n, f.load(n));
  edit(ts);
  mimic::io::save_safetensors(dir + "/model.safetensors", ts);
}

void edit_config(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
  auto j = nlohmann::json::parse(mimic::test::read_bytes(dir + "/config.json"));
  edit(j);
  mimic::test::write_bytes(dir + "/config.json", j.dump());
}
}  // namespace

// A data-parallel share's dropout (models::BatchShare) against torch::dropout on the whole batch, the reference: each
// share's rows of the output and of the gradient equal the whole batch's, bit for bit, and the generator ends where
// the whole batch's draw leaves it; without a share it is torch::dropout itself.
TEST(Dropout, EachShareOfTheBatchGetsTheRowsOfOneProcesssDraw) {
  const auto x = torch::randn({6, 5, 7});
  torch::manual_seed(11);
  auto whole = x.clone().requires_grad_(true);
  auto y = torch::dropout(whole, 0.3, true);
  y.backward(torch::arange(y.numel(), torch::kFloat).reshape(y.sizes()));
  const auto after = torch::rand({1});
  for (int64_t part = 0; part < 3; ++part) {
    torch::manual_seed(11);
    auto rows = x.narrow(0, 2 * part, 2).clone().requires_grad_(true);
    at::Tensor z;
    {
      mimic::models::BatchShare share(part, 3);
      z = mimic::models::dropout(rows, 0.3);
    }
    z.backward(torch::arange(y.numel(), torch::kFloat).reshape(y.sizes()).narrow(0, 2 * part, 2));
    EXPECT_TRUE(torch::equal(z, y.narrow(0, 2 * part, 2))) << "share " << part;
    EXPECT_TRUE(torch::equal(rows.grad(), whole.grad().narrow(0, 2 * part, 2))) << "share " << part;
    EXPECT_TRUE(torch::equal(torch::rand({1}), after)) << "share " << part;
  }
  // some elements dropped, the rest scaled by 1/(1 − p)
  EXPECT_GT(y.eq(0).sum().item<int64_t>(), 0);
  EXPECT_TRUE(torch::allclose(y.masked_select(y.ne(0)), x.masked_select(y.ne(0)) / 0.7));
  // no share (or the guard gone): torch::dropout's own draw
  torch::manual_seed(5);
  const auto plain = torch::dropout(x, 0.3, true);
  torch::manual_seed(5);
  EXPECT_TRUE(torch::equal(mimic::models::dropout(x, 0.3), plain));
  EXPECT_MIMIC_ERROR(mimic::models::BatchShare(3, 3), "a batch share 3 of 3 is no share");
}

TEST(Checkpoint, EveryFixtureMatchesTheReference) {
  torch::NoGradGuard ng;
  for (const char* name : kFixtures) {
    SCOPED_TRACE(name);
    auto model = mimic::models::load_model(model_dir(name));
    auto ref = SafeTensorsFile::open(model_dir(name) + ".reference.safetensors");
    auto in = reference_inputs(ref);
    auto out = model->forward(in);
    expect_close(out.last_hidden_state, ref.load("last_hidden_state"), in.attention_mask, "last_hidden_state");
    if (ref.contains("pooler_output")) expect_close(out.pooled, ref.load("pooler_output"), {}, "pooler_output");
    if (ref.contains("logits")) {
      expect_close(out.logits, ref.load("logits"), out.logits.dim() == 3 ? in.attention_mask : at::Tensor(), "logits");
    } else if (ref.contains("logits_head")) {
      expect_close(out.logits.slice(-1, 0, 1000), ref.load("logits_head"), in.attention_mask, "logits[:1000]");
      expect_close(torch::logsumexp(out.logits, -1), ref.load("logits_logsumexp"), in.attention_mask, "logsumexp(logits)");
    } else {
      EXPECT_FALSE(out.logits.defined()) << "a model without head has no logits";
    }
  }
}

TEST(Checkpoint, SummaryDescribesHeadsAndSizes) {
  auto g = mimic::models::load_model(model_dir("gpt2-prefixed"))->summary();
  EXPECT_EQ(g.model_type, "gpt2");
  EXPECT_EQ(g.head, "lm");
  EXPECT_EQ(g.vocab_size, 50257);
  EXPECT_EQ(g.max_positions, 64);
  // wte + wpe + 2 layers × (2·ln + c_attn + c_proj + c_fc + mlp c_proj) + ln_f, tied head counted once
  const int64_t d = 8, l = 2;
  EXPECT_EQ(g.parameters, 50257 * d + 64 * d + l * (4 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * 4 * d + 4 * d) + (4 * d * d + d)) + 2 * d);
  EXPECT_EQ(mimic::models::load_model(model_dir("bert-mlm"))->summary().head, "mlm");
  auto c = mimic::models::load_model(model_dir("bert-cls"))->summary();
  EXPECT_EQ(c.head, "cls");
  EXPECT_EQ(c.num_labels, 3);
  EXPECT_EQ(mimic::models::load_model(model_dir("bert-base"))->summary().head, "none");
}

TEST(Gpt2, FutureTokensNeverChangePastLogits) {
  torch::NoGradGuard ng;
  auto model = mimic::models::load_model(model_dir("gpt2-plain"));
  auto ids = torch::randint(0, 97, {1, 20}, torch::kLong);
  auto a = model->forward({ids, {}, {}, {}}).logits;
  auto changed = ids.clone();
  changed.slice(1, 12).random_(0, 97);
  auto b = model->forward({changed, {}, {}, {}}).logits;
  EXPECT_TRUE(torch::allclose(a.slice(1, 0, 12), b.slice(1, 0, 12), 0, 1e-6));
  EXPECT_FALSE(torch::allclose(a.slice(1, 12), b.slice(1, 12), 0, 1e-3));
  // a prefix alone gives the same logits as the prefix inside the longer sequence
  auto p = model->forward({ids.slice(1, 0, 7), {}, {}, {}}).logits;
  EXPECT_TRUE(torch::allclose(p, a.slice(1, 0, 7), 0, 1e-5));
}

TEST(Bert, PaddingAndMaskGiveTheSameHiddenStates) {
  torch::NoGradGuard ng;
  auto model = mimic::models::load_model(model_dir("bert-base"));
  auto ids = torch::randint(1, 101, {1, 9}, torch::kLong);
  auto alone = model->forward({ids, {}, {}, {}});
  auto padded_ids = torch::cat({ids, torch::zeros({1, 5}, torch::kLong)}, 1);
  auto mask = torch::cat({torch::ones({1, 9}, torch::kLong), torch::zeros({1, 5}, torch::kLong)}, 1);
  auto padded = model->forward({padded_ids, mask, {}, {}});
  EXPECT_TRUE(torch::allclose(padded.last_hidden_state.slice(1, 0, 9), alone.last_hidden_state, 0, 1e-5));
  EXPECT_TRUE(torch::allclose(padded.pooled, alone.pooled, 0, 1e-5));
  // without the mask the padding changes the states: the mask is what makes them equal
  auto unmasked = model->forward({padded_ids, {}, {}, {}});
  EXPECT_FALSE(torch::allclose(unmasked.last_hidden_state.slice(1, 0, 9), alone.last_hidden_state, 0, 1e-3));
}

TEST(Checkpoint, SaveLoadRoundTripIsLossless) {
  for (const char* name : kFixtures) {
    SCOPED_TRACE(name);
    TempDir dir;
    auto model = mimic::models::load_model(model_dir(name));
    model->save(dir.file("m"));
    auto a = SafeTensorsFile::open(model_dir(name) + "/model.safetensors");
    auto b = SafeTensorsFile::open(dir.file("m/model.safetensors"));
    ASSERT_EQ(a.names().size(), b.names().size());
    for (const auto& n : a.names()) {
      ASSERT_TRUE(b.contains(n)) << n;
      EXPECT_EQ(a.info(n).dtype, b.info(n).dtype) << n;
      EXPECT_EQ(a.info(n).shape, b.info(n).shape) << n;
      auto ta = a.load(n), tb = b.load(n);
      EXPECT_EQ(0, std::memcmp(ta.data_ptr(), tb.data_ptr(), ta.numel() * ta.element_size())) << n;
    }
    EXPECT_EQ(nlohmann::json::parse(mimic::test::read_bytes(model_dir(name) + "/config.json")),
              nlohmann::json::parse(mimic::test::read_bytes(dir.file("m/config.json"))));
  }
}

TEST(Checkpoint, BrokenCheckpointsNameTheProblem) {
  TempDir dir;
  auto fresh = [&](const std::string& name, const std::string& as) {
    auto dst = dir.file(as);
    fs::copy(model_dir(name), dst, fs::copy_options::recursive);
    return dst;
  };
  auto m1 = fresh("gpt2-plain", "missing");
  edit_weights(m1, [](auto& ts) { ts.erase(std::find_if(ts.begin(), ts.end(), [](auto& p) { return p.first == "h.1.mlp.c_fc.bias"; })); });
  EXPECT_MIMIC_ERROR(mimic::models::load_model(m1), "missing tensor 'h.1.mlp.c_fc.bias'");
  auto m2 = fresh("gpt2-prefixed", "missing-prefixed");
  edit_weights(m2, [](auto& ts) { ts.erase(std::find_if(ts.begin(), ts.end(), [](auto& p) { return p.first == "transformer.ln_f.weight"; })); });
  EXPECT_MIMIC_ERROR(mimic::models::load_model(m2), "missing tensor 'transformer.ln_f.weight'");
  auto m3 = fresh("gpt2-plain", "extra");
  edit_weights(m3, [](auto& ts) { ts.emplace_back("h.0.attn.rotary.weight", torch::zeros({2})); });
  EXPECT_MIMIC_ERROR(mimic::models::load_model(m3), "unexpected tensor 'h.0.attn.rotary.weight'");
  auto m4 = fresh("gpt2-plain", "shape");
  edit_weights(m4, [](auto& ts) {
    for (auto& [n, t] : ts)
      if (n == "h.0.attn.c_attn.weight") t = t.t().contiguous();  // (out, in): a Linear-layout file
  });
  EXPECT_MIMIC_ERROR(mimic::models::load_model(m4), "tensor 'h.0.attn.c_attn.weight' has shape [96, 32], expected [32, 96]");
  // a weight stored as integers or booleans: it was cast, run, and written back as it was (helper-61's probe)
  for (const auto& [type, label] : std::vector<std::pair<at::ScalarType, std::string>>{{at::kLong, "I64"}, {at::kBool, "BOOL"}}) {
    auto typed = fresh("gpt2-plain", "typed-" + label);
    edit_weights(typed, [type = type](auto& ts) {
      for (auto& [n, t] : ts)
        if (n == "h.0.attn.c_attn.bias") t = t.to(type);
    });
    EXPECT_MIMIC_ERROR(mimic::models::load_model(typed), "tensor 'h.0.attn.c_attn.bias' is stored as " + label + ": a weight is a floating-point tensor");
  }
  auto tied_typed = fresh("gpt2-prefixed", "tied-typed");
  edit_weights(tied_typed, [](auto& ts) {
    for (auto& [n, t] : ts)
      if (n == "lm_head.weight") t = t.to(at::kInt);
  });
  EXPECT_MIMIC_ERROR(mimic::models::load_model(tied_typed), "tensor 'lm_head.weight' is stored as I32: a weight is a floating-point tensor");
  auto m5 = fresh("gpt2-prefixed", "tied");
  edit_weights(m5, [](auto& ts) {
    for (auto& [n, t] : ts)
      if (n == "lm_head.weight") t = t + 1;
  });
  EXPECT_MIMIC_ERROR(mimic::models::load_model(m5), "'lm_head.weight' should equal 'transformer.wte.weight'");
  auto m6 = fresh("bert-cls", "bert-missing-head");
  edit_weights(m6, [](auto& ts) { ts.erase(std::find_if(ts.begin(), ts.end(), [](auto& p) { return p.first == "classifier.bias"; })); });
  EXPECT_MIMIC_ERROR(mimic::models::load_model(m6), "missing tensor 'classifier.bias'");
  // one tensor under two keys, with and without the prefix: the later won without a word (the checkpoint probe of
  // 2026-12-01: a doubled prefixed LayerNorm took perplexity from 38.6 to 124.5)
  auto m7 = fresh("gpt2-plain", "twice");
  edit_weights(m7, [](auto& ts) {
    at::Tensor ln;
    for (auto& [n, t] : ts)
      if (n == "h.0.ln_1.weight") ln = t * 3;
    ts.emplace_back("transformer.h.0.ln_1.weight", ln);
  });
  EXPECT_MIMIC_ERROR(mimic::models::load_model(m7), "tensors 'h.0.ln_1.weight' and 'transformer.h.0.ln_1.weight' are both GPT-2's 'h.0.ln_1.weight': keep one of them");
  // a Hugging Face cache folder holds its model in snapshots/REVISION/: named, not just "no config.json"
  fs::create_directories(dir.file("models--me--m/snapshots"));
  fs::copy(model_dir("gpt2-plain"), dir.file("models--me--m/snapshots/r1"), fs::copy_options::recursive);
  EXPECT_MIMIC_ERROR(mimic::models::load_model(dir.file("models--me--m")),
                     "models--me--m: no config.json (a model directory holds config.json + model.safetensors); a Hugging Face cache folder: "
                     "give its snapshot, " + dir.file("models--me--m/snapshots/r1"));
  // of several, the one refs/main names (the revision last downloaded), whatever the order of their hashes
  fs::copy(model_dir("gpt2-plain"), dir.file("models--me--m/snapshots/r0"), fs::copy_options::recursive);
  fs::create_directories(dir.file("models--me--m/refs"));
  mimic::test::write_bytes(dir.file("models--me--m/refs/main"), "r1");
  EXPECT_MIMIC_ERROR(mimic::models::load_model(dir.file("models--me--m")),
                     "give its snapshot, " + dir.file("models--me--m/snapshots/r1") + " (or one of 1 more)");
  // an architectures name no family implements: BertForTokenClassification ran as a sentence classifier (logits
  // [1, 2] where HF gives [1, T, 2]); the names of the model's own family are offered
  auto a1 = fresh("bert-cls", "token-classification");
  edit_config(a1, [](auto& j) { j["architectures"] = {"BertForTokenClassification"}; });
  EXPECT_MIMIC_ERROR(mimic::models::load_model(a1), "config.json: architectures names 'BertForTokenClassification', which mimic's BERT does not "
                                                    "implement (it implements BertModel, BertForMaskedLM, BertForPreTraining, "
                                                    "BertForSequenceClassification)");
  auto a2 = fresh("gpt2-plain", "sequence-classification");
  edit_config(a2, [](auto& j) { j["architectures"] = {"GPT2ForSequenceClassification"}; });
  EXPECT_MIMIC_ERROR(mimic::models::load_model(a2), "architectures names 'GPT2ForSequenceClassification', which mimic's GPT-2 does not implement "
                                                    "(it implements GPT2LMHeadModel, GPT2Model)");
  // another family's name too: a bert config saying GPT2LMHeadModel ran as a bare encoder
  auto a3 = fresh("bert-base", "bert-as-gpt2");
  edit_config(a3, [](auto& j) { j["architectures"] = {"GPT2LMHeadModel"}; });
  EXPECT_MIMIC_ERROR(mimic::models::load_model(a3), "architectures names 'GPT2LMHeadModel', which mimic's BERT does not implement");
  auto a4 = fresh("gpt2-plain", "not-a-name");
  edit_config(a4, [](auto& j) { j["architectures"] = {1}; });
  EXPECT_MIMIC_ERROR(mimic::models::load_model(a4), "config.json: architectures[0] must be a string naming the model class, got 1");
  auto a5 = fresh("gpt2-plain", "a-string");  // not a list: it was passed over, the weights deciding the head
  edit_config(a5, [](auto& j) { j["architectures"] = "GPT2ForSequenceClassification"; });
  EXPECT_MIMIC_ERROR(mimic::models::load_model(a5),
                     R"(config.json: architectures must be a list naming the model class (e.g. ["GPT2LMHeadModel"]), got "GPT2ForSequenceClassification")");
  // config.json problems
  auto c1 = fresh("gpt2-plain", "c1");
  edit_config(c1, [](auto& j) { j.erase("n_head"); });
  EXPECT_MIMIC_ERROR(mimic::models::load_model(c1), "missing key 'n_head'");
  auto c2 = fresh("gpt2-plain", "c2");
  edit_config(c2, [](auto& j) { j["model_type"] = "gemma"; });
  EXPECT_MIMIC_ERROR(mimic::models::load_model(c2), "unsupported model_type 'gemma'");
  auto c3 = fresh("gpt2-plain", "c3");
  edit_config(c3, [](auto& j) { j["n_head"] = 5; });
  EXPECT_MIMIC_ERROR(mimic::models::load_model(c3), "config.json: n_embd 32 is not divisible by n_head 5");
  auto c4 = fresh("bert-base", "c4");
  edit_config(c4, [](auto& j) { j["hidden_size"] = "32"; });
  EXPECT_MIMIC_ERROR(mimic::models::load_model(c4), "key 'hidden_size' must be an integer");
  auto c5 = fresh("bert-base", "c5");
  edit_config(c5, [](auto& j) { j["num_hidden_layers"] = 3; });
  EXPECT_MIMIC_ERROR(mimic::models::load_model(c5), "num_hidden_layers is 3, but model.safetensors has no tensor 'encoder.layer.2.");
  auto c6 = fresh("bert-base", "c6");
  mimic::test::write_bytes(c6 + "/config.json", "{\"model_type\": ");
  EXPECT_MIMIC_ERROR(mimic::models::load_model(c6), "config.json: malformed JSON");
  auto c7 = fresh("bert-base", "c7");
  fs::remove(c7 + "/model.safetensors");
  mimic::test::write_bytes(c7 + "/pytorch_model.bin", "PK");
  EXPECT_MIMIC_ERROR(mimic::models::load_model(c7), "pickle");
  EXPECT_MIMIC_ERROR(mimic::models::load_model(dir.file("nowhere")), "model directory not found");
  // token ids outside the vocabulary are an error, not a crash
  auto model = mimic::models::load_model(model_dir("gpt2-plain"));
  EXPECT_MIMIC_ERROR(model->forward({torch::full({1, 3}, 500, torch::kLong), {}, {}, {}}), "token id 500 is outside the model's vocabulary of 97");
  EXPECT_MIMIC_ERROR(model->forward({torch::zeros({1, 65}, torch::kLong), {}, {}, {}}), "exceeds the model's context of 64");
}

namespace {
// A kernel that outputs zeros: swapping it in must change only what comes after its layer.
class ZeroKernel : public mimic::attention::AttentionKernelImpl {
 public:
  at::Tensor forward(const at::Tensor& q, const at::Tensor&, const at::Tensor& v, const mimic::attention::AttentionContext&) override {
    return torch::zeros_like(v);
  }
  std::string kind() const override { return "zero"; }
};
}  // namespace

// The family registry (models/families.def): every family answers what the stages ask, a loaded model names its
// family, and an unknown model_type is a clear error.
TEST(Family, EveryRegisteredFamilyAnswersWhatTheStagesAskAndUnknownTypesAreErrors) {
  using mimic::models::Family;
  const auto& all = mimic::models::families();
  ASSERT_EQ(all.size(), 6u);  // gpt2, bert, and the Llama family's four model types
  for (const Family* f : all) {
    SCOPED_TRACE(f->model_type);
    EXPECT_EQ(&mimic::models::family(f->model_type), f);
    EXPECT_FALSE(f->display_name.empty());
    EXPECT_FALSE(f->finetune_preset.empty());
    EXPECT_FALSE(f->checkpoint_prefix.empty());
    // a learned position table or rotary positions; an LM head of its own only where the family reads one
    EXPECT_EQ(f->position_table().empty(), f->lm_head_may_be_untied);
  }
  // the fetched tokenizers a fresh model trains with (a model folder brings its own); every asset named exists
  EXPECT_EQ(mimic::models::family("gpt2").tokenizer_asset, "gpt2");
  EXPECT_EQ(mimic::models::family("bert").tokenizer_asset, "bert-base-uncased");
  EXPECT_EQ(mimic::models::family("llama").tokenizer_asset, "mistral");
  EXPECT_EQ(mimic::models::family("qwen3").tokenizer_asset, "qwen3");
  for (const char* name : {"gpt2", "bert", "llama", "mistral", "qwen2", "qwen3"})
    EXPECT_NO_THROW(mimic::text::load_tokenizer(mimic::asset_path(mimic::models::family(name).tokenizer_asset))) << name;
  const Family& gpt2 = mimic::models::family("gpt2");
  const Family& bert = mimic::models::family("bert");
  EXPECT_TRUE(gpt2.causal);
  EXPECT_FALSE(bert.causal);
  EXPECT_FALSE(gpt2.cls_sep);
  EXPECT_TRUE(bert.cls_sep);
  EXPECT_TRUE(gpt2.classifier.architecture.empty());
  EXPECT_EQ(bert.classifier.architecture, "BertForSequenceClassification");
  EXPECT_TRUE(gpt2.is_attention_projection("h.3.attn.c_attn.weight"));
  EXPECT_FALSE(gpt2.is_attention_projection("h.3.mlp.c_fc.weight"));
  EXPECT_TRUE(bert.is_attention_projection("encoder.layer.1.attention.self.key.bias"));
  EXPECT_TRUE(bert.is_attention_projection("encoder.layer.1.attention.output.dense.weight"));
  EXPECT_FALSE(bert.is_attention_projection("encoder.layer.1.attention.output.LayerNorm.weight"));
  EXPECT_TRUE(gpt2.is_embedding("transformer.wte.weight"));
  EXPECT_TRUE(bert.is_embedding("bert.embeddings.position_ids"));
  EXPECT_FALSE(bert.is_embedding("encoder.layer.0.output.dense.weight"));
  EXPECT_TRUE(gpt2.is_buffer("h.11.attn.masked_bias"));
  EXPECT_FALSE(gpt2.takes_prefix("lm_head.weight"));
  EXPECT_FALSE(bert.takes_prefix("classifier.weight"));
  EXPECT_EQ(mimic::models::family_names(), "gpt2, bert, llama, mistral, qwen2 and qwen3");
  EXPECT_EQ(mimic::models::find_family("gemma"), nullptr);
  EXPECT_MIMIC_ERROR(mimic::models::family("gemma"), "unsupported model_type 'gemma' (mimic reads gpt2, bert, llama, mistral, qwen2 and qwen3)");

  // A loaded model names its family, and the family's LoRA targets are its attention projections.
  for (const char* name : {"gpt2-plain", "bert-base"}) {
    auto m = mimic::models::load_model(model_dir(name));
    const auto s = m->summary();
    ASSERT_NE(s.family, nullptr) << name;
    EXPECT_EQ(s.family->model_type, s.model_type);
    const auto targets = s.family->lora_targets(m->module());
    EXPECT_EQ(static_cast<int64_t>(targets.size()), s.n_layer * (s.family->causal ? 2 : 4)) << name;
    for (const auto& t : targets) {
      EXPECT_TRUE(s.family->is_attention_projection(t.name + ".weight")) << t.name;
      ASSERT_NE(t.weight, nullptr);
      EXPECT_TRUE(t.weight->defined());
    }
  }
}

TEST(SoftmaxAttention, CaptureExposesWhatTheKernelConsumedAndKernelsSwapPerLayer) {
  torch::NoGradGuard ng;
  for (const char* name : {"gpt2-plain", "bert-base"}) {
    SCOPED_TRACE(name);
    auto model = mimic::models::load_model(model_dir(name));
    const bool causal = std::string(name).rfind("gpt2", 0) == 0;
    auto ids = torch::randint(1, 97, {2, 11}, torch::kLong);
    auto mask = torch::ones({2, 11}, torch::kLong);
    mask[1].slice(0, 8).fill_(0);
    mimic::attention::AttentionCapture cap0, cap1;
    cap1.want_weights = true;
    model->set_attention_capture(0, &cap0);
    model->set_attention_capture(1, &cap1);
    auto base = model->forward({ids, mask, {}, {}});
    ASSERT_EQ(cap1.q.sizes(), (c10::IntArrayRef{2, 4, 11, 8}));
    ASSERT_EQ(cap1.weights.sizes(), (c10::IntArrayRef{2, 4, 11, 11}));
    EXPECT_EQ(cap1.q_full.sizes(), (c10::IntArrayRef{2, 11, 32}));
    // o = softmax(q kᵀ/√d + mask) v, computed here from the captured tensors
    auto s = torch::matmul(cap1.q, cap1.k.transpose(-1, -2)) / std::sqrt(8.0);
    auto allowed = mask.to(torch::kBool).view({2, 1, 1, 11}).expand({2, 4, 11, 11});
    if (causal) allowed = allowed & torch::ones({11, 11}, torch::kBool).tril();
    auto w = torch::softmax(s.masked_fill(allowed.logical_not(), -1e30), -1);
    EXPECT_TRUE(torch::allclose(w, cap1.weights, 0, 1e-6));
    EXPECT_TRUE(torch::allclose(torch::matmul(w, cap1.v), cap1.o, 0, 1e-5));
    // Swap layer 1's kernel: layer 0 is untouched, the output changes.
    auto q0 = cap0.q.clone(), o0 = cap0.o.clone();
    EXPECT_EQ(model->attention_kernel(1)->kind(), "softmax");
    model->set_attention_kernel(1, std::make_shared<ZeroKernel>());
    EXPECT_EQ(model->attention_kernel(1)->kind(), "zero");
    auto swapped = model->forward({ids, mask, {}, {}});
    EXPECT_TRUE(torch::equal(q0, cap0.q));
    EXPECT_TRUE(torch::equal(o0, cap0.o));
    EXPECT_EQ(cap1.o.abs().sum().item<double>(), 0.0);
    EXPECT_FALSE(torch::allclose(swapped.last_hidden_state, base.last_hidden_state, 0, 1e-3));
    model->set_attention_capture(0, nullptr);
    model->set_attention_capture(1, nullptr);
  }
}

// Found by fuzzing config.json (bench/fuzz): a key of the wrong JSON type escaped as nlohmann's exception instead of a
// one-line mimic::Error; now every key the families read is checked, and names the file, the key and what it takes.
TEST(Checkpoint, ConfigKeysOfTheWrongTypeAreRefusedByName) {
  TempDir dir;
  auto with = [&](const std::string& name, const char* key, const nlohmann::json& v) {
    auto j = nlohmann::json::parse(mimic::test::read_bytes(model_dir(name) + "/config.json"));
    j[key] = v;
    mimic::test::write_bytes(dir.file("config.json"), j.dump());
    return mimic::models::load_config(dir.file("config.json"));
  };
  EXPECT_MIMIC_ERROR(with("gpt2-plain", "activation_function", 3), "key 'activation_function' must be a string, got 3");
  EXPECT_MIMIC_ERROR(with("gpt2-plain", "scale_attn_weights", "yes"), "key 'scale_attn_weights' must be true or false");
  EXPECT_MIMIC_ERROR(with("gpt2-plain", "scale_attn_by_inverse_layer_idx", 1), "must be true or false");
  EXPECT_MIMIC_ERROR(with("bert-base", "hidden_act", nlohmann::json::array({1})), "key 'hidden_act' must be a string");
  EXPECT_MIMIC_ERROR(with("bert-base", "position_embedding_type", 0), "key 'position_embedding_type' must be a string");
  EXPECT_NO_THROW(with("gpt2-plain", "activation_function", nullptr));  // null: the default, as HF does
  // HF's names of the tanh GELU all read as it (gelu_accurate was refused), and a refusal lists every name taken
  for (const char* tanh_form : {"gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu_accurate"})
    EXPECT_EQ(with("gpt2-plain", "activation_function", tanh_form).activation, mimic::models::Activation::GeluTanh) << tanh_form;
  EXPECT_EQ(with("gpt2-plain", "activation_function", "swish").activation, mimic::models::Activation::Silu);
  EXPECT_MIMIC_ERROR(with("gpt2-plain", "activation_function", "quick_gelu"),
                     "unsupported activation_function 'quick_gelu' (supported: gelu_new, gelu_pytorch_tanh, gelu_fast, gelu_accurate, gelu, gelu_python, relu, "
                     "silu, swish)");
  EXPECT_EQ(with("gpt2-plain", "activation_function", "gelu_python").activation, mimic::models::Activation::GeluExact);
}

// A key of a hand-written config one or two letters from a key the family reads and the file lacks is refused naming
// both: pretrain --config trained the family's default in its place (the probe of 2026-12-02). Every config mimic
// ships — the recipes', the example models', the fixtures' (HF's own keys among them: embd_pdrop is three letters from
// resid_pdrop) — passes.
TEST(Checkpoint, AMisspeltConfigKeyIsRefusedNamingTheKeyItIsNear) {
  namespace fs = std::filesystem;
  std::vector<fs::path> configs;
  for (const char* dir : {"recipes/configs", "examples/models", "tests/fixtures/models"})
    for (const auto& e : fs::recursive_directory_iterator(fs::path(MIMIC_SOURCE_DIR) / dir))
      if (e.path().extension() == ".json" && (std::string(dir) == "recipes/configs" || e.path().filename() == "config.json"))
        configs.push_back(e.path());
  EXPECT_GE(configs.size(), 19u);
  for (const auto& path : configs) {
    auto j = nlohmann::json::parse(mimic::test::read_bytes(path.string()));
    if (!j.contains("vocab_size")) j["vocab_size"] = 512;  // pretrain sets it from the tokenizer
    EXPECT_NO_THROW(mimic::models::refuse_misspelt_keys(j, mimic::models::parse_config(j, path.string()), path.string())) << path;
  }
  const auto refused = [](nlohmann::json j, const char* drop, const char* typo) {
    j.erase(drop);
    j[typo] = 64;
    mimic::models::refuse_misspelt_keys(j, mimic::models::parse_config(j, "c.json"), "c.json");
  };
  const auto gpt2 = nlohmann::json::parse(mimic::test::read_bytes(model_dir("gpt2-plain") + "/config.json"));
  const auto llama = nlohmann::json::parse(mimic::test::read_bytes(model_dir("llama") + "/config.json"));
  EXPECT_MIMIC_ERROR(refused(gpt2, "n_inner", "n_iner"), "c.json: n_iner is no key mimic reads in a GPT-2 config: did you mean n_inner? (absent, it takes its default)");
  // a key read only where another is absent (GPT-2's n_positions, else the older n_ctx) is one the family reads too
  EXPECT_MIMIC_ERROR(refused(gpt2, "n_positions", "n_positons"), "c.json: n_positons is no key mimic reads in a GPT-2 config: did you mean n_positions?");
  EXPECT_MIMIC_ERROR(refused(llama, "rope_theta", "rope_thetha"), "c.json: rope_thetha is no key mimic reads in a Llama config: did you mean rope_theta?");
  // beside the key it is near, a key is no misspelling of it; three letters off, another key (HF's embd_pdrop)
  auto both = gpt2;
  both["n_iner"] = 64;
  EXPECT_NO_THROW(mimic::models::refuse_misspelt_keys(both, mimic::models::parse_config(both, "c.json"), "c.json"));
  // keys inside an object are no keys of the config: HF's top-level "dtype" (transformers 4.56 and 5) is one letter from
  // the "type" of a rope_scaling, and was refused as its misspelling (helper-37's review)
  auto scaled = llama;
  scaled["dtype"] = "float32";
  scaled["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  EXPECT_NO_THROW(mimic::models::refuse_misspelt_keys(scaled, mimic::models::parse_config(scaled, "c.json"), "c.json"));
  auto v5 = llama;
  v5.erase("rope_theta");
  v5.erase("rope_scaling");
  v5["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}};
  v5["dtype"] = "float32";
  EXPECT_NO_THROW(mimic::models::refuse_misspelt_keys(v5, mimic::models::parse_config(v5, "c.json"), "c.json"));
  auto embd = gpt2;
  embd.erase("resid_pdrop");
  embd["embd_pdrop"] = 0.1;
  EXPECT_NO_THROW(mimic::models::refuse_misspelt_keys(embd, mimic::models::parse_config(embd, "c.json"), "c.json"));
}

// A config.json may ask for any size; the weights beside it bound what is built. Every size key of both families,
// set far above what the fixture's model.safetensors holds, is refused by name before the network is allocated
// (n_embd 2^20 beside a 97-token vocabulary was 400 MB of embeddings, n_layer 1000 a thousand layers built
// only for the loader to find their tensors missing).
TEST(Checkpoint, ConfigSizesTheWeightsDoNotHoldAreRefusedByKeyBeforeAllocating) {
  TempDir dir;
  int n = 0;
  auto load_with = [&](const std::string& name, const char* key, int64_t value) {
    auto d = dir.file(name + std::to_string(n++));
    fs::copy(model_dir(name), d, fs::copy_options::recursive);
    edit_config(d, [&](auto& j) { j[key] = value; });
    return mimic::models::load_model(d);
  };
  const int64_t huge = int64_t{1} << 20;  // divisible by every head count of the fixtures
  const int64_t wide = int64_t{1} << 14;  // within every published model's sizes (parse_config bounds those beyond)
  EXPECT_MIMIC_ERROR(load_with("gpt2-plain", "n_layer", 1000), "config.json: n_layer is 1000, but model.safetensors has no tensor 'h.999.attn.c_attn.weight'");
  EXPECT_MIMIC_ERROR(load_with("gpt2-plain", "n_embd", wide), "config.json: n_embd asks for 'wte.weight' of shape [97, 16384], but model.safetensors holds [97, 32]");
  EXPECT_MIMIC_ERROR(load_with("gpt2-plain", "vocab_size", 10000000), "config.json: vocab_size asks for 'wte.weight' of shape [10000000, 32]");
  // beyond any published model, refused by the size itself (the seventh probe of 2026-11-29)
  EXPECT_MIMIC_ERROR(load_with("gpt2-plain", "n_embd", huge), "config.json: n_embd 1048576 is beyond any published model's hidden size: mimic reads at most 65536");
  EXPECT_MIMIC_ERROR(load_with("gpt2-plain", "vocab_size", 1000000000), "config.json: vocab_size 1000000000 is beyond any published model's vocabulary size");
  EXPECT_MIMIC_ERROR(load_with("gpt2-plain", "n_positions", huge), "config.json: n_positions asks for 'wpe.weight' of shape [1048576, 32], but model.safetensors holds [64, 32]");
  EXPECT_MIMIC_ERROR(load_with("gpt2-plain", "n_inner", wide), "config.json: n_inner asks for 'h.1.mlp.c_fc.weight' of shape [32, 16384], but model.safetensors holds [32, 128]");
  EXPECT_MIMIC_ERROR(load_with("gpt2-prefixed", "n_layer", 1000), "config.json: n_layer is 1000, but model.safetensors has no tensor 'transformer.h.999.");  // as the file names it
  EXPECT_MIMIC_ERROR(load_with("bert-base", "num_hidden_layers", 1000), "config.json: num_hidden_layers is 1000, but model.safetensors has no tensor 'encoder.layer.999.");
  EXPECT_MIMIC_ERROR(load_with("bert-base", "hidden_size", wide), "config.json: hidden_size asks for 'embeddings.word_embeddings.weight' of shape [101, 16384]");
  EXPECT_MIMIC_ERROR(load_with("bert-base", "max_position_embeddings", huge), "config.json: max_position_embeddings asks for 'embeddings.position_embeddings.weight'");
  EXPECT_MIMIC_ERROR(load_with("bert-base", "type_vocab_size", huge), "config.json: type_vocab_size asks for 'embeddings.token_type_embeddings.weight'");
  EXPECT_MIMIC_ERROR(load_with("bert-base", "intermediate_size", wide), "config.json: intermediate_size asks for 'encoder.layer.1.intermediate.dense.weight' of shape [16384, 32], but model.safetensors holds [64, 32]");
  // fewer layers than the file holds: refused by key and value too (the tenth probe: "unexpected tensor 'h.1.…'" named
  // neither)
  // named by the file's key: a prefixed checkpoint's with its prefix (it read the network's name: helper-80's probe)
  EXPECT_MIMIC_ERROR(load_with("gpt2-prefixed", "n_embd", wide), "config.json: n_embd asks for 'transformer.wte.weight' of shape [50257, 16384]");
  EXPECT_MIMIC_ERROR(load_with("gpt2-prefixed", "n_layer", 1), "holds a tensor 'transformer.h.1.attn.c_attn.weight'");
  EXPECT_MIMIC_ERROR(load_with("gpt2-plain", "n_layer", 1), "config.json: n_layer is 1, but model.safetensors holds a tensor 'h.1.attn.c_attn.weight' (model.safetensors holds more layers)");
  EXPECT_MIMIC_ERROR(load_with("bert-base", "num_hidden_layers", 1), "config.json: num_hidden_layers is 1, but model.safetensors holds a tensor 'encoder.layer.1.");
}

// Found by fuzzing mimic.json (bench/fuzz): a "format" or "layer" of the wrong JSON type escaped as nlohmann's exception.
TEST(Checkpoint, AMimicJsonOfTheWrongShapeIsRefusedNamingIt) {
  TempDir dir;
  const auto d = dir.file("m");
  fs::copy(model_dir("gpt2-plain"), d, fs::copy_options::recursive);
  auto with = [&](const std::string& text) {
    mimic::test::write_bytes(d + "/mimic.json", text);
    return mimic::models::load_model(d);
  };
  EXPECT_MIMIC_ERROR(with(R"({"format": 1})"), "mimic.json: not a mimic converted-model description (format mimic-converted-1 expected)");
  EXPECT_MIMIC_ERROR(with(R"({"format": "mimic-converted-1", "attention": [{"kind": "softmax", "layer": "0"}, {"kind": "softmax"}]})"),
                     "attention entry 0 is for layer \"0\", not 0");
  EXPECT_MIMIC_ERROR(with(R"({"format": "mimic-converted-1", "attention": [{"kind": "softmax", "layer": 1e300}, {"kind": "softmax"}]})"),
                     "attention entry 0 is for layer");
  EXPECT_NO_THROW(with(R"({"format": "mimic-converted-1", "attention": [{"kind": "softmax", "layer": 0}, {"kind": "softmax"}], "provenance": 3})"));
}
