// The sparse cache (attention/sparse_cache.h, LoLA): its forms against a per-token reference written apart from
// them, its two limits (no cache: hybrid; room for every key: softmax), and what its selection keeps.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "mimic/attention/distillable.h"
#include "mimic/attention/hybrid_attention.h"
#include "mimic/attention/hybrid_kernel.h"
#include "mimic/attention/kinds.h"
#include "mimic/attention/sparse_cache.h"
#include "mimic/core/error.h"
#include "test_util.h"

using namespace mimic::attention;

namespace {

// The schedule and the output of one (sequence, head), position by position: explicit lists of cached and linear
// keys, every error and sum a loop over keys, in double. Only the output rows are tensor expressions (so that
// autograd gives the reference's gradients); the choices are read from detached values.
struct Reference {
  int64_t window, size, every;
  double scale, sigma, lambda = 1.0;

  at::Tensor head(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& fq, const at::Tensor& fk,
                  std::vector<std::vector<int64_t>>* exact_beyond = nullptr) const {
    const int64_t t = q.size(0);
    auto fkd = fk.detach(), vd = v.detach();
    auto dot = [](const at::Tensor& a, const at::Tensor& b) {
      double s = 0;
      for (int64_t x = 0; x < a.size(0); ++x) s += a[x].item<double>() * b[x].item<double>();
      return s;
    };
    std::vector<int64_t> cache, linear;
    int64_t last = 0;
    std::vector<at::Tensor> rows;
    for (int64_t i = 0; i < t; ++i) {
      if (i % every == 0) {
        last = i;
        std::vector<int64_t> cand = cache;
        for (int64_t j = std::max<int64_t>(0, i - every - window + 1); j <= i - window; ++j) cand.push_back(j);
        std::sort(cand.begin(), cand.end());
        if (static_cast<int64_t>(cand.size()) > size) {
          std::vector<std::pair<double, int64_t>> scored;  // (−error, position): sorted, the largest error first, older first
          for (int64_t c : cand) {
            double den = 0;
            std::vector<double> num(static_cast<size_t>(v.size(1)), 0.0);
            for (int64_t j : linear) {
              const double a = dot(fkd[c], fkd[j]);
              den += a;
              for (int64_t d = 0; d < v.size(1); ++d) num[static_cast<size_t>(d)] += a * vd[j][d].item<double>();
            }
            double err = 0;
            for (int64_t d = 0; d < v.size(1); ++d) {
              const double pred = den == 0 ? 0.0 : num[static_cast<size_t>(d)] / den;
              err += (pred - vd[c][d].item<double>()) * (pred - vd[c][d].item<double>());
            }
            scored.emplace_back(-err, c);
          }
          std::sort(scored.begin(), scored.end());
          cache.clear();
          for (size_t r = 0; r < scored.size(); ++r)
            (static_cast<int64_t>(r) < size ? cache : linear).push_back(scored[r].second);
        } else {
          cache = cand;
        }
      }
      std::vector<int64_t> exact = cache;
      for (int64_t j = std::max<int64_t>(0, last - window + 1); j <= i; ++j) exact.push_back(j);
      if (exact_beyond) {
        std::vector<int64_t> beyond;
        for (int64_t j : exact)
          if (j <= i - window) beyond.push_back(j);
        std::sort(beyond.begin(), beyond.end());
        exact_beyond->push_back(beyond);
      }
      std::vector<at::Tensor> s;
      for (int64_t j : exact) s.push_back((q[i] * k[j]).sum() * scale);
      auto scores = torch::stack(s);
      auto terms = sigma * (scores - scores.max()).exp();
      auto num = torch::zeros_like(v[0]);
      auto den = torch::zeros({}, v.options());
      for (size_t x = 0; x < exact.size(); ++x) {
        num = num + terms[static_cast<int64_t>(x)] * v[exact[x]];
        den = den + terms[static_cast<int64_t>(x)];
      }
      for (int64_t j : linear) {
        auto a = lambda * (fq[i] * fk[j]).sum();
        num = num + a * v[j];
        den = den + a;
      }
      rows.push_back(num / den);
    }
    return torch::stack(rows);
  }

  // [B, H, T, D] from plain features (not log)
  at::Tensor operator()(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& fq, const at::Tensor& fk,
                        std::vector<std::vector<int64_t>>* exact_beyond = nullptr) const {
    std::vector<at::Tensor> batch;
    for (int64_t b = 0; b < q.size(0); ++b) {
      std::vector<at::Tensor> heads;
      for (int64_t h = 0; h < q.size(1); ++h) heads.push_back(head(q[b][h], k[b][h], v[b][h], fq[b][h], fk[b][h], exact_beyond));
      batch.push_back(torch::stack(heads));
    }
    return torch::stack(batch);
  }
};

struct Inputs {
  at::Tensor q, k, v, fq, fk;  // fq, fk: log φ (the features are their exp)
};

Inputs inputs(int64_t b, int64_t h, int64_t t, int64_t d, int64_t f, uint64_t seed) {
  torch::manual_seed(seed);
  auto o = torch::TensorOptions().dtype(torch::kDouble);
  Inputs in{torch::randn({b, h, t, d}, o), torch::randn({b, h, t, d}, o), torch::randn({b, h, t, d}, o),
            torch::randn({b, h, t, f}, o) * 0.7, torch::randn({b, h, t, f}, o) * 0.7};
  for (auto* x : {&in.q, &in.k, &in.v, &in.fq, &in.fk}) x->requires_grad_(true);
  return in;
}

HybridOptions hybrid(int64_t window, int64_t heads) {
  HybridOptions o;
  o.window = window;
  o.window_weight = torch::full({heads}, 0.6, torch::kDouble);
  return o;
}

double max_diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

// A hybrid kernel with `options` (feature map hedgehog, 2 heads of width 4), in double and seeded, and the causal
// context at scale 0.5 the kernel tests run it in.
struct HybridKernel {
  AttentionKernel att;
  AttentionContext ctx;
};
HybridKernel hybrid_kernel(nlohmann::json options) {
  torch::manual_seed(5);
  options["feature_map"] = "hedgehog";
  HybridKernel h{make_attention_kernel("hybrid", options, 2, 4), AttentionContext{}};
  h.att->to(torch::kDouble);
  h.ctx.causal = true;
  h.ctx.scale = 0.5;
  return h;
}

}  // namespace

// The forms against the reference, both schedules (a selection every position, as decoding runs, and every 4, as
// LoLA's chunks), features given plainly and in log space: outputs and every input's gradient.
TEST(SparseCache, TheQuadraticFormComputesTheReferenceForwardAndBackward) {
  const int64_t B = 2, H = 2, T = 13, D = 4, F = 5, w = 3;
  const double scale = 0.5;
  for (const int64_t every : {1, 4})
    for (const int64_t size : {0, 2, 5})
      for (const bool log_space : {false, true}) {
        SCOPED_TRACE("every " + std::to_string(every) + ", size " + std::to_string(size) + (log_space ? ", log space" : ""));
        auto in = inputs(B, H, T, D, F, 7 + static_cast<uint64_t>(every * 10 + size));
        Features f{log_space ? in.fq : in.fq.exp(), log_space ? in.fk : in.fk.exp(), log_space};
        auto o = hybrid(w, H);
        o.cache = size;
        o.cache_every = every;
        auto sel = sparse_cache_selection(in.k, in.v, f, o, at::Tensor());
        auto out = hybrid_quadratic_with(in.q, in.k, in.v, f, scale, o, at::Tensor(), sel);
        // the quadratic form runs the selection itself when there is a cache
        if (size > 0) EXPECT_EQ(max_diff(out, hybrid_quadratic(in.q, in.k, in.v, f, scale, o, at::Tensor())), 0.0);
        Reference ref{w, size, every, scale, 0.6};
        std::vector<std::vector<int64_t>> beyond;
        auto expect = ref(in.q, in.k, in.v, in.fq.exp(), in.fk.exp(), &beyond);
        EXPECT_LT(max_diff(out, expect), 1e-12);
        // the selection names the same keys as the reference's lists
        size_t row = 0;
        for (int64_t b = 0; b < B; ++b)
          for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < T; ++i, ++row) {
              std::vector<int64_t> got;
              for (int64_t j = 0; j <= i - w; ++j)
                if (sel[b][h][i][j].item<bool>()) got.push_back(j);
              EXPECT_EQ(got, beyond[row]) << "b " << b << " h " << h << " i " << i;
            }
        // gradients of a weighted sum of the outputs
        auto weights = torch::randn_like(out);
        auto grads = torch::autograd::grad({(out * weights).sum()}, {in.q, in.k, in.v, in.fq, in.fk});
        auto expect_grads = torch::autograd::grad({(expect * weights).sum()}, {in.q, in.k, in.v, in.fq, in.fk});
        for (size_t x = 0; x < grads.size(); ++x) EXPECT_LT(max_diff(grads[x], expect_grads[x]), 1e-10) << "input " << x;
        // a cache that matters: the output differs from the same hybrid without one
        if (size > 0) {
          auto none = o;
          none.cache = 0;
          EXPECT_GT(max_diff(out, hybrid_quadratic(in.q, in.k, in.v, f, scale, none, at::Tensor())), 1e-6);
        }
      }
}

// The chunked form (the kernel's whole-sequence forward) computes the quadratic form's output and gradients —
// which the test above holds to the reference — for both schedules and a chunk that does not divide T, plain and
// log-space features, with padded keys, the exact window scale and an affine linear weight.
TEST(SparseCache, TheChunkedFormComputesTheQuadraticFormForwardAndBackward) {
  const int64_t B = 2, H = 2, T = 14, D = 4, F = 5;
  struct Case {
    int64_t every, size, window;
    bool log_space, padded, exact, affine;
    // the keys' log-features this far below 0 and the queries' as far above (φ(q)·φ(k) unchanged): beyond double's
    // range of exp at 800, so a state that does not carry the keys' own scale loses them
    double below = 0;
  };
  for (const Case c : {Case{1, 2, 3, true, false, false, false}, Case{1, 5, 1, false, false, false, false},
                       Case{3, 2, 3, true, true, false, false}, Case{4, 5, 2, false, false, true, false},
                       Case{4, 0, 3, true, false, false, true}, Case{5, 3, 4, true, true, true, true},
                       Case{2, 20, 3, false, false, false, false}, Case{20, 2, 3, true, false, false, false},
                       Case{3, 2, 16, true, true, false, false}, Case{2, 3, 2, true, false, true, false, 800.0},
                       Case{1, 3, 2, true, true, false, true, 800.0}}) {
    SCOPED_TRACE("every " + std::to_string(c.every) + ", size " + std::to_string(c.size) + ", window " + std::to_string(c.window) +
                 (c.log_space ? ", log space" : "") + (c.padded ? ", padded" : "") + (c.exact ? ", exact" : "") +
                 (c.affine ? ", affine" : "") + (c.below > 0 ? ", far below" : ""));
    auto in = inputs(B, H, T, D, F, 40 + static_cast<uint64_t>(c.every * 10 + c.size));
    auto fq = in.fq + c.below, fk = in.fk - c.below;
    Features f{c.log_space ? fq : fq.exp(), c.log_space ? fk : fk.exp(), c.log_space};
    auto o = hybrid(c.window, H);
    o.cache = c.size;
    o.cache_every = c.every;
    o.exact = c.exact;
    if (c.affine) o.linear_weight = 1 - o.window_weight;
    at::Tensor mask;
    if (c.padded) {  // the second sequence's first three and last two tokens are padding
      mask = torch::ones({B, T}, torch::kBool);
      mask[1].narrow(0, 0, 3).fill_(false);
      mask[1].narrow(0, T - 2, 2).fill_(false);
    }
    // (the selection's output for any λ, 0 included: with λ = 0 and a chunk of several queries the pending keys are exact)
    auto expect = hybrid_quadratic_with(in.q, in.k, in.v, f, 0.5, o, mask, sparse_cache_selection(in.k, in.v, f, o, mask));
    auto out = hybrid_cache_chunked(in.q, in.k, in.v, f, 0.5, o, mask);
    EXPECT_LT(max_diff(out, expect), 1e-12);  // padded query rows too: both read the same keys
    if (c.below > 0) {  // the linear terms matter there: without them the rows differ
      auto none = o;
      none.linear_weight = torch::zeros({H}, torch::kDouble);
      EXPECT_GT(max_diff(out, hybrid_cache_chunked(in.q, in.k, in.v, f, 0.5, none, mask)), 1e-6);
    }
    auto weights = torch::randn_like(out);
    // (the graph is kept: both forms read the same features, exp(log φ) in plain space)
    auto grads = torch::autograd::grad({(out * weights).sum()}, {in.q, in.k, in.v, in.fq, in.fk}, {}, /*retain_graph=*/true);
    auto expect_grads = torch::autograd::grad({(expect * weights).sum()}, {in.q, in.k, in.v, in.fq, in.fk});
    for (size_t x = 0; x < grads.size(); ++x) EXPECT_LT(max_diff(grads[x], expect_grads[x]), 1e-10) << "input " << x;
  }
  // in float32 the two forms agree to rounding
  {
    auto in = inputs(B, H, T, D, F, 77);
    auto fl = [](const at::Tensor& x) { return x.detach().to(torch::kFloat); };
    auto o = hybrid(3, H);
    o.window_weight = o.window_weight.to(torch::kFloat);
    o.cache = 3;
    Features f{fl(in.fq), fl(in.fk), true};
    EXPECT_LT(max_diff(hybrid_cache_chunked(fl(in.q), fl(in.k), fl(in.v), f, 0.5, o, at::Tensor()),
                       hybrid_quadratic(fl(in.q), fl(in.k), fl(in.v), f, 0.5, o, at::Tensor())),
              1e-5);
  }
  // the kernel's whole-sequence forward is this form
  auto [att, ctx] = hybrid_kernel({{"window", 3}, {"cache", 2}, {"cache_every", 2}});
  auto in = inputs(2, 2, 16, 4, 4, 9);
  at::Tensor weights;
  auto quadratic = std::dynamic_pointer_cast<DistillableKernel>(att)->forward_quadratic(in.q, in.k, in.v, ctx, &weights);
  EXPECT_LT(max_diff(att->forward(in.q, in.k, in.v, ctx), quadratic), 1e-12);
}

// No cache and a selection at every position: nothing beyond the window is exact (hybrid attention). A cache with
// room for every key: softmax attention (σ cancels in the one denominator).
TEST(SparseCache, WithoutACacheItIsHybridAttentionAndWithRoomForEveryKeySoftmax) {
  const int64_t B = 2, H = 3, T = 17, D = 4, F = 6, w = 4;
  auto in = inputs(B, H, T, D, F, 3);
  Features f{in.fq, in.fk, true};
  auto o = hybrid(w, H);
  EXPECT_FALSE(sparse_cache_selection(in.k, in.v, f, o, at::Tensor()).any().item<bool>());
  auto none = hybrid_quadratic(in.q, in.k, in.v, f, 0.5, o, at::Tensor());
  o.cache = T;
  o.cache_every = 3;
  auto all = hybrid_quadratic(in.q, in.k, in.v, f, 0.5, o, at::Tensor());
  auto causal = torch::ones({T, T}, torch::kBool).tril();
  auto softmax = torch::softmax((torch::matmul(in.q, in.k.transpose(-1, -2)) * 0.5).masked_fill(causal.logical_not(), -INFINITY), -1);
  EXPECT_LT(max_diff(all, torch::matmul(softmax, in.v)), 1e-12);
  // and without a cache the linear part is not empty: the two limits differ
  EXPECT_GT(max_diff(none, all), 1e-3);
}

// Decoding one token at a time (hybrid_step with a cache) computes the quadratic form's rows, with a state whose
// bytes are set at the first token: the ring, λ cached keys and the linear state.
TEST(SparseCache, DecodingStepByStepComputesTheQuadraticFormWithAStateOfFixedSize) {
  const int64_t B = 2, H = 2, T = 24, D = 4, F = 5, w = 3;
  for (const int64_t size : {1, 4})
    for (const bool log_space : {false, true}) {
      SCOPED_TRACE("size " + std::to_string(size) + (log_space ? ", log space" : ""));
      auto in = inputs(B, H, T, D, F, 11 + static_cast<uint64_t>(size));
      torch::NoGradGuard no_grad;
      Features f{log_space ? in.fq.detach() : in.fq.detach().exp(), log_space ? in.fk.detach() : in.fk.detach().exp(), log_space};
      auto o = hybrid(w, H);
      o.cache = size;
      auto expect = hybrid_quadratic(in.q.detach(), in.k.detach(), in.v.detach(), f, 0.5, o, at::Tensor());
      HybridState state;
      int64_t first_bytes = 0;
      for (int64_t t = 0; t < T; ++t) {
        auto at = [&](const at::Tensor& x) { return x.detach().narrow(2, t, 1); };
        auto row = hybrid_step(at(in.q), at(in.k), at(in.v), Features{at(f.q), at(f.k), log_space}, 0.5, o, state);
        EXPECT_LT(max_diff(row, expect.narrow(2, t, 1)), 1e-12) << "token " << t;
        if (t == 0) first_bytes = hybrid_state_bytes(state);
        EXPECT_EQ(hybrid_state_bytes(state), first_bytes) << "token " << t;
        EXPECT_EQ(state.cached, std::min<int64_t>(size, std::max<int64_t>(0, t + 1 - w))) << "token " << t;
      }
    }
  // a state made for one cache size does not continue under another
  auto in = inputs(1, 2, 6, 4, 3, 1);
  torch::NoGradGuard no_grad;
  Features f{in.fq.detach(), in.fk.detach(), true};
  auto o = hybrid(2, 2);
  o.cache = 2;
  HybridState state;
  for (int64_t t = 0; t < 4; ++t)
    hybrid_step(in.q.detach().narrow(2, t, 1), in.k.detach().narrow(2, t, 1), in.v.detach().narrow(2, t, 1),
                Features{f.q.narrow(2, t, 1), f.k.narrow(2, t, 1), true}, 0.5, o, state);
  o.cache = 3;
  EXPECT_MIMIC_ERROR(hybrid_step(in.q.detach().narrow(2, 4, 1), in.k.detach().narrow(2, 4, 1), in.v.detach().narrow(2, 4, 1),
                                 Features{f.q.narrow(2, 4, 1), f.k.narrow(2, 4, 1), true}, 0.5, o, state),
                     "does not match the options' (3)");
  o.cache = 2;
  EXPECT_MIMIC_ERROR(hybrid_chunked(in.q.detach(), in.k.detach(), in.v.detach(), f, 0.5, o, at::Tensor()), "no sparse cache");
}

// In log space, a key far above the earlier ones (here 120 nats, beyond float32's range below 1) must not change
// the choices made before it arrived: the selection keeps a running constant for its state, as the step does, so in
// float32 both cache the same keys at every token, and the chunked form (running constants too) decodes the step's
// rows. (With one constant over the whole sequence, every key before the late one underflowed to 0 in the state,
// the predictions were 0, and the selection cached the largest values; the quadratic form, one constant per call
// for its linear terms, loses the earlier rows' window terms in float32 here, so it is no reference for this case.)
TEST(SparseCache, AKeyFarAboveTheEarlierOnesLeavesTheSelectionAsDecodingMakesIt) {
  const int64_t H = 2, T = 24, D = 4, F = 5, w = 3, late = 17;
  auto in = inputs(1, H, T, D, F, 21);
  torch::NoGradGuard no_grad;
  auto fl = [](const at::Tensor& x) { return x.detach().to(torch::kFloat); };
  auto q = fl(in.q), k = fl(in.k), v = fl(in.v), fq = fl(in.fq), fk = fl(in.fk);
  fk.narrow(2, late, 1).add_(120.0);
  Features f{fq, fk, true};
  auto o = hybrid(w, H);
  o.window_weight = o.window_weight.to(torch::kFloat);
  o.cache = 3;
  auto sel = sparse_cache_selection(k, v, f, o, at::Tensor());
  auto expect = hybrid_cache_chunked(q, k, v, f, 0.5, o, at::Tensor());
  HybridState state;
  for (int64_t t = 0; t < T; ++t) {
    auto at = [&](const at::Tensor& x) { return x.narrow(2, t, 1); };
    auto row = hybrid_step(at(q), at(k), at(v), Features{at(fq), at(fk), true}, 0.5, o, state);
    for (int64_t h = 0; h < H; ++h) {
      std::vector<int64_t> stepped, selected;
      for (int64_t c = 0; c < state.cached; ++c) stepped.push_back(state.cpos[0][h][c].item<int64_t>());
      std::sort(stepped.begin(), stepped.end());
      for (int64_t j = 0; j <= t - w; ++j)
        if (sel[0][h][t][j].item<bool>()) selected.push_back(j);
      EXPECT_EQ(stepped, selected) << "token " << t << ", head " << h;
    }
    EXPECT_LT(max_diff(row, expect.narrow(2, t, 1)), 1e-4) << "token " << t;
  }
}

// A state of keys only (opts.key_features: the features of a key computed again when it leaves the window or is
// scored for the cache) decodes the rows a state with the key features stored decodes — after a prompt run by the
// chunked form too — in (w + λ)·F fewer numbers per head; a state continues only under the options that made it.
TEST(SparseCache, AStateOfKeysOnlyDecodesTheSameRowsAsOneThatStoresTheirFeatures) {
  const int64_t B = 2, H = 2, T = 20, D = 4, F = 5, w = 3;
  for (const int64_t size : {0, 3})
    for (const bool log_space : {false, true}) {
      SCOPED_TRACE("size " + std::to_string(size) + (log_space ? ", log space" : ""));
      auto in = inputs(B, H, T, D, F, 31 + static_cast<uint64_t>(size));
      torch::NoGradGuard no_grad;
      auto W = torch::randn({D, F}, torch::kDouble);
      auto phi = [W, log_space](const at::Tensor& k) { return log_space ? torch::tanh(k.matmul(W)) : torch::tanh(k.matmul(W)).exp(); };
      auto q = in.q.detach(), k = in.k.detach(), v = in.v.detach();
      Features f{log_space ? in.fq.detach() : in.fq.detach().exp(), phi(k), log_space};
      auto stored = hybrid(w, H);
      stored.cache = size;
      auto keys_only = stored;
      keys_only.key_features = phi;
      auto expect = hybrid_quadratic(q, k, v, f, 0.5, stored, at::Tensor());
      HybridState a, b;
      const int64_t prompt = size == 0 ? 5 : 0;  // the chunked form has no cache: with one, every token is a step
      if (prompt > 0) {
        auto sl = [&](const at::Tensor& x) { return x.narrow(2, 0, prompt); };
        auto ra = hybrid_chunked(sl(q), sl(k), sl(v), Features{sl(f.q), sl(f.k), log_space}, 0.5, stored, at::Tensor(), &a);
        auto rb = hybrid_chunked(sl(q), sl(k), sl(v), Features{sl(f.q), sl(f.k), log_space}, 0.5, keys_only, at::Tensor(), &b);
        EXPECT_LT(max_diff(rb, ra), 1e-12);
        EXPECT_FALSE(b.fk.defined());
      }
      for (int64_t t = prompt; t < T; ++t) {
        auto at = [&](const at::Tensor& x) { return x.narrow(2, t, 1); };
        auto ra = hybrid_step(at(q), at(k), at(v), Features{at(f.q), at(f.k), log_space}, 0.5, stored, a);
        auto rb = hybrid_step(at(q), at(k), at(v), Features{at(f.q), at(f.k), log_space}, 0.5, keys_only, b);
        EXPECT_LT(max_diff(rb, ra), 1e-12) << "token " << t;
        EXPECT_LT(max_diff(rb, expect.narrow(2, t, 1)), 1e-12) << "token " << t;
        EXPECT_EQ(hybrid_state_bytes(a) - hybrid_state_bytes(b), B * H * (w + size) * F * 8) << "token " << t;
      }
      // a copy of a state of keys only is one too
      auto c = hybrid_state_copy(b);
      EXPECT_FALSE(c.fk.defined() || c.cfk.defined());
      EXPECT_MIMIC_ERROR(hybrid_step(q.narrow(2, 0, 1), k.narrow(2, 0, 1), v.narrow(2, 0, 1),
                                     Features{f.q.narrow(2, 0, 1), f.k.narrow(2, 0, 1), log_space}, 0.5, stored, b),
                         "the state keeps keys only, and these options have no key_features");
      EXPECT_MIMIC_ERROR(hybrid_step(q.narrow(2, 0, 1), k.narrow(2, 0, 1), v.narrow(2, 0, 1),
                                     Features{f.q.narrow(2, 0, 1), f.k.narrow(2, 0, 1), log_space}, 0.5, keys_only, a),
                         "the state keeps key features, and these options compute them");
    }
}

// What the selection keeps: the one key whose value the state cannot return. All keys share one feature vector,
// so the state predicts the mean of the values written; every value is 0 but key 3's. With room for one key, key
// 3 stays cached for every later query, and the others go into the state.
TEST(SparseCache, TheCacheKeepsTheKeyTheStateWouldReturnWorst) {
  const int64_t T = 12, w = 2;
  auto dbl = torch::TensorOptions().dtype(torch::kDouble);
  auto k = torch::randn({1, 1, T, 4}, dbl), v = torch::zeros({1, 1, T, 4}, dbl);
  v[0][0][3].fill_(5.0);
  v[0][0][5].fill_(0.1);
  Features f{torch::ones({1, 1, T, 3}, dbl), torch::ones({1, 1, T, 3}, dbl), false};
  auto o = hybrid(w, 1);
  o.cache = 1;
  auto sel = sparse_cache_selection(k, v, f, o, at::Tensor());
  for (int64_t i = 3 + w; i < T; ++i) {
    EXPECT_TRUE(sel[0][0][i][3].item<bool>()) << "query " << i;
    EXPECT_EQ(sel[0][0][i].sum().item<int64_t>(), 1) << "query " << i;
  }
  // before key 3 left the window every candidate's error was 0 (values 0, predicted 0): of equal errors the older
  // key stays, so the cache held key 0
  EXPECT_TRUE(sel[0][0][w + 1][0].item<bool>());
}

// The hybrid kind with `cache`: its whole-sequence forward (the quadratic form) and its decoding through a
// KernelCache (a prompt, then one token at a time, all through the recurrent step) compute the same rows, and the
// decoding state's bytes do not grow with the context.
// Its whole-sequence forward runs whichever form keeps less per query (hybrid_attention): at 16 tokens, d = 4 and F = 8,
// the chunked form with a cache of 2 ((8 + 2·2)·4 = 48 numbers a query against the quadratic form's ~6·16) and the
// quadratic form with a cache of 12 (128).
TEST(SparseCache, AHybridKernelWithACacheDecodesWhatItsWholeSequenceForwardComputes) {
  for (const int64_t lambda : {2, 12}) {
    SCOPED_TRACE(lambda);
    auto [att, ctx] = hybrid_kernel({{"window", 3}, {"cache", lambda}});
    auto in = inputs(2, 2, 16, 4, 4, 9);
    torch::NoGradGuard no_grad;
    auto whole = att->forward(in.q.detach(), in.k.detach(), in.v.detach(), ctx);
    auto cache = att->new_cache();
    auto sl = [](const at::Tensor& x, int64_t a, int64_t n) { return x.detach().narrow(2, a, n); };
    std::vector<at::Tensor> outs{att->forward_cached(sl(in.q, 0, 5), sl(in.k, 0, 5), sl(in.v, 0, 5), ctx, *cache)};
    const int64_t bytes = cache->bytes();
    for (int64_t i = 5; i < 16; ++i) {
      outs.push_back(att->forward_cached(sl(in.q, i, 1), sl(in.k, i, 1), sl(in.v, i, 1), ctx, *cache));
      EXPECT_EQ(cache->bytes(), bytes) << "token " << i;
    }
    EXPECT_LT(max_diff(torch::cat(outs, 2), whole), 1e-10);
    // and the cache changes the function: the same kernel (the same seed, the same map) without it computes other rows
    auto plain = hybrid_kernel({{"window", 3}}).att;
    EXPECT_GT(max_diff(plain->forward(in.q.detach(), in.k.detach(), in.v.detach(), ctx), whole), 1e-6);
  }
}

// The whole-sequence forward of an empty sequence is empty whichever form the size chooses (the quadratic one's
// reductions over no key threw once it was chosen for short sequences: the review of 2026-11-30).
TEST(SparseCache, AnEmptySequenceHasAnEmptyOutputWithACache) {
  auto in = inputs(1, 2, 0, 4, 8, 3);
  auto o = hybrid(3, 2);
  for (const int64_t lambda : {2, 64}) {
    o.cache = lambda;
    const auto out = hybrid_attention(in.q, in.k, in.v, Features{in.fq, in.fk, true}, 0.5, o, at::Tensor());
    EXPECT_EQ(out.sizes(), in.v.sizes()) << lambda;
  }
}

// `cache` and `cache_every` are options of the hybrid kind, saved only when there is a cache (so that the options of
// models converted before keep their digest); out-of-range values are refused by name.
TEST(SparseCache, TheCacheOptionsRoundTripAndBadValuesAreRefused) {
  auto none = make_attention_kernel("hybrid", {{"window", 3}}, 2, 4);
  EXPECT_FALSE(none->config_json().contains("cache"));
  EXPECT_FALSE(none->config_json().contains("cache_every"));
  auto some = make_attention_kernel("hybrid", {{"window", 3}, {"cache", 8}, {"cache_every", 4}}, 2, 4);
  EXPECT_EQ(some->config_json().at("cache"), 8);
  EXPECT_EQ(some->config_json().at("cache_every"), 4);
  EXPECT_EQ(canonical_options("hybrid", some->config_json(), 2, 4), some->config_json());
  EXPECT_MIMIC_ERROR(make_attention_kernel("hybrid", {{"cache", -1}}, 2, 4), "option 'cache' must be an integer in [0, 65536]");
  EXPECT_MIMIC_ERROR(make_attention_kernel("hybrid", {{"cache", 2}, {"cache_every", 0}}, 2, 4), "'cache_every' must be an integer in [1, 65536]");
  EXPECT_MIMIC_ERROR(make_attention_kernel("hybrid", {{"cache_every", 4}}, 2, 4), "'cache_every' sets the sparse cache's selection interval");
  EXPECT_EQ(parse_kind_spec("hybrid:window=64,cache=64").options.at("cache"), 64);
}

TEST(SparseCache, BadOptionsAreOneLineErrors) {
  auto in = inputs(1, 2, 5, 4, 3, 1);
  Features f{in.fq, in.fk, true};
  auto o = hybrid(2, 2);
  o.cache = -1;
  EXPECT_MIMIC_ERROR(sparse_cache_selection(in.k, in.v, f, o, at::Tensor()), "the size must be >= 0");
  o.cache = 2;
  o.cache_every = 0;
  EXPECT_MIMIC_ERROR(sparse_cache_selection(in.k, in.v, f, o, at::Tensor()), "selection interval >= 1");
  o.cache_every = 1;
  o.causal = false;
  EXPECT_MIMIC_ERROR(sparse_cache_selection(in.k, in.v, f, o, at::Tensor()), "causal attention only");
  o.causal = true;
  EXPECT_MIMIC_ERROR(sparse_cache_selection(in.k, in.v.narrow(2, 0, 4), f, o, at::Tensor()), "[B, H, T, ·] alike");
}

namespace {
// Three hybrid kernels of one map (the same parameters): the cache in every head, in none, and in `cache_heads`.
struct ThreeHybrids {
  AttentionKernel all, none, some;
};
ThreeHybrids three_hybrids(const std::vector<int64_t>& cache_heads, int64_t n_head) {
  const nlohmann::json base = {{"feature_map", "hedgehog"}, {"window", 3}};
  auto with = [&](nlohmann::json extra) {
    auto o = base;
    o.update(extra);
    auto k = make_attention_kernel("hybrid", o, n_head, 4);
    k->to(torch::kDouble);
    return k;
  };
  ThreeHybrids t{with({{"cache", 2}}), with(nlohmann::json::object()), with({{"cache", 2}, {"cache_heads", cache_heads}})};
  torch::NoGradGuard no_grad;
  for (auto* k : {&t.none, &t.some}) {
    auto to = (*k)->named_parameters();
    for (const auto& p : t.all->named_parameters()) to[p.key()].copy_(p.value());
  }
  return t;
}
at::Tensor rows_of(const at::Tensor& x, const std::vector<int64_t>& heads) {
  return x.index_select(1, torch::tensor(heads, torch::kLong));
}
}  // namespace

// cache_heads (convert --cache-heads): the listed heads run the hybrid with the cache, the others the hybrid
// without it, one map for all — the whole-sequence forward, its gradients and the quadratic form's weights are,
// head by head, those of the kernel with the cache everywhere or of the one with none.
TEST(SparseCache, CacheHeadsRunTheCacheInTheirHeadsAndThePlainHybridInTheOthersForwardAndBackward) {
  const std::vector<int64_t> cached{1, 3}, plain{0, 2};
  auto t = three_hybrids(cached, 4);
  auto in = inputs(2, 4, 14, 4, 4, 21);
  AttentionContext ctx;
  ctx.causal = true;
  ctx.scale = 0.5;
  auto upstream = torch::randn({2, 4, 14, 4}, torch::kDouble);
  auto run = [&](const AttentionKernel& k) {
    for (auto* x : {&in.q, &in.k, &in.v}) x->mutable_grad() = at::Tensor();
    auto out = k->forward(in.q, in.k, in.v, ctx);
    (out * upstream).sum().backward();
    return std::vector<at::Tensor>{out.detach(), in.q.grad().clone(), in.k.grad().clone(), in.v.grad().clone()};
  };
  const auto all = run(t.all), none = run(t.none), some = run(t.some);
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_LT(max_diff(rows_of(some[i], cached), rows_of(all[i], cached)), 1e-10) << "tensor " << i;
    EXPECT_LT(max_diff(rows_of(some[i], plain), rows_of(none[i], plain)), 1e-10) << "tensor " << i;
  }
  // the two kernels differ in those heads (the test would pass on either alone otherwise)
  EXPECT_GT(max_diff(rows_of(all[0], cached), rows_of(none[0], cached)), 1e-6);
  // the learned window weight's gradient, per head
  auto window_grad = [&](const AttentionKernel& k) {
    k->zero_grad();
    (k->forward(in.q, in.k, in.v, ctx) * upstream).sum().backward();
    return k->named_parameters()["window_logit"].grad().clone();
  };
  const auto ga = window_grad(t.all), gn = window_grad(t.none), gs = window_grad(t.some);
  EXPECT_LT(max_diff(gs.index_select(0, torch::tensor(cached)), ga.index_select(0, torch::tensor(cached))), 1e-10);
  EXPECT_LT(max_diff(gs.index_select(0, torch::tensor(plain)), gn.index_select(0, torch::tensor(plain))), 1e-10);
  // distillation's weights, head by head
  torch::NoGradGuard no_grad;
  auto weights = [&](const AttentionKernel& k) {
    at::Tensor w, lw;
    as_distillable(k, "test")->forward_quadratic(in.q, in.k, in.v, ctx, &w, &lw);
    return std::pair{w, lw};
  };
  const auto [wa, la] = weights(t.all);
  const auto [wn, ln] = weights(t.none);
  const auto [ws, ls] = weights(t.some);
  EXPECT_LT(max_diff(rows_of(ws, cached), rows_of(wa, cached)), 1e-10);
  EXPECT_LT(max_diff(rows_of(ws, plain), rows_of(wn, plain)), 1e-10);
  EXPECT_LT(max_diff(rows_of(ls, cached), rows_of(la, cached)), 1e-10);
  EXPECT_LT(max_diff(rows_of(ls, plain), rows_of(ln, plain)), 1e-10);
}

// Decoding with cache heads: a prompt, then token by token, gives the whole-sequence forward's rows, and the state
// is the cache heads' states and the others': half the heads each here, so half of each kernel's bytes, flat in
// the context.
TEST(SparseCache, CacheHeadsDecodeTheirForwardWithTheStateOfEachHeadsGroup) {
  auto t = three_hybrids({0, 2}, 4);
  auto in = inputs(1, 4, 16, 4, 4, 22);
  AttentionContext ctx;
  ctx.causal = true;
  ctx.scale = 0.5;
  torch::NoGradGuard no_grad;
  auto sl = [](const at::Tensor& x, int64_t a, int64_t n) { return x.detach().narrow(2, a, n); };
  auto decode = [&](const AttentionKernel& k, std::vector<int64_t>* bytes) {
    auto cache = k->new_cache();
    std::vector<at::Tensor> outs{k->forward_cached(sl(in.q, 0, 5), sl(in.k, 0, 5), sl(in.v, 0, 5), ctx, *cache)};
    for (int64_t i = 5; i < 16; ++i) {
      outs.push_back(k->forward_cached(sl(in.q, i, 1), sl(in.k, i, 1), sl(in.v, i, 1), ctx, *cache));
      bytes->push_back(cache->bytes());
    }
    return torch::cat(outs, 2);
  };
  std::vector<int64_t> ba, bn, bs;
  decode(t.all, &ba);
  decode(t.none, &bn);
  auto out = decode(t.some, &bs);
  EXPECT_LT(max_diff(out, t.some->forward(in.q.detach(), in.k.detach(), in.v.detach(), ctx)), 1e-10);
  for (size_t i = 0; i < bs.size(); ++i) {
    EXPECT_EQ(bs[i], bs.front()) << "token " << i + 5;
    EXPECT_EQ(2 * bs[i], ba[i] + bn[i]) << "token " << i + 5;
  }
}

// cache_heads is saved only when it is not every head (every head: the cache as before, same digest); it needs a
// cache, and heads sorted, distinct and in range.
TEST(SparseCache, CacheHeadsRoundTripAndBadListsAreRefused) {
  auto some = make_attention_kernel("hybrid", {{"window", 3}, {"cache", 8}, {"cache_heads", {1}}}, 2, 4);
  EXPECT_EQ(some->config_json().at("cache_heads"), nlohmann::json::array({1}));
  EXPECT_EQ(canonical_options("hybrid", some->config_json(), 2, 4), some->config_json());
  auto every = make_attention_kernel("hybrid", {{"window", 3}, {"cache", 8}, {"cache_heads", {0, 1}}}, 2, 4);
  EXPECT_EQ(every->config_json(), make_attention_kernel("hybrid", {{"window", 3}, {"cache", 8}}, 2, 4)->config_json());
  EXPECT_MIMIC_ERROR(make_attention_kernel("hybrid", {{"window", 3}, {"cache_heads", {1}}}, 2, 4), "'cache_heads' names the heads");
  EXPECT_MIMIC_ERROR(make_attention_kernel("hybrid", {{"cache", 8}, {"cache_heads", {2}}}, 2, 4), "head indices in [0, 2)");
  EXPECT_MIMIC_ERROR(make_attention_kernel("hybrid", {{"cache", 8}, {"cache_heads", {1, 0}}}, 2, 4), "sorted and distinct");
  EXPECT_MIMIC_ERROR(make_attention_kernel("hybrid", {{"cache", 8}, {"cache_heads", nlohmann::json::array()}}, 2, 4), "non-empty list");
  EXPECT_MIMIC_ERROR(make_attention_kernel("hybrid", {{"cache", 8}, {"cache_heads", 1}}, 2, 4), "non-empty list");
}
