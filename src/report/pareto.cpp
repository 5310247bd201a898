#include "mimic/report/pareto.h"

#include <cairo.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "mimic/core/error.h"
#include "mimic/core/json_keys.h"
#include "mimic/io/atomic_file.h"
#include "mimic/report/plot.h"

namespace mimic::report {

namespace {

struct Point {
  double x = 0, y = 0;
  std::string label;
};
struct Series {
  std::string name;
  std::vector<Point> points;
};

}  // namespace

std::vector<std::string> write_pareto(const std::string& table_path, const std::string& out_dir) {
  const auto j = json_parse(io::read_text_file(table_path), table_path);
  const std::string where = table_path;
  const bool log_x = json_bool_or(j, "x_log", where, false);
  std::vector<Series> series;
  const auto& js = json_key(j, "series", where);
  MIMIC_CHECK(js.is_array() && !js.empty(), where, ": \"series\" must be a non-empty array");
  double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin, ymin = xmin, ymax = -xmin;
  for (size_t i = 0; i < js.size(); ++i) {
    const std::string at = where + ": series[" + std::to_string(i) + "]";
    Series s;
    s.name = json_string(js[i], "name", at);
    const auto& pts = json_key(js[i], "points", at);
    MIMIC_CHECK(pts.is_array() && !pts.empty(), at, ": \"points\" must be a non-empty array");
    for (size_t k = 0; k < pts.size(); ++k) {
      const std::string pat = at + ".points[" + std::to_string(k) + "]";
      Point p{json_double(pts[k], "x", pat), json_double(pts[k], "y", pat), json_string_or(pts[k], "label", pat, "")};
      MIMIC_CHECK(std::isfinite(p.x) && std::isfinite(p.y), pat, ": x and y must be finite");
      MIMIC_CHECK(!log_x || p.x > 0, pat, ": x must be > 0 on a log axis (x_log)");
      if (log_x) p.x = std::log10(p.x);
      xmin = std::min(xmin, p.x), xmax = std::max(xmax, p.x), ymin = std::min(ymin, p.y), ymax = std::max(ymax, p.y);
      s.points.push_back(p);
    }
    std::stable_sort(s.points.begin(), s.points.end(), [](const Point& a, const Point& b) { return a.x < b.x; });
    series.push_back(std::move(s));
  }
  double ref = std::numeric_limits<double>::quiet_NaN();
  std::string ref_label;
  if (j.contains("reference")) {
    ref = json_double(j["reference"], "y", where + ": reference");
    ref_label = json_string_or(j["reference"], "label", where + ": reference", "");
    MIMIC_CHECK(std::isfinite(ref), where, ": reference.y must be finite");
    ymin = std::min(ymin, ref), ymax = std::max(ymax, ref);
  }
  const double xspan = std::max(xmax - xmin, log_x ? 0.3 : 1e-9), yspan = std::max(ymax - ymin, 1e-9);
  Axes a;
  a.x = 90, a.y = 56, a.w = 560, a.h = 380;
  a.xmin = xmin - 0.06 * xspan, a.xmax = xmax + 0.06 * xspan;
  a.ymin = ymin - 0.08 * yspan, a.ymax = ymax + 0.1 * yspan;
  const std::string title = json_string_or(j, "title", where, ""), xl = json_string_or(j, "x_label", where, "x"),
                    yl = json_string_or(j, "y_label", where, "y");
  std::filesystem::create_directories(out_dir);
  return save_figure((std::filesystem::path(out_dir) / "pareto").string(), 940, 500, [&](cairo_t* cr) {
    fit_text(cr, a.x, 26, title, 16, 940 - a.x - 8, Align::Start, 0, true);
    if (log_x) {
      // a log axis: the frame and y ticks from draw_axes with no x ticks, then decades (and 2, 5 between) by hand
      draw_axes(cr, a, xl, yl, 0, 6, 13);
      set_colour(cr, {0.3, 0.3, 0.3});
      // a range under two decades gets every multiple (1 … 9 × 10^e) ticked, a wider one 1, 2 and 5; labels go to the
      // decades first, then 2 and 5, then the rest, each only where it does not touch one placed before (900 and
      // 1000 kB sit 7 px apart on a two-decade axis)
      const std::vector<double> steps = a.xmax - a.xmin < 2 ? std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9} : std::vector<double>{1, 2, 5};
      auto rank = [](double m) { return m == 1 ? 0 : m == 2 || m == 5 ? 1 : 2; };
      std::vector<std::pair<double, double>> placed;  // labels' [left, right] in pixels
      for (int pass = 0; pass < 3; ++pass)
        for (int e = static_cast<int>(std::floor(a.xmin)); e <= static_cast<int>(std::ceil(a.xmax)); ++e)
          for (double m : steps) {
            const double v = e + std::log10(m);
            if (v < a.xmin || v > a.xmax || rank(m) != pass) continue;
            const double px = a.px(v);
            cairo_move_to(cr, px, a.y + a.h);
            cairo_line_to(cr, px, a.y + a.h + 5);
            cairo_stroke(cr);
            const double value = m * std::pow(10.0, e);
            char buf[32];
            std::snprintf(buf, sizeof buf, value >= 1 ? "%.0f" : "%g", value);
            const double half = text_width(cr, buf, 12) / 2 + 3;
            bool clear = true;
            for (const auto& [l, r] : placed) clear = clear && (px + half < l || px - half > r);
            if (!clear) continue;
            placed.emplace_back(px - half, px + half);
            text(cr, px, a.y + a.h + 16, buf, 12, Align::Middle);
          }
    } else {
      draw_axes(cr, a, xl, yl, 6, 6, 13);
    }
    cairo_save(cr);
    cairo_rectangle(cr, a.x, a.y, a.w, a.h);
    cairo_clip(cr);
    if (std::isfinite(ref)) {
      set_colour(cr, {0.2, 0.2, 0.2});
      cairo_set_line_width(cr, 1.5);
      const double d[] = {6, 4};
      cairo_set_dash(cr, d, 2, 0);
      cairo_move_to(cr, a.x, a.py(ref));
      cairo_line_to(cr, a.x + a.w, a.py(ref));
      cairo_stroke(cr);
      cairo_set_dash(cr, nullptr, 0, 0);
      if (!ref_label.empty()) text(cr, a.x + 6, a.py(ref) - 9, ref_label, 11);
    }
    for (size_t i = 0; i < series.size(); ++i) {
      const Rgb c = series_colour(i + 1);  // 0 (black) is the reference's
      set_colour(cr, c);
      cairo_set_line_width(cr, 2.2);
      for (size_t k = 0; k < series[i].points.size(); ++k) {
        const auto& p = series[i].points[k];
        if (k == 0) cairo_move_to(cr, a.px(p.x), a.py(p.y));
        else cairo_line_to(cr, a.px(p.x), a.py(p.y));
      }
      cairo_stroke(cr);
      for (const auto& p : series[i].points) {
        cairo_arc(cr, a.px(p.x), a.py(p.y), 4, 0, 2 * M_PI);
        cairo_fill(cr);
        if (p.label.empty()) continue;
        // a label that would run past the frame's right edge goes to the point's left
        const bool left = a.px(p.x) + 6 + text_width(cr, p.label, 10) > a.x + a.w;
        text(cr, a.px(p.x) + (left ? -6 : 6), a.py(p.y) - 9, p.label, 10, left ? Align::End : Align::Start);
      }
    }
    cairo_restore(cr);
    std::vector<std::pair<std::string, Rgb>> legend;
    for (size_t i = 0; i < series.size(); ++i) legend.emplace_back(series[i].name, series_colour(i + 1));
    draw_legend(cr, a.x + a.w + 20, a.y + 10, legend, 12);
  });
}

}  // namespace mimic::report
