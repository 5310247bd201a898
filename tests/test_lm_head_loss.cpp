// The chunked LM-head cross-entropy (train/lm_head_loss.h) against its naive reference, forward and
// gradients: over chunk sizes (one row, uneven remainders, one chunk for all, the default), with ignored
// (-100) targets, with no scored target at all, with logits so spread that a target's probability
// underflows, and with only one of the inputs requiring a gradient; then the training loss of a GPT-2
// (causal_lm_loss, which takes the chunked path) against the logits path, on the loss and on every
// parameter's gradient, the tied embedding included. Then the same for the chunked logit distillation
// (lm_head_kd_loss) over temperatures and mixes with the LM loss, with probabilities that underflow; its
// GPT-2 training loss against the logits path is in test_finetune.cpp, beside finetune --kd.
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "mimic/attention/kinds.h"
#include "mimic/data/batches.h"
#include "mimic/models/model.h"
#include "mimic/train/lm.h"
#include "mimic/train/lm_head_loss.h"
#include "test_util.h"

namespace {

using mimic::train::lm_head_loss;
using mimic::train::lm_head_loss_reference;

// flash-linear-attention's criterion: RMS(error) / RMS(reference), which scales with the values.
double rms_ratio(const at::Tensor& got, const at::Tensor& ref) {
  auto g = got.to(torch::kDouble), r = ref.to(torch::kDouble);
  return (g - r).pow(2).mean().sqrt().item<double>() / std::max(r.pow(2).mean().sqrt().item<double>(), 1e-30);
}

struct LossAndGrads {
  double loss;
  at::Tensor grad_hidden, grad_weight;
};

template <class F>
LossAndGrads run(F loss_fn, const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels, double upstream = 1.0) {
  auto h = hidden.detach().clone().requires_grad_();
  auto w = weight.detach().clone().requires_grad_();
  at::Tensor l = loss_fn(h, w, labels);
  (l * upstream).backward();
  return {l.item<double>(), h.grad(), w.grad()};
}

// Random hidden states, weight and labels whose logits spread over a few units (a trained model's range).
struct Case {
  at::Tensor hidden, weight, labels;
};
Case make_case(int64_t b, int64_t t, int64_t d, int64_t vocab, double ignored_share, uint64_t seed) {
  torch::manual_seed(seed);
  Case c;
  c.hidden = torch::randn({b, t, d});
  c.weight = torch::randn({vocab, d}) / std::sqrt(static_cast<double>(d)) * 3.0;
  c.labels = torch::randint(vocab, {b, t}, torch::kLong);
  if (ignored_share > 0) c.labels.masked_fill_(torch::rand({b, t}) < ignored_share, -100);
  return c;
}

}  // namespace

TEST(LmHeadLoss, ChunkedMatchesTheReferenceInLossAndBothGradientsOverChunkSizesAndIgnoredTargets) {
  struct Shape {
    int64_t b, t, d, vocab;
  };
  for (auto s : {Shape{2, 13, 16, 97}, Shape{1, 40, 24, 311}, Shape{3, 7, 8, 1000}})
    for (double ignored : {0.0, 0.3})
      for (int64_t chunk : {int64_t{1}, int64_t{3}, int64_t{7}, s.b * s.t, s.b * s.t + 5, int64_t{0}}) {
        auto c = make_case(s.b, s.t, s.d, s.vocab, ignored, 7 + static_cast<uint64_t>(s.vocab));
        const std::string where = "b " + std::to_string(s.b) + " t " + std::to_string(s.t) + " V " + std::to_string(s.vocab) +
                                  " chunk " + std::to_string(chunk) + " ignored " + std::to_string(ignored);
        auto ref = run(lm_head_loss_reference, c.hidden, c.weight, c.labels);
        auto got = run([&](auto& h, auto& w, auto& y) { return lm_head_loss(h, w, y, chunk); }, c.hidden, c.weight, c.labels);
        ASSERT_TRUE(std::isfinite(ref.loss)) << where;
        EXPECT_NEAR(got.loss, ref.loss, 1e-5 * std::abs(ref.loss)) << where;
        EXPECT_LT(rms_ratio(got.grad_hidden, ref.grad_hidden), 1e-5) << where;
        EXPECT_LT(rms_ratio(got.grad_weight, ref.grad_weight), 1e-5) << where;
        EXPECT_EQ(got.grad_hidden.sizes(), c.hidden.sizes()) << where;
        if (ignored > 0) {
          // an ignored token's hidden state gets exactly no gradient
          auto ignored_rows = c.labels.eq(-100);
          ASSERT_GT(ignored_rows.sum().item<int64_t>(), 0) << where;
          EXPECT_EQ(got.grad_hidden.index({ignored_rows}).abs().max().item<float>(), 0.0f) << where;
        }
      }
}

TEST(LmHeadLoss, TheGradientsScaleWithTheIncomingGradientAndOnlyInputsThatAskForOneGetIt) {
  auto c = make_case(2, 9, 16, 61, 0.2, 3);
  auto ref = run(lm_head_loss_reference, c.hidden, c.weight, c.labels, 2.5);
  auto got = run([](auto& h, auto& w, auto& y) { return lm_head_loss(h, w, y, 4); }, c.hidden, c.weight, c.labels, 2.5);
  EXPECT_LT(rms_ratio(got.grad_hidden, ref.grad_hidden), 1e-5);
  EXPECT_LT(rms_ratio(got.grad_weight, ref.grad_weight), 1e-5);

  // a frozen head (weight without gradient): the hidden states still get theirs
  auto h = c.hidden.clone().requires_grad_();
  lm_head_loss(h, c.weight, c.labels, 4).backward();
  EXPECT_LT(rms_ratio(h.grad(), run(lm_head_loss_reference, c.hidden, c.weight, c.labels).grad_hidden), 1e-5);
  // and the other way round
  auto w = c.weight.clone().requires_grad_();
  lm_head_loss(c.hidden, w, c.labels, 4).backward();
  EXPECT_LT(rms_ratio(w.grad(), run(lm_head_loss_reference, c.hidden, c.weight, c.labels).grad_weight), 1e-5);

  // without gradients (evaluation): the same loss, no graph
  torch::NoGradGuard no_grad;
  auto h2 = c.hidden.clone().requires_grad_();
  auto l = lm_head_loss(h2, c.weight, c.labels, 4);
  EXPECT_FALSE(l.requires_grad());
  EXPECT_NEAR(l.item<double>(), lm_head_loss_reference(c.hidden, c.weight, c.labels).item<double>(), 1e-5 * l.item<double>());
}

TEST(LmHeadLoss, NoScoredTargetGivesANaNLossAndZeroGradientsAsTheReferenceDoes) {
  auto c = make_case(2, 5, 8, 31, 0.0, 5);
  c.labels.fill_(-100);
  auto ref = run(lm_head_loss_reference, c.hidden, c.weight, c.labels);
  auto got = run([](auto& h, auto& w, auto& y) { return lm_head_loss(h, w, y, 3); }, c.hidden, c.weight, c.labels);
  EXPECT_TRUE(std::isnan(ref.loss));
  EXPECT_TRUE(std::isnan(got.loss));
  EXPECT_EQ(got.grad_hidden.abs().max().item<float>(), 0.0f);
  EXPECT_EQ(got.grad_weight.abs().max().item<float>(), 0.0f);
  EXPECT_EQ(ref.grad_hidden.abs().max().item<float>(), 0.0f);
}

// Logits spread over thousands of units: a target's softmax probability underflows to 0 in float, so a loss
// taken as −log p would be infinite; such rows take their log-sum-exp from the logits and stay exact.
TEST(LmHeadLoss, TargetsWhoseProbabilityUnderflowsKeepAFiniteExactLoss) {
  auto c = make_case(1, 12, 8, 50, 0.0, 9);
  c.weight = c.weight * 400.0;
  // every other target the row's most likely token (an ordinary loss), the others random (most far below)
  auto best = torch::matmul(c.hidden, c.weight.t()).argmax(-1);
  c.labels.narrow(1, 0, 6).copy_(best.narrow(1, 0, 6));
  auto ref = run(lm_head_loss_reference, c.hidden, c.weight, c.labels);
  auto got = run([](auto& h, auto& w, auto& y) { return lm_head_loss(h, w, y, 5); }, c.hidden, c.weight, c.labels);
  // the case holds both kinds of rows: targets whose probability underflows (loss above −log 1e-30 ≈ 69 nats)
  // and ordinary ones
  auto row_losses = -torch::log_softmax(torch::matmul(c.hidden, c.weight.t()), -1).gather(-1, c.labels.unsqueeze(-1));
  ASSERT_GT(row_losses.gt(80.0).sum().item<int64_t>(), 0);
  ASSERT_GT(row_losses.lt(60.0).sum().item<int64_t>(), 0);
  EXPECT_NEAR(got.loss, ref.loss, 1e-5 * ref.loss);
  EXPECT_LT(rms_ratio(got.grad_hidden, ref.grad_hidden), 1e-5);
  EXPECT_LT(rms_ratio(got.grad_weight, ref.grad_weight), 1e-5);
}

TEST(LmHeadLoss, ALabelOutsideTheVocabularyOrMismatchedShapesAreErrors) {
  auto c = make_case(1, 4, 8, 20, 0.0, 1);
  auto bad = c.labels.clone();
  bad[0][2] = 20;
  EXPECT_THROW(lm_head_loss(c.hidden, c.weight, bad), mimic::Error);
  bad[0][2] = -3;
  EXPECT_THROW(lm_head_loss(c.hidden, c.weight, bad), mimic::Error);
  EXPECT_THROW(lm_head_loss(c.hidden, c.weight.narrow(1, 0, 4), c.labels), mimic::Error);
  EXPECT_THROW(lm_head_loss(c.hidden, c.weight, c.labels.narrow(1, 0, 3)), mimic::Error);
}

// The training loss of a GPT-2 (softmax and converted to linear attention) with padding and ignored labels:
// causal_lm_loss runs the chunked head, causal_lm_loss_reference the full logits; the losses and every
// parameter's gradient agree, the token embedding's (which the head is tied to) included.
TEST(LmHeadLoss, Gpt2TrainingLossMatchesTheLogitsPathInLossAndEveryParametersGradient) {
  for (const std::string kind : {"softmax", "linear"}) {
    torch::manual_seed(11);
    nlohmann::json config = {{"model_type", "gpt2"}, {"n_embd", 32},      {"n_layer", 2},       {"n_head", 4},
                             {"n_positions", 32},    {"vocab_size", 211}, {"resid_pdrop", 0.0}, {"embd_pdrop", 0.0},
                             {"attn_pdrop", 0.0}};
    auto model = mimic::models::create_model(config.dump(), "");
    if (kind == "linear")
      for (int64_t l = 0; l < 2; ++l)
        model->set_attention_kernel(l, mimic::attention::make_attention_kernel("linear", {{"feature_map", "hedgehog"}}, 4, 8));
    ASSERT_TRUE(model->lm_head_weight().defined());
    mimic::data::LmBatch b;
    b.input_ids = torch::randint(211, {3, 16}, torch::kLong);
    b.labels = torch::roll(b.input_ids, -1, 1);
    b.attention_mask = torch::ones({3, 16}, torch::kLong);
    b.attention_mask[2].narrow(0, 10, 6).fill_(0);  // a right-padded row: its padding is not scored
    b.labels.masked_fill_(b.attention_mask.eq(0), -100);
    b.labels.select(1, 15).fill_(-100);

    auto grads = [&](bool reference) {
      model->module().zero_grad();
      auto l = reference ? mimic::train::causal_lm_loss_reference(*model, b) : mimic::train::causal_lm_loss(*model, b);
      l.backward();
      std::vector<std::pair<std::string, at::Tensor>> out = {{"loss", l.detach()}};
      for (const auto& p : model->module().named_parameters())
        if (p.value().grad().defined()) out.emplace_back(p.key(), p.value().grad().clone());
      return out;
    };
    auto ref = grads(true);
    auto got = grads(false);
    ASSERT_EQ(got.size(), ref.size()) << kind;
    EXPECT_NEAR(got[0].second.item<double>(), ref[0].second.item<double>(), 1e-5 * ref[0].second.item<double>()) << kind;
    bool saw_wte = false;
    for (size_t i = 1; i < ref.size(); ++i) {
      ASSERT_EQ(got[i].first, ref[i].first);
      saw_wte |= ref[i].first == "wte.weight";
      EXPECT_LT(rms_ratio(got[i].second, ref[i].second), 1e-4) << kind << " " << ref[i].first;
    }
    EXPECT_TRUE(saw_wte) << kind;
  }
}

// ------------------------------------------------------------------------------------- logit distillation
namespace {

using mimic::train::lm_head_kd_loss;
using mimic::train::lm_head_kd_loss_reference;

// A distillation case: the student's (hidden, weight, labels) and a teacher of another width d_t whose logits
// lie near the student's scale but differ from them.
struct KdCase {
  at::Tensor hidden, weight, teacher_hidden, teacher_weight, labels;
};
KdCase make_kd_case(int64_t b, int64_t t, int64_t d, int64_t d_t, int64_t vocab, double ignored_share, uint64_t seed,
                    at::ScalarType dtype = torch::kDouble) {
  auto c = make_case(b, t, d, vocab, ignored_share, seed);
  KdCase k{c.hidden.to(dtype), c.weight.to(dtype), torch::randn({b, t, d_t}).to(dtype),
           (torch::randn({vocab, d_t}) / std::sqrt(static_cast<double>(d_t)) * 3.0).to(dtype), c.labels};
  return k;
}

template <class F>
LossAndGrads run_kd(F loss_fn, const KdCase& c, double upstream = 1.0) {
  return run([&](auto& h, auto& w, auto& y) { return loss_fn(h, w, c.teacher_hidden, c.teacher_weight, y); }, c.hidden, c.weight, c.labels,
             upstream);
}

std::string kd_where(const KdCase& c, int64_t chunk, double temperature, double lm_weight, double ignored) {
  return "shape " + std::to_string(c.hidden.size(0)) + "x" + std::to_string(c.hidden.size(1)) + " V " + std::to_string(c.weight.size(0)) +
         " chunk " + std::to_string(chunk) + " T " + std::to_string(temperature) + " lm_weight " + std::to_string(lm_weight) + " ignored " +
         std::to_string(ignored);
}

}  // namespace

// In double, where the comparison sees the algorithm and not float rounding: every mix of the KL and the LM
// loss (lm_weight 0, 0.5, 1), temperatures 1 and 2, chunks of one row, uneven remainders, one chunk for all
// and the default, with and without ignored targets, a teacher of another width than the student; and GPT-2's
// vocabulary, where a chunk's rows go through the KL's cache-sized blocks in several blocks, the last short.
TEST(LmHeadKdLoss, ChunkedMatchesTheReferenceInLossAndBothGradientsOverChunksTemperaturesWeightsAndIgnoredTargets) {
  struct Shape {
    int64_t b, t, d, d_t, vocab;
  };
  for (auto s : {Shape{2, 13, 16, 24, 97}, Shape{3, 7, 8, 8, 1000}, Shape{1, 11, 8, 12, 50257}})
    for (double ignored : {0.0, 0.3})
      for (double temperature : {1.0, 2.0})
        for (double lm_weight : {0.0, 0.5, 1.0})
          for (int64_t chunk : {int64_t{1}, int64_t{3}, int64_t{7}, s.b * s.t, int64_t{0}}) {
            auto c = make_kd_case(s.b, s.t, s.d, s.d_t, s.vocab, ignored, 17 + static_cast<uint64_t>(s.vocab));
            const auto where = kd_where(c, chunk, temperature, lm_weight, ignored);
            auto ref = run_kd([&](auto&... x) { return lm_head_kd_loss_reference(x..., temperature, lm_weight); }, c);
            auto got = run_kd([&](auto&... x) { return lm_head_kd_loss(x..., temperature, lm_weight, chunk); }, c);
            ASSERT_TRUE(std::isfinite(ref.loss) && ref.loss > 0) << where;
            EXPECT_NEAR(got.loss, ref.loss, 1e-10 * ref.loss) << where;
            EXPECT_LT(rms_ratio(got.grad_hidden, ref.grad_hidden), 1e-10) << where;
            EXPECT_LT(rms_ratio(got.grad_weight, ref.grad_weight), 1e-10) << where;
            EXPECT_EQ(got.grad_hidden.sizes(), c.hidden.sizes()) << where;
            if (ignored > 0) {
              auto ignored_rows = c.labels.eq(-100);
              ASSERT_GT(ignored_rows.sum().item<int64_t>(), 0) << where;
              EXPECT_EQ(got.grad_hidden.index({ignored_rows}).abs().max().item<double>(), 0.0) << where;
            }
          }
}

// In float, as training runs: the same agreement to float rounding at both temperatures, the mixed loss included.
TEST(LmHeadKdLoss, InFloatTheChunkedLossAgreesWithTheDoubleReferenceToRounding) {
  for (double temperature : {1.0, 2.0})
    for (double lm_weight : {0.0, 0.5}) {
      auto c = make_kd_case(2, 24, 16, 16, 500, 0.2, 5);
      auto f = make_kd_case(2, 24, 16, 16, 500, 0.2, 5, torch::kFloat);
      const auto where = kd_where(c, 7, temperature, lm_weight, 0.2);
      auto ref = run_kd([&](auto&... x) { return lm_head_kd_loss_reference(x..., temperature, lm_weight); }, c);
      auto got = run_kd([&](auto&... x) { return lm_head_kd_loss(x..., temperature, lm_weight, 7); }, f);
      EXPECT_NEAR(got.loss, ref.loss, 1e-5 * ref.loss) << where;
      EXPECT_LT(rms_ratio(got.grad_hidden, ref.grad_hidden), 1e-5) << where;
      EXPECT_LT(rms_ratio(got.grad_weight, ref.grad_weight), 1e-5) << where;
    }
}

// No scored row: the reference's KL mean is 0 (it divides by at least one row) and its LM loss 0/0, so the loss
// is 0 without the LM loss and NaN with it; every gradient is zero either way, as the reference's.
TEST(LmHeadKdLoss, NoScoredRowGivesTheReferencesZeroOrNaNAndZeroGradients) {
  auto c = make_kd_case(2, 5, 8, 8, 31, 0.0, 5);
  c.labels.fill_(-100);
  for (double lm_weight : {0.0, 0.5, 1.0}) {
    auto ref = run_kd([&](auto&... x) { return lm_head_kd_loss_reference(x..., 2.0, lm_weight); }, c);
    auto got = run_kd([&](auto&... x) { return lm_head_kd_loss(x..., 2.0, lm_weight, 3); }, c);
    if (lm_weight == 0) {
      EXPECT_EQ(ref.loss, 0.0);
      EXPECT_EQ(got.loss, 0.0);
    } else {
      EXPECT_TRUE(std::isnan(ref.loss)) << lm_weight;
      EXPECT_TRUE(std::isnan(got.loss)) << lm_weight;
    }
    for (const auto& g : {got.grad_hidden, got.grad_weight, ref.grad_hidden, ref.grad_weight})
      EXPECT_EQ(g.abs().max().item<double>(), 0.0) << lm_weight;
  }
}

// A teacher so sure that most of its probabilities underflow to exactly 0 (logits spread over thousands of
// units), a student spread alike so that some of its own probabilities do too, and LM targets far below their
// row's maximum: in float the loss and gradients stay finite and agree with the reference taken in double.
TEST(LmHeadKdLoss, UnderflowingProbabilitiesOfTeacherStudentAndTargetKeepTheLossFiniteAndExact) {
  auto d = make_kd_case(1, 12, 8, 8, 50, 0.0, 9);
  d.teacher_weight = d.teacher_weight * 400.0;
  d.weight = d.weight * 50.0;
  KdCase f{d.hidden.to(torch::kFloat), d.weight.to(torch::kFloat), d.teacher_hidden.to(torch::kFloat), d.teacher_weight.to(torch::kFloat),
           d.labels};
  {
    torch::NoGradGuard g;
    auto p = torch::softmax(torch::matmul(f.teacher_hidden, f.teacher_weight.t()), -1);
    ASSERT_GT(p.eq(0).sum().item<int64_t>(), 12 * 25) << "the case should have most teacher probabilities underflow";
    auto q = torch::softmax(torch::matmul(f.hidden, f.weight.t()), -1);
    ASSERT_GT(q.eq(0).sum().item<int64_t>(), 0) << "the case should have some student probabilities underflow";
    ASSERT_GT(q.gather(-1, f.labels.unsqueeze(-1)).eq(0).sum().item<int64_t>(), 0) << "the case should have underflowing targets";
  }
  for (double lm_weight : {0.0, 0.5}) {
    auto ref = run_kd([&](auto&... x) { return lm_head_kd_loss_reference(x..., 1.0, lm_weight); }, d);
    auto got = run_kd([&](auto&... x) { return lm_head_kd_loss(x..., 1.0, lm_weight, 5); }, f);
    ASSERT_TRUE(std::isfinite(got.loss)) << lm_weight;
    EXPECT_NEAR(got.loss, ref.loss, 1e-5 * ref.loss) << lm_weight;
    EXPECT_LT(rms_ratio(got.grad_hidden, ref.grad_hidden), 1e-5) << lm_weight;
    EXPECT_LT(rms_ratio(got.grad_weight, ref.grad_weight), 1e-5) << lm_weight;
  }
}

TEST(LmHeadKdLoss, TheGradientsScaleWithTheIncomingGradientAndTheTeacherGetsNone) {
  auto c = make_kd_case(2, 9, 16, 12, 61, 0.2, 3);
  auto ref = run_kd([](auto&... x) { return lm_head_kd_loss_reference(x..., 2.0, 0.5); }, c, 2.5);
  auto got = run_kd([](auto&... x) { return lm_head_kd_loss(x..., 2.0, 0.5, 4); }, c, 2.5);
  EXPECT_LT(rms_ratio(got.grad_hidden, ref.grad_hidden), 1e-10);
  EXPECT_LT(rms_ratio(got.grad_weight, ref.grad_weight), 1e-10);

  // a teacher whose tensors ask for a gradient gets none; a frozen student head still trains the hidden states
  auto th = c.teacher_hidden.clone().requires_grad_(), tw = c.teacher_weight.clone().requires_grad_();
  auto h = c.hidden.clone().requires_grad_();
  lm_head_kd_loss(h, c.weight, th, tw, c.labels, 2.0, 0.5, 4).backward();
  EXPECT_FALSE(th.grad().defined());
  EXPECT_FALSE(tw.grad().defined());
  EXPECT_LT(rms_ratio(h.grad(), run_kd([](auto&... x) { return lm_head_kd_loss_reference(x..., 2.0, 0.5); }, c).grad_hidden), 1e-10);

  // without gradients (evaluation): the same loss, no graph
  torch::NoGradGuard no_grad;
  auto h2 = c.hidden.clone().requires_grad_();
  auto l = lm_head_kd_loss(h2, c.weight, c.teacher_hidden, c.teacher_weight, c.labels, 2.0, 0.5, 4);
  EXPECT_FALSE(l.requires_grad());
  EXPECT_NEAR(l.item<double>(), ref.loss, 1e-10 * ref.loss);
}

TEST(LmHeadKdLoss, ATemperatureOrWeightOutOfRangeAndATeacherThatDoesNotFitAreErrors) {
  auto c = make_kd_case(1, 4, 8, 8, 20, 0.0, 1);
  auto kd = [&](const at::Tensor& th, const at::Tensor& tw, double temperature, double lm_weight) {
    return lm_head_kd_loss(c.hidden, c.weight, th, tw, c.labels, temperature, lm_weight);
  };
  EXPECT_MIMIC_ERROR(kd(c.teacher_hidden, c.teacher_weight, 0.0, 0.0), "temperature must be > 0");
  EXPECT_MIMIC_ERROR(kd(c.teacher_hidden, c.teacher_weight, 1.0, 1.5), "must lie in [0, 1]");
  EXPECT_MIMIC_ERROR(kd(c.teacher_hidden, c.teacher_weight.narrow(0, 0, 19), 1.0, 0.0), "student's V = 20");
  EXPECT_MIMIC_ERROR(kd(c.teacher_hidden.narrow(1, 0, 3), c.teacher_weight, 1.0, 0.0), "one per label");
  EXPECT_MIMIC_ERROR(kd(c.teacher_hidden, c.teacher_weight.to(torch::kFloat), 1.0, 0.0), "share one floating type");
  auto bad = c.labels.clone();
  bad[0][2] = 20;
  EXPECT_MIMIC_ERROR(lm_head_kd_loss(c.hidden, c.weight, c.teacher_hidden, c.teacher_weight, bad, 1.0, 0.0), "outside the vocabulary");
}
