// Small plotting helpers over cairo (PNG and SVG from one drawing): colour maps, text, axes with ticks,
// matrices drawn as images, colour bars. What `mimic report` draws its figures with.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

typedef struct _cairo cairo_t;  // as cairo.h declares it: keeps cairo out of this header

namespace mimic::report {

struct Rgb {
  double r = 0, g = 0, b = 0;
};

// Perceptually ordered colour maps, t in [0, 1] (clamped; NaN gives light grey).
Rgb viridis(double t);  // dark blue → green → yellow
Rgb heat(double t);     // pale yellow → orange → dark red
// Distinct line colours; 0 is black (the teacher).
Rgb series_colour(size_t i);

// Runs `draw` on a width × height canvas (white background) and writes STEM.png and STEM.svg. Returns the
// two file names, each written atomically. A cairo failure is a mimic::Error naming the file.
std::vector<std::string> save_figure(const std::string& stem, int width, int height, const std::function<void(cairo_t*)>& draw);

void set_colour(cairo_t* cr, const Rgb& c, double alpha = 1.0);

enum class Align { Start, Middle, End };
// Text (DejaVu Sans, toy API) anchored at (x, y): horizontal alignment, vertically centred on y;
// angle in degrees (−90 for a y-axis label).
void text(cairo_t* cr, double x, double y, const std::string& s, double size, Align align = Align::Start, double angle = 0,
          bool bold = false);
double text_width(cairo_t* cr, const std::string& s, double size, bool bold = false);
// `text` that fits within max_width: the size shrinks (to 60% of `size` at least), then the middle of the string
// gives way to "…" (whole UTF-8 characters) until it fits. Titles and panel labels go through it: a long source
// name or title must not run past its panel or the figure's edge.
void fit_text(cairo_t* cr, double x, double y, const std::string& s, double size, double max_width, Align align = Align::Start,
              double angle = 0, bool bold = false);
// The string and size fit_text draws (for tests).
std::pair<std::string, double> fitted(cairo_t* cr, const std::string& s, double size, double max_width, bool bold = false);

// About n "nice" tick values (1, 2, 5 × 10^k steps) covering [lo, hi]; none when n <= 0.
std::vector<double> nice_ticks(double lo, double hi, int n = 5);
std::string tick_label(double v, double step);

// A plotting area in pixels and the data range it maps.
struct Axes {
  double x = 0, y = 0, w = 0, h = 0;             // pixel box (y down)
  double xmin = 0, xmax = 1, ymin = 0, ymax = 1;  // data range
  double px(double v) const { return x + (v - xmin) / (xmax - xmin) * w; }
  double py(double v) const { return y + h - (v - ymin) / (ymax - ymin) * h; }
};
// Frame, grid lines, ticks with labels, axis labels.
// integer_x: only whole-number x ticks (layers).
void draw_axes(cairo_t* cr, const Axes& a, const std::string& xlabel, const std::string& ylabel, int xticks = 5, int yticks = 5,
               double font = 12, bool integer_x = false);

// A rows × cols matrix (row-major) drawn as an image in the pixel box, cell colours cmap((v − lo)/(hi − lo)).
void draw_matrix(cairo_t* cr, double x, double y, double w, double h, const std::vector<double>& values, int64_t rows,
                 int64_t cols, Rgb (*cmap)(double), double lo, double hi);
// A vertical colour bar with ticks and a label on its right.
void draw_colour_bar(cairo_t* cr, double x, double y, double w, double h, Rgb (*cmap)(double), double lo, double hi,
                     const std::string& label, double font = 12, const std::vector<std::string>& tick_labels = {},
                     const std::vector<double>& tick_values = {});

// Legend entries (coloured line + label) stacked from (x, y).
void draw_legend(cairo_t* cr, double x, double y, const std::vector<std::pair<std::string, Rgb>>& entries, double font = 12,
                 const std::vector<bool>& dashed = {});

}  // namespace mimic::report
