// The Llama family (issue 36): Llama, Mistral, Qwen2 and Qwen3 checkpoints in HF's key layouts, random weights, against
// the float64 forward of an independent PyTorch implementation (tests/fixtures/gen_model_fixtures.py): grouped-query
// attention, rotary embeddings with llama3 and linear scaling, Qwen2's q/k/v biases, Qwen3's q/k norms and wide heads,
// tied and untied LM heads.
#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "mimic/attention/kinds.h"
#include "mimic/io/safetensors.h"
#include "mimic/models/family.h"
#include "mimic/models/model.h"
#include "test_util.h"

using mimic::io::SafeTensorsFile;
using mimic::test::TempDir;
namespace fs = std::filesystem;

namespace {
const char* kLlamaFixtures[] = {"llama", "mistral", "qwen2", "qwen3"};

std::string model_dir(const std::string& name) { return mimic::test::fixture("models/" + name); }

// max |got − want| relative to max |want|
double relative_error(const at::Tensor& got, const at::Tensor& want) {
  const auto w = want.to(torch::kDouble);
  return ((got.to(torch::kDouble) - w).abs().max() / w.abs().max()).item<double>();
}

// A copy of fixture `name` whose config.json is edited by `edit`.
std::string edited(const TempDir& dir, const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
  const fs::path out = dir.path() / (name + "-edited");
  fs::remove_all(out);
  fs::copy(model_dir(name), out, fs::copy_options::recursive);
  auto j = nlohmann::json::parse(mimic::test::read_bytes((out / "config.json").string()));
  edit(j);
  mimic::test::write_bytes((out / "config.json").string(), j.dump());
  return out.string();
}
}  // namespace

TEST(LlamaFamily, EveryArchitectureMatchesTheFloat64Reference) {
  torch::NoGradGuard ng;
  for (const char* name : kLlamaFixtures) {
    SCOPED_TRACE(name);
    auto model = mimic::models::load_model(model_dir(name));
    auto ref = SafeTensorsFile::open(model_dir(name) + ".reference.safetensors");
    auto out = model->forward({ref.load("input_ids"), {}, {}, {}});
    EXPECT_LT(relative_error(out.logits, ref.load("logits")), 1e-4);
    EXPECT_LT(relative_error(out.last_hidden_state, ref.load("last_hidden_state")), 1e-4);
    EXPECT_EQ(model->summary().family->model_type, name);
  }
}

// What each fixture stands for, read back: GQA (8 query heads over 2 KV heads), Qwen3's head of 16 beside a width of
// 32, tied and untied heads, and the family's answers to the stages' questions.
TEST(LlamaFamily, SummaryLayoutAndTheStagesQuestions) {
  auto llama = mimic::models::load_model(model_dir("llama"));
  const auto s = llama->summary();
  EXPECT_EQ(s.head, "lm");
  EXPECT_EQ(s.n_head, 8);
  EXPECT_EQ(s.n_kv_head, 2);
  EXPECT_EQ(s.head_dim, 8);
  EXPECT_TRUE(s.family->causal);
  EXPECT_EQ(s.family->position_table(), "");
  // embed, untied head, per layer 2 norms + q,o (64x64) + k,v (16x64) + 3 MLP matrices (48x64), final norm
  const int64_t d = 64, f = 48, v = 97;
  EXPECT_EQ(s.parameters, 2 * v * d + 2 * (2 * d + 2 * d * d + 2 * 16 * d + 3 * f * d) + d);
  auto q3 = mimic::models::load_model(model_dir("qwen3"))->summary();
  EXPECT_EQ(q3.head_dim, 16);
  EXPECT_EQ(q3.d_model, 32);
  EXPECT_EQ(q3.n_kv_head, 2);
  // the stages' questions
  const auto& fam = *s.family;
  EXPECT_TRUE(fam.is_attention_projection("layers.1.self_attn.k_proj.weight"));
  EXPECT_FALSE(fam.is_attention_projection("layers.1.mlp.up_proj.weight"));
  EXPECT_TRUE(fam.is_embedding("model.embed_tokens.weight"));
  EXPECT_TRUE(fam.is_buffer("layers.3.self_attn.rotary_emb.inv_freq"));
  EXPECT_FALSE(fam.takes_prefix("lm_head.weight"));
  EXPECT_EQ(fam.lora_targets(llama->module()).size(), 2u * 4u);
  // head 5 of 8 over 2 KV heads reads KV head 1: its key rows 8..15, its query rows 40..47, o_proj's columns 40..47
  const auto slices = fam.head_slices({d, 8, 2, 8}, 1, 5);
  ASSERT_EQ(slices.size(), 4u);
  EXPECT_EQ(slices[0].name, "layers.1.self_attn.q_proj.weight");
  EXPECT_EQ(slices[0].start, 40);
  EXPECT_EQ(slices[1].name, "layers.1.self_attn.k_proj.weight");
  EXPECT_EQ(slices[1].start, 8);
  EXPECT_EQ(slices[3].dim, 1);
  EXPECT_EQ(mimic::models::family("qwen2").head_slices({32, 4, 2, 8, true}, 0, 3).size(), 7u);  // and the q/k/v biases
}

// Decoding token by token (and in chunks) continues the rotation from the state's position: the logits equal the
// full forward's, with softmax and with a linear kernel swapped into every layer.
// Cached decoding equals the full forward for every kind, and the softmax KV cache is kept per KV head: g times
// smaller than one per query head (2 of 8 heads in the llama fixture, 2 of 4 in the others); so is the hybrid's ring. A mixed layer's kept
// heads 0 and 1 share KV head 0, so its cache holds one head, and its student's state the other heads alone.
TEST(LlamaFamily, CachedDecodingMatchesTheFullForwardWithAKvCachePerKvHead) {
  torch::NoGradGuard ng;
  const nlohmann::json hedgehog = {{"feature_map", "hedgehog"}};
  const std::vector<std::pair<std::string, nlohmann::json>> kinds = {
      {"softmax", nlohmann::json::object()}, {"linear", hedgehog}, {"hybrid", {{"feature_map", "hedgehog"}, {"window", 3}}},
      {"delta", nlohmann::json::object()}, {"mixed", {{"softmax_heads", {0, 1}}, {"kind", "linear"}, {"options", hedgehog}}}};
  for (const char* name : kLlamaFixtures) {
    std::map<std::string, int64_t> bytes;
    for (const auto& [kind, options] : kinds) {
      SCOPED_TRACE(std::string(name) + " " + kind);
      auto model = mimic::models::load_model(model_dir(name));
      const auto s = model->summary();
      torch::manual_seed(5);  // the same random maps for linear and mixed's student
      if (kind != "softmax")
        for (int64_t l = 0; l < s.n_layer; ++l)
          model->set_attention_kernel(l, mimic::attention::make_attention_kernel(kind, options, s.n_head, s.head_dim));
      auto ids = SafeTensorsFile::open(model_dir(name) + ".reference.safetensors").load("input_ids");
      const auto full = model->forward({ids, {}, {}, {}}).logits;
      auto state = model->new_decode_state();
      std::vector<at::Tensor> parts;
      for (auto [start, len] : std::vector<std::pair<int64_t, int64_t>>{{0, 5}, {5, 1}, {6, 1}, {7, 5}})
        parts.push_back(model->forward_step(ids.narrow(1, start, len), *state));
      EXPECT_LT(relative_error(torch::cat(parts, 1), full), 1e-5);
      bytes[kind] = state->bytes();
      ASSERT_LT(s.n_kv_head, s.n_head);
      const int64_t one_kv_head = 2 * s.n_layer * ids.size(0) * 12 * s.head_dim * 4;  // keys and values, float32, 12 tokens
      if (kind == "softmax") EXPECT_EQ(bytes[kind], s.n_kv_head * one_kv_head);
      if (kind == "hybrid")  // the linear state per query head, as linear's; the ring of 3 keys and values per KV head
        EXPECT_EQ(bytes[kind], bytes["linear"] + s.n_kv_head * one_kv_head / 12 * 3);
      if (kind == "mixed") {
        ASSERT_EQ(bytes["linear"] % s.n_head, 0);  // a state per query head, each the same size
        EXPECT_EQ(bytes[kind], bytes["linear"] / s.n_head * (s.n_head - 2) + one_kv_head);
      }
    }
  }
}

// Saved and loaded again: the same keys in the same layout (model. prefix, lm_head.weight only where the head is its
// own), the same logits.
TEST(LlamaFamily, ASavedModelLoadsBackWithTheSameKeysAndLogits) {
  torch::NoGradGuard ng;
  TempDir dir;
  for (const char* name : {"llama", "qwen2"}) {
    SCOPED_TRACE(name);
    auto model = mimic::models::load_model(model_dir(name));
    const auto out = (dir.path() / name).string();
    model->save(out);
    auto keys = [](const std::string& file) {
      auto names = SafeTensorsFile::open(file).names();
      std::sort(names.begin(), names.end());
      return names;
    };
    EXPECT_EQ(keys(out + "/model.safetensors"), keys(model_dir(name) + "/model.safetensors"));
    auto ids = SafeTensorsFile::open(model_dir(name) + ".reference.safetensors").load("input_ids");
    EXPECT_TRUE(torch::equal(mimic::models::load_model(out)->forward({ids, {}, {}, {}}).logits, model->forward({ids, {}, {}, {}}).logits));
  }
  const auto q2 = SafeTensorsFile::open(model_dir("qwen2") + "/model.safetensors").names();
  EXPECT_EQ(std::count(q2.begin(), q2.end(), "lm_head.weight"), 0);  // tied: the fixture has no head of its own
}

// A sliding window shorter than the context (Mistral-7B-v0.1: 4096 of 32768; it was refused) caps the context at the
// window: up to there windowed softmax is full softmax, so the logits are the reference's (computed without a window)
// on the first 8 tokens, and the 9th is refused. Qwen2 windows the layers from max_window_layers on (or those
// layer_types names): a window no layer uses leaves the context alone (the tenth probe: it was refused).
TEST(LlamaFamily, ASlidingWindowShorterThanTheContextCapsTheContextAtTheWindow) {
  torch::NoGradGuard ng;
  TempDir dir;
  using mimic::models::load_model;
  auto ref = SafeTensorsFile::open(model_dir("mistral") + ".reference.safetensors");
  const auto ids = ref.load("input_ids");
  ASSERT_GT(ids.size(1), 8);
  auto mistral = load_model(edited(dir, "mistral", [](auto& j) { j["sliding_window"] = 8; }));
  EXPECT_EQ(mistral->summary().max_positions, 8);
  EXPECT_EQ(mistral->summary().context_note, "sliding_window; max_position_embeddings 128");
  const auto first = ids.slice(1, 0, 8);
  EXPECT_LT(relative_error(mistral->forward({first, {}, {}, {}}).logits, ref.load("logits").slice(1, 0, 8)), 1e-4);
  EXPECT_MIMIC_ERROR(mistral->forward({ids.slice(1, 0, 9), {}, {}, {}}),
                     "sequence of 9 tokens exceeds the model's context of 8 (sliding_window; max_position_embeddings 128)");
  // the commands' refusals of a length name the window too, not a bare 8 the config's 128 seems to contradict
  const std::string capped = edited(dir, "mistral", [](auto& j) { j["sliding_window"] = 8; });
  auto rec = mimic::test::mimic_cli("record --model " + capped + " --data mqar:vocab=10,seq_len=16,pairs=3 --seq-len 16 --samples 1 --out " +
                                    dir.file("r.h5") + " --threads 1");
  EXPECT_NE(rec.code, 0);
  EXPECT_NE(rec.err.find("--seq-len 16 must lie in 2..8 (8: the model's context — sliding_window; max_position_embeddings 128)"),
            std::string::npos) << rec.err;
  auto gen = mimic::test::mimic_cli("eval --task mqar --model " + capped + " --data mqar:vocab=97,seq_len=24,pairs=3 --examples 2 --threads 1");
  EXPECT_NE(gen.err.find("exceeds the model's context of 8 (sliding_window; max_position_embeddings 128)"), std::string::npos) << gen.err;
  EXPECT_EQ(load_model(edited(dir, "mistral", [](auto& j) { j["sliding_window"] = 128; }))->summary().max_positions, 128);
  EXPECT_EQ(load_model(edited(dir, "mistral", [](auto& j) { j["sliding_window"] = nullptr; }))->summary().context_note, "");
  // an absent sliding_window is Mistral's default of 4096 (it was read as none: full attention beyond 4096 tokens, where
  // HF's windows; the Llama-family probe of 2026-12-01); Llama has no window, whatever its config says (HF ignores it)
  const auto trimmed = load_model(edited(dir, "mistral", [](auto& j) { j.erase("sliding_window"), j["max_position_embeddings"] = 8192; }))->summary();
  EXPECT_EQ(trimmed.max_positions, 4096);
  EXPECT_EQ(trimmed.context_note, "sliding_window absent: Mistral's default 4096; max_position_embeddings 8192");
  EXPECT_EQ(load_model(edited(dir, "llama", [](auto& j) { j["use_sliding_window"] = true, j["sliding_window"] = 8; }))->summary().max_positions, 256);
  // Qwen2's and Qwen3's classes default the window to 4096 too: used where use_sliding_window and the layers say so
  const auto qwen = load_model(edited(dir, "qwen2", [](auto& j) {
                      j.erase("sliding_window"), j["use_sliding_window"] = true, j["max_window_layers"] = 0, j["max_position_embeddings"] = 8192;
                    }))->summary();
  EXPECT_EQ(qwen.max_positions, 4096);
  EXPECT_EQ(qwen.context_note, "sliding_window absent: Qwen2's default 4096; max_position_embeddings 8192");

  auto context = [&](const std::function<void(nlohmann::json&)>& edit) { return load_model(edited(dir, "qwen2", edit))->summary().max_positions; };
  EXPECT_EQ(context([](auto& j) { j["use_sliding_window"] = true, j["sliding_window"] = 16, j["max_window_layers"] = 1; }), 16);
  EXPECT_EQ(context([](auto& j) { j["use_sliding_window"] = true, j["sliding_window"] = 16; }), 128);  // the fixture's max_window_layers 2: no layer
  EXPECT_EQ(context([](auto& j) { j["use_sliding_window"] = false, j["sliding_window"] = 16, j["max_window_layers"] = 0; }), 128);
  EXPECT_EQ(context([](auto& j) {
              j["use_sliding_window"] = true, j["sliding_window"] = 16, j["layer_types"] = {"full_attention", "sliding_attention"};
            }),
            16);
  EXPECT_EQ(context([](auto& j) {
              j["use_sliding_window"] = true, j["sliding_window"] = 16, j["max_window_layers"] = 0, j["layer_types"] = {"full_attention", "full_attention"};
            }),
            128);
}

// transformers 5 writes the rotary settings as one object, rope_parameters {"rope_theta", "rope_type", "factor", ...},
// and may leave "rope_theta": null at the top; read as transformers 4's keys alone, Llama 3's theta of 500000 and its
// llama3 scaling fell back to the defaults without an error. Both spellings are read; given both, they must agree.
TEST(LlamaFamily, RotarySettingsAreReadFromTransformers5sRopeParametersToo) {
  torch::NoGradGuard ng;
  TempDir dir;
  using mimic::models::load_model;
  auto ref = SafeTensorsFile::open(model_dir("llama") + ".reference.safetensors");
  const auto ids = ref.load("input_ids");
  const auto want = ref.load("logits");
  auto logits = [&](const std::function<void(nlohmann::json&)>& edit) { return load_model(edited(dir, "llama", edit))->forward({ids, {}, {}, {}}).logits; };
  const auto v5 = [](nlohmann::json& j) {  // the fixture's rope_theta and llama3 rope_scaling, as transformers 5 writes them
    nlohmann::json p = j["rope_scaling"];
    p["rope_theta"] = j["rope_theta"];
    j["rope_parameters"] = p, j["rope_theta"] = nullptr;
    j.erase("rope_scaling");
  };
  EXPECT_LT(relative_error(logits(v5), want), 1e-4);
  // what was read, as `mimic info` shows it
  EXPECT_EQ(load_model(edited(dir, "llama", v5))->summary().rotary,
            "theta 10000, llama3 scaling: factor 4, low_freq_factor 1, high_freq_factor 16, original context 128");
  EXPECT_EQ(mimic::models::load_model(model_dir("qwen2"))->summary().rotary, "theta 10000, linear scaling: factor 2");
  // the theta and the scaling inside are read: each moves the logits as at the top
  const auto theta = logits([&](auto& j) { v5(j), j["rope_parameters"]["rope_theta"] = 500000.0; });
  EXPECT_TRUE(torch::equal(theta, logits([](auto& j) { j["rope_theta"] = 500000.0; })));
  EXPECT_GT(relative_error(theta, want), 1e-2);
  const auto plain = logits([&](auto& j) { v5(j), j["rope_parameters"] = {{"rope_theta", 10000.0}, {"rope_type", "default"}}; });
  EXPECT_TRUE(torch::equal(plain, logits([](auto& j) { j["rope_scaling"] = nullptr; })));
  EXPECT_GT(relative_error(plain, want), 1e-3);
  // both spellings, agreeing: read; disagreeing, or a form mimic cannot compute: refused by name
  EXPECT_LT(relative_error(logits([](auto& j) { j["rope_parameters"] = j["rope_scaling"], j["rope_parameters"]["rope_theta"] = 10000.0; }), want), 1e-4);
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "llama", [&](auto& j) { v5(j), j["rope_theta"] = 500000.0; })),
                     "rope_parameters's rope_theta 10000 and rope_theta 500000 disagree");
  // beside a rope_scaling that says anything, rope_parameters is what neither version reads (5 takes rope_scaling over it)
  EXPECT_LT(relative_error(logits([](auto& j) { j["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 4.0}, {"rope_theta", 500000.0}}; }), want), 1e-4);
  EXPECT_LT(relative_error(logits([&](auto& j) { v5(j), j["rope_scaling"] = nlohmann::json::object(); }), want), 1e-4);  // {} says nothing
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "llama", [&](auto& j) { v5(j), j["rope_parameters"]["rope_type"] = "yarn"; })),
                     "rope_parameters type 'yarn' is not implemented (mimic reads default, linear and llama3)");
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "llama", [&](auto& j) {
                       v5(j), j["rope_parameters"] = {{"full_attention", j["rope_parameters"]}, {"sliding_attention", {{"rope_theta", 10000.0}}}};
                     })),
                     "rope_parameters per layer type ('full_attention': {...}) is not implemented");
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "llama", [](auto& j) { j["rope_theta"] = nullptr; })), "rope_theta is null and neither rope_parameters nor rope_scaling gives it");
  // configs transformers 4 and 5 read apart (the second Llama-family probe): beside rope_scaling, 4 reads the top theta
  // or 10000 and 5 one inside rope_scaling first; 4 lets "type" override "rope_type", 5 the reverse
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "llama", [](auto& j) { j.erase("rope_theta"), j["rope_scaling"]["rope_theta"] = 500000.0; })),
                     "rope_scaling's rope_theta 500000 and the default rope_theta 10000 disagree");
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "llama", [](auto& j) { j["rope_scaling"]["rope_theta"] = 500000.0; })),
                     "rope_scaling's rope_theta 500000 and rope_theta 10000 disagree");
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "llama", [](auto& j) { j["rope_scaling"] = {{"rope_type", "default"}, {"type", "linear"}, {"factor", 2.0}}; })),
                     "rope_scaling's rope_type \"default\" and type \"linear\" disagree");
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "llama", [](auto& j) { j["rope_scaling"] = {{"rope_type", nullptr}, {"factor", 2.0}}; })), "names no rope_type");
  EXPECT_LT(relative_error(logits([](auto& j) { j["rope_scaling"]["rope_theta"] = 10000.0, j["rope_scaling"]["type"] = "llama3"; }), want), 1e-4);
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "llama", [&](auto& j) { v5(j), j["rope_parameters"]["partial_rotary_factor"] = 0.5; })),
                     "partial_rotary_factor 0.5: mimic rotates whole heads only");
  // original_max_position_embeddings written as a float (a config saved through a float field) is the same number; a
  // fraction of a position is refused (it was refused as "must be an integer" either way)
  EXPECT_TRUE(torch::equal(logits([](auto& j) { j["rope_scaling"]["original_max_position_embeddings"] = 128.0; }), logits([](auto&) {})));
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "llama", [](auto& j) { j["rope_scaling"]["original_max_position_embeddings"] = 127.5; })),
                     "original_max_position_embeddings must be a whole number of positions, got 127.5");
}

// attention_bias puts a bias on q, k, v and o (HF's Llama and Qwen3: bias=attention_bias on all four; o_proj's was
// refused as an unexpected tensor: the Llama-family probe of 2026-12-01). Mistral's attention has none: the key is ignored,
// as HF ignores it. --freeze-kept-heads holds a kept head's q/k/v bias rows too (o's is no head's).
TEST(LlamaFamily, AttentionBiasPutsABiasOnAllFourProjections) {
  torch::NoGradGuard ng;
  TempDir dir;
  auto model = mimic::models::load_model(model_dir("llama-attention-bias"));
  auto ref = SafeTensorsFile::open(model_dir("llama-attention-bias") + ".reference.safetensors");
  EXPECT_LT(relative_error(model->forward({ref.load("input_ids"), {}, {}, {}}).logits, ref.load("logits")), 1e-4);
  const auto params = model->module().named_parameters();
  ASSERT_NE(params.find("layers.1.self_attn.o_proj.bias"), nullptr);
  EXPECT_GT(params["layers.1.self_attn.o_proj.bias"].abs().max().item<double>(), 0.1);
  EXPECT_NO_THROW(mimic::models::load_model(edited(dir, "mistral", [](auto& j) { j["attention_bias"] = true; })));
  const auto s = model->summary();
  const auto slices = s.family->head_slices({s.d_model, s.n_head, s.n_kv_head, s.head_dim, s.qkv_bias}, 1, 3);
  std::map<std::string, std::pair<int64_t, int64_t>> rows;
  for (const auto& h : slices) rows[h.name] = {h.start, h.length};
  EXPECT_EQ(rows["layers.1.self_attn.q_proj.bias"], std::make_pair(int64_t{24}, int64_t{8}));  // head 3 of 4, width 8
  EXPECT_EQ(rows["layers.1.self_attn.k_proj.bias"], std::make_pair(int64_t{8}, int64_t{8}));   // its KV group, 1 of 2
  EXPECT_EQ(rows.count("layers.1.self_attn.o_proj.bias"), 0u);
  EXPECT_EQ(mimic::models::load_model(model_dir("llama"))->summary().qkv_bias, false);
}

// Config keys that change what the model computes and that mimic does not implement are refused by name; so are sizes
// that do not fit together.
TEST(LlamaFamily, ConfigsMimicCannotComputeAreRefusedByName) {
  TempDir dir;
  using mimic::models::load_model;
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "llama", [](auto& j) { j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}}; })),
                     "rope_scaling type 'yarn' is not implemented (mimic reads default, linear and llama3)");
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "qwen2", [](auto& j) { j["use_sliding_window"] = true, j["layer_types"] = {"full_attention"}; })),
                     "layer_types must list one type per layer (2)");
  // a window no layer uses still has its range (the eleventh probe: −5 was accepted)
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "qwen2", [](auto& j) { j["sliding_window"] = -5; })), "key 'sliding_window' must be at least 1, got -5");
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "qwen2", [](auto& j) { j["max_window_layers"] = -1; })), "key 'max_window_layers' must be at least 0, got -1");
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "qwen2", [](auto& j) { j["layer_types"] = {"full_attention", "bogus"}; })),
                     "layer_types holds \"bogus\" (mimic reads full_attention and sliding_attention)");
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "llama", [](auto& j) { j["num_key_value_heads"] = 3; })),
                     "num_attention_heads 8 is not a multiple of num_key_value_heads 3");
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "llama", [](auto& j) { j["mlp_bias"] = true; })), "mlp_bias true");
  // ranges name the family's own key (the tenth probe: "the layer-norm epsilon" for rms_norm_eps)
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "llama", [](auto& j) { j["rms_norm_eps"] = -1e-6; })),
                     "rms_norm_eps -1e-06 is a normalisation epsilon and must lie in (0, 1)");
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "llama", [](auto& j) { j["num_hidden_layers"] = 2000; })),
                     "num_hidden_layers 2000 is beyond any published model's layers: mimic reads at most 1024");
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "llama", [](auto& j) { j["hidden_act"] = "gelu"; })), "is SwiGLU (silu)");
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "llama", [](auto& j) { j["rope_scaling"]["high_freq_factor"] = 0.5; })),
                     "0 < low_freq_factor < high_freq_factor");
  // a key the type needs, missing: the file, the object and the key, each after a colon (helper-80: "config.json rope_scaling")
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "llama", [](auto& j) { j["rope_scaling"].erase("low_freq_factor"); })),
                     "config.json: rope_scaling: missing key 'low_freq_factor'");
  // rotary settings mimic cannot compute as given (the tenth probe: both ran as the plain rotation)
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "llama", [](auto& j) { j["partial_rotary_factor"] = 0.5; })),
                     "partial_rotary_factor 0.5: mimic rotates whole heads only");
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "llama", [](auto& j) { j["rope_scaling"] = {{"factor", 2.0}}; })), "names no rope_type");
  // an untied config beside tied weights, biases the weights lack: the tensor is missing, named with the key that asks
  // for it (the tenth probe: "missing tensor '…q_proj.bias'" named no key)
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "qwen2", [](auto& j) { j["tie_word_embeddings"] = false; })),
                     "config.json: tie_word_embeddings is false, but model.safetensors has no tensor 'lm_head.weight'");
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "llama", [](auto& j) { j["attention_bias"] = true; })),
                     "config.json: attention_bias is true, but model.safetensors has no tensor 'model.layers.0.self_attn.q_proj.bias' (in any layer)");
  // a tensor the type always has, missing from every layer, is named at layer 0 with the reason, not blamed on the layer
  // count (the Llama-family probe of 2026-12-01: "num_hidden_layers is 2, but … has no tensor 'layers.1.…'")
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "llama", [](auto& j) { j["model_type"] = "qwen2", j["architectures"] = {"Qwen2ForCausalLM"}; })),
                     "model.safetensors has no tensor 'model.layers.0.self_attn.q_proj.bias' (in any layer): Qwen2's q/k/v projections have biases");
  // a key left out is named as absent, not as null
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "qwen2", [](auto& j) { j.erase("tie_word_embeddings"); })),
                     "tie_word_embeddings is absent (its default asks for it), but model.safetensors has no tensor 'lm_head.weight'");
  // rotary embeddings rotate pairs: an odd head, given or derived, is refused by key (the ninth probe: it failed deep
  // in the first forward with LibTorch's words)
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "llama", [](auto& j) { j["head_dim"] = 7; })), "head_dim 7 is odd: rotary position embeddings");
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "llama", [](auto& j) { j["num_attention_heads"] = 64; })),
                     "head_dim 1 (hidden_size / num_attention_heads) is odd");
  // a head_dim the weights do not have: refused by key before anything is allocated, each key with its own value (the
  // ninth probe: the message printed the product, "num_key_value_heads 64" for 8)
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "qwen3", [](auto& j) { j["head_dim"] = 32; })),
                     "(num_attention_heads 4 × head_dim 32 disagrees with the weights)");
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "llama", [](auto& j) { j["num_key_value_heads"] = 4; })),
                     "(num_key_value_heads 4 × head_dim 8 (hidden_size 64 / num_attention_heads 8) disagrees with the weights)");
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "qwen2", [](auto& j) { j["num_attention_heads"] = 2; })),
                     "(num_key_value_heads 2 × head_dim 16 (hidden_size 32 / num_attention_heads 2) disagrees with the weights)");
  // num_key_value_heads absent is the type's default (HF's config classes: Llama one per query head, Mistral 8, Qwen2
  // and Qwen3 32; one per query head was read for all: the Llama-family probe): the message says so instead of showing
  // a value the file lacks (the tenth probe)
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "llama", [](auto& j) { j.erase("num_key_value_heads"); })),
                     "(num_key_value_heads absent (one per query head: 8) × head_dim 8 (hidden_size 64 / num_attention_heads 8) disagrees");
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "qwen2", [](auto& j) { j.erase("num_key_value_heads"); })),
                     "num_attention_heads 4 is not a multiple of num_key_value_heads (absent: the default) 32");
  // a null is one per query head, as HF's classes turn it (the second probe: it was read as absent)
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "qwen2", [](auto& j) { j["num_key_value_heads"] = nullptr; })),
                     "(num_key_value_heads null (one per query head: 4) × head_dim 8 (hidden_size 32 / num_attention_heads 4) disagrees");
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "mistral", [](auto& j) { j.erase("num_key_value_heads"); })),
                     "num_attention_heads 4 is not a multiple of num_key_value_heads (absent: the default) 8");
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "qwen3", [](auto& j) { j["head_dim"] = nullptr; })), "head_dim is null (Qwen3's heads have a width of their own");
  // Qwen3's head_dim absent is its config class's 128, not hidden / heads
  EXPECT_MIMIC_ERROR(load_model(edited(dir, "qwen3", [](auto& j) { j.erase("head_dim"); })),
                     "(num_attention_heads 4 × head_dim 128 (absent: Qwen3's default) disagrees with the weights)");
  // the default spelled out is the default
  EXPECT_NO_THROW(load_model(edited(dir, "llama", [](auto& j) { j["head_dim"] = 8; })));
}

// pretrain --arch llama on a recall task (its own vocabulary: no tokenizer needed): a 2-layer Llama with grouped-query
// attention learns MQAR well above chance, is saved as LlamaForCausalLM with its own head, and goes through the
// conversion pipeline — record, distill (hedgehog maps on the rotated q and k), convert — into a model eval reads.
// On prose a fresh model of the family trains with the fetched tokenizer.json its registry line names.
TEST(LlamaFamily, PretrainsOnMqarAndConvertsThroughThePipeline) {
  TempDir dir;
  mimic::test::write_bytes(dir.file("c.json"), R"({"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 32, "rope_theta": 10000.0})");
  const std::string task = "mqar:vocab=10,seq_len=24,pairs=3";
  auto r = mimic::test::mimic_cli("pretrain --arch llama --config " + dir.file("c.json") + " --data " + task +
                                  " --seq-len 24 --batch-size 32 --steps 150 --warmup 10 --lr 3e-3 --eval-every 150 --eval-batches 4 --out " +
                                  dir.file("soft") + " --threads 1 --seed 3 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto cfg = nlohmann::json::parse(mimic::test::read_bytes(dir.file("soft/config.json")));
  EXPECT_EQ(cfg["architectures"][0], "LlamaForCausalLM");
  const auto keys = SafeTensorsFile::open(dir.file("soft/model.safetensors")).names();
  EXPECT_EQ(std::count(keys.begin(), keys.end(), "lm_head.weight"), 1);
  EXPECT_EQ(std::count(keys.begin(), keys.end(), "model.layers.1.self_attn.k_proj.weight"), 1);
  auto e = mimic::test::mimic_cli("eval --task mqar --model " + dir.file("soft") + " --data " + task + " --examples 200 --json --threads 1");
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_GT(nlohmann::json::parse(e.out)["model"]["accuracy"].get<double>(), 0.35) << e.out;  // values are 5 tokens: chance 0.2
  // the conversion pipeline on it
  auto rec = mimic::test::mimic_cli("record --model " + dir.file("soft") + " --data " + task + " --split train --samples 16 --out " +
                                    dir.file("r.h5") + " --threads 1 --json");
  ASSERT_EQ(rec.code, 0) << rec.err;
  auto dis = mimic::test::mimic_cli("distill --record " + dir.file("r.h5") + " --feature-map hedgehog --epochs 2 --out " + dir.file("maps.safetensors") +
                                    " --threads 1 --json");
  ASSERT_EQ(dis.code, 0) << dis.err;
  auto conv = mimic::test::mimic_cli("convert --model " + dir.file("soft") + " --maps " + dir.file("maps.safetensors") + " --out " +
                                     dir.file("converted") + " --threads 1 --json");
  ASSERT_EQ(conv.code, 0) << conv.err;
  auto ce = mimic::test::mimic_cli("eval --task mqar --model " + dir.file("converted") + " --data " + task + " --examples 20 --json --threads 1");
  ASSERT_EQ(ce.code, 0) << ce.err;
  EXPECT_NE(nlohmann::json::parse(ce.out)["model"]["attention"].get<std::string>().find("linear (hedgehog"), std::string::npos) << ce.out;
  // prose: a fresh Mistral trains with the fetched SentencePiece tokenizer (32,000 tokens), which its folder then holds
  std::string text;
  for (int k = 0; k < 80; ++k) text += "The harbour master wrote on day " + std::to_string(k) + " that the tide was late.\n";
  mimic::test::write_bytes(dir.file("prose.txt"), text);
  auto prose = mimic::test::mimic_cli("pretrain --arch mistral --config " + dir.file("c.json") + " --data " + dir.file("prose.txt") +
                                      " --steps 2 --seq-len 16 --batch-size 2 --eval-every 2 --eval-batches 1 --out " + dir.file("p") +
                                      " --threads 1 --json");
  ASSERT_EQ(prose.code, 0) << prose.err;
  const auto pc = nlohmann::json::parse(mimic::test::read_bytes(dir.file("p/config.json")));
  EXPECT_EQ(pc["architectures"][0], "MistralForCausalLM");
  EXPECT_EQ(pc["vocab_size"], 32000);
  EXPECT_EQ(pc["bos_token_id"], 1);  // <s>: what every training document opened with (it was </s>, GPT-2's custom)
  EXPECT_EQ(pc["eos_token_id"], 2);
  EXPECT_TRUE(fs::exists(dir.file("p/tokenizer.json")));
  auto pe = mimic::test::mimic_cli("eval --model " + dir.file("p") + " --text 'the tide was late' --json --threads 1");
  ASSERT_EQ(pe.code, 0) << pe.err;
  // <s> is no target since 2026-12-02 (data::PackedBatches): a run begun before, whose best validation loss counted it,
  // is not resumed — its fingerprint lacks the key (helper-38's review)
  mimic::test::edit_safetensors_json(dir.file("p/checkpoint.safetensors"), "state", [](nlohmann::json& j) {
    ASSERT_EQ(j["fingerprint"].at("document_start_target"), false);
    j["fingerprint"].erase("document_start_target");
  });
  auto older = mimic::test::mimic_cli("pretrain --arch mistral --config " + dir.file("c.json") + " --data " + dir.file("prose.txt") +
                                      " --steps 2 --seq-len 16 --batch-size 2 --eval-every 2 --eval-batches 1 --out " + dir.file("p") + " --threads 1");
  EXPECT_EQ(older.code, 1);
  EXPECT_NE(older.err.find("was written with other settings: document_start_target"), std::string::npos) << older.err;
}

namespace {
// A SentencePiece-style tokenizer.json small enough for the fixtures' 97-token vocabulary: <unk> <s> </s>, ▁, letters,
// digits, punctuation, a few merges; characters outside it become <unk>.
nlohmann::json tiny_sentencepiece() {
  nlohmann::json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}, {"▁", 3}};
  const std::string chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,;:!?'\"-()";
  for (char c : chars) vocab[std::string(1, c)] = vocab.size();
  const std::vector<std::pair<std::string, std::string>> merges = {{"▁", "t"}, {"h", "e"}, {"▁t", "he"}, {"▁", "a"}, {"i", "n"}, {"▁", "s"},
                                                                 {"e", "r"}, {"a", "n"}, {"▁", "w"}, {"o", "n"}, {"▁", "o"}, {"r", "e"}};
  nlohmann::json m = nlohmann::json::array();
  for (const auto& [a, b] : merges) {
    m.push_back(a + " " + b);
    if (!vocab.contains(a + b)) vocab[a + b] = vocab.size();
  }
  return {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", m}, {"unk_token", "<unk>"}, {"fuse_unk", true}, {"byte_fallback", false}}},
          {"normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "Prepend"}, {"prepend", "▁"}},
                                                                 {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}}}}},
          {"pre_tokenizer", nullptr},
          {"added_tokens", {{{"id", 0}, {"content", "<unk>"}, {"special", true}}, {{"id", 1}, {"content", "<s>"}, {"special", true}},
                            {{"id", 2}, {"content", "</s>"}, {"special", true}}}},
          {"post_processor", {{"type", "TemplateProcessing"},
                              {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
                              {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
          {"decoder", {{"type", "Sequence"}, {"decoders", {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
                                                           {{"type", "Fuse"}}, {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}}};
}
}  // namespace

TEST(LlamaFamily, AFolderWithTokenizerJsonRunsEveryStageOnProse) {
  TempDir dir;
  const std::string m = dir.file("m");
  fs::copy(model_dir("llama"), m, fs::copy_options::recursive);
  const auto tj = tiny_sentencepiece();
  ASSERT_LE(tj["model"]["vocab"].size(), 97u);
  mimic::test::write_bytes(m + "/tokenizer.json", tj.dump());
  mimic::test::write_bytes(m + "/tokenizer_config.json", R"({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"})");
  // unseen prose: a few paragraphs written for this test, as a folder of .txt files (the own-data path)
  fs::create_directories(dir.file("text"));
  std::string prose;
  for (int k = 0; k < 60; ++k)
    prose += "On the morning of day " + std::to_string(k + 2) + " the harbour master wrote: the tide was late, the wind turned west,\n"
             "and the boats stayed in. Nobody could say why; the old sailors said it was the moon again.\n";
  mimic::test::write_bytes(dir.file("text/log.txt"), prose);
  const std::string data = dir.file("text");

  auto tok = mimic::test::mimic_cli("tokenize --model " + m + " --text 'the tide was late' --json");
  ASSERT_EQ(tok.code, 0) << tok.err;
  const auto ids = nlohmann::json::parse(tok.out)["ids"];
  EXPECT_EQ(ids[0], 1);                                    // <s> from the template
  EXPECT_EQ(ids[1], tj["model"]["vocab"]["▁the"]);         // merged
  // a text is scored as the model reads one: opened by the template's <s>, which is not itself scored
  auto et = mimic::test::mimic_cli("eval --model " + m + " --text 'the tide was late' --json --threads 1");
  ASSERT_EQ(et.code, 0) << et.err;
  EXPECT_EQ(nlohmann::json::parse(et.out)["tokens"], ids.size()) << et.out;
  EXPECT_EQ(nlohmann::json::parse(et.out)["predicted"], ids.size() - 1) << et.out;
  auto ev = mimic::test::mimic_cli("eval --model " + m + " --data " + data + " --split test --json --threads 1");
  ASSERT_EQ(ev.code, 0) << ev.err;
  const double ppl = nlohmann::json::parse(ev.out)["perplexity"].get<double>();
  EXPECT_GT(ppl, 20.0) << ev.out;  // random weights over 97 tokens
  EXPECT_TRUE(std::isfinite(ppl)) << ev.out;
  // the recall instruments' defaults fit a context of 256 that a text opens with <s> in (the probe of 2026-12-01: the
  // copy segment of 128 ran to 257 tokens and was refused; passkey's 512 was refused): 127 tokens twice after <s>, and
  // the default lengths that fit, the other said
  auto copy = mimic::test::mimic_cli("eval --task copy --model " + m + " --data " + data + " --split test --segments 1 --json --threads 1");
  ASSERT_EQ(copy.code, 0) << copy.err;
  EXPECT_EQ(nlohmann::json::parse(copy.out)["segment_len"], 127) << copy.out;
  // (this letter-by-letter tokenizer needs 176 tokens for a prompt: 128 is then refused as too short, not the context)
  auto pk = mimic::test::mimic_cli("eval --task passkey --model " + m + " --trials 1 --alternatives 2 --json --threads 1");
  EXPECT_NE(pk.err.find("note: passkey lengths 512 left out: beyond the model's context of 256"), std::string::npos) << pk.err;
  EXPECT_NE(pk.err.find("passkey length 128 is too short"), std::string::npos) << pk.err;
  auto rec = mimic::test::mimic_cli("record --model " + m + " --data " + data + " --split train --samples 4 --seq-len 32 --out " + dir.file("r.h5") +
                                    " --threads 1 --json");
  ASSERT_EQ(rec.code, 0) << rec.err;
  // --repeat at the default length: 256 less the <s> left an odd 255 and was refused (helper-50's probe of
  // 2026-12-04); the default gives up one token, [<s> A A] in 255
  auto repeated = mimic::test::mimic_cli("record --model " + m + " --data " + data + " --split train --samples 1 --repeat --out " +
                                         dir.file("rep.h5") + " --threads 1 --json");
  ASSERT_EQ(repeated.code, 0) << repeated.err;
  EXPECT_EQ(nlohmann::json::parse(repeated.out)["seq_len"], 255) << repeated.out;
  auto dis = mimic::test::mimic_cli("distill --record " + dir.file("r.h5") + " --feature-map hedgehog --epochs 2 --out " + dir.file("maps.safetensors") +
                                    " --threads 1 --json");
  ASSERT_EQ(dis.code, 0) << dis.err;
  auto conv = mimic::test::mimic_cli("convert --model " + m + " --maps " + dir.file("maps.safetensors") + " --out " + dir.file("c") + " --threads 1 --json");
  ASSERT_EQ(conv.code, 0) << conv.err;
  EXPECT_TRUE(fs::exists(dir.file("c/tokenizer.json")));  // the converted folder carries its tokenizer
  // plain PyTorch reads the converted Llama (rotary embeddings, grouped-query attention, hedgehog maps) as mimic computes
  // it (where /usr/bin/python3 has torch: this project's machines do, the GPU machines do not)
  auto fw = mimic::test::mimic_cli("forward --model " + dir.file("c") + " --text 'the tide was late, the wind turned west' --out " +
                                   dir.file("f.safetensors") + " --threads 1");
  ASSERT_EQ(fw.code, 0) << fw.err;
  if (mimic::test::python_has("torch")) {
    mimic::test::write_bytes(dir.file("py.sh"), "/usr/bin/python3 " + std::string(MIMIC_SOURCE_DIR) + "/python/mimic_torch.py " + dir.file("c") +
                                                    " --check " + dir.file("f.safetensors") + " >" + dir.file("py.out") + " 2>&1");
    EXPECT_EQ(std::system(("bash " + dir.file("py.sh")).c_str()), 0) << mimic::test::read_bytes(dir.file("py.out"));
    const auto py = nlohmann::json::parse(mimic::test::read_bytes(dir.file("py.out")), nullptr, false);
    ASSERT_TRUE(py.is_object()) << mimic::test::read_bytes(dir.file("py.out"));
    EXPECT_LT(py["max_relative_error"].get<double>(), 1e-4) << py.dump();
    EXPECT_EQ(py["kinds"], nlohmann::json({"linear"}));
  }
  auto ft = mimic::test::mimic_cli("finetune --task lm --model " + dir.file("c") + " --data " + data + " --lora 4 --steps 6 --seq-len 32 --batch-size 2 " +
                                   "--eval-every 6 --eval-batches 1 --out " + dir.file("ft") + " --threads 1 --json");
  ASSERT_EQ(ft.code, 0) << ft.err;
  auto fe = mimic::test::mimic_cli("eval --model " + dir.file("ft") + " --data " + data + " --split test --json --threads 1");
  ASSERT_EQ(fe.code, 0) << fe.err;
  const double tuned = nlohmann::json::parse(fe.out)["perplexity"].get<double>();
  EXPECT_TRUE(std::isfinite(tuned)) << fe.out;
  auto gen = mimic::test::mimic_cli("generate --model " + dir.file("ft") + " --prompt 'the tide' --new-tokens 8 --seed 1 --json --threads 1");
  ASSERT_EQ(gen.code, 0) << gen.err;
  const auto g = nlohmann::json::parse(gen.out);
  EXPECT_EQ(g.dump().find("the tide") != std::string::npos, true) << gen.out;
  // the prompt as `tokenize` (and HF's tokenizer) encodes it: <s> first (it was left out)
  EXPECT_EQ(g["prompt_ids"], nlohmann::json::parse(mimic::test::mimic_cli("tokenize --model " + m + " --text 'the tide' --json").out)["ids"]);
  EXPECT_EQ(g["prompt_ids"][0], 1) << gen.out;
  if (!MIMIC_TESTS_HAVE_REPORT) return;  // a build without cairo has no report (the GPU machines' builds)
  auto rep = mimic::test::mimic_cli("report --record " + dir.file("r.h5") + " --maps " + dir.file("maps.safetensors") + " --out " + dir.file("rep") +
                                    " --threads 1 --json");
  ASSERT_EQ(rep.code, 0) << rep.err;
}
