#include "mimic/report/quality.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>
#include <tuple>

#include "mimic/core/error.h"
#include "mimic/core/json_keys.h"
#include "mimic/eval/metrics.h"
#include "mimic/io/atomic_file.h"
#include "mimic/io/safetensors.h"
#include "mimic/report/figures.h"
#include "mimic/report/report.h"

namespace fs = std::filesystem;

namespace mimic::report {

namespace {

// An eval result is a few kB; anything far larger is not one (checked before reading it).
constexpr uintmax_t kMaxResultBytes = 16u << 20;

QualityRow& row_for(std::vector<QualityRow>& rows, const std::string& label) {
  for (auto& r : rows)
    if (r.label == label) return r;
  rows.push_back(QualityRow{});
  rows.back().label = label;
  return rows.back();
}

void read_lm(QualityRow& r, const nlohmann::json& j, const std::string& where) {
  MIMIC_CHECK(std::isnan(r.perplexity), where, ": a second perplexity result for '", r.label, "' (one file per task and label)");
  r.perplexity = json_double(j, "perplexity", where);
  MIMIC_CHECK(std::isfinite(r.perplexity) && r.perplexity >= 1, where, ": perplexity must be a number >= 1, got ", r.perplexity);
  r.predicted = json_int(j, "predicted", where, 1);
  r.data = json_string_or(j, "data", where, "");
  if (j.contains("perplexity_ci95")) {
    const auto& ci = j["perplexity_ci95"];
    MIMIC_CHECK(ci.is_array() && ci.size() == 2 && ci[0].is_number() && ci[1].is_number(), where,
                ": perplexity_ci95 must be [low, high]");
    r.perplexity_lo = ci[0].get<double>(), r.perplexity_hi = ci[1].get<double>();
  }
}

void read_copy(QualityRow& r, const nlohmann::json& top, const nlohmann::json& j, const std::string& where) {
  MIMIC_CHECK(std::isnan(r.copy_gain), where, ": a second copy result for '", r.label, "' (one file per task and label)");
  r.copy_gain = json_double(j, "copy_gain", where);
  // eval writes a null interval for one segment (`--segments 1`, which its own refusal of a short text suggests): read
  // as none, where report refused the file eval wrote (helper-94's probe)
  r.copy_ci95 = json_key(j, "copy_gain_ci95", where).is_null() ? QualityRow::kNaN : json_double(j, "copy_gain_ci95", where);
  MIMIC_CHECK(std::isfinite(r.copy_gain) && (std::isnan(r.copy_ci95) || (std::isfinite(r.copy_ci95) && r.copy_ci95 >= 0)), where,
              ": copy_gain must be a finite number and copy_gain_ci95 one >= 0 or null (one segment)");
  r.segments = json_int(top, "segments", where, 1);
  r.segment_len = json_int(top, "segment_len", where, 1);
}

void read_passkey(QualityRow& r, const nlohmann::json& j, const std::string& where) {
  MIMIC_CHECK(r.passkey.empty(), where, ": a second passkey result for '", r.label, "' (one file per task and label)");
  const auto& rows = json_key(j, "rows", where);
  MIMIC_CHECK(rows.is_array() && !rows.empty(), where, ": rows must be a non-empty list");
  for (const auto& row : rows) {
    PasskeyCell c;
    c.length = json_int(row, "length", where + " (rows)", 1);
    c.trials = json_int(row, "trials", where + " (rows)", 1);
    c.ranked_first = json_int(row, "ranked_first", where + " (rows)", 0, c.trials);
    std::tie(c.lo, c.hi) = eval::wilson95(c.ranked_first, c.trials);
    r.passkey.push_back(c);
  }
  r.chance = json_double_or(j, "chance", where, QualityRow::kNaN);
}

// `recall`: --task mqar's (accuracy over its queries, with eval's interval); else --task cls's (with F1 and MCC)
void read_accuracy(QualityRow& r, const nlohmann::json& top, const nlohmann::json& j, const std::string& where, const std::string& task) {
  MIMIC_CHECK(std::isnan(r.accuracy), where, ": a second accuracy result for '", r.label, "' (one file per task and label)");
  r.accuracy_task = task;
  r.accuracy = json_double(j, "accuracy", where);
  MIMIC_CHECK(std::isfinite(r.accuracy) && r.accuracy >= 0 && r.accuracy <= 1, where, ": accuracy must lie in [0, 1], got ", r.accuracy);
  if (task == "cls") {
    r.accuracy_n = json_int(j, "n", where, 1);
    r.f1 = json_double(j, "f1", where);
    r.mcc = json_double(j, "mcc", where);
    MIMIC_CHECK(r.f1 >= 0 && r.f1 <= 1, where, ": f1 must lie in [0, 1], got ", r.f1);
    MIMIC_CHECK(r.mcc >= -1 && r.mcc <= 1, where, ": mcc must lie in [-1, 1], got ", r.mcc);
    r.accuracy_data = json_string_or(j, "data", where, "");
    // eval reports a classifier's accuracy without an interval: Wilson's over its n examples, as for the queries
    std::tie(r.accuracy_lo, r.accuracy_hi) = eval::wilson95(std::llround(r.accuracy * static_cast<double>(r.accuracy_n)), r.accuracy_n);
  } else {
    r.accuracy_n = json_int(j, "queries", where, 1);
    const auto& ci = json_key(j, "accuracy_ci95", where);
    MIMIC_CHECK(ci.is_array() && ci.size() == 2 && ci[0].is_number() && ci[1].is_number(), where, ": accuracy_ci95 must be [low, high]");
    r.accuracy_lo = ci[0].get<double>(), r.accuracy_hi = ci[1].get<double>();
    // an interval that is no interval of this accuracy was printed as given ("0.000 (0.900-0.100)": helper-53's probe)
    MIMIC_CHECK(0 <= r.accuracy_lo && r.accuracy_lo <= r.accuracy && r.accuracy <= r.accuracy_hi && r.accuracy_hi <= 1, where,
                ": accuracy_ci95 must be [low, high] around the accuracy ", r.accuracy, " within [0, 1], got ", ci.dump());
    r.accuracy_data = json_string_or(top, "data", where, "");
  }
}

std::string fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string esc(const std::string& s) { return html_escape(s); }

// The reference's copy gain counts only when its interval stays above zero.
const QualityRow* copy_reference(const std::vector<QualityRow>& rows) {
  for (const auto& r : rows)
    if (std::isfinite(r.copy_gain)) return r.copy_gain - r.copy_ci95 > 0 ? &r : nullptr;
  return nullptr;
}

}  // namespace

std::vector<QualityRow> read_quality(const std::vector<std::string>& entries) {
  std::vector<QualityRow> rows;
  for (const auto& entry : entries) {
    const auto labelled = split_labelled(entry);
    std::string label = labelled.first;
    const std::string path = labelled.second;  // named, not bound: the lambdas below capture it
    if (label.empty()) label = fs::path(path).stem().string();
    MIMIC_CHECK(fs::exists(path), "--eval: no file ", path);
    io::require_regular_file(path);  // a FIFO, a device or a folder named as such (it said "no file": the seventh probe)
    // a record given as --eval read as "malformed JSON: a NUL byte at offset 8", or, past 16 MiB, as too big (the
    // newcomer probe of 2026-12-01): its signature first
    MIMIC_CHECK(io::file_kind(path) != std::optional<std::string>(io::kHdf5File), path,
                ": an HDF5 file (a mimic record?), not an eval result (what mimic eval --json printed)");
    MIMIC_CHECK(fs::file_size(path) <= kMaxResultBytes, path, ": ", fs::file_size(path), " bytes is not an eval result (a few kB)");
    const auto top = json_parse(io::read_text_file(path), path);
    MIMIC_CHECK(top.is_object(), path, ": not an eval result (mimic eval --json of --task lm, copy, passkey, cls or mqar)");
    // a run with --teacher holds {"model": ..., "teacher": ...}: the row is the model's
    const auto& j = top.contains("model") && top["model"].is_object() ? top["model"] : top;
    const std::string task = top.contains("task") && top["task"].is_string() ? top["task"].get<std::string>() : "";
    // one side of a result into a row; `again_ok`: a second result of the same task is skipped, not refused
    auto read_side = [&](QualityRow& r, const nlohmann::json& side, bool again_ok) {
      const bool is_copy = task == "copy", is_passkey = !is_copy && (task == "passkey" || (side.contains("rows") && !side.contains("perplexity")));
      // a recall task's result names its task (and counts queries); a classifier's has no task: an accuracy without
      // one is read as a classifier's, so a key it lacks is named (it was called "no accuracy": helper-53's probe)
      const std::string accuracy_task = task == "mqar" || task == "ar" ? task
                                        : task.empty() && side.contains("accuracy") ? (side.contains("queries") ? "mqar" : "cls") : "";
      if (!is_copy && !is_passkey && accuracy_task.empty() && !side.contains("perplexity"))
        fail(path, ": not an eval result of --task lm, copy, passkey, cls or mqar (no perplexity, copy_gain, passkey rows or accuracy)");
      const bool again = is_copy ? std::isfinite(r.copy_gain) : is_passkey ? !r.passkey.empty()
                         : !accuracy_task.empty() ? std::isfinite(r.accuracy) : std::isfinite(r.perplexity);
      // one row is one model: results whose eval described another attention are two models under one label (they
      // merged without a word, the row keeping the first's description: helper-53's probe)
      const std::string attention = side.contains("attention") && side["attention"].is_string() ? side["attention"].get<std::string>() : "";
      MIMIC_CHECK(r.attention.empty() || attention.empty() || attention == r.attention, path, ": its ", r.label == "teacher" && again_ok ? "teacher" : "model",
                  " computes ", attention, ", the row '", r.label, "' (", r.files.empty() ? std::string("?") : r.files.front(), ") ", r.attention,
                  ": one label per model", again_ok ? " (the row 'teacher' holds the --teacher of every file: give another teacher's results "
                                                      "under a label of its own, from eval --json of that model)" : "");
      QualityRow fresh;
      fresh.label = r.label;
      QualityRow& into = again_ok && again ? fresh : r;
      if (is_copy) read_copy(into, top, side, path);
      else if (is_passkey) read_passkey(into, side, path);
      else if (!accuracy_task.empty()) read_accuracy(into, top, side, path, accuracy_task);
      else read_lm(into, side, path);
      if (&into == &fresh) {
        // the same teacher in several files is read once; another teacher's numbers were dropped without a word
        // (two --teacher runs of other teachers, or a classifier's and a recall task's teacher: helper-53's probe)
        // numbers within 1e-4 (relative, or absolute below 1) are the same: one teacher evaluated at another --threads
        // sums in another order, and was refused as a second teacher when compared bit for bit
        auto near = [](double a, double b) { return a == b || std::abs(a - b) <= 1e-4 * std::max({1.0, std::abs(a), std::abs(b)}); };
        const bool same = is_copy ? near(fresh.copy_gain, r.copy_gain) &&
                                        (near(fresh.copy_ci95, r.copy_ci95) || (std::isnan(fresh.copy_ci95) && std::isnan(r.copy_ci95)))
                          : is_passkey ? std::equal(fresh.passkey.begin(), fresh.passkey.end(), r.passkey.begin(), r.passkey.end(),
                                                    [](const PasskeyCell& a, const PasskeyCell& b) {
                                                      return a.length == b.length && a.trials == b.trials && a.ranked_first == b.ranked_first;
                                                    })
                          : !accuracy_task.empty() ? fresh.accuracy_task == r.accuracy_task && fresh.accuracy == r.accuracy && fresh.accuracy_n == r.accuracy_n
                                                   : near(fresh.perplexity, r.perplexity) && fresh.predicted == r.predicted;
        MIMIC_CHECK(same, path, ": its teacher's result differs from the row 'teacher' (", r.files.front(),
                    "): that row holds one teacher's results, one per task; give another teacher's results (or another task's accuracy) under a label "
                    "of its own, from eval --json of that model");
        return;
      }
      r.files.push_back(path);
      if (r.attention.empty()) r.attention = attention;
    };
    read_side(row_for(rows, label), j, false);
    // the teacher's side of a --teacher run: a row "teacher", first, so that shares are of its copy gain (the same
    // teacher in several files is read once per task)
    if (&j != &top && top.contains("teacher") && top["teacher"].is_object()) {
      if (std::none_of(rows.begin(), rows.end(), [](const QualityRow& q) { return q.label == "teacher"; })) {
        rows.insert(rows.begin(), QualityRow{});
        rows.front().label = "teacher";
      }
      read_side(row_for(rows, "teacher"), top["teacher"], true);
    }
  }
  return rows;
}

nlohmann::json quality_json(const std::vector<QualityRow>& rows) {
  const QualityRow* ref = copy_reference(rows);
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json j = {{"label", r.label}, {"files", r.files}, {"attention", r.attention}};
    if (std::isfinite(r.perplexity))
      j["perplexity"] = {{"value", r.perplexity}, {"ci95", {num(r.perplexity_lo), num(r.perplexity_hi)}}, {"tokens", r.predicted}, {"data", r.data}};
    if (std::isfinite(r.copy_gain)) {
      j["copy_gain"] = {{"value", r.copy_gain}, {"ci95", num(r.copy_ci95)}, {"segments", r.segments}, {"segment_len", r.segment_len}};
      j["copy_gain"]["share_of"] = ref ? nlohmann::json(ref->label) : nlohmann::json();
      j["copy_gain"]["share"] = ref ? nlohmann::json(r.copy_gain / ref->copy_gain) : nlohmann::json();
    }
    for (const auto& c : r.passkey)
      j["passkey"].push_back({{"length", c.length}, {"trials", c.trials}, {"ranked_first", c.ranked_first},
                              {"share", static_cast<double>(c.ranked_first) / static_cast<double>(c.trials)}, {"ci95", {c.lo, c.hi}}});
    if (!r.passkey.empty()) j["passkey_chance"] = num(r.chance);
    if (std::isfinite(r.accuracy)) {
      j["accuracy"] = {{"task", r.accuracy_task}, {"value", r.accuracy}, {"ci95", {r.accuracy_lo, r.accuracy_hi}}, {"n", r.accuracy_n},
                       {"data", r.accuracy_data}};
      if (r.accuracy_task == "cls") j["accuracy"].update({{"f1", r.f1}, {"mcc", r.mcc}});
    }
    out.push_back(j);
  }
  return out;
}

std::string quality_html(const std::vector<QualityRow>& rows) {
  if (rows.empty()) return "";
  const QualityRow* ref = copy_reference(rows);
  std::vector<int64_t> lengths;  // every passkey length any row has, ascending
  for (const auto& r : rows)
    for (const auto& c : r.passkey)
      if (std::find(lengths.begin(), lengths.end(), c.length) == lengths.end()) lengths.push_back(c.length);
  std::sort(lengths.begin(), lengths.end());
  bool any_ppl = false, any_copy = false, any_acc = false, any_cls = false;
  for (const auto& r : rows) {
    any_ppl |= std::isfinite(r.perplexity), any_copy |= std::isfinite(r.copy_gain), any_acc |= std::isfinite(r.accuracy);
    any_cls |= r.accuracy_task == "cls";
  }

  std::ostringstream h;
  std::vector<std::string> defined;  // one clause per measure shown, joined by "; "
  if (any_ppl) defined.push_back("<b>perplexity</b> on held-out text, with its 95% interval taking the scoring windows as independent samples");
  if (any_copy)
    defined.push_back("<b>copy gain</b>: nats per token better on the second reading of a passage than on the first (in-context recall), "
                      "&plusmn; its 95% interval, and its share of " +
                      (ref ? "<i>" + esc(ref->label) + "</i>'s" : std::string("the first row's (n/a: that gain's interval reaches zero)")));
  if (!lengths.empty())
    defined.push_back("<b>passkey</b>: trials in which the model ranked the hidden key first among the candidates, with the 95% Wilson "
                      "interval of the share");
  if (any_acc)
    defined.push_back("<b>accuracy</b>: the share of a classifier's examples (<code>--task cls</code>) or of a recall task's queried keys "
                      "(<code>--task mqar</code>) it got right, with the 95% Wilson interval");
  if (any_cls) defined.push_back("<b>F1</b> (binary: of the second label; else macro) and <b>MCC</b> of a classifier");
  // models given with --model and no results: the page says how to add them (it printed an empty sentence, ". .":
  // helper-57's probe of 2026-12-04)
  if (defined.empty()) {
    h << "<h2>Quality</h2>\n<p>No quality results given for these models: <code>mimic report --eval LABEL=FILE</code> (repeatable, "
         "LABEL a --model's) shows what <code>mimic eval --json</code> measured of each &mdash; perplexity, copy gain, passkey "
         "(docs/report.md).</p>\n";
  } else {
    h << "<h2>Quality</h2>\n<p>What <code>mimic eval</code> measured of each model (the files below). ";
    for (size_t i = 0; i < defined.size(); ++i) h << (i ? "; " : "") << defined[i];
    h << ". docs/recall.md defines each.</p>\n";
  }
  h << "<table><tr><th class=l>model</th>";
  if (any_ppl) h << "<th>perplexity</th><th>95% interval</th>";
  if (any_copy) h << "<th>copy gain</th><th>share</th>";
  for (auto l : lengths) h << "<th>passkey at " << l << "</th>";
  if (any_acc) h << "<th>accuracy</th><th>95% interval</th>";
  if (any_cls) h << "<th>F1</th><th>MCC</th>";
  h << "<th class=l>attention</th></tr>\n";
  for (const auto& r : rows) {
    h << "<tr><td class=l>" << esc(r.label) << "</td>";
    if (any_ppl) {
      if (std::isfinite(r.perplexity)) {
        h << "<td>" << fixed(r.perplexity, 1) << "</td><td>"
          << (std::isfinite(r.perplexity_lo) ? fixed(r.perplexity_lo, 1) + "&ndash;" + fixed(r.perplexity_hi, 1) : std::string("&ndash;"))
          << "</td>";
      } else {
        h << "<td>&ndash;</td><td>&ndash;</td>";
      }
    }
    if (any_copy) {
      if (std::isfinite(r.copy_gain))
        h << "<td>" << fixed(r.copy_gain, 2)
          << (std::isfinite(r.copy_ci95) ? " &plusmn; " + fixed(r.copy_ci95, 2) : std::string(" (one segment: no interval)")) << "</td><td>"
          << (ref ? fixed(100 * r.copy_gain / ref->copy_gain, 0) + "%" : std::string("n/a")) << "</td>";
      else
        h << "<td>&ndash;</td><td>&ndash;</td>";
    }
    for (auto l : lengths) {
      auto it = std::find_if(r.passkey.begin(), r.passkey.end(), [&](const PasskeyCell& c) { return c.length == l; });
      if (it == r.passkey.end()) {
        h << "<td>&ndash;</td>";
        continue;
      }
      h << "<td>" << it->ranked_first << "/" << it->trials << " (" << fixed(100 * it->lo, 0) << "&ndash;" << fixed(100 * it->hi, 0)
        << "%)</td>";
    }
    if (any_acc) {
      if (std::isfinite(r.accuracy))
        h << "<td>" << fixed(r.accuracy, 3) << "</td><td>" << fixed(r.accuracy_lo, 3) << "&ndash;" << fixed(r.accuracy_hi, 3) << "</td>";
      else
        h << "<td>&ndash;</td><td>&ndash;</td>";
    }
    if (any_cls) {
      if (r.accuracy_task == "cls")
        h << "<td>" << fixed(r.f1, 3) << "</td><td>" << fixed(r.mcc, 3) << "</td>";
      else
        h << "<td>&ndash;</td><td>&ndash;</td>";
    }
    h << "<td class=l>" << esc(r.attention) << "</td></tr>\n";
  }
  h << "</table>\n";
  double chance = QualityRow::kNaN;
  for (const auto& r : rows)
    if (std::isfinite(r.chance)) chance = r.chance;
  if (std::isfinite(chance)) h << "<p>Passkey chance level: " << fixed(100 * chance, 0) << "%.</p>\n";
  std::vector<std::string> sizes, parts;
  for (const auto& r : rows) {
    std::string part;
    if (std::isfinite(r.perplexity)) part += "perplexity on " + std::to_string(r.predicted) + " tokens" + (r.data.empty() ? "" : " of " + esc(r.data));
    if (std::isfinite(r.copy_gain))
      part += std::string(part.empty() ? "" : ", ") + "copy gain over " + std::to_string(r.segments) + " passages of " + std::to_string(r.segment_len) + " tokens";
    if (std::isfinite(r.accuracy))
      part += std::string(part.empty() ? "" : ", ") + "accuracy over " + std::to_string(r.accuracy_n) +
              (r.accuracy_task == "cls" ? " examples" : " queried keys") + (r.accuracy_data.empty() ? "" : " of " + esc(r.accuracy_data));
    if (!part.empty()) sizes.push_back(esc(r.label) + ": " + part), parts.push_back(part);
  }
  if (parts.size() > 1 && std::all_of(parts.begin(), parts.end(), [&](const std::string& p) { return p == parts.front(); }))
    sizes = {"each model: " + parts.front()};  // one sentence when every model was measured alike
  if (!sizes.empty()) {
    h << "<p>Sample sizes &mdash; ";
    for (size_t i = 0; i < sizes.size(); ++i) h << (i ? "; " : "") << sizes[i];
    h << ".</p>\n";
  }
  return h.str();
}

}  // namespace mimic::report
