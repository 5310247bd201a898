#include "mimic/convert/placement.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "mimic/attention/distillable.h"
#include "mimic/attention/mixed_kernel.h"
#include "mimic/core/error.h"
#include "mimic/core/progress.h"
#include "mimic/core/runtime.h"
#include "mimic/data/corpus.h"
#include "mimic/data/token_cache.h"
#include "mimic/eval/copy.h"
#include "mimic/eval/passkey.h"
#include "mimic/io/atomic_file.h"
#include "mimic/models/model.h"
#include "mimic/text/tokenizer.h"
#include "mimic/train/lm_head_loss.h"

namespace mimic::convert {

std::string head_name(const HeadRef& h) { return std::to_string(h.layer) + "." + std::to_string(h.head); }

namespace {

// A whole non-negative decimal number (no sign, no spaces, no octal: "010" is ten), or nullopt.
std::optional<double> parse_number(const std::string& s) {
  if (s.empty() || s.find_first_not_of("0123456789.") != std::string::npos || std::count(s.begin(), s.end(), '.') > 1 || s == ".")
    return std::nullopt;
  return std::stod(s);
}

}  // namespace

std::vector<int64_t> heads_in_layer(const std::vector<HeadRef>& heads, int64_t layer) {
  std::vector<int64_t> out;
  for (const auto& x : heads)
    if (x.layer == layer) out.push_back(x.head);
  std::sort(out.begin(), out.end());
  return out;
}

KeepSpec parse_keep_spec(const std::string& spec, const std::string& option) {
  KeepSpec k;
  if (spec.empty()) return k;
  if (spec.rfind("auto:", 0) == 0) {
    std::string v = spec.substr(5);
    const bool percent = !v.empty() && v.back() == '%';
    if (percent) v.pop_back();
    auto n = parse_number(v);
    if (percent) {
      MIMIC_CHECK(n && *n > 0 && *n <= 100, option, " ", spec, ": expected auto:P% with P in (0, 100]");
      k.kind = KeepSpec::Kind::Share;
      k.share = *n / 100.0;
    } else {
      // at most 2^31: larger values wrapped around in the cast (the sixth probe of 2026-11-28); no model has more heads
      MIMIC_CHECK(n && v.find('.') == std::string::npos && *n >= 1 && *n <= 2147483648.0, option, " ", spec,
                  ": expected auto:K with K a number of heads (>= 1), or auto:P% a share of the teacher's copy gain");
      k.kind = KeepSpec::Kind::Count;
      k.count = static_cast<int64_t>(*n);
    }
    return k;
  }
  k.kind = KeepSpec::Kind::List;
  size_t at = 0;
  while (at <= spec.size()) {
    const size_t comma = std::min(spec.find(',', at), spec.size());
    const std::string item = spec.substr(at, comma - at);
    const auto dot = item.find('.');
    std::optional<double> l, h;
    if (dot != std::string::npos) l = parse_number(item.substr(0, dot)), h = parse_number(item.substr(dot + 1));
    MIMIC_CHECK(l && h && item.find('.', dot + 1) == std::string::npos && *l < 2147483648.0 && *h < 2147483648.0, option, ": '",
                item, "' is not LAYER.HEAD (or use auto:K, auto:P%)");
    HeadRef r{static_cast<int64_t>(*l), static_cast<int64_t>(*h)};
    MIMIC_CHECK(std::find(k.heads.begin(), k.heads.end(), r) == k.heads.end(), option, ": head ", item, " given twice");
    k.heads.push_back(r);
    at = comma + 1;
  }
  return k;
}

// ---------------------------------------------------------------------------------------------- calibration

ProbeCalibration probe_calibration(const text::Tokenizer& tok, int64_t context, const std::string& context_note, const CalibrationOptions& options) {
  auto o = options;
  // copy runs open as a text does (a Llama's <s>; eval --task copy's alike): [opening A A] must fit the context
  const auto opening = tok.document_start();
  const auto open = static_cast<int64_t>(opening.size());
  if (o.segment_len == 0) o.segment_len = std::min<int64_t>(128, (context - open) / 2);
  if (o.passkey_len == 0) o.passkey_len = std::min<int64_t>(256, context);
  if (o.lm_len == 0) o.lm_len = std::min<int64_t>(512, context);
  MIMIC_CHECK(o.segments >= 1, "--probe-segments must be >= 1, got ", o.segments);
  MIMIC_CHECK(o.segment_len >= 2 && open + 2 * o.segment_len <= context, "--probe-segment-len ", o.segment_len, " must lie in 2..",
              (context - open) / 2, " (each segment runs doubled", open > 0 ? " after " + std::to_string(open) + " opening" : std::string(),
              " in ", models::context_words(context, context_note), ")");
  MIMIC_CHECK(o.lm_windows >= 0, "--probe-lm-windows must be >= 0, got ", o.lm_windows);
  MIMIC_CHECK(o.lm_windows == 0 || (o.lm_len >= 4 && o.lm_len <= context), "--probe-lm-len ", o.lm_len, " must lie in 4..", context,
              " (", models::context_words(context, context_note), ")");
  MIMIC_CHECK(o.passkeys >= 0, "--probe-passkeys must be >= 0, got ", o.passkeys);
  MIMIC_CHECK(o.passkeys == 0 || o.passkey_len <= context, "--probe-passkey-len ", o.passkey_len, " exceeds ",
              models::context_words(context, context_note));
  MIMIC_CHECK(o.alternatives >= 1, "passkey alternatives must be >= 1, got ", o.alternatives);
  ProbeCalibration cal;
  cal.opening = opening;
  std::vector<int64_t> ids;
  // The training split only: placement is part of building the model, and the model is judged on the other two. A
  // user's text file or folder is split as every command splits it (data::load_text_data: the first 90% of each
  // document trains), so that `eval --data FILE --split test` scores text the probe never read.
  MIMIC_CHECK(data::is_lm_corpus(o.data) || data::is_text_data(o.data), "--probe-data ", o.data, ": neither a corpus (",
              data::lm_corpus_choices(), ") nor a text file or folder");
  auto cache = data::corpus_token_cache(o.data, data::Split::Train, tok);
  ids = cache.ids();
  cal.source = "the train split of " + o.data;
  cal.seed = o.seed;
  // Both needs in one line: the segments' refusal suggested a count that fits, and following it met the LM windows'
  // (helper-73's probe)
  const int64_t have = static_cast<int64_t>(ids.size());
  auto too_few = [have](int64_t count, int64_t len, const char* count_option, const char* len_option) -> std::string {
    if (have >= count * len) return "";
    return std::string(count_option) + " " + std::to_string(count) + " of " + len_option + " " + std::to_string(len) +
           (have >= len ? " (" + std::string(count_option) + " " + std::to_string(have / len) + " fits; or a longer text)" : std::string(" (give a longer text)"));
  };
  const std::string segments_short = too_few(o.segments, o.segment_len, "--probe-segments", "--probe-segment-len");
  const std::string lm_short = o.lm_windows > 0 ? too_few(o.lm_windows, o.lm_len, "--probe-lm-windows", "--probe-lm-len") : "";
  MIMIC_CHECK(segments_short.empty() && lm_short.empty(), "--probe-data ", o.data, " has ", have, " tokens: too few for ", segments_short,
              segments_short.empty() || lm_short.empty() ? "" : ", and for ", lm_short);
  cal.copy_segments = eval::copy_segments(eval::without_opening(ids, opening), o.segments, o.segment_len);
  if (o.lm_windows > 0) {
    cal.lm_windows = eval::copy_segments(ids, o.lm_windows, o.lm_len);  // evenly spread runs of the text, as the segments
  }

  // Keys from a stream of the probe's own (the seed mixed with a constant), so that the probe's trials are not the
  // ones `eval --task passkey --seed S` later scores.
  std::mt19937_64 rng(o.seed ^ 0x70726f6265ULL);
  constexpr int64_t kDigits = 5;
  struct Trial {
    std::string key, decoy;
    double depth = 0;
    ProbePasskey p;
  };
  std::vector<Trial> trials;
  int64_t shortest = 0;  // the --probe-passkey-len every trial's prompts fit: the longest frame, the answer's digits and a space
  for (int64_t t = 0; t < o.passkeys; ++t) {
    Trial trial;
    trial.key = eval::random_passkey(rng, kDigits);
    trial.depth = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    std::set<std::string> keys{trial.key};
    while (static_cast<int64_t>(keys.size()) <= o.alternatives) {
      auto alt = eval::random_passkey(rng, kDigits);
      if (keys.insert(alt).second) trial.p.alternatives.push_back(eval::passkey_answer(tok, alt));
    }
    do trial.decoy = eval::random_passkey(rng, kDigits);
    while (keys.count(trial.decoy));
    for (const auto* k : {&trial.key, &trial.decoy}) shortest = std::max(shortest, eval::passkey_frame_tokens(tok, *k) + kDigits + 1);
    trials.push_back(std::move(trial));
  }
  // named by the option, in its own numbers (helper-59's probe of 2026-12-04: --probe-passkey-len 48 read "a passkey
  // prompt of 42 tokens is too short: the question and key alone take 48")
  MIMIC_CHECK(o.passkey_len >= shortest, "--probe-passkey-len ", o.passkey_len, " is too short for the probe's passkey prompts: with this "
              "tokenizer the key's sentence, the question and the answer take up to ", shortest, " tokens; give at least ", shortest);
  for (auto& trial : trials) {
    trial.p.key = eval::passkey_answer(tok, trial.key);
    trial.p.prompt = eval::build_passkey_prompt(tok, o.passkey_len - kDigits - 1, trial.depth, trial.key).ids;
    trial.p.decoy_prompt = eval::build_passkey_prompt(tok, o.passkey_len - kDigits - 1, trial.depth, trial.decoy).ids;
    cal.passkeys.push_back(std::move(trial.p));
  }
  return cal;
}

namespace {

// Σ log p(continuation | prefix) for each (prefix, continuation) pair, batched: rows prefix + continuation (but its
// last token), right-padded — a causal model's rows never see what follows them, so the padding changes nothing —,
// with the LM head applied only at the rows that predict a continuation token.
std::vector<double> continuation_logprobs(models::Model& model, const std::vector<const std::vector<int64_t>*>& prefixes,
                                          const std::vector<const std::vector<int64_t>*>& continuations, int64_t batch_size) {
  torch::NoGradGuard no_grad;
  std::vector<double> out;
  const auto n = static_cast<int64_t>(prefixes.size());
  for (int64_t first = 0; first < n; first += batch_size) {
    const int64_t b = std::min(batch_size, n - first);
    int64_t t = 0;
    for (int64_t i = 0; i < b; ++i) t = std::max<int64_t>(t, prefixes[first + i]->size() + continuations[first + i]->size() - 1);
    auto ids = torch::zeros({b, t}, torch::kLong);
    auto at = torch::zeros({b, t}, torch::kBool);
    std::vector<int64_t> targets;
    auto ia = ids.accessor<int64_t, 2>();
    auto aa = at.accessor<bool, 2>();
    for (int64_t i = 0; i < b; ++i) {
      const auto& p = *prefixes[first + i];
      const auto& c = *continuations[first + i];
      const auto np = static_cast<int64_t>(p.size()), nc = static_cast<int64_t>(c.size());
      for (int64_t j = 0; j < np; ++j) ia[i][j] = p[j];
      for (int64_t j = 0; j + 1 < nc; ++j) ia[i][np + j] = c[j];
      for (int64_t j = 0; j < nc; ++j) {
        aa[i][np - 1 + j] = true;  // row np-1+j predicts c[j]
        targets.push_back(c[j]);
      }
    }
    const auto device = models::device_of(model);
    models::ForwardInputs in;
    in.input_ids = ids.to(device);
    in.logits_positions = at.to(device);
    auto logp = torch::log_softmax(model.forward(in).logits.to(torch::kFloat), -1);  // [N, V], row-major order of `at`
    const auto picked = host(logp.gather(1, torch::tensor(targets, torch::kLong).to(device).unsqueeze(1)).squeeze(1).to(torch::kDouble));
    auto pa = picked.accessor<double, 1>();
    int64_t row = 0;
    for (int64_t i = 0; i < b; ++i) {
      double s = 0;
      for (size_t j = 0; j < continuations[first + i]->size(); ++j) s += pa[row++];
      out.push_back(s);
    }
  }
  return out;
}

// Σ over the sequences of ids [b, t] of each one's mean next-token NLL over the rows [from, to) of `ranges` (row r
// predicts token r + 1), one sum per range, from one forward pass. The LM head is applied by train::lm_head_loss,
// chunk by chunk of the scored rows, so that the [b, t, V] logits (410 MB for a batch of 8 copy segments of 2 × 128
// tokens) are never written whole and streamed again by log-sum-exp and gather. What that saves is within the
// run-to-run spread of the probe's time (K = 8 at the quick scale: 288 and 299 s in two quiet runs, ~303 s before);
// the head's GEMM itself is about two thirds of a measurement's FLOPs.
// Every sequence scores the same number of rows, so the mean over all scored rows is the mean of the sequences' means —
// unless `unscored` tokens (the document start, no target) leave some rows out: then it is the batch's mean over the
// rows it scores, counted once per sequence.
std::vector<double> range_nll_sums(models::Model& model, const at::Tensor& cpu_ids, const std::vector<std::pair<int64_t, int64_t>>& ranges,
                                   const std::vector<int64_t>& unscored = {}) {
  const auto weight = model.lm_head_weight();
  MIMIC_CHECK(weight.defined(), "the probe measures a causal LM with an LM head; this model has none");
  const auto ids = cpu_ids.to(models::device_of(model));
  models::ForwardInputs in;
  in.input_ids = ids;
  in.lm_head = false;
  const auto hidden = model.forward(in).last_hidden_state;
  const auto head = weight.to(hidden.scalar_type());
  const auto b = ids.size(0), t = ids.size(1);
  std::vector<double> sums;
  for (const auto& [from, to] : ranges) {
    auto labels = torch::full({b, t}, -100, ids.options());
    labels.slice(1, from, to).copy_(ids.slice(1, from + 1, to + 1));
    if (!unscored.empty()) labels.masked_fill_(torch::isin(labels, torch::tensor(unscored, torch::kLong).to(labels.device())), -100);
    sums.push_back(train::lm_head_loss(hidden, head, labels).item<double>() * static_cast<double>(b));
  }
  return sums;
}

}  // namespace

ProbeMeasure probe_measure(models::Model& model, const ProbeCalibration& cal, int64_t batch_size) {
  MIMIC_CHECK(!cal.copy_segments.empty(), "the probe's calibration set holds no copy segment");
  MIMIC_CHECK(batch_size >= 1, "probe batch size must be >= 1");
  torch::NoGradGuard no_grad;
  model.module().eval();
  ProbeMeasure m;
  const auto n = static_cast<int64_t>(cal.copy_segments.size());
  const auto len = static_cast<int64_t>(cal.copy_segments[0].size());
  const auto open = static_cast<int64_t>(cal.opening.size());
  double first_sum = 0, second_sum = 0;
  for (int64_t first = 0; first < n; first += batch_size) {
    const int64_t b = std::min(batch_size, n - first);
    const auto ids = eval::copy_runs(cal.copy_segments, first, b, cal.opening);
    // Rows 0..L-2 score the first copy's tokens 1..L-1, rows L..2L-2 the same tokens in the second copy (eval/copy.h),
    // each shifted by the opening.
    const auto sums = range_nll_sums(model, ids, {{open, open + len - 1}, {open + len, open + 2 * len - 1}});
    first_sum += sums[0];
    second_sum += sums[1];
  }
  const double first_nll = first_sum / static_cast<double>(n);
  m.copy_gain = first_nll - second_sum / static_cast<double>(n);
  m.lm_loss = first_nll;  // without LM windows; with them, their second halves below
  if (!cal.lm_windows.empty()) {
    const auto w = static_cast<int64_t>(cal.lm_windows.size()), wl = static_cast<int64_t>(cal.lm_windows[0].size());
    double sum = 0;
    for (int64_t first = 0; first < w; first += batch_size) {
      const int64_t b = std::min(batch_size, w - first);
      auto ids = torch::empty({b, wl}, torch::kLong);
      for (int64_t i = 0; i < b; ++i) {
        const auto& s = cal.lm_windows[static_cast<size_t>(first + i)];
        MIMIC_CHECK(static_cast<int64_t>(s.size()) == wl, "the probe's LM windows must all have ", wl, " tokens");
        ids[i].copy_(torch::tensor(s, torch::kLong));
      }
      // Rows wl/2-1 .. wl-2 predict tokens wl/2 .. wl-1: the second half, the positions `eval`'s default stride scores.
      // (the document start no target, as eval scores none: the windows are cut from the stream, <s> after every </s>)
      sum += range_nll_sums(model, ids, {{wl / 2 - 1, wl - 1}}, cal.opening)[0];
    }
    m.lm_loss = sum / static_cast<double>(w);
  }
  if (!cal.passkeys.empty()) {
    std::vector<const std::vector<int64_t>*> prefixes, continuations;
    for (const auto& p : cal.passkeys) {
      prefixes.push_back(&p.prompt), continuations.push_back(&p.key);
      prefixes.push_back(&p.decoy_prompt), continuations.push_back(&p.key);
    }
    auto lp = continuation_logprobs(model, prefixes, continuations, batch_size);
    double sum = 0;
    for (size_t i = 0; i < lp.size(); i += 2) sum += lp[i] - lp[i + 1];
    m.key_gain = sum / static_cast<double>(cal.passkeys.size());
  }
  MIMIC_CHECK(std::isfinite(m.copy_gain) && std::isfinite(m.lm_loss) && std::isfinite(m.key_gain),
              "the probe's measurement is not finite (copy gain ", m.copy_gain, ", LM loss ", m.lm_loss, ", key gain ", m.key_gain,
              "): the model's weights or logits are not finite");
  return m;
}

int64_t probe_passkeys_ranked_first(models::Model& model, const ProbeCalibration& cal) {
  // One prefill per trial and the candidates decoded from it (eval::score_continuations, what the eval ranks by):
  // a tenth of the work of running every candidate with its prompt.
  torch::NoGradGuard no_grad;
  model.module().eval();
  int64_t first = 0;
  for (const auto& p : cal.passkeys) {
    std::vector<std::vector<int64_t>> candidates{p.key};
    candidates.insert(candidates.end(), p.alternatives.begin(), p.alternatives.end());
    auto lp = eval::score_continuations(model, p.prompt, candidates);
    first += eval::rank_of(lp[0], {lp.begin() + 1, lp.end()}) == 1;
  }
  return first;
}

// ---------------------------------------------------------------------------------------------- the score

double probe_score(const ProbeMeasure& m, const ProbeMeasure& teacher, const ProbeWeights& w) {
  double s = 0;
  if (w.copy > 0 && teacher.copy_gain >= kProbeFloor) s += w.copy * m.copy_gain / teacher.copy_gain;
  if (w.passkey > 0 && teacher.key_gain >= kProbeFloor) s += w.passkey * m.key_gain / teacher.key_gain;
  s -= w.lm * (m.lm_loss - teacher.lm_loss);
  return s;
}

ProbeWeights parse_probe_weights(const std::string& spec) {
  ProbeWeights w;
  std::set<std::string> seen;
  size_t at = 0;
  while (at < spec.size()) {
    const size_t comma = std::min(spec.find(',', at), spec.size());
    const std::string item = spec.substr(at, comma - at);
    const auto eq = item.find('=');
    const std::string key = eq == std::string::npos ? item : item.substr(0, eq);
    auto v = eq == std::string::npos ? std::nullopt : parse_number(item.substr(eq + 1));
    MIMIC_CHECK(v && std::isfinite(*v), "--probe-weights: '", item, "' is not NAME=VALUE with a number >= 0 (names: copy, passkey, lm)");
    MIMIC_CHECK(seen.insert(key).second, "--probe-weights: ", key, " given twice");
    if (key == "copy") w.copy = *v;
    else if (key == "passkey") w.passkey = *v;
    else if (key == "lm") w.lm = *v;
    else fail("--probe-weights: unknown term '", key, "' (known: copy, passkey, lm)");
    at = comma + 1;
  }
  MIMIC_CHECK(w.copy > 0 || w.passkey > 0, "--probe-weights: copy and passkey are both 0: the probe would rank heads by LM loss alone");
  return w;
}

// ---------------------------------------------------------------------------------------------- greedy selection

GreedyPlacement greedy_placement(const HeadSetMeasure& measure, const std::vector<HeadRef>& candidates, const GreedyOptions& o) {
  MIMIC_CHECK(!candidates.empty(), "placement: no candidate heads");
  MIMIC_CHECK((o.count > 0) != (o.share > 0), "placement: give a number of heads or a share of the teacher's copy gain, one of them");
  MIMIC_CHECK(o.count <= static_cast<int64_t>(candidates.size()), o.option, " auto:", o.count, ": K must be in [1, ", candidates.size(),
              "] (the heads of the converted layers)");
  MIMIC_CHECK(o.share <= 1, "placement: the share must be at most 1");
  MIMIC_CHECK(o.leaders >= 1, "--probe-leaders must be >= 1, got ", o.leaders);
  MIMIC_CHECK(std::set<HeadRef>(candidates.begin(), candidates.end()).size() == candidates.size(), "placement: candidate heads repeat");
  const auto t0 = std::chrono::steady_clock::now();
  auto since = [](std::chrono::steady_clock::time_point t) { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count(); };
  GreedyPlacement g;
  std::map<std::vector<HeadRef>, ProbeMeasure> seen;
  auto measured = [&](std::vector<HeadRef> set) {
    std::sort(set.begin(), set.end());
    auto it = seen.find(set);
    if (it != seen.end()) return it->second;
    ++g.measured;
    return seen.emplace(set, measure(set)).first->second;
  };
  const auto n = static_cast<int64_t>(candidates.size());
  Progress screen_bar("probe screen", 2 + 2 * n, "set");
  if (!o.progress) screen_bar.disable();
  g.student = measured({});
  g.teacher = measured(candidates);
  screen_bar.advance(2);
  MIMIC_CHECK(o.share == 0 || g.teacher.copy_gain >= kProbeFloor, o.option, " auto:", o.share * 100,
              "%: the teacher gains ", g.teacher.copy_gain, " nats/token on the probe's copy segments — no in-context copying to keep a "
              "share of; give a number of heads (auto:K)");
  auto score = [&](const ProbeMeasure& m) { return probe_score(m, g.teacher, o.weights); };
  g.student_score = score(g.student);
  g.teacher_score = score(g.teacher);
  for (const auto& c : candidates) {
    ScreenRow row{c};
    row.restore = score(measured({c})) - g.student_score;
    std::vector<HeadRef> others;
    for (const auto& x : candidates)
      if (!(x == c)) others.push_back(x);
    row.ablate = g.teacher_score - score(measured(others));
    g.screen.push_back(row);
    screen_bar.advance(2, "head " + head_name(c));  // labelled: a bare "5.5" ended the line (helper-68)
  }
  screen_bar.finish();
  std::stable_sort(g.screen.begin(), g.screen.end(), [](const ScreenRow& a, const ScreenRow& b) { return a.value() > b.value(); });

  std::vector<HeadRef> pool;
  size_t next = 0;  // the next screen row to join the pool
  auto refill = [&]() {
    for (int64_t added = 0; added < o.leaders && next < g.screen.size(); ++next, ++added) pool.push_back(g.screen[next].head);
  };
  refill();
  ProbeMeasure current = g.student;
  double current_score = g.student_score;
  // counted by the sets tried, each a probe measurement, so that the bar moves within a head's step (by heads it
  // stood still for minutes: helper-57's probe of 2026-12-04). With a number of heads the total is known: the pool's
  // size at each step, as refill keeps it; with a share it is not.
  int64_t sets_total = 0;
  if (o.count > 0) {
    size_t in_pool = pool.size(), joined = next;
    for (int64_t step = 0; step < o.count; ++step) {
      if (in_pool == 0) {
        in_pool = std::min<size_t>(static_cast<size_t>(o.leaders), g.screen.size() - joined);
        joined += in_pool;
      }
      if (in_pool == 0) break;
      sets_total += static_cast<int64_t>(in_pool--);
    }
  }
  Progress bar("probe greedy", sets_total, "set");
  if (!o.progress) bar.disable();
  while (true) {
    if (o.count > 0 && static_cast<int64_t>(g.kept.size()) == o.count) break;
    if (o.share > 0 && current.copy_gain >= o.share * g.teacher.copy_gain) break;
    if (pool.empty()) refill();
    if (pool.empty()) {
      g.reached = false;  // every candidate kept and the share still not reached
      break;
    }
    const auto ts = std::chrono::steady_clock::now();
    const int64_t before = g.measured;
    size_t best = 0;
    double best_score = -std::numeric_limits<double>::infinity();
    ProbeMeasure best_measure;
    PlacementStep step;
    for (size_t i = 0; i < pool.size(); ++i) {
      auto set = g.kept;
      set.push_back(pool[i]);
      auto m = measured(set);
      bar.advance(1, "head " + std::to_string(g.kept.size() + 1) + ": " + head_name(pool[i]));
      const double s = score(m);
      step.candidates.emplace_back(pool[i], s);
      if (s > best_score) best = i, best_score = s, best_measure = m;
    }
    step.head = pool[best];
    step.score_before = current_score;
    step.score_after = best_score;
    step.measure = best_measure;
    step.measured = g.measured - before;
    step.seconds = since(ts);
    g.steps.push_back(step);
    g.kept.push_back(pool[best]);
    pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(best));
    current = best_measure;
    current_score = best_score;
  }
  bar.finish();
  g.seconds = since(t0);
  return g;
}

// ---------------------------------------------------------------------------------------------- on a model

HeadPlacer::HeadPlacer(models::Model& model, std::map<int64_t, std::shared_ptr<attention::DistillableKernel>> students)
    : model_(model), n_head_(model.summary().n_head), students_(std::move(students)) {
  for (const auto& [l, student] : students_) {
    MIMIC_CHECK(l >= 0 && l < model.summary().n_layer && student, "placement: no student for layer ", l);
    originals_[l] = model.attention_kernel(l);
  }
}

std::vector<int64_t> HeadPlacer::place(const std::vector<HeadRef>& kept) {
  std::vector<int64_t> converted;
  for (const auto& [l, student] : students_) {
    const auto heads = heads_in_layer(kept, l);
    if (static_cast<int64_t>(heads.size()) == n_head_) {
      model_.set_attention_kernel(l, originals_.at(l));
      continue;
    }
    converted.push_back(l);
    if (heads.empty()) {
      model_.set_attention_kernel(l, student);
    } else {
      model_.set_attention_kernel(l, std::make_shared<attention::MixedAttention>(heads, student, n_head_));
    }
  }
  return converted;
}

std::vector<HeadRef> HeadPlacer::candidates() const {
  std::vector<HeadRef> all;
  for (const auto& [l, student] : students_)
    for (int64_t h = 0; h < n_head_; ++h) all.push_back({l, h});
  return all;
}

ProbeResult run_probe(models::Model& model, HeadPlacer& placer, const ProbeCalibration& cal, const GreedyOptions& o, int64_t batch_size) {
  auto g = greedy_placement(
      [&](const std::vector<HeadRef>& kept) {
        placer.place(kept);
        return probe_measure(model, cal, batch_size);
      },
      placer.candidates(), o);
  ProbeResult r{g.kept, placement_json(g, o, cal)};
  if (!cal.passkeys.empty()) {
    auto ranked = [&](const std::vector<HeadRef>& kept) {
      placer.place(kept);
      return probe_passkeys_ranked_first(model, cal);
    };
    r.record["teacher"]["passkey_ranked_first"] = ranked(placer.candidates());
    std::vector<HeadRef> prefix;
    r.record["student"]["passkey_ranked_first"] = ranked(prefix);
    for (size_t i = 0; i < g.kept.size(); ++i) {
      prefix.push_back(g.kept[i]);
      r.record["steps"][i]["passkey_ranked_first"] = ranked(prefix);
    }
  }
  placer.place(g.kept);
  return r;
}

}  // namespace mimic::convert
