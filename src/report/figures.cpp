#include "mimic/report/figures.h"

#include <cairo.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "mimic/core/mean.h"
#include "mimic/report/plot.h"

namespace fs = std::filesystem;

namespace mimic::report {

namespace {

std::string f(double v, int digits) {
  if (!std::isfinite(v)) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string two(int64_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%02lld", static_cast<long long>(v));
  return buf;
}

size_t layer_index(const Metrics& m, int64_t layer) {
  return static_cast<size_t>(std::find(m.layers.begin(), m.layers.end(), layer) - m.layers.begin());
}

Figure figure(const std::string& out, const std::string& name, int w, int h, const std::function<void(cairo_t*)>& draw) {
  Figure fig;
  fig.files = save_figure((fs::path(out) / name).string(), w, h, draw);
  return fig;
}

// Weights on a log scale from 10^-3 to 1 (0 and below: the darkest colour); NaN (keys the query does not see)
// stays NaN: light grey.
double log_weight(double v) { return std::isnan(v) ? v : std::log10(std::max(v, 1e-4)); }

}  // namespace

HeadValues mean_where_defined(const std::vector<HeadValues>& values) {
  HeadValues m;
  for (double HeadValues::*field : {&HeadValues::entropy, &HeadValues::kl, &HeadValues::ce, &HeadValues::spearman, &HeadValues::top_k,
                                    &HeadValues::induction, &HeadValues::previous_token, &HeadValues::local_mass}) {
    DefinedMean mean;
    for (const auto& v : values) mean.add(v.*field);
    m.*field = mean.value();
  }
  return m;
}

std::vector<Figure> write_heatmaps(const std::string& out, const Metrics& m, const PlotData& pd, const std::vector<int64_t>& layers,
                                   const std::vector<int64_t>& draw_heads, int64_t sample) {
  std::vector<Figure> figs;
  const int cols = static_cast<int>(m.sources.size()), rows = static_cast<int>(draw_heads.size());
  const double panel = 170, gap_x = 22, gap_y = 44, left = 78, top = 78, right = 130;
  const int W = static_cast<int>(left + cols * (panel + gap_x) + right), H = static_cast<int>(top + rows * (panel + gap_y) + 10);
  const int64_t p = pd.heat_tokens;
  for (auto layer : layers) {
    const size_t li = layer_index(m, layer);
    auto fig = figure(out, "heatmaps_layer" + two(layer), W, H, [&](cairo_t* cr) {
      fit_text(cr, left, 24, "Attention weights, layer " + std::to_string(layer) + ", sample " + std::to_string(sample) + ": first " +
                                 std::to_string(p) + " queries (rows) x keys (columns)", 17, W - left - 8, Align::Start, 0, true);
      for (int c = 0; c < cols; ++c) {
        const double x = left + c * (panel + gap_x);
        fit_text(cr, x + panel / 2, top - 18, m.sources[static_cast<size_t>(c)], 14, panel + gap_x - 6, Align::Middle, 0, true);
        for (int r = 0; r < rows; ++r) {
          const double y = top + r * (panel + gap_y);
          const auto hi = static_cast<size_t>(draw_heads[static_cast<size_t>(r)]);
          if (c == 0) text(cr, left - 16, y + panel / 2, "head " + std::to_string(m.heads[hi]), 14, Align::Middle, -90);
          auto it = pd.heat.find({layer, static_cast<size_t>(c), static_cast<size_t>(r)});
          if (it == pd.heat.end()) {
            set_colour(cr, {0.95, 0.95, 0.95});
            cairo_rectangle(cr, x, y, panel, panel);
            cairo_fill(cr);
            text(cr, x + panel / 2, y + panel / 2, "no kernel", 12, Align::Middle);
            continue;
          }
          std::vector<double> v(it->second.size());
          std::transform(it->second.begin(), it->second.end(), v.begin(), log_weight);
          draw_matrix(cr, x, y, panel, panel, v, p, p, viridis, -3, 0);
          set_colour(cr, {0.3, 0.3, 0.3});
          cairo_set_line_width(cr, 1);
          cairo_rectangle(cr, x, y, panel, panel);
          cairo_stroke(cr);
          const auto& hv = m.values[static_cast<size_t>(c)][li][hi];
          std::string label = "H " + f(hv.entropy, 2);
          if (c > 0) label += "   KL " + f(hv.kl, 3);
          set_colour(cr, {0.1, 0.1, 0.1});
          text(cr, x + panel / 2, y + panel + 14, label, 12, Align::Middle);
        }
      }
      draw_colour_bar(cr, left + cols * (panel + gap_x) + 8, top, 18, std::min(panel * rows, 320.0), viridis, -3, 0,
                      "weight (log scale)", 13, {"0.001", "0.01", "0.1", "1"}, {-3, -2, -1, 0});
    });
    fig.title = "Attention weights, layer " + std::to_string(layer);
    fig.caption =
        "Each square is one head's attention on sample " + std::to_string(sample) + ": row i = query token i, column j = key token j, " +
        "brighter = more weight (log colour scale; grey = keys the query cannot see). Softmax (left) is the teacher; a good student " +
        "shows the same bright spots. Under each square: H = mean row entropy and KL(softmax || student) of that head, averaged " +
        "over every reported sample and query.";
    figs.push_back(fig);
  }
  return figs;
}

Figure write_entropy(const std::string& out, const Metrics& m) {
  const int W = 800, H = 440;
  Axes a;
  a.x = 80, a.y = 50, a.w = 500, a.h = 330;
  a.xmin = static_cast<double>(m.layers.front()) - 0.3;
  a.xmax = static_cast<double>(m.layers.back()) + 0.3;
  double top = std::isfinite(m.uniform_entropy) ? m.uniform_entropy : 0;
  for (size_t s = 0; s < m.sources.size(); ++s)
    for (size_t l = 0; l < m.layers.size(); ++l)
      if (std::isfinite(m.mean(s, l).entropy)) top = std::max(top, m.mean(s, l).entropy);
  double low = top;
  for (size_t s = 0; s < m.sources.size(); ++s)
    for (size_t l = 0; l < m.layers.size(); ++l)
      if (std::isfinite(m.mean(s, l).entropy)) low = std::min(low, m.mean(s, l).entropy);
  const double span = std::max(top - low, 0.05);  // zoom on the curves: their differences are tenths of a nat
  a.ymin = std::max(0.0, low - 0.25 * span);
  a.ymax = top + 0.12 * span;
  auto fig = figure(out, "entropy", W, H, [&](cairo_t* cr) {
    fit_text(cr, a.x, 24, "Mean attention entropy per layer (lower = spikier)", 17, W - a.x - 8, Align::Start, 0, true);
    draw_axes(cr, a, "layer", "entropy (nats)", static_cast<int>(std::min<size_t>(m.layers.size(), 8)), 6, 13, true);
    std::vector<std::pair<std::string, Rgb>> legend;
    std::vector<bool> dashed;
    cairo_save(cr);
    cairo_rectangle(cr, a.x, a.y, a.w, a.h);
    cairo_clip(cr);
    if (std::isfinite(m.uniform_entropy)) {
      set_colour(cr, {0.55, 0.55, 0.55});
      cairo_set_line_width(cr, 1.5);
      const double d[] = {6, 4};
      cairo_set_dash(cr, d, 2, 0);
      cairo_move_to(cr, a.x, a.py(m.uniform_entropy));
      cairo_line_to(cr, a.x + a.w, a.py(m.uniform_entropy));
      cairo_stroke(cr);
      cairo_set_dash(cr, nullptr, 0, 0);
    }
    for (size_t s = 0; s < m.sources.size(); ++s) {
      const Rgb c = series_colour(s);
      set_colour(cr, c);
      cairo_set_line_width(cr, s == 0 ? 3 : 2.2);
      bool pen = false;
      for (size_t l = 0; l < m.layers.size(); ++l) {
        const double v = m.mean(s, l).entropy;
        if (!std::isfinite(v)) {
          pen = false;
          continue;
        }
        const double x = a.px(static_cast<double>(m.layers[l])), y = a.py(v);
        if (pen) cairo_line_to(cr, x, y);
        else cairo_move_to(cr, x, y);
        pen = true;
      }
      cairo_stroke(cr);
      for (size_t l = 0; l < m.layers.size(); ++l) {
        const double v = m.mean(s, l).entropy;
        if (!std::isfinite(v)) continue;
        cairo_arc(cr, a.px(static_cast<double>(m.layers[l])), a.py(v), 4, 0, 2 * M_PI);
        cairo_fill(cr);
      }
    }
    cairo_restore(cr);
    for (size_t s = 0; s < m.sources.size(); ++s) legend.emplace_back(m.sources[s], series_colour(s)), dashed.push_back(false);
    if (std::isfinite(m.uniform_entropy)) legend.emplace_back("uniform weights", Rgb{0.55, 0.55, 0.55}), dashed.push_back(true);
    draw_legend(cr, a.x + a.w + 24, a.y + 12, legend, 13, dashed);
  });
  fig.title = "Entropy per layer";
  fig.caption =
      "Mean entropy of the attention rows (nats) per layer, averaged over heads, samples and queries. Softmax (black) is the "
      "teacher; its low entropy is the \"spikiness\" linear attention must reproduce. A curve near the dashed line (the entropy of "
      "uniform weights over the visible keys) means the map spreads its weight almost evenly: it attends to nothing in particular.";
  return fig;
}

Figure write_monotonicity(const std::string& out, const Metrics& m, const PlotData& pd, const std::vector<int64_t>& layers,
                          int64_t draw_head, int64_t sample) {
  const int cols = static_cast<int>(m.sources.size()), rows = static_cast<int>(layers.size());
  const double pw = 220, ph = 160, gap_x = 62, gap_y = 78, left = 118, top = 84;
  const int W = static_cast<int>(left + cols * (pw + gap_x) + 10), H = static_cast<int>(top + rows * (ph + gap_y) + 4);
  const auto hi = static_cast<size_t>(draw_head);
  auto fig = figure(out, "monotonicity", W, H, [&](cairo_t* cr) {
    fit_text(cr, 20, 24, "Monotonicity: attention weight against q·k, head " + std::to_string(m.heads[hi]) + ", sample " +
                             std::to_string(sample), 17, W - 28, Align::Start, 0, true);
    for (int r = 0; r < rows; ++r) {
      const int64_t layer = layers[static_cast<size_t>(r)];
      const size_t li = layer_index(m, layer);
      // the x range: q·k are the teacher's for every source; clip the lowest 1% of the points
      double xlo = -1;
      auto t = pd.mono.find({layer, size_t{0}});
      if (t != pd.mono.end() && !t->second.x.empty()) {
        std::vector<double> xs = t->second.x;
        const size_t q = xs.size() / 100;
        std::nth_element(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(q), xs.end());
        xlo = std::min(-1e-3, xs[q]);
      }
      const double y0 = top + r * (ph + gap_y);
      text(cr, 22, y0 + ph / 2, "layer " + std::to_string(layer), 15, Align::Middle, -90, true);
      for (int c = 0; c < cols; ++c) {
        const size_t s = static_cast<size_t>(c);
        Axes a;
        a.x = left + c * (pw + gap_x), a.y = y0, a.w = pw, a.h = ph;
        a.xmin = xlo, a.xmax = 0, a.ymin = 0, a.ymax = 1.05;
        const auto& hv = m.values[s][li][hi];
        fit_text(cr, a.x + pw / 2, y0 - 14, m.sources[s] + "   Spearman " + f(hv.spearman, 2), 13, pw + gap_x - 6, Align::Middle, 0, true);
        draw_axes(cr, a, "q·k·scale − row max", c == 0 ? "weight / row max" : "", 4, 4, 11);
        auto it = pd.mono.find({layer, s});
        if (it == pd.mono.end()) continue;
        const auto& pts = it->second;
        const Rgb col = series_colour(s);
        cairo_save(cr);
        cairo_rectangle(cr, a.x, a.y, a.w, a.h);
        cairo_clip(cr);
        // dots: at most 1500, in batches of 100 per path (SVG stays small; overlaps still darken)
        const size_t stride = std::max<size_t>(1, pts.x.size() / 1500);
        set_colour(cr, col, 0.22);
        size_t in_path = 0;
        for (size_t i = 0; i < pts.x.size(); i += stride) {
          cairo_rectangle(cr, a.px(pts.x[i]) - 1.2, a.py(pts.y[i]) - 1.2, 2.4, 2.4);
          if (++in_path == 100) cairo_fill(cr), in_path = 0;
        }
        cairo_fill(cr);
        // the binned mean
        const int bins = 24;
        std::vector<double> sum(bins), cnt(bins);
        for (size_t i = 0; i < pts.x.size(); ++i) {
          if (pts.x[i] < xlo) continue;
          const int b = std::min(bins - 1, static_cast<int>((pts.x[i] - xlo) / -xlo * bins));
          sum[static_cast<size_t>(b)] += pts.y[i];
          cnt[static_cast<size_t>(b)] += 1;
        }
        set_colour(cr, s == 0 ? Rgb{0.85, 0.1, 0.1} : Rgb{0, 0, 0});
        cairo_set_line_width(cr, 2.2);
        bool pen = false;
        for (int b = 0; b < bins; ++b) {
          if (cnt[static_cast<size_t>(b)] < 3) continue;
          const double x = a.px(xlo + (b + 0.5) * -xlo / bins), y = a.py(sum[static_cast<size_t>(b)] / cnt[static_cast<size_t>(b)]);
          if (pen) cairo_line_to(cr, x, y);
          else cairo_move_to(cr, x, y);
          pen = true;
        }
        cairo_stroke(cr);
        cairo_restore(cr);
      }
    }
  });
  fig.title = "Monotonicity";
  fig.caption =
      "Every (query, key) pair of one head on sample " + std::to_string(sample) + ": x = the teacher's score q·k·scale minus the " +
      "query row's largest score, y = the source's weight divided by the row's largest weight (dots; the line is their mean in " +
      "bins). Softmax gives exactly y = exp(x): a larger score always means more weight. A monotone student keeps the curve " +
      "rising to the right with little spread; a flat or scattered cloud means the weights ignore q·k. The title gives the " +
      "Spearman rank correlation of scores and weights along each row (1 = perfectly monotone), averaged over all reported samples.";
  return fig;
}

namespace {

// A layer × head grid of one metric per source, side by side, one colour scale for all.
struct GridSpec {
  std::string file, heading, colour_label, summary_label;
  double HeadValues::*value;
  size_t first_source;  // 0: the teacher too, 1: the students only
  double vmax;          // > 0: a fixed top of the scale (scores in [0, 1]); 0: the largest value
};

Figure write_grid(const std::string& out, const Metrics& m, const GridSpec& g) {
  const int panels = static_cast<int>(m.sources.size() - g.first_source);
  const int nh = static_cast<int>(m.heads.size()), nl = static_cast<int>(m.layers.size());
  const double cell = std::clamp(320.0 / nh, 26.0, 46.0), cellh = std::clamp(260.0 / nl, 24.0, 40.0);
  const double pw = cell * nh, ph = cellh * nl, gap = 40, left = 76, top = 82, right = 120;
  const int W = static_cast<int>(left + panels * (pw + gap) + right), H = static_cast<int>(top + ph + 62);
  double vmax = g.vmax;
  if (vmax <= 0) {
    for (size_t s = g.first_source; s < m.sources.size(); ++s)
      for (const auto& l : m.values[s])
        for (size_t h = 0; h < m.heads.size(); ++h)
          if (std::isfinite(l[h].*g.value)) vmax = std::max(vmax, l[h].*g.value);
    if (vmax <= 0) vmax = 1;
  }
  return figure(out, g.file, W, H, [&](cairo_t* cr) {
    fit_text(cr, 20, 24, g.heading, 17, W - 28, Align::Start, 0, true);
    for (int p = 0; p < panels; ++p) {
      const size_t s = g.first_source + static_cast<size_t>(p);
      const double x0 = left + p * (pw + gap);
      double mean = 0, n = 0;
      for (size_t l = 0; l < m.layers.size(); ++l)
        if (std::isfinite(m.mean(s, l).*g.value)) mean += m.mean(s, l).*g.value, n += 1;
      fit_text(cr, x0 + pw / 2, top - 30, m.sources[s], 14, pw + gap - 6, Align::Middle, 0, true);
      text(cr, x0 + pw / 2, top - 12, g.summary_label + " " + f(n > 0 ? mean / n : NAN, 3), 12, Align::Middle);
      std::vector<double> v;
      for (int l = 0; l < nl; ++l)
        for (int h = 0; h < nh; ++h) v.push_back(m.values[s][static_cast<size_t>(l)][static_cast<size_t>(h)].*g.value);
      draw_matrix(cr, x0, top, pw, ph, v, nl, nh, heat, 0, vmax);
      for (int l = 0; l < nl; ++l)
        for (int h = 0; h < nh; ++h) {
          const double x = v[static_cast<size_t>(l * nh + h)];
          set_colour(cr, std::isfinite(x) && x / vmax > 0.55 ? Rgb{1, 1, 1} : Rgb{0.1, 0.1, 0.1});
          if (cell >= 34) text(cr, x0 + (h + 0.5) * cell, top + (l + 0.5) * cellh, f(x, x < 0.995 ? 2 : 1), 10, Align::Middle);
        }
      set_colour(cr, {0.3, 0.3, 0.3});
      cairo_set_line_width(cr, 1);
      cairo_rectangle(cr, x0, top, pw, ph);
      cairo_stroke(cr);
      set_colour(cr, {0.1, 0.1, 0.1});
      for (int h = 0; h < nh; ++h)
        if (nh <= 16 || h % 2 == 0) text(cr, x0 + (h + 0.5) * cell, top + ph + 12, std::to_string(m.heads[static_cast<size_t>(h)]), 11, Align::Middle);
      text(cr, x0 + pw / 2, top + ph + 34, "head", 13, Align::Middle);
      if (p == 0) {
        for (int l = 0; l < nl; ++l) text(cr, x0 - 8, top + (l + 0.5) * cellh, std::to_string(m.layers[static_cast<size_t>(l)]), 11, Align::End);
        text(cr, x0 - 40, top + ph / 2, "layer", 13, Align::Middle, -90);
      }
    }
    draw_colour_bar(cr, left + panels * (pw + gap) - gap + 24, top, 18, std::max(ph, 120.0), heat, 0, vmax, g.colour_label, 12);
  });
}

}  // namespace

Figure write_kl_grid(const std::string& out, const Metrics& m) {
  auto fig = write_grid(out, m, {"kl_grid", "KL(softmax || student) per layer and head (lower = closer to softmax)", "KL (nats)", "mean KL",
                                 &HeadValues::kl, 1, 0});
  fig.title = "KL per layer and head";
  fig.caption =
      "KL(softmax || student) of every layer (rows) and head (columns), averaged over the reported samples and queries; one grid "
      "per student, one colour scale for all (pale = close to softmax, dark red = far). It shows where a conversion loses the "
      "teacher's attention: a dark row is a hard layer, a dark cell a head the map cannot follow.";
  return fig;
}

Figure write_induction_grid(const std::string& out, const Metrics& m) {
  auto fig = write_grid(out, m, {"induction_grid", "Induction score per layer and head (weight on the token after an earlier occurrence)",
                                 "induction score", "mean", &HeadValues::induction, 0, 1.0});
  fig.title = "Induction heads";
  fig.caption =
      "Induction score of every layer (rows) and head (columns): the weight a query puts on the position right after an earlier "
      "occurrence of its own token, averaged over the queries that have one (docs/report.md). Dark cells in the teacher's grid "
      "are its induction heads, what in-context copying runs on; a student that keeps them shows the same cells dark. Meaningful "
      "on a record of repeated segments (record --repeat); on plain text only the tokens that happen to recur count.";
  return fig;
}

}  // namespace mimic::report
