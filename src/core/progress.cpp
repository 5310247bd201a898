#include "mimic/core/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "mimic/core/error.h"

namespace mimic {

namespace {
// MIMIC_PROGRESS: 0, 1 | bar, lines | lines:SECONDS (a non-negative number); unset or empty: bar on a terminal,
// lines elsewhere. A value it does not know is an error: a typo silently meaning "none" would hide a run's progress.
struct Wanted {
  bool bar = false, lines = false;
  double every = 60;
};
Wanted progress_wanted() {
  const char* f = std::getenv("MIMIC_PROGRESS");
  const std::string v = f ? f : "";
  if (v.empty()) return isatty(STDERR_FILENO) == 1 ? Wanted{true, false} : Wanted{false, true};
  // named in the error, so it must not break the error's one line
  MIMIC_CHECK(std::all_of(v.begin(), v.end(), [](char c) { return std::isprint(static_cast<unsigned char>(c)) != 0; }),
              "MIMIC_PROGRESS: its value has a control character or a byte beyond ASCII; expected 0, 1, bar, lines or lines:SECONDS");
  if (v == "0") return {};
  if (v == "1" || v == "bar") return {true, false};
  if (v == "lines") return {false, true};
  if (v.rfind("lines:", 0) == 0) {
    const std::string n = v.substr(6);
    char* end = nullptr;
    // digits and a point only: strtod also took " 5", "-0", "0x10" and "nan"
    const bool plain = !n.empty() && std::isdigit(static_cast<unsigned char>(n[0])) && n.find_first_not_of("0123456789.") == std::string::npos;
    const double every = plain ? std::strtod(n.c_str(), &end) : -1;
    MIMIC_CHECK(every >= 0 && every <= 1e6 && end && *end == '\0', "MIMIC_PROGRESS=", v, ": lines:SECONDS takes a number of seconds, 0 to 10^6");
    return {false, true, every};
  }
  throw Error("MIMIC_PROGRESS=" + v + ": expected 0, 1, bar, lines or lines:SECONDS");
}
}  // namespace

std::string progress_setting_problem() {
  try {
    progress_wanted();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string format_duration(double s) {
  char buf[64];
  if (s < 60) {
    std::snprintf(buf, sizeof(buf), "%.1fs", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof(buf), "%dm %02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  } else {
    std::snprintf(buf, sizeof(buf), "%dh %02dm", static_cast<int>(s) / 3600, (static_cast<int>(s) / 60) % 60);
  }
  return buf;
}

Progress::Progress(std::string label, int64_t total, std::string unit)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total) {
  const auto w = progress_wanted();
  mode_ = w.bar ? Mode::Bar : w.lines ? Mode::Lines : Mode::Off;
  line_every_ = w.every;
  start_ = last_draw_ = std::chrono::steady_clock::now();
}

Progress::~Progress() { finish(); }

double Progress::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::update(int64_t done, const std::string& extra) {
  done_ = done;
  extra_ = extra;
  if (mode_ == Mode::Off) return;
  auto now = std::chrono::steady_clock::now();
  if (mode_ == Mode::Lines) {
    // the work's end is finish()'s line (with its time), not a line of its own before it
    if (std::chrono::duration<double>(now - last_draw_).count() < line_every_ || (total_ > 0 && done_ >= total_)) return;
  } else if (now - last_draw_ < std::chrono::milliseconds(100) && (total_ <= 0 || done_ < total_)) {
    return;
  }
  last_draw_ = now;
  draw(false);
}

void Progress::advance(int64_t n, const std::string& extra) { update(done_ + n, extra); }

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (mode_ == Mode::Bar || (mode_ == Mode::Lines && lines_written_)) draw(true);  // a log holds no line of short work
}

void Progress::draw(bool final) {
  double t = elapsed_seconds();
  double rate = t > 0 ? static_cast<double>(done_) / t : 0.0;
  std::string line = label_ + " ";
  char buf[160];
  if (total_ > 0) {
    const int width = 24;
    double frac = std::min(1.0, static_cast<double>(done_) / static_cast<double>(total_));
    int fill = static_cast<int>(frac * width);
    line += "[" + std::string(fill, '#') + std::string(width - fill, '.') + "] ";
    std::snprintf(buf, sizeof(buf), "%lld/%lld %s  %.1f %s/s", static_cast<long long>(done_),
                  static_cast<long long>(total_), unit_.c_str(), rate, unit_.c_str());
    line += buf;
    if (!final && rate > 0) line += "  ETA " + format_duration(static_cast<double>(total_ - done_) / rate);
  } else {
    std::snprintf(buf, sizeof(buf), "%lld %s  %.1f %s/s", static_cast<long long>(done_), unit_.c_str(), rate, unit_.c_str());
    line += buf;
  }
  if (final) line += "  in " + format_duration(t);
  if (!extra_.empty()) line += "  " + extra_;
  if (mode_ == Mode::Lines) {
    std::fprintf(stderr, "%s\n", line.c_str());  // a log's line: no carriage return, no terminal codes
    lines_written_ = true;
  } else {
    std::fprintf(stderr, "\r\033[2K%s%s", line.c_str(), final ? "\n" : "");
  }
  std::fflush(stderr);
}

}  // namespace mimic
