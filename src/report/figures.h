// The figures and the HTML page of `mimic report`, drawn from the computed metrics and the drawn sample's
// weights (report.cpp gathers both while streaming the record).
#pragma once
#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace mimic::report {

// One source's metrics at one layer and head (NaN: undefined or absent).
struct HeadValues {
  double entropy = NAN, kl = NAN, ce = NAN, spearman = NAN, top_k = NAN;
  double induction = NAN, previous_token = NAN, local_mass = NAN;  // analysis/induction.h
};

// Each field's mean over the values where it is defined (core/mean.h; NaN where none is): the kept heads of a mixed
// model (no values), a head without a Spearman (its normaliser zero on every row) or an absent layer leave the others'
// mean.
HeadValues mean_where_defined(const std::vector<HeadValues>& values);

struct Metrics {
  std::vector<std::string> sources;  // 0: the teacher ("softmax")
  std::vector<int64_t> layers, heads;
  int64_t top_k = 0;
  double uniform_entropy = NAN;
  // [source][layer index][head index]; the last entry of each layer (index heads.size()) is the mean over heads
  std::vector<std::vector<std::vector<HeadValues>>> values;
  const HeadValues& mean(size_t source, size_t layer) const { return values[source][layer].back(); }
};

// The drawn sample's weights.
struct PlotData {
  int64_t heat_tokens = 0;
  // (layer, source, index into the drawn heads) → the first heat_tokens × heat_tokens weights, row-major
  std::map<std::tuple<int64_t, size_t, size_t>, std::vector<double>> heat;
  // (layer, source) → every visible (query, key) of the first drawn head: x = q·k·scale − the row's max,
  // y = weight ÷ the row's largest weight
  struct Points {
    std::vector<double> x, y;
  };
  std::map<std::pair<int64_t, size_t>, Points> mono;
};

struct Figure {
  std::string title, caption;
  std::vector<std::string> files;  // PNG first, then SVG (paths)
};

struct Figures {
  std::vector<Figure> heatmaps;
  Figure entropy, monotonicity, kl_grid;  // kl_grid: no files without a student
  Figure induction_grid;                   // every source, the teacher first
};

// draw_heads: indices into m.heads. Each writes OUT/<name>.png and .svg.
std::vector<Figure> write_heatmaps(const std::string& out, const Metrics& m, const PlotData& pd, const std::vector<int64_t>& layers,
                                   const std::vector<int64_t>& draw_heads, int64_t sample);
Figure write_entropy(const std::string& out, const Metrics& m);
Figure write_monotonicity(const std::string& out, const Metrics& m, const PlotData& pd, const std::vector<int64_t>& layers,
                          int64_t draw_head, int64_t sample);
Figure write_kl_grid(const std::string& out, const Metrics& m);  // needs at least one student
// The induction score of every layer × head, one grid per source (the teacher first): which heads are
// induction heads in the teacher, and whether each student keeps them.
Figure write_induction_grid(const std::string& out, const Metrics& m);

// report.html: the record, the sources, the metrics table (means over heads per layer and overall), the
// figures with captions; images referenced by relative names.
// Text made safe inside HTML (&, <, >, ").
std::string html_escape(const std::string& s);
// quality: the Quality section (quality_html), placed before the attention metrics; "" leaves a line on how to add one
std::string render_html(const nlohmann::json& record_info, const nlohmann::json& result, const Metrics& m, const Figures& figs,
                        const std::string& quality = "");

}  // namespace mimic::report
