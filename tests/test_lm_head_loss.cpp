// The chunked LM-head cross-entropy (train/lm_head_loss.h) against its naive reference, forward and
// gradients: over chunk sizes (one row, uneven remainders, one chunk for all, the default), with ignored
// (-100) targets, with no scored target at all, with logits so spread that a target's probability
// underflows, and with only one of the inputs requiring a gradient; then the training loss of a GPT-2
// (causal_lm_loss, which takes the chunked path) against the logits path, on the loss and on every
// parameter's gradient, the tied embedding included.
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
