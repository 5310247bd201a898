// The quality side of a report: what `mimic eval --json` measured of each model — perplexity, in-context copy gain,
// passkey retrieval, accuracy (a classifier's, with F1 and MCC; a recall task's) — read from its result files and shown beside the attention metrics, each with its 95% interval,
// so that a report says what a conversion keeps and loses, not only how its weights look. docs/report.md.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace mimic::report {

struct PasskeyCell {
  int64_t length = 0;        // prompt length (tokens)
  int64_t trials = 0;
  int64_t ranked_first = 0;  // trials whose true key the model ranked first among the candidates
  double lo = 0, hi = 0;     // 95% interval of the share (Wilson)
};

struct QualityRow {
  static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  std::string label;
  std::vector<std::string> files;
  std::string attention;  // the model's attention, as eval described it (the first file that says)
  // --task lm
  double perplexity = kNaN, perplexity_lo = kNaN, perplexity_hi = kNaN;  // the interval only where eval gave one
  int64_t predicted = 0;
  std::string data;
  // --task copy: nats/token better on the second reading of a passage
  double copy_gain = kNaN, copy_ci95 = kNaN;
  int64_t segments = 0, segment_len = 0;
  // --task passkey, one cell per length
  std::vector<PasskeyCell> passkey;
  double chance = kNaN;
  // --task cls (on n examples, with F1 and MCC) or mqar/ar (on n queried keys): the share right, with its Wilson 95%
  // interval (a BERT user's report had attention metrics only: helper-52's probe of 2026-12-04)
  std::string accuracy_task;  // "cls", "mqar" or "ar"
  double accuracy = kNaN, accuracy_lo = kNaN, accuracy_hi = kNaN, f1 = kNaN, mcc = kNaN;
  int64_t accuracy_n = 0;
  std::string accuracy_data;
};

// Reads "LABEL=FILE" entries (FILE alone: its name without extension labels it). Each FILE is what `mimic eval
// --json` printed for --task lm, copy, passkey, cls or mqar; entries with the same label make one row, in the order the labels
// first appear, with one file of each task at most. A run with --teacher gives its model's side to LABEL and its
// teacher's to a row "teacher", placed first (read once per task however many files repeat it). Anything else is a
// mimic::Error naming the file.
std::vector<QualityRow> read_quality(const std::vector<std::string>& entries);

// The first row with a copy gain is the reference for the others' share of it; the share is null when that gain is
// not significant (its interval reaches zero): a ratio of noise.
nlohmann::json quality_json(const std::vector<QualityRow>& rows);
// An HTML section (heading, explanation, table); "" for no rows.
std::string quality_html(const std::vector<QualityRow>& rows);

}  // namespace mimic::report
