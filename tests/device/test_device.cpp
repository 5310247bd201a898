// The device tests: every attention kind and form, a whole model's training step and incremental decoding, run
// on an accelerator and held to the same computation on the CPU — forward outputs and every gradient.
//
// The device is CUDA's first GPU when LibTorch sees one (tools/gpu-check.sh runs this binary on a GPU machine);
// without one it is the checked CPU (--device cpu-checked, mimic/core/checked_device.h): the CPU's own kernels behind
// a device that is not the CPU, where a tensor made without the device stops the test with the operator's name — what
// a GPU run would find, on every machine the suite runs on. (LibTorch's `meta` device has no values to compare, and
// 1.13 cannot move a module there.) bf16 autocast runs on CUDA only, so its test is skipped on the checked CPU.
//
// Tolerances (fp32 on both sides; TF32 stays off, LibTorch's default for matrix products): outputs and gradients
// agree to kRelTol of the largest magnitude of the CPU result (the GPU sums in other orders), that magnitude taken
// as at least kFloor: a gradient that is zero in exact arithmetic (SLA's query gates, whose factor the row
// normalisation cancels) is rounding noise on both sides, and noise has no relative error to hold to.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "mimic/attention/attention.h"
#include "mimic/attention/distillable.h"
#include "mimic/attention/kinds.h"
#include "mimic/core/error.h"
#include "mimic/core/precision.h"
#include "mimic/core/runtime.h"
#include "mimic/data/batches.h"
#include "mimic/data/recall_tasks.h"
#include "mimic/eval/perplexity.h"
#include "mimic/eval/recall_accuracy.h"
#include "mimic/finetune/lm.h"
#include "mimic/generate/generate.h"
#include "mimic/io/safetensors.h"
#include "mimic/models/model.h"
#include "mimic/train/lm.h"

namespace {

using mimic::attention::AttentionContext;
using mimic::attention::make_attention_kernel;

constexpr double kRelTol = 2e-4;
constexpr double kFloor = 1e-2;

// MIMIC_DEVICE_TESTS_ON_CPU=1 runs the harness with the CPU itself as the "device" (every comparison exact, bf16
// included: the CPU's autocast), to check the tests themselves.
bool cpu_as_device() { return std::getenv("MIMIC_DEVICE_TESTS_ON_CPU") != nullptr; }
c10::Device target() {
  if (cpu_as_device()) return c10::Device(c10::kCPU);
  return torch::cuda::is_available() ? c10::Device(c10::kCUDA, 0) : mimic::checked_device();
}
#define SKIP_WITHOUT_AUTOCAST() \
  if (mimic::is_checked_device(target())) GTEST_SKIP() << "bf16 autocast runs on a CUDA device (or the CPU); this machine has none"

// max |a − b| / max(max |b|, kFloor) (b: the CPU result).
double rel_err(const at::Tensor& device_result, const at::Tensor& cpu_result) {
  auto a = device_result.detach().to(at::kCPU, at::kDouble), b = cpu_result.detach().to(at::kDouble);
  const double scale = std::max(b.abs().max().item<double>(), kFloor);
  return (a - b).abs().max().item<double>() / scale;
}

// Device result against CPU result: same shape and dtype everywhere; the values where the device computes them.
void expect_close(const at::Tensor& dev, const at::Tensor& cpu, const std::string& what, double tol = kRelTol) {
  ASSERT_TRUE(dev.defined()) << what << ": undefined on the device";
  ASSERT_TRUE(cpu.defined()) << what << ": undefined on the CPU";
  EXPECT_EQ(dev.device(), target()) << what << " left the device";
  EXPECT_EQ(dev.sizes(), cpu.sizes()) << what;
  EXPECT_EQ(dev.scalar_type(), cpu.scalar_type()) << what;
  const double e = rel_err(dev, cpu);
  std::printf("  %-64s rel err %.2e\n", what.c_str(), e);
  EXPECT_LE(e, tol) << what;
}

// Every kind with the options that change its code path (kinds.def, maps.def).
std::vector<std::pair<std::string, nlohmann::json>> kernel_cases() {
  std::vector<std::pair<std::string, nlohmann::json>> c;
  c.push_back({"softmax", nlohmann::json::object()});
  for (const char* map : {"hedgehog", "hedgehog_softmax", "t2r", "elu", "relu", "performer", "cosformer", "exp_t", "taylor2", "identity"})
    c.push_back({"linear", {{"feature_map", map}, {"chunk", 4}}});
  c.push_back({"linear", {{"feature_map", "hedgehog"}, {"norm", "none"}}});
  c.push_back({"linear", {{"feature_map", "elu"}, {"norm", "l2"}}});
  c.push_back({"linear", {{"feature_map", "elu"}, {"norm", "rms"}}});
  c.push_back({"linear", {{"feature_map", "hedgehog"}, {"gates", true}}});
  c.push_back({"linear", {{"feature_map", "hedgehog"}, {"decay", true}, {"chunk", 8}}});
  c.push_back({"hybrid", {{"window", 4}, {"chunk", 4}}});
  c.push_back({"hybrid", {{"window", 16}, {"feature_map", "hedgehog"}}});
  // LoLA's sparse cache (causal only): its selection runs on the host, from rows copied off the device
  c.push_back({"hybrid", {{"window", 4}, {"cache", 4}, {"feature_map", "hedgehog"}}});
  c.push_back({"hybrid", {{"window", 3}, {"cache", 5}, {"cache_every", 3}}});
  c.push_back({"mixed", {{"softmax_heads", {1}}}});
  c.push_back({"mixed", {{"softmax_heads", {0, 2}}, {"kind", "hybrid"}, {"options", {{"window", 4}}}}});
  c.push_back({"delta", {{"chunk", 4}}});  // causal only: the bidirectional test expects its refusal
  c.push_back({"delta", {{"gate", true}, {"chunk", 8}}});
  return c;
}

std::string label(const std::pair<std::string, nlohmann::json>& c) { return c.first + " " + c.second.dump(); }

// A kernel and its twin with the same parameters and buffers, the twin moved to the device.
std::pair<mimic::attention::AttentionKernel, mimic::attention::AttentionKernel> kernel_pair(const std::string& kind,
                                                                                          const nlohmann::json& options,
                                                                                          int64_t heads, int64_t dim) {
  torch::manual_seed(11);
  auto cpu = make_attention_kernel(kind, options, heads, dim);
  auto dev = make_attention_kernel(kind, cpu->config_json(), heads, dim);
  {
    torch::NoGradGuard ng;
    for (const auto& p : cpu->named_parameters()) dev->named_parameters()[p.key()].copy_(p.value());
    for (const auto& b : cpu->named_buffers()) dev->named_buffers()[b.key()].copy_(b.value());
  }
  dev->to(target());
  return {cpu, dev};
}

// One kernel call on both sides, then backward of the same random projection of the output; compares the output,
// the inputs' gradients and every parameter's gradient.
void compare_forward_backward(const std::string& kind, const nlohmann::json& options, bool causal, bool padded,
                              const std::string& what) {
  const int64_t B = 2, H = 3, T = 37, D = 8;
  auto [cpu, dev] = kernel_pair(kind, options, H, D);
  torch::manual_seed(5);
  auto q = torch::randn({B, H, T, D}), k = torch::randn({B, H, T, D}), v = torch::randn({B, H, T, D});
  auto proj = torch::randn({B, H, T, D});
  AttentionContext ctx;
  ctx.causal = causal;
  ctx.scale = 1.0 / std::sqrt(static_cast<double>(D));
  ctx.layer = 1;
  AttentionContext dctx = ctx;
  if (padded) {
    auto mask = torch::ones({B, T}, torch::kBool);
    mask.index_put_({1, torch::indexing::Slice(T - 9)}, false);
    ctx.key_padding_mask = mask;
    dctx.key_padding_mask = mask.to(target());
  }
  auto run = [&](mimic::attention::AttentionKernelImpl& kernel, const AttentionContext& c, c10::Device d) {
    // leaves of their own on each side (q.to(kCPU) would be q itself)
    auto qq = q.to(d).detach().requires_grad_(), kk = k.to(d).detach().requires_grad_(), vv = v.to(d).detach().requires_grad_();
    kernel.zero_grad();
    auto out = kernel.forward(qq, kk, vv, c);
    (out * proj.to(d)).sum().backward();
    std::vector<at::Tensor> r = {out, qq.grad(), kk.grad(), vv.grad()};
    for (const auto& p : kernel.named_parameters())
      if (p.value().requires_grad()) r.push_back(p.value().grad().defined() ? p.value().grad() : torch::zeros_like(p.value()));
    return r;
  };
  auto a = run(*cpu, ctx, at::kCPU);
  auto b = run(*dev, dctx, target());
  ASSERT_EQ(a.size(), b.size());
  const char* names[] = {"out", "dq", "dk", "dv"};
  for (size_t i = 0; i < a.size(); ++i)
    expect_close(b[i], a[i], what + " " + (i < 4 ? names[i] : "dparam" + std::to_string(i - 4)));
}

TEST(Device, EveryAttentionKindMatchesTheCpuCausalForwardAndGradients) {
  for (const auto& c : kernel_cases()) compare_forward_backward(c.first, c.second, true, false, "causal " + label(c));
  // padded keys write nothing into the delta rule's state, on the device as on the CPU
  compare_forward_backward("delta", {{"chunk", 4}}, true, true, "causal padded delta");
}

TEST(Device, EveryAttentionKindMatchesTheCpuBidirectionalWithPaddingForwardAndGradients) {
  for (const auto& c : kernel_cases()) {
    if (c.first == "linear" && c.second.contains("decay")) continue;  // decay is causal-only
    if (c.first == "hybrid" && c.second.contains("cache")) continue;  // so is the sparse cache (BERT refuses it)
    if (c.first == "delta") {  // a recurrence over positions: refused in one line on the device as on the CPU
      auto dev = kernel_pair(c.first, c.second, 3, 8).second;
      AttentionContext ctx;
      ctx.causal = false;
      ctx.scale = 0.3;
      const auto x = torch::randn({2, 3, 5, 8}, torch::TensorOptions().device(target()));
      try {
        dev->forward(x, x, x, ctx);
        ADD_FAILURE() << "a bidirectional delta layer ran on the device";
      } catch (const mimic::Error& e) {
        EXPECT_NE(std::string(e.what()).find("attention kind 'delta' is causal"), std::string::npos) << e.what();
      }
      continue;
    }
    compare_forward_backward(c.first, c.second, false, true, "padded " + label(c));
  }
}

TEST(Device, EveryAttentionKindDecodesTokenByTokenAsOnTheCpu) {
  const int64_t B = 2, H = 3, T = 21, D = 8;
  for (const auto& c : kernel_cases()) {
    auto [cpu, dev] = kernel_pair(c.first, c.second, H, D);
    torch::manual_seed(6);
    auto q = torch::randn({B, H, T, D}), k = torch::randn({B, H, T, D}), v = torch::randn({B, H, T, D});
    AttentionContext ctx;
    ctx.causal = true;
    ctx.scale = 0.3;
    torch::NoGradGuard ng;
    auto cache_cpu = cpu->new_cache();
    auto cache_dev = dev->new_cache();
    // a prompt of 9 tokens, then one token at a time
    std::vector<std::pair<int64_t, int64_t>> steps = {{0, 9}};
    for (int64_t t = 9; t < T; ++t) steps.push_back({t, 1});
    for (const auto& [s, n] : steps) {
      auto o_cpu = cpu->forward_cached(q.narrow(2, s, n), k.narrow(2, s, n), v.narrow(2, s, n), ctx, *cache_cpu);
      auto o_dev = dev->forward_cached(q.narrow(2, s, n).to(target()), k.narrow(2, s, n).to(target()),
                                       v.narrow(2, s, n).to(target()), ctx, *cache_dev);
      expect_close(o_dev, o_cpu, "decode " + label(c) + " at " + std::to_string(s));
    }
  }
}

// The same small GPT-2 twice, `kind` in every layer with the same weights, the second moved to the device.
std::pair<std::shared_ptr<mimic::models::Model>, std::shared_ptr<mimic::models::Model>> model_pair(const nlohmann::json& config,
                                                                                                   const std::string& kind,
                                                                                                   const nlohmann::json& options) {
  torch::manual_seed(3);
  std::shared_ptr<mimic::models::Model> cpu = mimic::models::create_model(config.dump(), "");
  torch::manual_seed(3);
  std::shared_ptr<mimic::models::Model> dev = mimic::models::create_model(config.dump(), "");
  const auto s = cpu->summary();
  for (int64_t l = 0; l < s.n_layer; ++l) {
    auto [kc, kd] = kernel_pair(kind, options, s.n_head, s.d_model / s.n_head);
    cpu->set_attention_kernel(l, kc);
    dev->set_attention_kernel(l, kd);
  }
  dev->module().to(target());
  return {cpu, dev};
}

// The kinds a whole model runs in these tests: softmax and one of each student.
std::vector<std::pair<std::string, nlohmann::json>> model_kinds() {
  return {{"softmax", nlohmann::json::object()}, {"linear", {{"feature_map", "hedgehog"}}}, {"hybrid", {{"window", 8}}},
          {"mixed", {{"softmax_heads", {1, 3}}}}, {"delta", {{"chunk", 8}}}};
}

// One LM batch of random tokens (2 × 40), on the CPU and on the device.
std::pair<mimic::data::LmBatch, mimic::data::LmBatch> batch_pair(int64_t vocab_size) {
  torch::manual_seed(4);
  auto ids = torch::randint(vocab_size, {2, 40}, torch::kLong);
  mimic::data::LmBatch bc{ids, torch::roll(ids, -1, 1), {}};
  mimic::data::LmBatch bd{bc.input_ids.to(target()), bc.labels.to(target()), {}};
  return {bc, bd};
}

// A small random GPT-2 (2 layers, 4 heads) and a Llama with grouped-query attention (4 query heads on 2 KV heads: the
// KV cache kept per KV head, read through a grouped product), first with softmax attention, then with each student
// kind in every layer: the LM loss, the gradient of every weight, and greedy incremental decoding (forward_step) on
// the device against the CPU.
TEST(Device, AModelTrainsAndDecodesOnTheDeviceAsOnTheCpu) {
  const nlohmann::json gpt2 = {{"model_type", "gpt2"}, {"architectures", {"GPT2LMHeadModel"}}, {"vocab_size", 97},
                               {"n_positions", 64}, {"n_embd", 32}, {"n_layer", 2}, {"n_head", 4}};
  const nlohmann::json llama = {{"model_type", "llama"}, {"architectures", {"LlamaForCausalLM"}}, {"vocab_size", 97},
                                {"max_position_embeddings", 64}, {"hidden_size", 32}, {"intermediate_size", 64},
                                {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2}};
  std::vector<std::pair<nlohmann::json, std::pair<std::string, nlohmann::json>>> cases;
  for (const auto& config : {gpt2, llama})
    for (const auto& k : model_kinds()) cases.push_back({config, {config["model_type"].get<std::string>() + " " + k.first, k.second}});
  for (const auto& [config, named] : cases) {
    const std::pair<std::string, nlohmann::json> c{named.first.substr(named.first.find(' ') + 1), named.second};
    SCOPED_TRACE(named.first);
    auto [cpu, dev] = model_pair(config, c.first, c.second);
    const auto s = cpu->summary();
    const auto [bc, bd] = batch_pair(s.vocab_size);
    auto lc = mimic::train::causal_lm_loss(*cpu, bc);
    auto ld = mimic::train::causal_lm_loss(*dev, bd);
    lc.backward();
    ld.backward();
    expect_close(ld, lc, "model " + label(c) + " loss");
    auto pc = cpu->module().named_parameters(), pd = dev->module().named_parameters();
    for (const auto& p : pc) {
      if (!p.value().grad().defined()) continue;
      expect_close(pd[p.key()].grad(), p.value().grad(), "model " + label(c) + " d" + p.key());
    }
    // incremental decoding: a prompt of 12 tokens, then 6 greedy tokens fed back
    auto sc = cpu->new_decode_state();
    auto sd = dev->new_decode_state();
    auto prompt = bc.input_ids.narrow(0, 0, 1).narrow(1, 0, 12);
    auto xc = cpu->forward_step(prompt, *sc);
    auto xd = dev->forward_step(prompt.to(target()), *sd);
    expect_close(xd, xc, "model " + label(c) + " prompt logits");
    for (int i = 0; i < 6; ++i) {
      auto next = xc.select(1, xc.size(1) - 1).argmax(-1, true);  // the CPU's choice drives both
      xc = cpu->forward_step(next, *sc);
      xd = dev->forward_step(next.to(target()), *sd);
      expect_close(xd, xc, "model " + label(c) + " step " + std::to_string(i));
    }
  }
}

// A folder removed at the end of the test (this binary has none of tests/test_util.h's CLI helpers).
struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() {
    std::string t = (std::filesystem::temp_directory_path() / "mimic-device-XXXXXX").string();
    path = ::mkdtemp(t.data()) ? std::filesystem::path(t) : std::filesystem::path();
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

// The stages with --device, as the commands run them: a finetune (the library entry point finetune::finetune_lm, with
// its checkpoint, export and final scoring) of a small GPT-2 on a recall task, on the device and on the CPU from the
// same start, then recall accuracy, perplexity and greedy generation of the result on each. fp32 on both sides: the
// losses and scores agree to 1e-4 of their size; the weights' updates to 1e-2 of their norm, over all weights (AdamW
// divides by the root of the squared gradients: where a gradient is near zero, rounding can move one element's step
// by up to the learning rate, so no per-element bound holds); the greedy tokens are the same.
TEST(Device, FinetuneEvalAndGenerateOnTheDeviceAsOnTheCpu) {
  const std::string task = "mqar:vocab=64,seq_len=32,pairs=4";
  // dropout off: its masks come from the device's generator, which no CPU run shares
  const nlohmann::json config = {{"model_type", "gpt2"}, {"architectures", {"GPT2LMHeadModel"}}, {"vocab_size", 64},
                                 {"n_positions", 64}, {"n_embd", 32}, {"n_layer", 2}, {"n_head", 4},
                                 {"resid_pdrop", 0.0}, {"embd_pdrop", 0.0}, {"attn_pdrop", 0.0}};
  for (const auto& c : std::vector<std::pair<std::string, nlohmann::json>>{{"softmax", nlohmann::json::object()},
                                                                          {"linear", {{"feature_map", "hedgehog"}}}}) {
    SCOPED_TRACE(c.first);
    ScratchDir dir;
    ASSERT_FALSE(dir.path.empty());
    torch::manual_seed(3);
    auto base = mimic::models::create_model(config.dump(), "");
    const auto s = base->summary();
    if (c.first != "softmax")
      for (int64_t l = 0; l < s.n_layer; ++l) base->set_attention_kernel(l, kernel_pair(c.first, c.second, s.n_head, s.d_model / s.n_head).first);
    base->save(dir.file("base"));
    auto run = [&](c10::Device device, const std::string& out) {
      mimic::finetune::LmOptions o;
      o.model_dir = dir.file("base");
      o.corpus = task;
      o.seq_len = 32;
      o.batch_size = 8;
      o.eval_batches = 2;
      o.seed = 5;
      o.device = device;
      o.train.steps = 6;
      o.train.warmup = 1;
      o.train.lr = 1e-3;
      o.train.eval_every = 3;
      o.train.checkpoint_every = 3;
      o.train.keep_last = true;  // the whole final checkpoint stays, with the device's random state
      o.train.progress = false;
      o.train.out_dir = dir.file(out);
      return mimic::finetune::finetune_lm(o);
    };
    const auto on_cpu = run(c10::Device(c10::kCPU), "cpu");
    const auto on_dev = run(target(), "dev");
    const auto rel = [](double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-12); };
    std::printf("  %-64s rel err %.2e\n", ("finetune " + c.first + " last loss").c_str(), rel(on_dev.train.last_loss, on_cpu.train.last_loss));
    EXPECT_LE(rel(on_dev.train.last_loss, on_cpu.train.last_loss), 1e-4);
    EXPECT_LE(rel(on_dev.student.validation_loss, on_cpu.student.validation_loss), 1e-4);
    EXPECT_EQ(on_dev.train.best_step, on_cpu.train.best_step);
    if (target().is_cuda()) {
      auto ckpt = mimic::io::SafeTensorsFile::open(dir.file("dev") + "/checkpoint.safetensors");
      EXPECT_TRUE(ckpt.contains("rng/device")) << "a GPU run's checkpoint keeps the GPU's random state";
    }
    // the exports, read back on the CPU: what training moved, on the device against on the CPU, over every weight
    auto a = mimic::models::load_model(dir.file("dev")), b = mimic::models::load_model(dir.file("cpu"));
    auto start = mimic::models::load_model(dir.file("base"));
    auto pa = a->module().named_parameters(), pb = b->module().named_parameters(), p0 = start->module().named_parameters();
    double moved = 0, apart = 0;
    for (const auto& p : pb) {
      const auto db = (p.value() - p0[p.key()]).to(at::kDouble), da = (pa[p.key()] - p0[p.key()]).to(at::kDouble);
      moved += db.pow(2).sum().item<double>();
      apart += (da - db).pow(2).sum().item<double>();
    }
    ASSERT_GT(moved, 0) << "the finetune moved no weight";
    std::printf("  %-64s rel err %.2e\n", ("finetune " + c.first + " weight updates").c_str(), std::sqrt(apart / moved));
    EXPECT_LE(std::sqrt(apart / moved), 1e-2);
    // recall accuracy, perplexity and greedy decoding of the result, on the device and on the CPU
    auto dev_model = mimic::models::load_model(dir.file("dev"), target());
    EXPECT_EQ(mimic::models::device_of(*dev_model), target());
    mimic::eval::RecallAccuracyOptions ro;
    ro.examples = 16;
    ro.batch_size = 8;
    ro.progress = false;
    const auto spec = mimic::data::RecallTaskSpec::parse(task);
    EXPECT_NEAR(mimic::eval::recall_accuracy(*dev_model, spec, ro).correct, mimic::eval::recall_accuracy(*a, spec, ro).correct, 1)
        << "an answer may flip where two logits tie to rounding, not more";
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < 60; ++i) ids.push_back((i * 7 + 3) % 64);
    mimic::eval::PerplexityOptions po;
    po.progress = false;
    EXPECT_LE(rel(mimic::eval::perplexity(*dev_model, ids, po).nll, mimic::eval::perplexity(*a, ids, po).nll), 1e-4);
    mimic::generate::GenerateOptions go;
    go.max_new_tokens = 8;
    EXPECT_EQ(mimic::generate::generate(*dev_model, {1, 2, 3, 4}, go).ids, mimic::generate::generate(*a, {1, 2, 3, 4}, go).ids);
  }
}

// --precision bf16: CUDA autocast on the device against fp32 on the CPU. A model's LM loss and every weight's
// gradient, for softmax and each student kind (bf16 keeps 8 bits of mantissa, so the bounds are bf16's, not the
// fp32 tolerance above: the loss to 1e-2 of itself, each gradient to 5e-2 of its norm, a kernel's own parameters'
// to 0.15), then a short finetune in
// bf16 on the device against the same finetune in fp32 on the CPU: last and validation losses to 2e-2.
TEST(Device, Bf16OnTheDeviceStaysCloseToFp32OnTheCpu) {
  SKIP_WITHOUT_AUTOCAST();
  const auto norm_err = [](const at::Tensor& a, const at::Tensor& b) {
    auto x = a.detach().to(at::kCPU, at::kDouble), y = b.detach().to(at::kDouble);
    return (x - y).norm().item<double>() / std::max(y.norm().item<double>(), 1e-30);
  };
  const nlohmann::json config = {{"model_type", "gpt2"}, {"architectures", {"GPT2LMHeadModel"}}, {"vocab_size", 64},
                                 {"n_positions", 64}, {"n_embd", 32}, {"n_layer", 2}, {"n_head", 4},
                                 {"resid_pdrop", 0.0}, {"embd_pdrop", 0.0}, {"attn_pdrop", 0.0}};
  for (const auto& c : model_kinds()) {
    auto [cpu, dev] = model_pair(config, c.first, c.second);
    const auto s = cpu->summary();
    const auto [bc, bd] = batch_pair(s.vocab_size);
    auto lc = mimic::train::causal_lm_loss(*cpu, bc);
    at::Tensor ld;
    {
      mimic::AutocastGuard mixed(mimic::Precision::Bf16, target());
      ld = mimic::train::causal_lm_loss(*dev, bd);
    }
    lc.backward();
    ld.backward();
    EXPECT_EQ(ld.scalar_type(), at::kFloat) << "the LM-head loss stays float";
    std::printf("  %-64s rel err %.2e\n", ("bf16 model " + label(c) + " loss").c_str(), norm_err(ld, lc));
    EXPECT_LE(norm_err(ld, lc), 1e-2) << label(c);
    double largest = 0;
    auto pc = cpu->module().named_parameters(), pd = dev->module().named_parameters();
    for (const auto& p : pc) {
      if (!p.value().grad().defined()) continue;
      const auto& g = pd[p.key()].grad();
      ASSERT_TRUE(g.defined()) << label(c) << " d" << p.key();
      EXPECT_EQ(g.scalar_type(), at::kFloat) << "weights and their gradients stay float: " << p.key();
      const double e = norm_err(g, p.value().grad());
      largest = std::max(largest, e);
      // a kernel's own parameters (per-head scalars such as the hybrid's window_logit) sum their gradient over every
      // position and head, where bf16's roundings add up: 15% (tests/test_precision.cpp measures the same on the CPU).
      // With the CPU standing in for the device (MIMIC_DEVICE_TESTS_ON_CPU=1) bf16 is the CPU's autocast, which keeps
      // fewer operations in float: the hybrid's (w 8) window_logit came to 16.9% there (2026-11-30), 25% allowed
      const bool kernel_own = p.key().rfind("kernels.", 0) == 0;
      EXPECT_LE(e, kernel_own ? (target().is_cuda() ? 0.15 : 0.25) : 5e-2) << label(c) << " d" << p.key();
    }
    std::printf("  %-64s rel err %.2e\n", ("bf16 model " + label(c) + " largest gradient").c_str(), largest);
  }

  ScratchDir dir;
  ASSERT_FALSE(dir.path.empty());
  torch::manual_seed(3);
  mimic::models::create_model(config.dump(), "")->save(dir.file("base"));
  auto run = [&](c10::Device device, mimic::Precision precision, const std::string& out) {
    mimic::finetune::LmOptions o;
    o.model_dir = dir.file("base");
    o.corpus = "mqar:vocab=64,seq_len=32,pairs=4";
    o.seq_len = 32;
    o.batch_size = 8;
    o.eval_batches = 2;
    o.seed = 5;
    o.device = device;
    o.train.precision = precision;
    o.train.steps = 20;
    o.train.warmup = 2;
    o.train.lr = 1e-3;
    o.train.eval_every = 10;
    o.train.progress = false;
    o.train.out_dir = dir.file(out);
    return mimic::finetune::finetune_lm(o);
  };
  const auto full = run(c10::Device(c10::kCPU), mimic::Precision::Fp32, "cpu");
  const auto mixed = run(target(), mimic::Precision::Bf16, "dev");
  const auto rel = [](double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-12); };
  std::printf("  %-64s rel err %.2e\n", "bf16 finetune last loss", rel(mixed.train.last_loss, full.train.last_loss));
  std::printf("  %-64s rel err %.2e\n", "bf16 finetune validation loss", rel(mixed.student.validation_loss, full.student.validation_loss));
  EXPECT_LE(rel(mixed.train.last_loss, full.train.last_loss), 2e-2);
  EXPECT_LE(rel(mixed.student.validation_loss, full.student.validation_loss), 2e-2);
}

TEST(Device, LibTorchSeesTheGpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  std::printf("device tests run on cuda:0 of %zu CUDA device(s)\n", static_cast<size_t>(torch::cuda::device_count()));
  EXPECT_GE(static_cast<size_t>(torch::cuda::device_count()), 1u);
}

}  // namespace

namespace {

std::string error_of(const std::string& spec) {
  try {
    mimic::resolve_device(spec);
  } catch (const mimic::Error& e) {
    return e.what();
  }
  return "";
}

TEST(DeviceOption, NamesResolveToTheDeviceOrAOneLineErrorSayingWhy) {
  EXPECT_EQ(mimic::resolve_device("cpu"), c10::Device(c10::kCPU));
  for (const char* bad : {"gpu", "CUDA", "cuda:", "cuda:x", "cuda:-1", "cuda:99999", "cpu:0", ""})
    EXPECT_EQ(error_of(bad), std::string("--device: unknown device '") + bad + "' (known: auto, cpu, cuda, cuda:N, cpu-checked)") << bad;
  if (torch::cuda::is_available()) {
    EXPECT_EQ(mimic::resolve_device("auto"), c10::Device(c10::kCUDA, 0));
    EXPECT_EQ(mimic::resolve_device("cuda"), c10::Device(c10::kCUDA, 0));
    const auto n = static_cast<int64_t>(torch::cuda::device_count());
    EXPECT_NE(error_of("cuda:" + std::to_string(n)).find("CUDA device"), std::string::npos);
  } else {
    EXPECT_EQ(mimic::resolve_device("auto"), c10::Device(c10::kCPU));
    EXPECT_EQ(error_of("cuda"), "--device cuda: no CUDA device is available (this LibTorch sees none; a CPU-only LibTorch never does)");
    EXPECT_EQ(error_of("cuda:1"), "--device cuda:1: no CUDA device is available (this LibTorch sees none; a CPU-only LibTorch never does)");
  }
}

}  // namespace
