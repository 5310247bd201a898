// Head placement by measured effect (convert/placement.h): the greedy selection measures each step again with the
// heads chosen before kept, its screen finds both halves of a circuit, auto:P% stops at the share; the probe's
// measurements equal the eval stage's; its calibration set comes from the training split only.
#include <torch/torch.h>

#include <algorithm>
#include <map>
#include <set>

#include "mimic/convert/placement.h"
#include "mimic/data/corpus.h"
#include "mimic/data/token_cache.h"
#include "mimic/eval/copy.h"
#include "mimic/eval/passkey.h"
#include "mimic/models/model.h"
#include "mimic/text/tokenizer.h"
#include "test_util.h"

using mimic::convert::HeadRef;
using mimic::convert::ProbeMeasure;

namespace {

const HeadRef A{0, 0}, B{0, 1}, C{1, 0}, D{1, 1};

// A measure over named head sets: copy gain from a table (sets not in it: the sum of their heads' single values),
// every call recorded.
struct TableMeasure {
  std::map<std::set<HeadRef>, double> gain;
  std::map<HeadRef, double> single;
  std::vector<std::vector<HeadRef>> calls;
  ProbeMeasure operator()(const std::vector<HeadRef>& kept) {
    calls.push_back(kept);
    std::set<HeadRef> s(kept.begin(), kept.end());
    ProbeMeasure m;
    m.lm_loss = 5.0;
    auto it = gain.find(s);
    if (it != gain.end()) {
      m.copy_gain = it->second;
    } else {
      for (const auto& h : s) m.copy_gain += single.count(h) ? single.at(h) : 0.0;
    }
    return m;
  }
};

mimic::convert::GreedyOptions heads(int64_t k, int64_t leaders = 16) {
  mimic::convert::GreedyOptions o;
  o.count = k;
  o.leaders = leaders;
  o.progress = false;
  return o;
}

}  // namespace

TEST(Placement, GreedyStepMeasuresAgainWithTheEarlierChoicesKept) {
  // Alone, A gains most and C next; but B only pays with A kept (a previous-token head and the induction head it
  // feeds). Ranking the heads once by their single gains would keep A and C.
  TableMeasure t;
  t.single = {{A, 0.3}, {B, 0.05}, {C, 0.25}, {D, 0.0}};
  t.gain = {{{A, B}, 1.0}, {{A, C}, 0.5}, {{A, B, C, D}, 1.2}};
  auto g = mimic::convert::greedy_placement(std::ref(t), {A, B, C, D}, heads(2));
  ASSERT_EQ(g.kept, (std::vector<HeadRef>{A, B}));
  ASSERT_EQ(g.steps.size(), 2u);
  EXPECT_NEAR(g.steps[0].measure.copy_gain, 0.3, 1e-12);
  EXPECT_NEAR(g.steps[1].measure.copy_gain, 1.0, 1e-12);
  // the second step measured B, C and D each with A kept
  for (const auto& h : {B, C, D}) {
    std::vector<HeadRef> set{A, h};
    std::sort(set.begin(), set.end());
    EXPECT_EQ(std::count(t.calls.begin(), t.calls.end(), set), 1) << mimic::convert::head_name(h);
  }
  // scores are shares of the teacher's copy gain (1.2) with equal LM losses: 1.0 / 1.2 after the second step
  EXPECT_NEAR(g.steps[1].score_after, 1.0 / 1.2, 1e-12);
  EXPECT_NEAR(g.steps[1].score_before, 0.3 / 1.2, 1e-12);
  // every head a step tried is kept with its score, so a step is audited from the record: B, C and D beside A
  ASSERT_EQ(g.steps[1].candidates.size(), 3u);
  std::map<HeadRef, double> tried(g.steps[1].candidates.begin(), g.steps[1].candidates.end());
  EXPECT_NEAR(tried.at(B), 1.0 / 1.2, 1e-12);
  EXPECT_NEAR(tried.at(C), 0.5 / 1.2, 1e-12);
  EXPECT_NEAR(tried.at(D), 0.3 / 1.2, 1e-12);
  EXPECT_EQ(g.steps[0].candidates.size(), 4u);
  // no set is measured twice: none, all, 4 alone, 4 all-but-one, then {A,B}, {A,C}, {A,D} (the singles were screened)
  EXPECT_EQ(g.measured, 13);
  EXPECT_EQ(static_cast<int64_t>(t.calls.size()), g.measured);
}

// A teacher without recall on the probe's text leaves the score to the LM loss, and heads that change no score are
// kept arbitrarily: both said (a probe kept 2 heads of all-0.000 scores without a word: helper-68's probe), and
// nothing said for a teacher that recalls and heads that differ.
TEST(Placement, AProbeThatCannotRankTheHeadsSaysSoAndOneThatCanSaysNothing) {
  TableMeasure recalls;
  recalls.single = {{A, 0.3}, {B, 0.05}, {C, 0.25}, {D, 0.0}};
  EXPECT_EQ(mimic::convert::placement_caveat(mimic::convert::greedy_placement(std::ref(recalls), {A, B, C, D}, heads(2)), heads(2)), "");
  TableMeasure none;  // copy gain 0 for every set, the same LM loss: nothing to rank by
  const auto caveat = mimic::convert::placement_caveat(mimic::convert::greedy_placement(std::ref(none), {A, B, C, D}, heads(2)), heads(2));
  EXPECT_NE(caveat.find("the teacher shows no recall on the probe's text (copy gain 0.000, passkey key gain 0.000 nats"), std::string::npos) << caveat;
  EXPECT_NE(caveat.find("so the heads were ranked by LM loss alone"), std::string::npos) << caveat;
  EXPECT_NE(caveat.find("the probe could not tell the heads apart (no head changed its score by 0.001 or more): the 2 kept are arbitrary"),
            std::string::npos) << caveat;
  // without recall but with LM losses that differ, the ranking is by LM loss: said, and not called arbitrary
  struct LossMeasure {
    ProbeMeasure operator()(const std::vector<HeadRef>& kept) {
      ProbeMeasure m;
      m.lm_loss = 5.0 - 0.1 * static_cast<double>(std::count(kept.begin(), kept.end(), A));
      return m;
    }
  } loss;
  const auto by_loss = mimic::convert::placement_caveat(mimic::convert::greedy_placement(std::ref(loss), {A, B, C, D}, heads(1)), heads(1));
  EXPECT_NE(by_loss.find("ranked by LM loss alone"), std::string::npos) << by_loss;
  EXPECT_EQ(by_loss.find("arbitrary"), std::string::npos) << by_loss;
  // a share the student already has keeps nothing: nothing kept is called arbitrary
  TableMeasure had;
  had.gain = {{{}, 0.9}, {{A, B, C, D}, 1.0}};
  auto share = heads(0);
  share.share = 0.5;
  EXPECT_EQ(mimic::convert::placement_caveat(mimic::convert::greedy_placement(std::ref(had), {A, B, C, D}, share), share), "");
  // a teacher that copies and a kept set that keeps under a tenth of it: said with the shares (helper-73's probe: three
  // heads kept -0.013 of 2.646 nats without a word); a tenth or more says nothing
  TableMeasure circuit;
  circuit.gain = {{{A, B, C, D}, 1.0}};
  circuit.single = {{A, 0.05}, {B, 0.02}};
  EXPECT_EQ(mimic::convert::placement_caveat(mimic::convert::greedy_placement(std::ref(circuit), {A, B, C, D}, heads(1)), heads(1)),
            "the 1 head kept recovers 5% of the teacher's copy gain on the probe (0.050 of 1.000 nats/token): more heads, or "
            "--probe-weights with less lm, keep more of it");
  circuit.single = {{A, 0.1}};
  EXPECT_EQ(mimic::convert::placement_caveat(mimic::convert::greedy_placement(std::ref(circuit), {A, B, C, D}, heads(1)), heads(1)), "");
}

TEST(Placement, ScreenFindsBothHalvesOfACircuitThatGainNothingAlone) {
  // X and Y copy only together; Z gains a little alone and nothing is lost without it. Restoring heads one at a
  // time into the student ranks Z first; turning them linear one at a time in the teacher ranks X and Y first.
  const HeadRef X = A, Y = D, Z = B;
  TableMeasure t;
  t.single = {{Z, 0.2}};
  t.gain = {{{X, Y}, 1.0}, {{A, B, C, D}, 1.1}, {{A, B, C}, 0.2}, {{B, C, D}, 0.2}, {{A, C, D}, 1.05}, {{A, B, D}, 1.1}};
  auto g = mimic::convert::greedy_placement(std::ref(t), {A, B, C, D}, heads(2, /*leaders=*/2));
  ASSERT_EQ(g.screen.size(), 4u);
  EXPECT_EQ(std::set<HeadRef>({g.screen[0].head, g.screen[1].head}), std::set<HeadRef>({X, Y}));
  EXPECT_NEAR(g.screen[0].ablate, (1.1 - 0.2) / 1.1, 1e-12);
  EXPECT_EQ(std::set<HeadRef>(g.kept.begin(), g.kept.end()), std::set<HeadRef>({X, Y}));
  EXPECT_NEAR(g.steps.back().measure.copy_gain, 1.0, 1e-12);
}

TEST(Placement, AutoShareKeepsHeadsUntilTheCopyGainReachesTheShareOfTheTeachers) {
  TableMeasure t;
  t.single = {{A, 0.5}, {B, 0.3}, {C, 0.2}, {D, 0.1}};  // additive: all = 1.1
  auto o = heads(0);
  o.share = 0.7;  // 0.77: A + B = 0.8 reaches it, A alone does not
  auto g = mimic::convert::greedy_placement(std::ref(t), {A, B, C, D}, o);
  EXPECT_EQ(g.kept, (std::vector<HeadRef>{A, B}));
  EXPECT_TRUE(g.reached);
  o.share = 1.0;  // reached with all four
  EXPECT_EQ(mimic::convert::greedy_placement(std::ref(t), {A, B, C, D}, o).kept.size(), 4u);
  // a share the student already has keeps nothing
  t.single = {};
  t.gain = {{{}, 0.9}, {{A, B, C, D}, 1.0}};
  o.share = 0.5;
  EXPECT_TRUE(mimic::convert::greedy_placement(std::ref(t), {A, B, C, D}, o).kept.empty());
}

TEST(Placement, ScoreCountsRecallAsSharesOfTheTeachersAndLeavesOutWhatTheTeacherLacks) {
  ProbeMeasure teacher{2.0, 4.0, 3.0}, m{1.0, 4.5, 1.5};
  mimic::convert::ProbeWeights w;  // copy 1, passkey 1, lm 1
  EXPECT_NEAR(mimic::convert::probe_score(m, teacher, w), 0.5 + 0.5 - 0.5, 1e-12);
  teacher.key_gain = 0.01;  // a teacher that does not retrieve the key: the passkey term is left out
  EXPECT_NEAR(mimic::convert::probe_score(m, teacher, w), 0.5 - 0.5, 1e-12);
  w.lm = 0.1;
  EXPECT_NEAR(mimic::convert::probe_score(m, teacher, w), 0.5 - 0.05, 1e-12);
  w = mimic::convert::parse_probe_weights("passkey=0,lm=0");
  EXPECT_NEAR(mimic::convert::probe_score(m, teacher, w), 0.5, 1e-12);
  EXPECT_MIMIC_ERROR(mimic::convert::parse_probe_weights("copy=1,copy=2"), "given twice");
  EXPECT_MIMIC_ERROR(mimic::convert::parse_probe_weights("recall=1"), "unknown term 'recall'");
  EXPECT_MIMIC_ERROR(mimic::convert::parse_probe_weights("copy=-1"), "NAME=VALUE");
  EXPECT_MIMIC_ERROR(mimic::convert::parse_probe_weights("copy=0,passkey=0"), "LM loss alone");
}

TEST(Placement, KeepSpecsParseAndBadOnesAreRefusedByName) {
  using K = mimic::convert::KeepSpec::Kind;
  EXPECT_EQ(mimic::convert::parse_keep_spec("").kind, K::None);
  auto c = mimic::convert::parse_keep_spec("auto:010");
  EXPECT_EQ(c.kind, K::Count);
  EXPECT_EQ(c.count, 10);  // decimal, not octal
  auto s = mimic::convert::parse_keep_spec("auto:90%");
  EXPECT_EQ(s.kind, K::Share);
  EXPECT_DOUBLE_EQ(s.share, 0.9);
  auto l = mimic::convert::parse_keep_spec("3.1,2.0");
  EXPECT_EQ(l.heads, (std::vector<HeadRef>{{3, 1}, {2, 0}}));
  for (const auto& [spec, msg] : std::vector<std::pair<std::string, std::string>>{{"auto:", "expected auto:K"},
                                                                                  {"auto:-2", "expected auto:K"},
                                                                                  {"auto:2.5", "expected auto:K"},
                                                                                  {"auto:101%", "P in (0, 100]"},
                                                                                  {"3.1,3.1", "given twice"},
                                                                                  {"3.1.2", "not LAYER.HEAD"},
                                                                                  {"3", "not LAYER.HEAD"}})
    EXPECT_MIMIC_ERROR(mimic::convert::parse_keep_spec(spec), msg);
  auto t = [](const std::vector<HeadRef>&) { return ProbeMeasure{}; };
  EXPECT_MIMIC_ERROR(mimic::convert::greedy_placement(t, {A, B}, heads(3)), "K must be in [1, 2]");
  EXPECT_MIMIC_ERROR(mimic::convert::greedy_placement(t, {A, A}, heads(1)), "repeat");
}

TEST(Placement, CalibrationSegmentsComeFromTheTrainingSplitOnly) {
  auto dir = mimic::test::model_with_tokenizer("gpt2-prefixed");
  auto tok = mimic::text::load_tokenizer(dir);
  mimic::convert::CalibrationOptions o;
  o.data = "sotu";
  o.segments = 6;
  o.segment_len = 24;
  o.passkeys = 3;
  o.passkey_len = 64;
  o.lm_windows = 3;
  auto cal = mimic::convert::probe_calibration(*tok, 64, "", o);
  ASSERT_EQ(cal.copy_segments.size(), 6u);
  ASSERT_EQ(cal.lm_windows.size(), 3u);
  EXPECT_EQ(cal.lm_windows[0].size(), 64u);  // min(512, context)
  EXPECT_EQ(cal.source, "the train split of sotu");
  auto occurs = [](const mimic::data::TokenCache& c, const std::vector<int64_t>& seg) {
    const auto d = c.ids();
    for (int64_t i = 0; i + static_cast<int64_t>(seg.size()) <= c.size(); ++i) {
      int64_t j = 0;
      while (j < static_cast<int64_t>(seg.size()) && d[i + j] == seg[static_cast<size_t>(j)]) ++j;
      if (j == static_cast<int64_t>(seg.size())) return true;
    }
    return false;
  };
  auto train = mimic::data::corpus_token_cache("sotu", mimic::data::Split::Train, *tok);
  auto val = mimic::data::corpus_token_cache("sotu", mimic::data::Split::Validation, *tok);
  auto test = mimic::data::corpus_token_cache("sotu", mimic::data::Split::Test, *tok);
  // the first segment opens the train split; none of them occurs in the validation or test split
  const auto train_ids = train.ids();
  EXPECT_EQ(cal.copy_segments[0], std::vector<int64_t>(train_ids.begin(), train_ids.begin() + 24));
  auto windows = cal.copy_segments;
  windows.insert(windows.end(), cal.lm_windows.begin(), cal.lm_windows.end());
  for (const auto& seg : windows) {
    EXPECT_TRUE(occurs(train, seg));
    EXPECT_FALSE(occurs(val, seg));
    EXPECT_FALSE(occurs(test, seg));
  }
  // passkey trials: the prompt and the decoy differ only in the key, and fit the length
  ASSERT_EQ(cal.passkeys.size(), 3u);
  for (const auto& p : cal.passkeys) {
    EXPECT_LE(p.prompt.size() + p.key.size(), 64u);
    EXPECT_NE(p.prompt, p.decoy_prompt);
    EXPECT_EQ(p.alternatives.size(), 9u);
  }
  // a user's text file: its train split only (the first 90% of its characters, cut at a line break), never the
  // lines `eval --data FILE --split validation|test` scores; sizes that do not fit are refused by option name
  mimic::test::TempDir t;
  std::string own;
  for (int i = 0; i < 40; ++i) own += "Line " + std::to_string(i) + " says: " + mimic::test::kDickens + "\n";
  mimic::test::write_bytes(t.file("own.txt"), own);
  o.data = t.file("own.txt");
  auto from_file = mimic::convert::probe_calibration(*tok, 64, "", o);
  EXPECT_EQ(from_file.source, "the train split of " + t.file("own.txt"));
  std::string read;
  for (const auto* part : {&from_file.copy_segments, &from_file.lm_windows})
    for (const auto& seg : *part) read += tok->decode(seg) + "|";
  // the segments are spread over the train split (lines 0..35) and never reach the last 10% (lines 36..39)
  int64_t last_line = -1;
  for (size_t at = read.find("Line "); at != std::string::npos; at = read.find("Line ", at + 1))
    last_line = std::max<int64_t>(last_line, std::atoll(read.c_str() + at + 5));
  EXPECT_GE(last_line, 18) << read;
  EXPECT_LE(last_line, 35) << read;
  o.segment_len = 40;
  EXPECT_MIMIC_ERROR(mimic::convert::probe_calibration(*tok, 64, "", o), "--probe-segment-len 40 must lie in 2..32");
  o.segment_len = 24;
  o.lm_len = 65;
  EXPECT_MIMIC_ERROR(mimic::convert::probe_calibration(*tok, 64, "", o), "--probe-lm-len 65 must lie in 4..64");
  o.lm_len = 0;
  o.segments = 1000;
  EXPECT_MIMIC_ERROR(mimic::convert::probe_calibration(*tok, 64, "", o), "too few for --probe-segments 1000");
  // naming a count that fits, as eval --task copy does (helper-50's probe of 2026-12-04)
  EXPECT_MIMIC_ERROR(mimic::convert::probe_calibration(*tok, 64, "", o), " fits; or a longer text)");
  // and the LM windows' need in the same line: following the segments' advice met the windows' refusal (helper-73)
  {
    auto both = o;
    both.lm_windows = 1000;
    both.lm_len = 20;
    EXPECT_MIMIC_ERROR(mimic::convert::probe_calibration(*tok, 64, "", both),
                       " fits; or a longer text), and for --probe-lm-windows 1000 of --probe-lm-len 20 (--probe-lm-windows ");
    both.segments = 1;
    EXPECT_MIMIC_ERROR(mimic::convert::probe_calibration(*tok, 64, "", both), " tokens: too few for --probe-lm-windows 1000 of --probe-lm-len 20 (");
  }
  o.data = "sotu-validation";
  EXPECT_MIMIC_ERROR(mimic::convert::probe_calibration(*tok, 64, "", o), "neither a corpus");
  // a passkey length shorter than a prompt takes is named by its option, with the least that fits (helper-59's probe
  // of 2026-12-04: "a passkey prompt of 42 tokens is too short: the question and key alone take 48"), and that least
  // fits every trial
  o.data = "sotu";
  o.segments = 6;
  o.passkey_len = 32;
  std::string shortest;
  try {
    mimic::convert::probe_calibration(*tok, 64, "", o);
  } catch (const mimic::Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("--probe-passkey-len 32 is too short for the probe's passkey prompts: with this tokenizer the key's sentence, "
                         "the question and the answer take up to ", 0), 0u) << what;
    shortest = what.substr(what.rfind(' ') + 1);
  }
  ASSERT_FALSE(shortest.empty());
  o.passkey_len = std::stoll(shortest);
  const auto fits = mimic::convert::probe_calibration(*tok, 64, "", o);
  for (const auto& p : fits.passkeys) EXPECT_LE(p.prompt.size() + p.key.size(), static_cast<size_t>(o.passkey_len));
  o.passkey_len -= 1;
  EXPECT_MIMIC_ERROR(mimic::convert::probe_calibration(*tok, 64, "", o), "give at least " + shortest);
}

TEST(Placement, ProbeMeasuresEqualTheEvalStagesCopyGainAndPasskeyScores) {
  auto dir = mimic::test::model_with_tokenizer("gpt2-prefixed");
  auto tok = mimic::text::load_tokenizer(dir);
  auto model = mimic::models::load_model(dir);
  model->module().eval();
  mimic::convert::CalibrationOptions o;
  o.data = "sotu";
  o.segments = 5;  // not a multiple of the batch
  o.passkeys = 3;
  o.lm_windows = 3;  // neither
  auto cal = mimic::convert::probe_calibration(*tok, 64, "", o);
  EXPECT_EQ(cal.copy_segments[0].size(), 32u);  // min(128, context / 2)
  auto m = mimic::convert::probe_measure(*model, cal, /*batch_size=*/2);
  mimic::eval::CopyOptions co;
  co.progress = false;
  auto copy = mimic::eval::copy_eval(*model, cal.copy_segments, co);
  EXPECT_NEAR(m.copy_gain, copy.gain, 1e-4);
  // with an opening (a Llama tokenizer's <s>), the probe's runs are eval's runs still (segments of 31: [<s> A A] fits 64)
  auto opened = cal;
  opened.opening = {50256};
  for (auto& s : opened.copy_segments) s.resize(31);
  co.opening = opened.opening;
  const auto opened_copy = mimic::eval::copy_eval(*model, opened.copy_segments, co);
  EXPECT_NEAR(mimic::convert::probe_measure(*model, opened, 2).copy_gain, opened_copy.gain, 1e-4);
  co.opening.clear();  // the same segments unopened: the opening moves what the model reads
  EXPECT_GT(std::abs(opened_copy.gain - mimic::eval::copy_eval(*model, opened.copy_segments, co).gain), 1e-6);
  // the LM loss: the windows' second halves (tokens 32..63), from the full logits of each window alone
  double lm = 0;
  {
    torch::NoGradGuard no_grad;
    for (const auto& w : cal.lm_windows) {
      mimic::models::ForwardInputs in;
      in.input_ids = torch::tensor(w, torch::kLong).unsqueeze(0);
      auto logp = torch::log_softmax(model->forward(in).logits[0].to(torch::kDouble), -1);
      double sum = 0;
      for (int64_t t = 32; t < 64; ++t) sum -= logp[t - 1][w[static_cast<size_t>(t)]].item<double>();
      lm += sum / 32 / 3;
    }
  }
  EXPECT_NEAR(m.lm_loss, lm, 1e-4);
  // a target that is the tokenizer's opening is none, as eval scores none (helper-38's review: the windows are cut from
  // a stream with <s> after every </s>); here a token of the first window's second half plays the opening. The probe's
  // batches of 2 windows take the mean over their scored tokens.
  opened.opening = {cal.lm_windows[0][40]};
  double lm_opened = 0;
  {
    torch::NoGradGuard no_grad;
    for (size_t first = 0; first < cal.lm_windows.size(); first += 2) {
      const size_t last = std::min(first + 2, cal.lm_windows.size());
      double sum = 0;
      int64_t n = 0;
      for (size_t i = first; i < last; ++i) {
        const auto& w = cal.lm_windows[i];
        mimic::models::ForwardInputs in;
        in.input_ids = torch::tensor(w, torch::kLong).unsqueeze(0);
        auto logp = torch::log_softmax(model->forward(in).logits[0].to(torch::kDouble), -1);
        for (int64_t t = 32; t < 64; ++t)
          if (w[static_cast<size_t>(t)] != opened.opening[0]) sum -= logp[t - 1][w[static_cast<size_t>(t)]].item<double>(), ++n;
      }
      lm_opened += sum / static_cast<double>(n) * static_cast<double>(last - first) / 3;
    }
  }
  EXPECT_NEAR(mimic::convert::probe_measure(*model, opened, 2).lm_loss, lm_opened, 1e-4);
  EXPECT_GT(std::abs(lm_opened - lm), 1e-6);
  // without LM windows, the first copies' NLL
  auto no_windows = cal;
  no_windows.lm_windows.clear();
  EXPECT_NEAR(mimic::convert::probe_measure(*model, no_windows, 2).lm_loss, copy.first_nll, 1e-4);
  double gain = 0;
  int64_t first = 0;
  for (const auto& p : cal.passkeys) {
    auto with = mimic::eval::score_continuations(*model, p.prompt, {p.key});
    auto without = mimic::eval::score_continuations(*model, p.decoy_prompt, {p.key});
    gain += with[0] - without[0];
    std::vector<std::vector<int64_t>> cands{p.key};
    cands.insert(cands.end(), p.alternatives.begin(), p.alternatives.end());
    auto s = mimic::eval::score_continuations(*model, p.prompt, cands);
    first += mimic::eval::rank_of(s[0], {s.begin() + 1, s.end()}) == 1;
  }
  EXPECT_NEAR(m.key_gain, gain / 3, 1e-4);
  EXPECT_EQ(mimic::convert::probe_passkeys_ranked_first(*model, cal), first);
}
