// The sparse cache (attention/sparse_cache.h, LoLA): its forms against a per-token reference written apart from
// them, its two limits (no cache: hybrid; room for every key: softmax), and what its selection keeps.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <vector>

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
TEST(SparseCache, AHybridKernelWithACacheDecodesWhatItsWholeSequenceForwardComputes) {
  torch::manual_seed(5);
  auto att = make_attention_kernel("hybrid", {{"feature_map", "hedgehog"}, {"window", 3}, {"cache", 2}}, 2, 4);
  att->to(torch::kDouble);
  auto in = inputs(2, 2, 16, 4, 4, 9);
  AttentionContext ctx;
  ctx.causal = true;
  ctx.scale = 0.5;
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
  torch::manual_seed(5);
  auto plain = make_attention_kernel("hybrid", {{"feature_map", "hedgehog"}, {"window", 3}}, 2, 4);
  plain->to(torch::kDouble);
  EXPECT_GT(max_diff(plain->forward(in.q.detach(), in.k.detach(), in.v.detach(), ctx), whole), 1e-6);
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
