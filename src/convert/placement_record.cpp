// The probe's record and caveat: what a placement measured and chose, as mimic.json's placement keeps it, and what a
// user must know before trusting it (placement.h).
#include "mimic/convert/placement.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "mimic/core/words.h"

namespace mimic::convert {

namespace {
nlohmann::json measure_json(const ProbeMeasure& m, double score) {
  return {{"copy_gain", m.copy_gain}, {"key_gain", m.key_gain}, {"lm_loss", m.lm_loss}, {"score", score}};
}
}  // namespace

std::string placement_caveat(const GreedyPlacement& g, const GreedyOptions& o) {
  std::string caveat;
  const bool copy = o.weights.copy > 0 && g.teacher.copy_gain >= kProbeFloor, passkey = o.weights.passkey > 0 && g.teacher.key_gain >= kProbeFloor;
  if (!copy && !passkey) {
    char line[320];
    std::snprintf(line, sizeof line, "the teacher shows no recall on the probe's text (copy gain %.3f, passkey key gain %.3f nats: "
                  "below %.2f, or weighed 0), so the heads were ranked by LM loss alone", g.teacher.copy_gain, g.teacher.key_gain, kProbeFloor);
    caveat = line;
  }
  // A teacher that copies and a kept set that keeps little of it: the LM term (in nats) can outweigh the copy share, and a
  // few heads may hold no whole circuit. Three heads chosen for LM loss kept -0.013 of the teacher's 2.646 nats without
  // a word (helper-73's probe).
  if (copy && !g.steps.empty() && g.steps.back().measure.copy_gain < kLittleRecall * g.teacher.copy_gain) {
    char line[320];
    std::snprintf(line, sizeof line, "%.0f%% of the teacher's copy gain on the probe (%.3f of %.3f nats/token): "
                  "more heads, or --probe-weights with less lm, keep more of it",
                  100 * g.steps.back().measure.copy_gain / g.teacher.copy_gain, g.steps.back().measure.copy_gain, g.teacher.copy_gain);
    caveat += (caveat.empty() ? "the " : "; the ") + count_of(static_cast<int64_t>(g.kept.size()), "head") +
              (g.kept.size() == 1 ? " kept recovers " : " kept recover ") + line;
  }
  double most = 0;  // the largest change of the score any head made, in the screen or a step
  for (const auto& r : g.screen) most = std::max({most, std::abs(r.restore), std::abs(r.ablate)});
  for (const auto& s : g.steps) most = std::max(most, std::abs(s.score_after - s.score_before));
  if (!g.kept.empty() && most < kIndistinct) {
    char line[320];
    std::snprintf(line, sizeof line, "the probe could not tell the heads apart (no head changed its score by %g or more): the %zu kept are "
                  "arbitrary; give a list of heads, or --probe-data with text the teacher copies", kIndistinct, g.kept.size());
    caveat += (caveat.empty() ? "" : "; ") + std::string(line);
  }
  return caveat;
}

nlohmann::json placement_json(const GreedyPlacement& g, const GreedyOptions& o, const ProbeCalibration& cal) {
  nlohmann::json screen = nlohmann::json::array(), steps = nlohmann::json::array(), kept = nlohmann::json::array();
  for (const auto& r : g.screen)
    screen.push_back({{"layer", r.head.layer}, {"head", r.head.head}, {"restore", r.restore}, {"ablate", r.ablate}});
  for (const auto& s : g.steps) {
    auto j = measure_json(s.measure, s.score_after);
    nlohmann::json tried = nlohmann::json::array();
    for (const auto& [h, score] : s.candidates) tried.push_back({{"layer", h.layer}, {"head", h.head}, {"score", score}});
    j.update({{"layer", s.head.layer}, {"head", s.head.head}, {"score_before", s.score_before}, {"score_after", s.score_after},
              {"measured", s.measured}, {"seconds", s.seconds}, {"candidates", tried}});
    steps.push_back(j);
  }
  for (const auto& h : g.kept) kept.push_back({{"layer", h.layer}, {"head", h.head}});
  const int64_t segment_len = cal.copy_segments.empty() ? 0 : static_cast<int64_t>(cal.copy_segments[0].size());
  return {{"placement", "probe"},
          {"reason", "greedy forward selection by measured effect: the head whose restoring to softmax raises the probe's score most, "
                     "measured again with the heads chosen before it kept"},
          {"weights", {{"copy", o.weights.copy}, {"passkey", o.weights.passkey}, {"lm", o.weights.lm}}},
          {"score", "copy * g/g_teacher + passkey * k/k_teacher - lm * (L - L_teacher); a term whose teacher value is below 0.05 is left out"},
          {"calibration", {{"source", cal.source}, {"copy_segments", cal.copy_segments.size()}, {"segment_len", segment_len},
                           {"lm_windows", cal.lm_windows.size()}, {"lm_len", cal.lm_windows.empty() ? 0 : cal.lm_windows[0].size()},
                           {"passkeys", cal.passkeys.size()}, {"seed", cal.seed}}},
          {"leaders", o.leaders},
          {"teacher", measure_json(g.teacher, g.teacher_score)},
          {"student", measure_json(g.student, g.student_score)},
          {"screen", screen},
          {"steps", steps},
          {"kept", kept},
          {"reached", g.reached},
          {"caveat", placement_caveat(g, o)},
          {"measured", g.measured},
          {"seconds", g.seconds}};
}

}  // namespace mimic::convert
