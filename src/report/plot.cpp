#include "mimic/report/plot.h"

#include <cairo-svg.h>
#include <cairo.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <memory>
#include <ostream>

#include "mimic/core/error.h"
#include "mimic/io/atomic_file.h"

namespace mimic::report {

static Rgb interpolate(const unsigned char (*stops)[3], int n, double t) {
  if (std::isnan(t)) return {0.85, 0.85, 0.85};
  t = std::clamp(t, 0.0, 1.0) * (n - 1);
  const int i = std::min(static_cast<int>(t), n - 2);
  const double f = t - i;
  auto mix = [&](int c) { return ((1 - f) * stops[i][c] + f * stops[i + 1][c]) / 255.0; };
  return {mix(0), mix(1), mix(2)};
}

Rgb viridis(double t) {
  static const unsigned char stops[][3] = {{68, 1, 84},    {72, 40, 120},  {62, 73, 137},  {49, 104, 142}, {38, 130, 142},
                                           {31, 158, 137}, {53, 183, 121}, {110, 206, 88}, {253, 231, 37}};
  return interpolate(stops, 9, t);
}

Rgb heat(double t) {
  static const unsigned char stops[][3] = {{255, 255, 204}, {255, 237, 160}, {254, 217, 118}, {254, 178, 76}, {253, 141, 60},
                                           {252, 78, 42},   {227, 26, 28},   {189, 0, 38},    {128, 0, 38}};
  return interpolate(stops, 9, t);
}

Rgb series_colour(size_t i) {
  static const Rgb colours[] = {{0, 0, 0},          {0.12, 0.47, 0.71}, {0.84, 0.15, 0.16}, {0.17, 0.63, 0.17},
                                {1.0, 0.50, 0.05},  {0.58, 0.40, 0.74}, {0.55, 0.34, 0.29}, {0.89, 0.47, 0.76}};
  return colours[i % (sizeof colours / sizeof colours[0])];
}

void set_colour(cairo_t* cr, const Rgb& c, double alpha) { cairo_set_source_rgba(cr, c.r, c.g, c.b, alpha); }

static void check(cairo_status_t st, const std::string& what) {
  MIMIC_CHECK(st == CAIRO_STATUS_SUCCESS, what, ": ", cairo_status_to_string(st));
}

namespace {
// cairo writes its PNG and SVG bytes through this callback into the temporary of io::write_file_atomically;
// a failed write keeps errno, so that the error names the system's cause (cairo says only "error while writing
// to output stream": a full disk, the fifth probe's F16).
struct Sink {
  std::ostream& os;
  int err = 0;
  bool failed = false;
};
cairo_status_t to_stream(void* closure, const unsigned char* data, unsigned int length) {
  auto& sink = *static_cast<Sink*>(closure);
  errno = 0;
  sink.os.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(length));
  if (sink.os.good()) return CAIRO_STATUS_SUCCESS;
  if (!sink.failed) sink.err = errno;
  sink.failed = true;
  return CAIRO_STATUS_WRITE_ERROR;
}
void check_written(cairo_status_t st, const Sink& sink, const std::string& file) {
  if (sink.failed) io::fail_writing(file, sink.err);
  check(st, "writing " + file);
}
using Surface = std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)>;
}  // namespace

std::vector<std::string> save_figure(const std::string& stem, int width, int height, const std::function<void(cairo_t*)>& draw) {
  auto paint = [&](cairo_surface_t* s, const std::string& file) {
    check(cairo_surface_status(s), file);
    cairo_t* cr = cairo_create(s);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);  // text and lines: near-black unless a drawing says otherwise
    draw(cr);
    const auto st = cairo_status(cr);
    cairo_destroy(cr);
    check(st, "drawing " + file);
  };
  const std::string png = stem + ".png", svg = stem + ".svg";
  io::write_file_atomically(png, [&](std::ostream& os) {
    Surface img(cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height), cairo_surface_destroy);
    paint(img.get(), png);
    Sink sink{os};
    check_written(cairo_surface_write_to_png_stream(img.get(), to_stream, &sink), sink, png);
  });
  io::write_file_atomically(svg, [&](std::ostream& os) {
    Sink sink{os};
    Surface vec(cairo_svg_surface_create_for_stream(to_stream, &sink, width, height), cairo_surface_destroy);
    paint(vec.get(), svg);
    cairo_surface_finish(vec.get());
    check_written(cairo_surface_status(vec.get()), sink, svg);
  });
  return {png, svg};
}

static void font(cairo_t* cr, double size, bool bold) {
  cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
}

double text_width(cairo_t* cr, const std::string& s, double size, bool bold) {
  font(cr, size, bold);
  cairo_text_extents_t e;
  cairo_text_extents(cr, s.c_str(), &e);
  return e.x_advance;
}

void text(cairo_t* cr, double x, double y, const std::string& s, double size, Align align, double angle, bool bold) {
  font(cr, size, bold);
  cairo_text_extents_t e;
  cairo_text_extents(cr, s.c_str(), &e);
  cairo_font_extents_t fe;
  cairo_font_extents(cr, &fe);
  double dx = 0;
  if (align == Align::Middle) dx = -e.x_advance / 2;
  if (align == Align::End) dx = -e.x_advance;
  cairo_save(cr);
  cairo_translate(cr, x, y);
  cairo_rotate(cr, angle * M_PI / 180);
  cairo_move_to(cr, dx, (fe.ascent - fe.descent) / 2);
  cairo_show_text(cr, s.c_str());
  cairo_restore(cr);
}

std::pair<std::string, double> fitted(cairo_t* cr, const std::string& s, double size, double max_width, bool bold) {
  const double w = text_width(cr, s, size, bold);
  if (w <= max_width) return {s, size};
  const double smallest = 0.6 * size;
  const double shrunk = std::max(smallest, size * max_width / w * 0.98);
  if (text_width(cr, s, shrunk, bold) <= max_width) return {s, shrunk};
  // drop characters from the middle: byte offsets at UTF-8 character starts
  std::vector<size_t> starts;
  for (size_t i = 0; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) starts.push_back(i);
  const std::string dots = "\u2026";
  for (size_t keep = starts.size(); keep-- > 1;) {
    const size_t head = (keep + 1) / 2, tail = keep - head;
    const std::string t = s.substr(0, head < starts.size() ? starts[head] : s.size()) + dots +
                          (tail > 0 ? s.substr(starts[starts.size() - tail]) : std::string());
    if (text_width(cr, t, smallest, bold) <= max_width) return {t, smallest};
  }
  return {dots, smallest};
}

void fit_text(cairo_t* cr, double x, double y, const std::string& s, double size, double max_width, Align align, double angle, bool bold) {
  const auto [t, sz] = fitted(cr, s, size, max_width, bold);
  text(cr, x, y, t, sz, align, angle, bold);
}

std::vector<double> nice_ticks(double lo, double hi, int n) {
  // n <= 0 asks for none: a log axis draws its own ticks (pareto.cpp), and one "nice" tick over the whole span
  // would put a stray linear label (the exponent, e.g. "3") beside them
  if (n <= 0) return {};
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / std::max(1, n);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> t;
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) t.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  return t;
}

std::string tick_label(double v, double step) {
  int digits = std::max(0, static_cast<int>(std::ceil(-std::log10(std::abs(step)) - 1e-9)));
  const double scaled = step * std::pow(10, digits);
  if (std::abs(scaled - std::round(scaled)) > 1e-6) ++digits;  // 2.5 × 10^k steps need one more digit
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", std::min(digits, 6), v);
  return buf;
}

void draw_axes(cairo_t* cr, const Axes& a, const std::string& xlabel, const std::string& ylabel, int xticks, int yticks,
               double fsize, bool integer_x) {
  cairo_set_line_width(cr, 1);
  auto xt = nice_ticks(a.xmin, a.xmax, xticks), yt = nice_ticks(a.ymin, a.ymax, yticks);
  if (integer_x) xt.erase(std::remove_if(xt.begin(), xt.end(), [](double v) { return v != std::round(v); }), xt.end());
  const double xstep = integer_x ? 1 : xt.size() > 1 ? xt[1] - xt[0] : 1, ystep = yt.size() > 1 ? yt[1] - yt[0] : 1;
  for (double v : xt) {
    set_colour(cr, {0.9, 0.9, 0.9});
    cairo_move_to(cr, a.px(v), a.y);
    cairo_line_to(cr, a.px(v), a.y + a.h);
    cairo_stroke(cr);
    set_colour(cr, {0.2, 0.2, 0.2});
    cairo_move_to(cr, a.px(v), a.y + a.h);
    cairo_line_to(cr, a.px(v), a.y + a.h + 4);
    cairo_stroke(cr);
    text(cr, a.px(v), a.y + a.h + 6 + fsize * 0.6, tick_label(v, xstep), fsize * 0.9, Align::Middle);
  }
  double widest = 0;
  for (double v : yt) {
    set_colour(cr, {0.9, 0.9, 0.9});
    cairo_move_to(cr, a.x, a.py(v));
    cairo_line_to(cr, a.x + a.w, a.py(v));
    cairo_stroke(cr);
    set_colour(cr, {0.2, 0.2, 0.2});
    cairo_move_to(cr, a.x - 4, a.py(v));
    cairo_line_to(cr, a.x, a.py(v));
    cairo_stroke(cr);
    const auto label = tick_label(v, ystep);
    widest = std::max(widest, text_width(cr, label, fsize * 0.9));
    text(cr, a.x - 6, a.py(v), label, fsize * 0.9, Align::End);
  }
  set_colour(cr, {0.2, 0.2, 0.2});
  cairo_rectangle(cr, a.x, a.y, a.w, a.h);
  cairo_stroke(cr);
  if (!xlabel.empty()) text(cr, a.x + a.w / 2, a.y + a.h + 10 + fsize * 1.6, xlabel, fsize, Align::Middle);
  if (!ylabel.empty()) text(cr, a.x - 12 - widest - fsize * 0.6, a.y + a.h / 2, ylabel, fsize, Align::Middle, -90);
}

void draw_matrix(cairo_t* cr, double x, double y, double w, double h, const std::vector<double>& values, int64_t rows,
                 int64_t cols, Rgb (*cmap)(double), double lo, double hi) {
  MIMIC_CHECK(static_cast<int64_t>(values.size()) == rows * cols, "draw_matrix: ", values.size(), " values for ", rows, "x", cols);
  cairo_surface_t* img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, static_cast<int>(cols), static_cast<int>(rows));
  cairo_surface_flush(img);
  unsigned char* data = cairo_image_surface_get_data(img);
  const int stride = cairo_image_surface_get_stride(img);
  const double span = hi > lo ? hi - lo : 1;
  for (int64_t r = 0; r < rows; ++r) {
    auto* px = reinterpret_cast<uint32_t*>(data + r * stride);
    for (int64_t c = 0; c < cols; ++c) {
      const double v = values[static_cast<size_t>(r * cols + c)];
      const Rgb col = cmap(std::isnan(v) ? v : (v - lo) / span);
      auto byte = [](double u) { return static_cast<uint32_t>(std::lround(std::clamp(u, 0.0, 1.0) * 255)); };
      px[c] = (byte(col.r) << 16) | (byte(col.g) << 8) | byte(col.b);
    }
  }
  cairo_surface_mark_dirty(img);
  cairo_save(cr);
  cairo_rectangle(cr, x, y, w, h);
  cairo_clip(cr);
  cairo_translate(cr, x, y);
  cairo_scale(cr, w / static_cast<double>(cols), h / static_cast<double>(rows));
  cairo_set_source_surface(cr, img, 0, 0);
  cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
  cairo_paint(cr);
  cairo_restore(cr);
  cairo_surface_destroy(img);
}

void draw_colour_bar(cairo_t* cr, double x, double y, double w, double h, Rgb (*cmap)(double), double lo, double hi,
                     const std::string& label, double fsize, const std::vector<std::string>& tick_labels,
                     const std::vector<double>& tick_values) {
  const int steps = 128;
  std::vector<double> v(steps);
  for (int i = 0; i < steps; ++i) v[static_cast<size_t>(i)] = hi - (hi - lo) * (i + 0.5) / steps;
  draw_matrix(cr, x, y, w, h, v, steps, 1, cmap, lo, hi);
  set_colour(cr, {0.2, 0.2, 0.2});
  cairo_set_line_width(cr, 1);
  cairo_rectangle(cr, x, y, w, h);
  cairo_stroke(cr);
  std::vector<double> ticks = tick_values;
  std::vector<std::string> labels = tick_labels;
  if (ticks.empty()) {
    ticks = nice_ticks(lo, hi, 5);
    const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : 1;
    for (double t : ticks) labels.push_back(tick_label(t, step));
  }
  double widest = 0;
  for (size_t i = 0; i < ticks.size(); ++i) {
    const double py = y + h - (ticks[i] - lo) / (hi - lo) * h;
    cairo_move_to(cr, x + w, py);
    cairo_line_to(cr, x + w + 4, py);
    cairo_stroke(cr);
    text(cr, x + w + 7, py, labels[i], fsize * 0.9);
    widest = std::max(widest, text_width(cr, labels[i], fsize * 0.9));
  }
  if (!label.empty()) text(cr, x + w + 14 + widest + fsize * 0.5, y + h / 2, label, fsize, Align::Middle, 90);
}

void draw_legend(cairo_t* cr, double x, double y, const std::vector<std::pair<std::string, Rgb>>& entries, double fsize,
                 const std::vector<bool>& dashed) {
  for (size_t i = 0; i < entries.size(); ++i) {
    const double yy = y + static_cast<double>(i) * fsize * 1.5;
    set_colour(cr, entries[i].second);
    cairo_set_line_width(cr, 2.5);
    if (i < dashed.size() && dashed[i]) {
      const double d[] = {5, 3};
      cairo_set_dash(cr, d, 2, 0);
    }
    cairo_move_to(cr, x, yy);
    cairo_line_to(cr, x + 24, yy);
    cairo_stroke(cr);
    cairo_set_dash(cr, nullptr, 0, 0);
    set_colour(cr, {0.1, 0.1, 0.1});
    text(cr, x + 30, yy, entries[i].first, fsize);
  }
}

}  // namespace mimic::report
