// A trade-off figure from a table of results: one curve per method, points (x, y) with labels — what a recipe
// draws to compare conversions, e.g. decoding state against the copy gain kept (recipes/gpt2-recall.sh).
// `mimic report --pareto TABLE.json --out DIR` writes DIR/pareto.png and DIR/pareto.svg.
//
// TABLE.json:
//   {"title": "...", "x_label": "...", "y_label": "...", "x_log": true,            (x_log optional, default false)
//    "series": [{"name": "probe placement", "points": [{"x": 1410, "y": 0.91, "label": "K=8"}, ...]}, ...],
//    "reference": {"y": 1.0, "label": "teacher"}}                                    (optional: a dashed line)
// Points of a series are joined in order of x; a missing label draws no text. Every number must be finite, x > 0
// on a log axis; a malformed table is a mimic::Error naming the key.
#pragma once
#include <string>
#include <vector>

namespace mimic::report {

// Reads TABLE.json and writes OUT_DIR/pareto.{png,svg} (OUT_DIR is created); returns the two paths.
std::vector<std::string> write_pareto(const std::string& table_path, const std::string& out_dir);

}  // namespace mimic::report
