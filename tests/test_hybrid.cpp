// Hybrid attention (sliding-window softmax + linear, LoLCATs): the quadratic form against the definition
// written out element by element, every fast form against the quadratic one (forward and gradients), decoding
// against the whole-sequence form with a state whose size does not grow, and the kernel through the registry.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "mimic/attention/hybrid_attention.h"
#include "mimic/attention/hybrid_kernel.h"
#include "mimic/attention/hybrid_parts.h"
#include "mimic/attention/kinds.h"
#include "mimic/core/error.h"
#include "test_util.h"

using namespace mimic::attention;

namespace {

constexpr int64_t B = 2, H = 3, D = 4, F = 6;

double max_diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

struct Inputs {
  at::Tensor q, k, v, fq, fk, sigma, lambda, mask, probe;
};

Inputs make_inputs(int64_t t, bool log_space, uint64_t seed, bool padded, torch::Dtype dtype = torch::kDouble, double spread = 1.0) {
  torch::manual_seed(seed);
  auto o = torch::dtype(dtype);
  Inputs in;
  in.q = (torch::randn({B, H, t, D}, o) * spread).requires_grad_();
  in.k = (torch::randn({B, H, t, D}, o) * spread).requires_grad_();
  in.v = torch::randn({B, H, t, D}, o).requires_grad_();
  in.fq = log_space ? (torch::randn({B, H, t, F}, o) * spread).requires_grad_() : (torch::rand({B, H, t, F}, o) + 0.1).requires_grad_();
  in.fk = log_space ? (torch::randn({B, H, t, F}, o) * spread).requires_grad_() : (torch::rand({B, H, t, F}, o) + 0.1).requires_grad_();
  in.sigma = (torch::rand({H}, o) * 0.8 + 0.1).requires_grad_();
  in.lambda = (torch::rand({H}, o) * 0.8 + 0.1).requires_grad_();
  in.mask = torch::ones({B, t}, torch::kBool);
  if (padded && t > 2) in.mask[1].narrow(0, t - 2, 2).fill_(false);  // the second sequence's last two keys are padding
  in.probe = torch::randn({B, H, t, D}, o);
  return in;
}

HybridOptions opts(const Inputs& in, bool causal, int64_t w, bool with_lambda, int64_t block = 0, int64_t chunk = 3,
                   bool exact = false) {
  HybridOptions o;
  o.exact = exact;
  o.causal = causal;
  o.window = w;
  o.chunk = chunk;
  o.block = block;
  o.window_weight = in.sigma;
  if (with_lambda) o.linear_weight = in.lambda;
  return o;
}

std::vector<at::Tensor> grads(const at::Tensor& out, const at::Tensor& probe, const std::vector<at::Tensor>& wrt) {
  return torch::autograd::grad({(out * probe).sum()}, wrt, {}, /*retain_graph=*/true, false, /*allow_unused=*/true);
}

void expect_close(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b, double tol, const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].defined(), b[i].defined()) << what << " input " << i;
    if (!a[i].defined()) continue;
    const double scale = 1 + a[i].abs().max().item<double>();
    EXPECT_LT(max_diff(a[i], b[i]), tol * scale) << what << " gradient of input " << i;
  }
}

// The definition, one element at a time, in double: no stabilisation, no masking tricks.
at::Tensor by_definition(const Inputs& in, bool causal, int64_t w, bool log_space, bool with_lambda, double scale, bool exact) {
  const int64_t t = in.q.size(2);
  auto q = in.q.detach(), k = in.k.detach(), v = in.v.detach();
  auto fq = log_space ? in.fq.detach().exp() : in.fq.detach(), fk = log_space ? in.fk.detach().exp() : in.fk.detach();
  auto out = torch::zeros({B, H, t, D}, torch::kDouble);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < t; ++i) {
        std::vector<double> s(t, 0.0), a(t, 0.0);
        std::vector<int> kind(t, 0);  // 1 window, 2 linear
        double m = -INFINITY;
        for (int64_t j = 0; j < t; ++j) {
          if (!in.mask[b][j].item<bool>() || (causal && j > i)) continue;
          const int64_t dist = std::abs(i - j);
          kind[j] = dist < w ? 1 : 2;
          if (kind[j] == 1) {
            s[j] = (q[b][h][i] * k[b][h][j]).sum().item<double>() * scale;
            m = std::max(m, s[j]);
          }
        }
        double den = 0;
        for (int64_t j = 0; j < t; ++j) {
          if (kind[j] == 1) a[j] = in.sigma[h].item<double>() * std::exp(exact ? s[j] : s[j] - m);
          if (kind[j] == 2) a[j] = (with_lambda ? in.lambda[h].item<double>() : 1.0) * (fq[b][h][i] * fk[b][h][j]).sum().item<double>();
          den += a[j];
        }
        if (den == 0) continue;
        for (int64_t j = 0; j < t; ++j) out[b][h][i] += a[j] / den * v[b][h][j];
      }
  return out;
}

}  // namespace

TEST(HybridAttention, QuadraticFormIsTheDefinitionWrittenOut) {
  for (bool exact : {false, true})
  for (bool causal : {true, false})
    for (bool log_space : {false, true})
      for (int64_t w : {1, 2, 4}) {
        SCOPED_TRACE(std::string(causal ? "causal" : "bidirectional") + (log_space ? " log" : "") + " w=" + std::to_string(w) +
                     (exact ? " exact" : ""));
        auto in = make_inputs(7, log_space, 3 + w, /*padded=*/true);
        auto o = opts(in, causal, w, /*with_lambda=*/w == 2, 0, 3, exact);
        at::Tensor weights;
        auto out = hybrid_quadratic(in.q, in.k, in.v, {in.fq, in.fk, log_space}, 0.7, o, in.mask, &weights);
        auto want = by_definition(in, causal, w, log_space, w == 2, 0.7, exact);
        EXPECT_LT(max_diff(out, want), 1e-12);
        EXPECT_LT(max_diff(torch::matmul(weights, in.v), out), 1e-12);  // the weights reproduce the output
        // Rows of real queries are distributions over the visible keys; padded keys get nothing.
        EXPECT_LT(max_diff(weights[0].sum(-1), torch::ones({H, 7}, torch::kDouble)), 1e-12);
        EXPECT_EQ(weights[1].narrow(-1, 5, 2).abs().max().item<double>(), 0.0);
      }
}

TEST(HybridAttention, LogWeightsAreTheLogarithmOfTheWeights) {
  auto in = make_inputs(9, true, 5, true);
  at::Tensor w, lw;
  hybrid_quadratic(in.q, in.k, in.v, {in.fq, in.fk, true}, 0.5, opts(in, true, 3, false), in.mask, &w, &lw);
  auto visible = w > 0;
  EXPECT_LT(max_diff(lw.exp().masked_select(visible), w.masked_select(visible)), 1e-12);
  EXPECT_NEAR(lw.masked_select(visible.logical_not()).max().item<double>(), log_weight_floor(), 1e-9);
}

TEST(HybridAttention, AWindowCoveringTheSequenceIsSoftmaxAttention) {
  // With w >= T every visible key is in the window: σ cancels and no linear term is left.
  auto in = make_inputs(6, true, 9, false);
  for (bool causal : {true, false}) {
    auto o = opts(in, causal, 6, true);
    auto out = causal ? hybrid_chunked(in.q, in.k, in.v, {in.fq, in.fk, true}, 0.5, o, at::Tensor())
                      : hybrid_bidirectional(in.q, in.k, in.v, {in.fq, in.fk, true}, 0.5, o, at::Tensor());
    auto s = torch::matmul(in.q, in.k.transpose(-1, -2)) * 0.5;
    if (causal) s = s.masked_fill(torch::ones({6, 6}, torch::kBool).triu(1), -INFINITY);
    EXPECT_LT(max_diff(out, torch::matmul(torch::softmax(s, -1), in.v)), 1e-12) << causal;
  }
}

TEST(HybridAttention, ChunkedMatchesQuadraticForwardAndGradients) {
  int cases = 0;
  for (int64_t t : {1, 5, 13, 40})
    for (int64_t w : {1, 3, 8})
      for (bool log_space : {false, true})
        for (int64_t block : {0, 4}) {
          SCOPED_TRACE("T=" + std::to_string(t) + " w=" + std::to_string(w) + " log=" + std::to_string(log_space) +
                       " block=" + std::to_string(block));
          auto in = make_inputs(t, log_space, 20 + t + w, /*padded=*/true);
          auto o = opts(in, true, w, /*with_lambda=*/block == 4, block, 3, /*exact=*/(t + w) % 2 == 1);
          Features f{in.fq, in.fk, log_space};
          auto ref = hybrid_quadratic(in.q, in.k, in.v, f, 0.6, o, in.mask);
          auto fast = hybrid_chunked(in.q, in.k, in.v, f, 0.6, o, in.mask);
          ASSERT_EQ(fast.sizes(), in.v.sizes());
          EXPECT_LT(max_diff(ref, fast), 1e-11 * (1 + ref.abs().max().item<double>()));
          std::vector<at::Tensor> wrt = {in.q, in.k, in.v, in.fq, in.fk, in.sigma, in.lambda};
          expect_close(grads(ref, in.probe, wrt), grads(fast, in.probe, wrt), 1e-9, "chunked");
          ++cases;
        }
  EXPECT_EQ(cases, 4 * 3 * 2 * 2);
}

// A chunk (of the linear part) or a block (of the window's queries) beyond the sequence computes what chunk = T does:
// bench attention now runs its chunk at most at the longest length, relying on this (issue 38).
TEST(HybridAttention, AChunkOrBlockLongerThanTheSequenceIsTheChunkOfTheSequence) {
  const int64_t t = 13, w = 4;
  for (bool log_space : {false, true}) {
    SCOPED_TRACE(log_space ? "log-space features" : "features");
    auto in = make_inputs(t, log_space, 7, /*padded=*/true);
    Features f{in.fq, in.fk, log_space};
    auto at_t = hybrid_chunked(in.q, in.k, in.v, f, 0.6, opts(in, true, w, true, /*block=*/t, /*chunk=*/t), in.mask);
    for (int64_t longer : {t + 1, 4 * t, int64_t{65536}}) {
      auto out = hybrid_chunked(in.q, in.k, in.v, f, 0.6, opts(in, true, w, true, /*block=*/longer, /*chunk=*/longer), in.mask);
      EXPECT_LT(max_diff(at_t, out), 1e-12) << "chunk " << longer;
    }
  }
}

TEST(HybridAttention, BidirectionalMatchesQuadraticForwardAndGradients) {
  for (int64_t t : {1, 6, 17})
    for (int64_t w : {1, 2, 5})
      for (bool log_space : {false, true}) {
        SCOPED_TRACE("T=" + std::to_string(t) + " w=" + std::to_string(w) + " log=" + std::to_string(log_space));
        auto in = make_inputs(t, log_space, 60 + t + w, true);
        auto o = opts(in, false, w, w == 2, 0, 3, /*exact=*/log_space == (w == 1));
        Features f{in.fq, in.fk, log_space};
        auto ref = hybrid_quadratic(in.q, in.k, in.v, f, 0.6, o, in.mask);
        auto fast = hybrid_bidirectional(in.q, in.k, in.v, f, 0.6, o, in.mask);
        EXPECT_LT(max_diff(ref, fast), 1e-11 * (1 + ref.abs().max().item<double>()));
        std::vector<at::Tensor> wrt = {in.q, in.k, in.v, in.fq, in.fk, in.sigma, in.lambda};
        expect_close(grads(ref, in.probe, wrt), grads(fast, in.probe, wrt), 1e-9, "bidirectional");
      }
}

TEST(HybridAttention, DecodingTokenByTokenContinuesTheSequenceWithAStateOfConstantSize) {
  for (bool exact : {false, true}) {
  SCOPED_TRACE(exact ? "exact" : "max");
  const int64_t t = 23, w = 5;
  auto in = make_inputs(t, true, 7, false);
  auto o = opts(in, true, w, true, 0, 3, exact);
  Features f{in.fq, in.fk, true};
  auto whole = hybrid_quadratic(in.q, in.k, in.v, f, 0.6, o, at::Tensor());
  // A prompt of 7 tokens, then one token at a time, then a piece of 4.
  HybridState state;
  std::vector<at::Tensor> outs;
  std::vector<int64_t> bytes;
  auto run = [&](int64_t from, int64_t n) {
    auto sl = [&](const at::Tensor& x) { return x.narrow(2, from, n); };
    outs.push_back(hybrid_chunked(sl(in.q), sl(in.k), sl(in.v), {sl(in.fq), sl(in.fk), true}, 0.6, o, at::Tensor(), &state));
    bytes.push_back(hybrid_state_bytes(state));
  };
  run(0, 7);
  for (int64_t i = 7; i < 19; ++i) run(i, 1);
  run(19, 4);
  EXPECT_EQ(state.position, t);
  EXPECT_EQ(state.filled, w);
  auto stepped = torch::cat(outs, 2);
  EXPECT_LT(max_diff(stepped, whole), 1e-11);
  for (int64_t b : bytes) EXPECT_EQ(b, bytes.front());  // the ring and the linear state: nothing grows
  // Gradients flow through the state as well.
  std::vector<at::Tensor> wrt = {in.q, in.k, in.v, in.fq, in.fk, in.sigma};
  expect_close(grads(whole, in.probe, wrt), grads(stepped, in.probe, wrt), 1e-9, "decoding");
  }
}

namespace {
// The first `batch` rows of x [B, H, T, ·], positions from … from + n − 1.
at::Tensor rows(const at::Tensor& x, int64_t batch, int64_t from, int64_t n) { return x.narrow(0, 0, batch).narrow(2, from, n); }

// Decodes the first `batch` rows of `in` in float32: a prompt of `prompt` tokens through hybrid_chunked (none: the
// step starts from an empty state), then every later token but the last 4 through hybrid_step and, beside it, the
// reference (hybrid_chunked with its own state at T = 1), then those 4 as one chunked block on the stepped state
// (its ring rotated by the steps). Every step's output must match the reference's and the quadratic form's row,
// the state must hold what the reference's holds, and its bytes must stay those of a window of w keys.
void expect_steps_match_the_chunked_reference(const Inputs& in, int64_t batch, int64_t prompt, const HybridOptions& o, bool log_space) {
  torch::NoGradGuard no_grad;  // the step is inference only
  const int64_t t = in.q.size(2), w = o.window, nf = in.fk.size(3);
  auto sl = [&](const at::Tensor& x, int64_t from, int64_t n) { return rows(x, batch, from, n); };
  auto features = [&](int64_t from, int64_t n) { return Features{sl(in.fq, from, n), sl(in.fk, from, n), log_space}; };
  auto call = [&](int64_t from, int64_t n, HybridState& st) {
    return hybrid_chunked(sl(in.q, from, n), sl(in.k, from, n), sl(in.v, from, n), features(from, n), 0.6, o, at::Tensor(), &st);
  };
  auto whole = hybrid_quadratic(sl(in.q, 0, t), sl(in.k, 0, t), sl(in.v, 0, t), features(0, t), 0.6, o, at::Tensor());
  const double tol = 2e-5 * (1 + whole.abs().max().item<double>());
  const int64_t bytes = batch * H * (w * (D + D + nf) + nf * D + nf + 1) * 4;
  HybridState state, ref;
  if (prompt > 0) {
    call(0, prompt, state);
    ref = hybrid_state_copy(state);
  }
  for (int64_t i = prompt; i < t - 4; ++i) {
    SCOPED_TRACE("step at position " + std::to_string(i));
    auto out = hybrid_step(sl(in.q, i, 1), sl(in.k, i, 1), sl(in.v, i, 1), features(i, 1), 0.6, o, state);
    auto expected = call(i, 1, ref);
    ASSERT_EQ(out.sizes(), expected.sizes());
    EXPECT_LT(max_diff(out, expected), tol);
    EXPECT_LT(max_diff(out, whole.narrow(2, i, 1)), tol);
    EXPECT_EQ(hybrid_state_bytes(state), bytes);  // a ring of w and the linear state, whatever the context
    EXPECT_EQ(state.position, i + 1);
    EXPECT_EQ(state.filled, std::min(w, i + 1));
  }
  // The ring, read oldest first, holds the reference's last w keys; the linear states agree in their true value.
  auto unrolled = [&](const at::Tensor& r) { return torch::cat({r.narrow(2, state.head, w - state.head), r.narrow(2, 0, state.head)}, 2); };
  EXPECT_EQ(max_diff(unrolled(state.k), ref.k), 0);
  EXPECT_EQ(max_diff(unrolled(state.fk), ref.fk), 0);
  auto true_S = [](const LinearState& l) { return l.S * l.m.exp().view({l.m.size(0), l.m.size(1), 1, 1}); };
  EXPECT_LT(max_diff(true_S(state.linear), true_S(ref.linear)), 1e-4 * (1 + true_S(ref.linear).abs().max().item<double>()));
  EXPECT_EQ(state.linear.position, ref.linear.position);
  // A block after the steps continues from the rotated ring.
  EXPECT_LT(max_diff(call(t - 4, 4, state), whole.narrow(2, t - 4, 4)), tol);
  EXPECT_EQ(state.head, 0);
  EXPECT_EQ(hybrid_state_bytes(state), bytes);
}
}  // namespace

TEST(HybridAttention, TheRecurrentStepMatchesTheChunkedFormAtEveryStepOverManyWindows) {
  // 31 tokens: over 10 windows of 3 and almost 4 of 8; prompts shorter and longer than the window, and none.
  const int64_t t = 31;
  int variant = 0;
  for (int64_t batch : {int64_t{1}, B})
    for (int64_t w : {3, 8})
      for (int64_t prompt : {0, 5, 11})
        for (bool exact : {false, true}) {
          const bool log_space = variant % 2 == 0, with_lambda = variant % 3 != 0;
          SCOPED_TRACE("batch " + std::to_string(batch) + ", w " + std::to_string(w) + ", prompt " + std::to_string(prompt) +
                       (exact ? ", exact" : ", max") + (log_space ? ", log features" : ", features") + (with_lambda ? ", λ" : ""));
          auto in = make_inputs(t, log_space, 40 + variant++, false, torch::kFloat, /*spread=*/1.5);
          expect_steps_match_the_chunked_reference(in, batch, prompt, opts(in, true, w, with_lambda, 0, 4, exact), log_space);
        }
}

// Grouped-query attention: keys and values per KV head (g query heads each), the ring kept per KV head. Decoding —
// a prompt through the chunked form, then steps, then a block (with a sparse cache: every token a step) — gives
// exactly the outputs of the same calls with the keys repeated per query head (the layout every other test decodes;
// the same products and sums, so no rounding apart) and the quadratic form's rows; the ring holds each KV head
// once, its bytes (g − 1)/g of the ring fewer. q comes in the model's layout ([B, T, H, D] transposed).
TEST(HybridAttention, UnderGroupedQueryAttentionTheRingIsKeptPerKvHeadAndDecodesAsTheRepeatedKeysDo) {
  torch::NoGradGuard no_grad;  // the step is inference only
  const int64_t b = 2, h = 4, t = 26, d = 4, w = 5;
  const auto o64 = torch::dtype(torch::kDouble);
  auto features_of = [](const at::Tensor& x) { return torch::cat({x, -x}, -1) * 0.7; };  // log-features of the key alone
  int variant = 0;
  for (int64_t hk : {1, 2, 4})
    for (int64_t cache : {0, 3})
      for (bool keys_only : {false, true}) {
        const bool exact = variant % 2 == 1;
        SCOPED_TRACE(std::to_string(hk) + " KV heads, cache " + std::to_string(cache) + (keys_only ? ", keys only" : ", key features kept") +
                     (exact ? ", exact" : ", max"));
        torch::manual_seed(60 + variant++);
        auto q = torch::randn({b, t, h, d}, o64).transpose(1, 2), k = torch::randn({b, hk, t, d}, o64), v = torch::randn({b, hk, t, d}, o64);
        const auto kx = expand_kv_heads(k, h), vx = expand_kv_heads(v, h);
        EXPECT_EQ(max_diff(kx.select(1, h - 1), k.select(1, hk - 1)), 0);  // the last query head reads the last KV head
        Features f{features_of(q), features_of(kx), true};
        HybridOptions o;
        o.window = w;
        o.chunk = 4;
        o.cache = cache;
        o.exact = exact;
        o.window_weight = torch::rand({h}, o64) * 0.8 + 0.1;
        o.linear_weight = torch::rand({h}, o64) * 0.8 + 0.1;
        if (keys_only) o.key_features = features_of;
        const auto whole = hybrid_quadratic(q, kx, vx, f, 0.6, o, at::Tensor());
        auto sl = [](const at::Tensor& x, int64_t from, int64_t n) { return x.narrow(2, from, n); };
        HybridState grouped, repeated;
        int64_t at_step = 0;
        auto run = [&](int64_t from, int64_t n) {
          SCOPED_TRACE("positions " + std::to_string(from) + " + " + std::to_string(n));
          const Features fn{sl(f.q, from, n), sl(f.k, from, n), true};
          at::Tensor a, r;
          if (n == 1 || cache > 0) {
            ASSERT_EQ(n, 1);
            a = hybrid_step(sl(q, from, 1), sl(k, from, 1), sl(v, from, 1), fn, 0.6, o, grouped);
            r = hybrid_step(sl(q, from, 1), sl(kx, from, 1), sl(vx, from, 1), fn, 0.6, o, repeated);
            ++at_step;
          } else {
            a = hybrid_chunked(sl(q, from, n), sl(k, from, n), sl(v, from, n), fn, 0.6, o, at::Tensor(), &grouped);
            r = hybrid_chunked(sl(q, from, n), sl(kx, from, n), sl(vx, from, n), fn, 0.6, o, at::Tensor(), &repeated);
          }
          EXPECT_EQ(max_diff(a, r), 0);
          EXPECT_LT(max_diff(a, whole.narrow(2, from, n)), 1e-10);
          ASSERT_EQ(grouped.k.sizes(), (std::vector<int64_t>{b, hk, w, d}));
          EXPECT_EQ(max_diff(expand_kv_heads(grouped.k, h), repeated.k), 0);
          EXPECT_EQ(max_diff(expand_kv_heads(grouped.v, h), repeated.v), 0);
          // fewer bytes by the ring's keys and values of the h − hk repeated heads
          EXPECT_EQ(hybrid_state_bytes(repeated) - hybrid_state_bytes(grouped), (h - hk) * b * w * 2 * d * 8);
        };
        if (cache > 0) {
          for (int64_t i = 0; i < t; ++i) run(i, 1);
          EXPECT_EQ(grouped.cached, cache);  // the cache was full, and chose among candidates
          EXPECT_EQ(max_diff(grouped.cpos, repeated.cpos), 0);
        } else {
          run(0, 7);
          for (int64_t i = 7; i < t - 4; ++i) run(i, 1);
          run(t - 4, 4);  // on a ring the steps rotated
        }
        EXPECT_GT(at_step, 10);
      }
  // k and v with heads that do not divide q's, or unlike each other, are refused
  auto q = torch::randn({1, 4, 1, d}), k3 = torch::randn({1, 3, 1, d}), k2 = torch::randn({1, 2, 1, d});
  HybridOptions o;
  o.window = 2;
  o.window_weight = torch::full({4}, 0.5);
  HybridState state;
  Features f{torch::randn({1, 4, 1, 6}), torch::randn({1, 4, 1, 6}), true};
  EXPECT_MIMIC_ERROR(hybrid_step(q, k3, k3, f, 1.0, o, state), "H_kv heads dividing H");
  EXPECT_MIMIC_ERROR(hybrid_step(q, k2, torch::randn({1, 4, 1, d}), f, 1.0, o, state), "H_kv heads dividing H");
  EXPECT_MIMIC_ERROR(hybrid_quadratic(q, k2, k2, f, 1.0, o, at::Tensor()), "must be [B, H, T, ·] alike, got");
}

TEST(HybridAttention, TheRecurrentStepStaysFiniteAndExactForLargeScoresInFloat32) {
  // Scores and log-features ~ ±12: the window's max-subtraction and the linear state's running constant must keep
  // every term finite (an unstabilised exp would overflow float32).
  auto in = make_inputs(40, true, 9, false, torch::kFloat, /*spread=*/12.0);
  torch::NoGradGuard no_grad;
  auto o = opts(in, true, 6, true, 0, 8);
  HybridState state;
  std::vector<at::Tensor> outs;
  for (int64_t i = 0; i < 40; ++i)
    outs.push_back(hybrid_step(in.q.narrow(2, i, 1), in.k.narrow(2, i, 1), in.v.narrow(2, i, 1),
                               {in.fq.narrow(2, i, 1), in.fk.narrow(2, i, 1), true}, 1.0, o, state));
  auto stepped = torch::cat(outs, 2);
  auto ref = hybrid_chunked(in.q, in.k, in.v, {in.fq, in.fk, true}, 1.0, o, at::Tensor());
  EXPECT_TRUE(torch::isfinite(stepped).all().item<bool>());
  EXPECT_LT(max_diff(stepped, ref), 1e-4);
}

TEST(HybridAttention, TheRecurrentStepIsInferenceOnlyAndRefusesMisfitStates) {
  auto in = make_inputs(4, false, 2, false);
  Features f{in.fq.narrow(2, 0, 1), in.fk.narrow(2, 0, 1), false};
  auto q = in.q.narrow(2, 0, 1), k = in.k.narrow(2, 0, 1), v = in.v.narrow(2, 0, 1);
  HybridState state;
  EXPECT_MIMIC_ERROR(hybrid_step(q, k, v, f, 1.0, opts(in, true, 3, false), state), "inference only");
  torch::NoGradGuard no_grad;
  EXPECT_MIMIC_ERROR(hybrid_step(in.q, in.k, in.v, {in.fq, in.fk, false}, 1.0, opts(in, true, 3, false), state), "one token");
  hybrid_step(q, k, v, f, 1.0, opts(in, true, 3, false), state);
  EXPECT_MIMIC_ERROR(hybrid_step(q, k, v, f, 1.0, opts(in, true, 2, false), state), "does not match");
  // A copy does not see the original's later writes into the ring.
  auto copy = hybrid_state_copy(state);
  auto before = copy.k.clone();
  hybrid_step(q, k, v, f, 1.0, opts(in, true, 3, false), state);
  EXPECT_EQ(max_diff(copy.k, before), 0);
  EXPECT_GT(max_diff(state.k, before), 0);
}

TEST(HybridAttention, StaysFiniteInFloat32ForLargeScoresAndFeatures) {
  auto in = make_inputs(64, true, 3, true, torch::kFloat, /*spread=*/12.0);
  auto o = opts(in, true, 8, false, 0, 16);
  Features f{in.fq, in.fk, true};
  auto fast = hybrid_chunked(in.q, in.k, in.v, f, 1.0, o, in.mask);
  auto ref = hybrid_quadratic(in.q, in.k, in.v, f, 1.0, o, in.mask);
  EXPECT_TRUE(torch::isfinite(fast).all().item<bool>());
  EXPECT_LT(max_diff(fast, ref), 1e-4);
  auto g = grads(fast, in.probe, {in.q, in.k, in.fq, in.fk});
  for (const auto& x : g) EXPECT_TRUE(torch::isfinite(x).all().item<bool>());
}

TEST(HybridAttention, BadInputsGiveClearErrors) {
  auto in = make_inputs(5, false, 1, false);
  Features f{in.fq, in.fk, false};
  auto o = opts(in, true, 0, false);
  EXPECT_MIMIC_ERROR(hybrid_chunked(in.q, in.k, in.v, f, 1.0, o, at::Tensor()), "window must be >= 1");
  o = opts(in, false, 2, false);
  EXPECT_MIMIC_ERROR(hybrid_chunked(in.q, in.k, in.v, f, 1.0, o, at::Tensor()), "chunked form is causal");
  o.causal = true;
  o.window_weight = torch::ones({H + 1}, torch::kDouble);
  EXPECT_MIMIC_ERROR(hybrid_quadratic(in.q, in.k, in.v, f, 1.0, o, at::Tensor()), "one value per head");
  o = opts(in, true, 2, false);
  EXPECT_MIMIC_ERROR(hybrid_chunked(in.q, in.k, in.v.narrow(2, 0, 4), f, 1.0, o, at::Tensor()), "must be [B, H, T");
  HybridState wrong;
  hybrid_chunked(in.q, in.k, in.v, f, 1.0, opts(in, true, 3, false), at::Tensor(), &wrong);
  EXPECT_MIMIC_ERROR(hybrid_chunked(in.q, in.k, in.v, f, 1.0, o, at::Tensor(), &wrong), "does not match");
}

// ---------------------------------------------------------------------------------------------------------
// The kernel, built through the registry.

namespace {
std::shared_ptr<HybridAttention> hybrid_kernel(const nlohmann::json& options, uint64_t seed = 1) {
  torch::manual_seed(seed);
  auto k = std::dynamic_pointer_cast<HybridAttention>(make_attention_kernel("hybrid", options, H, D));
  EXPECT_TRUE(k != nullptr);
  k->to(torch::kDouble);
  for (auto& p : k->parameters()) {  // away from the init so that every parameter matters
    torch::NoGradGuard g;
    p.add_(torch::randn_like(p) * 0.3);
  }
  return k;
}
}  // namespace

TEST(HybridKernel, FastFormsMatchQuadraticIncludingMapGateAndWindowWeightGradients) {
  for (const char* map : {"hedgehog", "t2r", "elu"})
    for (bool causal : {true, false}) {
      SCOPED_TRACE(std::string(map) + (causal ? " causal" : " bidirectional"));
      auto att = hybrid_kernel({{"feature_map", map}, {"gates", true}, {"chunk", 3}, {"window", 3}, {"affine", causal},
                                {"window_scale", causal ? "max" : "exact"}});
      auto in = make_inputs(11, false, 5, true);
      AttentionContext ctx;
      ctx.causal = causal;
      ctx.scale = 0.5;
      ctx.key_padding_mask = in.mask;
      auto fast = att->forward(in.q, in.k, in.v, ctx);
      auto ref = att->forward_quadratic(in.q, in.k, in.v, ctx, nullptr);
      EXPECT_LT(max_diff(fast, ref), 1e-11);
      std::vector<at::Tensor> wrt = {in.q, in.k, in.v};
      for (auto& p : att->parameters()) wrt.push_back(p);
      auto gf = grads(fast, in.probe, wrt), gr = grads(ref, in.probe, wrt);
      expect_close(gr, gf, 1e-9, "kernel");
      // Every parameter is reached: map, gates and the window weight.
      for (size_t i = 3; i < gf.size(); ++i) EXPECT_GT(gf[i].abs().max().item<double>(), 0) << "parameter " << i;
      EXPECT_EQ(att->parameter_group("window_logit"), "maps");
      EXPECT_EQ(att->parameter_group("gates.w_q"), "gates");
    }
}

TEST(HybridKernel, DecodingThroughTheCacheMatchesTheWholeSequenceAndItsBytesStayFlat) {
  auto att = hybrid_kernel({{"feature_map", "hedgehog"}, {"window", 4}});
  auto in = make_inputs(15, false, 8, false);
  AttentionContext ctx;
  ctx.causal = true;
  ctx.scale = 0.5;
  auto whole = att->forward(in.q, in.k, in.v, ctx);
  auto cache = att->new_cache();
  std::vector<at::Tensor> outs;
  auto sl = [](const at::Tensor& x, int64_t a, int64_t n) { return x.narrow(2, a, n); };
  outs.push_back(att->forward_cached(sl(in.q, 0, 6), sl(in.k, 0, 6), sl(in.v, 0, 6), ctx, *cache));
  const int64_t bytes = cache->bytes();
  for (int64_t i = 6; i < 15; ++i) {
    outs.push_back(att->forward_cached(sl(in.q, i, 1), sl(in.k, i, 1), sl(in.v, i, 1), ctx, *cache));
    EXPECT_EQ(cache->bytes(), bytes);
  }
  EXPECT_EQ(cache->position, 15);
  EXPECT_LT(max_diff(torch::cat(outs, 2), whole), 1e-11);
  // The bytes are the ring (k, v: hedgehog's features are computed again from a key that leaves the window) plus the
  // linear state, in the kernel's dtype. (With gates the ring keeps the key features too: the next test.)
  const int64_t feat = att->map->feature_dim();
  EXPECT_EQ(bytes, B * H * (4 * (D + D) + feat * D + feat + 1) * 8);
}

// A window beyond the model's context: fitted to the context (as the model that installs a kernel does), the ring holds
// the context's keys, not the window's, with the same outputs; the options stay as given (helper-83's probe of
// 2026-12-06: window 65536 in gpt2-mini reserved 604 MB of decode state, 378 kB at window 16).
TEST(HybridKernel, AWindowBeyondTheContextIsSizedByTheContextWithTheSameOutputs) {
  auto wide = hybrid_kernel({{"feature_map", "hedgehog"}, {"window", 4096}, {"cache", 4096}});
  auto fitted = hybrid_kernel({{"feature_map", "hedgehog"}, {"window", 4096}, {"cache", 4096}});  // the same seed: the same maps
  fitted->fit_context(15);
  EXPECT_EQ(fitted->config_json(), wide->config_json());
  EXPECT_EQ(fitted->hybrid_options(true).window, 15);
  EXPECT_EQ(fitted->hybrid_options(true).cache, 15);
  auto in = make_inputs(15, false, 8, false);
  AttentionContext ctx;
  ctx.causal = true;
  ctx.scale = 0.5;
  torch::NoGradGuard no_grad;  // (the sparse cache decodes without gradients)
  EXPECT_LT(max_diff(fitted->forward(in.q, in.k, in.v, ctx), wide->forward(in.q, in.k, in.v, ctx)), 1e-12);
  auto small = fitted->new_cache(), large = wide->new_cache();
  auto sl = [](const at::Tensor& x, int64_t a, int64_t n) { return x.narrow(2, a, n); };
  for (int64_t i = 0; i < 15; ++i)
    EXPECT_LT(max_diff(fitted->forward_cached(sl(in.q, i, 1), sl(in.k, i, 1), sl(in.v, i, 1), ctx, *small),
                       wide->forward_cached(sl(in.q, i, 1), sl(in.k, i, 1), sl(in.v, i, 1), ctx, *large)), 1e-12) << i;
  EXPECT_GT(small->bytes(), 0);
  EXPECT_LT(small->bytes() * 100, large->bytes());  // a ring (and a cache) of 15 keys for one of 4096
}

TEST(HybridKernel, DecodingStepsWithoutGradientsMatchTheWholeSequenceWithGatesLearnedMixAndBatches) {
  // What generation runs: a prompt through the cache (chunked), then T = 1 calls under NoGradGuard (hybrid_step),
  // in float32, with SLA gates, a learned window weight and λ = 1 − σ; 3 windows of 8 after the prompt.
  for (int64_t batch : {int64_t{1}, B})
    for (int64_t prompt : {3, 13}) {
      SCOPED_TRACE("batch " + std::to_string(batch) + ", prompt " + std::to_string(prompt));
      auto att = hybrid_kernel({{"feature_map", "hedgehog"}, {"gates", true}, {"window", 8}, {"affine", true}, {"chunk", 4}});
      att->to(torch::kFloat);
      auto in = make_inputs(prompt + 24, false, 21, false, torch::kFloat);
      torch::NoGradGuard no_grad;
      AttentionContext ctx;
      ctx.causal = true;
      ctx.scale = 0.5;
      const int64_t t = in.q.size(2);
      auto sl = [&](const at::Tensor& x, int64_t from, int64_t n) { return rows(x, batch, from, n); };
      auto whole = att->forward(sl(in.q, 0, t), sl(in.k, 0, t), sl(in.v, 0, t), ctx);
      const double tol = 2e-5 * (1 + whole.abs().max().item<double>());
      auto cache = att->new_cache();
      auto out = att->forward_cached(sl(in.q, 0, prompt), sl(in.k, 0, prompt), sl(in.v, 0, prompt), ctx, *cache);
      EXPECT_LT(max_diff(out, whole.narrow(2, 0, prompt)), tol);
      const int64_t bytes = cache->bytes();
      // with gates the ring keeps the key features (a key's gate reads every head of its position): w·(d + d + F)
      const int64_t feat = att->map->feature_dim(), d = in.q.size(3), heads = in.q.size(1);
      EXPECT_EQ(bytes, batch * heads * (8 * (d + d + feat) + feat * d + feat + 1) * 4);
      std::unique_ptr<KernelCache> branch;
      std::vector<at::Tensor> after_branch;
      for (int64_t i = prompt; i < t; ++i) {
        if (i == prompt + 10) branch = cache->clone();
        out = att->forward_cached(sl(in.q, i, 1), sl(in.k, i, 1), sl(in.v, i, 1), ctx, *cache);
        if (branch) after_branch.push_back(out);
        EXPECT_LT(max_diff(out, whole.narrow(2, i, 1)), tol) << "position " << i;
        EXPECT_EQ(cache->bytes(), bytes) << "position " << i;
      }
      EXPECT_EQ(cache->position, t);
      // The clone taken midway did not see the later in-place writes: it decodes the same tokens again alike.
      for (int64_t i = prompt + 10; i < t; ++i)
        EXPECT_EQ(max_diff(att->forward_cached(sl(in.q, i, 1), sl(in.k, i, 1), sl(in.v, i, 1), ctx, *branch),
                           after_branch[static_cast<size_t>(i - prompt - 10)]),
                  0)
            << "position " << i;
    }
}

TEST(HybridKernel, OptionsRoundTripAndBadOptionsAreRefused) {
  auto j = canonical_options("hybrid", {{"window", 16}, {"feature_map", "hedgehog"}}, H, D);
  EXPECT_EQ(j.at("window"), 16);
  EXPECT_EQ(j.at("mix"), "learned");
  EXPECT_EQ(j.at("window_scale"), "max");
  EXPECT_EQ(j.at("norm"), "row");
  EXPECT_EQ(canonical_options("hybrid", j, H, D), j);
  EXPECT_EQ(attention_kind("hybrid").role, KindRole::Distillable);
  EXPECT_MIMIC_ERROR(make_attention_kernel("hybrid", {{"window", 0}}, H, D), "option 'window'");
  EXPECT_MIMIC_ERROR(make_attention_kernel("hybrid", {{"norm", "l2"}}, H, D), "share the row normaliser");
  EXPECT_MIMIC_ERROR(make_attention_kernel("hybrid", {{"decay", true}}, H, D), "window's edge");
  EXPECT_MIMIC_ERROR(make_attention_kernel("hybrid", {{"window_weight", 1.5}}, H, D), "(0, 1)");
  EXPECT_MIMIC_ERROR(make_attention_kernel("hybrid", {{"mix", "sometimes"}}, H, D), "learned or fixed");
  EXPECT_MIMIC_ERROR(make_attention_kernel("hybrid", {{"window_scale", "min"}}, H, D), "max or exact");
  EXPECT_MIMIC_ERROR(make_attention_kernel("hybrid", {{"windw", 4}}, H, D), "unknown hybrid attention option 'windw'");
  EXPECT_MIMIC_ERROR(make_attention_kernel("hybrid", {{"feature_map", "nope"}}, H, D), "nope");
  // the linear part's refusals say they are the hybrid's (they read "linear attention option 'eps'" alone: helper-83)
  EXPECT_MIMIC_ERROR(make_attention_kernel("hybrid", {{"eps", -1}}, H, D),
                     "hybrid attention's linear part: linear attention option 'eps' must be a number >= 0, got -1");
  // A fixed mix has no window parameter and σ as given.
  auto fixed = std::dynamic_pointer_cast<HybridAttention>(make_attention_kernel("hybrid", {{"mix", "fixed"}, {"window_weight", 0.25}}, H, D));
  EXPECT_FALSE(fixed->window_logit.defined());
  EXPECT_NEAR(fixed->window_weight()[1].item<double>(), 0.25, 1e-12);
  auto learned = std::dynamic_pointer_cast<HybridAttention>(make_attention_kernel("hybrid", {{"window_weight", 0.25}}, H, D));
  EXPECT_NEAR(learned->window_weight()[2].item<double>(), 0.25, 1e-6);
}

TEST(HybridKernel, MapsTrainedForTheLinearKindLoadUnderTheSameNames) {
  auto linear = make_attention_kernel("linear", {{"feature_map", "hedgehog"}, {"gates", true}}, H, D);
  auto hybrid = make_attention_kernel("hybrid", {{"feature_map", "hedgehog"}, {"gates", true}}, H, D);
  auto lp = linear->named_parameters(), hp = hybrid->named_parameters();
  for (const auto& p : lp) EXPECT_TRUE(hp.contains(p.key())) << p.key();
  EXPECT_EQ(hp.size(), lp.size() + 1);  // + window_logit
}

// ---------------------------------------------------------------------------------------------------------
// Mixed layers (head-level placement): softmax in some heads, a student in the others.
#include "mimic/attention/mixed_kernel.h"

namespace {
std::shared_ptr<MixedAttention> mixed_kernel(const std::vector<int64_t>& heads, const char* student_kind, uint64_t seed = 4) {
  torch::manual_seed(seed);
  nlohmann::json student = {{"feature_map", "hedgehog"}, {"gates", true}, {"chunk", 3}};
  if (std::string(student_kind) == "hybrid") student["window"] = 2;
  if (std::string(student_kind) == "delta") student = {{"gate", true}, {"gates", true}, {"chunk", 3}};
  auto k = std::dynamic_pointer_cast<MixedAttention>(
      make_attention_kernel("mixed", {{"softmax_heads", heads}, {"kind", student_kind}, {"options", student}}, H, D));
  EXPECT_TRUE(k != nullptr);
  k->to(torch::kDouble);
  for (auto& p : k->parameters()) {
    torch::NoGradGuard g;
    p.add_(torch::randn_like(p) * 0.3);
  }
  return k;
}
}  // namespace

TEST(MixedKernel, KeptHeadsAreExactlySoftmaxAndTheOthersExactlyTheStudent) {
  for (const char* student : {"linear", "hybrid", "delta"})
    for (bool causal : {true, false}) {
      if (!causal && std::string(student) == "delta") continue;  // a recurrence: causal only
      SCOPED_TRACE(std::string(student) + (causal ? " causal" : " bidirectional"));
      auto mixed = mixed_kernel({0, 2}, student);
      auto in = make_inputs(9, false, 12, true);
      AttentionContext ctx;
      ctx.causal = causal;
      ctx.scale = 0.5;
      ctx.key_padding_mask = in.mask;
      auto out = mixed->forward(in.q, in.k, in.v, ctx);
      auto soft = make_attention_kernel("softmax", nlohmann::json::object(), H, D)->forward(in.q, in.k, in.v, ctx);
      auto stud = mixed->student()->forward(in.q, in.k, in.v, ctx);
      for (int64_t h : {0, 2}) EXPECT_EQ(max_diff(out.select(1, h), soft.select(1, h)), 0.0) << h;
      EXPECT_EQ(max_diff(out.select(1, 1), stud.select(1, 1)), 0.0);
      // the quadratic form is the same function, with the teacher's weights in the kept heads
      at::Tensor w, lw;
      auto ref = mixed->forward_quadratic(in.q, in.k, in.v, ctx, &w, &lw);
      EXPECT_LT(max_diff(ref, out), 1e-11);
      EXPECT_LT(max_diff(w.select(1, 2), softmax_weights(in.q, in.k, ctx).select(1, 2)), 1e-14);
      auto visible = w > 0;
      EXPECT_LT(max_diff(lw.exp().masked_select(visible), w.masked_select(visible)), 1e-12);
      std::vector<at::Tensor> wrt = {in.q, in.k, in.v};
      for (auto& p : mixed->parameters()) wrt.push_back(p);
      expect_close(grads(ref, in.probe, wrt), grads(out, in.probe, wrt), 1e-9, "mixed");
      EXPECT_EQ(mixed->parameter_group("student.gates.w_q"), "gates");
      EXPECT_EQ(mixed->parameter_group("student.feature_map.q.weight"), "maps");
    }
}

TEST(MixedKernel, DecodingKeepsAKvCacheForTheSoftmaxHeadsOnly) {
  // with gradients the hybrid student decodes through its chunked form, without them through hybrid_step
  for (bool grad : {true, false}) {
  SCOPED_TRACE(grad ? "grad mode" : "no grad");
  torch::AutoGradMode mode(grad);
  auto mixed = mixed_kernel({1}, "hybrid");
  auto in = make_inputs(12, false, 13, false);
  AttentionContext ctx;
  ctx.causal = true;
  ctx.scale = 0.5;
  auto whole = mixed->forward(in.q, in.k, in.v, ctx);
  auto cache = mixed->new_cache();
  std::vector<at::Tensor> outs;
  std::vector<int64_t> bytes;
  for (int64_t i = 0; i < 12; ++i) {
    outs.push_back(mixed->forward_cached(in.q.narrow(2, i, 1), in.k.narrow(2, i, 1), in.v.narrow(2, i, 1), ctx, *cache));
    bytes.push_back(cache->bytes());
  }
  EXPECT_LT(max_diff(torch::cat(outs, 2), whole), 1e-11);
  // after the student's state exists, each token adds one key and one value of one head per sequence, in double
  for (size_t i = 2; i < bytes.size(); ++i) EXPECT_EQ(bytes[i] - bytes[i - 1], B * 1 * 2 * D * 8) << i;
  auto copy = cache->clone();
  EXPECT_EQ(copy->bytes(), cache->bytes());
  EXPECT_EQ(copy->position, 12);
  }
}

namespace {
const nlohmann::json kHedgehogGated = {{"feature_map", "hedgehog"}, {"gates", true}, {"chunk", 3}};
nlohmann::json with(nlohmann::json j, const nlohmann::json& more) {
  j.update(more);
  return j;
}
// The students a mixed layer runs on some of its heads: every kind whose state is per head, with the inputs that read
// every head (SLA gates), a per-head decay, and LoLA's cache in every head (what --keep-softmax with cache=N writes)
// and in some heads only.
const std::vector<std::pair<std::string, nlohmann::json>>& students_of_some_heads() {
  static const std::vector<std::pair<std::string, nlohmann::json>> s = {
      {"linear", with(kHedgehogGated, {{"decay", true}})},
      {"hybrid", with(kHedgehogGated, {{"window", 2}})},
      {"hybrid", with(kHedgehogGated, {{"window", 2}, {"cache", 2}})},
      {"hybrid", with(kHedgehogGated, {{"window", 2}, {"cache", 2}, {"cache_heads", {0, 2}}})},
      {"delta", {{"gate", true}, {"gates", true}, {"chunk", 3}}},
  };
  return s;
}
}  // namespace

// A mixed layer's student decodes the converted heads alone (forward_cached_heads): their rows are those of decoding
// every head, and the state holds those heads only — the kept heads carried a linear state computed for nothing
// (~8/48 of an all-linear gpt2-mini's; the Llama-family probe of 2026-12-01). Every student of
// students_of_some_heads().
TEST(MixedKernel, TheStudentDecodesAndKeepsStateForTheConvertedHeadsAlone) {
  torch::NoGradGuard no_grad;  // the cached hybrid decodes without gradients
  const auto& students = students_of_some_heads();
  for (const auto& [kind, options] : students) {
    SCOPED_TRACE(kind + " " + options.dump());
    torch::manual_seed(5);
    auto kernel = as_distillable(make_attention_kernel(kind, options, H, D), "the test's student");
    kernel->to(torch::kDouble);
    for (auto& p : kernel->parameters()) p.add_(torch::randn_like(p) * 0.3);
    auto in = make_inputs(10, false, 7, false);
    AttentionContext ctx;
    ctx.causal = true;
    ctx.scale = 0.5;
    // a prompt of 6 tokens, then one token at a time
    auto decode = [&](KernelCache& cache, const at::Tensor& heads) {
      std::vector<at::Tensor> outs;
      for (const auto& [start, len] : std::vector<std::pair<int64_t, int64_t>>{{0, 6}, {6, 1}, {7, 1}, {8, 1}, {9, 1}}) {
        const auto q = in.q.narrow(2, start, len), k = in.k.narrow(2, start, len), v = in.v.narrow(2, start, len);
        outs.push_back(heads.defined() ? kernel->forward_cached_heads(q, k, v, ctx, cache, heads) : kernel->forward_cached(q, k, v, ctx, cache));
      }
      return torch::cat(outs, 2);
    };
    auto every = kernel->new_cache();
    const auto all = decode(*every, at::Tensor());
    EXPECT_LT(max_diff(all, kernel->forward(in.q, in.k, in.v, ctx)), 1e-11);
    int64_t bytes = 0;
    for (const std::vector<int64_t>& heads : {std::vector<int64_t>{1}, std::vector<int64_t>{0, 2}}) {
      const auto index = torch::tensor(heads, torch::kLong);
      auto part = kernel->new_cache();
      const auto rows = decode(*part, index);
      ASSERT_EQ(rows.size(1), static_cast<int64_t>(heads.size()));
      EXPECT_LT(max_diff(rows, all.index_select(1, index)), 1e-12);
      EXPECT_EQ(part->position, 10);
      EXPECT_GT(part->bytes(), 0);
      bytes += part->bytes();
    }
    EXPECT_EQ(bytes, every->bytes());  // the two parts' states are the whole's, split by head
  }
  auto hybrid = as_distillable(make_attention_kernel("hybrid", with(kHedgehogGated, {{"window", 2}}), H, D), "the test's student");
  auto few = make_inputs(3, false, 7, false);
  AttentionContext causal;
  causal.causal = true;
  for (const auto& bad : {std::vector<int64_t>{2, 0}, std::vector<int64_t>{1, 1}, std::vector<int64_t>{3}})
    EXPECT_MIMIC_ERROR(hybrid->forward_cached_heads(few.q.to(torch::kFloat), few.k.to(torch::kFloat), few.v.to(torch::kFloat), causal,
                                                    *hybrid->new_cache(), torch::tensor(bad, torch::kLong)),
                       "give sorted, distinct heads of the layer's 3");
  // and in a mixed layer: a KV cache for the kept head, the student's state for the other two
  auto mixed = mixed_kernel({1}, "linear");
  auto student_alone = mixed->student()->new_cache();
  auto cache = mixed->new_cache();
  auto in = make_inputs(5, false, 3, false);
  AttentionContext ctx;
  ctx.causal = true;
  ctx.scale = 0.5;
  const auto out = mixed->forward_cached(in.q, in.k, in.v, ctx, *cache);
  EXPECT_LT(max_diff(out, mixed->forward(in.q, in.k, in.v, ctx)), 1e-11);
  mixed->student()->forward_cached_heads(in.q, in.k, in.v, ctx, *student_alone, torch::tensor({0, 2}, torch::kLong));
  EXPECT_EQ(cache->bytes(), student_alone->bytes() + B * 1 * 5 * 2 * D * 8);  // + 5 keys and values of one head, in double
}

// The same in the whole-sequence form (forward_fast_heads, what a mixed layer trains and evaluates with): the
// student's attention runs on the converted heads alone, its rows and its gradients (inputs and every parameter)
// those of the quadratic reference's heads, and of the fast form on every head. Causal and bidirectional, with
// padding, every kind whose attention is per head, with the inputs that read every head (SLA gates).
TEST(MixedKernel, TheStudentsWholeSequenceFormOnSomeHeadsIsTheWholesRowsForwardAndGradients) {
  const auto& students = students_of_some_heads();
  for (const auto& [kind, options] : students)
    for (bool causal : {true, false}) {
      if (!causal && (kind == "delta" || options.contains("decay") || options.contains("cache"))) continue;  // causal only
      SCOPED_TRACE(kind + " " + options.dump() + (causal ? " causal" : " bidirectional"));
      torch::manual_seed(6);
      auto kernel = as_distillable(make_attention_kernel(kind, options, H, D), "the test's student");
      kernel->to(torch::kDouble);
      for (auto& p : kernel->parameters()) {
        torch::NoGradGuard g;
        p.add_(torch::randn_like(p) * 0.3);
      }
      auto in = make_inputs(10, false, 8, true);
      AttentionContext ctx;
      ctx.causal = causal;
      ctx.scale = 0.5;
      ctx.key_padding_mask = in.mask;
      std::vector<at::Tensor> wrt = {in.q, in.k, in.v};
      for (auto& p : kernel->parameters()) wrt.push_back(p);
      const auto whole = kernel->forward(in.q, in.k, in.v, ctx);
      at::Tensor w;
      const auto reference = kernel->forward_quadratic(in.q, in.k, in.v, ctx, &w);
      for (const std::vector<int64_t>& heads : {std::vector<int64_t>{1}, std::vector<int64_t>{0, 2}, std::vector<int64_t>{0, 1, 2}}) {
        SCOPED_TRACE(nlohmann::json(heads).dump());
        const auto index = torch::tensor(heads, torch::kLong);
        const auto rows = kernel->forward_fast_heads(in.q, in.k, in.v, ctx, index);
        ASSERT_EQ(rows.sizes(), (std::vector<int64_t>{B, static_cast<int64_t>(heads.size()), 10, D}));
        EXPECT_LT(max_diff(rows, whole.index_select(1, index)), 1e-12);
        EXPECT_LT(max_diff(rows, reference.index_select(1, index)), 1e-10);
        const auto probe = in.probe.index_select(1, index);
        expect_close(grads(rows, probe, wrt), grads(reference.index_select(1, index), probe, wrt), 1e-9, "quadratic reference");
        expect_close(grads(rows, probe, wrt), grads(whole.index_select(1, index), probe, wrt), 1e-11, "every head");
      }
    }
  auto hybrid = as_distillable(make_attention_kernel("hybrid", with(kHedgehogGated, {{"window", 2}}), H, D), "the test's student");
  auto few = make_inputs(3, false, 7, false, torch::kFloat);
  AttentionContext causal;
  causal.causal = true;
  for (const auto& bad : {std::vector<int64_t>{2, 0}, std::vector<int64_t>{1, 1}, std::vector<int64_t>{-1}})
    EXPECT_MIMIC_ERROR(hybrid->forward_fast_heads(few.q, few.k, few.v, causal, torch::tensor(bad, torch::kLong)),
                       "give sorted, distinct heads of the layer's 3");
}

TEST(MixedKernel, RebuildsFromItsOptionsAndRefusesBadHeadLists) {
  auto mixed = mixed_kernel({0, 1}, "linear");
  auto again = make_attention_kernel("mixed", mixed->config_json(), H, D);
  EXPECT_EQ(again->config_json(), mixed->config_json());
  auto names = again->named_parameters();
  for (const auto& p : mixed->named_parameters()) EXPECT_TRUE(names.contains(p.key())) << p.key();
  auto bad = [&](const nlohmann::json& heads) {
    return make_attention_kernel("mixed", {{"softmax_heads", heads}, {"kind", "linear"}}, H, D);
  };
  EXPECT_MIMIC_ERROR(bad({0, 1, 2}), "1 to 2 of its 3 heads");
  EXPECT_MIMIC_ERROR(bad(nlohmann::json::array()), "1 to 2 of its 3 heads");
  EXPECT_MIMIC_ERROR(bad({2, 0}), "sorted and distinct");
  EXPECT_MIMIC_ERROR(bad({5}), "not in [0, 3)");
  EXPECT_MIMIC_ERROR(make_attention_kernel("mixed", {{"softmax_heads", {1}}, {"kind", "softmax"}}, H, D), "student kind");
  EXPECT_MIMIC_ERROR(make_attention_kernel("mixed", {{"heads", {1}}}, H, D), "unknown mixed attention option 'heads'");
  // a kind that is no string: one line naming the key, not nlohmann's type_error (mimic.json holds these options)
  EXPECT_MIMIC_ERROR(make_attention_kernel("mixed", {{"softmax_heads", {1}}, {"kind", 3}}, H, D),
                     "mixed attention options: key 'kind' must be a string, got 3");
}

TEST(KindSpec, ParsesKindAndTypedOptionsAndRefusesMalformedSpecs) {
  auto k = parse_kind_spec("hybrid:window=64,mix=fixed,window_weight=0.25,affine=true");
  EXPECT_EQ(k.kind, "hybrid");
  EXPECT_EQ(k.options, (nlohmann::json{{"window", 64}, {"mix", "fixed"}, {"window_weight", 0.25}, {"affine", true}}));
  EXPECT_EQ(parse_kind_spec("linear").options, nlohmann::json::object());
  // leading zeros are decimal, as in integer options and recall-task specs (JSON alone refuses them)
  EXPECT_EQ(parse_kind_spec("hybrid:window=010").options["window"], 10);
  EXPECT_EQ(parse_kind_spec("hybrid:window=-007").options["window"], -7);
  EXPECT_EQ(parse_kind_spec("hybrid:window=0x10").options["window"], "0x10");  // not a number: the kind refuses it by name
  // decimals as every real option of the command line takes them (.5 was refused while --lr .5 was not)
  EXPECT_EQ(parse_kind_spec("hybrid:window_weight=.5").options["window_weight"], 0.5);
  EXPECT_EQ(parse_kind_spec("hybrid:window_weight=5.").options["window_weight"], 5.0);
  EXPECT_EQ(parse_kind_spec("hybrid:window_weight=-.25e-1").options["window_weight"], -0.025);
  EXPECT_EQ(parse_kind_spec("hybrid:window_weight=inf").options["window_weight"], "inf");
  EXPECT_MIMIC_ERROR(parse_kind_spec("hybrid:window= 3"), "'window= 3' has blanks around its key or value");
  EXPECT_MIMIC_ERROR(parse_kind_spec("hybrid:window_weight=0.5 "), "has blanks around its key or value");
  EXPECT_MIMIC_ERROR(parse_kind_spec("cosine:w=1"), "unknown attention kind 'cosine'");
  EXPECT_MIMIC_ERROR(parse_kind_spec("hybrid:"), "expected KIND:key=value");
  EXPECT_MIMIC_ERROR(parse_kind_spec("hybrid:window"), "'window' is not key=value");
  EXPECT_MIMIC_ERROR(parse_kind_spec("hybrid:w=1,w=2"), "option 'w' given twice");
  EXPECT_MIMIC_ERROR(parse_kind_spec("hybrid:w=4,"), "'' is not key=value");
  // a list value keeps its commas (decay=[...] gives one γ per head; it was cut at its first comma: helper-99's probe)
  EXPECT_EQ(parse_kind_spec("linear:decay=[0.5,0.25],chunk=8").options,
            (nlohmann::json{{"decay", {0.5, 0.25}}, {"chunk", 8}}));
  EXPECT_EQ(parse_kind_spec("mixed:softmax_heads=[1,3]").options["softmax_heads"], (nlohmann::json{1, 3}));
  EXPECT_MIMIC_ERROR(parse_kind_spec("linear:decay=[0.5,0.25"), "'decay=[0.5,0.25': its value is no JSON list");
  EXPECT_MIMIC_ERROR(parse_kind_spec("linear:decay=[.5,.25]"), "its value is no JSON list (write it as JSON: brackets closed, numbers such as 0.5");
  EXPECT_MIMIC_ERROR(parse_kind_spec("hybrid:window_scale=max],window=3"), "']' at 'window_scale=max]' closes no bracket");
}

// small_matmul multiplies by broadcasting where a has one row, m one column or the inner dimension is one (batched
// GEMMs of such shapes ran one tiny GEMM per batch entry): it is matmul, forward and gradients, for each of those
// shapes and for one that goes to matmul, with batch dimensions that broadcast.
TEST(HybridAttention, SmallMatmulIsMatmulForwardAndGradientsForEveryShapeItTakesApart) {
  torch::manual_seed(3);
  const auto opts = torch::TensorOptions().dtype(torch::kFloat64).requires_grad(true);
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{2, 3, 1, 5}, {2, 3, 5, 4}},  // one row
      {{2, 3, 6, 5}, {2, 3, 5, 1}},  // one column
      {{2, 3, 6, 1}, {2, 3, 1, 4}},  // inner dimension one: an outer product
      {{2, 1, 6, 5}, {1, 3, 5, 4}},  // neither: matmul itself, broadcasting the batch
      {{2, 1, 6, 5}, {1, 3, 5, 1}},  // one column, broadcasting the batch
  };
  for (const auto& [sa, sm] : shapes) {
    SCOPED_TRACE(::testing::PrintToString(sa) + " x " + ::testing::PrintToString(sm));
    auto a = torch::randn(sa, opts), m = torch::randn(sm, opts);
    auto fast = hybrid_parts::small_matmul(a, m), plain = torch::matmul(a, m);
    ASSERT_EQ(fast.sizes(), plain.sizes());
    EXPECT_LT((fast - plain).abs().max().item<double>(), 1e-12);
    auto up = torch::randn(plain.sizes(), torch::kFloat64);
    auto gf = torch::autograd::grad({fast}, {a, m}, {up}), gp = torch::autograd::grad({plain}, {a, m}, {up});
    for (size_t i = 0; i < 2; ++i) EXPECT_LT((gf[i] - gp[i]).abs().max().item<double>(), 1e-12) << i;
  }
}
