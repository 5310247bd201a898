// The delta rule's forms (mimic/attention/delta_rule.h): what the rule means on hand-worked cases, then the chunked WY
// form and decoding steps against the token-by-token recurrence, forward and gradients, with and without the gate.
#include <torch/torch.h>

#include <cmath>

#include "mimic/attention/attention.h"
#include "mimic/attention/delta_kernel.h"
#include "mimic/attention/delta_rule.h"
#include "mimic/attention/kinds.h"
#include "test_util.h"

using namespace mimic::attention;

namespace {

// fla's criterion: RMS(a − b) / RMS(b).
double rms_err(const at::Tensor& a, const at::Tensor& b) {
  auto x = a.detach().to(at::kDouble), y = b.detach().to(at::kDouble);
  return (x - y).pow(2).mean().sqrt().item<double>() / std::max(y.pow(2).mean().sqrt().item<double>(), 1e-300);
}

// One head, keys and queries of dimension 2 (the unit vectors e1, e2), values of dimension 1: a sequence of writes
// (key, value, β, log α), then the read of e1 and e2 after each.
struct Writes {
  std::vector<int> key;
  std::vector<double> value, beta, log_alpha;
  at::Tensor k() const {
    auto t = torch::zeros({1, 1, static_cast<int64_t>(key.size()), 2}, torch::kDouble);
    for (size_t i = 0; i < key.size(); ++i) t[0][0][static_cast<int64_t>(i)][key[i]] = 1.0;
    return t;
  }
  at::Tensor v() const { return torch::tensor(value, torch::kDouble).view({1, 1, -1, 1}); }
  at::Tensor b() const { return torch::tensor(beta, torch::kDouble).view({1, 1, -1}); }
  at::Tensor g() const { return torch::tensor(log_alpha, torch::kDouble).view({1, 1, -1}); }
};

// What the state returns for e1 and e2 after all the writes, by each form.
std::vector<std::pair<double, double>> reads(const Writes& w) {
  std::vector<std::pair<double, double>> r;
  const auto k = w.k(), v = w.v(), b = w.b(), g = w.g();
  std::vector<DeltaRuleResult> results = {delta_rule_naive(k, k, v, b, g, {}), delta_rule_chunked(k, k, v, b, g, {}, 1),
                                          delta_rule_chunked(k, k, v, b, g, {}, 2), delta_rule_chunked(k, k, v, b, g, {}, 8)};
  for (const auto& res : results) r.emplace_back(res.state[0][0][0][0].item<double>(), res.state[0][0][1][0].item<double>());
  return r;
}

}  // namespace

TEST(DeltaRule, AWriteReplacesTheValueStoredUnderItsKeyWhereLinearAttentionWouldAdd) {
  // e1 ← 3, then e1 ← 5 with β = 1: the state holds 5 under e1 (linear attention's sum would hold 8)
  for (const auto& [e1, e2] : reads({{0, 0}, {3, 5}, {1, 1}, {0, 0}})) {
    EXPECT_DOUBLE_EQ(e1, 5.0);
    EXPECT_DOUBLE_EQ(e2, 0.0);
  }
  // β = 0.5 moves half way: 3 + 0.5·(5 − 3) = 4
  for (const auto& [e1, e2] : reads({{0, 0}, {3, 5}, {1, 0.5}, {0, 0}})) EXPECT_DOUBLE_EQ(e1, 4.0);
  // a write under the orthogonal key e2 leaves e1 alone, and the gate α = 0.5 of that step halves everything before it
  for (const auto& [e1, e2] : reads({{0, 1}, {3, 7}, {1, 1}, {0, std::log(0.5)}})) {
    EXPECT_DOUBLE_EQ(e1, 1.5);
    EXPECT_DOUBLE_EQ(e2, 7.0);
  }
}

// The WY form against the recurrence: out, the final state and the gradients of every input (a random projection of
// out and of the state), in double, over chunk sizes that divide T, do not, are 1 and exceed T; gated and not; from
// zeros and from a given state.
TEST(DeltaRule, TheChunkedFormComputesTheRecurrenceForwardAndGradients) {
  const int64_t B = 2, H = 3, T = 37, Dk = 8, Dv = 5;
  torch::manual_seed(7);
  auto opts = torch::dtype(torch::kDouble);
  const auto q = torch::randn({B, H, T, Dk}, opts), v = torch::randn({B, H, T, Dv}, opts);
  const auto k = torch::nn::functional::normalize(torch::randn({B, H, T, Dk}, opts), torch::nn::functional::NormalizeFuncOptions().dim(-1));
  const auto beta = torch::sigmoid(torch::randn({B, H, T}, opts)), log_alpha = torch::log_sigmoid(torch::randn({B, H, T}, opts) + 2);
  const auto s0 = torch::randn({B, H, Dk, Dv}, opts) * 0.3;
  const auto proj_out = torch::randn({B, H, T, Dv}, opts), proj_state = torch::randn({B, H, Dk, Dv}, opts);
  for (bool gated : {false, true})
    for (bool from_state : {false, true}) {
      auto run = [&](int64_t chunk) {
        std::vector<at::Tensor> leaves = {q.clone().requires_grad_(), k.clone().requires_grad_(), v.clone().requires_grad_(),
                                          beta.clone().requires_grad_(), log_alpha.clone().requires_grad_(), s0.clone().requires_grad_()};
        const auto g = gated ? leaves[4] : at::Tensor();
        const auto s = from_state ? leaves[5] : at::Tensor();
        auto r = chunk == 0 ? delta_rule_naive(leaves[0], leaves[1], leaves[2], leaves[3], g, s)
                            : delta_rule_chunked(leaves[0], leaves[1], leaves[2], leaves[3], g, s, chunk);
        ((r.out * proj_out).sum() + (r.state * proj_state).sum()).backward();
        std::vector<at::Tensor> all = {r.out.detach(), r.state.detach()};
        for (size_t i = 0; i < 4; ++i) all.push_back(leaves[i].grad());
        if (gated) all.push_back(leaves[4].grad());
        if (from_state) all.push_back(leaves[5].grad());
        return all;
      };
      const auto reference = run(0);
      for (int64_t chunk : {1, 4, 16, 64}) {
        const auto chunked = run(chunk);
        ASSERT_EQ(chunked.size(), reference.size());
        for (size_t i = 0; i < reference.size(); ++i) {
          ASSERT_TRUE(chunked[i].defined()) << i;
          EXPECT_LE(rms_err(chunked[i], reference[i]), 1e-12)
              << "gated " << gated << ", from a state " << from_state << ", chunk " << chunk << ", tensor " << i;
        }
      }
    }
}

// The effective weights times v are the recurrence's output, gated or not; they do not depend on v.
TEST(DeltaRule, TheEffectiveWeightsTimesTheValuesAreTheOutput) {
  torch::manual_seed(10);
  auto opts = torch::dtype(torch::kDouble);
  const auto q = torch::randn({2, 2, 23, 6}, opts), v = torch::randn({2, 2, 23, 3}, opts);
  const auto k = torch::nn::functional::normalize(torch::randn({2, 2, 23, 6}, opts), torch::nn::functional::NormalizeFuncOptions().dim(-1));
  const auto beta = torch::sigmoid(torch::randn({2, 2, 23}, opts)), log_alpha = torch::log_sigmoid(torch::randn({2, 2, 23}, opts) + 2);
  for (bool gated : {false, true}) {
    const auto g = gated ? log_alpha : at::Tensor();
    const auto w = delta_rule_weights(q, k, beta, g);
    EXPECT_LE(rms_err(at::matmul(w, v), delta_rule_naive(q, k, v, beta, g, {}).out), 1e-12) << "gated " << gated;
    EXPECT_EQ(w.triu(1).abs().max().item<double>(), 0.0) << "a query sees no later key";
  }
}

// In float, as training runs it: the same agreement to float's rounding.
TEST(DeltaRule, TheChunkedFormAgreesInFloatToRounding) {
  torch::manual_seed(8);
  const auto q = torch::randn({1, 2, 300, 16}), v = torch::randn({1, 2, 300, 16});
  const auto k = torch::nn::functional::normalize(torch::randn({1, 2, 300, 16}), torch::nn::functional::NormalizeFuncOptions().dim(-1));
  const auto beta = torch::sigmoid(torch::randn({1, 2, 300})), log_alpha = torch::log_sigmoid(torch::randn({1, 2, 300}) + 3);
  const auto a = delta_rule_naive(q, k, v, beta, log_alpha, {}), b = delta_rule_chunked(q, k, v, beta, log_alpha, {}, 64);
  EXPECT_LE(rms_err(b.out, a.out), 1e-5);
  EXPECT_LE(rms_err(b.state, a.state), 1e-5);
}

// Decoding continues a chunked prefill: 20 tokens chunked, then 17 steps, equal the recurrence over all 37.
TEST(DeltaRule, DecodingStepsContinueAChunkedPrefill) {
  torch::manual_seed(9);
  auto opts = torch::dtype(torch::kDouble);
  const auto q = torch::randn({2, 3, 37, 8}, opts), v = torch::randn({2, 3, 37, 4}, opts);
  const auto k = torch::nn::functional::normalize(torch::randn({2, 3, 37, 8}, opts), torch::nn::functional::NormalizeFuncOptions().dim(-1));
  const auto beta = torch::sigmoid(torch::randn({2, 3, 37}, opts)), log_alpha = torch::log_sigmoid(torch::randn({2, 3, 37}, opts) + 2);
  const auto whole = delta_rule_naive(q, k, v, beta, log_alpha, {});
  auto prefill = delta_rule_chunked(q.narrow(2, 0, 20), k.narrow(2, 0, 20), v.narrow(2, 0, 20), beta.narrow(2, 0, 20), log_alpha.narrow(2, 0, 20), {}, 8);
  EXPECT_LE(rms_err(prefill.out, whole.out.narrow(2, 0, 20)), 1e-12);
  auto state = prefill.state;
  for (int64_t t = 20; t < 37; ++t) {
    const auto o = delta_rule_step(q.select(2, t), k.select(2, t), v.select(2, t), beta.select(2, t), log_alpha.select(2, t), state);
    EXPECT_LE(rms_err(o, whole.out.select(2, t)), 1e-12) << "token " << t;
  }
  EXPECT_LE(rms_err(state, whole.state), 1e-12);
}

TEST(DeltaRule, ShapesThatDoNotFitAreErrorsNamingTheTensor) {
  const auto q = torch::randn({1, 2, 5, 4}), v = torch::randn({1, 2, 5, 3}), beta = torch::rand({1, 2, 5});
  EXPECT_MIMIC_ERROR(delta_rule_naive(q, q.narrow(3, 0, 3), v, beta, {}, {}), "q and k must be");
  EXPECT_MIMIC_ERROR(delta_rule_chunked(q, q, v.narrow(2, 0, 4), beta, {}, {}, 2), "v must be");
  EXPECT_MIMIC_ERROR(delta_rule_chunked(q, q, v, beta.narrow(2, 0, 4), {}, {}, 2), "beta must be");
  EXPECT_MIMIC_ERROR(delta_rule_chunked(q, q, v, beta, beta.narrow(1, 0, 1), {}, 2), "log_alpha must be");
  EXPECT_MIMIC_ERROR(delta_rule_chunked(q, q, v, beta, {}, torch::zeros({1, 2, 3, 4}), 2), "the state must be [B, H, Dk, Dv] = [1, 2, 4, 3]");
  EXPECT_MIMIC_ERROR(delta_rule_chunked(q, q, v, beta, {}, {}, 0), "chunk must be >= 1");
}

// The `delta` kind (delta_kernel.h) as a layer runs it: decoding through its cache (a prompt, then one token at a
// time) gives the rows of its forward over the whole sequence, with a state whose bytes do not grow; left padding
// writes nothing; a bidirectional layer and unknown options are refused.
TEST(DeltaKind, DecodesThroughItsCacheAsItsForwardWithAStateOfConstantSize) {
  const int64_t B = 2, H = 3, T = 30, D = 8;
  for (bool gate : {true, false}) {
    auto kernel = make_attention_kernel("delta", {{"chunk", 4}, {"gate", gate}}, H, D);
    torch::manual_seed(12);
    {
      torch::NoGradGuard ng;
      for (auto& p : kernel->parameters()) p.copy_(torch::randn_like(p));  // β and α that vary with the key
    }
    const auto q = torch::randn({B, H, T, D}), k = torch::randn({B, H, T, D}), v = torch::randn({B, H, T, D});
    AttentionContext ctx;
    ctx.causal = true;
    ctx.scale = 0.3;
    const auto whole = kernel->forward(q, k, v, ctx);
    auto cache = kernel->new_cache();
    const auto prompt = kernel->forward_cached(q.narrow(2, 0, 11), k.narrow(2, 0, 11), v.narrow(2, 0, 11), ctx, *cache);
    EXPECT_LE(rms_err(prompt, whole.narrow(2, 0, 11)), 1e-5);
    const int64_t bytes = cache->bytes();
    EXPECT_EQ(bytes, B * H * D * D * 4);
    for (int64_t t = 11; t < T; ++t) {
      const auto o = kernel->forward_cached(q.narrow(2, t, 1), k.narrow(2, t, 1), v.narrow(2, t, 1), ctx, *cache);
      EXPECT_LE(rms_err(o, whole.narrow(2, t, 1)), 1e-5) << "token " << t << ", gate " << gate;
      EXPECT_EQ(cache->bytes(), bytes);
    }
    EXPECT_EQ(cache->position, T);
    // three padded keys in front: the real tokens' outputs are those of the sequence without them
    AttentionContext padded = ctx;
    padded.key_padding_mask = torch::ones({B, T + 3}, torch::kBool);
    padded.key_padding_mask.narrow(1, 0, 3).fill_(false);
    const auto junk = torch::randn({B, H, 3, D});
    const auto out = kernel->forward(torch::cat({junk, q}, 2), torch::cat({junk, k}, 2), torch::cat({junk, v}, 2), padded);
    EXPECT_LE(rms_err(out.narrow(2, 3, T), whole), 1e-5) << "gate " << gate;
  }
  AttentionContext bidirectional;
  const auto x = torch::randn({1, 3, 5, 8});
  EXPECT_MIMIC_ERROR(make_attention_kernel("delta", nlohmann::json::object(), 3, 8)->forward(x, x, x, bidirectional), "causal");
  EXPECT_MIMIC_ERROR(make_attention_kernel("delta", {{"feature_map", "hedgehog"}}, 3, 8), "unknown delta attention option 'feature_map'");
  EXPECT_MIMIC_ERROR(make_attention_kernel("delta", {{"chunk", 0}}, 3, 8), "an integer >= 1");
}

// SLA head gates on the delta rule (Softmax-GatedDeltaNet, option `gates`): every form — the chunked forward, the
// effective weights, decoding through the cache — against a reference written apart from the kernel: the gates per
// token by an explicit softmax over the heads (× H), β and α from their projections, the token-by-token recurrence on
// G^K·v, its output times G^Q. Gradients of the fast form equal the quadratic form's, the gates' own included; with
// the gates at their initial zeros the gated kernel computes the ungated one.
TEST(DeltaKind, SlaHeadGatesScaleTheWritesAndTheReadsInEveryForm) {
  const int64_t B = 2, H = 3, T = 21, D = 4;
  auto kernel = std::dynamic_pointer_cast<DeltaAttention>(make_attention_kernel("delta", {{"chunk", 4}, {"gates", true}}, H, D));
  ASSERT_TRUE(kernel && kernel->gates);
  EXPECT_EQ(kernel->config_json()["gates"], true);
  EXPECT_EQ(kernel->parameter_group("gates.w_q"), "gates");
  EXPECT_EQ(kernel->parameter_group("w_beta"), "maps");
  auto plain = std::dynamic_pointer_cast<DeltaAttention>(make_attention_kernel("delta", {{"chunk", 4}}, H, D));
  kernel->to(torch::kDouble);
  plain->to(torch::kDouble);
  torch::manual_seed(21);
  {
    torch::NoGradGuard ng;
    for (auto& p : plain->parameters()) p.copy_(torch::randn_like(p) * 0.5);
    // the same β and α in both, the gates still at their initial zeros
    for (const char* n : {"w_beta", "b_beta", "w_alpha", "b_alpha"}) kernel->named_parameters()[n].copy_(plain->named_parameters()[n]);
  }
  const auto opt = torch::TensorOptions().dtype(torch::kDouble);
  const auto q = torch::randn({B, H, T, D}, opt), k = torch::randn({B, H, T, D}, opt), v = torch::randn({B, H, T, D}, opt);
  AttentionContext ctx;
  ctx.causal = true;
  ctx.scale = 0.5;
  EXPECT_LE(rms_err(kernel->forward(q, k, v, ctx), plain->forward(q, k, v, ctx)), 1e-12) << "zero gates are not the ungated rule";
  {
    torch::NoGradGuard ng;
    kernel->gates->w_q.copy_(torch::randn_like(kernel->gates->w_q));
    kernel->gates->w_k.copy_(torch::randn_like(kernel->gates->w_k));
  }

  // the reference
  at::Tensor expected;
  {
    torch::NoGradGuard ng;
    auto gate = [&](const at::Tensor& x, const at::Tensor& w) {  // [B, H, T, 1]: H · softmax_h(x_t W)
      auto g = torch::zeros({B, H, T, 1}, opt);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 0; t < T; ++t) {
          auto row = x[b].select(1, t).reshape({H * D});  // the layer's projection: the heads side by side
          auto logits = torch::matmul(row, w);
          auto e = (logits - logits.max()).exp();
          g[b].select(1, t).select(1, 0).copy_(e / e.sum() * static_cast<double>(H));
        }
      return g;
    };
    const auto gq = gate(q, kernel->gates->w_q), gk = gate(k, kernel->gates->w_k);
    const auto qn = q / q.norm(2, -1, true), kn = k / k.norm(2, -1, true);
    auto project = [&](const at::Tensor& w, const at::Tensor& b) { return torch::einsum("bhtd,hd->bht", {kn, w}) + b.view({1, H, 1}); };
    const auto beta = torch::sigmoid(project(kernel->w_beta, kernel->b_beta));
    const auto log_alpha = torch::log_sigmoid(project(kernel->w_alpha, kernel->b_alpha));
    expected = delta_rule_naive(qn, kn, v * gk, beta, log_alpha, {}).out * gq;
    EXPECT_GT(rms_err(expected, plain->forward(q, k, v, ctx)), 0.05) << "the gates changed nothing: the test sees no gate";
  }
  EXPECT_LE(rms_err(kernel->forward(q, k, v, ctx), expected), 1e-10);
  at::Tensor weights;
  EXPECT_LE(rms_err(kernel->forward_quadratic(q, k, v, ctx, &weights), expected), 1e-10);
  EXPECT_LE(rms_err(at::matmul(weights, v), expected), 1e-10);
  auto cache = kernel->new_cache();
  const auto prompt = kernel->forward_cached(q.narrow(2, 0, 9), k.narrow(2, 0, 9), v.narrow(2, 0, 9), ctx, *cache);
  EXPECT_LE(rms_err(prompt, expected.narrow(2, 0, 9)), 1e-10);
  for (int64_t t = 9; t < T; ++t)
    EXPECT_LE(rms_err(kernel->forward_cached(q.narrow(2, t, 1), k.narrow(2, t, 1), v.narrow(2, t, 1), ctx, *cache), expected.narrow(2, t, 1)),
              1e-10) << "token " << t;

  // gradients: the fast form's equal the quadratic form's, for the inputs and every parameter (the gates' too)
  auto grads = [&](bool fast) {
    auto qi = q.clone().requires_grad_(), ki = k.clone().requires_grad_(), vi = v.clone().requires_grad_();
    kernel->zero_grad();
    const auto out = fast ? kernel->forward(qi, ki, vi, ctx) : kernel->forward_quadratic(qi, ki, vi, ctx, nullptr);
    (out * torch::cos(out)).sum().backward();
    std::vector<at::Tensor> g = {qi.grad(), ki.grad(), vi.grad()};
    for (auto& p : kernel->parameters()) g.push_back(p.grad().clone());
    return g;
  };
  const auto fast = grads(true), quadratic = grads(false);
  ASSERT_EQ(fast.size(), quadratic.size());
  for (size_t i = 0; i < fast.size(); ++i) {
    ASSERT_TRUE(fast[i].defined()) << "gradient " << i;
    EXPECT_GT(fast[i].abs().max().item<double>(), 0) << "gradient " << i << " is zero";
    EXPECT_LE(rms_err(fast[i], quadratic[i]), 1e-10) << "gradient " << i;
  }
  EXPECT_MIMIC_ERROR(make_attention_kernel("delta", {{"gates", 1}}, 3, 8), "'gates' must be true or false");
}
