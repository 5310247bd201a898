// The attention engine: every fast form of linear attention against the quadratic reference (forward and
// gradients), the recurrence against the chunked form, the feature-map zoo, the SLA head gates and the
// registry of attention kinds.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "mimic/attention/feature_map.h"
#include "mimic/attention/linear_attention.h"
#include "mimic/attention/kinds.h"
#include "mimic/attention/linear_kernel.h"
#include "mimic/core/error.h"
#include "test_util.h"

using namespace mimic::attention;

namespace {

constexpr int64_t B = 2, H = 3, F = 6, D = 5;

double max_diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

torch::TensorOptions dbl() { return torch::dtype(torch::kDouble); }

struct Inputs {
  at::Tensor q, k, v;       // features (or log features) and values, requires_grad
  at::Tensor S0, z0, m0;    // an initial state, requires_grad on S0 and z0
  at::Tensor mask;          // [B, T]
  at::Tensor probe;         // fixed random cotangent for gradients
};

// Random inputs: positive features (non-log) or log-features with spread `spread`.
Inputs make_inputs(int64_t t, bool log_space, double spread, uint64_t seed, bool padded, torch::Dtype dtype = torch::kDouble) {
  torch::manual_seed(seed);
  auto o = torch::dtype(dtype);
  Inputs in;
  if (log_space) {
    in.q = (torch::randn({B, H, t, F}, o) * spread).requires_grad_();
    in.k = (torch::randn({B, H, t, F}, o) * spread).requires_grad_();
  } else {
    in.q = (torch::rand({B, H, t, F}, o) + 0.05).requires_grad_();
    in.k = (torch::rand({B, H, t, F}, o) + 0.05).requires_grad_();
  }
  in.v = torch::randn({B, H, t, D}, o).requires_grad_();
  in.S0 = torch::randn({B, H, F, D}, o).requires_grad_();
  in.z0 = (torch::rand({B, H, F}, o) + 0.5).requires_grad_();
  in.m0 = torch::randn({B, H}, o) * (log_space ? spread : 0.0);
  in.mask = torch::ones({B, t}, torch::kBool);
  if (padded && t >= 3) {  // the second sequence has a gap in the middle and padding at the end
    in.mask.index_put_({1, t / 2}, false);
    in.mask.index_put_({1, t - 1}, false);
  }
  in.probe = torch::randn({B, H, t, D}, o);
  return in;
}

LinearState initial_state(const Inputs& in) {
  LinearState s;
  s.S = in.S0;
  s.z = in.z0;
  s.m = in.m0;
  return s;
}

std::vector<at::Tensor> grads(const at::Tensor& out, const at::Tensor& probe, const std::vector<at::Tensor>& wrt) {
  return torch::autograd::grad({(out * probe).sum()}, wrt, {}, /*retain_graph=*/true, false, /*allow_unused=*/true);
}

void expect_close(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b, double tol, const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].defined(), b[i].defined()) << what << " gradient " << i;
    if (!a[i].defined()) continue;
    EXPECT_LT(max_diff(a[i], b[i]), tol * (1 + a[i].abs().max().item<double>())) << what << " gradient " << i;
  }
}

LinearOptions options(bool causal, Norm norm, int64_t chunk, bool decay) {
  LinearOptions o;
  o.causal = causal;
  o.norm = norm;
  o.chunk = chunk;
  o.eps = 1e-9;
  if (decay) o.decay = torch::tensor({0.9, 0.6, 1.0}, dbl());
  return o;
}

const std::vector<Norm> kNorms = {Norm::Row, Norm::None, Norm::L2, Norm::RMS};

}  // namespace

// The chunked form equals the quadratic reference, forward and gradients (features, values, initial state),
// for every normalisation, with and without decay and padding, over T = 1, T < C, T = k·C and T = k·C + r.
TEST(LinearAttention, ChunkedMatchesQuadraticForwardAndGradients) {
  int cases = 0;
  for (int64_t t : {1, 3, 8, 13}) {
    for (bool log_space : {false, true}) {
      for (Norm norm : kNorms) {
        for (bool decay : {false, true}) {
          for (bool with_state : {false, true}) {
            SCOPED_TRACE("T=" + std::to_string(t) + " log=" + std::to_string(log_space) + " norm=" + norm_name(norm) +
                         " decay=" + std::to_string(decay) + " state=" + std::to_string(with_state));
            auto in = make_inputs(t, log_space, 2.0, 100 + t, /*padded=*/true);
            auto o = options(true, norm, 4, decay);
            Features f{in.q, in.k, log_space};
            auto s_ref = initial_state(in), s_fast = initial_state(in);
            auto ref = linear_quadratic(f, in.v, o, in.mask, with_state ? &s_ref : nullptr);
            auto fast = linear_chunked(f, in.v, o, in.mask, with_state ? &s_fast : nullptr);
            ASSERT_EQ(fast.sizes(), in.v.sizes());
            EXPECT_LT(max_diff(ref, fast), 1e-10 * (1 + ref.abs().max().item<double>()));
            std::vector<at::Tensor> wrt = {in.q, in.k, in.v};
            if (with_state) wrt.insert(wrt.end(), {in.S0, in.z0});
            expect_close(grads(ref, in.probe, wrt), grads(fast, in.probe, wrt), 1e-9, "chunked");
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 4 * 2 * 4 * 2 * 2);
}

namespace {
// The definition, one query at a time, in double, written apart from the forms — none of their helpers (no
// stabilisation, no causal or decay matrices, no shared divisor or ε scaling): for query i, the weight of key j is
// a_ij = γ^(i−j) φ(q_i)·φ(k_j) over the keys it sees (j ≤ i when causal; padded keys none), the incoming state adds
// γ^(i+1) e^(m0) φ(q_i)·(S0, z0); out_i = Σ a_ij v_j divided by Σ a_ij + ε (row), ‖num‖ + ε (L2), rms(num) + ε
// (RMS), or by nothing (none).
at::Tensor by_definition(const Inputs& in, bool log_space, bool causal, Norm norm, double eps, const at::Tensor& decay, bool with_state) {
  const int64_t t = in.q.size(2);
  const auto phi_q = log_space ? in.q.exp() : in.q, phi_k = log_space ? in.k.exp() : in.k;
  std::vector<at::Tensor> rows;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < t; ++i) {
        const double gamma = decay.defined() ? decay[h].item<double>() : 1.0;
        at::Tensor num = torch::zeros({D}, dbl()), den = torch::zeros({}, dbl());
        for (int64_t j = 0; j < t; ++j) {
          if ((causal && j > i) || !in.mask[b][j].item<bool>()) continue;
          const auto a = (phi_q[b][h][i] * phi_k[b][h][j]).sum() * std::pow(gamma, static_cast<double>(i - j));
          num = num + a * in.v[b][h][j];
          den = den + a;
        }
        if (with_state) {
          const auto g = std::pow(gamma, static_cast<double>(i + 1)) * std::exp(in.m0[b][h].item<double>());
          for (int64_t f = 0; f < F; ++f) {
            num = num + g * phi_q[b][h][i][f] * in.S0[b][h][f];
            den = den + g * phi_q[b][h][i][f] * in.z0[b][h][f];
          }
        }
        switch (norm) {
          case Norm::Row: rows.push_back(num / (den + eps)); break;
          case Norm::L2: rows.push_back(num / (num.square().sum().sqrt() + eps)); break;
          case Norm::RMS: rows.push_back(num / ((num.square().sum() / static_cast<double>(D)).sqrt() + eps)); break;
          case Norm::None: rows.push_back(num); break;
        }
      }
  return torch::stack(rows).view({B, H, t, D});
}
}  // namespace

// Issue 38: the quadratic "reference" shares its helpers with the fast forms, so a shared bug would pass their
// comparisons. Every form — quadratic, chunked, bidirectional — equals the definition written out query by query
// (by_definition), forward and gradients (features, values, the incoming state), for every normalisation, decay,
// padding, causal and not, linear and log-space features, T from 1 to past a chunk.
TEST(LinearAttention, EveryFormEqualsTheDefinitionWrittenOneQueryAtATime) {
  int cases = 0;
  for (int64_t t : {1, 5, 9}) {
    for (bool log_space : {false, true}) {
      for (Norm norm : kNorms) {
        for (bool causal : {true, false}) {
          for (bool decay : {false, true}) {
            for (bool with_state : {false, true}) {
              if (!causal && (decay || with_state)) continue;  // decay and state are causal-only
              SCOPED_TRACE("T=" + std::to_string(t) + " log=" + std::to_string(log_space) + " norm=" + norm_name(norm) + " causal=" +
                           std::to_string(causal) + " decay=" + std::to_string(decay) + " state=" + std::to_string(with_state));
              auto in = make_inputs(t, log_space, 1.5, 300 + t, /*padded=*/true);
              auto o = options(causal, norm, 4, decay);
              Features f{in.q, in.k, log_space};
              const auto want = by_definition(in, log_space, causal, norm, o.eps, o.decay, with_state);
              std::vector<at::Tensor> wrt = {in.q, in.k, in.v};
              if (with_state) wrt.insert(wrt.end(), {in.S0, in.z0});
              // a gradient that does not flow (z0 under norm none) is zero, whichever side leaves it undefined
              auto dense = [&](std::vector<at::Tensor> g) {
                for (size_t i = 0; i < g.size(); ++i)
                  if (!g[i].defined()) g[i] = torch::zeros_like(wrt[i]);
                return g;
              };
              const auto want_grads = dense(grads(want, in.probe, wrt));
              auto check = [&](const at::Tensor& got, const char* form) {
                EXPECT_LT(max_diff(want, got), 1e-10 * (1 + want.abs().max().item<double>())) << form;
                expect_close(want_grads, dense(grads(got, in.probe, wrt)), 1e-9, form);
              };
              auto s_quad = initial_state(in), s_chunk = initial_state(in);
              check(linear_quadratic(f, in.v, o, in.mask, with_state ? &s_quad : nullptr), "quadratic");
              if (causal) check(linear_chunked(f, in.v, o, in.mask, with_state ? &s_chunk : nullptr), "chunked");
              else check(linear_bidirectional(f, in.v, o, in.mask), "bidirectional");
              ++cases;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 3 * 2 * 4 * 5);
}

TEST(LinearAttention, ChunkSizeDoesNotChangeTheResult) {
  auto in = make_inputs(37, true, 3.0, 7, false);
  Features f{in.q, in.k, true};
  auto base = linear_chunked(f, in.v, options(true, Norm::Row, 37, true), in.mask);
  for (int64_t c : {1, 2, 5, 16, 64}) EXPECT_LT(max_diff(base, linear_chunked(f, in.v, options(true, Norm::Row, c, true), in.mask)), 1e-12) << c;
}

TEST(LinearAttention, BidirectionalMatchesQuadraticForwardAndGradients) {
  for (int64_t t : {1, 4, 11}) {
    for (bool log_space : {false, true}) {
      for (Norm norm : kNorms) {
        SCOPED_TRACE("T=" + std::to_string(t) + " log=" + std::to_string(log_space) + " norm=" + norm_name(norm));
        auto in = make_inputs(t, log_space, 2.0, 200 + t, true);
        auto o = options(false, norm, 4, false);
        Features f{in.q, in.k, log_space};
        auto ref = linear_quadratic(f, in.v, o, in.mask);
        auto fast = linear_bidirectional(f, in.v, o, in.mask);
        EXPECT_LT(max_diff(ref, fast), 1e-10 * (1 + ref.abs().max().item<double>()));
        expect_close(grads(ref, in.probe, {in.q, in.k, in.v}), grads(fast, in.probe, {in.q, in.k, in.v}), 1e-9, "bidirectional");
      }
    }
  }
}

// Padded keys contribute nothing: the padded sequence's real queries see exactly what the unpadded
// sequence of its real tokens sees.
TEST(LinearAttention, PaddedKeysContributeNothing) {
  for (bool causal : {true, false}) {
    auto in = make_inputs(9, true, 2.0, 3, false);
    auto mask = torch::ones({B, 9}, torch::kBool);
    mask.index_put_({1, 4}, false);
    Features f{in.q, in.k, true};
    auto o = options(causal, Norm::Row, 4, false);
    auto padded = linear_attention(f, in.v, o, mask);
    auto keep = torch::tensor({0, 1, 2, 3, 5, 6, 7, 8}, torch::kLong);
    Features g{in.q.index_select(2, keep).narrow(0, 1, 1), in.k.index_select(2, keep).narrow(0, 1, 1), true};
    auto alone = linear_attention(g, in.v.index_select(2, keep).narrow(0, 1, 1), o, at::Tensor());
    EXPECT_LT(max_diff(padded.narrow(0, 1, 1).index_select(2, keep), alone), 1e-12) << "causal=" << causal;
  }
}

TEST(LinearAttention, WeightsReproduceTheOutput) {
  for (Norm norm : kNorms) {
    for (bool causal : {true, false}) {
      auto in = make_inputs(7, true, 2.0, 5, true);
      at::Tensor w;
      auto o = options(causal, norm, 4, causal);
      auto out = linear_quadratic(Features{in.q, in.k, true}, in.v, o, in.mask, nullptr, &w);
      ASSERT_EQ(w.sizes(), (std::vector<int64_t>{B, H, 7, 7}));
      EXPECT_LT(max_diff(torch::matmul(w, in.v), out), 1e-10) << norm_name(norm);
      if (norm == Norm::Row) EXPECT_LT(max_diff(w.sum(-1), torch::ones({B, H, 7}, dbl())), 1e-6);
      if (causal) EXPECT_EQ(w.triu(1).abs().max().item<double>(), 0.0);
      EXPECT_EQ(w.select(0, 1).select(-1, 3).abs().max().item<double>(), 0.0);  // a padded key gets no weight
    }
  }
}

// softmax_weights (scale and causal mask inside one baddbmm) against the plain form, forward and gradients: causal
// and bidirectional, queries that are the last t of s positions (a decoding step's and a prefill's shapes), with
// and without key padding (one that leaves a causal row with no visible key: its weights uniform, its gradient
// zero; and a mask of all ones, which is skipped), more queries than keys (rows with no visible key again), in
// float and double.
TEST(SoftmaxAttention, TheOneGemmWeightsEqualThePlainFormForwardAndGradients) {
  for (auto dtype : {torch::kFloat, torch::kDouble})
    for (bool causal : {true, false})
      for (auto [t, s] : std::vector<std::pair<int64_t, int64_t>>{{7, 7}, {1, 7}, {3, 7}, {33, 33}, {5, 3}})
        for (int pad : {0, 1, 2}) {  // none, two keys padded, a mask of all ones
          if (!causal && t != s) continue;
          torch::manual_seed(t * 31 + s + pad);
          auto opt = torch::dtype(dtype).requires_grad(true);
          auto q = torch::randn({2, 3, t, 5}, opt), k = torch::randn({2, 3, s, 5}, opt);
          AttentionContext ctx;
          ctx.causal = causal;
          ctx.scale = 1 / std::sqrt(5.0);
          if (pad) ctx.key_padding_mask = torch::ones({2, s}, torch::kLong);
          if (pad == 1) {
            ctx.key_padding_mask[1][s - 1] = 0;  // the second row's last key
            if (s > 2) ctx.key_padding_mask[1][0] = 0;
          }
          auto fast = softmax_weights(q, k, ctx), ref = softmax_weights_reference(q, k, ctx);
          const std::string what = std::string(dtype == torch::kFloat ? "float" : "double") + (causal ? " causal" : " bidirectional") +
                                   " t=" + std::to_string(t) + " s=" + std::to_string(s) + (pad == 1 ? " padded" : pad == 2 ? " all-ones mask" : "");
          ASSERT_EQ(fast.sizes(), ref.sizes()) << what;
          EXPECT_LT(max_diff(fast, ref), dtype == torch::kFloat ? 1e-6 : 1e-14) << what;
          auto probe = torch::randn(ref.sizes(), torch::dtype(dtype));
          expect_close(grads(fast, probe, {q, k}), grads(ref, probe, {q, k}), dtype == torch::kFloat ? 1e-5 : 1e-12, what);
        }
}

// With φ = exp of the logits (exp_t, t = 1) the quadratic form is exactly softmax attention.
TEST(LinearAttention, ExpOfLogitsIsSoftmax) {
  torch::manual_seed(11);
  auto q = torch::randn({1, 2, 6, 4}, dbl()), k = torch::randn({1, 2, 6, 4}, dbl()), v = torch::randn({1, 2, 6, 4}, dbl());
  // log φ(q_i)_j = q_i·k_j and log φ(k_j) = one-hot j reproduces exp(q·k) exactly with F = T.
  auto logits = torch::matmul(q, k.transpose(-1, -2));
  auto onehot_log = torch::full({6, 6}, -1e4, dbl()).fill_diagonal_(0).expand({1, 2, 6, 6});
  LinearOptions o;
  o.eps = 0;
  at::Tensor w;
  linear_quadratic(Features{logits, onehot_log, true}, v, o, at::Tensor(), nullptr, &w);
  auto ref = torch::softmax(logits.masked_fill(torch::ones({6, 6}, torch::kBool).triu(1), -INFINITY), -1);
  EXPECT_LT(max_diff(w, ref), 1e-12);
}

// Step by step == chunked over the same sequence; chunked in pieces (state carried) == chunked at once.
TEST(LinearAttention, RecurrenceMatchesChunkedAndStatesContinue) {
  for (bool log_space : {false, true}) {
    for (Norm norm : kNorms) {
      for (bool decay : {false, true}) {
        SCOPED_TRACE("log=" + std::to_string(log_space) + " norm=" + norm_name(norm) + " decay=" + std::to_string(decay));
        auto in = make_inputs(19, log_space, 4.0, 42, false);
        auto o = options(true, norm, 4, decay);
        Features f{in.q, in.k, log_space};
        LinearState whole;
        auto once = linear_chunked(f, in.v, o, at::Tensor(), &whole);
        LinearState rec;
        auto steps = linear_recurrent(f, in.v, o, rec);
        EXPECT_LT(max_diff(once, steps), 1e-9 * (1 + once.abs().max().item<double>()));
        LinearState pieces;
        std::vector<at::Tensor> parts;
        for (auto [start, len] : std::vector<std::pair<int64_t, int64_t>>{{0, 7}, {7, 1}, {8, 11}}) {
          Features p{in.q.narrow(2, start, len), in.k.narrow(2, start, len), log_space};
          parts.push_back(linear_chunked(p, in.v.narrow(2, start, len), o, at::Tensor(), &pieces));
        }
        EXPECT_LT(max_diff(once, torch::cat(parts, 2)), 1e-9 * (1 + once.abs().max().item<double>()));
        EXPECT_EQ(pieces.position, 19);
        EXPECT_EQ(rec.position, 19);
        // The states hold the same true value exp(m)·S.
        auto true_s = [](const LinearState& s) { return s.S * s.m.exp().view({B, H, 1, 1}); };
        EXPECT_LT(max_diff(true_s(whole), true_s(rec)), 1e-9 * (1 + true_s(whole).abs().max().item<double>()));
        EXPECT_LT(max_diff(true_s(whole), true_s(pieces)), 1e-9 * (1 + true_s(whole).abs().max().item<double>()));
      }
    }
  }
}

// fp32 with spiky exp features (log-features to about ±25, beyond what exp can hold summed in fp32 without
// the stabilising constants) matches an fp64 reference; with log-features in the hundreds it stays finite.
TEST(LinearAttention, StableInFloat32ForLargeLogits) {
  for (bool causal : {true, false}) {
    auto in = make_inputs(150, true, 8.0, 9, true);
    auto o = options(causal, Norm::Row, 16, false);
    o.eps = 1e-6;
    Features f64{in.q.detach(), in.k.detach(), true};
    auto ref = linear_quadratic(f64, in.v.detach(), o, in.mask);
    Features f32{f64.q.to(torch::kFloat), f64.k.to(torch::kFloat), true};
    auto v32 = in.v.detach().to(torch::kFloat);
    for (auto out : {linear_attention(f32, v32, o, in.mask), linear_quadratic(f32, v32, o, in.mask)}) {
      EXPECT_TRUE(torch::isfinite(out).all().item<bool>());
      EXPECT_LT(max_diff(out.to(torch::kDouble), ref), 1e-4) << "causal=" << causal;
    }
    Features huge{f32.q * 40, f32.k * 40, true};
    EXPECT_TRUE(torch::isfinite(linear_attention(huge, v32, o, in.mask)).all().item<bool>());
  }
}

TEST(LinearAttention, BadInputsGiveClearErrors) {
  auto in = make_inputs(4, false, 1, 1, false);
  Features f{in.q, in.k, false};
  auto o = options(false, Norm::Row, 4, false);
  o.decay = torch::tensor({0.5, 0.5, 0.5}, dbl());
  EXPECT_THROW(linear_attention(f, in.v, o, at::Tensor()), mimic::Error);
  EXPECT_THROW(linear_chunked(f, in.v, options(false, Norm::Row, 4, false), at::Tensor()), mimic::Error);
  EXPECT_THROW(linear_chunked(f, in.v.narrow(2, 0, 3), options(true, Norm::Row, 4, false), at::Tensor()), mimic::Error);
  EXPECT_THROW(parse_norm("layer"), mimic::Error);
}

// ---------------------------------------------------------------------------------------------------------
// Feature maps

namespace {
FeatureMapSpec spec(const std::string& name, nlohmann::json options = nlohmann::json::object()) {
  return FeatureMapSpec{name, 2, 4, std::move(options)};
}
at::Tensor features_of(FeatureMapImpl& m, const at::Tensor& x, Role role = Role::Query, int64_t offset = 0) {
  auto y = m.forward(x, role, offset);
  return m.log_space() ? y.exp() : y;
}
}  // namespace

TEST(FeatureMaps, EveryRegisteredMapHasShapeFinitenessAndItsSign) {
  ASSERT_GE(feature_maps().size(), 10u);
  torch::manual_seed(3);
  for (const auto& info : feature_maps()) {
    SCOPED_TRACE(info.name);
    auto m = make_feature_map(spec(info.name));
    auto x = torch::randn({2, 2, 5, 4});
    auto y = m->forward(x, Role::Key, 0);
    EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 2, 5, m->feature_dim()}));
    EXPECT_TRUE(torch::isfinite(m->forward(x * 1e3, Role::Key, 0)).all().item<bool>());
    EXPECT_TRUE(torch::isfinite(m->forward(-x * 1e3, Role::Query, 0)).all().item<bool>());
    auto phi = features_of(*m, x);
    if (m->sign() == Sign::Positive) EXPECT_GT(phi.min().item<double>(), 0.0);
    if (m->sign() == Sign::NonNegative) EXPECT_GE(phi.min().item<double>(), 0.0);
    // Through the whole op, in fp32, with huge inputs: finite outputs.
    LinearAttentionConfig c;
    c.feature_map = info.name;
    LinearAttention att(c, 2, 4);
    AttentionContext ctx;
    ctx.causal = true;
    ctx.scale = 0.5;
    auto out = att.forward(x * 1e3, x.flip(2) * 1e3, torch::randn({2, 2, 5, 4}), ctx);
    EXPECT_TRUE(torch::isfinite(out).all().item<bool>());
  }
}

TEST(FeatureMaps, HedgehogAtIdentityInitIsItsClosedForm) {
  torch::manual_seed(4);
  auto x = torch::randn({2, 2, 5, 4}, dbl());
  auto hh = make_feature_map(spec("hedgehog"));
  hh->to(torch::kDouble);
  EXPECT_EQ(hh->feature_dim(), 8);
  EXPECT_LT(max_diff(features_of(*hh, x), torch::cat({x.exp(), (-x).exp()}, -1)), 1e-12);
  EXPECT_LT(max_diff(features_of(*hh, x, Role::Key), torch::cat({x.exp(), (-x).exp()}, -1)), 1e-12);
  auto hs = make_feature_map(spec("hedgehog_softmax"));
  hs->to(torch::kDouble);
  EXPECT_LT(max_diff(features_of(*hs, x), torch::cat({torch::softmax(x, -1), torch::softmax(-x, -1)}, -1)), 1e-12);
  // Untied by default: q and k maps are separate parameters; tied: one.
  EXPECT_EQ(hh->parameters().size(), 4u);
  EXPECT_EQ(make_feature_map(spec("hedgehog", {{"tied", true}}))->parameters().size(), 2u);
  // A wider map starts from a rectangular identity.
  auto wide = make_feature_map(spec("hedgehog", {{"feature_dim", 12}}));
  wide->to(torch::kDouble);
  auto y = features_of(*wide, x);
  EXPECT_EQ(y.size(-1), 12);
  EXPECT_LT(max_diff(y.narrow(-1, 0, 4), x.exp()), 1e-12);
  EXPECT_LT(max_diff(y.narrow(-1, 4, 2), torch::ones({2, 2, 5, 2}, dbl())), 1e-12);
}

TEST(FeatureMaps, Taylor2DotProductIsSecondOrderExp) {
  torch::manual_seed(5);
  auto m = make_feature_map(spec("taylor2"));
  auto q = torch::randn({2, 2, 5, 4}, dbl()), k = torch::randn({2, 2, 5, 4}, dbl());
  auto dot = (features_of(*m, q) * features_of(*m, k, Role::Key)).sum(-1);
  auto s = (q * k).sum(-1);
  EXPECT_EQ(m->feature_dim(), 1 + 4 + 16);
  EXPECT_LT(max_diff(dot, 1 + s + s * s / 2), 1e-12);
}

// taylor of order N: φ(q)·φ(k) is exp's series to the N-th power of q·k, orders 1 to 4 (with the order's 1/n!);
// taylor2 is order 2, feature for feature; an order beyond the range or features beyond the cap are errors.
TEST(FeatureMaps, TaylorOfOrderNDotProductIsExpsSeriesToN) {
  torch::manual_seed(6);
  auto q = torch::randn({2, 2, 5, 3}, dbl()), k = torch::randn({2, 2, 5, 3}, dbl());
  const auto s = (q * k).sum(-1);
  for (int64_t order = 1; order <= 4; ++order) {
    auto m = make_feature_map(FeatureMapSpec{"taylor", 2, 3, {{"order", order}}});
    auto series = torch::zeros_like(s);
    double factorial = 1;
    int64_t features = 0;
    for (int64_t n = 0; n <= order; ++n) {
      if (n > 0) factorial *= static_cast<double>(n);
      series = series + s.pow(static_cast<double>(n)) / factorial;
      features += static_cast<int64_t>(std::pow(3.0, static_cast<double>(n)));
    }
    EXPECT_EQ(m->feature_dim(), features) << "order " << order;
    const auto dot = (features_of(*m, q) * features_of(*m, k, Role::Key)).sum(-1);
    EXPECT_LT(max_diff(dot, series), 1e-12) << "order " << order;
  }
  EXPECT_TRUE(torch::equal(features_of(*make_feature_map(FeatureMapSpec{"taylor2", 2, 3, nlohmann::json::object()}), q),
                           features_of(*make_feature_map(FeatureMapSpec{"taylor", 2, 3, nlohmann::json::object()}), q)));
  EXPECT_MIMIC_ERROR(make_feature_map(FeatureMapSpec{"taylor", 2, 3, {{"order", 7}}}), "order");
  EXPECT_MIMIC_ERROR(make_feature_map(FeatureMapSpec{"taylor", 2, 64, {{"order", 3}}}), "order 3 at head dimension 64 needs more than 65536 features");
  EXPECT_MIMIC_ERROR(make_feature_map(FeatureMapSpec{"taylor2", 2, 3, {{"order", 3}}}), "order");
}

TEST(FeatureMaps, ElementwiseMapsAreWhatTheySay) {
  auto x = torch::linspace(-3, 3, 40, dbl()).view({1, 2, 5, 4});
  EXPECT_LT(max_diff(features_of(*make_feature_map(spec("elu")), x), torch::elu(x) + 1), 1e-12);
  EXPECT_LT(max_diff(features_of(*make_feature_map(spec("relu")), x), torch::relu(x)), 1e-12);
  EXPECT_LT(max_diff(features_of(*make_feature_map(spec("identity")), x), x), 1e-12);
  EXPECT_LT(max_diff(features_of(*make_feature_map(spec("exp_t", {{"t", 0.5}})), x), (0.5 * x).exp()), 1e-12);
  auto t2r = make_feature_map(spec("t2r"));
  t2r->to(torch::kDouble);
  EXPECT_LT(max_diff(features_of(*t2r, x), torch::relu(x)), 1e-12);
}

TEST(FeatureMaps, CosformerReweightsByRelativePosition) {
  torch::manual_seed(6);
  const int64_t M = 16;
  auto m = make_feature_map(spec("cosformer", {{"max_len", M}}));
  auto q = torch::randn({1, 2, 5, 4}, dbl()), k = torch::randn({1, 2, 5, 4}, dbl());
  auto fq = features_of(*m, q, Role::Query, 3), fk = features_of(*m, k, Role::Key, 3);
  auto dots = torch::matmul(fq, fk.transpose(-1, -2));
  auto idx = torch::arange(5, dbl());
  auto cosd = torch::cos((idx.unsqueeze(1) - idx.unsqueeze(0)) * (M_PI / (2 * M)));
  EXPECT_LT(max_diff(dots, torch::matmul(torch::relu(q), torch::relu(k).transpose(-1, -2)) * cosd), 1e-12);
  EXPECT_THROW(m->forward(q, Role::Query, 12), mimic::Error);  // positions 12..16: 16 is beyond max_len
}

TEST(FeatureMaps, PerformerEstimatesExpAndRedrawsOnlyWhenAsked) {
  torch::manual_seed(7);
  auto m = make_feature_map({"performer", 1, 8, {{"features", 8192}, {"seed", 3}}});
  // The estimator's relative spread is about sqrt((exp(|q + k|²) − 1) / m): modest inputs, many features,
  // several draws of inputs. Without the −|x|²/2 term, or with non-uniform directions (QR without the sign
  // correction), the error is several times larger.
  std::vector<at::Tensor> errors;
  for (int draw = 0; draw < 10; ++draw) {
    auto q = torch::randn({1, 1, 6, 8}) * 0.25, k = torch::randn({1, 1, 6, 8}) * 0.25;
    auto est = torch::matmul(features_of(*m, q), features_of(*m, k, Role::Key).transpose(-1, -2));
    auto exact = torch::matmul(q, k.transpose(-1, -2)).exp();
    errors.push_back((est - exact) / exact);
  }
  auto err = torch::stack(errors);
  EXPECT_LT(err.abs().mean().item<double>(), 0.025);
  EXPECT_LT(err.abs().max().item<double>(), 0.15);
  EXPECT_LT(std::abs(err.mean().item<double>()), 0.01);  // unbiased
  // Orthogonal blocks: directions within a block are orthogonal.
  auto omega = m->named_buffers()["omega"].select(0, 0).narrow(1, 0, 8);
  auto gram = torch::matmul(omega.t(), omega);
  EXPECT_LT((gram - torch::diag(gram.diagonal())).abs().max().item<double>(), 1e-3);
  // Fixed by default; redraw=true draws new directions each training pass, not in eval mode.
  auto fixed = make_feature_map({"performer", 1, 8, {{"seed", 3}}});
  auto before = fixed->named_buffers()["omega"].clone();
  fixed->begin_pass();
  EXPECT_TRUE(torch::equal(before, fixed->named_buffers()["omega"]));
  auto redraw = make_feature_map({"performer", 1, 8, {{"seed", 3}, {"redraw", true}}});
  EXPECT_TRUE(torch::equal(before, redraw->named_buffers()["omega"]));  // same seed, same first draw
  redraw->eval();
  redraw->begin_pass();
  EXPECT_TRUE(torch::equal(before, redraw->named_buffers()["omega"]));
  redraw->train();
  redraw->begin_pass();
  EXPECT_FALSE(torch::equal(before, redraw->named_buffers()["omega"]));
}

TEST(FeatureMaps, UnknownNamesAndOptionsAreClearErrors) {
  try {
    make_feature_map(spec("hedgehgo"));
    FAIL() << "no error";
  } catch (const mimic::Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown feature map 'hedgehgo'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("taylor2"), std::string::npos) << e.what();
  }
  try {
    make_feature_map(spec("hedgehog", {{"feature_dims", 8}}));
    FAIL() << "no error";
  } catch (const mimic::Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown option 'feature_dims'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_feature_map(spec("hedgehog", {{"feature_dim", 7}})), mimic::Error);
  EXPECT_THROW(make_feature_map(spec("exp_t", {{"t", "hot"}})), mimic::Error);
  EXPECT_THROW(make_feature_map(spec("elu", {{"t", 1}})), mimic::Error);
}

// Map options that size parameters and features are bounded (kMaxFeatureDim): --map-options '{"feature_dim":
// 1000000000}' allocated gigabytes before it was refused by anything. The bound is checked before any allocation.
TEST(FeatureMaps, FeatureCountsAboveTheBoundAreClearErrors) {
  EXPECT_MIMIC_ERROR(make_feature_map(spec("hedgehog", {{"feature_dim", 1000000000}})),
                     "feature map 'hedgehog': option 'feature_dim' must be in [2, 65536], got 1000000000");
  EXPECT_MIMIC_ERROR(make_feature_map(spec("hedgehog_softmax", {{"feature_dim", 65538}})), "must be in [2, 65536]");
  EXPECT_MIMIC_ERROR(make_feature_map(spec("t2r", {{"feature_dim", int64_t{1} << 40}})), "option 'feature_dim' must be in [1, 65536]");
  EXPECT_MIMIC_ERROR(make_feature_map(spec("t2r", {{"feature_dim", -3}})), "must be in [1, 65536], got -3");
  EXPECT_MIMIC_ERROR(make_feature_map(spec("performer", {{"features", 70000}})), "option 'features' must be in [1, 65536]");
  // the bound itself and ordinary sizes are accepted
  EXPECT_EQ(make_feature_map(spec("t2r", {{"feature_dim", kMaxFeatureDim}}))->feature_dim(), kMaxFeatureDim);
  EXPECT_EQ(make_feature_map(spec("hedgehog", {{"feature_dim", 16}}))->feature_dim(), 16);
}

// Found by review of the maps-file reader after fuzzing it: feature_dim <= 65536 still let a wide layer ask for 2^32
// weights (n_head 64 x head_dim 1024 x 65536). A map's parameters are bounded as a whole, before anything is allocated.
TEST(FeatureMaps, MapsBeyondTheParameterBoundAreRefusedBeforeAllocating) {
  auto wide = [](const std::string& name, nlohmann::json options) { return FeatureMapSpec{name, 64, 1024, std::move(options)}; };
  EXPECT_MIMIC_ERROR(make_feature_map(wide("hedgehog", {{"feature_dim", 65536}})),
                     "feature map 'hedgehog': 64 heads x 1024 x 32768 is more than the 67108864 parameters a map may hold");
  EXPECT_MIMIC_ERROR(make_feature_map(wide("t2r", {{"feature_dim", 4096}})), "feature map 't2r': 64 heads x 1024 x 4096 is more than");
  EXPECT_MIMIC_ERROR(make_feature_map(wide("performer", {{"features", 2048}})), "feature map 'performer': 64 heads x 1024 x 2048");
  // a wide layer of ordinary size is fine: 64 x 1024 x 1024 = 2^26
  EXPECT_EQ(make_feature_map(wide("t2r", {{"feature_dim", 1024}}))->feature_dim(), 1024);
}

// ---------------------------------------------------------------------------------------------------------
// The kernel: maps + gates + decay through every form, gradients reaching map and gate parameters.

namespace {
std::shared_ptr<LinearAttention> kernel(const nlohmann::json& options, int64_t heads = 3, int64_t dim = 4, uint64_t seed = 1) {
  torch::manual_seed(seed);
  auto k = std::static_pointer_cast<LinearAttention>(make_attention_kernel("linear", options, heads, dim));
  k->to(torch::kDouble);
  for (auto& p : k->parameters()) {  // move away from the init so that every parameter matters
    torch::NoGradGuard g;
    p.add_(torch::randn_like(p) * 0.3);
  }
  return k;
}
// q, k, v [2, 3, 7, 4] drawn after manual_seed(seed), and a context at scale 0.5 in which key `pos` of batch row
// `row` is padding.
struct PaddedInputs {
  at::Tensor q, k, v;
  AttentionContext ctx;
};
PaddedInputs padded_inputs(uint64_t seed, bool causal, int64_t row, int64_t pos) {
  torch::manual_seed(seed);
  PaddedInputs in;
  in.q = torch::randn({2, 3, 7, 4}, dbl());
  in.k = torch::randn({2, 3, 7, 4}, dbl());
  in.v = torch::randn({2, 3, 7, 4}, dbl());
  in.ctx.causal = causal;
  in.ctx.scale = 0.5;
  in.ctx.key_padding_mask = torch::ones({2, 7}, torch::kBool);
  in.ctx.key_padding_mask.index_put_({row, pos}, false);
  return in;
}

}  // namespace

TEST(LinearKernel, FastFormsMatchQuadraticIncludingMapAndGateGradients) {
  for (const char* map : {"hedgehog", "t2r", "performer", "cosformer", "taylor2"}) {
    for (bool causal : {true, false}) {
      SCOPED_TRACE(std::string(map) + (causal ? " causal" : " bidirectional"));
      auto att = kernel({{"feature_map", map}, {"gates", true}, {"chunk", 3}, {"eps", 1e-9}, {"decay", causal}});
      auto [q, k, v, ctx] = padded_inputs(2, causal, 0, 5);
      auto probe = torch::randn({2, 3, 7, 4}, dbl());
      auto params = att->parameters();
      ASSERT_GE(params.size(), 2u);
      auto ref = att->forward_quadratic(q, k, v, ctx, nullptr);
      auto fast = att->forward(q, k, v, ctx);
      EXPECT_LT(max_diff(ref, fast), 1e-10);
      expect_close(grads(ref, probe, params), grads(fast, probe, params), 1e-9, "parameters");
      auto named = att->named_parameters();
      auto g = grads(fast, probe, params);
      for (size_t i = 0; i < g.size(); ++i) {
        const std::string name = named.keys()[i];
        // Every parameter receives a gradient, except the query gate: under row normalisation it cancels (up to ε),
        // so its gradient is zero (SlaGates.TheQueryGateTrainsOnlyWhereItDoesNotCancel)
        ASSERT_TRUE(g[i].defined()) << name;
        if (name == "gates.w_q")
          EXPECT_EQ(g[i].abs().max().item<double>(), 0.0) << name;
        else
          EXPECT_GT(g[i].abs().max().item<double>(), 1e-6) << name;
      }
    }
  }
}

TEST(LinearKernel, WeightsAloneEqualTheQuadraticFormsWeightsAndTheirGradients) {
  // weights_quadratic skips the output under row normalisation (one column of v stands in); under L2 the weights
  // depend on v, and it must use all of it.
  for (const char* norm : {"row", "l2"}) {
    for (bool causal : {true, false}) {
      SCOPED_TRACE(std::string(norm) + (causal ? " causal" : " bidirectional"));
      auto att = kernel({{"feature_map", "hedgehog"}, {"gates", true}, {"norm", norm}, {"eps", 1e-9}});
      auto [q, k, v, ctx] = padded_inputs(4, causal, 1, 2);
      at::Tensor w_ref, lw_ref, w, lw;
      att->forward_quadratic(q, k, v, ctx, &w_ref, &lw_ref);
      att->weights_quadratic(q, k, v, ctx, &w, &lw);
      EXPECT_LT(max_diff(w_ref, w), 1e-12);
      auto finite = torch::isfinite(lw_ref);
      ASSERT_TRUE(torch::equal(finite, torch::isfinite(lw)));
      EXPECT_LT(max_diff(lw_ref.masked_fill(~finite, 0), lw.masked_fill(~finite, 0)), 1e-12);
      // gradients of a CE-like loss through the log-weights
      auto probe = torch::rand_like(lw_ref).masked_fill(~finite, 0);
      auto params = att->parameters();
      expect_close(grads(lw_ref.masked_fill(~finite, 0), probe, params), grads(lw.masked_fill(~finite, 0), probe, params), 1e-10,
                   "parameters");
      if (std::string(norm) == "l2") {  // a different v gives different weights: v really is read
        at::Tensor w2;
        att->weights_quadratic(q, k, v * 3 + 1, ctx, &w2, nullptr);
        EXPECT_GT(max_diff(w, w2), 1e-3);
      }
    }
  }
}

TEST(LinearKernel, GenerationWithStateMatchesTheFullForward) {
  auto att = kernel({{"feature_map", "hedgehog"}, {"gates", true}, {"decay", true}});
  torch::manual_seed(3);
  auto q = torch::randn({1, 3, 9, 4}, dbl()), k = torch::randn({1, 3, 9, 4}, dbl()), v = torch::randn({1, 3, 9, 4}, dbl());
  AttentionContext ctx;
  ctx.causal = true;
  ctx.scale = 0.5;
  auto full = att->forward(q, k, v, ctx);
  LinearState s;
  auto prefix = att->forward_with_state(q.narrow(2, 0, 5), k.narrow(2, 0, 5), v.narrow(2, 0, 5), 0.5, s);
  std::vector<at::Tensor> outs = {prefix};
  for (int64_t i = 5; i < 9; ++i) outs.push_back(att->forward_with_state(q.narrow(2, i, 1), k.narrow(2, i, 1), v.narrow(2, i, 1), 0.5, s));
  EXPECT_LT(max_diff(torch::cat(outs, 2), full), 1e-10);
  EXPECT_EQ(s.position, 9);
}

TEST(LinearKernel, CaptureReturnsQuadraticWeights) {
  auto att = kernel({{"feature_map", "hedgehog"}});
  torch::manual_seed(4);
  auto q = torch::randn({1, 3, 6, 4}, dbl()), k = torch::randn({1, 3, 6, 4}, dbl()), v = torch::randn({1, 3, 6, 4}, dbl());
  AttentionCapture cap;
  cap.want_weights = true;
  AttentionContext ctx;
  ctx.causal = true;
  ctx.capture = &cap;
  auto out = att->forward(q, k, v, ctx);
  EXPECT_LT(max_diff(torch::matmul(cap.weights, v), out), 1e-10);
  ctx.capture = nullptr;
  EXPECT_LT(max_diff(att->forward(q, k, v, ctx), out), 1e-10);
}

// SLA with one head: the gate is softmax over a single head = 1, i.e. plain linear attention.
TEST(SlaGates, OneHeadIsPlainLinearAttention) {
  for (const char* map : {"hedgehog", "elu"}) {
    auto gated = kernel({{"feature_map", map}, {"gates", true}}, 1, 4, 9);
    auto plain = kernel({{"feature_map", map}}, 1, 4, 9);
    {
      torch::NoGradGuard g;
      auto source = gated->named_parameters();
      for (auto& item : plain->named_parameters()) item.value().copy_(source[item.key()]);
    }
    torch::manual_seed(5);
    auto q = torch::randn({2, 1, 6, 4}, dbl()), k = torch::randn({2, 1, 6, 4}, dbl()), v = torch::randn({2, 1, 6, 4}, dbl());
    AttentionContext ctx;
    ctx.causal = true;
    EXPECT_LT(max_diff(gated->forward(q, k, v, ctx), plain->forward(q, k, v, ctx)), 1e-12) << map;
  }
}

// Under row normalisation the query gate is a per-query constant and cancels; the key gate does not.
TEST(SlaGates, QueryGateCancelsUnderRowNormalisationKeyGateDoesNot) {
  auto att = kernel({{"feature_map", "hedgehog"}, {"gates", true}, {"eps", 0.0}});  // ε would not cancel
  torch::manual_seed(6);
  auto q = torch::randn({1, 3, 6, 4}, dbl()), k = torch::randn({1, 3, 6, 4}, dbl()), v = torch::randn({1, 3, 6, 4}, dbl());
  AttentionContext ctx;
  ctx.causal = true;
  auto base = att->forward(q, k, v, ctx);
  torch::NoGradGuard g;
  att->gates->w_q.mul_(5.0);
  EXPECT_LT(max_diff(att->forward(q, k, v, ctx), base), 1e-12);
  att->gates->w_k.mul_(5.0);
  EXPECT_GT(max_diff(att->forward(q, k, v, ctx), base), 1e-3);
}

// So W_GQ learns nothing where G^Q cancels — row normalisation, and L2 and RMS, which divide each query's output by its
// own norm (with ε's remainder as its only gradient, AdamW took steps on it as large as W_GK's, and a later norm=none
// ran that noise: helper-99's probe); its gradient is zero there, not undefined (the overlapped all-reduce waits for
// every trainable tensor's). Under norm=none, SLA's own form, both learn.
TEST(SlaGates, TheQueryGateTrainsOnlyWhereItDoesNotCancel) {
  torch::manual_seed(7);
  auto q = torch::randn({1, 3, 6, 4}, dbl()), k = torch::randn({1, 3, 6, 4}, dbl()), v = torch::randn({1, 3, 6, 4}, dbl());
  AttentionContext ctx;
  ctx.causal = true;
  for (const char* norm : {"row", "l2", "rms", "none"}) {
    auto att = kernel({{"feature_map", "hedgehog"}, {"gates", true}, {"norm", norm}});
    auto out = att->forward(q, k, v, ctx);
    auto g = torch::autograd::grad({out.pow(2).sum()}, {att->gates->w_q, att->gates->w_k}, {}, false, false, /*allow_unused=*/true);
    ASSERT_TRUE(g[0].defined() && g[1].defined()) << norm;
    EXPECT_GT(g[1].abs().max().item<double>(), 1e-6) << norm;
    if (std::string(norm) == "none")
      EXPECT_GT(g[0].abs().max().item<double>(), 1e-6);
    else
      EXPECT_EQ(g[0].abs().max().item<double>(), 0.0) << norm;
    EXPECT_EQ(att->query_gate_cancels(), std::string(norm) != "none");
  }
  // the hybrid's one denominator also sums the window's terms, which G^Q does not scale: its W_GQ learns
  auto hybrid = make_attention_kernel("hybrid", {{"feature_map", "hedgehog"}, {"gates", true}, {"window", 2}}, 3, 4);
  EXPECT_FALSE(std::dynamic_pointer_cast<LinearAttention>(hybrid)->query_gate_cancels());
}

// SLA's magnitude property (paper Prop. 1): scaling the gate logits by λ sharpens the gates — their entropy
// falls monotonically towards 0, and the query–key flow Σ_h G^Q_h G^K_h tends to 1 when both pick the same head.
TEST(SlaGates, ScalingTheLogitsSharpensTheGates) {
  auto gates = std::make_shared<HeadGatesImpl>(12, 3);
  torch::manual_seed(8);
  {
    torch::NoGradGuard g;
    gates->w_q.copy_(torch::randn({12, 3}));
    gates->w_k.copy_(gates->w_q);
  }
  auto q = torch::randn({1, 3, 10, 4});
  double last = INFINITY;
  for (double lambda : {0.25, 0.5, 1.0, 2.0, 4.0, 16.0, 64.0}) {
    auto [lq, lk] = gates->forward(q * lambda, q * lambda);
    auto entropy = -(lq.exp() * lq).sum(1).mean().item<double>();
    EXPECT_LT(entropy, last) << "lambda " << lambda;
    last = entropy;
    if (lambda == 64.0) {
      EXPECT_LT(entropy, 0.05);
      EXPECT_GT((lq.exp() * lk.exp()).sum(1).mean().item<double>(), 0.95);
    }
  }
  // Zero weights (the initialisation): uniform gates 1/H.
  auto fresh = std::make_shared<HeadGatesImpl>(12, 3);
  EXPECT_LT(max_diff(fresh->forward(q, q).first.exp(), torch::full({1, 3, 10}, 1.0 / 3)), 1e-7);
}

TEST(LinearKernel, ConfigRoundTripsAndRejectsUnknownKeys) {
  auto c = LinearAttentionConfig::from_json({{"feature_map", "performer"}, {"map_options", {{"features", 32}}}, {"norm", "l2"},
                                             {"gates", true}, {"decay", true}, {"chunk", 32}},
                                            4);
  EXPECT_EQ(c.decay.size(), 4u);
  EXPECT_DOUBLE_EQ(c.decay[0], 1 - 1.0 / 32);
  EXPECT_DOUBLE_EQ(c.decay[3], 1 - 1.0 / 256);
  auto again = LinearAttentionConfig::from_json(c.to_json(), 4);
  EXPECT_EQ(again.to_json(), c.to_json());
  EXPECT_THROW(LinearAttentionConfig::from_json({{"normalisation", "row"}}, 4), mimic::Error);
  EXPECT_THROW(LinearAttentionConfig::from_json({{"decay", {0.5}}}, 4), mimic::Error);
  EXPECT_THROW(make_attention_kernel("cosine", nlohmann::json::object(), 4, 8), mimic::Error);
  EXPECT_EQ(make_attention_kernel("softmax", nlohmann::json::object(), 4, 8)->kind(), "softmax");
}

TEST(AttentionKinds, EveryRegisteredKindBuildsFromItsSavedOptionsAndAnswersWhatStagesAsk) {
  const int64_t heads = 3, dim = 4;
  std::vector<std::string> names;
  for (const auto& info : attention_kinds()) {
    names.push_back(info.name);
    EXPECT_FALSE(info.summary.empty()) << info.name;
    // the options kinds.def lists are the keys its parser takes: each one listed is read (a null value is refused by
    // its range, not as unknown), a key not listed is refused listing them (convert tells another kind's option from
    // a value out of range by this list)
    std::string listed = info.options;
    for (size_t at = 0; !listed.empty() && at <= listed.size();) {
      const size_t end = std::min(listed.find(", ", at), listed.size());
      const std::string key = listed.substr(at, end - at);
      EXPECT_TRUE(info.takes_option(key)) << info.name << " " << key;
      try {
        make_attention_kernel(info.name, {{key, nullptr}}, heads, dim);
      } catch (const mimic::Error& e) {
        const std::string what = e.what();
        EXPECT_EQ(what.find("unknown"), std::string::npos) << info.name << ": " << what;
        EXPECT_EQ(what.find("does not read it"), std::string::npos) << info.name << ": " << what;
      }
      at = end + 2;
    }
    EXPECT_FALSE(info.takes_option("gat")) << info.name;  // whole keys only
    if (!info.options.empty())
      EXPECT_MIMIC_ERROR(make_attention_kernel(info.name, {{"bogus", 1}}, heads, dim),
                         "unknown " + info.name + " attention option 'bogus' (options: " + info.options + ")");
    // every kind builds from its defaults, except mixed, which needs to be told which heads keep softmax
    const nlohmann::json example = info.name == "mixed" ? nlohmann::json{{"softmax_heads", {1}}} : nlohmann::json::object();
    auto k = make_attention_kernel(info.name, example, heads, dim);
    EXPECT_EQ(k->kind(), info.name);
    EXPECT_EQ(&attention_kind(info.name), &attention_kind(k->kind()));
    // rebuilt from what it saves, it saves the same and computes the same
    auto again = make_attention_kernel(k->kind(), k->config_json(), heads, dim);
    EXPECT_EQ(again->config_json(), k->config_json()) << info.name;
    EXPECT_EQ(canonical_options(info.name, example, heads, dim), k->config_json());
    torch::manual_seed(3);
    auto q = torch::randn({2, heads, 7, dim}), kk = torch::randn({2, heads, 7, dim}), v = torch::randn({2, heads, 7, dim});
    AttentionContext ctx;
    ctx.causal = true;
    ctx.scale = 0.5;
    {
      torch::NoGradGuard ng;
      for (const auto& p : k->named_parameters()) again->named_parameters()[p.key()].copy_(p.value());
      for (const auto& b : k->named_buffers()) again->named_buffers()[b.key()].copy_(b.value());
    }
    EXPECT_TRUE(torch::allclose(k->forward(q, kk, v, ctx), again->forward(q, kk, v, ctx))) << info.name;
    EXPECT_EQ(is_reference(*k), info.role == KindRole::Reference) << info.name;
    if (info.role == KindRole::Reference) {
      EXPECT_MIMIC_ERROR(as_distillable(k, "layer 2"), "layer 2 runs attention kind '" + info.name + "', which has no distillable form");
      continue;
    }
    // A distillable kind: its quadratic form is its forward, its causal weights are a distribution over the
    // visible keys, and every parameter belongs to a group distill can select.
    auto d = as_distillable(k, "layer 2");
    at::Tensor w, log_w;
    auto out = d->forward_quadratic(q, kk, v, ctx, &w, &log_w);
    EXPECT_LT((out - k->forward(q, kk, v, ctx)).abs().max().item<double>(), 1e-5) << info.name;
    EXPECT_LT((out - at::matmul(w, v)).abs().max().item<double>(), 1e-5) << info.name;  // the output is weights · v
    EXPECT_EQ(w.triu(1).abs().max().item<double>(), 0.0) << info.name;  // no weight on future keys
    if (d->weights_are_distribution()) {
      EXPECT_LT((w.sum(-1) - 1).abs().max().item<double>(), 1e-5) << info.name;
      EXPECT_LT((log_w.exp() - w).abs().max().item<double>(), 1e-6) << info.name;
    } else {  // an effective operator (delta): some weight negative, and no promise of sign
      EXPECT_TRUE(d->weights_may_be_negative()) << info.name;
      EXPECT_LT((log_w.exp() - w.clamp_min(0)).abs().max().item<double>(), 1e-6) << info.name;
    }
    for (const auto& p : d->named_parameters()) {
      const auto g = d->parameter_group(p.key());
      EXPECT_TRUE(g == "maps" || g == "gates") << info.name << " " << p.key() << " -> " << g;
    }
    EXPECT_FALSE(d->feature_map().empty());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"softmax", "linear", "hybrid", "delta", "mixed"}));
  EXPECT_MIMIC_ERROR(make_attention_kernel("cosine", nlohmann::json::object(), heads, dim),
                     "unknown attention kind 'cosine' (known: softmax, linear, hybrid, delta, mixed)");
  EXPECT_MIMIC_ERROR(attention_kind("Softmax"), "unknown attention kind");
  EXPECT_MIMIC_ERROR(make_attention_kernel("softmax", {{"window", 4}}, heads, dim), "softmax attention takes no options");
  // Groups and sign as the linear kind defines them: SLA gates apart from the map; taylor2 may go negative.
  auto sla = as_distillable(kernel_from_spec("sla:hedgehog", heads, dim), "x");
  int gates = 0;
  for (const auto& p : sla->named_parameters()) gates += sla->parameter_group(p.key()) == "gates";
  EXPECT_EQ(gates, 2);
  EXPECT_FALSE(sla->weights_may_be_negative());
  EXPECT_TRUE(as_distillable(kernel_from_spec("linear:taylor2", heads, dim), "x")->weights_may_be_negative());
  // pretrain's spec takes every kind of the registry with its options, beside the short forms (it refused
  // hybrid and delta, though docs/cli.md listed them: the probe of 2026-11-27)
  EXPECT_EQ(kernel_from_spec("softmax", heads, dim)->kind(), "softmax");
  EXPECT_EQ(kernel_from_spec("delta", heads, dim)->kind(), "delta");
  auto hybrid = kernel_from_spec("hybrid:window=4", heads, dim);
  EXPECT_EQ(hybrid->kind(), "hybrid");
  EXPECT_EQ(hybrid->config_json()["window"], 4);
  EXPECT_EQ(kernel_from_spec("linear:feature_map=elu,norm=l2", heads, dim)->config_json()["norm"], "l2");
  EXPECT_EQ(kernel_from_spec("linear:elu", heads, dim)->config_json()["feature_map"], "elu");
  EXPECT_MIMIC_ERROR(kernel_from_spec("cosine", heads, dim),
                     "attention 'cosine': expected softmax, linear:<map>, sla:<map> or KIND[:key=value,...] (kinds: softmax, linear, hybrid, delta, mixed; maps: hedgehog,");
  EXPECT_MIMIC_ERROR(kernel_from_spec("sla", heads, dim), "attention 'sla': expected softmax, linear:<map>, sla:<map>");
  EXPECT_MIMIC_ERROR(kernel_from_spec("hybrid:window=4,nope=1", heads, dim), "nope");
}
